"""Extractors, graders and gold parsers registered from Python are named in suite files like the
built-in ones; a name the registry does not hold is refused when the file is read."""

from __future__ import annotations

import pytest

from qualgate import graders
from qualgate.errors import DataError
from qualgate.suites import load_suite

from support import SUITE


@pytest.fixture
def registered():
    """The registries as they were, restored after the test (registering changes module tables)."""
    tables = (graders.EXTRACTORS, graders.GRADERS, graders.GOLD_PARSERS)
    saved = [dict(t) for t in tables]
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)


def _suite(tmp_path, text):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def test_registered_functions_are_used_by_a_suite_file(tmp_path, registered):
    graders.register_extractor("first_word", lambda text: text.split()[0] if text.split() else None)
    graders.register_grader("same_parity", lambda pred, gold: int(pred) % 2 == int(gold) % 2)
    graders.register_gold_parser("doubled", lambda value: str(2 * int(value)))
    text = (
        SUITE.format(n=3)
        .replace("lenient: last_number", "lenient: first_word")
        .replace("grader: numeric", "grader: same_parity")
        .replace("gold: {field: answer}", "gold: {field: answer, parse: doubled}")
    )
    suite = load_suite(_suite(tmp_path, text))
    q = suite.questions[0]
    assert int(q.gold) % 2 == 0  # doubled
    assert suite.grade(q, "4 is it").outcome == "correct" and suite.grade(q, "3 is it").outcome == "incorrect"
    assert suite.grade(q, "4 is it").lenient == "4"


def test_a_grader_not_registered_is_refused_naming_the_field(tmp_path):
    text = SUITE.format(n=3).replace("grader: numeric", "grader: same_parity_unregistered")
    with pytest.raises(DataError, match="unknown function") as exc:
        load_suite(_suite(tmp_path, text))
    assert exc.value.field == "grader"


@pytest.mark.parametrize("name, fn", [("", len), ("x", 3), (None, len)])
def test_a_registration_without_a_name_or_a_function_is_refused(name, fn):
    with pytest.raises(ValueError, match="grader"):
        graders.register_grader(name, fn)
