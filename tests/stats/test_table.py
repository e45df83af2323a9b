"""PairedTable: counting, derived fractions, delegation."""

import json
import math

import numpy as np
import pytest
from hypothesis import given

from qualgate.stats import PairedTable, mcnemar, noninferiority, paired_difference_ci

from strategies import boolean_outcomes, paired_tables


def test_counts_each_outcome_pair():
    b = [True, True, True, False, False, True]
    c = [True, False, True, True, False, False]
    assert PairedTable.from_outcomes(b, c) == PairedTable(2, 2, 1, 1)


@given(boolean_outcomes(max_size=60))
@pytest.mark.slow
def test_counts_add_up_and_match_accuracies(outcomes):
    b, c = outcomes
    table = PairedTable.from_outcomes(np.array(b, dtype=bool), np.array(c, dtype=bool))
    assert table.n == len(b)
    if b:
        assert table.difference == pytest.approx(np.mean(c) - np.mean(b), abs=1e-12)
        assert table.loss == pytest.approx(-table.difference, abs=1e-15)
        assert table.discordant == pytest.approx(np.mean(np.array(b) != np.array(c)))


def test_zero_one_integers_are_accepted():
    assert PairedTable.from_outcomes([1, 0, 1], [1, 1, 0]) == PairedTable(1, 1, 1, 0)


@pytest.mark.parametrize(
    ("b", "c", "match"),
    [
        ([True, False], [True], "same length"),
        ([0.5, 1.0], [True, False], "baseline_correct must hold booleans"),
        ([True, False], [2, 0], "candidate_correct must hold booleans"),
        ([[True]], [[True]], "1-D"),
    ],
)
def test_bad_outcomes_are_rejected(b, c, match):
    with pytest.raises(ValueError, match=match):
        PairedTable.from_outcomes(b, c)


def test_negative_or_fractional_counts_are_rejected():
    with pytest.raises(ValueError, match="^gained must be a non-negative integer"):
        PairedTable(1, 2, -1, 0)
    with pytest.raises(ValueError, match="^both_wrong must be a non-negative integer"):
        PairedTable(1, 2, 1, 0.5)


def test_numpy_integers_become_python_ints():
    table = PairedTable(np.int64(3), np.int32(1), np.uint8(2), 0)
    assert all(type(v) is int for v in table.to_dict().values() if not isinstance(v, float))


def test_empty_table_has_undefined_fractions():
    table = PairedTable(0, 0, 0, 0)
    assert table.n == 0 and math.isnan(table.difference)
    assert table.to_dict()["loss"] is None


def test_to_dict_is_json_ready():
    data = json.loads(json.dumps(PairedTable(59, 16, 6, 80).to_dict()))
    assert data == {
        "both_correct": 59,
        "lost": 16,
        "gained": 6,
        "both_wrong": 80,
        "n": 161,
        "discordant": 22 / 161,
        "difference": -10 / 161,
        "loss": 10 / 161,
    }


def test_is_frozen():
    with pytest.raises(AttributeError):
        PairedTable(1, 1, 1, 1).lost = 2


@given(paired_tables())
@pytest.mark.slow
def test_methods_delegate_to_the_functions(table):
    assert table.mcnemar(alternative="less") == mcnemar(table.lost, table.gained, alternative="less")
    counts = (table.both_correct, table.lost, table.gained, table.both_wrong)
    assert table.confidence_interval(method="newcombe") == paired_difference_ci(*counts, method="newcombe")
    ours = table.noninferiority(margin=0.05).to_dict()  # to_dict: nan loss compares as None
    assert ours == noninferiority(*counts, margin=0.05).to_dict()
