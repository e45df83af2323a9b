"""A chained plan end to end on the toy engine: the lossless leg gated and embedded, reused by a
plan with the same setup, refused (before decoding) for a plan with another drafter."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.errors import DataError
from qualgate.stats import noninferiority_sample_size

from support import write_plan


def run(*args):
    return CliRunner().invoke(cli, ["run", *map(str, args)], catch_exceptions=False)


def chained_plan(where, chain="{lossless: target, margin: 0.3}", configs=("standard", "target", "fly")):
    plan = write_plan(where, questions=20, seeds=(0, 1), configs=configs, gate="{margin: 0.3}")
    plan.write_text(plan.read_text() + f"chain: {chain}\n")
    return plan


@pytest.fixture(scope="module")
def chained(tmp_path_factory):
    root = tmp_path_factory.mktemp("chain")
    plan = chained_plan(root / "plan")
    result = run(plan, "--out", root / "out")
    return root, plan, root / "out", result


@pytest.mark.slow
def test_a_chained_run_gates_the_lossless_leg_and_embeds_it_in_the_gate_report(chained):
    root, plan, out, result = chained
    assert result.exit_code in (0, 1, 4), result.output
    gate = json.loads((out / "gate.json").read_text())
    leg = json.loads((out / "lossless.json").read_text())
    p = load_plan(plan)
    assert [c["name"] for c in gate["candidates"]] == ["fly"]  # target-only is the leg's, not a candidate
    assert gate["baseline"]["config_id"] == p.configs["standard"].config_id
    assert leg["baseline"]["config_id"] == p.configs["target"].config_id
    assert [c["config_id"] for c in leg["candidates"]] == [p.configs["standard"].config_id]
    assert leg["settings"]["margin"] == 0.3 and leg["chain"]["leg"] == "lossless"
    assert gate["chain"]["leg"] == "candidate" and gate["chain"]["margin"] == pytest.approx(0.6)
    assert gate["chain"]["lossless"] == leg
    assert gate["chain"]["identity"] == leg["chain"]["identity"]
    assert gate["chain"]["identity"]["engine"] == "toy"


@pytest.mark.slow
def test_the_run_report_states_the_chains_claim_and_each_candidates_divergence(chained):
    _, _, out, _ = chained
    r = CliRunner().invoke(cli, ["report", str(out)], catch_exceptions=False)
    assert "divergence, fly: " in r.output and "pairs byte-identical; first difference at character" in r.output
    leg = json.loads((out / "lossless.json").read_text())["candidates"][0]["verdict"]
    fly = json.loads((out / "gate.json").read_text())["candidates"][0]["verdict"]
    claim = "fly loses less than 60.00 points against target-only" if "PASS" == leg == fly else "no claim"
    assert f"chain: lossless leg (baseline against target-only, margin 30.00 points) {leg}" in r.output
    assert claim in r.output


@pytest.mark.slow
def test_a_stored_lossless_leg_is_reused_by_a_plan_with_the_same_setup(chained, tmp_path):
    root, _, out, _ = chained
    plan = chained_plan(tmp_path / "plan", chain=f"{{report: {out / 'lossless.json'}}}", configs=("standard", "fly"))
    result = run(plan, "--out", tmp_path / "out")
    assert result.exit_code in (0, 1, 4), result.output
    gate = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert gate["chain"]["lossless"] == json.loads((out / "lossless.json").read_text())
    assert not (tmp_path / "out" / "records" / "target.jsonl").exists()


@pytest.mark.slow
def test_a_stored_leg_of_another_drafter_is_refused_before_decoding(chained, tmp_path):
    root, _, out, _ = chained
    plan = chained_plan(tmp_path / "plan", chain=f"{{report: {out / 'lossless.json'}}}", configs=("standard", "fly"))
    std = tmp_path / "plan" / "standard.yaml"
    std.write_text(std.read_text().replace("num_speculative_tokens: 3", "num_speculative_tokens: 2"))
    result = run(plan, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert "not this plan's baseline" in result.output
    assert not (tmp_path / "out" / "records").exists()


@pytest.mark.slow
def test_a_stored_leg_of_another_engine_setup_is_refused_before_decoding(chained, tmp_path):
    root, _, out, _ = chained
    plan = chained_plan(tmp_path / "plan", chain=f"{{report: {out / 'lossless.json'}}}", configs=("standard", "fly"))
    std = tmp_path / "plan" / "standard.yaml"  # batch_size is not in the config id, but in the leg's identity
    std.write_text(std.read_text().replace("batch_size: 4", "batch_size: 2"))
    result = run(plan, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert "the stored lossless leg was run with another setup" in result.output and "engine_options" in result.output
    assert not (tmp_path / "out" / "records").exists()


@pytest.mark.parametrize(
    "chain, configs, message",
    [
        ("{lossless: fly, margin: 0.01}", ("standard", "target", "fly"), "must be target-only"),
        ("{lossless: target}", ("standard", "target", "fly"), "margin is required"),
        ("{lossless: target, margin: 0.01, report: x.json}", ("standard", "target", "fly"), "give either"),
        ("{lossless: standard, margin: 0.01}", ("target", "standard", "fly"), "lossless speculative baseline"),
        ("{lossless: target, margin: 0.01, extra: 1}", ("standard", "target", "fly"), "extra"),
    ],
    ids=["lossy-leg-baseline", "no-margin", "both", "target-baseline", "unknown-key"],
)
def test_a_chain_the_run_cannot_gate_is_a_plan_error(tmp_path, chain, configs, message):
    with pytest.raises(DataError, match=message):
        load_plan(chained_plan(tmp_path, chain=chain, configs=configs))


def test_a_sequential_run_refuses_a_chain_it_would_not_decode(tmp_path):
    result = run(chained_plan(tmp_path / "plan"), "--out", tmp_path / "out", "--sequential")
    assert result.exit_code == 3
    assert "run the lossless leg with `qualgate run` first" in result.output


@pytest.mark.slow
def test_a_sweep_reuses_the_stored_leg_for_every_point_and_sizes_from_a_pilot(chained, tmp_path):
    _, _, out, _ = chained
    plan = chained_plan(tmp_path / "plan", chain=f"{{report: {out / 'lossless.json'}}}", configs=("standard", "fly"))
    grid = tmp_path / "grid.yaml"
    grid.write_text("base: fly\ngrid: {fly_entropy_threshold: [0.6, 0.3]}\n")
    records = out / "records"
    r = CliRunner().invoke(
        cli,
        ["sweep", str(plan), "--grid", str(grid), "--out", str(tmp_path / "out"), "--batch-questions", "5"]
        + ["--speed-rounds", "2", "--speed-questions", "2", "--max-questions", "5"]
        + ["--discordance-from", str(records / "standard.jsonl"), str(records / "fly.jsonl")],
        catch_exceptions=False,
    )
    assert r.exit_code in (0, 1), r.output
    gate = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert gate["chain"]["lossless"] == json.loads((out / "lossless.json").read_text())
    sweep = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert sweep["sizing"]["paths"] == [str(records / "standard.jsonl"), str(records / "fly.jsonl")]
    s = sweep["sizing"]
    assert s["questions_needed"] == math.ceil(
        noninferiority_sample_size(0.3, s["discordant"]).n * s["design_effect"] / s["pairs_per_question"]
    )
    assert s["questions_needed"] > 5
    assert "fewer than the" in r.stderr and "expect INCONCLUSIVE" in r.stderr
