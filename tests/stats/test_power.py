"""Power and sample size: against R, brute force, round trips and monotonicity."""

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from qualgate.stats import (
    mcnemar,
    mcnemar_detectable_loss,
    mcnemar_power,
    mcnemar_sample_size,
    noninferiority_power,
    noninferiority_sample_size,
)

from strategies import mcnemar_designs, noninferiority_designs

# --------------------------------------------------------------------------- normal method

# R 4.2 with MESS::power.mcnemar.test (normal method) sourced from the cran/MESS R source; a
# design (loss, psi) is paid = (psi - loss)/2, psi_ratio = (psi + loss)/(psi - loss):
#   power.mcnemar.test(paid = paid, psi = psi_ratio, power = 0.8)$n                 (two-sided .05)
#   power.mcnemar.test(paid = paid, psi = psi_ratio, power = 0.9, sig.level = 0.01,
#                      alternative = "one.sided")$n
# (uniroot tol 1e-10). MESS returns a real n; ours is its ceiling.
MESS_N = [
    # loss, discordant, n two-sided .05 .8, n one-sided .01 .9
    (0.02, 0.06, 1174.9713280971, 1947.9120602254),
    (0.01, 0.04, 3137.1929878746, 5202.1497716222),
    (0.03, 0.08, 695.3156593685, 1152.4290464241),
    (0.10, 0.30, 233.0945382046, 385.8591744461),
]


@pytest.mark.parametrize(("loss", "psi", "n_two", "n_one"), MESS_N)
def test_normal_sample_size_is_the_ceiling_of_mess(loss, psi, n_two, n_one):
    assert mcnemar_sample_size(loss, psi).n == math.ceil(n_two)
    one = mcnemar_sample_size(loss, psi, alpha=0.01, power=0.9, alternative="less")
    assert one.n == math.ceil(n_one)


def test_normal_power_matches_mess():
    # power.mcnemar.test(n = 428, paid = 0.02, psi = 2)$power            -> 0.392930245244051
    # power.mcnemar.test(n = 2000, paid = 0.02, psi = 2, alternative = "one.sided")$power
    #                                                                     -> 0.977961219884393
    assert mcnemar_power(428, 0.02, 0.06).power == pytest.approx(0.392930245244051, rel=1e-12)
    one = mcnemar_power(2000, 0.02, 0.06, alternative="less").power
    assert one == pytest.approx(0.977961219884393, rel=1e-12)


def test_normal_sample_size_is_the_issue_formula():
    # n = ceil((z_{1-a/2} sqrt(psi) + z_power sqrt(psi - loss^2))^2 / loss^2)
    for loss, psi in itertools.product([0.005, 0.01, 0.03], [0.04, 0.1, 0.5]):
        za, zb = stats.norm.isf(0.025), stats.norm.ppf(0.8)
        expected = math.ceil((za * math.sqrt(psi) + zb * math.sqrt(psi - loss**2)) ** 2 / loss**2)
        assert mcnemar_sample_size(loss, psi).n == expected


# --------------------------------------------------------------------------- exact method

# R 4.2, base only: exact power by enumerating the trinomial (lost B, gained C, concordant);
# a rejection counts when the exact p-value <= alpha and C < B (candidate worse):
#   exact_power <- function(n, loss, psi, alpha, alt) {
#     pl <- (psi + loss) / 2; pg <- (psi - loss) / 2; tot <- 0
#     for (B in 0:n) {
#       C <- 0:(n - B); m <- B + C; conc <- n - B - C
#       p <- if (alt == "less") pbinom(C, m, 0.5) else ifelse(C < B, pmin(1, 2 * pbinom(C, m, 0.5)), 1)
#       lp <- lfactorial(n) - lfactorial(B) - lfactorial(C) - lfactorial(conc) + B * log(pl) +
#             C * log(pg) + ifelse(conc > 0, conc * log(1 - psi), 0)
#       tot <- tot + sum(exp(lp[(m > 0) & (p <= alpha)]))
#     }
#     tot
#   }
# e.g. exact_power(50, 0.2, 0.4, 0.05, "two-sided"). Tolerance 1e-10.
R_EXACT_POWER = [
    # n, loss, psi, alpha, alternative, power
    (50, 0.2, 0.4, 0.05, "two-sided", 0.546688611197914),
    (120, 0.1, 0.2, 0.05, "less", 0.756005224848277),
    (200, 0.05, 0.3, 0.05, "two-sided", 0.214354305826536),
    (300, 0.03, 0.1, 0.10, "two-sided", 0.438234269064811),
    (100, 0.0, 0.3, 0.05, "less", 0.0354026500526203),  # size of the one-sided test
]


@pytest.mark.parametrize(("n", "loss", "psi", "alpha", "alt", "expected"), R_EXACT_POWER)
def test_exact_power_matches_r_enumeration(n, loss, psi, alpha, alt, expected):
    got = mcnemar_power(n, loss, psi, alpha=alpha, alternative=alt, method="exact").power
    assert got == pytest.approx(expected, abs=1e-10)


# Same R function for every n = 1..nmax:
#   pw <- sapply(1:nmax, function(n) exact_power(n, loss, psi, 0.05, alt))
#   c(which(pw >= 0.8)[1], pw[which(pw >= 0.8)[1]], max(which(pw < 0.8)) + 1)
# (nmax = 130, 150, 260; for psi = 1, M = n and
#   pw <- sapply(1:120, function(n) { C <- 0:n; p <- ifelse(C < n - C, pmin(1, 2 * pbinom(C, n, 0.5)), 1)
#                                     sum(dbinom(C, n, (1 - 0.4) / 2)[p <= 0.05]) }) ).
# Near psi = 1 the exact power has a sawtooth that crosses the target: n < stable.
R_EXACT_N = [
    # loss, psi, alternative, n, power, stable
    (0.2, 0.3, "two-sided", 61, 0.805159751750779, 61),
    (0.3, 0.99, "less", 71, 0.806847836841573, 74),
    (0.25, 0.98, "two-sided", 127, 0.800786966389969, 130),
    (0.4, 1.0, "two-sided", 49, 0.810002003930678, 54),  # psi = 1: M = n, sum of dbinom
]


@pytest.mark.parametrize(("loss", "psi", "alt", "n", "power", "stable"), R_EXACT_N)
def test_exact_sample_size_and_sawtooth_match_r(loss, psi, alt, n, power, stable):
    result = mcnemar_sample_size(loss, psi, alternative=alt, method="exact")
    assert (result.n, result.n_stable) == (n, stable)
    assert result.power == pytest.approx(power, abs=1e-10)
    assert result.n_checked >= 2 * result.n_stable


def test_exact_power_equals_brute_force_over_the_public_test():
    # Enumerate every (lost, gained) outcome of n = 40 questions, weight it by its trinomial
    # probability and count the rejections of qualgate.stats.mcnemar itself.
    n, loss, psi = 40, 0.25, 0.45
    p_lost, p_gained = (psi + loss) / 2, (psi - loss) / 2
    total = 0.0
    for lost in range(n + 1):
        for gained in range(n + 1 - lost):
            rest = n - lost - gained
            weight = (
                (math.factorial(n) // (math.factorial(lost) * math.factorial(gained) * math.factorial(rest)))
                * p_lost**lost
                * p_gained**gained
                * (1 - psi) ** rest
            )
            result = mcnemar(lost, gained)
            if result.pvalue <= 0.05 and lost > gained:
                total += weight
    assert mcnemar_power(n, loss, psi, method="exact").power == pytest.approx(total, abs=1e-12)


def test_exact_sample_size_reports_the_first_n_reaching_the_target():
    result = mcnemar_sample_size(0.1, 0.2, method="exact")
    assert mcnemar_power(result.n, 0.1, 0.2, method="exact").power >= 0.8
    assert mcnemar_power(result.n - 1, 0.1, 0.2, method="exact").power < 0.8
    ns = np.arange(1, result.n)
    assert all(mcnemar_power(int(k), 0.1, 0.2, method="exact").power < 0.8 for k in ns[-40:])


def test_exact_needs_more_questions_than_normal_for_llm_sized_designs():
    for loss, psi in [(0.01, 0.06), (0.02, 0.06), (0.03, 0.08)]:
        exact = mcnemar_sample_size(loss, psi, method="exact")
        normal = mcnemar_sample_size(loss, psi)
        assert normal.n < exact.n < 1.1 * normal.n


# --------------------------------------------------------------------------- round trips


@given(mcnemar_designs(min_loss=0.01), st.sampled_from(["two-sided", "less"]), st.sampled_from([0.8, 0.9]))
def test_normal_round_trip_n_power_n(design, alternative, target):
    loss, psi = design
    result = mcnemar_sample_size(loss, psi, power=target, alternative=alternative)
    assert mcnemar_power(result.n, loss, psi, alternative=alternative).power >= target
    if result.n > 1:
        assert mcnemar_power(result.n - 1, loss, psi, alternative=alternative).power < target
    detectable = mcnemar_detectable_loss(result.n, psi, power=target, alternative=alternative)
    assert detectable.loss <= loss + 1e-9
    assert detectable.power == pytest.approx(target, abs=1e-9)


@settings(max_examples=25)
@given(mcnemar_designs(min_loss=0.03), st.sampled_from(["two-sided", "less"]))
def test_exact_round_trip_n_power_loss(design, alternative):
    loss, psi = design
    result = mcnemar_sample_size(loss, psi, alternative=alternative, method="exact")
    again = mcnemar_power(result.n, loss, psi, alternative=alternative, method="exact")
    assert again.power == pytest.approx(result.power, abs=1e-12) and again.power >= 0.8
    assert result.n <= result.n_stable <= result.n_checked
    detectable = mcnemar_detectable_loss(result.n, psi, alternative=alternative, method="exact")
    assert detectable.loss <= loss + 1e-9 and detectable.power >= 0.8


@given(st.integers(2, 5000), st.integers(1, 400), mcnemar_designs(min_loss=0.001))
def test_normal_power_rises_with_n_and_loss(n, extra, design):
    loss, psi = design
    base = mcnemar_power(n, loss, psi).power
    assert mcnemar_power(n + extra, loss, psi).power >= base
    # In loss, the normal approximation rises wherever power >= 1/2 (the planning range; below
    # it, z*sqrt(psi) > loss*sqrt(n) and a larger loss shrinks the variance toward the wrong side).
    assume(base >= 0.5)
    assert mcnemar_power(n, min(psi, loss * 1.5), psi).power >= base


@settings(max_examples=50)
@given(st.integers(5, 3000), mcnemar_designs(min_loss=0.001))
def test_exact_power_rises_with_loss(n, design):
    loss, psi = design
    base = mcnemar_power(n, loss, psi, method="exact").power
    assert mcnemar_power(n, min(psi, loss * 1.5), psi, method="exact").power >= base - 1e-12


def test_exact_power_rises_with_n_once_discordance_smooths_the_sawtooth():
    ns = np.arange(200, 1200, 7)
    powers = [mcnemar_power(int(k), 0.03, 0.1, method="exact").power for k in ns]
    assert np.all(np.diff(powers) > 0)


def test_undetectable_loss_is_nan_with_the_best_power():
    result = mcnemar_detectable_loss(10, 0.06)
    assert math.isnan(result.loss) and result.to_dict()["loss"] is None
    assert result.power == pytest.approx(mcnemar_power(10, 0.06, 0.06).power)
    assert math.isnan(mcnemar_detectable_loss(10, 0.06, method="exact").loss)


# --------------------------------------------------------------------------- non-inferiority

# R 4.2: exact probability that the RMLE score test rejects H0: loss >= margin at one-sided
# 0.05, enumerating the trinomial as Liu et al. (2002) do, at our normal-approximation n, with
# contingencytables' test_statistic.4 (sourced from ocbe-uio/contingencytables):
#   ni_exact_power <- function(n, margin, psi, eloss, alpha) {
#     pl <- (psi + eloss) / 2; pg <- (psi - eloss) / 2; z <- qnorm(1 - alpha); tot <- 0
#     for (B in 0:n) {
#       C <- 0:(n - B); conc <- n - B - C
#       Zs <- sapply(C, function(cc) test_statistic.4(margin, list(n12 = B, n21 = cc, N = n)))
#       lp <- lfactorial(n) - lfactorial(B) - lfactorial(C) - lfactorial(conc) +
#             B * log(pl) + C * log(pg) + conc * log(1 - psi)
#       tot <- tot + sum(exp(lp[Zs < -z]))
#     }
#     tot
#   }
# The sample-size formula targets 0.8; we require the exact power within 0.02 of it.
R_NI_EXACT = [
    # margin, psi, expected_loss, our n, exact power in R
    (0.1, 0.3, 0.0, 191, 0.8087596059),
    (0.1, 0.2, 0.02, 205, 0.8100181692),
    (0.1, 0.4, -0.05, 112, 0.8040055284),
    (0.1, 0.1, 0.0, 81, 0.8164233715),
]


@pytest.mark.parametrize(("margin", "psi", "expected_loss", "n", "exact"), R_NI_EXACT)
def test_noninferiority_sample_size_reaches_target_in_exact_enumeration(margin, psi, expected_loss, n, exact):
    result = noninferiority_sample_size(margin, psi, expected_loss=expected_loss)
    assert result.n == n
    assert exact == pytest.approx(0.8, abs=0.02)
    assert result.power == pytest.approx(exact, abs=0.02)


@given(noninferiority_designs(), st.sampled_from([0.025, 0.05]), st.sampled_from([0.8, 0.9]))
def test_noninferiority_round_trip(design, alpha, target):
    margin, psi, expected_loss = design
    result = noninferiority_sample_size(margin, psi, expected_loss=expected_loss, alpha=alpha, power=target)
    power = noninferiority_power(result.n, margin, psi, expected_loss=expected_loss, alpha=alpha)
    assert power.power >= target
    if result.n > 1:
        before = noninferiority_power(result.n - 1, margin, psi, expected_loss=expected_loss, alpha=alpha)
        assert before.power < target


def test_noninferiority_needs_more_questions_for_a_tighter_margin():
    sizes = [noninferiority_sample_size(m, 0.06).n for m in (0.03, 0.02, 0.01)]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3


# --------------------------------------------------------------------------- results, errors


def test_results_are_integers_with_power_attached_and_serialise():
    for result in (
        mcnemar_sample_size(0.02, 0.06, method="exact"),
        mcnemar_detectable_loss(500, 0.06),
        noninferiority_sample_size(0.02, 0.06),
    ):
        assert type(result.n) is int and 0 < result.power < 1
        data = json.loads(json.dumps(result.to_dict()))
        assert data["n"] == result.n and data["solved_for"] == result.solved_for


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: mcnemar_sample_size(0.0, 0.06), "loss"),
        (lambda: mcnemar_sample_size(-0.01, 0.06), "loss"),
        (lambda: mcnemar_sample_size(0.3, 0.06), "loss must not exceed discordant"),  # psi < loss^2
        (lambda: mcnemar_sample_size(0.05, 0.04), "loss must not exceed discordant"),
        (lambda: mcnemar_sample_size(0.02, 1.2), "discordant"),
        (lambda: mcnemar_sample_size(0.02, 0.0), "discordant"),
        (lambda: mcnemar_sample_size(0.02, 0.06, alpha=0), "alpha"),
        (lambda: mcnemar_sample_size(0.02, 0.06, power=0.3), "power"),
        (lambda: mcnemar_sample_size(0.02, 0.06, power=1.0), "power"),
        (lambda: mcnemar_sample_size(0.02, 0.06, alternative="greater"), "alternative"),
        (lambda: mcnemar_sample_size(0.02, 0.06, method="simulate"), "method"),
        (lambda: mcnemar_sample_size(1e-5, 0.06, method="exact"), "method='exact'"),
        (lambda: mcnemar_power(0, 0.02, 0.06), "n"),
        (lambda: mcnemar_power(10.5, 0.02, 0.06), "n"),
        (lambda: mcnemar_detectable_loss(100, 1.5), "discordant"),
        (lambda: noninferiority_sample_size(0.0, 0.06), "margin"),
        (lambda: noninferiority_sample_size(0.02, 0.06, expected_loss=0.02), "expected_loss"),
        (lambda: noninferiority_sample_size(0.02, 0.06, expected_loss=-0.1), "expected_loss"),
        (lambda: noninferiority_power(100, 0.02, 0.06, alpha=1.5), "alpha"),
    ],
)
def test_invalid_designs_raise_value_error_naming_the_argument(call, named):
    with pytest.raises(ValueError, match=rf"^{named}"):
        call()
