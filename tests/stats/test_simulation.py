"""Seeded Monte Carlo checks of the tests' size and of the sample-size formulas.

Paired outcomes are drawn as trinomials (lost, gained, concordant); the public test functions
are called once per distinct outcome. 10,000-20,000 replicates keep the standard error of a
rejection rate below 0.005.
"""

import math

import numpy as np
import pytest

from qualgate.stats import (
    mcnemar,
    mcnemar_power,
    mcnemar_sample_size,
    noninferiority,
    noninferiority_sample_size,
)

SEED = 20240607


def _draw(n, loss, psi, reps, seed):
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, [(psi + loss) / 2, (psi - loss) / 2, 1 - psi], size=reps)
    return draws[:, 0], draws[:, 1]


def _rejected(lost, gained, decide):
    pairs, inverse = np.unique(np.stack([lost, gained], axis=1), axis=0, return_inverse=True)
    verdicts = np.array([decide(int(l), int(g)) for l, g in pairs])
    return verdicts[inverse.ravel()]


@pytest.mark.parametrize(
    ("n", "psi", "alternative"),
    [(60, 0.3, "two-sided"), (200, 0.1, "two-sided"), (500, 0.06, "less"), (1000, 0.05, "two-sided")],
)
def test_exact_mcnemar_holds_its_level(n, psi, alternative):
    reps, alpha = 20_000, 0.05
    lost, gained = _draw(n, 0.0, psi, reps, SEED + n)
    rate = _rejected(lost, gained, lambda l, g: mcnemar(l, g, alternative=alternative).pvalue <= alpha).mean()
    se = math.sqrt(alpha * (1 - alpha) / reps)
    assert rate <= alpha + 3 * se
    # and agrees with the exact size (one tail from mcnemar_power, both tails when two-sided)
    tail = mcnemar_power(n, 0.0, psi, alternative=alternative, method="exact").power
    size = 2 * tail if alternative == "two-sided" else tail
    assert rate == pytest.approx(size, abs=4 * math.sqrt(size * (1 - size) / reps))


@pytest.mark.parametrize(
    ("loss", "psi", "alternative"),
    [(0.02, 0.06, "two-sided"), (0.05, 0.2, "two-sided"), (0.03, 0.1, "two-sided"), (0.02, 0.06, "less")],
)
def test_normal_sample_size_gives_the_target_power(loss, psi, alternative):
    # The normal formula is built for the asymptotic McNemar test; at its n that test detects
    # the loss (rejects with the candidate worse) with probability within 2 points of 0.8.
    n = mcnemar_sample_size(loss, psi, alternative=alternative).n
    lost, gained = _draw(n, loss, psi, 10_000, SEED + n)

    def detects(lost_i, gained_i):
        result = mcnemar(lost_i, gained_i, method="asymptotic", alternative=alternative)
        return result.pvalue <= 0.05 and lost_i > gained_i

    assert _rejected(lost, gained, detects).mean() == pytest.approx(0.8, abs=0.02)


def test_exact_power_matches_simulated_exact_test():
    design = mcnemar_sample_size(0.02, 0.06, method="exact")
    lost, gained = _draw(design.n, 0.02, 0.06, 10_000, SEED)
    rate = _rejected(lost, gained, lambda l, g: mcnemar(l, g).pvalue <= 0.05 and l > g).mean()
    assert rate == pytest.approx(design.power, abs=4 * math.sqrt(0.16 / 10_000))


def test_noninferiority_sample_size_gives_the_target_power():
    n = noninferiority_sample_size(0.02, 0.06).n
    lost, gained = _draw(n, 0.0, 0.06, 5_000, SEED)
    table = lambda l, g: noninferiority(n - l - g, l, g, 0, margin=0.02, method="score").noninferior  # noqa: E731
    assert _rejected(lost, gained, table).mean() == pytest.approx(0.8, abs=0.025)


def test_noninferiority_score_test_holds_its_level_at_the_margin():
    n, reps = 1000, 5_000
    lost, gained = _draw(n, 0.02, 0.06, reps, SEED + 1)  # true loss = margin: H0 boundary
    rate = _rejected(
        lost, gained, lambda l, g: noninferiority(n - l - g, l, g, 0, margin=0.02, method="score").noninferior
    ).mean()
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
