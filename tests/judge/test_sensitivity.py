"""The judge's sensitivity on planted pairs, and the gate that scales its margin by it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import pytest
from click.testing import CliRunner
from scipy.stats import binom

import qualgate
from qualgate.cli import cli
from qualgate.judge import planted_pairs, sensitivity_lower_bound
from qualgate.judge._sensitivity import MIN_CHARS
from qualgate.records import read_records

from judge_double import judge_args

_ANSWER = re.compile(r"<answer_([AB])>\n(.*?)\n</answer_\1>", re.S)
_QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.S)


def _originals(phi3) -> dict[str, str]:
    """question text -> the baseline's answer to it."""
    base, _, questions = phi3
    text = {}
    for line in questions.read_text().splitlines():
        q = json.loads(line)
        text[q["question_id"]] = q["messages"][-1]["content"]
    return {text[r.question_id]: r.output for r in read_records(base)}


def _sees_originals(originals, *, when=lambda user: True):
    """A judge that prefers the baseline's own answer to the question shown (where ``when``
    holds, else names position A): the planted pairs' better side, by construction."""

    def reply(system, user):
        a = dict(_ANSWER.findall(user))
        original = originals[_QUESTION.search(user).group(1)]
        if when(user):
            if a["A"] == original != a["B"]:
                return "A is the complete answer. [[A]]"
            if a["B"] == original != a["A"]:
                return "B is the complete answer. [[B]]"
            return "Equally good. [[C]]"
        return "I prefer the first one. [[A]]"

    return reply


def _judge(tmp_path, phi3, double, *, sensitivity, extra=None):
    base, cand, questions = phi3
    out = tmp_path / "out"
    args = judge_args(base, cand, double.config(tmp_path / "j.yaml"), out, questions=questions, sensitivity=sensitivity)
    args += ["--max-judge-errors", str(extra)] if extra is not None else []
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def _gate(out, *extra):
    args = ["gate", str(out / "baseline"), str(out / "candidate"), "--margin", "0.1", "--format", "json", *extra]
    return CliRunner().invoke(cli, args)


def test_the_lower_bound_is_clopper_pearson_at_half_the_level_on_each_side():
    # Reference: the definition of the one-sided Clopper-Pearson bounds, checked on binomial
    # tails (scipy.stats.binom), not on the beta quantiles the code uses: P(X >= d | p_low) and
    # P(X <= i | p_high) are each (1 - level) / 2; for i = 0, p_high = 1 - (g)^(1/n) in closed form.
    n, level = 200, 0.995
    g = (1 - level) / 2
    for detected, inverted in ((180, 0), (150, 3), (97, 41)):
        bound = sensitivity_lower_bound(detected, inverted, n, level)
        p_high = 1 - g ** (1 / n) if inverted == 0 else None
        if p_high is None:
            # solve P(X <= inverted | p) = g by bisection on the binomial cdf
            lo, hi = 0.0, 1.0
            for _ in range(200):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if binom.cdf(inverted, n, mid) > g else (lo, mid)
            p_high = (lo + hi) / 2
        p_low = bound + p_high
        assert binom.sf(detected - 1, n, p_low) == pytest.approx(g, rel=1e-6)
        assert binom.cdf(inverted, n, p_high) == pytest.approx(g, rel=1e-6)
    assert sensitivity_lower_bound(0, 0, 50) == pytest.approx(-(1 - g ** (1 / 50)))  # no evidence at all: < 0


def test_planted_pairs_are_seeded_independent_of_record_order_and_degrade_their_original(phi3):
    base, _, _ = phi3
    records = list(read_records(base))
    pairs = planted_pairs(records, 20, seed=7)
    assert pairs == planted_pairs(list(reversed(records)), 20, seed=7)
    assert pairs != planted_pairs(records, 20, seed=8)
    assert [k for _, k, _, _ in pairs] == ["truncated", "other_answer"] * 10
    outputs = {r.key: r.output for r in records}
    for key, kind, original, degraded in pairs:
        assert original == outputs[key] and len(original) >= MIN_CHARS and degraded != original
        if kind == "truncated":
            assert original.startswith(degraded) and len(degraded) <= len(original) // 3
        else:  # another question's answer
            assert degraded in {o for k, o in outputs.items() if k != key}
    with pytest.raises(ValueError, match="planted pairs need"):
        planted_pairs(records, len(records) + 1)


def test_a_judge_that_sees_every_planted_degradation_gates_at_the_bound_times_the_margin(tmp_path, phi3, judge_double):
    originals = _originals(phi3)
    summary, out = _judge(tmp_path, phi3, judge_double({}, reply=_sees_originals(originals)), sensitivity=40)
    sens = summary["sensitivity"]
    assert (sens["pairs"], sens["detected"], sens["inverted"], sens["missed"]) == (40, 40, 0, 0)
    assert sens["lower_bound"] == pytest.approx(sensitivity_lower_bound(40, 0, 40, 0.995))
    planted = [json.loads(line) for line in (out / "planted.jsonl").read_text().splitlines()]
    assert len(planted) == 40 and {p["outcome"] for p in planted} == {"detected"}
    gate = _gate(out)
    report = json.loads(gate.stdout)
    floored = int(sens["lower_bound"] * 100) / 100
    assert report["settings"]["margin"] == pytest.approx(0.1 * floored)
    assert report["settings"]["alpha"] == pytest.approx(0.045)  # 0.05 less the bound's 0.005
    assert f"sensitivity >= {floored:.2f}" in gate.stderr
    api = qualgate.gate(out / "baseline", out / "candidate", margin=0.1)  # the Python API gates them alike
    assert (api.margin, api.alpha) == (report["settings"]["margin"], report["settings"]["alpha"])
    # --judge-units: the margin as given, in the judge's own verdicts
    units = json.loads(_gate(out, "--judge-units").stdout)["settings"]
    assert (units["margin"], units["alpha"]) == (0.1, 0.05)


def test_the_count_of_detected_pairs_is_the_judges_own(tmp_path, phi3, judge_double):
    originals = _originals(phi3)

    def sees(user):  # sees the degradation on about 70% of the questions, names A elsewhere
        return int(hashlib.sha256(user.split("</question>")[0].encode()).hexdigest(), 16) % 10 < 7

    summary, out = _judge(tmp_path, phi3, judge_double({}, reply=_sees_originals(originals, when=sees)), sensitivity=30)
    planted = [json.loads(line) for line in (out / "planted.jsonl").read_text().splitlines()]
    texts = [v["text"] for p in planted for v in p["verdicts"]]
    assert len(texts) == 60
    detected = sum(1 for p in planted if all("complete answer" in v["text"] for v in p["verdicts"]))
    assert 0 < detected < 30
    sens = summary["sensitivity"]
    assert (sens["detected"], sens["inverted"], sens["missed"]) == (detected, 0, 30 - detected)
    assert sum(k["pairs"] for k in sens["by_kind"].values()) == 30


def test_a_judge_that_always_names_one_position_cannot_gate(tmp_path, phi3, judge_double):
    summary, out = _judge(tmp_path, phi3, judge_double({}, reply=lambda s, u: "[[A]]"), sensitivity=20)
    assert summary["sensitivity"]["detected"] == 0 and summary["sensitivity"]["lower_bound"] < 0
    gate = _gate(out)
    assert gate.exit_code == 3 and "cannot be shown to tell an answer from a degraded copy" in gate.output


def test_unreadable_verdicts_on_planted_pairs_count_against_the_judge(tmp_path, phi3, judge_double):
    summary, _ = _judge(
        tmp_path, phi3, judge_double({}, reply=lambda s, u: "no verdict here"), sensitivity=10, extra=1.0
    )
    sens = summary["sensitivity"]
    assert (sens["detected"], sens["judge_error"], sens["missed"]) == (0, 10, 10)


def test_judged_records_without_a_measured_sensitivity_need_judge_units(tmp_path, phi3, judge_double):
    originals = _originals(phi3)
    _, out = _judge(tmp_path, phi3, judge_double({}, reply=_sees_originals(originals)), sensitivity=0)
    refused = _gate(out)
    assert refused.exit_code == 3 and "sensitivity was not measured" in refused.output
    assert _gate(out, "--judge-units").exit_code in (0, 1, 4)


def test_judged_records_changed_moved_or_mixed_are_refused(tmp_path, phi3, judge_double):
    base, cand, _ = phi3
    originals = _originals(phi3)
    _, out = _judge(tmp_path, phi3, judge_double({}, reply=_sees_originals(originals)), sensitivity=10)
    # copied away from judge.json: the sensitivity cannot be found, so no margin can be trusted
    moved = tmp_path / "moved"
    shutil.copytree(out / "baseline", moved / "b")
    shutil.copytree(out / "candidate", moved / "c")
    gone = CliRunner().invoke(cli, ["gate", str(moved / "b"), str(moved / "c"), "--margin", "0.1"])
    assert gone.exit_code == 3 and "judge.json" in gone.output
    # a judged baseline against an unjudged candidate
    mixed = CliRunner().invoke(cli, ["gate", str(out / "baseline"), str(cand), "--margin", "0.1"])
    assert mixed.exit_code == 3 and "gated as one pair" in mixed.output
    # a record edited after qualgate judge wrote it
    f = next((out / "candidate").glob("*.jsonl"))
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:-1]))
    changed = _gate(out)
    assert changed.exit_code == 3 and "changed after qualgate judge wrote them" in changed.output
    # --judge-units on records no judge wrote
    assert CliRunner().invoke(cli, ["gate", str(base), str(cand), "--margin", "0.1", "--judge-units"]).exit_code == 2


def test_judge_units_refuses_a_judge_that_detects_no_planted_pair(tmp_path, phi3, judge_double):
    # issue 48: an always-[[A]] judge detected 0 of its planted pairs and the gate passed in its units
    _, out = _judge(tmp_path, phi3, judge_double({}, reply=lambda s, u: "[[A]]"), sensitivity=20)
    refused = _gate(out, "--judge-units")
    assert refused.exit_code == 3 and "does not tell an answer from a degraded copy" in refused.output


@pytest.mark.slow
def test_judge_units_explain_a_low_sensitivity(tmp_path, phi3, judge_double):
    originals = _originals(phi3)

    def sees(user):  # sees the degradation on about 30% of the questions
        return int(hashlib.sha256(user.split("</question>")[0].encode()).hexdigest(), 16) % 10 < 3

    _, out = _judge(tmp_path, phi3, judge_double({}, reply=_sees_originals(originals, when=sees)), sensitivity=30)
    gate = _gate(out, "--judge-units")
    assert gate.exit_code in (0, 1, 4) and "a loss much larger than the margin can pass" in gate.stderr


def test_a_judge_failing_on_every_pair_exits_non_zero_with_the_count_and_the_reason(tmp_path, phi3, judge_double):
    base, cand, questions = phi3
    double = judge_double({}, reply=lambda s, u: "my context is too short")
    args = judge_args(base, cand, double.config(tmp_path / "j.yaml"), tmp_path / "out", questions=questions)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    assert re.search(r"(\d+) of \1 judged pairs are judge errors", result.output), result.output
    assert "the first:" in result.output and (tmp_path / "out" / "pairs.jsonl").is_file()


def test_judge_errors_counted_as_lost_are_said_and_refused_when_they_outnumber_the_decided(
    tmp_path, phi3, judge_double
):
    originals = _originals(phi3)
    fails = {}

    def reply(system, user):  # unreadable on about a fifth of the questions, else sees the original
        q = _QUESTION.search(user).group(1)
        if int(hashlib.sha256(q.encode()).hexdigest(), 16) % 5 == 0:
            fails[q] = True
            return "no verdict"
        return _sees_originals(originals)(system, user)

    _, out = _judge(tmp_path, phi3, judge_double({}, reply=reply), sensitivity=0, extra=1.0)
    counts = json.loads((out / "judge.json").read_text())["counts"]
    assert counts["judge_error"] > 0
    gate = _gate(out, "--judge-units", "--max-errors", "1000")
    if counts["judge_error"] > counts["lost"] + counts["gained"]:
        assert gate.exit_code == 3 and "are judge errors, more than" in gate.output
    else:
        assert f"{counts['judge_error']} of {counts['pairs']} pairs are judge errors, counted as lost" in gate.stderr
    # a judge that failed on every pair: the errors are all the discordance, refused
    (tmp_path / "all").mkdir()
    _, out2 = _judge(tmp_path / "all", phi3, judge_double({}, reply=lambda s, u: "x"), sensitivity=0, extra=1.0)
    refused = _gate(out2, "--judge-units", "--max-errors", "1000")
    assert refused.exit_code == 3 and "are judge errors, more than the 0 pairs the judge decided" in refused.output


def test_an_unreadable_reply_is_asked_again_on_the_next_run_a_bounded_number_of_times(tmp_path, phi3, judge_double):
    originals = _originals(phi3)
    seen = {}

    def reply(system, user):  # unreadable the first time a request is seen, readable after
        seen[user] = seen.get(user, 0) + 1
        return "garbled" if seen[user] == 1 else _sees_originals(originals)(system, user)

    (tmp_path / "all").mkdir()
    first, out = _judge(tmp_path / "all", phi3, judge_double({}, reply=reply), sensitivity=0, extra=1.0)
    assert first["judge_error"] == first["judged"] > 0
    second, _ = _judge(tmp_path / "all", phi3, judge_double({}, reply=reply), sensitivity=0, extra=1.0)
    assert second["calls"] == first["calls"] and second["judge_error"] == 0
    # a judge that never answers readably: asked at most MAX_ASKS times in all
    from qualgate.judge._pairwise import MAX_ASKS

    (tmp_path / "never").mkdir()
    calls = [
        _judge(tmp_path / "never", phi3, judge_double({}, reply=lambda s, u: "x"), sensitivity=0, extra=1.0)[0]["calls"]
        for _ in range(MAX_ASKS + 1)
    ]
    assert calls[:MAX_ASKS] == [calls[0]] * MAX_ASKS and calls[0] > 0 and calls[MAX_ASKS] == 0
