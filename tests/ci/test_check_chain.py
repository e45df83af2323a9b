"""`qualgate check` on a chained gate report: FLy against standard, standard against target-only.

The reports are written as a chained run writes them (``qualgate.run.runner.evaluate_gate`` and
``qualgate.run.chain.chained_evidence`` over record files in a run directory); check verifies
both legs from those record files.
"""

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_config, load_plan
from qualgate.evidence.gate_report import Evidence
from qualgate.run.chain import chained_evidence, leg_identity
from qualgate.run.runner import SEED_DERIVATION, evaluate_gate

import support

DATA = Path(__file__).parent / "data"
SERVED = DATA / "fly-w2.yaml"  # the served FLy config (the id of fly-w2.decoding.yaml)
N = 600
CONFIGS = {
    "target": "",
    "standard": "speculative: {method: draft_model, model: Qwen/Qwen3-0.6B, num_speculative_tokens: 8}\n",
    "fly-w2": (DATA / "fly-w2.decoding.yaml").read_text().split("speculative:")[1].split("sampling:")[0],
}


def write_plan(where: Path, *, margin=0.01, leg_margin=0.01, configs=CONFIGS, chain=True) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for name, spec in configs.items():
        spec = spec if spec.startswith("speculative") or not spec else "speculative:" + spec
        (where / f"{name}.yaml").write_text(
            "engine: vllm\nmodel: Qwen/Qwen3-8B\n"
            + spec
            + "sampling: {temperature: 0.6, top_p: 0.95, top_k: 20, max_tokens: 32768}\n"
            + "engine_options: {dtype: bfloat16, max_num_seqs: 128}\n"
        )
    (where / "plan.yaml").write_text(
        "name: chained\nsuites: [gsm8k]\n"
        f"configs: {{{', '.join(f'{n}: {n}.yaml' for n in configs)}}}\n"
        f"baseline: standard\ncandidates: [fly-w2]\ngate: {{margin: {margin}}}\n"
        + (f"chain: {{lossless: target, margin: {leg_margin}}}\n" if chain else "")
    )
    return where / "plan.yaml"


def flip(outcomes, lose, gain):
    out = list(outcomes)
    for i in [i for i, ok in enumerate(out) if ok][:lose]:
        out[i] = False
    for i in [i for i, ok in enumerate(out) if not ok][:gain]:
        out[i] = True
    return out


BASE = [k % 10 != 0 for k in range(N)]  # 90% correct


def chained_run(root: Path, *, standard_lost=0, fly_lost=0, identity=None, plan_kw=None, drop_target=False):
    """A run directory with records of the three configs and its chained gate.json: standard loses
    ``standard_lost`` questions of target's, FLy ``fly_lost`` of standard's. ``identity``: a change
    to the identity the lossless leg records (a leg run on another setup)."""
    plan = load_plan(write_plan(root / "plan", **(plan_kw or {})))
    out = root / "out"
    standard = flip(BASE, standard_lost, 0)
    outcomes = {"target": BASE, "standard": standard, "fly-w2": flip(standard, fly_lost, 0)}
    for name, correct in outcomes.items():
        if name == "target" and drop_target:
            continue
        cfg = plan.configs[name]
        support.write_records(
            out / "records" / f"{name}.jsonl",
            ["correct" if ok else "incorrect" for ok in correct],
            config=cfg.config_id,
            mode=cfg.mode,
            run_id="chain-test",
        )
    manifest = {
        "fingerprint": {"suites": [{"name": "gsm8k", "version": "1"}]},
        "packages": {"vllm": "0.33.0"},
        "seed_derivation": SEED_DERIVATION,
    }
    report, _ = evaluate_gate(plan, out)
    evidence = chained_evidence(plan, out, report.evidence(), manifest=manifest)
    if identity is not None:  # the leg as it would have been written on another setup
        leg = Evidence.from_dict(evidence.chain["lossless"])
        changed = dict(leg.chain["identity"]) | identity
        leg = dataclasses.replace(leg, chain={"leg": "lossless", "identity": changed})
        evidence = dataclasses.replace(evidence, chain=evidence.chain | {"lossless": leg.to_dict()})
    evidence.write(out / "gate.json")
    return out / "gate.json"


def check(*args):
    return CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(SERVED), *map(str, args)])


def test_the_served_config_is_the_plans_candidate(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    assert plan.configs["fly-w2"].config_id == load_config(DATA / "fly-w2.decoding.yaml").config_id
    assert plan.candidates == ("fly-w2",) and plan.chain.lossless == "target"


@pytest.mark.slow
def test_a_chain_whose_two_legs_pass_allows_the_fly_config_against_target_only(tmp_path):
    report = chained_run(tmp_path)
    r = check("--evidence", report, "--against-target")
    assert r.exit_code == 0, r.output
    assert "chain: against target-only at margin 0.02; lossless leg PASS" in r.output
    assert "verified by: records" in r.output


@pytest.mark.slow
def test_a_chain_whose_lossless_leg_fails_refuses_the_fly_config(tmp_path):
    report = chained_run(tmp_path, standard_lost=30)  # standard 5 points below target
    r = check("--evidence", report)
    assert r.exit_code == 1, r.output
    assert "the chain's lossless leg (standard against target-only, margin 0.01) is FAIL" in r.output


@pytest.mark.slow
def test_a_chain_whose_candidate_leg_fails_refuses_the_fly_config(tmp_path):
    report = chained_run(tmp_path, fly_lost=30)
    r = check("--evidence", report)
    assert r.exit_code == 1, r.output
    assert "the gate's verdict for candidate fly-w2" in r.output and "is FAIL" in r.output


@pytest.mark.slow
def test_a_chain_whose_lossless_leg_is_missing_refuses_the_fly_config(tmp_path):
    report = chained_run(tmp_path, drop_target=True)  # target-only's records never written
    assert json.loads(report.read_text())["chain"]["lossless"] is None
    r = check("--evidence", report)
    assert r.exit_code == 1, r.output
    assert "the chain's lossless leg (standard against target-only) is missing" in r.output


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, shown",
    [
        ({"engine": "reference", "packages": {"torch": "2.13.0", "transformers": "5.0.0"}}, "engine:"),
        ({"drafter": {"method": "draft_model", "model": "Qwen/Qwen3-1.7B", "num_speculative_tokens": 8}}, "drafter:"),
        ({"seed_derivation": "request seed = the plan's seed"}, "seed_derivation:"),
    ],
    ids=["engine", "drafter", "seed-derivation"],
)
def test_a_lossless_leg_run_on_another_setup_refuses_the_fly_config(tmp_path, change, shown):
    report = chained_run(tmp_path, identity=change)
    r = check("--evidence", report)
    assert r.exit_code == 1, r.output
    assert "the chain's lossless leg was run on another setup than the candidate leg" in r.output
    assert shown in r.output


@pytest.mark.slow
def test_the_claims_margin_is_the_sum_of_the_legs_and_is_held_to_max_margin(tmp_path):
    report = chained_run(tmp_path, plan_kw={"margin": 0.015, "leg_margin": 0.01})
    r = check("--evidence", report)  # each leg within --max-margin 0.02, their sum is not
    assert r.exit_code == 1, r.output
    assert "at margin 0.025 (0.015 + 0.01), looser than --max-margin 0.02" in r.output
    assert check("--evidence", report, "--max-margin", 0.03).exit_code == 0


@pytest.mark.slow
def test_a_claim_margin_that_is_not_the_legs_sum_is_not_a_report(tmp_path):
    report = chained_run(tmp_path)
    doc = json.loads(report.read_text())
    doc["chain"]["margin"] = 0.015
    report.write_text(json.dumps(doc))
    r = check("--evidence", report)
    assert r.exit_code == 1, r.output
    assert "is not valid evidence" in r.output and "the legs' margins add up to 0.02" in r.output


@pytest.mark.slow
def test_a_report_against_standard_without_a_chain_says_so_and_against_target_refuses_it(tmp_path):
    plan = load_plan(
        write_plan(tmp_path / "plan", chain=False, configs={k: CONFIGS[k] for k in ("standard", "fly-w2")})
    )
    out = tmp_path / "out"
    for name, correct in (("standard", BASE), ("fly-w2", BASE)):
        cfg = plan.configs[name]
        support.write_records(
            out / "records" / f"{name}.jsonl",
            ["correct" if ok else "incorrect" for ok in correct],
            config=cfg.config_id,
            mode=cfg.mode,
        )
    report, _ = evaluate_gate(plan, out)
    report.evidence().write(out / "gate.json")
    r = check("--evidence", out / "gate.json")
    assert r.exit_code == 0, r.output
    assert "note: the evidence compares against standard speculative decoding" in r.output
    r = check("--evidence", out / "gate.json", "--against-target")
    assert r.exit_code == 1 and "(--against-target)" in r.output


def test_the_identity_names_engine_drafter_and_seed_derivation(tmp_path):
    plan = load_plan(write_plan(tmp_path))
    identity = leg_identity(plan, {"suites": []}, {"vllm": "0.33.0"}, SEED_DERIVATION)
    assert identity["engine"] == "vllm" and identity["packages"] == {"vllm": "0.33.0", "torch": None}
    assert identity["drafter"] == {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 8,
        "draft_sample_method": "greedy",
    }
    assert "request_seed" in identity["seed_derivation"]


@pytest.mark.slow
def test_without_records_each_leg_is_verified_by_its_own_signature(tmp_path, monkeypatch):
    monkeypatch.setenv("QUALGATE_EVIDENCE_KEY", "ci-secret")
    report = chained_run(tmp_path)
    doc = json.loads(report.read_text())
    assert doc["signature"] and doc["chain"]["lossless"]["signature"]
    for f in (report.parent / "records").iterdir():
        f.unlink()
    r = check("--evidence", report)
    assert r.exit_code == 0, r.output
    assert "verified by: signature)" in r.output  # the chain's line: the leg's own HMAC
    monkeypatch.setenv("QUALGATE_EVIDENCE_KEY", "another-key")
    r = check("--evidence", report)
    assert r.exit_code == 1 and "the chain's lossless leg: the report's signature does not match" in r.output
