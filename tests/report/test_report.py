"""``qualgate report OUT``: text, JSON and markdown, side by side with the gate."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import read_records


@pytest.fixture(scope="module")
def out(tmp_path_factory, plan_writer):
    root = tmp_path_factory.mktemp("report")
    plan = plan_writer(root / "plan", questions=3, seeds=(0, 1))
    CliRunner().invoke(cli, ["run", str(plan), "--out", str(root / "out"), "--quiet"])
    return root / "out"


def report(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)])


def gate_exit(out) -> int:
    """The exit code ``qualgate report OUT`` must return: the run's gate's."""
    return json.loads((out / "manifest.json").read_text())["gate"]["exit_code"]


@pytest.mark.slow
def test_text_report_has_one_row_per_config_with_the_verdicts(out):
    r = report(out)
    assert r.exit_code == gate_exit(out) == 4  # 6 pairs: INCONCLUSIVE
    gate = json.loads((out / "gate.json").read_text())
    rows = {
        line.split()[0]: line
        for line in r.stdout.splitlines()
        if line.split()[:1] in (["target"], ["standard"], ["fly"])
    }
    assert set(rows) == {"target", "standard", "fly"}
    for c in gate["candidates"]:
        assert c["verdict"] in rows[c["name"]]
        assert f"{100 * c['loss_upper_bound']:.2f}" in rows[c["name"]]
    assert "acc tiny_arith" in r.stdout and "speed-up" in r.stdout


@pytest.mark.slow
def test_json_report_counts_match_the_records(out):
    r = report(out, "--format", "json")
    data = json.loads(r.stdout)
    configs = {c["name"]: c for c in data["configs"]}
    for name in ("target", "standard", "fly"):
        recs = read_records(out / "records" / f"{name}.jsonl")
        s = configs[name]["suites"]["tiny_arith"]
        assert s["n"] == len(recs)
        assert s["accuracy"] == sum(r.outcome == "correct" for r in recs) / len(recs)
        assert s["no_answer_rate"] == sum(r.outcome == "no_answer" for r in recs) / len(recs)
    fly = read_records(out / "records" / "fly.jsonl")
    assert configs["fly"]["acceptance_length"] == pytest.approx(
        1 + sum(r.accepted_tokens for r in fly) / sum(r.spec_steps for r in fly)
    )
    assert configs["target"]["acceptance_length"] is None
    assert configs["target"]["speedup"] == 1.0
    manifest = json.loads((out / "manifest.json").read_text())
    tps = {k: v["throughput"]["tokens_per_s"] for k, v in manifest["configs"].items()}
    assert configs["fly"]["speedup"] == pytest.approx(tps["fly"] / tps["target"])
    assert configs["fly"]["verdict"] == data["gate"]["verdicts"]["fly"]


@pytest.mark.slow
def test_markdown_report_is_written_and_appended_to_the_step_summary(out, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    md = tmp_path / "report.md"
    r = report(out, "--markdown", md)
    assert r.exit_code == gate_exit(out)
    text = md.read_text()
    assert text.startswith("### qualgate run") and "| config | mode |" in text
    assert "| fly |" in text and summary.read_text() == text + "\n"


@pytest.mark.slow
def test_report_of_an_incomplete_run_says_the_gate_is_not_evaluated(out, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    m = json.loads((copy / "manifest.json").read_text())
    m["status"] = "running"
    del m["gate"]
    (copy / "manifest.json").write_text(json.dumps(m))
    (copy / "gate.json").unlink()
    r = report(copy)
    # (no gate: never a PASS's exit 0)
    assert r.exit_code == 3 and "not evaluated yet" in r.stdout and "no gate yet" in r.stderr


def test_report_of_a_directory_without_manifest_is_a_data_error(tmp_path):
    r = report(tmp_path)
    assert r.exit_code == 3 and "manifest.json" in r.stderr
