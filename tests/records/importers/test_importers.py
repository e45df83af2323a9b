"""Importers of lm-eval, NeMo Evaluator and lighteval logs, on fixtures their own writers made.

Each fixture folder has a README naming the tool version and the command. Refusals are
checked on copies of the fixtures with one thing broken.
"""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.records.importers import ImportOptions, detect_format, import_records, load_records
from qualgate.records.prompts import prompt_hash
from qualgate.verdict.flips import find_flips

FIXTURES = Path(__file__).parent / "fixtures"
LM_EVAL = FIXTURES / "lm-eval"
NEMO = FIXTURES / "nemo-evaluator"
LIGHTEVAL = FIXTURES / "lighteval"


def _records(fmt, path, **options):
    return [x.record for x in import_records(fmt, path, ImportOptions(**options))]


def _samples(folder: Path) -> Path:
    return next(folder.rglob("samples_*.jsonl"))


@pytest.fixture
def lm_copy(tmp_path):
    """A copy of the lm-eval target run (output folder with the nested model folder)."""
    dst = tmp_path / "lm"
    shutil.copytree(LM_EVAL / "output" / "target", dst / "target")
    return dst


def _rewrite(path: Path, edit):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = edit(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (LM_EVAL / "output", "lm-eval"),
        (LM_EVAL / "output" / "target", "lm-eval"),
        (NEMO, "nemo-evaluator"),
        (NEMO / "results.jsonl", "nemo-evaluator"),
        (LIGHTEVAL, "lighteval"),
    ],
)
def test_each_tool_layout_is_detected(path, fmt):
    assert detect_format(path) == fmt


def test_qualgate_records_are_detected_as_qualgate(tmp_path):
    (tmp_path / "r.jsonl").write_text("")
    assert detect_format(tmp_path / "r.jsonl") == "qualgate"


# --- lm-eval ------------------------------------------------------------------------------------


def test_lm_eval_keeps_one_line_per_question_of_the_first_filter():
    path = _samples(LM_EVAL / "output" / "target")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert {x["filter"] for x in lines} == {"strict", "lenient"}  # one line per (question, filter)
    records = _records("lm-eval", LM_EVAL / "output" / "target")
    strict = [x for x in lines if x["filter"] == "strict"]
    assert len(records) == len(strict) == 10
    for r, x in zip(records, strict):
        assert r.question_id == str(x["doc_id"]) and r.suite == "demo_arith" and r.suite_version == "1.0"
        assert r.answer_strict == x["filtered_resps"][0] and r.gold == x["target"]
        assert r.output == x["resps"][0][0]
        assert r.outcome == ("correct" if x["exact_match"] == 1 else "incorrect")
        assert r.decided_by == "lm-eval:strict:exact_match"  # filter and metric read
        # the text prompt hash is the sha256 of lm-eval's rendered context (lm-eval's own prompt_hash)
        assert r.prompt_hash == prompt_hash(x["arguments"]["gen_args_0"]["arg_0"]) == x["prompt_hash"]


def test_lm_eval_filter_option_chooses_the_lenient_lines():
    records = _records("lm-eval", LM_EVAL / "output" / "target", filter="lenient")
    lines = [json.loads(x) for x in _samples(LM_EVAL / "output" / "target").read_text().splitlines()]
    assert [r.answer_strict for r in records] == [x["filtered_resps"][0] for x in lines if x["filter"] == "lenient"]


def test_lm_eval_id_field_and_config_id_come_from_the_recorded_run():
    target = _records("lm-eval", LM_EVAL / "output" / "target", id_field="id")
    drafter = _records("lm-eval", LM_EVAL / "output" / "drafter", id_field="id")
    assert [r.question_id for r in target][:2] == ["test-0-0", "test-0-1"]
    # config id: from the recorded model arguments (pretrained=target vs drafter)
    assert len({r.config_id for r in target}) == 1 and target[0].config_id != drafter[0].config_id
    assert target[0].config_id.startswith("lm-eval-")


def test_lm_eval_invalid_extraction_becomes_no_answer(lm_copy):
    path = _samples(lm_copy)
    _rewrite(
        path,
        lambda rows: [dict(r, filtered_resps=["[invalid]"], exact_match=0.0) if r["doc_id"] == 3 else r for r in rows],
    )
    (r3,) = [r for r in _records("lm-eval", lm_copy) if r.question_id == "3"]
    assert r3.outcome == "no_answer" and r3.answer_strict is None


def test_lm_eval_refuses_a_question_twice_under_one_filter(lm_copy):
    path = _samples(lm_copy)
    _rewrite(path, lambda rows: rows + [rows[0]])
    with pytest.raises(DataError, match=rf"{path.name}:21: field 'doc_id' = 0: document 0 with filter 'strict' twice"):
        _records("lm-eval", lm_copy)


def test_lm_eval_refuses_a_score_that_is_not_0_or_1(lm_copy):
    path = _samples(lm_copy)
    _rewrite(path, lambda rows: [dict(r, exact_match=0.5) if i == 2 else r for i, r in enumerate(rows)])
    with pytest.raises(DataError, match=r":3: field 'exact_match' = '0.5': a score other than 0 or 1"):
        _records("lm-eval", lm_copy)


def test_lm_eval_refuses_a_line_without_its_prompt(lm_copy):
    path = _samples(lm_copy)
    _rewrite(
        path,
        lambda rows: [{k: v for k, v in r.items() if k != "arguments"} if i == 4 else r for i, r in enumerate(rows)],
    )
    with pytest.raises(DataError, match=r":5: field 'arguments': required field is missing"):
        _records("lm-eval", lm_copy)


def test_lm_eval_refuses_several_responses_for_one_request(lm_copy):
    path = _samples(lm_copy)
    _rewrite(path, lambda rows: [dict(r, resps=[["a", "b"]]) if i == 8 else r for i, r in enumerate(rows)])
    with pytest.raises(DataError, match=r":9: field 'resps': several responses for one request \(repeats\)"):
        _records("lm-eval", lm_copy)


def test_lm_eval_refuses_an_unknown_filter():
    with pytest.raises(DataError, match=r"field 'filter' = 'flexible': no filter 'flexible' in this task"):
        _records("lm-eval", LM_EVAL / "output" / "target", filter="flexible")


def test_lm_eval_samples_without_results_need_a_config_id(lm_copy):
    for f in lm_copy.rglob("results_*.json"):
        f.unlink()
    with pytest.raises(DataError, match=r"no results_.*\.json beside this samples file"):
        _records("lm-eval", lm_copy)
    records = _records("lm-eval", lm_copy, config_id="my-config", suite_version="1")
    assert {r.config_id for r in records} == {"my-config"} and len(records) == 10


# --- NeMo Evaluator -----------------------------------------------------------------------------


def test_nemo_maps_problem_repeat_reward_and_failures():
    records = _records("nemo-evaluator", NEMO)
    rows = [json.loads(x) for x in (NEMO / "results.jsonl").read_text().splitlines()]
    assert [(r.question_id, r.sample_index) for r in records] == [(str(x["problem_idx"]), x["repeat"]) for x in rows]
    assert [r.outcome for r in records] == ["correct", "correct", "incorrect", "correct", "no_answer", "error"]
    assert records[-1].error == "ConnectionError: server closed the connection"
    assert records[0].suite == "demo_arith" and records[0].seed == 0 and records[0].latency_s == pytest.approx(0.035)
    # the chat request: the bundle's system prompt, then the prompt as the user message
    system = "End with: The answer is N."
    assert records[0].prompt_hash == prompt_hash(
        [{"role": "system", "content": system}, {"role": "user", "content": rows[0]["prompt"]}]
    )
    assert [r.question_id for r in _records("nemo-evaluator", NEMO, id_field="id")][:3] == [
        "arith-0",
        "arith-0",
        "arith-1",
    ]


def test_nemo_refuses_partial_credit_naming_the_line(tmp_path):
    shutil.copytree(NEMO, tmp_path / "run")
    _rewrite(
        tmp_path / "run" / "results.jsonl",
        lambda rows: [dict(r, reward=0.5) if i == 3 else r for i, r in enumerate(rows)],
    )
    with pytest.raises(DataError, match=r"results.jsonl:4: field 'reward' = '0.5': a score other than 0 or 1"):
        _records("nemo-evaluator", tmp_path / "run")


def test_nemo_refuses_a_string_problem_idx(tmp_path):
    shutil.copytree(NEMO, tmp_path / "run")
    _rewrite(
        tmp_path / "run" / "results.jsonl",
        lambda rows: [dict(r, problem_idx="0") if i == 1 else r for i, r in enumerate(rows)],
    )
    with pytest.raises(DataError, match=r"results.jsonl:2: field 'problem_idx' = \"'0'\": must be int"):
        _records("nemo-evaluator", tmp_path / "run")


def test_nemo_results_without_a_bundle_need_a_config_id_and_suite(tmp_path):
    shutil.copy(NEMO / "results.jsonl", tmp_path / "results.jsonl")
    with pytest.raises(DataError, match="no run bundle"):
        _records("nemo-evaluator", tmp_path / "results.jsonl")
    records = _records("nemo-evaluator", tmp_path / "results.jsonl", config_id="c", suite="arith")
    assert len(records) == 6 and records[0].suite == "arith"


# --- lighteval ----------------------------------------------------------------------------------


def test_lighteval_maps_nested_doc_response_and_metric():
    records = _records("lighteval", LIGHTEVAL)
    assert [r.question_id for r in records] == ["test-0-0", "test-0-1", "test-0-2", "test-0-3"]
    assert [r.outcome for r in records] == ["correct", "incorrect", "correct", "no_answer"]
    assert [r.gold for r in records] == ["444", "397", "19", "15"]
    assert records[0].suite == "demo_arith" and records[0].suite_version == "1" and records[0].seed == 0
    assert records[0].config_id.startswith("lighteval-")
    # the same rendered prompt text as lm-eval's for the same demo question: the same hash
    lm = _records("lm-eval", LM_EVAL / "output" / "target", id_field="id")
    assert records[0].prompt_hash == lm[0].prompt_hash and records[1].prompt_hash == lm[1].prompt_hash


def test_lighteval_refuses_a_non_binary_metric(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(LIGHTEVAL, tmp_path / "lv")
    (f,) = (tmp_path / "lv").rglob("details_*.parquet")
    rows = pq.read_table(f).to_pylist()
    rows[2]["metric"] = {"exact_match": 0.25}
    pq.write_table(pa.Table.from_pylist(rows), f)
    with pytest.raises(DataError, match=r"\.parquet:3: field 'metric.exact_match' = '0.25'"):
        _records("lighteval", tmp_path / "lv")


# --- the command line ---------------------------------------------------------------------------


def test_import_command_writes_records_the_gate_reads(tmp_path):
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, ["import", "lm-eval", str(LM_EVAL / "output" / "target"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert len(load_records(out)) == 10 and "wrote 10 records" in r.output
    again = CliRunner().invoke(cli, ["import", "lm-eval", str(LM_EVAL / "output"), "--out", str(out)])
    assert again.exit_code == 2 and "exists" in again.output


def test_import_command_refusal_is_exit_3_naming_file_line_field(tmp_path, lm_copy):
    path = _samples(lm_copy)
    _rewrite(path, lambda rows: [dict(r, exact_match="yes") if i == 6 else r for i, r in enumerate(rows)])
    r = CliRunner().invoke(cli, ["import", "lm-eval", str(lm_copy), "--out", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 3 and f"{path}:7: field 'exact_match'" in r.output
    assert not (tmp_path / "x.jsonl").exists()


def test_gate_reads_two_lm_eval_output_folders_directly(tmp_path):
    args = [
        "gate",
        str(LM_EVAL / "output" / "target"),
        str(LM_EVAL / "output" / "drafter"),
        "--margin",
        "0.05",
        "--format",
        "json",
    ]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 4, r.output
    report = json.loads(r.stdout)
    (c,) = report["candidates"]
    flips = c["flips"]
    assert c["pooled"]["lost"] == flips["lost"] and c["pooled"]["gained"] == flips["gained"]
    assert flips["lost"] + flips["gained"] == len(flips["flips"]) > 0
    first = flips["flips"][0]
    assert {"gold", "baseline_answer", "candidate_answer", "baseline_output", "candidate_output"} <= first.keys()


def test_calibrate_reads_nemo_results_directly():
    r = CliRunner().invoke(cli, ["calibrate", str(NEMO), str(NEMO), "--max-errors", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    # 5 answered pairs and the errored one, which both sides' worst case counts as lost (a
    # baseline gap is imputed like a candidate gap: issue 34 item 2)
    assert json.loads(r.stdout)["pairs"] == 6


def test_flips_command_lists_every_lost_and_gained_question_as_csv():
    r = CliRunner().invoke(
        cli,
        [
            "flips",
            str(LM_EVAL / "output" / "target"),
            str(LM_EVAL / "output" / "drafter"),
            "--format",
            "csv",
            "--id-field",
            "id",
        ],
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("kind,suite,question_id,seed,sample_index,gold,")
    target = {x.question_id: x for x in _records("lm-eval", LM_EVAL / "output" / "target", id_field="id")}
    drafter = {x.question_id: x for x in _records("lm-eval", LM_EVAL / "output" / "drafter", id_field="id")}
    lost = sorted(q for q in target if target[q].outcome == "correct" and drafter[q].outcome != "correct")
    gained = sorted(q for q in target if target[q].outcome != "correct" and drafter[q].outcome == "correct")
    assert sorted(line.split(",")[2] for line in lines[1:] if line.startswith("lost,")) == lost
    assert sorted(line.split(",")[2] for line in lines[1:] if line.startswith("gained,")) == gained


def test_prompt_hash_command_hashes_text_exactly_and_messages_canonically(tmp_path):
    (tmp_path / "p.txt").write_text("What is 2 + 2?", encoding="utf-8")
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    (tmp_path / "m.json").write_text(json.dumps(messages, indent=2), encoding="utf-8")
    r = CliRunner().invoke(cli, ["prompt-hash", str(tmp_path / "p.txt")])
    assert r.exit_code == 0 and r.output == prompt_hash("What is 2 + 2?") + "\n"
    r = CliRunner().invoke(cli, ["prompt-hash", "--messages", str(tmp_path / "m.json")])
    assert r.exit_code == 0 and r.output == prompt_hash(messages) + "\n"
    r = CliRunner().invoke(cli, ["prompt-hash", "--messages", str(tmp_path / "p.txt")])
    assert r.exit_code == 3 and "not a JSON list of message objects" in r.output


def test_the_readme_command_gates_two_lm_eval_runs():
    import shlex

    from support import REPO

    (line,) = [x for x in (REPO / "README.md").read_text().splitlines() if x.startswith("qualgate gate lm-eval-out/")]
    words = shlex.split(line)[1:]
    paths = {
        "lm-eval-out/baseline": LM_EVAL / "output" / "target",
        "lm-eval-out/candidate": LM_EVAL / "output" / "drafter",
    }
    r = CliRunner().invoke(cli, [str(paths.get(w, w)) for w in words])
    assert r.exit_code == 4, r.output
    assert "baseline: " in r.output and "2 lost, 0 gained" in r.output


@pytest.mark.slow
def test_the_gate_html_page_lists_the_flips_of_lm_eval_runs(tmp_path):
    pytest.importorskip("matplotlib")
    page = tmp_path / "gate.html"
    r = CliRunner().invoke(
        cli,
        [
            "gate",
            str(LM_EVAL / "output" / "target"),
            str(LM_EVAL / "output" / "drafter"),
            "--margin",
            "0.05",
            "--id-field",
            "id",
            "--html",
            str(page),
        ],
    )
    assert r.exit_code == 4, r.output
    runs = [_records("lm-eval", LM_EVAL / "output" / m, id_field="id") for m in ("target", "drafter")]
    lost = [f.question_id for f in find_flips(*runs).lost]
    assert lost and all(qid in page.read_text() for qid in lost)
