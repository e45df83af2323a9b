"""Progress with stderr a pipe (a CI log): periodic lines during every step of a run, the speed
rounds and a sweep's pilot, each before the line that says the step ended."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli


@pytest.fixture
def fast_lines(monkeypatch):
    """A progress line every 20 ms, and a toy engine that takes 60 ms a batch."""
    monkeypatch.setenv("QUALGATE_PROGRESS_EVERY_S", "0.02")
    monkeypatch.setenv("QUALGATE_TOY_DELAY_S", "0.06")


def _progress_before(lines, label, total, end_marker, start=0):
    """Index of the line ``end_marker`` starts, after at least one progress line of ``label``
    with part of ``total`` done, all after ``start``."""
    pat = re.compile(rf"^{re.escape(label)}: (\d+)/{total} \(\d+%\), \d+ s$")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(end_marker))
    done = [int(m.group(1)) for line in lines[start:end] if (m := pat.match(line))]
    assert done and min(done) < total, (label, lines[start:end])
    return end


@pytest.mark.slow
def test_a_run_prints_progress_lines_during_each_config_and_the_speed_rounds(plan_factory, tmp_path, fast_lines):
    plan = plan_factory(questions=8, seeds=(0,), batch_size=2)
    r = CliRunner().invoke(
        cli, ["run", str(plan), "--out", str(tmp_path / "o"), "--speed-rounds", "2", "--speed-questions", "2"]
    )
    assert r.exit_code in (0, 1, 4), r.output
    lines = r.stderr.splitlines()
    at = 0
    for name in ("target", "standard", "fly"):
        at = _progress_before(lines, name, 8, f"{name}: 8 records in", at) + 1
    _progress_before(lines, "speed: 2 interleaved rounds", 12, "standard: speed-up", at)


@pytest.mark.slow
def test_a_sweeps_pilot_prints_progress_lines(plan_factory, tmp_path, fast_lines):
    plan = plan_factory(questions=12, seeds=(0,), configs=("target", "fly"), batch_size=2, gate="{margin: 0.3}")
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"base": "fly", "grid": {"fly_window_size": [2, 1]}}))
    args = ["sweep", str(plan), "--grid", str(grid), "--out", str(tmp_path / "s"), "--batch-questions", "4"]
    r = CliRunner().invoke(cli, [*args, "--order", "acceptance", "--pilot-questions", "4", "--speed-rounds", "1"])
    assert r.exit_code in (0, 1), r.output
    lines = r.stderr.splitlines()
    first = next(n for n in re.findall(r"^pilot (\S+):", r.stderr, re.M))
    _progress_before(lines, f"pilot {first}", 4, f"pilot {first}: mean acceptance length")


def test_line_progress_writes_while_a_step_makes_no_progress():
    import io

    from qualgate.cli.run import LineProgress

    out = io.StringIO()
    with LineProgress("decode", 10, file=out, every_s=0.01) as bar:
        bar.update(3)
        time.sleep(0.1)  # one long batch: the lines keep coming
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(re.fullmatch(r"decode: 3/10 \(30%\), \d+ s", line) for line in lines)


@pytest.mark.slow
def test_a_gate_and_checks_recomputation_report_their_stages(plan_factory, tmp_path, monkeypatch):
    """Long gates and ``check``'s recomputation: the library calls the progress hook at each
    stage, and the CLI prints the stage every few seconds while it runs."""
    from qualgate.ci._verify import verify
    from qualgate.evidence.gate_report import Evidence

    plan = plan_factory(questions=6, seeds=(0,))
    out = tmp_path / "o"
    assert CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--quiet"]).exit_code in (0, 1, 4)
    report = Evidence.from_dict(json.loads((out / "gate.json").read_text()))
    stages = []
    verified, _, reasons = verify(report, out / "gate.json", None, None, True, progress=stages.append)
    assert "records" in verified and not reasons
    assert stages[0] == "recomputing: reading the baseline's records"
    assert stages[1:] == [
        "recomputing: reading and pairing candidate 1 of 2",
        "recomputing: reading and pairing candidate 2 of 2",
        "recomputing the verdicts of 2 candidate(s)",
    ]
    monkeypatch.setenv("QUALGATE_PROGRESS_EVERY_S", "0.001")
    monkeypatch.setenv("QUALGATE_TOY_DELAY_S", "0")
    rec = out / "records"
    files = [str(rec / f"{name}.jsonl") for name in ("target", "standard", "fly")]
    r = CliRunner().invoke(cli, ["gate", *files, "--margin", "0.05"])
    lines = [x for x in r.stderr.splitlines() if x.startswith("qualgate gate: ")]
    assert lines and all(re.fullmatch(r"qualgate gate: (reading|testing).*, \d+ s", x) for x in lines), r.stderr
    assert r.stdout.startswith("qualgate gate: non-inferiority")  # (stdout holds only the report)
