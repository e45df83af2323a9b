"""Correctness evidence on the real test sets in ../shared/data (never downloaded)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from qualgate.graders._math import run_limited

from support import SHARED

LOCAL = {
    "gsm8k": SHARED / "data" / "gsm8k" / "test.jsonl",
    "math500": SHARED / "data" / "math500" / "test.jsonl",
    "aime25": SHARED / "data" / "aime2025" / "test.jsonl",
}


def _rows(name):
    with open(LOCAL[name], encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# --- loading through datasets: counts and ids --------------------------------------------------


def test_gsm8k_local_copy_has_1319_questions_with_content_hash_ids(real_suite):
    suite = real_suite("gsm8k")
    rows = _rows("gsm8k")
    assert len(suite.questions) == 1319
    # The rule documented in qualgate.suites: compact UTF-8 JSON list of the id fields.
    expected = [
        "gsm8k/"
        + hashlib.sha256(json.dumps([r["question"]], ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()[
            :16
        ]
        for r in rows
    ]
    assert [q.id for q in suite.questions] == expected
    assert [q.gold for q in suite.questions] == [r["answer"].split("####")[-1].strip() for r in rows]


def test_math500_local_copy_has_500_questions_keyed_by_unique_id(real_suite):
    suite = real_suite("math500")
    rows = _rows("math500")
    assert len(suite.questions) == 500
    assert [q.id for q in suite.questions] == [r["unique_id"] for r in rows]
    assert [q.gold for q in suite.questions] == [r["answer"] for r in rows]
    assert suite.questions[0].meta == {"subject": "Precalculus", "level": 2}


def test_aime25_local_copy_has_30_integer_answers(real_suite):
    suite = real_suite("aime25")
    assert [q.id for q in suite.questions] == [str(i) for i in range(30)]
    # The local JSONL stores answers as JSON integers (shared/data/README.md).
    assert [q.gold for q in suite.questions] == [str(r["answer"]) for r in _rows("aime25")]


def test_aime25_string_answers_as_on_the_hub_give_the_same_questions(real_suite, tmp_path, hf_cache):
    from qualgate.suites import load_suite

    as_str = tmp_path / "aime_str.jsonl"
    as_str.write_text("".join(json.dumps(r | {"answer": str(r["answer"])}) + "\n" for r in _rows("aime25")))
    hub_like = load_suite("aime25", data_files=as_str, cache_dir=hf_cache)
    assert hub_like.questions == real_suite("aime25").questions


# --- reference solutions graded as model output: all correct -----------------------------------


def test_every_gsm8k_reference_answer_grades_correct_strict_and_lenient(real_suite):
    suite = real_suite("gsm8k")
    for q, row in zip(suite.questions, _rows("gsm8k"), strict=True):
        g = suite.grade(q, row["answer"])
        assert (g.strict_outcome, g.lenient_outcome) == ("correct", "correct"), (q.id, g)


def test_gsm8k_reference_without_the_marker_grades_correct_leniently_only(real_suite):
    suite = real_suite("gsm8k")
    for q, row in zip(suite.questions, _rows("gsm8k"), strict=True):
        text = row["answer"].replace("####", "So the answer is")
        g = suite.grade(q, text)
        assert (g.strict_outcome, g.lenient_outcome) == ("no_answer", "correct"), (q.id, g)


def test_every_math500_reference_solution_grades_correct(real_suite):
    suite = real_suite("math500")
    for q, row in zip(suite.questions, _rows("math500"), strict=True):
        g = suite.grade(q, row["solution"])
        assert g.outcome == "correct", (q.id, g)


@pytest.mark.slow
def test_every_math500_gold_answer_parses_and_matches_itself_in_math_verify(real_suite):
    # Bypasses the textual shortcut: each gold must survive math-verify's parser, or an
    # equivalent answer written differently could never be graded correct.
    failures = [q.id for q in real_suite("math500").questions if run_limited(q.gold, q.gold, 5.0) is not True]
    assert failures == []


@pytest.mark.slow
def test_math500_golds_written_differently_grade_correct(real_suite):
    suite = real_suite("math500")
    for q in suite.questions:
        variant = q.gold.replace(r"\frac", r"\dfrac").replace(r"\left", "").replace(r"\right", "")
        variant = re.sub(r"\\text\{\((\w)\)\}", r"\1", variant)  # \text{(C)} -> C
        if variant != q.gold:
            assert suite.grade(q, rf"so \boxed{{{variant}}}.").outcome == "correct", (q.id, variant)


def test_every_aime25_gold_in_the_requested_format_grades_correct(real_suite):
    suite = real_suite("aime25")
    for q in suite.questions:
        assert suite.grade(q, rf"Thus the answer is \boxed{{{q.gold}}}.").outcome == "correct"
        assert suite.grade(q, f"... the final answer is {int(q.gold):03d}.").lenient_outcome == "correct"


# --- deliberately wrong answers: incorrect wherever not equivalent ----------------------------


def test_gsm8k_reference_with_gold_plus_one_grades_incorrect_for_every_item(real_suite):
    suite = real_suite("gsm8k")
    for q, row in zip(suite.questions, _rows("gsm8k"), strict=True):
        wrong = int(q.gold.replace(",", "")) + 1
        text = row["answer"].rsplit("####", 1)[0] + f"#### {wrong:,}"
        g = suite.grade(q, text)
        assert (g.strict_outcome, g.lenient_outcome) == ("incorrect", "incorrect"), (q.id, g)


def test_aime25_gold_plus_one_grades_incorrect_for_every_item(real_suite):
    suite = real_suite("aime25")
    for q in suite.questions:
        assert suite.grade(q, rf"\boxed{{{(int(q.gold) + 1) % 1000}}}").outcome == "incorrect"


#: Another item's answer that is mathematically the same as this item's gold.
MATH500_EQUIVALENT_NEIGHBOUR = {
    # gold "5", neighbour's answer "x=5": math-verify reads an assignment as its value.
    "test/algebra/1837.json",
}


@pytest.mark.slow
def test_math500_next_items_answer_grades_incorrect_unless_equivalent(real_suite):
    suite = real_suite("math500")
    qs = suite.questions
    graded_correct = set()
    for i, q in enumerate(qs):
        other = qs[(i + 1) % len(qs)].gold
        if "".join(other.split()) == "".join(q.gold.split()):
            continue  # the same answer text: equivalent by construction
        if suite.grade(q, rf"\boxed{{{other}}}").outcome != "incorrect":
            graded_correct.add(q.id)
    assert graded_correct == MATH500_EQUIVALENT_NEIGHBOUR


#: Golds whose last digit, changed, still compare equal: known limits of math-verify.
MATH500_PERTURBATION_BLIND = {
    # .0000672 vs .0000673: math-verify compares numbers after rounding to 6 decimals.
    "test/number_theory/598.json",
    # 864 \mbox{ inches}^2 vs ...^3, 15\mbox{ cm}^2 vs ...^3: text units (with their
    # exponent) are dropped before comparison.
    "test/geometry/473.json",
    "test/prealgebra/1114.json",
}


@pytest.mark.slow
def test_math500_gold_with_last_digit_changed_grades_incorrect(real_suite):
    suite = real_suite("math500")
    graded_correct, n = set(), 0
    for q in suite.questions:
        digits = [m.start() for m in re.finditer(r"\d", q.gold)]
        if not digits:
            continue
        k = digits[-1]
        wrong = q.gold[:k] + str((int(q.gold[k]) + 1) % 10) + q.gold[k + 1 :]
        n += 1
        if suite.grade(q, rf"\boxed{{{wrong}}}").outcome != "incorrect":
            graded_correct.add(q.id)
    assert n == 489
    assert graded_correct == MATH500_PERTURBATION_BLIND


@pytest.mark.parametrize("name", ["gsm8k", "math500", "aime25"])
def test_prompts_ask_for_the_format_the_strict_extractor_reads(real_suite, name):
    suite = real_suite(name)
    content = suite.questions[0].prompt[-1]["content"]
    assert {"gsm8k": '"#### N"', "math500": r"\boxed{}", "aime25": r"\boxed{}"}[name] in content
