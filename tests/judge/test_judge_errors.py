"""A judge that answers garbage, refuses, times out or fails gives ``judge_error`` records, and
``qualgate gate`` refuses them unless ``--max-errors`` allows them; strict verdict parsing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.judge import Unreadable, VerdictCache, parse_choice, parse_rating
from qualgate.records import read_records

from judge_double import fastchat_judgments, fastchat_template, judge_args
from mt_bench_data import PHI3


def _first(path, n):
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))


def _judge(tmp_path, phi3, double, n=4, **options):
    base, cand, questions = phi3
    _first(base, n)
    _first(cand, n)
    out = tmp_path / "out"
    judge = double.config(tmp_path / "j.yaml", **options)
    prompt = fastchat_template(tmp_path / "t.yaml", "pairwise")
    # every pair is a judge error here: --max-judge-errors 1 lets the judge finish (exit 0) so that
    # the gate's own refusal is what is tested (the default exits 3:
    # test_sensitivity.py::test_a_judge_failing_on_every_pair_exits_non_zero_with_the_count_and_the_reason)
    args = [*judge_args(base, cand, judge, out, questions=questions, prompt=prompt), "--max-judge-errors", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def _stored():
    return fastchat_judgments(PHI3 / "model_judgment" / "gpt-4_pair.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize(
    "reply, says",
    [
        (lambda s, u: "Both answers are fine, I think A is slightly better.", "no [[A]], [[B]] or [[C]]"),
        (lambda s, u: "I'm sorry, but I can't help with comparing these responses.", "no [[A]], [[B]] or [[C]]"),
        (lambda s, u: "[[A]] at first, but on reflection [[B]].", "both [[A]] and [[B]]"),
        (lambda s, u: "", "empty reply"),
    ],
    ids=["garbage", "refusal-text", "two-verdicts", "empty"],
)
def test_an_unreadable_reply_is_a_judge_error_and_the_gate_refuses_it(tmp_path, phi3, judge_double, reply, says):
    summary, out = _judge(tmp_path, phi3, judge_double(_stored(), reply=reply))
    assert summary["judge_error"] == 4 and summary["lost"] == summary["gained"] == summary["tied"] == 0
    records = list(read_records(out / "candidate"))
    assert {r.outcome for r in records} == {"judge_error"} and all(says in r.error for r in records)
    gate = CliRunner().invoke(
        cli, ["gate", str(out / "baseline"), str(out / "candidate"), "--judge-units", "--margin", "0.1"]
    )
    assert gate.exit_code == 3 and "4 pairs have an 'error' or 'judge_error' outcome" in gate.output
    allowed = CliRunner().invoke(
        cli,
        [
            "gate",
            str(out / "baseline"),
            str(out / "candidate"),
            "--judge-units",
            "--margin",
            "0.1",
            "--max-errors",
            "4",
        ],
    )
    assert (
        allowed.exit_code == 3 and "fix the judge" in allowed.output
    )  # never a pass: judge errors outnumber decided pairs


@pytest.mark.slow
def test_a_judge_that_refuses_with_an_http_error_gives_judge_errors(tmp_path, phi3, judge_double):
    double = judge_double(_stored(), status=403)
    summary, out = _judge(tmp_path, phi3, double)
    assert summary["judge_error"] == 4 and summary["calls"] == 8
    assert all("HTTP 403" in r.error for r in read_records(out / "baseline"))
    # a failed request is not cached: the next run asks again
    again, _ = _judge(tmp_path, phi3, double)
    assert again["calls"] == 8


@pytest.mark.slow
def test_a_judge_that_times_out_gives_judge_errors(tmp_path, phi3, judge_double):
    summary, out = _judge(tmp_path, phi3, judge_double(_stored(), delay_s=0.6), n=2, timeout_s=0.2, max_retries=0)
    assert summary["judge_error"] == 2
    assert all("timed out" in r.error for r in read_records(out / "candidate"))


@pytest.mark.slow
def test_a_prompt_the_double_holds_no_judgment_for_is_refused(tmp_path, phi3, judge_double):
    """qualgate's own pairwise template is not FastChat's: the double answers 404, judge_error."""
    base, cand, questions = phi3
    _first(base, 2)
    _first(cand, 2)
    double = judge_double(_stored())
    judge = double.config(tmp_path / "j.yaml")
    args = [*judge_args(base, cand, judge, tmp_path / "o", questions=questions), "--max-judge-errors", "1"]
    result = CliRunner().invoke(cli, args)
    assert json.loads(result.stdout)["judge_error"] == 2
    assert [s for s, _ in double.refused] == [404] * 4


@pytest.mark.parametrize(
    "text, value", [("Rating: [[7]]", 7.0), ("[[8.5]] ... so [[8.5]]", 8.5), ("Rating: [[ 10 ]]", 10.0)]
)
def test_a_rating_is_read_when_exactly_one_is_given(text, value):
    assert parse_rating(text) == value


@pytest.mark.parametrize("text", ["Rating: 7", "[[7]] or [[8]]", "[[11]]", "[[0]]", "", "   ", "[7]", "[[seven]]"])
def test_a_rating_that_is_not_exactly_one_on_the_scale_is_unreadable(text):
    with pytest.raises(Unreadable):
        parse_rating(text)


@pytest.mark.parametrize("text, choice", [("[[A]]", "A"), ("so: [[B]]", "B"), ("[[C]]", "tie"), ("[[A]] [[A]]", "A")])
def test_a_choice_is_read_when_exactly_one_is_given(text, choice):
    assert parse_choice(text) == choice


@pytest.mark.parametrize("text", ["A", "[[A]] [[C]]", "[[D]]", "[A]", "$ERROR$"])
def test_a_choice_that_is_not_exactly_one_is_unreadable(text):
    with pytest.raises(Unreadable):
        parse_choice(text)


def test_the_cache_keeps_every_entry_and_cuts_only_an_incomplete_last_line(tmp_path):
    path = tmp_path / "cache.jsonl"
    VerdictCache(path).append("judge-x", {"k1": "[[A]]", "k2": "[[B]]"})
    path.write_bytes(path.read_bytes() + b'{"key": "k3", "judge_id": "judge-x", "te')  # a killed writer
    cache = VerdictCache(path)
    assert cache.entries == {"k1": "[[A]]", "k2": "[[B]]"}
    cache.append("judge-x", {"k4": "[[C]]"})
    assert VerdictCache(path).entries == {"k1": "[[A]]", "k2": "[[B]]", "k4": "[[C]]"}
    assert path.read_text().count("\n") == 3
