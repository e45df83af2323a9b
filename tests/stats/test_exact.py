"""The exact unconditional non-inferiority test (one seed): p-value, rejection region, size."""

import itertools

import numpy as np
import pytest
from scipy import stats

from qualgate.stats import noninferiority
from qualgate.stats._noninferiority import _thresholds, exact_critical_value, exact_pvalue
from qualgate.stats._score import score_z


def test_without_discordance_the_p_value_is_the_chance_of_no_discordant_pair():
    # at the least discordance compatible with loss = delta (every discordant pair lost,
    # P = delta) no discordant pair has probability (1 - delta)^n, so p >= (1 - delta)^n; with
    # small delta that is the supremum (with delta = 0.1 and n = 50 a larger discordance
    # makes the outcomes with some gained pairs likelier than that)
    for n, delta in ((300, 0.01), (161, 0.02)):
        assert exact_pvalue(0, 0, n, delta) == pytest.approx((1 - delta) ** n, rel=1e-9)
    assert exact_pvalue(0, 0, 50, 0.1) > 0.9**50
    r = noninferiority(428, 0, 0, 0, margin=0.02, method="exact")
    assert r.upper_bound == pytest.approx(1 - 0.05 ** (1 / 428), abs=2e-6)  # solves (1 - d)^n = alpha


def test_thresholds_match_brute_force():
    n, delta = 40, 0.05
    for z in (-2.5, -1.7, -1.2, -0.3):
        b_star = _thresholds(n, delta, z)
        for s in range(n + 1):
            zs = [score_z(float(b), float(s - b), float(n), delta) for b in range(s + 1)]
            assert b_star[s] == max([b for b in range(s + 1) if zs[b] <= z + 1e-9], default=-1)


def enumerate_size(n, psi, delta, reject):
    """P(reject) over every (lost, gained) of the trinomial at loss = delta (vectorised)."""
    pl, pg = (psi + delta) / 2, (psi - delta) / 2
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = b + c <= n
    pmf = stats.multinomial.pmf(np.stack([b[ok], c[ok], n - b[ok] - c[ok]], axis=-1), n, [pl, pg, 1 - pl - pg])
    return float(pmf[reject(b[ok].astype(float), c[ok].astype(float))].sum())


@pytest.mark.parametrize("n", [30, 133])
def test_exact_size_is_at_most_alpha_where_the_score_test_exceeds_it(n):
    # issue 14: the score test's size is 0.068 at n = 133 and 2 % discordance (margin 2 points)
    z_crit = exact_critical_value(n, 0.02, 0.05)
    for psi in (0.02, 0.05, 0.2):
        size = enumerate_size(n, psi, 0.02, lambda b, c: score_z(b, c, n, 0.02) <= z_crit + 1e-9)
        assert size <= 0.05
    if n == 133:
        score = enumerate_size(n, 0.02, 0.02, lambda b, c: score_z(b, c, n, 0.02) < -1.6448536269514722)
        assert score == pytest.approx(0.0681, abs=5e-4)


def test_p_value_below_alpha_exactly_in_the_critical_region():
    # the p-value is non-decreasing in the score statistic, so p < alpha <=> Z <= z_crit
    n, delta = 30, 0.05
    z_crit = exact_critical_value(n, delta, 0.05)
    for b, c in itertools.product(range(8), range(8)):
        z = score_z(b, c, n, delta)
        if abs(z - z_crit) < 1.0:
            assert (exact_pvalue(b, c, n, delta) < 0.05) == (z <= z_crit + 1e-9)


@pytest.mark.slow
def test_exact_p_value_is_at_least_the_score_p_value_at_its_worst_discordance():
    # the supremum includes the nuisance the asymptotic test effectively plugs in: spot check
    # that the exact test is the more conservative on ordinary tables
    for table in ((900, 12, 10, 78), (600, 3, 1, 30), (250, 4, 0, 10)):
        exact = noninferiority(*table, margin=0.02, method="exact")
        score = noninferiority(*table, margin=0.02, method="score")
        assert exact.pvalue >= score.pvalue * 0.98
        assert exact.noninferior is (exact.upper_bound < 0.02)
        assert exact.method == "exact"


@pytest.mark.slow
def test_verdict_and_bound_agree_on_both_sides_of_the_margin():
    passing = noninferiority(900, 12, 10, 78, margin=0.02, method="exact")
    failing = noninferiority(900, 30, 10, 60, margin=0.02, method="exact")
    assert passing.noninferior and passing.upper_bound < 0.02
    assert not failing.noninferior and failing.upper_bound >= 0.02
    assert np.isfinite(failing.pvalue) and failing.pvalue >= 0.05


@pytest.mark.slow
def test_the_p_value_is_the_supremum_where_a_coarse_grid_missed_its_peak():
    # n = 1,018, margin 1 point, 39 lost and 44 gained: P_ψ(Z <= z_obs) peaks at ψ ≈ 0.974 in
    # a bump about 0.005 wide. The former 97-point grid found another local maximum and
    # returned p = 0.0499883 (< alpha: a PASS the test's level does not allow). Reference:
    # the maximum of the same tail over 80,000 discordances spaced evenly in ψ and in
    # arcsin(sqrt(ψ)) (this file's fine_supremum), 0.05017794137; tolerance 1e-9 absolute.
    assert exact_pvalue(39, 44, 1018, 0.01) == pytest.approx(0.05017794137, abs=1e-9)
    assert not noninferiority(900, 39, 44, 1018 - 983, margin=0.01, method="exact").noninferior


def fine_supremum(n, delta, z):
    """max over 20,000 discordances (evenly in ψ and in arcsin sqrt ψ) of P_ψ(Z <= z)."""
    from qualgate.stats._noninferiority import _tail

    b_star = _thresholds(n, delta, z)
    low = max(delta, 1e-9)
    grid = np.unique(
        np.concatenate(
            [
                np.linspace(low, 1, 10_001),
                np.sin(np.linspace(np.arcsin(np.sqrt(low)), np.pi / 2, 10_001)) ** 2,
            ]
        )
    )
    return float(max(_tail(n, delta, b_star, grid[i : i + 2000]).max() for i in range(0, len(grid), 2000)))


@pytest.mark.slow
@pytest.mark.parametrize("n, delta", [(40, 0.05), (133, 0.02), (300, 0.01)])
def test_the_p_value_is_never_below_the_supremum_on_a_fine_grid(n, delta):
    # every attainable outcome within 0.2 of the critical value: the library's supremum is at
    # least the fine grid's (it refines between grid points, so it may be above it)
    z_crit = exact_critical_value(n, delta, 0.05)
    seen = set()
    for b, c in itertools.product(range(n + 1), repeat=2):
        if b + c > n:
            continue
        z = float(score_z(float(b), float(c), float(n), delta))
        if abs(z - z_crit) < 0.2 and round(z, 9) not in seen and len(seen) < 12:
            seen.add(round(z, 9))
            assert exact_pvalue(b, c, n, delta) >= fine_supremum(n, delta, z) - 1e-9


def trinomial_tail(n, delta, psi, z):
    """P_psi(Z <= z) by enumerating every (lost, gained) with scipy's multinomial pmf
    (independent of the library's binomial decomposition)."""
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = b + c <= n
    b, c = b[ok], c[ok]
    pl, pg = (psi + delta) / 2, (psi - delta) / 2
    pmf = stats.multinomial.pmf(np.stack([b, c, n - b - c], axis=-1), n, [pl, pg, 1 - pl - pg])
    return float(pmf[score_z(b.astype(float), c.astype(float), float(n), delta) <= z + 1e-9].sum())


@pytest.mark.slow
def test_the_supremum_covers_a_peak_just_above_the_margin():
    # issue 36 item 5: n 529, margin 1 point, 5 lost, 1 gained. The tail at psi = 0.0102543,
    # just above the margin, is 0.390413 (the value; here by full trinomial
    # enumeration, to 1e-6); the old grid stopped at 0.390094, its value at psi = margin.
    z = score_z(5.0, 1.0, 529.0, 0.01)
    peak = trinomial_tail(529, 0.01, 0.0102543, z)
    assert peak == pytest.approx(0.390413, abs=1e-6)
    assert trinomial_tail(529, 0.01, 0.01, z) == pytest.approx(0.390094, abs=1e-6)
    assert exact_pvalue(5, 1, 529, 0.01) >= peak
    # with a level, "below alpha" is proven: never claimed between the grid's value and the peak
    assert exact_pvalue(5, 1, 529, 0.01, alpha=0.3903) >= 0.3903


@pytest.mark.slow
def test_a_proven_p_value_below_alpha_is_below_the_tail_at_every_discordance():
    # the certified search (known_at) against a fine grid of 20,001 discordances spaced evenly
    # in psi, including the margin's neighbourhood; the statistic is set one attainable value
    # above and below the critical value, where the supremum is closest to alpha
    from qualgate.stats._noninferiority import _attainable, _sup_tail, _tail

    for n, delta in ((60, 0.05), (211, 0.01)):
        crit = exact_critical_value(n, delta, 0.05)
        values = _attainable(n, delta, crit - 0.05, min(crit + 0.05, 0.0))
        for z in values[np.argsort(np.abs(values - crit))[:3]]:
            b_star = _thresholds(n, delta, z)
            grid = np.linspace(delta, 1, 20001)
            fine = max(float(_tail(n, delta, b_star, grid[i : i + 1000]).max()) for i in range(0, len(grid), 1000))
            if _sup_tail(n, delta, b_star, known_at=0.05) < 0.05:
                assert fine < 0.05
            else:
                assert z >= crit - 1e-12  # the rejection region ends at the critical value


def test_above_the_switch_the_one_seed_test_is_the_corrected_score_test_and_costs_microseconds():
    # issue 34 item 7: 26.7 CPU-s at 10^4 pairs before. The p-value is Phi of the score
    # statistic with 1.5 counts moved towards H0, the restricted ML estimate solved here
    # independently (Nam 1997's quadratic, numpy.roots); tolerance 1e-9.
    import time

    from scipy import special

    for n, lost, gained, margin in ((10_000, 320, 250, 0.02), (1_000_000, 30_100, 29_500, 0.01)):
        start = time.process_time()
        r = noninferiority(n - lost - gained, lost, gained, 0, margin=margin)
        assert time.process_time() - start < 0.5
        assert r.method == "score-cc"
        p12, p21 = lost / n, gained / n
        roots = np.roots([2, -p12 - p21 + (2 - p12 + p21) * margin, -p21 * margin * (1 - margin)])
        q = max(x.real for x in roots if abs(x.imag) < 1e-12)
        z = (lost - gained - n * margin + 1.5) / np.sqrt(n * (2 * q + margin * (1 - margin)))
        assert r.pvalue == pytest.approx(float(special.ndtr(z)), rel=1e-9, abs=1e-300)
        assert r.noninferior is (r.upper_bound < margin) is (r.pvalue < 0.05)
        # the bound is where the corrected statistic crosses the critical value
        edge = noninferiority(n - lost - gained, lost, gained, 0, margin=r.upper_bound + 1e-8)
        assert (
            edge.noninferior
            and not noninferiority(n - lost - gained, lost, gained, 0, margin=r.upper_bound).noninferior
        )


@pytest.mark.slow
def test_above_the_switch_the_corrected_score_tests_size_is_at_most_alpha():
    # one cell of benchmarks/exact_switch.py, by full trinomial enumeration (scipy's
    # multinomial pmf, no library sum) at the discordances where the enumerated size peaks
    # (psi near 1) and at the margin; the uncorrected score test exceeds alpha there.
    from scipy import special

    from qualgate.stats._noninferiority import corrected_z

    n, delta = 2001, 0.01
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = b + c <= n
    b, c = b[ok].astype(float), c[ok].astype(float)
    zc = np.array([corrected_z(x, y, n, delta) for x, y in zip(b[::997], c[::997])])
    from qualgate.stats._score import restricted_p21

    q = restricted_p21(b / n, c / n, delta)
    z_all = (b - c - n * delta + 1.5) / np.sqrt(n * (2 * q + delta * (1 - delta)))
    assert np.allclose(z_all[::997], zc, rtol=1e-12)
    plain = score_z(b, c, float(n), delta)
    crit = float(special.ndtri(0.05))
    worst_plain = 0.0
    for psi in (0.01, 0.5, 0.98, 0.995, 1.0):
        pl, pg = (psi + delta) / 2, (psi - delta) / 2
        pmf = stats.multinomial.pmf(np.stack([b, c, n - b - c], axis=-1), n, [pl, pg, max(1 - pl - pg, 0.0)])
        assert float(pmf[z_all < crit].sum()) <= 0.05
        worst_plain = max(worst_plain, float(pmf[plain < crit].sum()))
    assert worst_plain > 0.05
