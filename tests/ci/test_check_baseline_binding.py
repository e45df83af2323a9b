"""`qualgate check` allows a lossy config only against its own reference (issue 46 item 1), and
`qualgate gate` warns when the sides are swapped or differ in more than speculative decoding
(issue 46 item 1, issue 50 item 3).

The evidence here is honest and verified from its records: what is refused is a baseline that
is not the candidate's own target at the candidate's sampling (the plan, part of the pull
request, chooses it)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_config, load_plan
from qualgate.evidence.gate_report import Evidence

import support

DATA = Path(__file__).parent / "data"
N = 400
TARGET = "Qwen/Qwen3-8B"
DRAFTER = "Qwen/Qwen3-0.6B"
FLY = {
    "method": "draft_model",
    "model": DRAFTER,
    "num_speculative_tokens": 8,
    "rejection_sample_method": "fly",
    "fly_window_size": 2,
}


def decoding(path: Path, name, model, speculative=None, temperature=1.0, **options) -> Path:
    doc = {
        "name": name,
        "engine": "vllm",
        "model": model,
        "sampling": {"temperature": temperature, "max_tokens": 4096},
        "engine_options": {"dtype": "bfloat16", **options},
    }
    if speculative:
        doc["speculative"] = speculative
    path.write_text(json.dumps(doc))
    return path


def plan_run(tmp_path: Path, baseline: Path, candidate: Path, base_correct, cand_correct) -> Path:
    """A plan (baseline and candidate as the pull request states them) and its run's gate.json,
    gated by the harness's own evaluation on the records the configs would write."""
    from qualgate.run.runner import evaluate_gate

    plan = tmp_path / "plan.yaml"
    plan.write_text(
        json.dumps(
            {
                "name": "pr",
                "suites": ["gsm8k"],
                "configs": {"base": str(baseline), "fly": str(candidate)},
                "baseline": "base",
                "gate": {"policy": "noninferiority", "margin": 0.2, "alpha": 0.05},
            }
        )
    )
    out = tmp_path / "run"
    for name, path, correct, mode in (("base", baseline, base_correct, None), ("fly", candidate, cand_correct, "fly")):
        cfg = load_config(path)
        outcomes = ["correct" if ok else "incorrect" for ok in correct]
        support.write_records(out / "records" / f"{name}.jsonl", outcomes, config=cfg.config_id, mode=mode or cfg.mode)
    report, summary = evaluate_gate(load_plan(plan), out)
    assert summary["verdict"] == "PASS", summary  # the gate itself passes: only the binding is wrong
    report.evidence().write(out / "gate.json")
    return out / "gate.json"


def check(config: Path, evidence: Path):
    args = ["check", "--vllm-version", "0.33.0", str(config), "--evidence", str(evidence), "--max-margin", "0.25"]
    return CliRunner().invoke(cli, args)


def accuracy(share: float):
    return [k % 1000 < share * 1000 for k in range(N)]


# --------------------------------------------------------------- the two critical cases


@pytest.mark.slow
def test_a_plan_whose_baseline_is_the_drafter_alone_is_refused_naming_the_model(tmp_path):
    # issue 46: the drafter alone (48.5 %) as the baseline of a FLy config that loses 6 points
    # against its own target: the gate passes at a wide margin, the evidence verifies
    base = decoding(tmp_path / "drafter.yaml", "drafter", DRAFTER)
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY)
    evidence = plan_run(tmp_path, base, fly, accuracy(0.485), accuracy(0.60))
    r = check(fly, evidence)
    assert r.exit_code == 3, r.output
    assert "verified by: records" in r.stdout  # the report is honest; its baseline is not the candidate's
    assert f"target model: the baseline serves '{DRAFTER}', the candidate '{TARGET}'" in r.stdout


@pytest.mark.slow
def test_a_plan_whose_baseline_is_the_target_at_another_temperature_is_refused(tmp_path):
    base = decoding(tmp_path / "target-t2.yaml", "target", TARGET, temperature=2.0)
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY, temperature=1.0)
    evidence = plan_run(tmp_path, base, fly, accuracy(0.50), accuracy(0.80))
    r = check(fly, evidence)
    assert r.exit_code == 3, r.output
    assert "sampling temperature: baseline 2.0, candidate 1.0" in r.stdout


@pytest.mark.slow
def test_a_plan_with_the_candidates_own_target_is_allowed(tmp_path):
    base = decoding(tmp_path / "target.yaml", "target", TARGET)
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY)
    evidence = plan_run(tmp_path, base, fly, accuracy(0.80), accuracy(0.80))
    r = check(fly, evidence)
    assert r.exit_code == 0, r.output
    doc = json.loads(evidence.read_text())
    assert doc["baseline"]["config"]["sampling"] == doc["candidates"][0]["config"]["sampling"]
    assert "warnings" not in doc


@pytest.mark.slow
def test_a_standard_baseline_of_another_drafter_is_refused_and_of_the_same_drafter_allowed(tmp_path):
    other = dict(FLY, model="Qwen/Qwen3-1.7B", rejection_sample_method="standard")
    other.pop("fly_window_size")
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY)
    base = decoding(tmp_path / "std-other.yaml", "std", TARGET, other)
    (tmp_path / "a").mkdir()
    r = check(fly, plan_run(tmp_path / "a", base, fly, accuracy(0.8), accuracy(0.8)))
    assert r.exit_code == 3 and "drafter: a speculative baseline must be the standard speculative config" in r.stdout
    same = dict(other, model=DRAFTER)
    base = decoding(tmp_path / "std.yaml", "std", TARGET, same)
    (tmp_path / "b").mkdir()
    r = check(fly, plan_run(tmp_path / "b", base, fly, accuracy(0.8), accuracy(0.8)))
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------ gate's warnings


def gate(*args):
    return CliRunner().invoke(cli, ["gate", *map(str, args)])


def test_gate_warns_and_records_swapped_sides(tmp_path):
    # issue 50 item 3: the lossy config as baseline and target-only as candidate passed silently
    fly = support.write_records(tmp_path / "fly.jsonl", ["correct"] * 300, config="cfg-fly", mode="fly")
    target = support.write_records(tmp_path / "target.jsonl", ["correct"] * 300, config="cfg-target", mode="target")
    r = gate(fly, target, "--margin", 0.02, "--output", tmp_path / "gate.json")
    assert r.exit_code == 0, r.output
    assert "warning: target: swapped sides: the baseline is lossy ('fly' by its mode label)" in r.stderr
    warnings = json.loads((tmp_path / "gate.json").read_text())["warnings"]
    assert any("swapped sides" in w for w in warnings)
    assert any(w.startswith("the binding of the baseline to the candidates cannot be checked") for w in warnings)


@pytest.mark.slow
def test_gate_warns_and_records_sides_that_differ_in_more_than_speculative_decoding(tmp_path):
    base = decoding(tmp_path / "drafter.yaml", "drafter", DRAFTER, temperature=2.0)
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY)
    b = support.write_records(
        tmp_path / "b.jsonl", ["correct"] * 300, config=load_config(base).config_id, mode="target"
    )
    c = support.write_records(tmp_path / "c.jsonl", ["correct"] * 300, config=load_config(fly).config_id, mode="fly")
    out = tmp_path / "gate.json"
    r = gate(b, c, "--margin", 0.02, "--baseline-config", base, "--candidate-config", fly, "--output", out)
    assert r.exit_code == 0, r.output
    (warning,) = Evidence.read(out).warnings
    assert warning.startswith("c: the sides differ in more than the speculative block")
    assert "target model: the baseline serves" in warning and "sampling temperature: baseline 2.0" in warning
    assert f"warning: {warning}" in r.stderr
    # check refuses it too, naming both
    r = check(fly, out)
    assert r.exit_code == 3 and "sampling temperature" in r.stdout and "target model" in r.stdout


def test_gate_says_the_binding_of_imported_logs_cannot_be_checked(tmp_path):
    b = support.write_records(tmp_path / "b.jsonl", ["correct"] * 50, config="cfg-a", mode="target")
    c = support.write_records(tmp_path / "c.jsonl", ["correct"] * 50, config="cfg-b", mode="standard")
    r = gate(b, c, "--margin", 0.05)
    assert "warning: the binding of the baseline to the candidates cannot be checked" in r.stderr


def test_a_candidate_config_of_other_records_is_a_data_error(tmp_path):
    fly = decoding(tmp_path / "fly.yaml", "fly", TARGET, FLY)
    b = support.write_records(tmp_path / "b.jsonl", ["correct"] * 20, config="cfg-a", mode="target")
    c = support.write_records(tmp_path / "c.jsonl", ["correct"] * 20, config="cfg-b", mode="fly")
    r = gate(b, c, "--margin", 0.05, "--candidate-config", fly)
    assert r.exit_code == 3 and "but the candidate records carry cfg-b" in r.stderr
