"""``qualgate run``: every config over the same seeded questions, records, manifest, gate."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.backends import Request, open_backend, package_versions
from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.records import read_records
from qualgate.run.runner import request_seed
from qualgate.suites import load_suite

from toy_engine import prompt_length


def run(*args):
    return CliRunner().invoke(cli, ["run", *map(str, args)], catch_exceptions=False)


def keys(path):
    return [r.key for r in read_records(path)]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, plan_writer):
    """One complete run of three configs over 3 questions x 2 seeds on the toy engine (shared by
    the tests)."""
    root = tmp_path_factory.mktemp("run")
    plan = plan_writer(root / "plan")
    result = run(plan, "--out", root / "out")
    return plan, root / "out", result


@pytest.mark.slow
def test_every_config_gets_one_record_per_question_and_seed(finished):
    plan, out, result = finished
    expected = {("tiny_arith", f"test-0-{i}", s, 0) for i in range(3) for s in (0, 1)}
    for name in ("target", "standard", "fly"):
        got = keys(out / "records" / f"{name}.jsonl")
        assert len(got) == len(set(got)) == 6
        assert set(got) == expected


@pytest.mark.slow
def test_records_carry_the_config_id_and_mode_of_their_config(finished):
    plan, out, _ = finished
    p = load_plan(plan)
    for name, cfg in p.configs.items():
        recs = read_records(out / "records" / f"{name}.jsonl")
        assert {r.config_id for r in recs} == {cfg.config_id}
        assert {r.mode for r in recs} == {cfg.mode}


@pytest.mark.slow
def test_outcomes_are_the_suite_grading_of_the_output(finished):
    plan, out, _ = finished
    suite = load_suite(load_plan(plan).suites[0].suite)
    questions = {q.id: q for q in suite.questions}
    for r in read_records(out / "records" / "fly.jsonl"):
        q = questions[r.question_id]
        g = suite.grade(q, r.output)
        assert (r.outcome, r.answer_lenient, r.decided_by, r.gold, r.prompt_hash) == (
            g.outcome,
            None if g.lenient is None else str(g.lenient),
            g.decided_by,
            q.gold,
            q.prompt_hash,
        )


@pytest.mark.slow
def test_each_request_is_decoded_with_the_seed_of_its_key(finished):
    plan, out, _ = finished
    loaded = load_plan(plan)
    suite = load_suite(loaded.suites[0].suite)
    prompts = {q.id: q.prompt for q in suite.questions}
    records = read_records(out / "records" / "standard.jsonl")
    with open_backend(loaded.configs["standard"]) as engine:
        direct = engine.generate(
            [
                Request(prompts[r.question_id], {"temperature": 1.0, "max_tokens": 12, "seed": request_seed(*r.key)})
                for r in records
            ]
        )
    assert [o.text for o in direct] == [r.output for r in records]
    # the same (question, seed) under different seeds decodes differently
    assert len({r.output for r in records}) > len(records) // 2


@pytest.mark.slow
def test_speculative_metrics_are_recorded_for_speculative_configs_only(finished):
    _, out, _ = finished
    target = read_records(out / "records" / "target.jsonl")
    fly = read_records(out / "records" / "fly.jsonl")
    assert all(r.spec_steps is None and 0 < r.output_tokens <= 12 for r in target)
    assert all(r.spec_steps > 0 and r.draft_tokens == 3 * r.spec_steps for r in fly)
    assert all(0 <= r.deferred_tokens <= r.accepted_tokens for r in fly)
    assert sum(r.accepted_tokens for r in fly) > 0


@pytest.mark.slow
def test_manifest_names_plan_configs_versions_times_and_throughput(finished):
    plan, out, _ = finished
    m = json.loads((out / "manifest.json").read_text())
    p = load_plan(plan)
    assert m["status"] == "complete" and m["started_at"] <= m["ended_at"]
    assert m["plan"]["name"] == "tiny" and m["seeds"] == [0, 1]
    assert {k: v["config_id"] for k, v in m["configs"].items()} == {k: c.config_id for k, c in p.configs.items()}
    # the installed versions, None for a package that is not (torch, with the toy engine, may not be)
    installed = package_versions("numpy", "scipy", "torch", "transformers", "vllm")
    assert m["packages"]["qualgate"] and m["packages"]["numpy"]
    assert {k: m["packages"].get(k) for k in installed} == installed
    assert "git" in m and m["suites"] == [
        {"name": "tiny_arith", "version": "1", "questions": 3, "limit": None, "source": p.suites[0].suite}
    ]
    for entry in m["configs"].values():
        t = entry["throughput"]
        assert entry["status"] == "complete" and t["requests"] == 6
        assert t["output_tokens"] > 0 and t["tokens_per_s"] > 0
        assert entry["info"]["engine"] == "toy" and entry["info"]["device"] == "cpu"
        assert "gpu" in entry["info"]
    assert m["configs"]["fly"]["info"]["warnings"]  # FLy's lossy warning
    assert m["gate"]["exit_code"] == json.loads((out / "gate.json").read_text())["exit_code"]


@pytest.mark.slow
def test_run_exits_with_the_gate_exit_code_and_writes_gate_json(finished):
    _, out, result = finished
    gate = json.loads((out / "gate.json").read_text())
    assert gate["kind"] == "qualgate.gate_report"
    assert [c["name"] for c in gate["candidates"]] == ["standard", "fly"]
    assert result.exit_code == gate["exit_code"] == {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 4}[gate["verdict"]]


@pytest.mark.slow
def test_a_passing_gate_exits_0(plan_factory, tmp_path):
    # greedy decoding: standard speculative decoding is token-identical to the target, so the
    # McNemar gate sees no discordant pair and passes
    plan = plan_factory(configs=("target", "standard"), temperature=0.0, gate="{policy: mcnemar, margin: 0.05}")
    result = run(plan, "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    outs = [
        [r.output for r in read_records(tmp_path / "out" / "records" / f"{c}.jsonl")] for c in ("target", "standard")
    ]
    assert outs[0] == outs[1]


@pytest.mark.slow
def test_samples_are_indexed_and_decoded_with_different_seeds(plan_factory, tmp_path):
    plan = plan_factory(configs=("target",), questions=1, seeds=(0,), samples=3)
    run(plan, "--out", tmp_path / "out", "--quiet")
    recs = read_records(tmp_path / "out" / "records" / "target.jsonl")
    assert sorted(r.sample_index for r in recs) == [0, 1, 2]
    assert len({r.output for r in recs}) == 3


def test_a_non_empty_out_is_refused_without_resume(plan_factory, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = run(plan_factory(), "--out", out)
    assert result.exit_code == 3
    assert "not empty" in result.stderr and "--resume" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.slow
def test_resume_of_a_complete_run_adds_nothing(finished, tmp_path):
    import shutil

    plan, out, first = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    result = run(plan, "--out", copy, "--resume")
    assert result.exit_code == first.exit_code
    for name in ("target", "standard", "fly"):
        assert (copy / "records" / f"{name}.jsonl").read_bytes() == (out / "records" / f"{name}.jsonl").read_bytes()


@pytest.mark.slow
def test_resume_refuses_a_changed_config(plan_factory, tmp_path):
    out = tmp_path / "out"
    run(plan_factory(configs=("target", "standard")), "--out", out, "--quiet")
    changed = plan_factory(configs=("target", "standard"), temperature=0.7)
    result = run(changed, "--out", out, "--resume")
    assert result.exit_code == 3
    assert "plan changed" in result.stderr and "'target'" in result.stderr


@pytest.mark.slow
def test_resume_refuses_changed_seeds(plan_factory, tmp_path):
    out = tmp_path / "out"
    run(plan_factory(configs=("target",), seeds=(0,)), "--out", out, "--quiet")
    result = run(plan_factory(configs=("target",), seeds=(0, 1)), "--out", out, "--resume")
    assert result.exit_code == 3 and "seeds" in result.stderr


@pytest.mark.slow
def test_progress_goes_to_stderr_and_quiet_silences_it(plan_factory, tmp_path):
    plan = plan_factory(configs=("target",), questions=1, seeds=(0,))
    loud = run(plan, "--out", tmp_path / "a")
    quiet = run(plan, "--out", tmp_path / "b", "--quiet")
    assert "target: 1 records in" in loud.stderr
    assert quiet.stderr == ""
    assert "target (baseline)" in quiet.stdout


@pytest.mark.slow
def test_an_engine_error_is_recorded_as_error_not_incorrect(plan_factory, tmp_path):
    # the toy has 256 positions, as the reference engine's tiny models: max_tokens is chosen
    # so that only the longest prompt cannot fit, which the engine refuses for that request alone
    plan = plan_factory(configs=("target", "standard"), questions=4, seeds=(0,), batch_size=4)
    suite = load_suite(load_plan(plan).suites[0].suite)
    length = {q.id: prompt_length(q.prompt) for q in suite.questions}
    longest = max(length.values())
    assert min(length.values()) < longest
    plan = plan_factory(
        configs=("target", "standard"), questions=4, seeds=(0,), batch_size=4, max_tokens=256 - longest + 1
    )
    result = run(plan, "--out", tmp_path / "out")
    recs = read_records(tmp_path / "out" / "records" / "target.jsonl")
    failed = {r.question_id for r in recs if r.outcome == "error"}
    assert failed == {q for q, n in length.items() if n == longest}
    assert all("max_position_embeddings" in r.error and r.output is None for r in recs if r.outcome == "error")
    assert all(r.outcome != "error" and r.output for r in recs if r.question_id not in failed)
    # the gate refuses pairs with errors unless allowed (exit 3); --max-errors lets it decide
    assert result.exit_code == 3 and "error" in result.stderr
    again = run(plan, "--out", tmp_path / "out", "--resume", "--max-errors", len(failed))
    assert again.exit_code == 4, again.output


def test_a_missing_engine_package_is_a_data_error(plan_factory, tmp_path):
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed")
    result = run(plan_factory(configs=("target",), engine="vllm"), "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "vllm" in result.stderr


@pytest.mark.slow
def test_run_and_report_print_the_same_table(finished):
    _, out, result = finished
    report = CliRunner().invoke(cli, ["report", str(out)])
    assert report.exit_code == result.exit_code  # the gate's
    assert report.stdout == result.stdout


def test_an_engine_that_cannot_start_stops_the_run_with_exit_3_not_1(plan_factory, tmp_path):
    # the toy engine has no CUDA device, as the reference engine on a machine without one
    plan = plan_factory(configs=("target",))
    cfg = plan.parent / "target.yaml"
    cfg.write_text(cfg.read_text().replace("device: cpu", "device: cuda"))
    result = run(plan, "--out", tmp_path / "out")
    assert result.exit_code == 3
    # nothing was written, so there is nothing to resume; no traceback for a config error
    assert "no record was written" in result.stderr and "--resume" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_record_carries_the_backends_token_ids_and_top2_margins():
    from types import SimpleNamespace

    from qualgate.backends import Generation
    from qualgate.records import Record
    from qualgate.run.runner import _record

    suite = SimpleNamespace(name="s", version="1")
    item = SimpleNamespace(
        question=SimpleNamespace(id="q", prompt_hash="h", gold="4"), suite=suite, seed=0, sample_index=0
    )
    grade = SimpleNamespace(outcome="correct", strict="4", lenient="4", decided_by="strict:boxed")
    gen = Generation(text="4", output_tokens=2, token_ids=[7, 2], top2_margins=[0.5, 0.03125])
    rec = _record("run", "cfg", "target", item, gen, grade)
    assert (rec["token_ids"], rec["top2_margins"]) == ([7, 2], [0.5, 0.03125])
    assert Record.from_dict(rec).token_ids == [7, 2]
    assert "token_ids" not in _record("run", "cfg", "target", item, Generation(text="4"), grade)
