"""The discordance interval (Clopper-Pearson on the effective sample) against R and scipy."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

from qualgate.stats import ConfidenceInterval, discordance_interval

# R 4.x, binom.test(x, n)$conf.int (printed to 7 significant digits, so absolute 5e-8):
#   binom.test(7, 20)$conf.int    -> 0.1539092 0.5921885
#   binom.test(682, 925)$conf.int -> 0.7076683 0.7654066   (the example of ?binom.test)
R_EXACT = [(7, 20, 0.1539092, 0.5921885), (682, 925, 0.7076683, 0.7654066)]


@pytest.mark.parametrize(("x", "n", "low", "high"), R_EXACT)
def test_discordance_interval_matches_r_binom_test(x, n, low, high):
    assert discordance_interval(x, n) == pytest.approx((low, high), abs=5e-8)


def test_no_discordant_pair_gives_the_closed_form_upper_end():
    # x = 0: low 0 and high 1 - (alpha/2)^(1/n) = 1 - 0.025^(1/10) (R: 0.0000000 0.3084971)
    assert discordance_interval(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)), abs=1e-12)


def test_all_pairs_discordant_gives_the_closed_form_lower_end():
    # x = n: high 1 and low (alpha/2)^(1/n) = 0.025^(1/10) (R: 0.6915029 1.0000000)
    assert discordance_interval(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0), abs=1e-12)


@given(n=st.integers(1, 2000), data=st.data(), level=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_discordance_interval_matches_scipy_exact_binomial_interval(n, data, level):
    # scipy.stats.binomtest(x, n).proportion_ci(confidence_level, method="exact"); absolute 1e-12
    x = data.draw(st.integers(0, n))
    ref = binomtest(x, n).proportion_ci(confidence_level=level, method="exact")
    assert discordance_interval(x, n, confidence_level=level) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_a_design_effect_divides_the_sample_and_the_discordant_count():
    # 14 of 40 with design effect 2 is the exact interval of 7 of 20
    assert discordance_interval(14, 40, design_effect=2.0) == pytest.approx(discordance_interval(7, 20), abs=1e-12)


def test_a_design_effect_widens_the_interval():
    low1, high1 = discordance_interval(30, 500)
    low3, high3 = discordance_interval(30, 500, design_effect=3.0)
    assert low3 < low1 and high3 > high1


def test_the_interval_is_a_confidence_interval_tuple():
    assert isinstance(discordance_interval(3, 9), ConfidenceInterval)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((11, 10), {}, "discordant must be at most n"),
        ((1, 0), {}, "n must be a positive integer"),
        ((-1, 10), {}, "discordant must be"),
        ((1, 10), {"design_effect": 0}, "design_effect must be"),
        ((1, 10), {"confidence_level": 1.0}, "confidence_level must be"),
    ],
)
def test_invalid_arguments_are_named(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        discordance_interval(*args, **kwargs)


@pytest.mark.parametrize("deff", [1.0, 1.7, 3.25])
@pytest.mark.parametrize(("x", "n"), [(1, 2), (7, 20), (18, 300), (682, 925), (0, 40), (40, 40), (3, 5000)])
def test_the_interval_is_scipy_stats_beta_ppf_to_the_last_bit(x, n, deff):
    # issue 47: the quantile comes from scipy.special's ufunc without importing scipy.stats;
    # the numbers must be scipy.stats.beta.ppf's exactly (the pilot's ψ sizes the design)
    from scipy.stats import beta

    level = 0.9
    alpha, n_eff, k = 1 - level, n / deff, x / deff  # the function's own arithmetic
    low, high = discordance_interval(x, n, design_effect=deff, confidence_level=level)
    assert low == (0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n_eff - k + 1)))
    assert high == (1.0 if k >= n_eff else float(beta.ppf(1 - alpha / 2, k + 1, n_eff - k)))
