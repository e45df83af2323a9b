"""McNemar's test against R, statsmodels and published values, and its properties."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import beta, binomtest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.proportion import proportion_confint

from qualgate.stats import mcnemar

from strategies import alternatives, counts, mcnemar_methods

# R 4.2 (base stats + contingencytables' McNemar_midP_test_paired_2x2, sourced from
# ocbe-uio/contingencytables), one row per (lost, gained), with
#   m = lost + gained; tab = matrix(c(100, gained, lost, 100), 2, byrow = TRUE)
#   exact2       = binom.test(gained, m)$p.value
#   exact_less   = binom.test(gained, m, alternative = "less")$p.value
#   exact_greater= binom.test(gained, m, alternative = "greater")$p.value
#   midp2        = McNemar_midP_test_paired_2x2(tab)
#   asym_p, chi2 = mcnemar.test(tab, correct = FALSE)$p.value, $statistic
#   cc_p, cc_chi2= mcnemar.test(tab, correct = TRUE)$p.value, $statistic
# Tolerance: relative 1e-9 (both sides compute the same double-precision quantities).
R_ROWS = [
    # lost, gained, exact2, exact_less, exact_greater, midp2, asym_p, chi2, cc_p, cc_chi2
    (
        16,
        6,
        0.0524787902832032,
        0.0262393951416016,
        0.991549730300903,
        0.0346896648406983,
        0.0330062576612324,
        4.54545454545455,
        0.0550088336292657,
        3.68181818181818,
    ),
    (7, 1, 0.0703125, 0.03515625, 0.99609375, 0.0390625, 0.0338948535246893, 4.5, 0.077099871743542, 3.125),
    (3, 0, 0.25, 0.125, 1.0, 0.125, 0.0832645166635506, 3.0, 0.248213078989924, 1.33333333333333),
    (
        40,
        25,
        0.0816815339415403,
        0.0408407669707702,
        0.976823262833544,
        0.064017504137226,
        0.0628118475160988,
        3.46153846153846,
        0.08247788747321,
        3.01538461538462,
    ),
    (
        12,
        9,
        0.663623809814453,
        0.331811904907227,
        0.808344841003418,
        0.523467063903809,
        0.512690760261923,
        0.428571428571429,
        0.662520583540057,
        0.19047619047619,
    ),
    (5, 5, 1.0, 0.623046875, 0.623046875, 0.876953125, 1.0, 0.0, 1.0, 0.0),
    (0, 4, 0.125, 1.0, 0.0625, 0.0625, 0.0455002638963585, 4.0, 0.133614402537715, 2.25),
    (
        1000,
        900,
        0.0231088451089011,
        0.0115544225544505,
        0.989762923300737,
        0.0217914992537134,
        0.0217814627911195,
        5.26315789473684,
        0.0231339195107552,
        5.15842105263158,
    ),
    # 10^6 discordant pairs
    (
        500500,
        499500,
        0.317794691363306,
        0.158897345681653,
        0.841586595848042,
        0.317310749833611,
        0.317310507862914,
        1.0,
        0.317794691282637,
        0.998001,
    ),
    (
        500,
        0,
        6.10987272699958e-151,
        3.05493636349979e-151,
        1.0,
        3.05493636349987e-151,
        9.50539776655409e-111,
        500.0,
        2.58640476057869e-110,
        498.002,
    ),
]
REL = 1e-9


@pytest.mark.parametrize("row", R_ROWS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_exact_pvalues_match_r_binom_test(row):
    lost, gained, two, less, greater = row[:5]
    assert mcnemar(lost, gained).pvalue == pytest.approx(two, rel=REL)
    assert mcnemar(lost, gained, alternative="less").pvalue == pytest.approx(less, rel=REL)
    assert mcnemar(lost, gained, alternative="greater").pvalue == pytest.approx(greater, rel=REL)


@pytest.mark.parametrize("row", R_ROWS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_midp_pvalue_matches_contingencytables(row):
    lost, gained, midp = row[0], row[1], row[5]
    assert mcnemar(lost, gained, method="midp").pvalue == pytest.approx(midp, rel=REL)


@pytest.mark.parametrize("row", R_ROWS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_asymptotic_pvalues_and_chi_square_match_r_mcnemar_test(row):
    lost, gained, asym_p, chi2, cc_p, cc_chi2 = row[0], row[1], *row[6:]
    plain = mcnemar(lost, gained, method="asymptotic")
    corrected = mcnemar(lost, gained, method="asymptotic-cc")
    assert plain.pvalue == pytest.approx(asym_p, rel=REL)
    assert plain.zstatistic**2 == pytest.approx(chi2, rel=REL)
    assert corrected.pvalue == pytest.approx(cc_p, rel=REL)
    assert corrected.zstatistic**2 == pytest.approx(cc_chi2, rel=1e-6)  # R printed 6 digits


def test_cavo_example_matches_published_values():
    # Cavo et al. (2012) table [[59, 6], [16, 80]] as analysed by Fagerland, Lydersen & Laake
    # (2014) and quoted in Wikipedia "McNemar's test" (second example): asymptotic chi2 = 4.55,
    # p = 0.033; with continuity correction chi2 = 3.68, p = 0.055; mid-p 0.035 (rounded:
    # tolerance half a unit of the last printed digit). The companion package
    # contingencytables prints P = 0.052479 (exact), 0.034690 (mid-p), 0.033006 with
    # Z = -2.132 (asymptotic) and P = 0.055009 with Z = 1.919 (corrected) in
    # tests/testthat/test-chapter08.R (tolerance 5e-7, 5e-4 for Z).
    lost, gained = 16, 6
    asym = mcnemar(lost, gained, method="asymptotic")
    cc = mcnemar(lost, gained, method="asymptotic-cc")
    assert asym.zstatistic**2 == pytest.approx(4.55, abs=0.005)
    assert asym.pvalue == pytest.approx(0.033, abs=0.0005)
    assert cc.zstatistic**2 == pytest.approx(3.68, abs=0.005)
    assert cc.pvalue == pytest.approx(0.055, abs=0.0005)
    assert mcnemar(lost, gained, method="midp").pvalue == pytest.approx(0.035, abs=0.0005)
    assert mcnemar(lost, gained).pvalue == pytest.approx(0.052479, abs=5e-7)
    assert mcnemar(lost, gained, method="midp").pvalue == pytest.approx(0.034690, abs=5e-7)
    assert asym.pvalue == pytest.approx(0.033006, abs=5e-7)
    assert asym.zstatistic == pytest.approx(-2.132, abs=5e-4)  # their Z is (n12 - n21)/sqrt(m)
    assert cc.pvalue == pytest.approx(0.055009, abs=5e-7)
    assert abs(cc.zstatistic) == pytest.approx(1.919, abs=5e-4)


def test_first_wikipedia_example_chi_square():
    # Wikipedia "McNemar's test", first example: b = 121, c = 59 gives chi2 = 21.35 (printed
    # truncated; 62**2/180 = 21.3556, so tolerance 0.01).
    assert mcnemar(121, 59, method="asymptotic").zstatistic ** 2 == pytest.approx(21.35, abs=0.01)


def test_matches_statsmodels_on_every_small_table():
    # statsmodels 0.15 statsmodels.stats.contingency_tables.mcnemar: exact=True is the
    # two-sided binomial test; exact=False the chi-square with correction=False/True. Its
    # corrected statistic is not floored at 0, so lost == gained is excluded there.
    for lost in range(26):
        for gained in range(26):
            if lost + gained == 0:
                continue
            table = [[50, gained], [lost, 50]]
            ref_exact = sm_mcnemar(table, exact=True).pvalue
            ref_plain = sm_mcnemar(table, exact=False, correction=False)
            assert mcnemar(lost, gained).pvalue == pytest.approx(ref_exact, rel=1e-9)
            got = mcnemar(lost, gained, method="asymptotic")
            assert got.pvalue == pytest.approx(ref_plain.pvalue, rel=1e-9)
            assert got.zstatistic**2 == pytest.approx(ref_plain.statistic, rel=1e-9)
            if lost != gained:
                ref_cc = sm_mcnemar(table, exact=False, correction=True)
                assert mcnemar(lost, gained, method="asymptotic-cc").pvalue == pytest.approx(ref_cc.pvalue, rel=1e-9)


@pytest.mark.parametrize("method", ["exact", "midp", "asymptotic", "asymptotic-cc"])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_no_discordant_pairs_gives_pvalue_one_and_no_estimate(method, alternative):
    result = mcnemar(0, 0, method=method, alternative=alternative)
    assert result.pvalue == 1.0 and math.isnan(result.statistic)
    assert result.zstatistic == (None if method in ("exact", "midp") else 0.0)


def test_less_means_candidate_worse():
    assert mcnemar(30, 5, alternative="less").pvalue < 0.001
    assert mcnemar(30, 5, alternative="greater").pvalue > 0.999


@given(counts, counts, mcnemar_methods, alternatives)
def test_pvalue_is_a_probability(lost, gained, method, alternative):
    assert 0.0 <= mcnemar(lost, gained, method=method, alternative=alternative).pvalue <= 1.0


@given(counts, counts, mcnemar_methods)
def test_swapping_lost_and_gained_mirrors_one_sided_pvalues(lost, gained, method):
    less = mcnemar(lost, gained, method=method, alternative="less").pvalue
    mirrored = mcnemar(gained, lost, method=method, alternative="greater").pvalue
    assert less == pytest.approx(mirrored, rel=1e-12, abs=1e-300)
    two = mcnemar(lost, gained, method=method).pvalue
    assert two == pytest.approx(mcnemar(gained, lost, method=method).pvalue, rel=1e-12, abs=1e-300)


@given(counts, counts)
def test_exact_two_sided_is_twice_the_smaller_tail(lost, gained):
    less = mcnemar(lost, gained, alternative="less").pvalue
    greater = mcnemar(lost, gained, alternative="greater").pvalue
    assert mcnemar(lost, gained).pvalue == pytest.approx(min(1.0, 2 * min(less, greater)), rel=1e-12)


@given(counts, counts, alternatives)
def test_midp_is_never_above_exact(lost, gained, alternative):
    exact = mcnemar(lost, gained, alternative=alternative).pvalue
    assert mcnemar(lost, gained, method="midp", alternative=alternative).pvalue <= exact + 1e-15


def test_result_is_frozen_and_serialisable():
    result = mcnemar(16, 6, alternative="less", method="midp")
    assert json.loads(json.dumps(result.to_dict())) == {
        "lost": 16,
        "gained": 6,
        "statistic": 6 / 22,
        "pvalue": result.pvalue,
        "zstatistic": None,
        "method": "midp",
        "alternative": "less",
    }
    with pytest.raises(AttributeError):
        result.pvalue = 0.5


def test_dict_of_a_result_without_discordant_pairs_has_no_nan():
    assert mcnemar(0, 0).to_dict()["statistic"] is None


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(lost=-1, gained=3), "lost"),
        (dict(lost=2.0, gained=3), "lost"),
        (dict(lost=2, gained="3"), "gained"),
        (dict(lost=2, gained=3, method="fisher"), "method"),
        (dict(lost=2, gained=3, alternative="worse"), "alternative"),
    ],
)
def test_invalid_arguments_raise_value_error_naming_them(kwargs, named):
    with pytest.raises(ValueError, match=rf"^{named} "):
        mcnemar(**kwargs)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_large_counts_stay_finite(lost, gained):
    for method in ("exact", "midp", "asymptotic"):
        assert 0.0 <= mcnemar(lost, gained, method=method).pvalue <= 1.0


@given(counts, counts.filter(bool), mcnemar_methods, alternatives)
def test_statistic_is_the_share_of_discordant_questions_gained_whatever_the_method(lost, gained, method, alternative):
    result = mcnemar(lost, gained, method=method, alternative=alternative)
    assert result.statistic == binomtest(gained, lost + gained).statistic == gained / (lost + gained)


def test_exact_interval_matches_r_binom_test():
    # R: binom.test(7, 20)$conf.int -> 0.1539092 0.5921885 (7 digits printed: abs 5e-8)
    assert mcnemar(13, 7).confidence_interval() == pytest.approx((0.1539092, 0.5921885), abs=5e-8)


@given(counts, counts, alternatives, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_exact_interval_is_clopper_pearson_from_beta_quantiles(lost, gained, alternative, level):
    m = lost + gained
    if m == 0:
        return
    # Clopper & Pearson (1934) through beta quantiles, one-sided for a one-sided alternative;
    # scipy's proportion_ci solves binomial tails instead (agreement to rel 1e-7)
    tail = 1 - level if alternative != "two-sided" else (1 - level) / 2
    low = beta.ppf(tail, gained, m - gained + 1) if gained > 0 and alternative != "less" else 0.0
    high = beta.ppf(1 - tail, gained + 1, m - gained) if gained < m and alternative != "greater" else 1.0
    got = mcnemar(lost, gained, alternative=alternative).confidence_interval(level)
    assert got == pytest.approx((low, high), rel=1e-7, abs=1e-12)


@given(counts, counts.filter(bool), st.sampled_from([("exact", "beta"), ("wilson", "wilson")]))
def test_two_sided_interval_matches_statsmodels_proportion_confint(lost, gained, methods):
    ours, theirs = methods
    # statsmodels.stats.proportion.proportion_confint(gained, m, alpha=0.05, method=...)
    expected = proportion_confint(gained, lost + gained, alpha=0.05, method=theirs)
    got = mcnemar(lost, gained, method="midp").confidence_interval(0.95, method=ours)
    assert got == pytest.approx(expected, rel=1e-7, abs=1e-12)


def test_interval_with_no_discordant_pair_is_everything():
    assert mcnemar(0, 0).confidence_interval() == (0.0, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(confidence_level=95), "confidence_level"),
        (dict(confidence_level=1.0), "confidence_level"),
        (dict(method="clopper-pearson"), "method"),
    ],
)
def test_invalid_interval_arguments_raise_value_error_naming_them(kwargs, named):
    with pytest.raises(ValueError, match=rf"^{named} "):
        mcnemar(3, 4).confidence_interval(**kwargs)
