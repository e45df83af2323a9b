"""Variance estimation and bound finding for the clustered tests of :mod:`._clustered`.

The statistics of the clustered tests as vectorised functions of the null value δ0 (what the
tests invert, what the sequential gate evaluates once and what ``benchmarks/gate_calibration.py``
simulates with), given the table's sufficient statistics; notation and references as in
:mod:`qualgate.stats._clustered`.

Design effect
    The ratio of the cluster-robust variance of δ̂ to its variance for N independent pairs,
    ``deff = K/(K−1)·Σ_k (d_k − n_k·δ̂)² / Σ_i (d_i − δ̂)²`` (the numerator is the usual
    sandwich / ratio-estimator variance of Obuchowski 1998; the denominator equals
    ``B + C − N·δ̂²``). It is floored at 1, so a clustered design is never credited with less
    variance than independent pairs, and set to the mean cluster size ``Σ n_k²/N`` (questions
    counted once each) when nothing is discordant, where the within-question correlation
    cannot be estimated.

Robust variance
    :func:`robust_variance`, the variance of the default (``'score-clustered-robust'``)
    statistic :func:`robust_z`; :func:`deff_score_z` is the design-effect form.

Bounds
    :func:`scanned_bound` inverts a statistic that need not be monotone in δ0 (grid scan and
    bisection); :func:`monotone_bound` one that is (Brent's method).
"""

from __future__ import annotations

import numpy as np

from ._score import restricted_p21, score_z

__all__ = [
    "deff_score_z",
    "design_effect",
    "monotone_bound",
    "question_arrays",
    "robust_variance",
    "robust_z",
    "sandwich_variance",
    "scanned_bound",
]


def design_effect(n, lost, gained, clusters, sum_d2, sum_nd, sum_n2):
    """Design effect of the loss estimate, vectorised over every argument (see module doc).

    Examples
    --------
    Three seeds per question, each discordant question losing or gaining on all three:

    >>> round(float(design_effect(300, 9, 3, 100, 4 * 9, 3 * 6, 100 * 9)), 3)
    3.03
    """
    n, lost, gained, clusters, sum_d2, sum_nd, sum_n2 = (
        np.asarray(x, dtype=float) for x in (n, lost, gained, clusters, sum_d2, sum_nd, sum_n2)
    )
    loss = (lost - gained) / n
    naive = lost + gained - n * loss**2
    robust = clusters / np.maximum(clusters - 1, 1) * (sum_d2 - 2 * loss * sum_nd + loss**2 * sum_n2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(naive > 0, robust / naive, sum_n2 / n)
    # one question only: no between-question variation to estimate from; count it once
    ratio = np.where(clusters < 2, sum_n2 / n, ratio)
    return np.maximum(ratio, 1.0)


def deff_score_z(lost, gained, n, delta, deff, weights=None):
    """Design-effect-adjusted restricted score statistic for H0: loss = delta (vectorised).

    Without ``weights``: :func:`~qualgate.stats._score.score_z` divided by ``sqrt(deff)``,
    every argument broadcasting. With ``weights``: the last axis of ``lost``, ``gained``,
    ``n`` and ``deff`` indexes strata, combined with those weights.
    """
    if weights is None:
        return score_z(lost, gained, n, delta) / np.sqrt(deff)
    lost, gained, n, deff = (np.asarray(x, dtype=float) for x in (lost, gained, n, deff))
    d0 = np.asarray(delta, dtype=float)[..., None]
    q = restricted_p21(lost / n, gained / n, d0)
    var = deff * (2 * q + d0 * (1 - d0)) / n
    w = np.asarray(weights, dtype=float)
    num = np.sum(w * ((lost - gained) / n - d0), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(num == 0, 0.0, num / np.sqrt(np.sum(w * w * var, axis=-1)))
    return z if z.ndim else float(z)


def robust_variance(n, lost, gained, clusters, sum_d2, net_lost, net_gained, sum_d2_n, delta, crit):
    """Variance of ``B − C`` under H0: loss = ``delta`` used by the clustered tests (vectorised).

    ``max(R, T, Q) + F`` in squared pair counts, where

    - ``R = K/(K−1)·Σ_k (d_k − N/K·δ0)²`` is the cluster-robust (sandwich) variance of
      Obuchowski (1998) centred at the null value instead of the estimate, as a score test
      does (at δ0 = 0 its statistic ``(B − C)²/R`` is Obuchowski's clustered McNemar
      statistic); 0 with a single question. Each question is centred at the mean question's
      share ``N/K·δ0`` of the null loss (the same as ``n_k·δ0`` when the questions are of
      equal size, and ``S = Σ_k (d_k − N/K·δ0)``): centred at ``n_k·δ0``, a large question on
      which both sides agree counted ``(n_k·δ0)²``, and agreeing pairs added to it could
      widen the bound. Centred at the mean share, they cannot: ``(Σ u_k)² ≤ K·Σ u_k²``
      (Cauchy–Schwarz) is exactly what keeps ``S²/R`` from falling as N/K grows;
    - ``T = N·(2q̃ + δ0(1 − δ0))`` is the restricted variance of N independent pairs (Tango
      1998): with few discordant pairs the variance is never taken below what independent
      pairs with loss δ0 would have, and with none it is not zero;
    - ``Q = N²/K·h²·(2q̃_h + δ0/h·(1 − δ0/h))`` is the same restricted (Tango) variance one level
      up, with the *question* as the unit: a question of the mean size s = N/K is taken to
      lose or gain all of a share ``h`` of its pairs or none (its mean difference −h, 0 or +h),
      with ``h = (Σ_k d_k²/n_k + P)/(Σ_k |d_k| + P)`` the pair-weighted typical size of a
      discordant question's mean, and q̃_h the restricted estimate of P(−h) from ``Σ d_k⁺/(s·h)``
      lost and ``Σ d_k⁻/(s·h)`` gained of K questions at loss ``δ0/h`` per question. The prior
      ``P = s·(1 + K·|δ0|/2)`` pairs of all-or-nothing questions (h = 1 when nothing is
      discordant) is half the loss the null needs: with a lighter prior the first thin lost
      pair of an identical candidate moved h from 1 towards 1/n_k and *lowered* the bound.
      Where the discordance sits in few questions, R is estimated from those few and is too
      small just when few of them were drawn (the sandwich estimator's known downward bias
      with few effective clusters): Q says what the variance must be if the loss δ0 is
      carried by questions as discordant as the observed ones, however few were observed.
      With every question of one size losing or gaining all its pairs, h = 1 and the test is
      Tango's score test on the K questions (issue 36). Q uses the sizes only through N and
      the discordant questions' own, never the largest question's (agreeing pairs added to a
      question can still move h a hair towards 1 through N/K: at most 0.1 % of the bound in
      the property test);
    - ``F = max(crit²κ² − κ, 0)·(N/K)²·(1 + |δ0|)²`` with κ = K/(K−1): about one question of
      mean size and worst-case spread. It makes the bound monotone: along the sandwich
      branch ``∂V/∂d_k = 2κ·u_k`` (u_k = d_k − n_k δ0), so the statistic ``S/√V``,
      ``S = B − C − N·δ0``, has ``∂(S/√V)/∂d_k ≥ 0`` wherever ``S = −crit·√V`` as soon as
      ``V ≥ crit²κ²·u_k²``; since ``V ≥ κ·u_k² + F`` and ``|u_k| ≤ n_k(1 + |δ0|)``, it can only
      cross ``−crit`` upwards when a pair of question k turns from gained or concordant to
      lost, for questions of equal size (the Q and T branches, and unequal sizes, are checked
      by the property tests). It uses the mean size, not the largest: the former floor with
      the largest question's size made one question of 100 agreeing samples among 1,000 of
      one turn a 0.30-point bound into 24.7 (issue 36).

    ``δ0/h`` is capped at 1 (``h`` raised to |δ0|): a loss larger than the typical discordant
    question is left to R and T. Monotonicity in lost and gained pairs (also with questions
    of unequal size) and the agreeing-pairs property are checked by
    ``tests/stats/test_monotone.py`` and ``tests/stats/test_few_discordant_clusters.py``.
    """
    n, lost, gained, clusters, sum_d2, net_lost, net_gained, sum_d2_n = (
        np.asarray(x, dtype=float) for x in (n, lost, gained, clusters, sum_d2, net_lost, net_gained, sum_d2_n)
    )
    delta = np.asarray(delta, dtype=float)
    q = restricted_p21(lost / n, gained / n, delta)
    tango = n * (2 * q + delta * (1 - delta))
    sandwich = sandwich_variance(n, lost, gained, clusters, sum_d2, delta)
    size = n / clusters  # the mean question
    prior = size * (1.0 + clusters * np.abs(delta) / 2)  # pairs of all-or-nothing questions
    h = np.maximum((sum_d2_n + prior) / (net_lost + net_gained + prior), np.abs(delta))
    unit = delta / h
    qh = restricted_p21(net_lost / size / h / clusters, net_gained / size / h / clusters, unit)
    questions = n * n / clusters * h * h * (2 * qh + unit * (1 - unit))
    kappa = clusters / np.maximum(clusters - 1, 1)
    floor = np.maximum(float(crit) ** 2 * kappa**2 - kappa, 0.0) * (n / clusters) ** 2 * (1 + np.abs(delta)) ** 2
    return np.maximum(np.maximum(sandwich, tango), questions) + floor


def sandwich_variance(n, lost, gained, clusters, sum_d2, delta):
    """R of :func:`robust_variance`: ``K/(K−1)·Σ_k (d_k − N/K·δ0)²`` (0 with one question)."""
    n, lost, gained, clusters, sum_d2, delta = (
        np.asarray(x, dtype=float) for x in (n, lost, gained, clusters, sum_d2, delta)
    )
    share = n / clusters * delta  # the mean question's expected difference under H0
    centred = np.maximum(sum_d2 - 2 * share * (lost - gained) + clusters * share**2, 0.0)
    return np.where(clusters >= 2, clusters / np.maximum(clusters - 1, 1) * centred, 0.0)


def question_arrays(pairs, lost, gained):
    """The statistics :func:`robust_z` takes, from per-question pair counts (last axis: questions).

    ``pairs``, ``lost`` and ``gained`` hold each question's pairs, lost and gained pairs
    (broadcast together; leading axes are replicates). Questions of equal size give the pair
    counts themselves. Questions of unequal size are weighted equally (see
    :mod:`qualgate.stats._clustered`, "Questions of unequal size"): question k enters as a
    question of the mean size ``s = N/K`` with ``s·lost_k/n_k`` lost and ``s·gained_k/n_k``
    gained pairs, so that ``(B − C)/N`` is the mean over questions of each question's loss
    ``d_k/n_k`` and every term of :func:`robust_variance` is that of an equal-size design.
    """
    pairs, lost, gained = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (pairs, lost, gained)))
    k = pairs.shape[-1]
    n = pairs.sum(axis=-1)
    net = lost - gained
    equal = np.all(pairs == pairs[..., :1], axis=-1)
    size = n / k
    m = net / pairs  # each question's loss, in [-1, 1]
    weighted = (
        size * (lost / pairs).sum(axis=-1),
        size * (gained / pairs).sum(axis=-1),
        size * size * (m * m).sum(axis=-1),
        size * np.maximum(m, 0).sum(axis=-1),
        size * np.maximum(-m, 0).sum(axis=-1),
        size * (m * m).sum(axis=-1),
    )
    counts = (
        lost.sum(axis=-1),
        gained.sum(axis=-1),
        (net * net).sum(axis=-1),
        np.maximum(net, 0).sum(axis=-1),
        np.maximum(-net, 0).sum(axis=-1),
        (net * net / pairs).sum(axis=-1),
    )
    lost_, gained_, sum_d2, net_lost, net_gained, sum_d2_n = (np.where(equal, c, w) for c, w in zip(counts, weighted))
    return n, lost_, gained_, np.full_like(n, float(k)), sum_d2, net_lost, net_gained, sum_d2_n


def robust_z(arrays, delta, crit, weights=None):
    """Clustered score statistic ``S/√V`` at loss = ``delta`` (vectorised over ``delta``).

    ``arrays``: (n, lost, gained, clusters, sum_d2, net_lost, net_gained, sum_d2_n)
    (see :class:`~qualgate.stats.ClusteredTable`), each with a last axis over strata when
    ``weights`` is given: then ``Z = Σ_s w_s (δ̂_s − δ0) / sqrt(Σ_s w_s² V_s(δ0)/N_s²)``.
    """
    n, lost, gained = arrays[:3]
    if weights is None:
        d0 = np.asarray(delta, dtype=float)
        num = lost - gained - n * d0
        var = robust_variance(*arrays, d0, crit)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(num == 0, 0.0, num / np.sqrt(var))
        return z if z.ndim else float(z)
    d0 = np.asarray(delta, dtype=float)[..., None]
    var = robust_variance(*arrays, d0, crit) / n**2
    num = np.sum(weights * ((lost - gained) / n - d0), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(num == 0, 0.0, num / np.sqrt(np.sum(weights**2 * var, axis=-1)))
    return z if z.ndim else float(z)


def scanned_bound(f, est, crit, upper, points=512):
    """The far end of ``{δ : f(δ) ≥ −crit}`` (upper) or ``{δ : f(δ) ≤ crit}`` (lower) from ``est``.

    ``f`` need not be monotone in δ: it is scanned on a grid from ``est`` to ±1 (dense near
    ``est``) and the last crossing is refined by bisection, so the bound is the supremum
    (infimum) of the values not rejected up to the grid resolution.
    """
    edge = 1.0 - 1e-12
    span = np.expm1(np.linspace(0.0, np.log1p(1e4), points)) / 1e4  # 0 .. 1, dense near 0
    if upper:
        grid = est + (edge - est) * span
        keep = f(grid) >= -crit
    else:
        grid = est - (est + edge) * span
        keep = f(grid) <= crit
    idx = np.flatnonzero(keep)
    if not len(idx):
        return float(est)
    i = idx[-1]
    if i == len(grid) - 1:
        return 1.0 if upper else -1.0
    inside = (lambda x: f(x) >= -crit) if upper else (lambda x: f(x) <= crit)  # noqa: E731
    a, b = float(grid[i]), float(grid[i + 1])
    while abs(b - a) > 1e-12:
        mid = 0.5 * (a + b)
        if inside(mid):
            a = mid
        else:
            b = mid
    return a


def monotone_bound(f, est, crit, upper):
    """Root of ``f(δ) = ±crit`` on the far side of ``est`` (f decreasing, f(est) = 0)."""
    from scipy import optimize  # here: scipy.optimize takes 0.3 s to import (`qualgate power` reads pilots)

    if upper:
        hi = 1.0 - 1e-12
        g = lambda x: f(x) + crit  # noqa: E731
        return 1.0 if g(hi) > 0 else optimize.brentq(g, est, hi, xtol=1e-12)
    lo = -1.0 + 1e-12
    g = lambda x: f(x) - crit  # noqa: E731
    return -1.0 if g(lo) < 0 else optimize.brentq(g, lo, est, xtol=1e-12)
