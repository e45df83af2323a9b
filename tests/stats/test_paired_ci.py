"""Paired-difference intervals against R (contingencytables, PropCIs), published values."""

import math

import pytest
from hypothesis import given

from qualgate.stats import PairedTable, paired_difference_ci

from strategies import ci_methods, paired_tables

# R 4.2 with these functions sourced from their GitHub sources (never installed from CRAN):
#   contingencytables (ocbe-uio/contingencytables): Tango_asymptotic_score_CI_paired_2x2,
#     Newcombe_square_and_add_CI_paired_2x2, Wald_CI_diff_paired_2x2,
#     Wald_CI_AgrestiMin_paired_2x2, Wald_CI_BonettPrice_paired_2x2
#   PropCIs (shearer/PropCIs): scoreci.mp (Tango), diffpropci.mp (Agresti-Min)
#   biostatUZH: confIntPairedProportion (Newcombe method 10)
# For a table (both_correct a, lost l, gained g, both_wrong d) each was called on
#   m <- matrix(c(a, g, l, d), 2, byrow = TRUE)   # R's estimate (n12 - n21)/N = acc(C) - acc(B)
# e.g. unlist(Tango_asymptotic_score_CI_paired_2x2(m)) and scoreci.mp(l, g, N, 0.95); the
# PropCIs and biostatUZH results agree with contingencytables (Tango to 2e-7, the rest to 1e-12).
# Tolerance: Tango 1e-6 (R's uniroot tol = 1e-7); closed-form methods 1e-10.
R_CI = {
    # table: {method: (low, high)}
    (59, 16, 6, 80): {
        "tango": (-0.124023432465, -0.005433395726),
        "newcombe": (-0.118621195639, -0.004625113933),
        "wald": (-0.118399657662, -0.005823944823),
        "agresti-min": (-0.118242009579, -0.004457376924),
        "bonett-price": (-0.119498811067, -0.003200575437),
    },
    (1, 7, 1, 12): {
        "tango": (-0.517232276357, -0.026003031678),
        "newcombe": (-0.506920226686, -0.025559124165),
        "wald": (-0.519709036257, -0.051719535171),
        "agresti-min": (-0.493225833094, -0.028513297341),
        "bonett-price": (-0.508359306666, -0.013379823768),
    },
    (1100, 40, 25, 155): {
        "tango": (-0.023890255537, 0.000624828921),
        "newcombe": (-0.023656076909, 0.000758559633),
        "wald": (-0.023318941032, 0.000591668304),
        "agresti-min": (-0.023375400181, 0.000682510620),
        "bonett-price": (-0.023466419875, 0.000773530314),
    },
    (450, 12, 9, 29): {
        "tango": (-0.025762805388, 0.012969730558),
        "newcombe": (-0.025608814191, 0.013190691874),
        "wald": (-0.023955666401, 0.011955666401),
        "agresti-min": (-0.024281472889, 0.012329281653),
        "bonett-price": (-0.024693212898, 0.012741021663),
    },
    (3, 5, 2, 1): {
        "tango": (-0.633664036390, 0.201090692592),
        "newcombe": (-0.606367703984, 0.170864722699),
        "wald": (-0.715737262564, 0.170282717109),
        "agresti-min": (-0.638332338558, 0.176793877019),
        "bonett-price": (-0.665324419895, 0.203785958357),
    },
    # zero cells
    (10, 0, 0, 5): {
        "tango": (-0.203883303437, 0.203883303437),
        "newcombe": (-0.134947883382, 0.134947883382),
        "wald": (0.0, 0.0),
        "agresti-min": (-0.115291999091, 0.115291999091),
        "bonett-price": (-0.163047508747, 0.163047508747),
    },
    (0, 3, 0, 0): {
        "tango": (-1.0, 0.122994063517),
        "newcombe": (-1.0, -0.205923282460),  # biostatUZH gives NaN (0/0 correlation)
        "wald": (-1.0, -1.0),
        "agresti-min": (-1.0, -0.018580722524),
        "bonett-price": (-1.0, 0.101218032461),
    },
    (20, 3, 0, 7): {
        "tango": (-0.256210825821, 0.024864746430),
        "newcombe": (-0.228658162445, 0.027580245928),
        "wald": (-0.207351648623, 0.007351648623),
        "agresti-min": (-0.211862701863, 0.024362701863),
        "bonett-price": (-0.226798994625, 0.039298994625),
    },
    (0, 0, 12, 0): {
        "tango": (0.515011986157, 1.0),
        "newcombe": (0.657061686994, 1.0),
        "wald": (1.0, 1.0),
        "agresti-min": (0.626495843520, 1.0),
        "bonett-price": (0.587333063788, 1.0),
    },
    (40, 1, 0, 0): {
        "tango": (-0.125950622123, 0.063366787561),
        "newcombe": (-0.125950620558, 0.063597290540),
        "wald": (-0.071607669168, 0.022827181363),
        "agresti-min": (-0.087340589935, 0.040828962028),
        "bonett-price": (-0.101897061147, 0.055385433240),
    },
}
CASES = [(t, m, lim) for t, by_method in R_CI.items() for m, lim in by_method.items()]


@pytest.mark.parametrize(("table", "method", "expected"), CASES, ids=lambda x: str(x))
def test_interval_matches_r(table, method, expected):
    tol = 1e-6 if method == "tango" else 1e-10
    low, high = paired_difference_ci(*table, method=method)
    assert low == pytest.approx(expected[0], abs=tol)
    assert high == pytest.approx(expected[1], abs=tol)


def test_ninety_percent_level_matches_r():
    # R: m <- matrix(c(1100, 25, 40, 155), 2, byrow = TRUE)
    #    Tango_asymptotic_score_CI_paired_2x2(m, alpha = 0.1)   -> -0.021769357607 -0.001344144317
    #    Newcombe_square_and_add_CI_paired_2x2(m, alpha = 0.1)  -> -0.021629301259 -0.001218676408
    tango = paired_difference_ci(1100, 40, 25, 155, confidence_level=0.9)
    newcombe = paired_difference_ci(1100, 40, 25, 155, confidence_level=0.9, method="newcombe")
    assert tango == pytest.approx((-0.021769357607, -0.001344144317), abs=1e-6)
    assert newcombe == pytest.approx((-0.021629301259, -0.001218676408), abs=1e-10)


def test_cavo_example_matches_published_four_decimals():
    # Fagerland, Lydersen & Laake's contingencytables prints, for the Cavo et al. (2012)
    # table [[59, 6], [16, 80]] (tests/testthat/test-chapter08.R): Tango -0.1240 to -0.0054,
    # Newcombe -0.1186 to -0.0046, Wald -0.1184 to -0.0058, Agresti-Min -0.1182 to -0.0045,
    # Bonett-Price -0.1195 to -0.0032. Tolerance 5e-5 (four printed decimals).
    printed = {
        "tango": (-0.1240, -0.0054),
        "newcombe": (-0.1186, -0.0046),
        "wald": (-0.1184, -0.0058),
        "agresti-min": (-0.1182, -0.0045),
        "bonett-price": (-0.1195, -0.0032),
    }
    for method, expected in printed.items():
        assert paired_difference_ci(59, 16, 6, 80, method=method) == pytest.approx(expected, abs=5e-5), method


def test_wald_cc_widens_wald_by_one_over_n():
    # Fleiss, Levin & Paik (2003) §13.1: the continuity-corrected limits are the Wald limits
    # moved out by 1/n.
    low, high = paired_difference_ci(59, 16, 6, 80, method="wald")
    cc_low, cc_high = paired_difference_ci(59, 16, 6, 80, method="wald-cc")
    assert (low - cc_low, cc_high - high) == pytest.approx((1 / 161, 1 / 161), abs=1e-15)


@pytest.mark.parametrize("method", ["tango", "newcombe", "wald", "wald-cc", "agresti-min", "bonett-price"])
def test_empty_table_gives_the_whole_range(method):
    assert paired_difference_ci(0, 0, 0, 0, method=method) == (-1.0, 1.0)


@given(paired_tables(min_n=1), ci_methods)
def test_interval_is_ordered_inside_minus_one_one_and_contains_the_estimate(table, method):
    low, high = table.confidence_interval(method=method)
    assert -1.0 <= low <= high <= 1.0
    assert low - 1e-12 <= table.difference <= high + 1e-12


@given(paired_tables(max_count=200, min_n=1), ci_methods)
def test_interval_narrows_when_every_count_is_multiplied(table, method):
    low, high = table.confidence_interval(method=method)
    bigger = PairedTable(*(4 * getattr(table, f) for f in ("both_correct", "lost", "gained", "both_wrong")))
    big_low, big_high = bigger.confidence_interval(method=method)
    assert big_high - big_low <= high - low + 1e-12


@given(paired_tables(min_n=1), ci_methods)
def test_swapping_lost_and_gained_negates_the_interval(table, method):
    low, high = table.confidence_interval(method=method)
    swapped = paired_difference_ci(table.both_correct, table.gained, table.lost, table.both_wrong, method=method)
    assert swapped == pytest.approx((-high, -low), abs=1e-9)


@given(paired_tables(min_n=1), ci_methods)
def test_higher_confidence_gives_a_wider_interval(table, method):
    low95, high95 = table.confidence_interval(method=method)
    low99, high99 = table.confidence_interval(method=method, confidence_level=0.99)
    assert low99 <= low95 + 1e-12 and high95 <= high99 + 1e-12


def test_result_is_a_named_tuple():
    ci = paired_difference_ci(59, 16, 6, 80)
    assert (ci.low, ci.high) == tuple(ci)
    assert math.isclose(ci.low, -0.124023432465, abs_tol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(method="score"), "method"),
        (dict(confidence_level=1.0), "confidence_level"),
        (dict(confidence_level=95), "confidence_level"),
    ],
)
def test_invalid_options_raise_value_error_naming_them(kwargs, named):
    with pytest.raises(ValueError, match=rf"^{named} "):
        paired_difference_ci(59, 16, 6, 80, **kwargs)


def test_negative_count_is_rejected():
    with pytest.raises(ValueError, match=r"^lost must be a non-negative integer, got -2"):
        paired_difference_ci(5, -2, 1, 1)
