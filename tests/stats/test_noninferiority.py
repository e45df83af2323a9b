"""Non-inferiority score test against R (contingencytables), closed forms and properties."""

import json
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import optimize, stats
from scipy.special import xlogy

from qualgate.stats import noninferiority, paired_difference_ci
from qualgate.stats._score import restricted_p21

from strategies import paired_tables

# R 4.2 with contingencytables' Tango functions sourced from ocbe-uio/contingencytables:
#   m   <- matrix(c(a, lost, gained, d), 2, byrow = TRUE)   # (n12 - n21)/N = loss
#   par <- list(n12 = lost, n21 = gained, N = a + lost + gained + d)
#   Z   <- test_statistic.4(margin, par); p <- pnorm(Z)
#   upper <- unlist(Tango_asymptotic_score_CI_paired_2x2(m, alpha = 0.10))[2]
# (the one-sided 95% upper bound of the loss is the upper limit of the two-sided 90% Tango
# interval). Tolerance: Z and p 1e-9; upper bound 1e-6 (R's uniroot tol = 1e-7).
R_NI = [
    # table, margin, Z, p, upper
    ((900, 12, 10, 78), 0.02, -3.164217099940, 0.000777503771533, 0.0102523841),
    ((59, 16, 6, 80), 0.05, 0.426057791474, 0.664967132297, 0.1131260531),
    ((450, 12, 9, 29), 0.03, -2.314536398732, 0.0103191585243, 0.0222094645),
    ((1100, 40, 25, 155), 0.01, 0.224095349497, 0.588658444483, 0.0217693576),
    ((95, 0, 0, 5), 0.05, -2.294157338706, 0.0108907313956, 0.0263427231),
    ((20, 5, 1, 4), 0.1, 0.437169978292, 0.669005959789, 0.2801408562),
]


@pytest.mark.parametrize(("table", "margin", "z", "p", "upper"), R_NI, ids=lambda x: str(x))
def test_statistic_pvalue_and_bound_match_r(table, margin, z, p, upper):
    result = noninferiority(*table, margin=margin, method="score")
    assert result.statistic == pytest.approx(z, abs=1e-9)
    assert result.pvalue == pytest.approx(p, rel=1e-9)
    assert result.upper_bound == pytest.approx(upper, abs=1e-6)
    assert result.noninferior is (p < 0.05)


def test_bound_without_discordant_pairs_has_a_closed_form():
    # With lost = gained = 0 the restricted estimate of P(gained) is 0 and Z(d) =
    # -sqrt(n d / (1 - d)); solving Z = -z gives d = z^2 / (n + z^2).
    z = stats.norm.isf(0.05)
    for n in (10, 100, 1319):
        bound = noninferiority(n - 3, 0, 0, 3, margin=0.5, method="score").upper_bound
        assert bound == pytest.approx(z**2 / (n + z**2), rel=1e-10)


@given(paired_tables(min_n=1), st.floats(0.001, 0.5), st.sampled_from([0.01, 0.05, 0.1, 0.2]))
def test_rejects_exactly_when_the_upper_bound_is_below_the_margin(table, margin, alpha):
    result = table.noninferiority(margin=margin, alpha=alpha, method="score")
    assume(abs(result.upper_bound - margin) > 1e-9)  # ties are a matter of root precision
    assert result.noninferior is (result.upper_bound < margin)
    assert result.noninferior is (result.pvalue < alpha)


@given(paired_tables(min_n=1), st.sampled_from([0.025, 0.05, 0.1]))
def test_upper_bound_is_the_tango_interval_limit_at_twice_alpha(table, alpha):
    result = table.noninferiority(margin=0.1, alpha=alpha, method="score")
    # loss = -(difference): the upper bound of the loss is minus the lower Tango limit
    low, _ = table.confidence_interval(confidence_level=1 - 2 * alpha)
    assert result.upper_bound == pytest.approx(-low, abs=1e-9)
    assert result.upper_bound >= result.loss - 1e-12


@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 300), st.floats(-0.95, 0.95))
def test_restricted_estimate_maximises_the_constrained_likelihood(first, second, rest, delta):
    # Reference: numerical maximisation of the trinomial log-likelihood over q = P(second)
    # with P(first) = q + delta, on the feasible interval (scipy bounded Brent, xatol 1e-12).
    n = first + second + rest
    lo, hi = max(0.0, -delta), (1 - delta) / 2
    assume(hi - lo > 1e-6)

    def negloglik(q):
        return -(xlogy(first, q + delta) + xlogy(second, q) + xlogy(rest, 1 - 2 * q - delta))

    found = optimize.minimize_scalar(
        negloglik, bounds=(lo + 1e-13, hi - 1e-13), method="bounded", options={"xatol": 1e-12}
    )
    closed = restricted_p21(first / n, second / n, delta)
    assert negloglik(closed) <= found.fun + 1e-6 * max(1.0, abs(found.fun))


def test_passes_when_the_candidate_clearly_matches():
    # 5000 questions, 2% discordant split evenly: the loss is at most ~0.5 points.
    assert noninferiority(4000, 50, 50, 900, margin=0.01, method="score").noninferior


def test_fails_when_the_loss_exceeds_the_margin():
    assert not noninferiority(4000, 120, 50, 830, margin=0.01, method="score").noninferior


def test_empty_table_is_not_noninferior():
    result = noninferiority(0, 0, 0, 0, margin=0.02, method="score")
    assert (result.pvalue, result.upper_bound, result.noninferior) == (1.0, 1.0, False)
    assert math.isnan(result.loss) and result.to_dict()["loss"] is None


def test_result_is_serialisable():
    result = noninferiority(900, 12, 10, 78, margin=0.02, method="score")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["noninferior"] is True and data["margin"] == 0.02 and data["n"] == 1000
    assert data["method"] == "score" and data["loss"] == pytest.approx(0.002)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(margin=0.0), "margin"),
        (dict(margin=1.0), "margin"),
        (dict(margin=0.02, alpha=0.5), "alpha"),
        (dict(margin=0.02, method="midp"), "method"),
    ],
)
def test_invalid_arguments_raise_value_error_naming_them(kwargs, named):
    with pytest.raises(ValueError, match=rf"^{named} "):
        noninferiority(900, 12, 10, 78, **kwargs)


def test_margin_is_required():
    with pytest.raises(TypeError):
        noninferiority(900, 12, 10, 78)


def test_tango_interval_and_test_agree_on_a_printed_example():
    # Cavo et al. (2012): printed 95% Tango interval -0.1240 to -0.0054 for the difference;
    # the one-sided 97.5% upper bound of the loss is therefore 0.1240 (tolerance 5e-5).
    assert noninferiority(59, 16, 6, 80, margin=0.2, alpha=0.025, method="score").upper_bound == pytest.approx(
        0.1240, abs=5e-5
    )
    assert paired_difference_ci(59, 16, 6, 80)[0] == pytest.approx(-0.1240, abs=5e-5)
