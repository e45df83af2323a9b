"""The formats real chat and reasoning models write (issue 15, items 1-7), the `think`
setting, the decision policies with `decided_by`, and the GPQA final-choice extractor.

The outputs here are written for the test in the shapes found in ../shared/data/real_outputs
(test_real_outputs.py grades the real ones); the golds are those of the suites' real data.
"""

from __future__ import annotations

import functools

import pytest

from qualgate.graders import (
    after_marker,
    boxed,
    final_choice,
    grade,
    last_letter,
    last_number,
    math_verify,
    numeric,
    strip_think,
    words_to_number,
)
from qualgate.graders._math import canonical_ok
from qualgate.suites import Question, Suite, suite_path
from qualgate.suites._spec import read_spec


def suite(name: str, decides: str | None = None) -> Suite:
    spec = read_spec(suite_path(name))
    return Suite(name, spec.version, (), {}, decides or spec.decides, _spec=spec)


def q(gold: str, problem: str = "", options: tuple[str, ...] = ()) -> Question:
    return Question("q", ({"role": "user", "content": problem},), gold, "-", options=options)


# --- 1. the result of the marker line -----------------------------------------------------------


@pytest.mark.parametrize("text", ["#### 64 - 2 * 24 = 16", "#### Answer: 64 - 48 = 16", "#### $16 = 16 dollars"])
def test_the_marker_line_gives_its_result_not_its_first_number(text):
    assert after_marker(text, marker="####") == "16"
    assert suite("gsm8k").grade(q("16"), text).outcome == "correct"


@pytest.mark.parametrize("text", ["#### 1,000 (10 boxes of 100)", "#### 1,000 (= 10 * 100)"])
def test_a_marker_line_without_an_equation_still_gives_its_first_number(text):
    assert after_marker(text, marker="####") == "1,000"


# --- 2. GSM8K's other formats: \boxed{} and Final Answer ----------------------------------------


@pytest.mark.parametrize(
    ("text", "decided_by"),
    [
        (r"So the share is $\boxed{25}\%$ of the 40 students, which is 10.", "lenient:boxed"),
        ("Final Answer: 9 boxes, which is greater than 3.", "lenient:final_answer"),
        ("Final Answer: The final answer is 9. I hope it is correct, since 4 + 5 = 9 > 3.", "lenient:final_answer"),
        ("She has 4 + 5 = 9 left.\nA: 9", "lenient:last_number"),
    ],
)
def test_gsm8k_lenient_reads_boxed_and_final_answer_before_the_last_number(text, decided_by):
    gold = "25" if "boxed" in text else "9"
    strict = suite("gsm8k").grade(q(gold), text)
    assert (strict.outcome, strict.decided_by) == ("no_answer", None)  # the contract: #### N
    g = suite("gsm8k", "either").grade(q(gold), text)
    assert (g.outcome, g.decided_by) == ("correct", decided_by)


def test_gsm8k_boxed_takes_the_result_of_an_equation():
    assert boxed(r"\boxed{2 \times 12 = 24}", take="number") == "24"


# --- 3. think blocks -----------------------------------------------------------------------------


def test_a_draft_answer_inside_the_think_block_does_not_count():
    text = "<think>Maybe 15.\n#### 15\nNo, 16.</think>\nThe answer:\n#### 16"
    g = suite("gsm8k").grade(q("16"), text)
    assert (g.outcome, g.strict) == ("correct", "16")


def test_an_output_cut_off_inside_the_think_block_is_no_answer():
    for text in ("<think>So the answer is #### 16, let me check", "<|begin_of_thought|>\\boxed{16} hmm"):
        g = suite("gsm8k", "either").grade(q("16"), text)
        assert (g.outcome, g.strict, g.lenient, g.decided_by) == ("no_answer", None, None, "think:unfinished")


def test_sky_t1_thought_and_solution_blocks():
    text = (
        r"<|begin_of_thought|>Try \boxed{3}.<|end_of_thought|>"
        r"<|begin_of_solution|>The area is \boxed{4}.<|end_of_solution|>"
    )
    assert suite("math500").grade(q("4"), text).outcome == "correct"


def test_a_prefilled_block_is_closed_by_the_first_closing_tag_only_and_needs_one():
    assert strip_think("drafts</think>#### 4", prefilled=True) == "#### 4"
    assert strip_think("#### 4 (never closed)", prefilled=True) is None
    assert strip_think("#### 4") == "#### 4"


def test_think_off_grades_the_whole_text():
    text = "<think>#### 15</think>"
    marker = functools.partial(after_marker, marker="####")
    assert grade(text, "15", strict=[marker], lenient=[last_number], grader=numeric, think="off").outcome == "correct"
    assert (
        grade(text, "15", strict=[marker], lenient=[last_number], grader=numeric, think="strip").outcome == "no_answer"
    )


# --- 4. what math-verify could not read ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        (r"12^{\mathrm{th}} \text{ grade}", "12"),
        (r"12^{th}", "12"),
        ("12th", "12"),
        (r"\text{three boxes}", "3"),
        (r"\text{twenty-one}", "21"),
        (r"\$10", "10"),
        ("0.33", r"\dfrac{33}{100}"),
    ],
)
def test_math_verify_reads_ordinals_number_words_and_plain_numbers(pred, gold):
    assert math_verify(pred, gold)


def test_number_words_are_read_by_the_numeric_grader_too():
    assert numeric("three boxes", "3") and not numeric("four boxes", "3")
    assert words_to_number("one hundred and five") == 105 and words_to_number("no one") is None


def test_different_plain_integers_are_unequal_without_math_verify():
    assert not math_verify("12", "13") and not math_verify(r"\text{three}", "4")


def test_an_unclosed_box_is_graded():
    assert suite("math500").grade(q(r"2\sqrt{5}"), r"The distance is $\boxed{2\sqrt{5}$.").outcome == "correct"


# --- 5. the canonical form a problem demands ----------------------------------------------------

PLANE = (
    "Find the equation of the plane. Enter your answer in the form Ax + By + Cz + D = 0, where A, B, C, D "
    r"are integers such that A > 0 and $\gcd(|A|,|B|,|C|,|D|) = 1.$"
)


@pytest.mark.parametrize(
    ("pred", "ok"),
    [
        ("5x - 7y + 11z + 4 = 0", True),
        ("5x - 7y + 11z = -4", True),
        ("20x - 28y + 44z + 16 = 0", False),
        ("-5x + 7y - 11z - 4 = 0", False),
        ("5x-7y+11z+5=0", False),
    ],
)
def test_a_plane_must_be_reduced_where_the_problem_asks_for_gcd_1(pred, ok):
    assert suite("math500").grade(q("5x - 7y + 11z + 4 = 0", PLANE), rf"\boxed{{{pred}}}").outcome == (
        "correct" if ok else "incorrect"
    )


@pytest.mark.parametrize(
    ("pred", "ok"),
    [(r"\cot x", True), (r"\frac{\cos x}{\sin x}", False), (r"\frac{1}{\tan x}", False)],
)
def test_simplify_refuses_an_equivalent_longer_form(pred, ok):
    problem = r"Simplify \[\frac{\sec x}{\sin x} - \frac{\sin x}{\cos x}.\]"
    assert suite("math500").grade(q(r"\cot x", problem), rf"\boxed{{{pred}}}").outcome == (
        "correct" if ok else "incorrect"
    )


def test_without_the_demand_equivalence_is_enough():
    assert suite("math500").grade(q(r"\cot x", "Compute it."), r"\boxed{\frac{\cos x}{\sin x}}").outcome == "correct"
    assert canonical_ok("2x + 2y = 2", "x + y - 1 = 0", "Find the line.")


def test_the_documented_limit_of_the_simplify_proxy():
    # An equally long unsimplified form passes (documented in canonical_ok).
    assert canonical_ok(r"\sqrt{8}", r"2\sqrt2", "Simplify $\\sqrt{8}$.")


# --- 6. GPQA: the committed choice, not the last letter -----------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("The answer is (B). Option (C) would require a catalyst, and D is unstable.", "B"),
        ("Therefore, the correct answer is:\n\n**C. 5 peaks in chiral HPLC**\n\nThis means A and B fail.", "C"),
        (r"The momentum is therefore $\boxed{D. \, p = 1.4 \times 10^{-28}}$", "D"),
        ("Weighing both, I choose A, although B and C are close.", "A"),
        ("**Option D** appears to be the correct structure; C lacks the ring.", "D"),
        ("The process taking place is:\n\nB. somatic hypermutation\n\nIt acts in germinal centres; C does not.", "B"),
        ("The frame is wrong.\n\nThe other options are less likely:\nB. no\nC. no\nD. no", "A"),
        (
            "Based on this, the correct answer is C: A = 2,2-diiodoethenone.\nOn reflection, the closest correct "
            "answer considering both parts of the question is:\n\nD. A = cyclobutenone",
            "D",
        ),
    ],
)
def test_final_choice_finds_the_committed_letter(text, letter):
    assert final_choice(text) == letter
    assert suite("gpqa_diamond", "lenient").grade(q(letter), text).decided_by == "lenient:final_choice"


def test_final_choice_is_none_without_a_commitment_and_the_last_letter_is_the_fallback():
    text = "A is unlikely, B is possible, and the question is hard to settle; the data fit D."
    assert final_choice(text) is None and last_letter(text) == "D"
    assert suite("gpqa_diamond", "either").grade(q("D"), text).decided_by == "lenient:last_letter"


def test_an_analysis_of_each_option_is_not_a_commitment():
    text = "Let's analyze the options:\n\nA. ring\n- too small\n\nB. chain\n- too long\n\nD. diene\n- no"
    assert final_choice(text) is None


def test_final_choice_maps_a_restated_option_text_when_the_suite_gives_the_options():
    options = ("3.2 kJ/mol", "11200 kJ/mol", "1900 kJ/mol", "67.4 kJ/mol")
    text = "The closest value is therefore\n11200 kJ/mol"
    assert final_choice(text) is None
    assert final_choice(text, options=options) == "B"
    assert suite("gpqa_diamond", "lenient").grade(q("B", options=options), text).outcome == "correct"


def test_the_requested_format_still_decides_under_strict():
    g = suite("gpqa_diamond").grade(q("C"), "The answer is (B).\nAnswer: C")
    assert (g.outcome, g.decided_by, g.lenient) == ("correct", "strict:after_marker", "C")


# --- 7. what already graded right stays right ---------------------------------------------------


@pytest.mark.slow  # math-verify in its helper process
@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("10080", r"10,\!080"),
        ("10000", "10{,}000"),
        (r"3 + 2\sqrt{2}, 3 - 2\sqrt{2}", r"3 \pm 2 \sqrt{2}"),
        ("12π", r"12\pi"),
        (r"\frac{2240}{78125}", r"\frac{448}{15625}"),
    ],
)
def test_separators_pm_pairs_and_unicode_pi_grade_right(pred, gold):
    assert math_verify(pred, gold)


# --- decision policies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decides", "text", "outcome", "decided_by"),
    [
        ("strict", "#### 18", "correct", "strict:after_marker"),
        ("strict", "so 18", "no_answer", None),
        ("either", "so 18", "correct", "lenient:last_number"),
        ("either", "#### 17 and then 18", "incorrect", "strict:after_marker"),
        ("lenient", r"\boxed{18} and then #### 17 is wrong", "incorrect", "lenient:after_marker"),
        ("lenient", "nothing", "no_answer", None),
    ],
)
def test_each_policy_decides_and_names_the_deciding_extractor(decides, text, outcome, decided_by):
    g = suite("gsm8k", decides).grade(q("18"), text)
    assert (g.outcome, g.decided_by) == (outcome, decided_by)


def test_an_unknown_policy_or_think_setting_is_refused():
    with pytest.raises(ValueError, match="decides"):
        grade("x", "1", strict=[], lenient=[], grader=numeric, decides="majority")
    with pytest.raises(ValueError, match="think"):
        grade("x", "1", strict=[], lenient=[], grader=numeric, think="maybe")
