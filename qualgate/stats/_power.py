"""Power and sample size for the paired (McNemar) design and the non-inferiority gate.

Design parameters, as fractions of the questions:

- ``loss`` δ = P(lost) − P(gained), the drop in accuracy of the candidate (δ > 0);
- ``discordant`` ψ = P(lost) + P(gained), the fraction of questions whose outcome flips
  either way. Necessarily δ ≤ ψ (which implies the textbook condition δ² ≤ ψ).

Methods
-------
``normal``
    Connor's (1987) normal approximation for McNemar's test,
    ``n = ceil((z_a·sqrt(ψ) + z_power·sqrt(ψ − δ²))² / δ²)`` with ``z_a = z_{1−α/2}``
    (two-sided) or ``z_{1−α}`` (one-sided), and its inverses for power and detectable loss.
``exact``
    (:mod:`qualgate.stats._power_exact`, which also explains the sawtooth and ``n_stable``)
    The exact unconditional power of the exact conditional test (:func:`mcnemar` with
    ``method='exact'``): the number of discordant questions is M ~ Bin(n, ψ); given M = m the
    number gained is Bin(m, (ψ − δ)/(2ψ)) and the test rejects when its exact p-value is
    ``<= alpha``. Power is the sum over m, computed for many n at once (no Python loop over n).

Power is the probability that the test rejects *with the candidate worse* (the rejections of
a two-sided test in the other direction are not counted; the normal formula ignores them too).

References
----------
.. [1] Connor RJ. Sample size for testing differences in proportions for the paired-sample
   design. Biometrics 1987;43:207-211.
.. [2] Nam J. Establishing equivalence of two treatments and sample size requirements in
   matched-pairs design. Biometrics 1997;53:1422-1430.
.. [3] Liu J-p, Hsueh H-m, Hsieh E, Chen JJ. Tests for equivalence or non-inferiority for
   paired binary data. Stat Med 2002;21:231-245.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special

from . import checks
from ._power_exact import ExactDesign, binom_cdf, exact_sample_size, m_window
from ._score import restricted_p21

__all__ = [
    "PowerResult",
    "mcnemar_detectable_loss",
    "mcnemar_power",
    "mcnemar_sample_size",
    "noninferiority_power",
    "noninferiority_sample_size",
]

_METHODS = ("normal", "exact")
_POWER_ALTERNATIVES = ("two-sided", "less")
#: the exact search refuses designs needing more questions than this (use method='normal')
EXACT_MAX_N = 2_000_000


@dataclasses.dataclass(frozen=True)
class PowerResult:
    """A solved power calculation: one of ``n``, ``power`` or ``loss`` was the unknown.

    Attributes
    ----------
    solved_for : {'n', 'power', 'loss'}
        Which quantity was computed; the others are the design given.
    n : int
        Number of paired questions.
    power : float
        Power achieved at ``n`` and ``loss`` (for ``solved_for='loss'`` with no reachable
        loss: the power at ``loss = discordant``, the most any loss can give).
    loss : float
        True loss δ = P(lost) − P(gained). In a non-inferiority design, the expected loss.
        ``nan`` when ``solved_for='loss'`` and no loss up to ``discordant`` reaches the target.
    discordant : float
        ψ = P(lost) + P(gained).
    alpha : float
        Significance level as given (two-sided for ``alternative='two-sided'``).
    alternative : {'two-sided', 'less'}
        The test's alternative; a non-inferiority test is one-sided (``'less'``).
    method : {'normal', 'exact'}
    target_power : float or None
        The power asked for (``None`` when power was the unknown).
    n_stable : int or None
        Sample size only: the smallest n from which power stays >= target for every n up to
        ``n_checked`` (the sawtooth, see the module notes). Equal to ``n`` for the normal
        method, whose power is monotone.
    n_checked : int or None
        Exact sample size only: upper end of the range over which ``n_stable`` is proved.
    margin : float or None
        Non-inferiority margin (H0: loss >= margin); ``None`` for a McNemar design.
    """

    solved_for: str
    n: int
    power: float
    loss: float
    discordant: float
    alpha: float
    alternative: str
    method: str
    target_power: float | None = None
    n_stable: int | None = None
    n_checked: int | None = None
    margin: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict (``nan`` becomes ``None``)."""
        out = dataclasses.asdict(self)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


# ----------------------------------------------------------------------------- validation


def _check_design(loss, discordant, alpha, alternative, method):
    discordant = checks.real("discordant", discordant, low=0.0, high=1.0, high_open=False)
    if loss is not None:
        loss = checks.real("loss", loss, low=0.0, high=1.0, low_open=False, high_open=False)
        if loss > discordant:
            raise ValueError(
                f"loss must not exceed discordant (loss = P(lost) - P(gained) <= "
                f"P(lost) + P(gained) = discordant, so also discordant >= loss**2), got "
                f"loss={loss!r}, discordant={discordant!r}"
            )
    alpha = checks.fraction("alpha", alpha)
    checks.choice("alternative", alternative, _POWER_ALTERNATIVES)
    checks.choice("method", method, _METHODS)
    # one tail of the test carries alpha/2 (two-sided) or alpha (one-sided 'less')
    tail = alpha / 2 if alternative == "two-sided" else alpha
    return loss, discordant, alpha, tail


def _check_target(power):
    return checks.real("power", power, low=0.5, high=1.0, low_open=False)


# ----------------------------------------------------------------------------- normal method


def _normal_power(n, loss, discordant, tail):
    z_a = -special.ndtri(tail)
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = (loss * np.sqrt(n) - z_a * math.sqrt(discordant)) / math.sqrt(discordant - loss**2)
    return special.ndtr(arg)


_MAX_N = 1e15  #: the most questions a design is computed for (a gate report holds at most as many)


def _smallest_n(approx, power_of, target):
    """Smallest integer n >= 1 with power_of(n) >= target, given a real approximation."""
    if not approx <= _MAX_N:  # inf or NaN from a loss so small that its square underflows
        raise ValueError(
            f"the design needs more than {_MAX_N:.0e} questions (about {approx:.3g}): the loss is too small to detect"
        )
    n = max(1, math.ceil(approx))
    while n > 1 and power_of(n - 1) >= target:  # at most a step or two: float rounding only
        n -= 1
    while power_of(n) < target:
        n += 1
    return n


def _normal_n_real(loss, discordant, tail, target):
    if loss * loss == 0:  # a loss whose square underflows: no finite design detects it
        return math.inf
    z_a, z_p = -special.ndtri(tail), special.ndtri(target)
    return (z_a * math.sqrt(discordant) + z_p * math.sqrt(discordant - loss**2)) ** 2 / loss**2


# ----------------------------------------------------------------------------- public API


def mcnemar_sample_size(loss, discordant, *, alpha=0.05, power=0.8, alternative="two-sided", method="normal"):
    """Number of paired questions for McNemar's test to detect a loss.

    H0: P(lost) = P(gained); H1 (``alternative='less'``): the candidate is worse, or
    (``'two-sided'``) the two differ, tested at ``alpha`` split over both tails. Power counts
    rejections with the candidate worse.

    Parameters
    ----------
    loss : float
        True loss δ = P(lost) − P(gained) to detect, 0 < δ <= ``discordant``.
    discordant : float
        ψ = P(lost) + P(gained), the fraction of questions that flip, 0 < ψ <= 1.
    alpha : float, optional
        Significance level, in (0, 1).
    power : float, optional
        Target power, in [0.5, 1).
    alternative : {'two-sided', 'less'}, optional
        ``'greater'`` is refused: the design is for detecting a loss.
    method : {'normal', 'exact'}, optional
        See the module documentation; ``exact`` also reports ``n_stable`` (the sawtooth).
        ``exact`` refuses designs that would search beyond 2,000,000 questions.

    Returns
    -------
    PowerResult
        ``solved_for='n'``; ``n`` and the ``power`` achieved there.

    Examples
    --------
    >>> r = mcnemar_sample_size(0.02, 0.06)
    >>> r.n, round(r.power, 4)
    (1175, 0.8)
    >>> r = mcnemar_sample_size(0.02, 0.06, method="exact")
    >>> r.n, r.n_stable
    (1244, 1244)
    """
    loss, discordant, alpha, tail = _check_design(loss, discordant, alpha, alternative, method)
    if loss == 0:
        raise ValueError("loss must be > 0, got 0")
    target = _check_target(power)
    if method == "normal":
        n = _smallest_n(
            _normal_n_real(loss, discordant, tail, target),
            lambda k: _normal_power(k, loss, discordant, tail),
            target,
        )
        achieved, n_stable, n_checked = float(_normal_power(n, loss, discordant, tail)), n, None
    else:
        n_checked = 4 * math.ceil(_normal_n_real(loss, discordant, tail, target)) + 200
        if n_checked > EXACT_MAX_N:
            raise ValueError(
                f"method='exact' would search up to {n_checked} questions for loss={loss!r}, "
                f"discordant={discordant!r}; the limit is {EXACT_MAX_N}: use method='normal'"
            )
        n, achieved, n_stable = exact_sample_size(loss, discordant, tail, target, n_checked)
    return PowerResult(
        "n",
        n,
        achieved,
        loss,
        discordant,
        alpha,
        alternative,
        method,
        target_power=target,
        n_stable=n_stable,
        n_checked=n_checked,
    )


def mcnemar_power(n, loss, discordant, *, alpha=0.05, alternative="two-sided", method="normal"):
    """Power of McNemar's test with ``n`` paired questions at a true ``loss``.

    Parameters are those of :func:`mcnemar_sample_size`, with ``n`` (>= 1) given and
    ``0 <= loss <= discordant`` (``loss=0`` gives the one-tail size of the test). The normal
    approximation Φ((δ·sqrt(n) − z_a·sqrt(ψ))/sqrt(ψ − δ²)) rises with the loss only where it is
    at least 1/2, which covers every planning target; exact power rises with the loss everywhere.

    Returns
    -------
    PowerResult
        ``solved_for='power'``.

    Examples
    --------
    >>> round(mcnemar_power(1175, 0.02, 0.06).power, 4)
    0.8
    >>> round(mcnemar_power(1175, 0.02, 0.06, method="exact").power, 4)
    0.776
    """
    n = checks.positive_count("n", n)
    loss, discordant, alpha, tail = _check_design(loss, discordant, alpha, alternative, method)
    if method == "normal":
        achieved = float(_normal_power(n, loss, discordant, tail))
    else:
        design = ExactDesign(loss, discordant, tail, n)
        achieved = float(design.power([n])[0])
    return PowerResult("power", n, achieved, loss, discordant, alpha, alternative, method)


def mcnemar_detectable_loss(n, discordant, *, alpha=0.05, power=0.8, alternative="two-sided", method="normal"):
    """Smallest loss that McNemar's test with ``n`` questions detects with the target power.

    Power rises with the loss for fixed n and ψ, so the answer is unique. When even
    ``loss = discordant`` (every discordant question lost) falls short, ``loss`` is ``nan``
    and ``power`` is the power at ``loss = discordant``.

    Returns
    -------
    PowerResult
        ``solved_for='loss'``.

    Examples
    --------
    >>> round(mcnemar_detectable_loss(1175, 0.06).loss, 5)
    0.02
    >>> round(mcnemar_detectable_loss(1175, 0.06, method="exact").loss, 5)
    0.02056
    """
    n = checks.positive_count("n", n)
    _, discordant, alpha, tail = _check_design(None, discordant, alpha, alternative, method)
    target = _check_target(power)
    if method == "normal":
        z_a, z_p = -special.ndtri(tail), special.ndtri(target)
        root = n - z_a**2 + z_p**2
        loss = (
            math.sqrt(discordant) * (z_a * math.sqrt(n) + z_p * math.sqrt(root)) / (n + z_p**2)
            if root >= 0
            else math.inf
        )
        loss = float(loss) if loss <= discordant else math.nan
        at = discordant if math.isnan(loss) else loss
        achieved = float(_normal_power(n, at, discordant, tail))
    else:
        lo, hi = m_window(n, n, discordant)
        ms = np.arange(lo, hi + 1)
        design = ExactDesign(discordant / 2, discordant, tail, n)  # for its critical values
        weights = design.weights(np.array([n]), ms)[0]
        critical = design.critical[lo:]

        def exact_power(d):
            return float(weights @ binom_cdf(critical, ms, (discordant - d) / (2 * discordant)))

        if exact_power(discordant) < target:
            loss, achieved = math.nan, exact_power(discordant)
        else:
            from scipy.optimize import brentq  # imported here: keeps `qualgate power` start-up fast

            loss = brentq(lambda d: exact_power(d) - target, 0.0, discordant, xtol=1e-13)
            if exact_power(loss) < target:  # land on the side that reaches the target
                loss = min(discordant, loss + 1e-12)
            achieved = exact_power(loss)
    return PowerResult("loss", n, achieved, loss, discordant, alpha, alternative, method, target_power=target)


def _noninferiority_design(margin, discordant, expected_loss, alpha):
    margin = checks.real("margin", margin, low=0.0, high=1.0)
    discordant = checks.real("discordant", discordant, low=0.0, high=1.0, high_open=False)
    expected_loss = checks.real("expected_loss", expected_loss, low=-1.0, high=1.0, low_open=False)
    if abs(expected_loss) > discordant:
        raise ValueError(
            f"expected_loss must lie in [-discordant, discordant], got expected_loss="
            f"{expected_loss!r}, discordant={discordant!r}"
        )
    if expected_loss >= margin:
        raise ValueError(
            f"expected_loss must be below margin (otherwise H1: loss < margin is false), got "
            f"expected_loss={expected_loss!r}, margin={margin!r}"
        )
    alpha = checks.fraction("alpha", alpha)
    # standard deviations of one pair's (lost - gained) at the H0 boundary (restricted ML
    # limit, Nam 1997) and under the expected design
    p_lost, p_gained = (discordant + expected_loss) / 2, (discordant - expected_loss) / 2
    q = restricted_p21(p_lost, p_gained, margin)
    sd0 = math.sqrt(2 * q + margin * (1 - margin))
    sd1 = math.sqrt(discordant - expected_loss**2)
    return margin, discordant, expected_loss, alpha, sd0, sd1


def _ni_power(n, margin, expected_loss, alpha, sd0, sd1):
    z_a = -special.ndtri(alpha)
    with np.errstate(divide="ignore"):
        return special.ndtr((np.sqrt(n) * (margin - expected_loss) - z_a * sd0) / sd1)


def _ni_exact_power(n, margin, discordant, expected_loss, alpha, near=None):
    """(exact power, critical value) of the gate's one-seed test (:func:`rejection_thresholds`):
    Σ_s Bin(s; n, ψ)·F_Bin(b*(s); s, (ψ + δ1)/(2ψ)), every outcome enumerated."""
    from ._noninferiority import _tail, rejection_thresholds

    b_star, crit = rejection_thresholds(n, margin, alpha, near=near)
    if np.all(b_star < 0):
        return 0.0, crit
    return float(_tail(n, expected_loss, b_star, [discordant])[0]), crit


#: The exact one-seed test's power has a sawtooth in n (odd and even n alternate by about
#: half a point at margin 0.05, ψ 0.15): ``n_stable`` is the first n from which power stays at
#: or above the target for STABLE_RUN consecutive n (``n_checked`` the last one checked).
STABLE_RUN = 8


def _ni_exact_sample_size(n0, margin, discordant, expected_loss, alpha, target):
    """(first n with exact power >= target, its power, n_stable, n_checked), scanning from the
    normal approximation's n0 (down while n − 1 still reaches the target, else up). Each n's
    power is computed once (the stable run re-reads the scan's), two n at a time on two
    threads (the next n of the scan and the one after: the answer is the same as one at a
    time, each n's power being a function of n alone), each critical value searched near the
    one found for the nearest n of the same parity, else the nearest n (a hint only: the value
    found is proven; it alternates between odd and even n by up to 0.015 at margin 0.02, n near
    690, beyond the hinted window)."""
    from concurrent.futures import ThreadPoolExecutor

    known, crits = {}, {}

    def one(k):
        near = min(crits.items(), key=lambda item: ((item[0] - k) % 2, abs(item[0] - k)), default=(k, None))[1]
        return _ni_exact_power(k, margin, discordant, expected_loss, alpha, near=near)

    def power_at(*ks):  # the power at ks[0], computing the others alongside
        todo = [k for k in ks if k >= 1 and k not in known]
        for k, (value, crit) in zip(todo, pool.map(one, todo)):
            known[k] = value
            if crit is not None and math.isfinite(crit):
                crits[k] = crit
        return known[ks[0]]

    with ThreadPoolExecutor(max_workers=2) as pool:
        n = max(1, n0)
        achieved = power_at(n)
        if achieved >= target:
            while n > 1 and power_at(n - 1, n - 2) >= target:
                n -= 1
            achieved = power_at(n)
        while achieved < target:
            n += 1
            achieved = power_at(n, n + 1)
        first, first_power = n, achieved
        stable, k = n, n
        power_at(*range(n, n + STABLE_RUN))
        while k - stable + 1 < STABLE_RUN:
            k += 1
            # the next n alongside, unless this one can end the run
            if power_at(*((k, k + 1) if k - stable + 1 < STABLE_RUN else (k,))) < target:
                stable = k + 1
    return first, first_power, stable, k


def _check_ni_method(method):
    return checks.choice("method", method, ("normal", "exact"))


def noninferiority_sample_size(margin, discordant, *, expected_loss=0.0, alpha=0.05, power=0.8, method="normal"):
    """Number of paired questions for the non-inferiority score test to pass.

    H0: loss >= ``margin``; H1: loss < ``margin``, one-sided at level ``alpha`` with the
    restricted-ML score statistic of :func:`noninferiority`. Normal approximation of Nam
    (1997) and Liu et al. (2002): ``n = ceil(((z_{1-α}·σ0 + z_power·σ1)/(margin − δ1))²)``,
    σ1² = ψ − δ1² under the expected design (loss δ1 = ``expected_loss``) and
    σ0² = 2·q̃ + margin·(1 − margin) at the H0 boundary, q̃ the restricted-ML limit of
    P(gained).

    Parameters
    ----------
    margin : float
        Largest tolerable loss, in (0, 1).
    discordant : float
        Expected ψ = P(lost) + P(gained), in (0, 1].
    expected_loss : float, optional
        Expected true loss δ1, ``-discordant <= δ1 < margin``; 0 (no loss) by default.
    alpha : float, optional
        One-sided significance level.
    power : float, optional
        Target probability of declaring non-inferiority, in [0.5, 1).

    method : {'normal', 'exact'}, optional
        ``'exact'``: the first n (scanning from the normal approximation's) at which the exact
        power of the test the gate runs with one seed (the exact unconditional test up to
        2,000 pairs, the continuity-corrected score test above: :func:`noninferiority`)
        reaches the target, every outcome enumerated. Its power has a sawtooth in n:
        ``n_stable`` is the first n from which it stays at or above the target for
        ``STABLE_RUN`` (8) consecutive n, up to ``n_checked`` (margin 0.05, ψ 0.15, loss
        0.01: n 602, power 0.8011; stable from 609). "The first n" precisely: from the normal
        approximation's n0, down while n − 1 still reaches the target (up while n falls
        short); an n below a dip under the target is not searched. Each n's critical value is
        proven, not approximated (:func:`~qualgate.stats._noninferiority.exact_critical_value`);
        About 0.03–0.05 CPU-seconds per n searched at 1,000 to 1,700 pairs, two n at a time
        on two threads (``benchmarks/results/power_speed.txt``).

    Returns
    -------
    PowerResult
        ``solved_for='n'``, ``alternative='less'``, ``method`` as given, ``margin`` set and
        ``loss`` = ``expected_loss``.

    Examples
    --------
    >>> noninferiority_sample_size(0.02, 0.06).n
    982
    """
    margin, discordant, expected_loss, alpha, sd0, sd1 = _noninferiority_design(
        margin, discordant, expected_loss, alpha
    )
    target = _check_target(power)
    method = _check_ni_method(method)
    z_a, z_p = -special.ndtri(alpha), special.ndtri(target)

    def power_of(k):
        return _ni_power(k, margin, expected_loss, alpha, sd0, sd1)

    with np.errstate(over="ignore", divide="ignore"):  # a margin too small: inf, refused by _smallest_n
        approx = ((z_a * sd0 + z_p * sd1) / (margin - expected_loss)) ** 2
    n = _smallest_n(approx, power_of, target)
    achieved, stable, checked = float(power_of(n)), n, None
    if method == "exact":
        n, achieved, stable, checked = _ni_exact_sample_size(n, margin, discordant, expected_loss, alpha, target)
    return PowerResult(
        "n",
        n,
        achieved,
        expected_loss,
        discordant,
        alpha,
        "less",
        method,
        target_power=target,
        n_stable=stable,
        n_checked=checked,
        margin=margin,
    )


def noninferiority_power(n, margin, discordant, *, expected_loss=0.0, alpha=0.05, method="normal"):
    """Probability that the non-inferiority score test with ``n`` questions passes.

    Same design and approximation as :func:`noninferiority_sample_size` (``method='exact'``:
    the exact power of the test the gate runs with one seed).

    Examples
    --------
    >>> round(noninferiority_power(982, 0.02, 0.06).power, 3)
    0.8
    """
    n = checks.positive_count("n", n)
    margin, discordant, expected_loss, alpha, sd0, sd1 = _noninferiority_design(
        margin, discordant, expected_loss, alpha
    )
    method = _check_ni_method(method)
    if method == "exact":
        achieved = _ni_exact_power(n, margin, discordant, expected_loss, alpha)[0]
    else:
        achieved = float(_ni_power(n, margin, expected_loss, alpha, sd0, sd1))
    return PowerResult("power", n, achieved, expected_loss, discordant, alpha, "less", method, margin=margin)
