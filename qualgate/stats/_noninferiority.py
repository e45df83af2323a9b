"""Non-inferiority of the candidate against a margin on the paired loss."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy import special

from . import checks
from ._paired_ci import _counts
from ._score import score_z

__all__ = ["NoninferiorityResult", "exact_critical_value", "exact_pvalue", "noninferiority"]

_METHODS = ("score", "exact")


@dataclasses.dataclass(frozen=True)
class NoninferiorityResult:
    """Result of :func:`noninferiority`.

    Attributes
    ----------
    statistic : float
        The restricted-ML score statistic Z at loss = ``margin`` (negative favours H1).
    pvalue : float
        Φ(Z), the one-sided p-value for H1: loss < margin.
    upper_bound : float
        One-sided upper confidence bound of the loss at level 1 − ``alpha``: the largest
        loss Δ0 that the score test at level ``alpha`` does not reject. H0 is rejected exactly
        when ``upper_bound < margin``.
    noninferior : bool
        ``pvalue < alpha``: the loss is shown to be below the margin.
    loss : float
        Observed loss (lost − gained)/n (nan when n = 0).
    n : int
    margin, alpha : float
    method : str
    """

    statistic: float
    pvalue: float
    upper_bound: float
    noninferior: bool
    loss: float
    n: int
    margin: float
    alpha: float
    method: str

    def to_dict(self) -> dict:
        """JSON-ready dict (a nan loss becomes ``None``)."""
        out = dataclasses.asdict(self)
        if out["loss"] != out["loss"]:
            out["loss"] = None
        return out


def noninferiority(both_correct, lost, gained, both_wrong, *, margin, alpha=0.05, method="exact"):
    r"""Test whether the candidate's loss is below a margin.

    H0: loss >= ``margin``; H1: loss < ``margin``, where loss = P(lost) − P(gained) =
    accuracy(B) − accuracy(C). The test is one-sided at level ``alpha``.

    The statistic is the score statistic with the restricted maximum-likelihood estimate of
    the discordant probabilities under H0's boundary loss = margin (Nam 1997; Tango 1998;
    Liu et al. 2002, "RMLE-based test"):

    .. math:: Z = \frac{\text{lost} - \text{gained} - n\,\delta_0}
                      {\sqrt{n\,(2\tilde q + \delta_0 (1 - \delta_0))}},\qquad \delta_0 = \text{margin},

    with :math:`\tilde q` the restricted ML estimate of P(gained); p = Φ(Z). It is defined
    with zero discordant pairs (Tango's motivation) and Liu et al. found it holds the level
    better than the Wald-type test. Its upper confidence bound is the upper limit of the
    Tango interval of :func:`paired_difference_ci` at confidence 1 − 2·alpha, negated.

    ``method='exact'`` keeps the score statistic as the ordering of the outcomes but takes
    its p-value from the trinomial distribution itself, maximised over the nuisance
    discordance: the exact unconditional test of Hsueh, Liu & Chen (2001),

    .. math:: p = \sup_{\psi} P_{\psi,\,\delta_0}\bigl(Z(B, C) \le z_{obs}\bigr),

    the supremum over every discordance ψ = P(lost) + P(gained) compatible with loss δ0 (see
    :func:`exact_pvalue`). Its size is at most ``alpha`` at every n and every discordance
    (``benchmarks/exact_size.py`` enumerates it for n up to 2,000 on a discordance grid of
    2–20 % at a 2-point margin, every n: at most 0.04998; 1–20 % at a 1-point margin: at most
    0.04999); the asymptotic score test's size reaches
    0.068 at n = 133 and 2 % discordance. The upper bound is the largest δ0 the exact test
    does not reject (a bracketing root search to 1e-7, bracketed by the margin so that
    ``noninferior`` ⟺ ``upper_bound < margin``).

    Parameters
    ----------
    both_correct, lost, gained, both_wrong : int
        Paired counts.
    margin : float
        Largest tolerable loss, in (0, 1) (e.g. 0.01 for one accuracy point).
    alpha : float, optional
        One-sided level, in (0, 0.5); default 0.05.
    method : {'score', 'exact'}, optional
        The exact unconditional test (default: what ``qualgate gate`` uses with one pair per
        question, :mod:`qualgate.verdict.fixed`; its size is at most ``alpha``) or the
        asymptotic score test (``'score'``, whose size can exceed ``alpha`` at small n).

    Returns
    -------
    NoninferiorityResult
        With n = 0: statistic 0, p-value 1, upper bound 1, not non-inferior.

    References
    ----------
    .. [1] Nam J. Establishing equivalence of two treatments and sample size requirements in
       matched-pairs design. Biometrics 1997;53:1422-1430.
    .. [2] Tango T. Equivalence test and confidence interval for the difference in proportions
       for the paired-sample design. Stat Med 1998;17:891-908.
    .. [3] Liu J-p, Hsueh H-m, Hsieh E, Chen JJ. Tests for equivalence or non-inferiority for
       paired binary data. Stat Med 2002;21:231-245.
    .. [4] Hsueh H-m, Liu J-p, Chen JJ. Unconditional exact tests for equivalence or
       noninferiority for paired binary endpoints. Biometrics 2001;57:478-483.

    Examples
    --------
    >>> r = noninferiority(900, 12, 10, 78, margin=0.02, method="score")
    >>> r.noninferior, round(r.upper_bound, 4)
    (True, 0.0103)
    >>> e = noninferiority(180, 3, 2, 15, margin=0.05)  # method="exact", what the gate uses
    >>> e.noninferior, round(e.upper_bound, 4), e.method
    (True, 0.029, 'exact')
    """
    from scipy.optimize import brentq  # here, not at import: keeps `qualgate power` start-up fast

    a, lost, gained, d = _counts(both_correct, lost, gained, both_wrong)
    margin = checks.real("margin", margin, low=0.0, high=1.0)
    alpha = checks.real("alpha", alpha, low=0.0, high=0.5)
    checks.choice("method", method, _METHODS)
    n = a + lost + gained + d
    if n == 0:
        return NoninferiorityResult(0.0, 1.0, 1.0, False, float("nan"), 0, margin, alpha, method)
    if method == "exact":
        return _exact(lost, gained, n, margin, alpha)
    z_alpha = float(-special.ndtri(alpha))
    statistic = float(score_z(lost, gained, n, margin))
    pvalue = float(special.ndtr(statistic))
    estimate = (lost - gained) / n
    edge = 1 - 1e-12
    if estimate >= 1 or score_z(lost, gained, n, edge) >= -z_alpha:
        upper = 1.0
    else:
        upper = brentq(lambda t: score_z(lost, gained, n, t) + z_alpha, estimate, edge, xtol=1e-14)
    return NoninferiorityResult(statistic, pvalue, float(upper), pvalue < alpha, estimate, n, margin, alpha, method)


# ---------------------------------------------------------------- exact unconditional test
#
# With n pairs and H0's boundary loss δ0, the outcome (B lost, C gained) is trinomial with
# P(lost) = q + δ0, P(gained) = q; the nuisance is ψ = 2q + δ0 in [δ0, 1]. Given S = B + C
# discordant pairs, B ~ Bin(S, π) with π = (q + δ0)/ψ, and for fixed S the score statistic
# increases with B, so {Z <= z} = {B <= b*(S)} and
#     P_ψ(Z <= z) = Σ_s Bin(s; n, ψ) · F_Bin(b*(s); s, π),
# O(n) per ψ. The supremum over ψ is taken on a grid (geometric near δ0, where the worst
# case of low discordance sits, and linear) refined by a bounded search around the largest
# grid values.

_TIE = 1e-9  # outcomes whose statistic equals the observed one within this count as "as extreme"


def _thresholds(n, delta, z):
    """b*(s) for s = 0..n: the largest b in [-1, s] with Z(b, s − b) <= z (vectorised bisection)."""
    s = np.arange(n + 1)
    lo, hi = np.full(n + 1, -1), s.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi + 1) // 2
        ok = score_z(mid.astype(float), (s - mid).astype(float), float(n), delta) <= z + _TIE
        lo = np.where(open_ & ok, mid, lo)
        hi = np.where(open_ & ~ok, mid - 1, hi)


def _tail(n, delta, b_star, psi):
    """P_ψ(Z <= z) for every ψ in ``psi`` (1-d), given the thresholds ``b_star``.

    Only the discordant counts within 12 standard deviations (+ 12) of nψ are summed: the
    binomial mass outside is below 1e-30.
    """
    psi = np.atleast_1d(np.asarray(psi, dtype=float))[:, None]
    sd = np.sqrt(n * psi * (1 - psi))
    lo = np.clip(np.floor(n * psi - 12 * sd) - 12, 0, n).astype(np.int64)
    width = int(np.max(np.minimum(n, np.ceil(n * psi + 12 * sd) + 12) - lo)) + 1
    s = lo + np.arange(width)[None, :]
    valid = s <= n
    s = np.minimum(s, n)
    b = b_star[s]
    pi = np.clip((psi + delta) / (2 * psi), 0.0, 1.0)
    inside = special.bdtr(np.maximum(b, 0), s, pi)
    inside = np.where(b < 0, 0.0, np.where(b >= s, 1.0, inside))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (
            special.gammaln(n + 1)
            - special.gammaln(s + 1)
            - special.gammaln(n - s + 1)
            + special.xlogy(s, psi)
            + special.xlog1py(n - s, -psi)
        )
    weight = np.where(valid, np.exp(log_pmf), 0.0)
    return np.clip(np.sum(weight * inside, axis=1), 0.0, 1.0)


def _psi_grid(n, low):
    """Discordances at which :func:`_sup_tail` evaluates the tail before refining.

    P_ψ(Z <= z) varies in ψ on the scale of the discordance estimate's standard deviation
    sqrt(ψ(1 − ψ)/n), which is constant, 1/(2 sqrt(n)), in θ = arcsin(sqrt(ψ)): the grid steps
    θ by an eighth of that, so that no local maximum is narrower than a few grid steps (a
    coarser grid found the wrong one at n = 1,018, margin 1 point: p 0.049988 where the
    supremum is 0.050178). A log- and a linear-spaced grid are added for small n.
    """
    t0 = math.asin(math.sqrt(low))
    count = int(math.ceil((math.pi / 2 - t0) * 16 * math.sqrt(n))) + 2
    fine = np.sin(np.linspace(t0, math.pi / 2, count)) ** 2
    return np.unique(np.concatenate([np.geomspace(low, 1.0, 64), np.linspace(low, 1.0, 33), fine]))


def _sup_tail(n, delta, b_star, known_at=None):
    """sup_ψ P_ψ(Z <= z). With ``known_at``, stop as soon as the grid reaches that value
    (only the comparison with it is then needed).

    The tail is evaluated on :func:`_psi_grid` and each of the three highest local maxima
    is refined by a bounded search between its grid neighbours.
    """
    from scipy import optimize

    if np.all(b_star < 0):
        return 0.0
    low = max(delta, 1e-9)
    grid = _psi_grid(n, low)
    values = _tail(n, delta, b_star, grid)
    best = float(values.max())
    if known_at is not None and best >= known_at:
        return best
    padded = np.concatenate([[-np.inf], values, [-np.inf]])
    peaks = np.flatnonzero((padded[1:-1] >= padded[:-2]) & (padded[1:-1] >= padded[2:]))
    for i in peaks[np.argsort(values[peaks])[-3:]]:
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        if b <= a:
            continue
        res = optimize.minimize_scalar(
            lambda x: -_tail(n, delta, b_star, x)[0],
            bounds=(a, b),
            method="bounded",
            options={"xatol": 1e-7 * max(a, 1e-3)},
        )
        best = max(best, -float(res.fun))
    return min(best, 1.0)


def exact_pvalue(lost, gained, n, delta):
    """Exact unconditional p-value of H0: loss >= ``delta`` (Hsueh, Liu & Chen 2001).

    ``sup_ψ P_ψ(Z <= z_obs)`` over the nuisance discordance ψ, Z the score statistic of
    :func:`noninferiority`. With ``delta`` = 1 − 1e-12 or more, or no pair at all, it is 1.

    Examples
    --------
    No discordant pair among 300: the chance of none if the loss were 1 point is at most
    0.99^300 = 0.049.

    >>> round(exact_pvalue(0, 0, 300, 0.01), 4)
    0.049
    """
    return _exact_pvalue(float(lost), float(gained), int(n), float(delta))


@functools.lru_cache(maxsize=4096)
def _exact_pvalue(lost, gained, n, delta):
    """:func:`exact_pvalue` (cached: a gate report and its bound ask for the same values)."""
    if n == 0 or delta >= 1:
        return 1.0
    z = score_z(lost, gained, float(n), delta)
    if z >= 0:
        return 1.0
    return _sup_tail(n, delta, _thresholds(n, delta, z))


def _attainable(n, delta, low=-math.inf, high=0.0):
    """Sorted distinct values in [low, high) of the score statistic over all (b, c), b + c <= n."""
    s = np.arange(n + 1)
    first = _thresholds(n, delta, low - 2 * _TIE) + 1 if low > -math.inf else np.zeros(n + 1, np.int64)
    last = _thresholds(n, delta, high - 2 * _TIE)
    count = np.maximum(last - first + 1, 0)
    ss = np.repeat(s, count)
    b = np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    z = score_z(b.astype(float), (ss - b).astype(float), float(n), delta)
    return np.unique(z[(z >= low) & (z < high)])


def exact_critical_value(n, delta, alpha, *, near=None):
    """Largest attainable score statistic z with ``sup_ψ P_ψ(Z <= z) < alpha`` (−inf if none).

    The exact test rejects H0: loss >= ``delta`` exactly when the observed Z is at most this
    value (the p-value is non-decreasing in Z); ``benchmarks/exact_size.py`` uses it to
    enumerate the test's size. ``near``: a guess (e.g. the value at n − 1); the search looks
    in a window around it first and falls back to all attainable values.
    """

    def below(z):  # does the test at level alpha reject at Z = z?
        return _sup_tail(n, delta, _thresholds(n, delta, z), known_at=alpha) < alpha

    def largest_below(values):  # given below(values[0]) and not below(values[-1] + ε)
        lo, hi = 0, len(values) - 1
        if below(values[hi]):
            return float(values[hi])
        hi -= 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if below(values[mid]):
                lo = mid
            else:
                hi = mid - 1
        return float(values[lo])

    if near is not None and math.isfinite(near):
        values = _attainable(n, delta, near - 0.06, min(near + 0.06, 0.0))
        if len(values) > 1 and below(values[0]) and not below(values[-1]):
            return largest_below(values)
    values = _attainable(n, delta)
    if not len(values) or not below(values[0]):
        return -math.inf
    return largest_below(values)


def _exact(lost, gained, n, margin, alpha):
    estimate = (lost - gained) / n
    pvalue = exact_pvalue(lost, gained, n, margin)
    statistic = float(score_z(lost, gained, n, margin))
    rejected = pvalue < alpha
    # the largest δ0 not rejected: a bracketing root search on log p − log alpha (p steps in
    # δ0, so the root is a sign change), bracketed by the margin's own decision
    top = 1 - 1e-9
    if rejected:
        lo, hi = max(estimate, -1.0), margin
    else:
        lo, hi = margin, top
        if exact_pvalue(lost, gained, n, top) >= alpha:
            lo = hi = 1.0
    if hi > lo:
        from scipy.optimize import brentq

        def f(d):
            return math.log(max(exact_pvalue(lost, gained, n, d), 1e-300)) - math.log(alpha)

        root = brentq(f, lo, hi, xtol=1e-7)
        lo = root if f(root) >= 0 else max(lo, root - 1e-7)
    upper = lo  # the largest δ0 found not rejected; < margin exactly when rejected
    return NoninferiorityResult(statistic, pvalue, float(upper), rejected, estimate, n, margin, alpha, "exact")
