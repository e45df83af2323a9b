"""`qualgate check` refuses evidence that can be bent (issue 34): a sequential order chosen
after the outcomes, mismatched prompts, an escape hatch over a lossiness key, an empty key,
hostile file names, and the crashes the attacks found."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.ci import check as _check
from qualgate.ci import read_serving_config
from qualgate.cli import cli
from qualgate.config.decoding import load_config

import support


def check(*args, **kwargs):
    """:func:`qualgate.ci.check` of a deployment on vLLM 0.33.0, stated as ``--vllm-version``
    would (these configs' files do not state their release)."""
    return _check(*args, vllm_version="0.33.0", **kwargs)


DATA = Path(__file__).parent / "data"
TARGET = DATA / "target.decoding.yaml"
N = 300

pytestmark = pytest.mark.slow  # the module's evidence: real gates over generated records


def ids():
    return {
        "target": load_config(TARGET).config_id,
        "fly-w2": load_config(DATA / "fly-w2.decoding.yaml").config_id,
    }


def outcomes(n, lose=0, gain=0):
    base = [k % 10 != 0 for k in range(n)]
    out = list(base)
    for i in [i for i, ok in enumerate(out) if ok][:lose]:
        out[i] = False
    for i in [i for i, ok in enumerate(out) if not ok][:gain]:
        out[i] = True
    return ["correct" if ok else "incorrect" for ok in base], ["correct" if ok else "incorrect" for ok in out]


def chk(config, report, **options):
    return check(config, report, max_margin=0.05, **options)


def invoke(*args, env=None):
    return CliRunner(env=env).invoke(cli, [*map(str, args)])


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    d = tmp_path_factory.mktemp("rules")
    i = ids()
    base, w2 = outcomes(N, 1, 1)
    support.write_records(d / "target.jsonl", base, config=i["target"], mode="target", run_id="r")
    support.write_records(d / "fly-w2.jsonl", w2, config=i["fly-w2"], mode="fly", run_id="r")
    return d


def gate_report(records, out, *extra, env=None):
    r = invoke(
        "gate",
        records / "target.jsonl",
        records / "fly-w2.jsonl",
        "--margin",
        0.05,
        "--baseline-config",
        TARGET,
        "--candidate-config",
        DATA / "fly-w2.decoding.yaml",
        "--output",
        out,
        *extra,
        env=env,
    )
    assert r.exit_code in (0, 1, 4), r.output
    return out


# ------------------------------------------------------------------ item 1: the order


def test_a_sequential_report_in_record_order_is_refused(records, tmp_path):
    rep = gate_report(records, tmp_path / "seq-records.json", "--sequential", "--order", "records")
    res = chk(DATA / "fly-w2.yaml", rep)
    assert not res.allowed
    assert any("order 'records'" in r and "fixed before the outcomes" in r for r in res.reasons), res.reasons


def test_a_sequential_report_with_a_chosen_seed_is_refused(records, tmp_path):
    rep = gate_report(records, tmp_path / "seq-seed.json", "--sequential", "--order-seed", 7)
    assert any("order seed is 7" in r for r in chk(DATA / "fly-w2.yaml", rep).reasons)


def test_a_sequential_report_in_the_seeded_order_is_evidence(records, tmp_path):
    rep = gate_report(records, tmp_path / "seq.json", "--sequential")
    res = chk(DATA / "fly-w2.yaml", rep)
    assert res.allowed, res.reasons
    assert res.evidence["verified"] == ["records"]


# ------------------------------------------------------------------ item 6: prompts


def test_a_report_paired_across_different_prompts_is_refused(records, tmp_path):
    i = ids()
    base, w2 = outcomes(N, 1, 1)
    d = tmp_path / "r"
    support.write_records(d / "target.jsonl", base, config=i["target"], mode="target", run_id="r")
    support.write_records(d / "fly-w2.jsonl", w2, config=i["fly-w2"], mode="fly", run_id="r", prompt="other ")
    key = {"QUALGATE_EVIDENCE_KEY": "secret"}
    rep = gate_report(d, tmp_path / "mismatch.json", "--prompt-mismatch", "report", env=key)
    shutil.rmtree(d)  # verified by its signature alone: the records cannot refuse it
    res = chk(DATA / "fly-w2.yaml", rep, key="secret")
    assert res.evidence["verified"] == ["signature"]
    assert any(f"{N} pairs differ in prompt_hash" in r for r in res.reasons), res.reasons


# ------------------------------------------------------------------ item 4: --allow-key


def test_allow_key_never_waives_a_key_that_changes_lossiness(records, tmp_path):
    rep = gate_report(records, tmp_path / "fixed.json")
    served = tmp_path / "tau5.yaml"
    served.write_text(
        (DATA / "fly-w2.yaml").read_text().replace("fly_entropy_threshold: 0.3", "fly_entropy_threshold: 5.0")
    )
    r = invoke(
        "check",
        "--vllm-version",
        "0.33.0",
        served,
        "--evidence",
        rep,
        "--max-margin",
        0.05,
        "--allow-key",
        "fly_entropy_threshold",
    )
    assert r.exit_code == 1, r.output
    assert "--allow-key fly_entropy_threshold: these keys can change what a lossy verifier accepts" in r.output
    # a key that only places the drafter is still waivable
    tp = (DATA / "fly-w2.yaml").read_text() + "  draft_tensor_parallel_size: 1\n"
    (tmp_path / "tp.yaml").write_text(tp)
    assert (
        invoke(
            "check",
            "--vllm-version",
            "0.33.0",
            tmp_path / "tp.yaml",
            "--evidence",
            rep,
            "--max-margin",
            0.05,
            "--allow-key",
            "draft_tensor_parallel_size",
        ).exit_code
        == 0
    )


# ------------------------------------------------------------------ item 5: the key


def test_an_empty_evidence_key_is_a_configuration_error(records, tmp_path):
    rep = gate_report(records, tmp_path / "fixed.json")
    r = invoke(
        "check",
        "--vllm-version",
        "0.33.0",
        DATA / "fly-w2.yaml",
        "--evidence",
        rep,
        "--max-margin",
        0.05,
        "--trust-unsigned",
        env={"QUALGATE_EVIDENCE_KEY": ""},
    )
    assert r.exit_code == 3, r.output
    assert "QUALGATE_EVIDENCE_KEY is set but empty" in r.output
    r = invoke("gate", records / "target.jsonl", records / "fly-w2.jsonl", "--margin", 0.05, "--output", tmp_path / "g.json",
               env={"QUALGATE_EVIDENCE_KEY": ""})  # fmt: skip
    assert r.exit_code == 3 and not (tmp_path / "g.json").exists(), r.output


def test_without_a_key_check_says_what_it_could_not_verify(records, tmp_path):
    rep = gate_report(records, tmp_path / "fixed.json")
    r = invoke(
        "check",
        "--vllm-version",
        "0.33.0",
        DATA / "fly-w2.yaml",
        "--evidence",
        rep,
        "--max-margin",
        0.05,
        env={"QUALGATE_EVIDENCE_KEY": None},
    )
    assert r.exit_code == 0, r.output
    assert "not verifiable without QUALGATE_EVIDENCE_KEY: the report's created_at" in r.output
    r = invoke(
        "check",
        "--vllm-version",
        "0.33.0",
        DATA / "fly-w2.yaml",
        "--evidence",
        rep,
        "--max-margin",
        0.05,
        env={"QUALGATE_EVIDENCE_KEY": "k"},
    )
    assert r.exit_code == 1 and "not verifiable without" not in r.output  # unsigned, and a key is set


# ------------------------------------------------------------------ item 10: reading and output


def test_a_newline_in_a_record_file_name_cannot_inject_workflow_commands(records, tmp_path):
    d = tmp_path / "evil"
    d.mkdir()
    shutil.copy(records / "target.jsonl", d / "target.jsonl")
    evil = d / "x\n::notice title=pwned::hello.jsonl"
    shutil.copy(records / "fly-w2.jsonl", evil)
    r = invoke(
        "gate",
        d / "target.jsonl",
        evil,
        "--margin",
        0.05,
        "--baseline-config",
        TARGET,
        "--candidate-config",
        DATA / "fly-w2.decoding.yaml",
        "--output",
        d / "g.json",
    )
    assert r.exit_code == 0, r.output
    c = invoke(
        "check", "--vllm-version", "0.33.0", DATA / "fly-w2.yaml", "--evidence", d / "g.json", "--max-margin", 0.05
    )
    for out in (r.output, c.output):
        assert not any(line.lstrip().startswith("::") for line in out.splitlines()), out


def test_relative_record_paths_are_found_beside_the_report_first(records, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("target.jsonl", "fly-w2.jsonl"):
        shutil.copy(records / name, run / name)
    monkeypatch.chdir(run)
    gate_report(Path("."), Path("gate.json"))
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "fly-w2.jsonl").write_text((run / "target.jsonl").read_text())  # another file, same name
    monkeypatch.chdir(other)
    res = chk(DATA / "fly-w2.yaml", run / "gate.json")
    assert res.allowed, res.reasons
    assert res.evidence["verified"] == ["records"]


# ------------------------------------------------------------------ item 11: crashes


def test_candidate_record_files_that_share_a_name_are_recomputed(records, tmp_path):
    # shards merged from several run directories: shard-0/records/fly-w2.jsonl, shard-1/...
    i = ids()
    base, w2 = outcomes(N, 1, 1)
    d = tmp_path / "split"
    support.write_records(d / "target.jsonl", base, config=i["target"], mode="target", run_id="r")
    recs = support.make_records(w2, config=i["fly-w2"], mode="fly", run_id="r")
    support.write_records(d / "cand" / "a.jsonl", recs[: N // 2])
    support.write_records(d / "cand" / "b.jsonl", recs[N // 2 :])
    rep = tmp_path / "split.json"
    r = invoke(
        "gate",
        d / "target.jsonl",
        d / "cand",
        "--margin",
        0.05,
        "--baseline-config",
        TARGET,
        "--candidate-config",
        DATA / "fly-w2.decoding.yaml",
        "--output",
        rep,
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(rep.read_text())
    for k, f in enumerate(doc["candidates"][0]["side"]["files"]):
        shard = d / f"shard-{k}" / "records"
        shard.mkdir(parents=True)
        f["path"] = str(Path(f["path"]).rename(shard / "fly-w2.jsonl"))
    rep.write_text(json.dumps(doc))
    res = chk(DATA / "fly-w2.yaml", rep)
    assert res.allowed and res.evidence["verified"] == ["records"], res.reasons


@pytest.mark.parametrize("age", ["99999999999d", "100000000000", "1e400"])
def test_a_huge_max_age_is_no_limit_not_a_crash(records, tmp_path, age):
    rep = gate_report(records, tmp_path / "fixed.json")
    r = invoke(
        "check",
        "--vllm-version",
        "0.33.0",
        DATA / "fly-w2.yaml",
        "--evidence",
        rep,
        "--max-margin",
        0.05,
        "--max-age",
        age,
    )
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output and "Overflow" not in r.output


def test_a_huge_max_questions_is_a_usage_error_and_a_large_one_a_verdict(records, tmp_path):
    args = ("gate", records / "target.jsonl", records / "fly-w2.jsonl", "--margin", 0.05, "--sequential")
    r = invoke(*args, "--max-questions", 10**30)
    assert r.exit_code == 2 and "--max-questions" in r.output, r.output
    rep = tmp_path / "seq.json"
    r = invoke(
        *args,
        "--max-questions",
        10**15,
        "--baseline-config",
        TARGET,
        "--candidate-config",
        DATA / "fly-w2.decoding.yaml",
        "--output",
        rep,
    )
    assert r.exit_code in (0, 4), r.output  # the budget is far away: a verdict, not an OverflowError
    assert json.loads(rep.read_text())["settings"]["max_questions"] == 10**15


def test_a_5001_digit_integer_in_a_serve_line_names_the_file(tmp_path):
    p = tmp_path / "serve.sh"
    p.write_text("vllm serve Qwen/Qwen3-8B --max-num-seqs " + "9" * 5001 + "\n")
    r = invoke("check", "--vllm-version", "0.33.0", p)
    assert r.exit_code == 3, r.output
    assert str(p) in r.output


def test_the_served_and_harness_ids_still_agree():
    assert read_serving_config(DATA / "fly-w2.yaml").config_id() == ids()["fly-w2"]


# ------------------------------------------------------------------ item 3: the config id


@pytest.mark.parametrize(
    "extra",
    [
        "quantization: fp8\n",
        "quantization_config: {activation_scheme: dynamic}\n",
        "hf-overrides: {num_hidden_layers: 1}\n",
        "revision: 0123abc\n",
        "tokenizer: Qwen/Qwen3-0.6B\n",
        "max-model-len: 4096\n",
        "enable-elastic-ep: true\n",
    ],
)
def test_evidence_for_fly_w2_does_not_cover_a_served_config_that_changes_outputs(records, tmp_path, extra):
    rep = gate_report(records, tmp_path / "fixed.json")
    served = tmp_path / "served.yaml"
    served.write_text((DATA / "fly-w2.yaml").read_text() + extra)
    res = chk(served, rep)
    assert not res.allowed, extra
    assert chk(DATA / "fly-w2.yaml", rep).allowed
