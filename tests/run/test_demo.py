"""``qualgate demo``: the embedded plan with the shipped models, end to end (a few questions)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.demo.plan import demo_plan
from qualgate.records import read_records


def test_the_embedded_plan_names_the_four_demo_modes():
    plan = demo_plan(questions=7, seeds=2)
    assert plan.suites[0].limit == 7 and plan.seeds == (0, 1)
    assert {n: c.mode for n, c in plan.configs.items()} == {
        "target": "target",
        "standard": "standard",
        "fly-w2": "fly",
        "fly-aggressive": "fly",
    }
    fly, aggressive = plan.configs["fly-w2"].speculative, plan.configs["fly-aggressive"].speculative
    assert (fly["fly_window_size"], fly["fly_entropy_threshold"], fly["fly_entropy_top_k"]) == (2, 0.3, 3)
    assert aggressive["fly_entropy_threshold"] == 0.0
    assert plan.baseline == "target" and plan.candidates == ("standard", "fly-w2", "fly-aggressive")


@pytest.mark.slow
def test_demo_runs_every_mode_and_prints_the_gate_and_speed_tables(tmp_path):
    pytest.importorskip("torch", reason="the demo runs on the reference engine (the reference extra)")
    out = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", "--questions", "6", "--seeds", "1", "--out", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "qualgate gate: non-inferiority" in r.stdout and "speed (tok/s: output tokens" in r.stdout
    flat = " ".join(r.stdout.split())  # (the phase-time line is wrapped at 100 columns)
    assert "demo finished in" in flat and "speed rounds" in flat  # each phase's time
    for name in ("standard", "fly-w2", "fly-aggressive"):
        assert any(line.startswith(name) for line in r.stdout.splitlines())
    target = read_records(out / "records" / "target.jsonl")
    assert len(target) == 6 and sum(x.outcome == "correct" for x in target) >= 1
    m = json.loads((out / "manifest.json").read_text())
    # two worker processes, each decoding its part of every batch
    assert m["status"] == "complete" and all(c["info"]["devices"] == ["cpu", "cpu"] for c in m["configs"].values())


@pytest.mark.slow
def test_demo_says_its_fail_is_the_expected_finding_and_that_it_succeeded(tmp_path):
    pytest.importorskip("torch", reason="the demo runs on the reference engine (the reference extra)")
    from qualgate.cli.demo import demo_outcome

    text = demo_outcome("FAIL")
    assert text.startswith("The demo succeeded (exit 0). Its verdict FAIL is the expected finding")
    r = CliRunner().invoke(cli, ["demo", "--questions", "4", "--out", str(tmp_path / "d"), "--quiet"])
    assert r.exit_code == 0, r.output
    verdict = json.loads((tmp_path / "d" / "gate.json").read_text())["verdict"]
    assert r.stdout.splitlines()[-1] == demo_outcome(verdict)
