"""The importers on logs that others' runs wrote (issue 29), and on the older layouts of lm-eval.

Fixtures (each folder's README names its source): ``lm-eval-0.4.9.1/`` (real logs from
DanielKluev/pyFade, copied unchanged: chat runs of gsm8k, two runs of a group task in one
folder, 3 lines of 100 each), ``lm-eval-chat/`` (a fresh lm-eval 0.4.13 chat run written by
lm-eval itself, ``make_fixture.py``), ``lighteval-dummy/`` (real lighteval 0.13.0 details from
evaleval/every_eval_ever, copied unchanged: the dummy backend, a multiple-choice and a
generative task). The lm-eval 0.4.0 to 0.4.6 layouts are synthetic: the 0.4.13 fixture rewritten
into the structure lm-eval's own writer of those versions produced (cited at each test).
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
from qualgate.verdict.pairing import pair_records

FIXTURES = Path(__file__).parent / "fixtures"
PYFADE = FIXTURES / "lm-eval-0.4.9.1"
GSM8K = PYFADE / "gsm8k"
GROUP = PYFADE / "mmlu_pro_plus"
CHAT = FIXTURES / "lm-eval-chat" / "output" / "demo-chat"
LM_EVAL = FIXTURES / "lm-eval" / "output" / "target"
DUMMY = FIXTURES / "lighteval-dummy"
T1, T2 = "2025-09-09T13-31-53.431753", "2025-09-09T13-42-42.857006"
G1, G2 = "2025-10-14T14-44-39.372006", "2025-10-14T15-11-56.507865"


def _records(fmt, path, **options):
    return [x.record for x in import_records(fmt, path, ImportOptions(**options))]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _chat_messages(line: dict) -> list[dict]:
    (blob,) = line["arguments"]["gen_args_0"]["arg_0"]
    return [{"role": m["role"], "content": m["content"]} for m in json.loads(blob)]


# --- item 1: lm-eval chat runs (JsonChatStr) ---------------------------------------------------


def test_lm_eval_0_4_9_chat_run_hashes_its_chat_messages():
    samples = GSM8K / f"samples_gsm8k_{T1}.jsonl"
    lines = _lines(samples)
    assert all(m.get("type") == "text" for m in json.loads(lines[0]["arguments"]["gen_args_0"]["arg_0"][0]))
    records = _records("lm-eval", samples, partial=True)
    assert [r.question_id for r in records] == [str(x["doc_id"]) for x in lines] == ["16", "17", "18"]
    assert [r.outcome for r in records] == [("correct" if x["exact_match"] == 1 else "incorrect") for x in lines]
    for r, x in zip(records, lines):
        # the messages' role and content, as qualgate hashes its own chat prompts (lm-eval 0.4.9's
        # "type": "text" marker is not part of the prompt)
        assert r.prompt_hash == prompt_hash(_chat_messages(x))
        assert r.output == x["resps"][0][0] and r.answer_strict == x["filtered_resps"][0]
    # the two runs asked the same questions: the same prompt hashes
    other = _records("lm-eval", GSM8K / f"samples_gsm8k_{T2}.jsonl", partial=True)
    assert [r.prompt_hash for r in other] == [r.prompt_hash for r in records]


@pytest.mark.slow
def test_lm_eval_0_4_13_chat_run_has_the_prompt_hashes_of_the_qualgate_suite():
    from qualgate.suites import load_suite

    (samples,) = CHAT.glob("samples_*.jsonl")
    lines = [x for x in _lines(samples) if x["filter"] == "strict"]
    assert "type" not in json.loads(lines[0]["arguments"]["gen_args_0"]["arg_0"][0])[0]  # 0.4.13: no marker
    records = _records("lm-eval", CHAT, id_field="id", suite="demo_arithmetic", suite_version="2")
    suite = {q.id: q for q in load_suite("demo_arithmetic").questions}
    assert len(records) == 10
    # what `qualgate run` writes for these questions (runner: prompt_hash = Question.prompt_hash)
    assert [r.prompt_hash for r in records] == [suite[r.question_id].prompt_hash for r in records]
    assert [r.outcome for r in records] == ["correct", "incorrect"] * 5  # the server's answers (make_fixture.py)


def test_lm_eval_chat_run_pairs_with_qualgate_records_of_the_same_prompts(tmp_path):
    from qualgate.suites import load_suite

    cand = load_records(CHAT, options=ImportOptions(id_field="id", suite="demo_arithmetic", suite_version="2"))
    questions = {q.id: q for q in load_suite("demo_arithmetic").questions}
    base = [
        {
            "schema_version": 1,
            "run_id": "qg",
            "config_id": "qualgate-base",
            "suite": "demo_arithmetic",
            "suite_version": "2",
            "question_id": r.question_id,
            "seed": 0,
            "sample_index": 0,
            "outcome": "correct",
            "prompt_hash": questions[r.question_id].prompt_hash,
        }
        for r in cand
    ]
    (tmp_path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in base))
    pairing = pair_records(load_records(tmp_path / "base.jsonl"), cand)  # default: prompt mismatch refused
    assert pairing.n_pairs == 10 and "prompt_hash_differences" not in pairing.dropped


def test_lm_eval_one_element_list_that_is_not_chat_json_is_refused(tmp_path):
    shutil.copytree(CHAT, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    rows = _lines(samples)
    rows[3]["arguments"]["gen_args_0"]["arg_0"] = ["not json"]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r":4: field 'arguments.gen_args_0.arg_0' = 'not json': a one-element list"):
        _records("lm-eval", tmp_path / "run")


# --- item 2 and 3: lighteval multiple choice, and backends that record no input ---------------


def test_lighteval_multiple_choice_rows_take_their_metric_not_no_answer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records("lighteval", DUMMY)
    mc = [r for r in records if r.suite == "anli:r1|0"]
    # the dummy model's random logprobs scored acc 0 (lighteval's results: acc 0.0)
    assert [(r.question_id, r.outcome, r.output) for r in mc] == [
        ("776", "incorrect", None),
        ("507", "incorrect", None),
    ]
    shutil.copytree(DUMMY, tmp_path / "lv")
    (f,) = (tmp_path / "lv").rglob("details_anli*.parquet")
    rows = pq.read_table(f).to_pylist()
    assert rows[1]["model_response"]["text"] == [] and rows[1]["doc"]["sampling_methods"] == ["LOGPROBS"]
    rows[1]["metric"] = {"acc": 1}
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(f)), f)
    assert [r.outcome for r in _records("lighteval", tmp_path / "lv") if r.suite == "anli:r1|0"] == [
        "incorrect",
        "correct",
    ]


def test_lighteval_loglikelihood_row_with_an_input_takes_its_metric(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the committed 0.13.0 fixture (input recorded, as the vLLM backend does) with a row made a
    # loglikelihood row as lighteval writes one: no text, sampling method LOGPROBS
    shutil.copytree(FIXTURES / "lighteval", tmp_path / "lv")
    (f,) = (tmp_path / "lv").rglob("details_*.parquet")
    rows = pq.read_table(f).to_pylist()
    rows[0]["model_response"]["text"], rows[0]["doc"]["sampling_methods"] = [], ["LOGPROBS"]
    pq.write_table(pa.Table.from_pylist(rows), f)
    first = _records("lighteval", tmp_path / "lv")[0]
    assert rows[0]["metric"] == {"exact_match": 1.0} and (first.outcome, first.output) == ("correct", None)


def test_lighteval_generative_row_with_an_empty_text_is_still_no_answer():
    # the committed 0.13.0 fixture's last row: a generated empty response, scored 0
    records = _records("lighteval", FIXTURES / "lighteval")
    assert records[-1].outcome == "no_answer"


def test_lighteval_row_without_input_hashes_the_documents_query(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _records("lighteval", DUMMY)
    rows = {}
    for f in DUMMY.rglob("details_*.parquet"):
        for row in pq.read_table(f).to_pylist():
            assert row["model_response"]["input"] is None  # the dummy backend records no input
            rows[row["doc"]["id"]] = row
    assert len(records) == 4
    assert all(r.prompt_hash == prompt_hash(rows[r.question_id]["doc"]["query"]) for r in records)
    shutil.copytree(DUMMY, tmp_path / "lv")
    (f,) = (tmp_path / "lv").rglob("details_squad*.parquet")
    broken = pq.read_table(f).to_pylist()
    broken[0]["doc"]["query"] = None
    pq.write_table(pa.Table.from_pylist(broken, schema=pq.read_schema(f)), f)
    with pytest.raises(DataError, match=r"squad_v2\|0_.*\.parquet:1: field 'model_response.input': no prompt recorded"):
        _records("lighteval", tmp_path / "lv")


# --- item 4: lm-eval before 0.4.7 -------------------------------------------------------------


def _pre_0_4_7(rows: list[dict]) -> list[dict]:
    """Lines as lm-eval 0.4.3 to 0.4.6 wrote them (``lm_eval/evaluator.py`` at v0.4.6: the sample
    dict has no ``filter`` and no ``metrics``; filter by filter in filter_list order)."""
    return [{k: v for k, v in r.items() if k not in ("filter", "metrics")} for r in rows]


def test_lm_eval_0_4_3_to_0_4_6_lines_take_filter_from_position_and_metric_from_the_task(tmp_path):
    shutil.copytree(LM_EVAL, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    rows = _lines(samples)
    assert [r["filter"] for r in rows] == ["strict"] * 10 + ["lenient"] * 10
    samples.write_text("".join(json.dumps(r) + "\n" for r in _pre_0_4_7(rows)))
    for flt in ("strict", "lenient"):
        old, new = _records("lm-eval", tmp_path / "run", filter=flt), _records("lm-eval", LM_EVAL, filter=flt)
        assert [(r.question_id, r.outcome, r.answer_strict, r.prompt_hash, r.decided_by) for r in old] == [
            (r.question_id, r.outcome, r.answer_strict, r.prompt_hash, r.decided_by) for r in new
        ]


def test_lm_eval_lines_without_filter_that_are_not_in_filter_blocks_are_refused_naming_the_version(tmp_path):
    shutil.copytree(LM_EVAL, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    rows = _pre_0_4_7(_lines(samples))
    rows = rows[:5] + rows[10:15] + rows[5:10] + rows[15:]  # two ranks' lines, gathered
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        DataError,
        match=r"20 lines without 'filter' \(lm-eval 0.4.13: lm-eval writes 'filter' "
        r"from 0.4.7\) cannot be assigned to the task's 2 filters \(strict, lenient\)",
    ):
        _records("lm-eval", tmp_path / "run")


def test_lm_eval_0_4_0_to_0_4_2_results_json_and_json_array_samples_are_read(tmp_path):
    """lm-eval v0.4.2 ``__main__.py``: ``results.json`` in --output_path and, per task,
    ``<model_args with / and = as __>_<task>.jsonl`` holding ``json.dumps(samples, indent=2)``;
    its sample dict has doc_id, doc, target, arguments (a list of each request's args),
    resps, filtered_resps and the metrics."""
    (results,) = LM_EVAL.glob("results_*.json")
    data = json.loads(results.read_text())
    keep = ("results", "configs", "versions", "n-shot", "config", "git_hash")
    legacy = {k: data[k] for k in keep if k in data}
    legacy["config"] = dict(legacy["config"], model_args="pretrained=target,dtype=float32")  # 0.4.2: a string
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps(legacy, indent=2))
    (samples,) = LM_EVAL.glob("samples_*.jsonl")
    rows = [
        {
            "doc_id": r["doc_id"],
            "doc": r["doc"],
            "target": r["target"],
            "arguments": [[r["arguments"]["gen_args_0"]["arg_0"], r["arguments"]["gen_args_0"]["arg_1"]]],
            "resps": r["resps"],
            "filtered_resps": r["filtered_resps"],
            "exact_match": r["exact_match"],
        }
        for r in _lines(samples)
    ]
    name = "pretrained__target,dtype__float32_demo_arith.jsonl"
    (out / name).write_text(json.dumps(rows, indent=2))
    assert detect_format(out) == "lm-eval" and detect_format(out / name) == "lm-eval"
    old, new = _records("lm-eval", out), _records("lm-eval", LM_EVAL)
    assert [(r.question_id, r.outcome, r.answer_strict, r.prompt_hash, r.suite_version) for r in old] == [
        (r.question_id, r.outcome, r.answer_strict, r.prompt_hash, r.suite_version) for r in new
    ]
    assert len({r.config_id for r in old}) == 1 and old[0].run_id == "lm-eval-out"
    assert _records("lm-eval", out / name) == old


def test_lm_eval_samples_named_json_are_read_as_jsonl(tmp_path):
    shutil.copytree(LM_EVAL, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    samples.rename(samples.with_suffix(".json"))
    assert detect_format(tmp_path / "run") == "lm-eval"
    assert _records("lm-eval", tmp_path / "run") == _records("lm-eval", LM_EVAL)


# --- item 5: a folder of several runs; one side as a run's several files ----------------------


def test_lm_eval_folder_of_two_runs_is_refused_naming_each_run_and_how_to_pick_one():
    with pytest.raises(DataError) as err:
        _records("lm-eval", GROUP, partial=True)
    text = str(err.value)
    assert "2 runs of different configurations here" in text
    assert f"results_{G1}.json (config lm-eval-" in text and f"results_{G2}.json (config lm-eval-" in text
    assert f"e.g. qualgate gate {GROUP / f'results_{G1}.json'} {GROUP / f'results_{G2}.json'}" in text


def test_lm_eval_results_file_stands_for_its_runs_subtasks():
    records = _records("lm-eval", GROUP / f"results_{G1}.json", partial=True)
    assert sorted({r.suite for r in records}) == [
        "mmlu_pro_plus_chemistry",
        "mmlu_pro_plus_health",
        "mmlu_pro_plus_psychology",
    ]
    assert len(records) == 9 and len({r.config_id for r in records}) == 1
    base = load_records(GROUP / f"results_{G1}.json", options=ImportOptions(partial=True))
    cand = load_records(GROUP / f"results_{G2}.json", options=ImportOptions(partial=True))
    pairing = pair_records(base, cand)
    assert pairing.n_pairs == 9
    # the pairs agree with the samples: the real exact_match of both runs
    lines = {
        (p.name.split("_2025")[0], x["doc_id"]): x["exact_match"]
        for p in GROUP.glob("samples_*")
        for x in _lines(p)
        if G2 in p.name
    }
    assert int(pairing.candidate_correct.sum()) == int(sum(lines.values()))


def test_import_command_refuses_a_folder_of_two_runs_and_reads_one_runs_results_file(tmp_path):
    r = CliRunner().invoke(
        cli, ["import", "lm-eval", str(GSM8K), "--out", str(tmp_path / "x.jsonl"), "--allow-partial"]
    )
    assert r.exit_code == 3 and f"results_{T1}.json" in r.output and f"results_{T2}.json" in r.output
    assert not (tmp_path / "x.jsonl").exists()
    two = [str(GSM8K / f"samples_gsm8k_{t}.jsonl") for t in (T1, T2)]
    r = CliRunner().invoke(cli, ["import", "lm-eval", *two, "--out", str(tmp_path / "x.jsonl"), "--allow-partial"])
    assert r.exit_code == 3 and "2 runs of different configurations" in r.output
    r = CliRunner().invoke(
        cli,
        ["import", "lm-eval", str(GSM8K / f"results_{T1}.json"), "--out", str(tmp_path / "x.jsonl"), "--allow-partial"],
    )
    assert r.exit_code == 0, r.output
    assert len(load_records(tmp_path / "x.jsonl")) == 3


def test_two_runs_of_one_config_on_other_tasks_are_one_side(tmp_path):
    for name in ("a", "b"):
        shutil.copytree(LM_EVAL, tmp_path / name)
    (samples,) = (tmp_path / "b").glob("samples_*.jsonl")
    (results,) = (tmp_path / "b").glob("results_*.json")
    t = "2026-11-30T08-00-00.000000"
    data = json.loads(results.read_text())
    for key in ("configs", "versions", "n-samples"):
        data[key]["demo_arith2"] = data[key].pop("demo_arith")
    results.unlink()
    (tmp_path / "b" / f"results_{t}.json").write_text(json.dumps(data))
    samples.rename(tmp_path / "b" / f"samples_demo_arith2_{t}.jsonl")
    records = _records("lm-eval", tmp_path)
    assert len(records) == 20 and {r.suite for r in records} == {"demo_arith", "demo_arith2"}
    shutil.copytree(LM_EVAL, tmp_path / "c")  # the same task again, another run: refused
    with pytest.raises(DataError, match="3 runs of the same tasks here"):
        _records("lm-eval", tmp_path)


# --- item 6: truncated lm-eval logs -----------------------------------------------------------


def test_lm_eval_log_with_fewer_documents_than_n_samples_is_refused(tmp_path):
    samples = GSM8K / f"samples_gsm8k_{T1}.jsonl"
    with pytest.raises(
        DataError,
        match=r"field 'doc_id': 3 documents of the 100 the run evaluated "
        r"\(n-samples.gsm8k.effective of results_2025-09-09T13-31-53.431753.json\)",
    ):
        _records("lm-eval", samples)
    r = CliRunner().invoke(cli, ["import", "lm-eval", str(samples), "--out", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 3 and "--allow-partial" in r.output
    assert len(_records("lm-eval", samples, partial=True)) == 3
    assert len(_records("lm-eval", LM_EVAL)) == 10  # complete: n-samples effective 10


def test_lighteval_folder_of_two_runs_is_refused_naming_each_results_file(tmp_path):
    for src in (FIXTURES / "lighteval", DUMMY):
        shutil.copytree(src, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md", "*.py"))
    with pytest.raises(DataError) as err:
        _records("lighteval", tmp_path)
    text = str(err.value)
    assert "2 runs of different configurations here" in text
    assert "results/demo-target/results_2026-11-30T07-34-57.622487.json (config lighteval-" in text
    assert "results/eee-smoke/dummy-model/results_2026-08-10T17-22-11.385681.json (config lighteval-" in text
    assert len(_records("lighteval", tmp_path / "details" / "eee-smoke")) == 4  # one run's details folder


def test_lm_eval_multiple_choice_lines_take_their_metric():
    run = FIXTURES / "lm-eval-mc" / "output" / "target"
    (samples,) = run.glob("samples_*.jsonl")
    lines = _lines(samples)
    assert lines[0]["metrics"] == ["acc", "acc_norm"]  # two metrics, and lm-eval names no primary one
    with pytest.raises(DataError, match=r"2 metrics could be the outcome \(acc, acc_norm\) .* --metric acc"):
        _records("lm-eval", run)
    records = _records("lm-eval", run, metric="acc")
    assert len(records) == 10 and len(lines[0]["arguments"]) == 2  # one loglikelihood request per choice
    assert [r.outcome for r in records] == [("correct" if x["acc"] == 1 else "incorrect") for x in lines]
    assert [r.outcome for r in records] == ["correct", "incorrect"] * 5  # lm-eval's results: acc 0.5
    assert all(r.answer_strict is None and r.output is None for r in records)
    assert (
        records[0].prompt_hash == prompt_hash(lines[0]["arguments"]["gen_args_0"]["arg_0"]) == lines[0]["prompt_hash"]
    )
    assert [r.outcome for r in _records("lm-eval", run, metric="acc_norm")] == ["correct", "incorrect"] * 5


def test_every_row_of_the_compatibility_table_names_tests_that_exist():
    import re

    from support import REPO

    text = (REPO / "docs" / "importers.md").read_text(encoding="utf-8")
    table = text.split("## Compatibility", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| tool")]
    rows = [r for r in rows if not set(r) <= set("|- ")]
    assert len(rows) >= 20
    here = Path(__file__).parent
    for row in rows:
        file, names = None, []
        for ref in re.findall(r"`([\w.]*::\w+(?:\[\w+\])?)`", row.rsplit("|", 2)[1]):
            part, name = ref.split("::")
            file = part or file
            names.append((file, name))
        assert names, row
        for file, name in names:
            assert re.search(rf"^def {name}\(", (here / file).read_text(), re.M), (file, name)
