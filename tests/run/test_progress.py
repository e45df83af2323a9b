"""Progress with stderr a pipe (a CI log): periodic lines during every step of a run, the speed
rounds and a sweep's pilot, each before the line that says the step ended."""

from __future__ import annotations

import re
import time

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli


@pytest.fixture
def fast_lines(monkeypatch):
    """A progress line every 20 ms, and a toy engine that takes 60 ms a batch."""
    import qualgate.cli.run as run_cli

    monkeypatch.setattr(run_cli, "PROGRESS_EVERY_S", 0.02)
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
