"""Non-inferiority of the candidate against a margin on the paired loss.

One module though over 500 lines: the exact test's p-value, its critical value (and the fast
screening behind ``qualgate power``), the rejection thresholds that exact power and size use,
and the score test past 2,000 pairs all rest on the same private pieces (the score statistic's
thresholds, the tail over the discordance and its certified supremum); split, those would be
imported across modules.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy import special

from . import checks
from ._paired_ci import _counts
from ._score import score_z

__all__ = [
    "NoninferiorityResult",
    "corrected_z",
    "exact_critical_value",
    "exact_pvalue",
    "noninferiority",
    "one_seed_bound",
    "one_seed_pvalue",
]

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
# O(sqrt(n)) per ψ. The supremum over ψ is bounded from above by a branch-and-bound search
# with a proven Lipschitz constant (:func:`_sup_tail`).

_TIE = 1e-9  # outcomes whose statistic equals the observed one within this count as "as extreme"


def _thresholds(n, delta, z, guess=None):
    """b*(s) for s = 0..n: the largest b in [-1, s] with Z(b, s − b) <= z (vectorised bisection).

    ``guess``: thresholds expected to be right for most s (e.g. those of a nearby z); each is
    checked (Z rises with b at fixed s: b* = g exactly when Z(g) <= z and Z(g + 1) > z) and the
    bisection runs only where it is wrong, on the side where b* lies: the same b*, found with
    two evaluations of Z per s instead of ~log2(n).
    """
    s = np.arange(n + 1)
    lo, hi = np.full(n + 1, -1), s.copy()
    if guess is not None:
        g = np.clip(guess, -1, s)
        here = g >= 0  # b = -1 always qualifies
        ok = np.ones(n + 1, bool)
        ok[here] = _admits(n, delta, z, g[here], s[here])
        up = np.zeros(n + 1, bool)
        nxt = ok & (g < s)
        up[nxt] = _admits(n, delta, z, g[nxt] + 1, s[nxt])
        lo = np.where(ok, np.where(up, g + 1, g), lo)
        hi = np.where(ok, np.where(up, hi, g), g - 1)
    todo = np.flatnonzero(lo < hi)
    while todo.size:
        mid = (lo[todo] + hi[todo] + 1) // 2
        ok = _admits(n, delta, z, mid, s[todo])
        lo[todo] = np.where(ok, mid, lo[todo])
        hi[todo] = np.where(ok, hi[todo], mid - 1)
        todo = todo[lo[todo] < hi[todo]]
    return lo


def _admits(n, delta, z, b, s):
    """Z(b, s − b) <= z (to the tie tolerance), elementwise over arrays b, s (b >= 0)."""
    return score_z(b.astype(float), (s - b).astype(float), float(n), delta) <= z + _TIE


@functools.lru_cache(maxsize=8)
def _log_factorial(n):
    """log k! for k = 0..n (``gammaln(k + 1)``), read-only."""
    out = special.gammaln(np.arange(n + 1) + 1.0)
    out.flags.writeable = False
    return out


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
    log_factorial = _log_factorial(n)  # the same values as gammaln(k + 1) elementwise, looked up
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (
            log_factorial[n]
            - log_factorial[s]
            - log_factorial[n - s]
            + special.xlogy(s, psi)
            + special.xlog1py(n - s, -psi)
        )
    weight = np.where(valid, np.exp(log_pmf), 0.0)
    return np.clip(np.sum(weight * inside, axis=1), 0.0, 1.0)


_BATCH = 256  # discordances per call of :func:`_tail` (bounds its memory)
_CERTIFY_BUDGET = 400_000  # discordances :func:`_sup_tail` may evaluate to certify a decision
_QUICK_BUDGET = 20_000  # ... to certify a decision before it searches the local maxima (``decide``)


def _psi_of(t, delta):
    """ψ = δ + (1 − δ)·sin²t, t in [0, π/2]: the parametrisation of [δ, 1] that :func:`_sup_tail` searches
    (``delta`` >= 0; a negative loss δ0 searches [|δ0|, 1], the same by symmetry)."""
    return np.maximum(delta + (1 - delta) * np.sin(t) ** 2, 1e-15)


def _tail_at(n, delta, b_star, t):
    """:func:`_tail` at ψ(t), in batches."""
    psi = _psi_of(np.atleast_1d(np.asarray(t, dtype=float)), abs(delta))
    return np.concatenate([_tail(n, delta, b_star, psi[i : i + _BATCH]) for i in range(0, len(psi), _BATCH)])


_SCREEN_BLOCK = 32  #: discordances per exact restart of :func:`_tail_screen`'s recurrence
#: :func:`_tail_screen` against :func:`_tail`: at most 1.5e-12 apart (n up to 2,000; both carry
#: rounding of ~1e-12 from the log-factorials); a proof from its values adds this much to them
SCREEN_ERROR = 1e-9


def _tail_screen(n, delta, b_star, t):
    """:func:`_tail_at`'s values to ~1e-12 (not bit for bit), about 8 times faster: for
    the grid of :func:`_grid_crossing` (issue 47: the exact search's time went there).

    F(b*(s); s, π) = P(Bin(s, π) <= b*(s)) follows from s to s + 1 by one binomial
    probability: F(b; s + 1) = F(b; s) − π·pmf(b; s) when the threshold stays, F(b + 1; s + 1) =
    F(b; s) + (1 − π)·pmf(b + 1; s) when it rises by one (it never moves otherwise: checked);
    ``special.bdtr`` gives it exactly every :data:`_SCREEN_BLOCK` discordances.
    """
    psi = _psi_of(np.atleast_1d(np.asarray(t, dtype=float)), abs(delta))
    if np.any(np.diff(b_star) < 0) or np.any(np.diff(b_star) > 1):  # pragma: no cover - the score test's thresholds
        return _tail_at(n, delta, b_star, t)
    # batches of about 12,000 cells (ψ x discordances): their arrays stay in the CPU's cache
    rows = int(min(max(12_000 // (12 * math.sqrt(n) + 25), 8), _BATCH))
    return np.concatenate([_tail_screen_batch(n, delta, b_star, psi[i : i + rows]) for i in range(0, len(psi), rows)])


def _tail_screen_batch(n, delta, b_star, psi):
    psi = psi[:, None]
    rows, block = len(psi), _SCREEN_BLOCK
    sd = np.sqrt(n * psi * (1 - psi))  # the window of :func:`_tail`
    lo = np.clip(np.floor(n * psi - 12 * sd) - 12, 0, n).astype(np.int64)
    width = int(np.max(np.minimum(n, np.ceil(n * psi + 12 * sd) + 12) - lo)) + 1
    blocks = -(-width // block)
    s = lo + np.arange(blocks * block + 1)[None, :]  # one column more: the last step
    valid = s[:, :-1] <= n
    np.minimum(s, n, out=s)  # columns beyond n: weight 0 below
    b = b_star[s]
    pi = np.clip((psi + delta) / (2 * psi), 0.0, 1.0)
    log_factorial = _log_factorial(n)
    with np.errstate(divide="ignore"):  # log 0 as -1e300: 0·log 0 = 0, k·log 0 underflows exp to 0
        log_pi, log_qi = np.maximum(np.log(pi), -1e300), np.maximum(np.log1p(-pi), -1e300)
        log_psi, log_1mpsi = np.maximum(np.log(psi), -1e300), np.maximum(np.log1p(-psi), -1e300)
    s, up = s[:, :-1], np.diff(b, axis=1)  # up: 0 or 1
    b = b[:, :-1]
    k = b + up  # the binomial probability that the step from s to s + 1 adds or removes
    inside = (k >= 0) & (k <= s)
    np.clip(k, 0, s, out=k)
    step = np.exp(log_factorial[s] - log_factorial[k] - log_factorial[s - k] + k * log_pi + (s - k) * log_qi)
    step *= up - pi  # 1 - π when the threshold rises, −π when it stays
    step *= inside
    first, s_first = b[:, ::block], s[:, ::block]
    exact = np.where(first < 0, 0.0, np.where(first >= s_first, 1.0, special.bdtr(np.maximum(first, 0), s_first, pi)))
    inside_f = np.empty(b.shape)
    by_block = inside_f.reshape(rows, blocks, block)
    by_block[:, :, 0] = exact
    np.cumsum(step.reshape(rows, blocks, block)[:, :, :-1], axis=2, out=by_block[:, :, 1:])
    by_block[:, :, 1:] += exact[:, :, None]
    weight = np.exp(log_factorial[n] - log_factorial[s] - log_factorial[n - s] + s * log_psi + (n - s) * log_1mpsi)
    weight *= valid
    return np.clip(np.einsum("ij,ij->i", weight, inside_f), 0.0, 1.0)


def _sup_tail(n, delta, b_star, known_at=None, *, decide=False, grid_values=None):
    """sup_ψ P_ψ(Z <= z) over ψ in [δ, 1]. With ``known_at``, the answer to "is the supremum
    below ``known_at``?" is proven: the value returned is below ``known_at`` only when the
    supremum is (otherwise it is at least ``known_at``: the supremum to :data:`P_TOLERANCE`,
    or with ``decide`` the first value found at or above ``known_at``, for callers that need
    the decision only, such as :func:`exact_critical_value`). ``grid_values``: the tail on
    :func:`_grid` already computed (by :func:`_grid_crossing`).

    The search runs in t, ψ = δ + (1 − δ)·sin²t, t in [0, π/2]. The trinomial's cells are
    P(gained) = (1 − δ)sin²t/2, P(concordant) = (1 − δ)cos²t and P(lost) = δ + P(gained), so
    the Fisher information of one pair about t is at most
    2(1 − δ)cos²t + 4(1 − δ)sin²t + 2(1 − δ)cos²t = 4(1 − δ), uniformly, ψ = δ included (in
    ψ, or in arcsin(sqrt(ψ)) as before, it is unbounded there: the peak of issue 36, n = 529,
    5 lost, 1 gained, margin 1 point, at ψ = 0.010254, fell between grid points). The tail
    changes on the scale of 1/(2·sqrt(n(1 − δ))) in t everywhere; the grid takes 16 steps of
    that scale...  local maxima by a bounded search.

    The proof behind ``known_at``: for any set A, f(t) = P_t(A) has
    |f'(t)| = |E[(1_A − f)·U_t]| <= sqrt(f(1 − f))·sqrt(n·4(1 − δ)) (Cauchy–Schwarz; U_t is
    the score of the n pairs, mean 0, variance at most 4n(1 − δ)). On an interval [a, b] with
    f <= u <= 1/2 this bounds the maximum by (f(a) + f(b))/2 + L·(b − a)/2,
    L = 2·sqrt(n(1 − δ)·u(1 − u)). Every grid interval whose bound reaches ``known_at`` is
    halved until none is left (proven below) or ``_CERTIFY_BUDGET`` discordances have been
    evaluated (then ``known_at`` is returned: not proven below, the gate fails closed).
    """
    if np.all(b_star < 0):
        return 0.0
    t = _grid(n, delta)  # ψ runs over [|δ|, 1]
    count = len(t)
    f = _tail_at(n, delta, b_star, t) if grid_values is None else grid_values
    best = float(f.max())
    if known_at is not None and best >= known_at:
        # not below alpha: the value reported is the supremum to P_TOLERANCE (issue 47: the
        # grid's maximum alone was up to 1.6e-4 below it)
        return best if decide else _sup_to_tolerance(n, delta, b_star, t, f)
    if decide and known_at is not None:
        # the decision only: try the proof first, with a small budget, before the local
        # maxima's search (and scipy.optimize's import, 0.3 CPU-s); when the proof is not
        # done within it, the search below runs as it always did. Its answer is the same
        # either way: a proof below known_at means no point reaches it.
        proven, quick = _certify_below(n, delta, b_star, t, f, known_at, best, _QUICK_BUDGET, screen=True)
        if proven:
            return quick
    from scipy import optimize

    padded = np.concatenate([[-np.inf], f, [-np.inf]])
    peaks = np.flatnonzero((padded[1:-1] >= padded[:-2]) & (padded[1:-1] >= padded[2:]))
    for i in peaks[np.argsort(f[peaks])[-3:]]:
        lo, hi = t[max(i - 1, 0)], t[min(i + 1, count - 1)]
        res = optimize.minimize_scalar(
            lambda x: -_tail_at(n, delta, b_star, x)[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-9}
        )
        best = max(best, -float(res.fun))
    best = min(best, 1.0)
    if known_at is None:
        return best
    if best >= known_at:
        return best if decide else _sup_to_tolerance(n, delta, b_star, t, f)
    proven, best = _certify_below(n, delta, b_star, t, f, known_at, best, _CERTIFY_BUDGET)
    if proven or best < known_at:
        return best if proven else float(known_at)  # below known_at, or not proven: fail closed
    return best if decide else _sup_to_tolerance(n, delta, b_star, t, f)


def _certify_below(n, delta, b_star, t, f, known_at, best, budget, *, screen=False):
    """(proven, best): is sup_t f below ``known_at``, f known on the grid ``t`` (values ``f``,
    their maximum ``best`` < ``known_at``)? Every interval whose bound (:func:`_cap`) reaches
    ``known_at`` is halved until none is left (proven: True) or a value at or above it is found
    (False, that value) or ``budget`` discordances have been evaluated (False, ``best`` < known_at).
    ``screen``: the midpoints' values from :func:`_tail_screen` raised by :data:`SCREEN_ERROR`
    (upper bounds, so a proof stands); one at or above ``known_at`` ends the search unproven
    (False, ``best`` as given): it is not a value of the tail."""
    a, b, fa, fb = t[:-1], t[1:], f[:-1], f[1:]
    spent = len(t)
    while True:
        keep = _cap(n, delta, a, b, fa, fb) >= known_at
        if not keep.any():
            return True, best  # proven: the supremum is below known_at
        if spent + keep.sum() > budget:
            return False, best  # not proven below
        a, b, fa, fb = a[keep], b[keep], fa[keep], fb[keep]
        mid = (a + b) / 2
        fm = _tail_screen(n, delta, b_star, mid) + SCREEN_ERROR if screen else _tail_at(n, delta, b_star, mid)
        spent += len(mid)
        if screen and fm.max() >= known_at:
            return False, best
        best = max(best, float(fm.max()))
        if best >= known_at:
            return False, best
        a, b = np.concatenate([a, mid]), np.concatenate([mid, b])
        fa, fb = np.concatenate([fa, fm]), np.concatenate([fm, fb])


def _cap(n, delta, a, b, fa, fb):
    """An upper bound of f(t) = P_t(Z <= z) on each interval [a, b] of t, from f(a), f(b).

    Two proven bounds, the smaller taken (notation of :func:`_sup_tail`):

    - first order: |f'| <= sqrt(f(1 − f))·sqrt(n·4(1 − δ)), so f <= (f(a) + f(b))/2 + L·(b − a)/2;
    - second order (issue 47: the flat tails of the critical value needed ~10^4 halvings with the
      first order alone): f'' = E[(1_A − f)·V] with V = p''/p of the n pairs (E V = 0), so
      |f''| <= M = sqrt(f(1 − f))·sqrt(E V²); V = Σ a_i + Σ_{i≠j} u_i u_j with a = p''/p and
      u = p'/p of one pair, so E V² = n·E a² + 2n(n − 1)·I², I <= 4(1 − δ) (:func:`_sup_tail`),
      and E a² = Σ_cells p''²/p <= 16(1 − δ)·cot²(2t) (cells' second derivatives (1 − δ)cos 2t,
      −2(1 − δ)cos 2t, (1 − δ)cos 2t; 1/P(lost) <= 1/P(gained)), largest at an end of [a, b].
      Then f <= max(f(a), f(b)) + M·(b − a)²/8 (f minus its chord is 0 at both ends).

    sqrt(f(1 − f)) is bounded by sqrt(u(1 − u)), u = min(max(f(a), f(b)) + sqrt(n(1 − δ))·(b − a)/2, 1/2).
    """
    span = 1 - abs(delta)
    root_i = 2 * math.sqrt(n * span)
    half = (b - a) / 2
    u = np.minimum(np.maximum(fa, fb) + root_i * half / 2, 0.5)  # f <= u on [a, b]
    spread = np.sqrt(u * (1 - u))
    first = (fa + fb) / 2 + root_i * spread * half
    with np.errstate(divide="ignore", invalid="ignore"):
        cot2 = np.maximum(1 / np.tan(2 * a) ** 2, 1 / np.tan(2 * b) ** 2)  # inf at t = 0 or π/2
        ev2 = n * 16 * span * cot2 + 2.0 * n * (n - 1) * (4 * span) ** 2
        second = np.maximum(fa, fb) + spread * np.sqrt(ev2) * (b - a) ** 2 / 8
    return np.minimum(first, np.where(np.isfinite(second), second, np.inf))


P_TOLERANCE = 1e-6  #: absolute: a reported exact p-value is at most this far below the supremum


def _sup_to_tolerance(n, delta, b_star, t, f):
    """sup_t f on the grid ``t`` (values ``f``) to within :data:`P_TOLERANCE`, by the
    Lipschitz bound of :func:`_sup_tail`: intervals whose bound reaches the best value found
    plus the tolerance are halved until none is left. If the search budget runs out first,
    the proven upper bound of the supremum is returned instead (a conservative p-value)."""
    a, b, fa, fb = t[:-1], t[1:], f[:-1], f[1:]
    best, spent = float(f.max()), len(t)
    while True:
        cap = _cap(n, delta, a, b, fa, fb)  # >= sup of f on [a, b]
        keep = cap >= best + P_TOLERANCE
        if not keep.any():
            return min(best, 1.0)
        if spent + keep.sum() > _CERTIFY_BUDGET:
            return float(min(cap[keep].max(), 1.0))
        a, b, fa, fb = a[keep], b[keep], fa[keep], fb[keep]
        mid = (a + b) / 2
        fm = _tail_at(n, delta, b_star, mid)
        spent += len(mid)
        best = max(best, float(fm.max()))
        a, b = np.concatenate([a, mid]), np.concatenate([mid, b])
        fa, fb = np.concatenate([fa, fm]), np.concatenate([fm, fb])


def exact_pvalue(lost, gained, n, delta, *, alpha=None):
    """Exact unconditional p-value of H0: loss >= ``delta`` (Hsueh, Liu & Chen 2001).

    ``sup_ψ P_ψ(Z <= z_obs)`` over the nuisance discordance ψ in [|δ|, 1], Z the score
    statistic of :func:`noninferiority`. With ``delta`` = 1 − 1e-12 or more, or no pair at all,
    it is 1. With ``alpha``, ``p < alpha`` is proven to mean that the supremum is below alpha
    (see :func:`_sup_tail`); the test at level alpha rejects exactly then, and a p of at least
    alpha is the supremum to :data:`P_TOLERANCE` (1e-6, proven by the same Lipschitz bound),
    or, when the search budget runs out first, the proven upper bound of it (conservative).

    Examples
    --------
    No discordant pair among 300: the chance of none if the loss were 1 point is at most
    0.99^300 = 0.049.

    >>> round(exact_pvalue(0, 0, 300, 0.01), 4)
    0.049
    """
    return _exact_pvalue(float(lost), float(gained), int(n), float(delta), None if alpha is None else float(alpha))


@functools.lru_cache(maxsize=4096)
def _exact_pvalue(lost, gained, n, delta, alpha=None):
    """:func:`exact_pvalue` (cached: a gate report and its bound ask for the same values)."""
    if n == 0 or delta >= 1:
        return 1.0
    z = score_z(lost, gained, float(n), delta)
    if z >= 0:
        return 1.0
    return _sup_tail(n, delta, _thresholds(n, delta, z), known_at=alpha)


def _attainable(n, delta, low=-math.inf, high=0.0, *, thresholds=False):
    """Sorted distinct values in [low, high) of the score statistic over all (b, c), b + c <= n
    (``thresholds``: and :func:`_thresholds` at low and at high, less the tie tolerance twice)."""
    s = np.arange(n + 1)
    first = _thresholds(n, delta, low - 2 * _TIE) + 1 if low > -math.inf else np.zeros(n + 1, np.int64)
    last = _thresholds(n, delta, high - 2 * _TIE, guess=first - 1)
    count = np.maximum(last - first + 1, 0)
    ss = np.repeat(s, count)
    b = np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    z = score_z(b.astype(float), (ss - b).astype(float), float(n), delta)
    values = np.unique(z[(z >= low) & (z < high)])
    return (values, first - 1, last) if thresholds else values


def _grid(n, delta):
    """The grid in t of :func:`_sup_tail`: 16 steps per 1/(2·sqrt(n(1 − |δ|))), the scale of the tail."""
    count = int(math.ceil(8 * math.pi * math.sqrt(n * (1 - abs(delta))))) + 2
    return np.linspace(0.0, math.pi / 2, count)


_FIND_CELLS = 20_000_000  #: outcomes x grid points :func:`_grid_crossing` may hold (else the bisection alone)


def _grid_crossing(n, delta, alpha, values, near_first=None, near_last=None):
    """(k, t, f, b, b_next): ``values[k]`` is the last of the sorted attainable ``values`` whose tail stays
    below ``alpha`` at every point of :func:`_sup_tail`'s grid, for all of them at once (−1: not
    even the first), t the grid point where the tail of ``values[k + 1]`` is largest and f the
    tail of ``values[k]`` on the grid, b and b_next guesses of the thresholds of ``values[k]``
    and ``values[k + 1]`` (t, f, b, b_next None when k is not inside); None when there are too
    many outcomes to hold. ``near_first``, ``near_last``: guesses of the thresholds of
    ``values[0]`` and ``values[-1]`` (:func:`_thresholds`). The tail at ``values[0]`` is :func:`_tail_screen`'s (within
    1.5e-12 of :func:`_sup_tail`'s); each further value adds the trinomial probabilities of the
    outcomes it admits (a cumulative sum), so the grid's maximum is known for every value after
    one pass. The index is a screen, not the answer: :func:`exact_critical_value` proves its
    answer with the search of :func:`_sup_tail` on each side of the index, from these grid
    values raised by :data:`SCREEN_ERROR` (below alpha) and from the exact tail at t (not below).
    """
    t = _grid(n, delta)
    b_first = _thresholds(n, delta, values[0], guess=near_first)
    b_last = _thresholds(n, delta, values[-1], guess=near_last)
    count = np.maximum(b_last - b_first, 0)  # outcomes admitted after values[0], per s
    if count.sum() * len(t) > _FIND_CELLS:
        return None
    s = np.repeat(np.arange(n + 1), count)
    b = np.repeat(b_first + 1, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    g = s - b
    z = score_z(b.astype(float), g.astype(float), float(n), delta)
    # the first value whose thresholds admit it; outcomes in that order
    admitted_at = np.minimum(np.searchsorted(values, z - _TIE, side="left"), len(values) - 1)
    order = np.argsort(admitted_at, kind="stable")
    admitted_at, b, g, s = admitted_at[order], b[order], g[order], s[order]
    psi = _psi_of(t, abs(delta))
    with np.errstate(divide="ignore"):  # log 0 as -1e300: 0·log 0 = 0 (a screen: rounding aside, the trinomial's)
        log_lost, log_gained, log_neither = (
            np.maximum(np.log(np.clip(psi + delta, 0, 2) / 2), -1e300),
            np.maximum(np.log(np.clip(psi - delta, 0, 2) / 2), -1e300),
            np.maximum(np.log1p(-psi), -1e300),
        )
    log_factorial = _log_factorial(n)
    probability = np.exp(
        (log_factorial[n] - log_factorial[b] - log_factorial[g] - log_factorial[n - s])[:, None]
        + b[:, None] * log_lost
        + g[:, None] * log_gained
        + (n - s)[:, None] * log_neither
    )
    added = np.zeros((len(values), len(t)))
    starts = np.flatnonzero(np.diff(admitted_at, prepend=-1))
    added[admitted_at[starts]] = np.add.reduceat(probability, starts, axis=0)
    tails = _tail_screen(n, delta, b_first, t)[None, :] + np.cumsum(added, axis=0)
    top = np.maximum.accumulate(tails.max(axis=1))
    k = int(np.searchsorted(top, alpha, side="left")) - 1
    if not 0 <= k < len(values) - 1:
        return k, None, None, None, None
    b_k = b_first + np.bincount(s[admitted_at <= k], minlength=n + 1)
    b_next = b_first + np.bincount(s[admitted_at <= k + 1], minlength=n + 1)
    return k, t[np.argmax(tails[k + 1])], tails[k], b_k, b_next


def exact_critical_value(n, delta, alpha, *, near=None):
    """Largest attainable score statistic z with ``sup_ψ P_ψ(Z <= z) < alpha`` (−inf if none).

    The exact test rejects H0: loss >= ``delta`` exactly when the observed Z is at most this
    value (the p-value is non-decreasing in Z); ``benchmarks/exact_size.py`` uses it to
    enumerate the test's size. ``near``: a guess (e.g. the value at n − 1; default the normal
    quantile of ``alpha``). The attainable values within 0.005 of it (0.02 of the default; 0.06
    when the crossing is not inside) are screened at once on the supremum's grid (:func:`_grid_crossing`) and the value found is proven on both sides
    (below alpha, and the next attainable value not); when that fails the search bisects in a
    window around ``near`` and then over all attainable values, as before (issue 47: this
    screening made ``qualgate power``'s exact search answer at once, with the same values:
    ``tests/stats/test_power_speed.py``).
    """
    return _critical_value(n, delta, alpha, near)[0]


def _critical_value(n, delta, alpha, near):
    """(:func:`exact_critical_value`, its thresholds or None when not at hand)."""
    found_thresholds = [None, None]  # the last z whose thresholds were found, and them

    def below(z, hint=None, grid_values=None, guess=None):  # does the test at level alpha reject at Z = z?
        b_star = _thresholds(n, delta, z, guess=guess)
        found_thresholds[:] = [z, b_star]
        if hint is not None and _tail_at(n, delta, b_star, hint)[0] >= alpha:  # one point at alpha: no
            return False
        return _sup_tail(n, delta, b_star, known_at=alpha, decide=True, grid_values=grid_values) < alpha

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

    hinted = near is not None and math.isfinite(near)
    guess = near if hinted else float(special.ndtri(alpha))
    for width in (0.005, 0.06) if hinted else (0.02, 0.06):
        values, near_first, near_last = _attainable(n, delta, guess - width, min(guess + width, 0.0), thresholds=True)
        found = _grid_crossing(n, delta, alpha, values, near_first, near_last) if len(values) > 1 else None
        if found is not None and 0 <= found[0] < len(values) - 1:
            k, peak, grid_values, b_k, b_next = found
            # the grid's values are the screen's (to SCREEN_ERROR): the proof takes them that much higher
            if not below(values[k + 1], hint=peak, guess=b_next) and below(
                values[k], grid_values=grid_values + SCREEN_ERROR, guess=b_k
            ):
                return float(values[k]), found_thresholds[1] if found_thresholds[0] == values[k] else None
            break  # the grid's crossing was not the supremum's: bisect as before
    if near is not None and math.isfinite(near):
        values = _attainable(n, delta, near - 0.06, min(near + 0.06, 0.0))
        if len(values) > 1 and below(values[0]) and not below(values[-1]):
            return largest_below(values), None
    values = _attainable(n, delta)
    if not len(values) or not below(values[0]):
        return -math.inf, None
    return largest_below(values), None


# ---------------------------------------------------------------- above EXACT_MAX_PAIRS
#
# The exact test costs O(n) per p-value (26.7 CPU-s a gate row at 10^4 pairs before this
# switch). From EXACT_MAX_PAIRS + 1 pairs on, at levels alpha >= SWITCH_MIN_ALPHA (Holm over
# up to 16 comparisons at 0.05), the one-seed test is the score test with its numerator
# moved towards H0 by CONTINUITY counts (by 2·CONTINUITY at losses |δ0| > SWITCH_MAX_LOSS,
# where the trinomial is skewed): "score-cc", O(1). Its size was enumerated (every outcome,
# no Monte Carlo) over ψ in [|δ0|, 1] by benchmarks/exact_switch.py: at most alpha in every
# cell (benchmarks/results/exact_switch.txt); the plain score test's size is 0.0513 at
# n = 2,000 and 0.0504-0.0508 at 10^4. Below SWITCH_MIN_ALPHA the exact test runs at any n.

EXACT_MAX_PAIRS = 2_000
CONTINUITY = 1.5
SWITCH_MAX_LOSS = 0.25
SWITCH_MIN_ALPHA = 0.05 / 16


def corrected_z(lost, gained, n, delta):
    """(lost − gained − nδ0 + c)/sqrt(n(2q̃ + δ0(1 − δ0))): the score statistic of
    :func:`noninferiority` moved c counts towards H0 (c = CONTINUITY, twice that at
    |δ0| > SWITCH_MAX_LOSS; +inf with no variance)."""
    from ._score import _q_scalar

    q = _q_scalar(lost / n, gained / n, float(delta))
    var = n * (2 * q + delta * (1 - delta))
    num = lost - gained - n * delta + CONTINUITY * (1 if abs(delta) <= SWITCH_MAX_LOSS else 2)
    return num / math.sqrt(var) if var > 0 else math.copysign(math.inf, num)


def _switched(n, alpha):
    return n > EXACT_MAX_PAIRS and alpha >= SWITCH_MIN_ALPHA


def rejection_thresholds(n, delta, alpha, *, near=None):
    """b*(s), s = 0..n: the one-seed test of H0: loss >= ``delta`` at level ``alpha`` rejects
    with s discordant pairs exactly when at most b*(s) of them are lost (−1: never), and the
    critical value behind it (``near``: a guess for :func:`exact_critical_value`). For exact
    power and size: P(reject) = Σ_s Bin(s; n, ψ)·F_Bin(b*(s); s, π)."""
    if _switched(n, alpha):
        from ._score import restricted_p21

        c = CONTINUITY * (1 if abs(delta) <= SWITCH_MAX_LOSS else 2)
        z = float(special.ndtri(alpha))
        s = np.arange(n + 1)
        lo, hi = np.full(n + 1, -1), s.copy()
        while (lo < hi).any():
            open_ = lo < hi
            mid = (lo + hi + 1) // 2
            b, g = mid.astype(float), (s - mid).astype(float)
            var = n * (2 * restricted_p21(b / n, g / n, delta) + delta * (1 - delta))
            with np.errstate(divide="ignore", invalid="ignore"):
                zz = np.where(var > 0, (b - g - n * delta + c) / np.sqrt(var), np.inf)
            ok = zz < z
            lo = np.where(open_ & ok, mid, lo)
            hi = np.where(open_ & ~ok, mid - 1, hi)
        return lo, None
    crit, b_star = _critical_value(n, delta, alpha, near)
    if not math.isfinite(crit):
        return np.full(n + 1, -1), crit
    return (_thresholds(n, delta, crit) if b_star is None else b_star), crit


def one_seed_pvalue(lost, gained, n, delta, alpha, *, proven=True):
    """p-value of H0: loss >= ``delta`` of the one-seed test at level ``alpha`` (``p < alpha``
    is its rejection): :func:`exact_pvalue` up to EXACT_MAX_PAIRS pairs, "score-cc" above.
    ``proven=False``: the exact supremum as found, without proving the comparison with alpha
    (faster; for the bound's root search, whose result is checked at the margin)."""
    if n == 0 or delta >= 1:
        return 1.0
    if _switched(n, alpha):
        return float(special.ndtr(corrected_z(lost, gained, n, delta)))
    return exact_pvalue(lost, gained, n, delta, alpha=alpha if proven else None)


def one_seed_bound(lost, gained, n, alpha, *, at=None):
    """Upper (1 − alpha) bound of the loss from :func:`one_seed_pvalue`: the largest δ0 not
    rejected, searched from the estimate upwards, whatever margin is tested.

    The p-value is not monotone in δ0 (a discrete test), so after each root search the
    search looks eight steps of 1/16 of (root − estimate) higher for a δ0 that is not
    rejected and searches again from there. ``at`` (a margin): when the test does not reject
    there although the bound found is below it, the search restarts from ``at``; so
    ``bound < at`` exactly when the test rejects at ``at``.
    """
    from scipy.optimize import brentq

    estimate = (lost - gained) / n
    top = 1 - 1e-9
    jump = SWITCH_MAX_LOSS * (1 + 1e-12)  # score-cc's correction doubles there: p steps up

    def p(d):
        return one_seed_pvalue(lost, gained, n, d, alpha, proven=False)

    def largest_from(lo):
        hi = top
        if lo >= hi or p(hi) >= alpha:
            return 1.0
        ok = [lo]

        def f(d):
            v = math.log(max(p(d), 1e-300)) - math.log(alpha)
            if v >= 0:
                ok.append(d)
            return v

        while True:
            root = brentq(f, lo, hi, xtol=1e-9 if n > EXACT_MAX_PAIRS else 1e-7)
            r = max(d for d in ok if d <= root + 1e-7)
            step = max((r - estimate) / 16, 1e-6)
            near = [r + k * step for k in range(1, 9)] + ([jump] if _switched(n, alpha) and r < jump else [])
            higher = [d for d in near if d < hi and p(d) >= alpha]
            if not higher:
                return r
            lo = max(higher)
            ok = [lo]

    bound = largest_from(max(estimate, -1 + 1e-9))
    if at is not None and bound < at and one_seed_pvalue(lost, gained, n, at, alpha) >= alpha:
        bound = largest_from(at)
    return bound


def _exact(lost, gained, n, margin, alpha):
    estimate = (lost - gained) / n
    switched = _switched(n, alpha)
    pvalue = one_seed_pvalue(lost, gained, n, margin, alpha)
    statistic = float(corrected_z(lost, gained, n, margin) if switched else score_z(lost, gained, n, margin))
    upper = one_seed_bound(lost, gained, n, alpha, at=margin)
    if upper >= margin and pvalue < alpha:
        # a δ0 above the margin is not rejected: the test inverted into the bound (monotone in
        # δ0) does not reject at the margin either; its p-value is at least p(δ0)
        pvalue = max(pvalue, one_seed_pvalue(lost, gained, n, upper, alpha) if upper < 1 else 1.0)
    return NoninferiorityResult(
        statistic, pvalue, float(upper), upper < margin, estimate, n, margin, alpha, "score-cc" if switched else "exact"
    )
