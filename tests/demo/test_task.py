"""The demo's synthetic arithmetic task: determinism, splits, ambiguity, grading."""

import json
import re
import subprocess
import sys

import pytest

from qualgate.demo import task


def _dump(rows):
    return json.dumps(rows, sort_keys=True)


def test_generate_is_identical_in_another_process():
    code = (
        "import json; from qualgate.demo.task import generate; "
        "print(json.dumps(generate(n=200, seed=7, split='train'), sort_keys=True))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _dump(task.generate(n=200, seed=7, split="train"))


def test_first_rows_do_not_depend_on_n():
    assert task.generate(n=20, seed=3) == task.generate(n=50, seed=3)[:20]


def test_ids_are_unique_and_name_split_seed_and_index():
    rows = task.generate(n=100, seed=5, split="val")
    assert [r["id"] for r in rows] == [f"val-5-{i}" for i in range(100)]


@pytest.mark.slow
def test_no_question_repeats_within_a_set():
    rows = task.generate(n=3000, seed=0)
    assert len({r["question"] for r in rows}) == 3000


def test_seeds_give_different_questions():
    a = {r["question"] for r in task.generate(n=100, seed=0)}
    b = {r["question"] for r in task.generate(n=100, seed=1)}
    assert len(a & b) < 5


@pytest.mark.slow
def test_splits_never_share_a_question():
    sets = {s: {r["question"] for r in task.generate(n=3000, seed=0, split=s)} for s in task.SPLITS}
    assert not sets["train"] & sets["test"]
    assert not sets["train"] & sets["val"]
    assert not sets["val"] & sets["test"]


def test_answer_is_the_value_of_the_expression():
    for row in task.generate(n=300, seed=2):
        expression = row["question"].removeprefix("What is ").removesuffix("?")
        assert int(row["answer"]) == eval(expression)  # plain + - * on integers


def test_running_totals_never_go_negative():
    for row in task.generate(n=300, seed=4):
        assert all(int(x) >= 0 for x in re.findall(r"=(-?\d+)", row["reference"]))


@pytest.mark.slow
def test_reference_is_one_of_the_valid_chains():
    for row in task.generate(n=200, seed=1, max_terms=3):
        assert row["reference"] in task.chains(row["question"])


def _ambiguity(row):
    """For each position of the reference chain, the set of correct next characters."""
    ref = row["reference"]
    return [(ref[:i], task.continuations(row["question"], ref[:i])) for i in range(len(ref) + 1)]


def test_reference_is_correct_at_every_position():
    for row in task.generate(n=60, seed=1):
        ref = row["reference"]
        for i, (_, allowed) in enumerate(_ambiguity(row)):
            assert (ref[i] if i < len(ref) else "") in allowed


def test_every_question_has_positions_with_several_correct_continuations():
    for row in task.generate(n=60, seed=2):
        assert any(len(allowed) > 1 for _, allowed in _ambiguity(row))


def test_operand_order_is_ambiguous():
    assert task.continuations("What is 17 + 42?", "First, ") == {"1", "4"}
    assert task.continuations("What is 5 * 13 - 9?", "") == {"F", "5", "1"}


def test_digits_of_results_have_one_correct_continuation():
    for row in task.generate(n=60, seed=3):
        for prefix, allowed in _ambiguity(row):
            if prefix.rstrip("0123456789").endswith(("=", "The answer is ")):
                assert len(allowed) == 1, prefix


def test_a_wrong_digit_has_no_correct_continuation():
    assert task.continuations("What is 17 + 42?", "17+42=58") == set()


def test_a_complete_chain_ends_there():
    assert task.continuations("What is 2 + 3?", "2+3=5. The answer is 5.") == {""}


def test_all_chains_end_in_the_answer():
    for row in task.generate(n=50, seed=9, max_terms=3):
        ends = {c.rsplit(" The answer is ", 1)[1] for c in task.chains(row["question"])}
        assert ends == {row["answer"] + "."}


def test_parse_inverts_question_rendering():
    for row in task.generate(n=300, seed=6):
        terms = task.parse(row["question"])
        assert task._question(terms) == row["question"]


@pytest.mark.parametrize(
    "bad", [{"n": -1}, {"n": 1.5}, {"split": "dev"}, {"min_terms": 1}, {"p_product": 2.0}, {"max_factor": 5}]
)
def test_invalid_parameters_are_rejected_naming_them(bad):
    kwargs = {"n": 3, "seed": 0} | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        task.generate(**kwargs)


def test_extract_answer_takes_the_last_strict_answer():
    assert task.extract_answer("The answer is 3. No wait. The answer is 12.") == 12
    assert task.extract_answer("so 12") is None
