"""`qualgate run --sequential`: rounds in seeded order, early stops, records a prefix of a full run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.demo.plan import demo_plan
from qualgate.records import read_records
from qualgate.run.runner import load_suites, work_items


def sequential_plan(tmp_path, *, questions=400, margin=0.05, engine="toy"):
    """The demo plan's target-only, coupled standard (lossless) and aggressive FLy configs, as
    written (``engine="reference"``: the demo's models) or on the toy engine."""
    plan = demo_plan(questions=questions, seeds=1)
    configs = {}
    for name, demo in (("target", "target"), ("standard", "standard"), ("fly-aggressive", "fly_aggressive")):
        configs[name] = Path(plan.configs[name].path)
        if engine != "reference":
            text = configs[name].read_text()
            assert "engine: reference\n" in text
            configs[name] = tmp_path / f"demo_{demo}.yaml"
            configs[name].write_text(text.replace("engine: reference\n", f"engine: {engine}\n"))
    doc = {
        "name": "seq",
        "suites": [{"suite": "demo_arithmetic", "limit": questions}],
        "seeds": [0],
        "configs": {name: str(path) for name, path in configs.items()},
        "baseline": "target",
        "gate": {"policy": "noninferiority", "margin": margin, "alpha": 0.05},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run(*args):
    return CliRunner().invoke(cli, ["run", *args, "--quiet"])


def stop_early(tmp_path, engine):
    """A sequential run of :func:`sequential_plan`: (its exit code, its candidates by name)."""
    plan, out = sequential_plan(tmp_path, engine=engine), tmp_path / "out"
    r = run(str(plan), "--out", str(out), "--sequential", "--batch-questions", "40", "--format", "json")
    gate = json.loads((out / "gate.json").read_text())
    assert gate["design"] == "sequential"
    by_name = {c["name"]: c for c in gate["candidates"]}
    # coupled standard decoding reproduces the target exactly: no discordance, an early PASS
    assert by_name["standard"]["verdict"] == "PASS"
    assert by_name["standard"]["questions_used"] < 400
    stops = json.loads((out / "manifest.json").read_text())["sequential"]["stops"]
    assert set(stops) == {"standard", "fly-aggressive"}
    # the baseline ran only as far as the last candidate needed, in whole rounds
    n_target = len(read_records(out / "records" / "target.jsonl"))
    assert n_target == max(s["after_questions"] for s in stops.values()) < 400
    return r, by_name


@pytest.mark.slow
def test_each_candidate_stops_as_soon_as_it_is_decided(tmp_path):
    r, by_name = stop_early(tmp_path, "toy")
    # the toy's aggressive FLy loses about ten points of 72: FAIL, early
    fly = by_name["fly-aggressive"]
    assert (fly["verdict"], fly["stopped_by"]) == ("FAIL", "fail") and fly["questions_used"] < 400
    assert r.exit_code == 1, r.output


@pytest.mark.slow
def test_the_demo_models_aggressive_fly_stops_early_without_passing(tmp_path):
    pytest.importorskip("torch", reason="the demo's models run on the reference engine (the reference extra)")
    r, by_name = stop_early(tmp_path, "reference")
    # aggressive FLy loses about ten points on this task: it stops early without passing
    assert by_name["fly-aggressive"]["verdict"] != "PASS"
    assert by_name["fly-aggressive"]["questions_used"] < 400
    assert r.exit_code == 4, r.output  # INCONCLUSIVE, not FAIL


@pytest.mark.slow
def test_records_are_a_prefix_of_a_full_run_which_can_resume_them(tmp_path):
    plan, out = sequential_plan(tmp_path, questions=120), tmp_path / "out"
    run(str(plan), "--out", str(out), "--sequential", "--batch-questions", "30")
    from qualgate.config.decoding import load_plan

    loaded = load_plan(plan)
    order = [w.key for w in work_items(load_suites(loaded), loaded.seeds, loaded.samples)]
    for name in ("target", "standard", "fly-aggressive"):
        keys = [r.key for r in read_records(out / "records" / f"{name}.jsonl")]
        assert keys == order[: len(keys)]
    r = run(str(plan), "--out", str(out), "--resume")
    assert r.exit_code == 1, r.output
    for name in ("target", "standard", "fly-aggressive"):
        keys = [r.key for r in read_records(out / "records" / f"{name}.jsonl")]
        assert sorted(keys) == sorted(order) and len(set(keys)) == len(keys)
    assert json.loads((out / "gate.json").read_text())["design"] == "fixed"


@pytest.mark.slow
def test_the_budget_stops_an_undecided_candidate_inconclusive(tmp_path):
    plan, out = sequential_plan(tmp_path, questions=200, margin=0.001), tmp_path / "out"
    r = run(str(plan), "--out", str(out), "--sequential", "--batch-questions", "20", "--max-questions", "40")
    gate = json.loads((out / "gate.json").read_text())
    std = next(c for c in gate["candidates"] if c["name"] == "standard")
    assert (std["verdict"], std["stopped_by"], std["questions_used"]) == ("INCONCLUSIVE", "budget", 40)
    assert r.exit_code == 4, r.output


def test_a_mcnemar_plan_cannot_run_sequentially(tmp_path):
    path = sequential_plan(tmp_path, questions=20)
    doc = yaml.safe_load(path.read_text())
    doc["gate"]["policy"] = "mcnemar"
    path.write_text(yaml.safe_dump(doc))
    r = run(str(path), "--out", str(tmp_path / "out"), "--sequential")
    assert r.exit_code == 3 and "non-inferiority" in r.output


@pytest.mark.slow
def test_a_budget_above_the_plans_questions_ends_with_the_final_test_on_all_of_them(tmp_path):
    # issue 36: 200 questions and --max-questions 1000 ended 'exhausted' without the final test.
    # Coupled standard decoding is lossless; at a 3-point margin the always-valid boundary at
    # alpha/50 needs about 280 agreeing questions, so it is the exact final test on all 200
    # questions that passes, after the last round
    plan, out = sequential_plan(tmp_path, questions=200, margin=0.03), tmp_path / "out"
    run(str(plan), "--out", str(out), "--sequential", "--batch-questions", "50", "--max-questions", "1000")
    gate = json.loads((out / "gate.json").read_text())
    std = next(c for c in gate["candidates"] if c["name"] == "standard")
    assert (std["verdict"], std["stopped_by"], std["questions_used"]) == ("PASS", "final", 200)
    assert "the budget of 1,000 is more than the questions there are: it is 200" in std["reason"]
    stops = json.loads((out / "manifest.json").read_text())["sequential"]["stops"]
    assert stops["standard"]["after_questions"] == 200
