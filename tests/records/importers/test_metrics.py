"""Issue 49: the metric a log is gated on is never guessed; partial runs, cut files and lmms-eval logs.

Fixtures: ``lighteval-0.11-idk/`` (a real lighteval run with four metrics a row, README),
``lm-eval/`` and ``lm-eval-mc/`` (lm-eval 0.4.13 runs), ``lm-eval-0.4.9.1/`` (real group-task runs).
"""

import json
import shutil
from pathlib import Path

import pytest

from qualgate.errors import DataError
from qualgate.records.importers import ImportOptions, import_records, load_records
from qualgate.verdict.pairing import pair_records

FIXTURES = Path(__file__).parent / "fixtures"
IDK = FIXTURES / "lighteval-0.11-idk"
LM_EVAL = FIXTURES / "lm-eval" / "output" / "target"
MC = FIXTURES / "lm-eval-mc" / "output" / "target"
GROUP = FIXTURES / "lm-eval-0.4.9.1" / "mmlu_pro_plus"


def _records(fmt, path, **options):
    return [x.record for x in import_records(fmt, path, ImportOptions(**options))]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_lighteval_row_with_several_metrics_is_refused_without_a_primary_one():
    # the row's first metric (alphabetical) is extract_fail, a failure flag: never read
    with pytest.raises(
        DataError, match=r"2 metrics could be the outcome \(idk_score, trad_score\) .*--metric idk_score"
    ):
        _records("lighteval", IDK)


def test_lighteval_row_with_several_metrics_is_read_on_metric():
    import pyarrow.parquet as pq

    records = _records("lighteval", IDK, metric="trad_score")
    (f,) = IDK.rglob("details_*.parquet")
    rows = pq.read_table(f).to_pylist()
    assert [r.outcome for r in records] == [
        ("correct" if x["metric"]["trad_score"] == 1 else "incorrect") for x in rows
    ]
    assert [r.outcome for r in records] == ["correct", "incorrect", "correct", "correct", "incorrect"]
    assert {r.decided_by for r in records} == {"lighteval:trad_score"}
    with pytest.raises(DataError, match=r"metric.idk_score' = '-1.0': a score other than 0 or 1"):
        _records("lighteval", IDK, metric="idk_score")


def test_lighteval_reads_the_one_metric_its_results_do_not_declare_lower_is_better(tmp_path):
    shutil.copytree(IDK, tmp_path / "lv", ignore=shutil.ignore_patterns("*.md"))
    (res,) = (tmp_path / "lv").rglob("results_*.json")
    data = json.loads(res.read_text())
    (metric,) = data["config_tasks"]["community|lexam-en-idk|0"]["metrics"]
    metric["higher_is_better"]["idk_score"] = False  # the task as declared, with idk_score a penalty
    res.write_text(json.dumps(data))
    records = _records("lighteval", tmp_path / "lv")
    assert {r.decided_by for r in records} == {"lighteval:trad_score"}
    assert sum(r.outcome == "correct" for r in records) == 3


def test_lm_eval_0_4_5_line_without_metrics_list_is_read_on_its_metric_and_on_metric(tmp_path):
    """A kobest_sentineg-style 0.4.5 line: no ``filter``, no ``metrics``, the metric as a key
    (lm-eval v0.4.5 ``evaluator.py``: ``example.update(metrics)``), whatever ``metric_list`` says."""
    shutil.copytree(LM_EVAL, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    rows = [{k: v for k, v in r.items() if k not in ("filter", "metrics")} for r in _lines(samples)]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (res,) = (tmp_path / "run").glob("results_*.json")
    data = json.loads(res.read_text())
    data["configs"]["demo_arith"]["metric_list"] = [{"metric": "acc"}]  # names none the lines carry
    res.write_text(json.dumps(data))
    new = _records("lm-eval", LM_EVAL)
    for options in ({}, {"metric": "exact_match"}):
        old = _records("lm-eval", tmp_path / "run", **options)
        assert [(r.question_id, r.outcome, r.decided_by) for r in old] == [
            (r.question_id, r.outcome, r.decided_by) for r in new
        ]
    with pytest.raises(DataError, match=r"no metric 'acc' on this line \(metrics: exact_match\)"):
        _records("lm-eval", tmp_path / "run", metric="acc")


def test_lm_eval_results_file_listing_tasks_without_samples_files_is_refused_as_partial(tmp_path):
    t = "2025-10-14T14-44-39.372006"
    records_all = _records("lm-eval", GROUP / f"results_{t}.json", partial=True)
    assert len(records_all) == 9  # 3 subtasks' samples files of the 14 the results list
    with pytest.raises(DataError, match=r"a partial run: results_.* lists 14 tasks .* 11 have no samples_") as err:
        _records("lm-eval", GROUP / f"results_{t}.json")
    assert "mmlu_pro_plus_biology" in str(err.value) and "--allow-partial" in str(err.value)


def test_lm_eval_file_cut_at_the_front_names_the_missing_doc_id(tmp_path):
    shutil.copytree(LM_EVAL, tmp_path / "run")
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    rows = [{k: v for k, v in r.items() if k not in ("doc_id", "filter", "metrics")} for r in _lines(samples)]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r":1: field 'doc_id': 20 of 20 lines have no 'doc_id'.*cut at the front"):
        _records("lm-eval", tmp_path / "run")


def test_lmms_eval_log_is_refused_as_its_own_format(tmp_path):
    """lmms-eval (``lmms_eval/loggers/evaluation_tracker.py`` at EvolvingLMMs-Lab/lmms-eval
    0716c69): ``<model>/<date_id>_results.json`` with ``lmms_eval_version`` and
    ``<date_id>_samples_<task>.jsonl`` whose lines lose ``doc`` and ``arguments`` (``input``: the
    first argument)."""
    from qualgate.records.importers import detect_format

    run = tmp_path / "llava"
    run.mkdir()
    (run / "20241220_050832_results.json").write_text(
        json.dumps({"results": {"mme": {"alias": "mme"}}, "configs": {"mme": {}}, "lmms_eval_version": "0.3.0"})
    )
    line = {"doc_id": 0, "target": "Yes", "filtered_resps": ["Yes"], "input": "Is there a dog?", "mme_score": 1}
    (run / "20241220_050832_samples_mme.jsonl").write_text(json.dumps(line) + "\n")
    assert detect_format(run) == "lm-eval"
    for path in (run, run / "20241220_050832_samples_mme.jsonl"):
        with pytest.raises(DataError, match=r"an lmms-eval log \(lmms_eval_version 0.3.0\), not lm-eval's"):
            _records("lm-eval", path)
    # an lm-eval-named run written by lmms-eval: recognised by its version field
    shutil.copytree(LM_EVAL, tmp_path / "named")
    (res,) = (tmp_path / "named").glob("results_*.json")
    res.write_text(json.dumps(json.loads(res.read_text()) | {"lmms_eval_version": "0.2.4"}))
    with pytest.raises(DataError, match=r"lmms_eval_version 0.2.4"):
        _records("lm-eval", tmp_path / "named")


def test_gate_across_two_logs_read_on_different_metrics_is_refused():
    base = load_records(MC, options=ImportOptions(metric="acc"))
    cand = load_records(MC, options=ImportOptions(metric="acc_norm"))
    with pytest.raises(DataError, match=r"read on different metrics \(demo_arith_mc: baseline lm-eval:none:acc"):
        pair_records(base, cand)
    pairing = pair_records(base, load_records(MC, options=ImportOptions(metric="acc")))
    assert dict(pairing.baseline.metrics) == {"demo_arith_mc": "lm-eval:none:acc"}
    assert pairing.baseline.to_dict()["metric"] == {"demo_arith_mc": "lm-eval:none:acc"}


def _two_scorer_log(path, results):
    """An inspect_ai log whose samples carry two scorers (``match`` and ``judge``) that disagree."""
    from inspect_ai.log import EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.model import GenerateConfig
    from inspect_ai.scorer import Score

    samples = [
        EvalSample(
            id=f"q{i}", epoch=1, input="x", target="1", scores={"match": Score(value=m), "judge": Score(value=j)}
        )
        for i, (m, j) in enumerate([("C", "I"), ("I", "C"), ("C", "C")])
    ]
    spec = EvalSpec(
        created="2026-12-05T00:00:00+00:00",
        task="t",
        dataset=EvalDataset(name="t", samples=3),
        model="hf/demo",
        model_generate_config=GenerateConfig(),
        config={},
    )
    write_eval_log(EvalLog(eval=spec, samples=samples, results=results, status="success"), str(path))


def _scores(*scorers):
    from inspect_ai.log import EvalMetric, EvalScore

    return [EvalScore(name=s, scorer=s, metrics={"accuracy": EvalMetric(name="accuracy", value=0.6)}) for s in scorers]


@pytest.mark.slow
def test_inspect_log_with_several_scorers_is_read_on_its_headline_metric(tmp_path):
    from inspect_ai.log import EvalResults, HeadlineMetric

    outcomes = lambda path, **o: [x.record.outcome for x in import_records("inspect", path, ImportOptions(**o))]
    _two_scorer_log(tmp_path / "none.json", None)  # no results: nothing names the headline
    with pytest.raises(DataError, match=r"2 scorers \(match, judge\) and no results naming .*--metric match"):
        outcomes(tmp_path / "none.json")
    assert outcomes(tmp_path / "none.json", metric="judge") == ["incorrect", "correct", "correct"]
    # inspect_ai's convention without a declaration: the first score of results.scores
    _two_scorer_log(
        tmp_path / "first.json", EvalResults(total_samples=3, completed_samples=3, scores=_scores("judge", "match"))
    )
    recs = [x.record for x in import_records("inspect", tmp_path / "first.json")]
    assert [r.outcome for r in recs] == ["incorrect", "correct", "correct"] and recs[1].decided_by == "inspect:judge"
    # a resolved headline names the scorer
    headline = HeadlineMetric(scorer="match", metric="accuracy")
    results = EvalResults(total_samples=3, completed_samples=3, scores=_scores("judge", "match"), headline=headline)
    _two_scorer_log(tmp_path / "head.json", results)
    assert outcomes(tmp_path / "head.json") == ["correct", "incorrect", "correct"]


def test_the_metric_a_side_was_read_on_is_in_the_gate_reports_side():
    from qualgate.evidence.contract import ReportSide

    pairing = pair_records(*(load_records(MC, options=ImportOptions(metric="acc_norm")) for _ in range(2)))
    side = ReportSide.of(pairing.baseline)
    assert side.metric == {"demo_arith_mc": "lm-eval:none:acc_norm"}
    assert side.to_dict()["metric"] == {"demo_arith_mc": "lm-eval:none:acc_norm"}
    assert ReportSide.from_dict(side.to_dict()).to_dict() == side.to_dict()  # read back unchanged
