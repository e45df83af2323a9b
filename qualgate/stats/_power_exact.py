"""Exact power of the exact McNemar test, for many sample sizes at once (:mod:`._power`'s ``exact``).

The number of discordant questions is M ~ Bin(n, ψ); given M = m the number gained is
Bin(m, (ψ − δ)/(2ψ)) and the exact conditional test (:func:`qualgate.stats.mcnemar` with
``method='exact'``) rejects when its p-value is ``<= alpha``. Power is the sum over m,
computed as a matrix product over a block of n and the window of m that carries the mass.

The sawtooth
------------
Because the test is discrete, exact power is not monotone in n: adding a question can lower
it. Given m discordant questions the conditional power jumps by a few points from one m to the
next; the unconditional power mixes over M ~ Bin(n, ψ), which smooths the jumps unless M is
nearly fixed. In practice the dips cross a target only when almost every question is
discordant (ψ ≳ 0.95: for δ = 0.4, ψ = 1, power first reaches 0.8 at n = 49 but dips below it
until n = 54); for evaluation-sized designs (ψ of a few percent) ``n_stable == n``.
:func:`qualgate.stats.mcnemar_sample_size` with ``method='exact'`` therefore reports ``n``, the smallest n
whose power reaches the target, and ``n_stable``, the smallest n from which power stays at or
above the target for *every* n up to ``n_checked`` = 4·(normal-approximation n) + 200. Both are found without evaluating every n:
the running maximum (from the left) and minimum (from the right) of the conditional power
g(m) are non-decreasing in m, so the powers they give are non-decreasing in n and bracket the
exact power; bisection on them bounds the region where the target is crossed, and only that
region is evaluated n by n (vectorised).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["ExactDesign", "binom_cdf", "exact_sample_size", "m_window"]


def _critical_gained(m, tail):
    """Largest g with P(Bin(m, 1/2) <= g) <= tail (-1 if none), as :func:`qualgate.stats.mcnemar` decides.

    Starts from the normal quantile with continuity correction and steps each m until
    ``special.bdtr`` (the binomial cdf that :func:`qualgate.stats.mcnemar` uses, so that the decisions agree
    exactly) is <= tail at g and > tail at g + 1; a step or two at most.
    """
    m = np.asarray(m, dtype=np.int64)
    g = np.floor(m / 2 + special.ndtri(tail) * np.sqrt(m) / 2 - 0.5).clip(-1, m)

    def cdf(k, rows):
        return np.where(k >= 0, special.bdtr(np.maximum(k, 0), m[rows], 0.5), 0.0)

    rows = np.flatnonzero(cdf(g, slice(None)) > tail)
    while rows.size:  # too high: step down
        g[rows] -= 1
        rows = rows[cdf(g[rows], rows) > tail]
    rows = np.flatnonzero((g < m) & (cdf(g + 1, slice(None)) <= tail))
    while rows.size:  # too low: step up
        g[rows] += 1
        rows = rows[(g[rows] < m[rows]) & (cdf(g[rows] + 1, rows) <= tail)]
    return g


def binom_cdf(k, m, p):
    """P(Bin(m, p) <= k), 0 for k < 0 (vectorised)."""
    return np.where(k >= 0, special.bdtr(np.maximum(k, 0), m, p), 0.0)


def m_window(n_lo, n_hi, discordant):
    """Discordant counts holding all but ~1e-18 of Bin(n, ψ) for every n in [n_lo, n_hi]."""
    sd = math.sqrt(n_hi * discordant * (1 - discordant))
    lo = max(0, math.floor(n_lo * discordant - 9 * sd - 10))
    hi = min(n_hi, math.ceil(n_hi * discordant + 9 * sd + 10))
    return lo, hi


class ExactDesign:
    """Exact power of the conditional test for many n at once.

    ``g[m]`` is the conditional power given m discordant questions (the probability that the
    exact test rejects with the candidate worse); power(n) = Σ_m P(Bin(n, ψ) = m)·g[m],
    computed as a matrix product over a block of n and the window of m that carries the mass.
    """

    def __init__(self, loss, discordant, tail, n_max):
        """Prepare for every n <= ``n_max``."""
        self.loss, self.discordant, self.tail = loss, discordant, tail
        ms = np.arange(m_window(n_max, n_max, discordant)[1] + 1)
        self.p_gain = (discordant - loss) / (2 * discordant)
        self.critical = _critical_gained(ms, tail)
        self.g = binom_cdf(self.critical, ms, self.p_gain)
        self._log_factorial = special.gammaln(np.arange(n_max + 1) + 1.0)  # log k!, k <= n_max

    def weights(self, ns, ms):
        """P(Bin(n, ψ) = m) for n in ``ns`` (rows) and m in ``ms`` (columns)."""
        psi = self.discordant
        ns, ms = ns[:, None], ms[None, :]
        nm = np.maximum(ns - ms, 0)
        log_pmf = (
            self._log_factorial[ns]
            - self._log_factorial[ms]
            - self._log_factorial[nm]
            + ms * math.log(psi)
            + special.xlog1py(nm, -psi)
        )
        return np.where(ms <= ns, np.exp(log_pmf), 0.0)

    def power(self, ns, g=None):
        """Σ_m P(Bin(n, ψ) = m)·g[m] for each n in ``ns`` (default g: the exact test's)."""
        g = self.g if g is None else g
        ns = np.atleast_1d(np.asarray(ns, dtype=np.int64))
        if self.discordant == 1.0:  # every question is discordant: M = n
            return g[ns]
        out = np.empty(ns.size)
        # blocks of n small enough that the (n, m) weight matrix stays a few MB
        step = max(
            16, int(min(2e6 / (20 * math.sqrt(ns.max() * self.discordant) + 20), math.sqrt(2e6 / self.discordant)))
        )
        for i in range(0, ns.size, step):
            block = ns[i : i + step]
            lo, hi = m_window(int(block.min()), int(block.max()), self.discordant)
            ms = np.arange(lo, hi + 1)
            out[i : i + step] = self.weights(block, ms) @ g[lo : hi + 1]
        return out


def _first_reaching(power_of, target, lo, hi):
    """Smallest n in [lo, hi] with power_of(n) >= target (None if none); power_of non-decreasing."""
    if power_of(hi) < target:
        return None
    while lo < hi:  # bisection: O(log n) evaluations, each vectorised over m
        mid = (lo + hi) // 2
        if power_of(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def exact_sample_size(loss, discordant, tail, target, n_checked):
    """(n, its power, n_stable) of the exact test, proved over n <= ``n_checked`` (module doc)."""
    design = ExactDesign(loss, discordant, tail, n_checked)
    # Envelopes of the conditional power g(m): the running maximum from the left and minimum
    # from the right are non-decreasing in m, so their powers are non-decreasing in n and
    # bracket the exact power: upper(n) >= power(n) >= lower(n).
    upper = np.maximum.accumulate(design.g)
    lower = np.minimum.accumulate(design.g[::-1])[::-1]
    n_up = _first_reaching(lambda k: design.power([k], upper)[0], target, 1, n_checked)
    n_low = _first_reaching(lambda k: design.power([k], lower)[0], target, n_up or 1, n_checked)
    if n_up is None or n_low is None:  # pragma: no cover - 4x the normal n always suffices
        raise RuntimeError("exact power did not reach the target within the search range")
    # Below n_up power < target; from n_low on power >= target: scan only [n_up, n_low].
    ns = np.arange(n_up, n_low + 1)
    powers = design.power(ns)
    reached = np.flatnonzero(powers >= target)
    n_first = int(ns[reached[0]])
    below = np.flatnonzero((powers < target) & (ns > n_first))
    n_stable = int(ns[below[-1]]) + 1 if below.size else n_first
    return n_first, float(powers[reached[0]]), n_stable
