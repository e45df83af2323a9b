"""The demo_arithmetic suite: the trained prompt, and grading of generated chains."""

import pytest

from qualgate.demo import task
from qualgate.suites import load_suite

SUITE = load_suite("demo_arithmetic")
ROWS = task.generate(n=len(SUITE.questions), seed=0, split="test")


def test_suite_has_the_held_out_test_questions_in_generator_order():
    assert len(SUITE.questions) == 2000
    assert [q.id for q in SUITE.questions] == [r["id"] for r in ROWS]
    assert [q.gold for q in SUITE.questions] == [r["answer"] for r in ROWS]


def test_prompt_is_the_one_the_models_were_trained_on():
    for q, row in zip(SUITE.questions, ROWS):
        assert list(q.prompt) == task.messages(row["question"])


def test_every_reference_chain_grades_correct_under_the_strict_format():
    for q, row in zip(SUITE.questions, ROWS):
        g = SUITE.grade(q, row["reference"])
        assert (g.outcome, g.strict_outcome) == ("correct", "correct"), (q.id, row["reference"])


def test_a_wrong_final_answer_grades_incorrect():
    for q, row in zip(SUITE.questions[:300], ROWS):
        wrong = row["reference"].replace(f"The answer is {row['answer']}.", f"The answer is {int(row['answer']) + 1}.")
        assert SUITE.grade(q, wrong).outcome == "incorrect"


def test_missing_strict_format_is_no_answer_with_a_lenient_extraction():
    q, row = SUITE.questions[0], ROWS[0]
    g = SUITE.grade(q, row["reference"].split(" The answer is")[0])
    assert g.outcome == "no_answer"
    assert g.lenient is not None


@pytest.mark.parametrize("text", ["", "The answer is", "The answer is .", "9" * 5000])
def test_degenerate_outputs_are_graded_without_error(text):
    assert SUITE.grade(SUITE.questions[0], text).outcome in ("incorrect", "no_answer")


@pytest.mark.slow
def test_generation_settings_cover_the_longest_chain():
    from qualgate.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    longest = max(len(tok(r["reference"])["input_ids"]) for r in ROWS) + 1  # + <|end|>
    assert SUITE.generation["max_tokens"] >= longest
