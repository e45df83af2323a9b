"""The examples in the CI modules' docstrings run and print what they say."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["_admission", "_lint", "_check"])
def test_docstring_examples(name):
    module = importlib.import_module(f"qualgate.ci.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
