"""Holm's step-down adjustment against a worked example and statsmodels."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from qualgate.stats import holm

# The example of the Wikipedia article "Holm–Bonferroni method" (p = 0.01, 0.04, 0.03,
# 0.005), adjusted by hand as R's p.adjust(p, method = "holm") does: sorted 0.005, 0.01,
# 0.03, 0.04 times m - i + 1 = 4, 3, 2, 1 gives 0.02, 0.03, 0.06, 0.04; the running maximum
# turns the last into 0.06. Tolerance: absolute 1e-15 (exact decimal arithmetic, rounded).
WIKIPEDIA_P = [0.01, 0.04, 0.03, 0.005]
WIKIPEDIA_ADJUSTED = [0.03, 0.06, 0.06, 0.02]


def test_holm_matches_the_hand_adjusted_wikipedia_example():
    assert holm(WIKIPEDIA_P) == pytest.approx(WIKIPEDIA_ADJUSTED, abs=1e-15)


def test_holm_caps_adjusted_values_at_one():
    # m = 3: 3 * 0.2 = 0.6, 2 * 0.6 = 1.2 -> 1, 1 * 0.9 = 0.9 -> max(1, 0.9) = 1
    assert holm([0.6, 0.2, 0.9]) == [1.0, 0.6, 1.0]


def test_holm_of_one_p_value_is_that_p_value():
    assert holm([0.037]) == [0.037]


def test_holm_of_no_p_values_is_empty():
    assert holm([]) == []


@pytest.mark.slow
@settings(max_examples=25)  # multipletests takes ~60 ms a call
@given(st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_holm_matches_statsmodels_multipletests(p):
    # statsmodels.stats.multitest.multipletests(p, method="holm")[1]; absolute 1e-12
    # (holm rounds to 15 decimals; both compute the same products and running maxima)
    expected = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(expected), abs=1e-12)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), None])
def test_holm_refuses_a_value_that_is_not_a_probability(bad):
    with pytest.raises(ValueError, match="pvalues must"):
        holm([0.01, bad])
