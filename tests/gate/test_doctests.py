"""The examples in the records, gate, rendering and clustered-statistics docstrings hold."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["qualgate.stats._clustered", "qualgate.gate", "qualgate._render",
                                  "qualgate.evidence", "qualgate.ci._check"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
