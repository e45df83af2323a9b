"""``qualgate run --shard I/N`` and ``qualgate merge``: the shards of a plan merged are the
one-machine run, and a merge of shards that are not exactly the plan's is refused by name."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from qualgate.backends._devices import comparable_records
from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.records import read_records
from qualgate.run.runner import load_suites, work_items
from qualgate.run.shards import Shard, shard_of

CONFIGS = ("target", "fly")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# -- the assignment ---------------------------------------------------------------------------------


def test_every_request_is_in_exactly_one_shard_and_a_questions_seeds_stay_together(plan_writer, tmp_path):
    plan = load_plan(plan_writer(tmp_path, questions=40, seeds=(0, 1, 2), samples=2))
    work = work_items(load_suites(plan), plan.seeds, plan.samples)
    for count in (1, 2, 3, 7):
        parts = [Shard(i, count).select(work) for i in range(count)]
        keys = [w.key for part in parts for w in part]
        assert sorted(keys) == sorted(w.key for w in work) and len(set(keys)) == len(work)
        for i, part in enumerate(parts):
            assert [w.key for w in part] == [w.key for w in work if shard_of(w.key[0], w.key[1], count) == i]
            questions = {w.key[:2] for w in part}
            assert len(part) == len(questions) * 3 * 2  # every seed and sample of each of its questions
    assert all(len(Shard(i, 3).select(work)) > 0 for i in range(3))


def test_a_shard_is_written_i_slash_n_with_i_below_n():
    assert Shard.parse(" 2/3 ") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"
    for bad in ("3/3", "-1/3", "1/0", "1", "a/b", "1/3/4"):
        with pytest.raises(ValueError, match="I/N"):
            Shard.parse(bad)


@pytest.mark.slow
def test_a_shard_out_of_range_on_the_command_line_is_a_usage_error(plan_factory, tmp_path):
    result = invoke("run", plan_factory(), "--out", tmp_path / "o", "--shard", "3/3")
    assert result.exit_code == 2 and "0 <= I < N" in result.output
    result = invoke("run", plan_factory(), "--out", tmp_path / "o", "--shard", "0/2", "--sequential")
    assert result.exit_code == 2 and "--shard" in result.output
    assert not (tmp_path / "o").exists()


# -- three shards and a one-machine run of one plan (run once per module) ---------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory, plan_writer):
    root = tmp_path_factory.mktemp("shards")
    plan = plan_writer(root / "plan", questions=7, seeds=(0, 1), configs=CONFIGS, batch_size=3)
    one = invoke("run", plan, "--out", root / "one", "--quiet")
    assert one.exit_code in (0, 1, 4), one.output
    shards = []
    for i in range(3):
        result = invoke("run", plan, "--shard", f"{i}/3", "--out", root / f"shard-{i}", "--quiet")
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"shard {i}/3 of plan tiny: complete")
        shards.append(root / f"shard-{i}")
    return {"root": root, "plan": plan, "one": root / "one", "one_exit": one.exit_code, "shards": shards}


def merge(runs, tmp_path, *dirs, extra=()):
    return invoke("merge", *dirs, "--out", tmp_path / "merged", *extra)


@pytest.mark.slow
def test_three_shards_merged_are_the_one_machine_run(runs, tmp_path):
    result = merge(runs, tmp_path, *reversed(runs["shards"]))  # (any order)
    assert result.exit_code == runs["one_exit"], result.output
    merged, one = tmp_path / "merged", runs["one"]
    assert comparable_records(merged) == comparable_records(one)
    assert len(comparable_records(one)) == len(CONFIGS) * 7 * 2
    for c in CONFIGS:  # the one-machine run's order too
        assert [r.key for r in read_records(merged / "records" / f"{c}.jsonl")] == [
            r.key for r in read_records(one / "records" / f"{c}.jsonl")
        ]
    gate, gate_one = (json.loads((d / "gate.json").read_text()) for d in (merged, one))
    assert gate["verdict"] == gate_one["verdict"]
    assert [c["loss_upper_bound"] for c in gate["candidates"]] == [
        c["loss_upper_bound"] for c in gate_one["candidates"]
    ]
    manifest = json.loads((merged / "manifest.json").read_text())
    assert (
        manifest["status"] == "complete"
        and manifest["fingerprint"] == json.loads((one / "manifest.json").read_text())["fingerprint"]
    )
    assert [s["index"] for s in manifest["shards"]] == [0, 1, 2]
    shard_ids = [json.loads((d / "manifest.json").read_text())["run_id"] for d in runs["shards"]]
    assert [s["run_id"] for s in manifest["shards"]] == shard_ids
    assert sum(s["configs"]["fly"]["records"] for s in manifest["shards"]) == 14
    assert manifest["configs"]["fly"]["throughput"]["requests"] == 14
    report = invoke("report", merged)
    gate_code = json.loads((merged / "manifest.json").read_text())["gate"]["exit_code"]
    assert report.exit_code == gate_code and "gate:" in report.output


@pytest.mark.slow
def test_a_missing_shard_is_refused_naming_it(runs, tmp_path):
    result = merge(runs, tmp_path, runs["shards"][0], runs["shards"][2])
    assert result.exit_code == 3 and "shard 1/3 is missing" in result.output
    assert not (tmp_path / "merged" / "manifest.json").exists()


@pytest.mark.slow
def test_a_shard_given_twice_is_refused_naming_it(runs, tmp_path):
    copy = tmp_path / "copy-of-1"
    shutil.copytree(runs["shards"][1], copy)
    result = merge(runs, tmp_path, *runs["shards"], copy)
    assert result.exit_code == 3 and "shard 1/3 is given twice" in result.output and "copy-of-1" in result.output


@pytest.mark.slow
def test_a_shard_of_another_fingerprint_is_refused_naming_it(runs, tmp_path, plan_writer):
    # the same plan name and configs, other seeds: its requests are other requests
    other = plan_writer(tmp_path / "other", questions=7, seeds=(0, 2), configs=CONFIGS, batch_size=3)
    assert invoke("run", other, "--shard", "2/3", "--out", tmp_path / "foreign", "--quiet").exit_code == 0
    result = merge(runs, tmp_path, *runs["shards"][:2], tmp_path / "foreign")
    assert result.exit_code == 3, result.output
    assert "shard 2/3" in result.output and "foreign" in result.output and "another fingerprint" in result.output
    assert "seeds" in result.output


@pytest.mark.slow
def test_a_shard_of_another_plan_is_refused_naming_it(runs, tmp_path, plan_writer):
    other = plan_writer(tmp_path / "other", questions=7, seeds=(0, 1), configs=CONFIGS, batch_size=3)
    other.write_text(other.read_text().replace("name: tiny", "name: another"))
    assert invoke("run", other, "--shard", "0/3", "--out", tmp_path / "foreign", "--quiet").exit_code == 0
    result = merge(runs, tmp_path, tmp_path / "foreign", *runs["shards"][1:], extra=("--plan", runs["plan"]))
    assert result.exit_code == 3 and "shard 0/3" in result.output and "another plan ('another'" in result.output


@pytest.mark.slow
def test_a_torn_shard_is_refused_naming_it_and_resume_mends_it(runs, tmp_path):
    torn = tmp_path / "torn"
    shutil.copytree(runs["shards"][1], torn)
    path = torn / "records" / "fly.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the last record half on disk
    shards = [runs["shards"][0], torn, runs["shards"][2]]
    result = merge(runs, tmp_path, *shards)
    assert result.exit_code == 3 and "shard 1/3" in result.output and "torn" in result.output
    assert "incomplete last line" in result.output and "--resume" in result.output

    # --resume of that shard (and only as that shard) removes the torn line and decodes it again
    wrong = invoke("run", runs["plan"], "--shard", "0/3", "--out", torn, "--resume", "--quiet")
    assert wrong.exit_code == 3 and "holds shard 1/3, not shard 0/3" in wrong.output
    whole = invoke("run", runs["plan"], "--out", torn, "--resume", "--quiet")
    assert whole.exit_code == 3 and "not the whole plan" in whole.output
    mended = invoke("run", runs["plan"], "--shard", "1/3", "--out", torn, "--resume", "--quiet")
    assert mended.exit_code == 0, mended.output
    assert merge(runs, tmp_path, *shards).exit_code == runs["one_exit"]
    assert comparable_records(tmp_path / "merged") == comparable_records(runs["one"])


@pytest.mark.slow
def test_a_shard_missing_whole_records_is_refused_as_torn(runs, tmp_path):
    short = tmp_path / "short"
    shutil.copytree(runs["shards"][2], short)
    path = short / "records" / "target.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    result = merge(runs, tmp_path, *runs["shards"][:2], short)
    assert result.exit_code == 3 and "shard 2/3" in result.output and "lacks 1 of the" in result.output


@pytest.mark.slow
def test_two_shards_holding_one_request_are_refused_as_overlapping(runs, tmp_path):
    overlap = tmp_path / "overlap"
    shutil.copytree(runs["shards"][1], overlap)
    stolen = (runs["shards"][0] / "records" / "fly.jsonl").read_bytes().splitlines(keepends=True)[0]
    with open(overlap / "records" / "fly.jsonl", "ab") as fh:
        fh.write(stolen)
    result = merge(runs, tmp_path, runs["shards"][0], overlap, runs["shards"][2])
    assert result.exit_code == 3, result.output
    assert "shard 1/3" in result.output and "holds a request of shard 0/3" in result.output
    assert "overlap" in result.output


@pytest.mark.slow
def test_a_merge_never_writes_into_a_directory_that_is_not_empty(runs, tmp_path):
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "notes.txt").write_text("mine")
    result = merge(runs, tmp_path, *runs["shards"])
    assert result.exit_code == 3 and "not empty" in result.output
    assert [p.name for p in (tmp_path / "merged").iterdir() if not p.name.startswith(".")] == ["notes.txt"]


@pytest.mark.slow
def test_a_whole_run_is_not_a_shard(runs, tmp_path):
    result = merge(runs, tmp_path, runs["one"])
    assert result.exit_code == 3 and "not a shard" in result.output


@pytest.mark.slow
def test_shards_run_with_limit_merge_into_the_limited_one_machine_run(runs, tmp_path):
    plan = runs["plan"]
    one = invoke("run", plan, "--limit", "4", "--out", tmp_path / "one", "--quiet")
    assert one.exit_code in (0, 1, 4), one.output
    for i in range(2):
        done = invoke("run", plan, "--limit", "4", "--shard", f"{i}/2", "--out", tmp_path / f"s{i}", "--quiet")
        assert done.exit_code == 0, done.output
    result = invoke("merge", tmp_path / "s0", tmp_path / "s1", "--out", tmp_path / "merged")
    assert result.exit_code == one.exit_code, result.output
    assert comparable_records(tmp_path / "merged") == comparable_records(tmp_path / "one")
    assert len(comparable_records(tmp_path / "one")) == len(CONFIGS) * 4 * 2


@pytest.mark.slow
def test_shards_run_with_different_limits_are_refused_naming_the_option(runs, tmp_path):
    plan = runs["plan"]
    for i, limit in ((0, "4"), (1, "5")):
        done = invoke("run", plan, "--limit", limit, "--shard", f"{i}/2", "--out", tmp_path / f"s{i}", "--quiet")
        assert done.exit_code == 0, done.output
    result = invoke("merge", tmp_path / "s0", tmp_path / "s1", "--out", tmp_path / "merged")
    assert result.exit_code == 3 and "different question limits (--limit)" in result.output
    assert not (tmp_path / "merged" / "records").exists()
