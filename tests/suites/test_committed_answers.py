"""The graders give an answer only where the output commits to one (issue 29, items 7 and 8).

GPQA: a hedge, a list of letters, a refusal or a letter beyond the options is no answer; letters
that are not option letters (a symbol in a formula, the article "A") do not count; "X is
correct" in a discussion after a commitment does not override it. GSM8K and the other suites:
the ``answer`` of a JSON object, and a solution cut off after its reasoning block is no answer.

The issue's examples that are in ../shared/data/real_outputs are graded there, read in place by
model and question id (nothing of them is copied). The others come from sources that are not
stored here (five GPT-4 / Claude-3 runs on GPQA, whose questions may not be published; ZeroEval's
GSM8K outputs, WildEval/ZeroEval@8c1485e ``result_dirs/gsm/<model>.json``): they are written
here in the same shape around the words the issue quotes, with made-up surroundings.
"""

from __future__ import annotations

import functools
import json
import time

import pytest

from qualgate.graders import final_choice, json_answer, last_letter
from qualgate.suites import Question, Suite, suite_path
from qualgate.suites._spec import read_spec

from support import SHARED, require_shared

REAL = SHARED / "data" / "real_outputs"


@functools.cache
def suite(name: str, decides: str = "either") -> Suite:
    spec = read_spec(suite_path(name))
    return Suite(name, spec.version, (), {}, decides, _spec=spec)


def q(gold: str, problem: str = "") -> Question:
    return Question("q", ({"role": "user", "content": problem},), gold, "-")


@functools.cache
def real(name: str) -> dict[tuple[str, str], dict]:
    """The rows of ``../shared/data/real_outputs/<name>.jsonl`` by (model's first word, question id)."""
    path = REAL / f"{name}.jsonl"
    require_shared()
    if not path.is_file():
        pytest.fail(f"real outputs not found at {path}")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {(r["model"].split(" ")[0], r["question_id"]): r for r in rows}


# --- item 7: GPQA, real outputs of ../shared ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "row", "letter", "before"),
    [
        # "None of the provided options (A, B, C, D) match the calculated expectation value ...
        # The correct answer is: \boxed{0}"
        ("gpt-4o", "row169", None, "D"),
        # "you can use either Option A or Option C. Therefore, you should use **Option A** or
        # **Option C** ..."
        ("gpt-4o", "row127", None, "C"),
        # "the correct answer could be either C or D, depending on ..."
        ("llama-3.1-70b", "row022", None, "D"),
        # "Since options A and C are the same, the correct answer is either A or C."
        ("llama-3.1-70b", "row089", None, "C"),
        # "So, the correct answers are A (Classical Electrodynamics) and C (Superstring Theory)."
        ("llama-3.1-405b", "row057", None, "A"),
        # the last "A" is the article of "A more accurate approach ..."; the answer is a value
        ("llama-3.1-405b", "row006", None, "A"),
        # the last "C" is the unit of "\text{C}^2"; then "None of the provided options exactly
        # match this result, but the closest option is: \boxed{2.822 \times 10^{-26}}"
        ("gpt-4o", "row179", None, "C"),
        # "Therefore, the correct answer is: \[ \boxed{35} \]" (a value, no letter)
        ("gpt-4o", "row139", None, "D"),
        # the last letters are nucleotides: "add 1 for A and G, and 0 for C and T"
        ("llama-3.1-405b", "row079", None, "A"),
        # "Therefore, the incorrect statement is B: ..." after "D. ... This statement is correct."
        ("claude-3.5-sonnet", "row099", "B", "D"),
    ],
)
def test_a_real_gpqa_output_gets_the_letter_it_commits_to_or_none(model, row, letter, before):
    r = real("gpqa_diamond")[(model, f"gpqa_diamond/{row}")]
    g = suite("gpqa_diamond").grade(q(r["gold"]), r["output"])
    assert g.lenient == letter != before
    if letter is None:
        assert g.outcome == "no_answer"


# --- item 7: GPQA, the shapes of the held-out outputs ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("The state is a superposition of A and B.\n\nThe answer is (E) None of the above.", "B"),
        ("The data do not fit the model, so I will explain the trend without selecting (A), (B), (C), or (D).", "D"),
        ("Option A and Option C are identical; you can use either Option A or Option C.", "C"),
        (
            "The calculated value, 0.3 eV, does not match. None of the provided options (A, B, C, D) "
            "match the calculated value.",
            "D",
        ),
    ],
)
def test_a_refusal_a_list_or_a_hedge_is_no_answer(text, before):
    assert final_choice(text) is None and last_letter(text) is None
    g = suite("gpqa_diamond").grade(q(before), text)
    assert (g.lenient, g.outcome) == (None, "no_answer")  # not credited when the gold is `before`


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("The entropy is S = k ln W.\n\n**D. k*B**", "D"),
        ("The matching expression is Option C: M^2 = (x^2 + v^2) + \\alpha_6 m_{A^{0}}^4", "C"),
        ("v/c = 0.38, which is closest to option C. 40%.\n\nA more accurate estimate would include recoil.", "C"),
        ("A is unlikely and B is possible, but the data fit D.", "D"),
        ("The compound that fits the IR and NMR data is ethyl 4-aminobenzoate (Option B).", "B"),
    ],
)
def test_the_last_letter_is_the_last_option_letter_not_a_symbol_or_the_article(text, letter):
    assert last_letter(text) == letter
    g = suite("gpqa_diamond").grade(q(letter), text)
    assert (g.outcome, g.decided_by) == ("correct", "lenient:last_letter")


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        (
            "Weighing the evidence, the correct answer is B.\n\nOption A: the first step is correct, but "
            "the second is not.\nOption A is correct, but only above 400 K.",
            "B",
        ),
        (
            "The incorrect statement is **(B)**.\n\n**(A) is correct.** It holds.\n**(C) is correct.** "
            "So does this.\n**(D) is correct.**",
            "B",
        ),
        (
            "Both fit, so the correct answer is either B or C.\n\nTo be more specific: Option B is the correct answer.",
            "B",
        ),
    ],
)
def test_is_correct_in_a_discussion_after_a_commitment_does_not_override_it(text, letter):
    assert final_choice(text) == letter
    assert suite("gpqa_diamond").grade(q(letter), text).decided_by == "lenient:final_choice"


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "A" + "*" * 50_000 + " B",
        "A, B, C, D " * 10_000,
        "either A or " * 9_000,
        "(A) is correct, " * 7_000,
        '"answer": "' * 10_000,
    ],
)
def test_adversarial_multiple_choice_outputs_grade_in_linear_time(text):
    start = time.process_time()
    suite("gpqa_diamond").grade(q("A"), text)
    assert time.process_time() - start < 2  # 50,000 "*" took 11.7 CPU-s before (quadratic), now 0.01


def test_a_commitment_to_two_options_is_no_answer():
    assert final_choice("So, the correct answers are A (the first) and C (the third).") is None
    assert final_choice("The answer is either B or C.") is None


# --- item 8: a JSON `answer` --------------------------------------------------------------------

# claude-3-haiku-20240307, gsm8k-main-test-#209 (gold 145): the JSON object, then a summary
HAIKU_209 = (
    'Here is the solution:\n\n```json\n{\n    "reasoning": "1. Total cost of the plates = 6 * $6000 = $36,000\\n'
    '2. The cost of one cup = $34,800 / (20 * 12) = $145",\n    "answer": "$145"\n}\n```\n\nThe key steps are:\n'
    "1. Calculate the total cost of the half dozen plates.\n2. Subtract $1200.\n3. Divide by the number of cups."
)
# gsm8k-main-test-#1001 (gold 2), as 35 of ZeroEval's models answer it
CAKE_1001 = (
    '```json\n{\n    "reasoning": "20 + 30 + 120 + 10 = 180 minutes, 3 hours before 5:00 pm is 2:00 pm.",\n'
    '    "answer": "2:00 pm"\n}\n```'
)


@pytest.mark.parametrize(("text", "gold", "before"), [(HAIKU_209, "145", "3"), (CAKE_1001, "2", "00")])
def test_gsm8k_reads_the_answer_of_a_json_object(text, gold, before):
    g = suite("gsm8k").grade(q(gold), text)
    assert (g.lenient, g.outcome, g.decided_by) == (gold, "correct", "lenient:json_answer")
    assert suite("gsm8k", "strict").grade(q(gold), text).outcome == "no_answer"  # the contract: #### N


def test_the_other_suites_read_a_json_answer_too():
    assert (
        suite("math500").grade(q(r"\frac{1}{2}"), '{"reasoning": "p = 2/4", "answer": "\\\\frac{1}{2}"}').outcome
        == "correct"
    )
    assert (
        suite("aime25").grade(q("204"), '{"answer": "204"}\nThe steps: 1. count 2. add 3. divide').outcome == "correct"
    )
    g = suite("gpqa_diamond").grade(
        q("B"), '{"reasoning": "a shift of 2 ppm", "answer": "B"}\n\nNote: D would need a catalyst.'
    )
    assert (g.outcome, g.decided_by) == ("correct", "lenient:json_answer")


@pytest.mark.parametrize(
    ("text", "take", "value"),
    [
        ('{"answer": 1,000\n}', "number", "1,000"),
        ('{"answer": 18, "unit": "dollars"}', "number", "18"),
        ('{"answer": null}', "line", None),
        ('{"answer": ""}', "line", None),
        ('"answer": "unterminated', "line", None),
        ('{"answer": "(C) the third"}', "letter", "C"),
        ('{"answer": "\\frac{1}{2}"}', "line", "\\frac{1}{2}"),  # LaTeX with one backslash, as written
        ('{"answer": "12"} and later {"Answer": "13"}', "number", "13"),
    ],
)
def test_json_answer_values(text, take, value):
    assert json_answer(text, take=take) == value


@pytest.mark.slow
def test_math500_reads_an_answer_line_not_the_denominator_of_its_last_number():
    # Qwen2.5-Math-7B repeats "... \text{ (Answer: } \frac{1}{10} \text{)} ..." until cut off;
    # the gold is 10, the last number of the text (before: graded correct by the last number).
    r = real("math500")[("Qwen2.5-Math-7B", "test/algebra/1578.json")]
    assert r["gold"] == "10"
    g = suite("math500").grade(q(r["gold"], r["question"]), r["output"])
    assert (g.outcome, g.decided_by) == ("incorrect", "lenient:final_answer")


# --- item 8: a solution cut off after its reasoning block ---------------------------------------


def test_a_solution_cut_off_after_the_reasoning_block_is_no_answer():
    text = (
        "<think>16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n#### 18</think>\n\nJanet's ducks lay 16 eggs a day. "
        "She eats 3 and bakes with 4, so she sells"
    )
    g = suite("gsm8k").grade(q("18"), text)
    assert (g.outcome, g.lenient, g.decided_by) == ("no_answer", None, "think:unfinished")  # not 4


def test_a_finished_solution_or_a_named_answer_after_the_block_still_counts():
    finished = "<think>9 * 2 = 18</think>\n\nShe sells 9 eggs for $2 each and makes $18."
    assert suite("gsm8k").grade(q("18"), finished).decided_by == "lenient:last_number"
    named = "<think>9 * 2 = 18</think>\n\nShe makes \\boxed{18} dollars, since she sells"
    assert suite("gsm8k").grade(q("18"), named).decided_by == "lenient:boxed"
