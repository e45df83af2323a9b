"""The examples in the statistics docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = ["_table", "_mcnemar", "_paired_ci", "_noninferiority", "_power", "_unpaired"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"qualgate.stats.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
