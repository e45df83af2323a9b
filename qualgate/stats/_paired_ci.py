"""Confidence intervals for the paired difference accuracy(C) − accuracy(B)."""

from __future__ import annotations

import math
from typing import NamedTuple

from scipy import special

from . import checks
from ._score import score_z

__all__ = ["ConfidenceInterval", "paired_difference_ci"]

_METHODS = ("tango", "newcombe", "wald", "wald-cc", "agresti-min", "bonett-price")


class ConfidenceInterval(NamedTuple):
    """A two-sided interval ``(low, high)``."""

    low: float
    high: float


def _counts(both_correct, lost, gained, both_wrong):
    return (
        checks.count("both_correct", both_correct),
        checks.count("lost", lost),
        checks.count("gained", gained),
        checks.count("both_wrong", both_wrong),
    )


def _wilson(x, n, z):
    p = x / n
    centre = (2 * x + z * z) / (2 * (n + z * z))
    half = z * math.sqrt(z * z + 4 * x * (1 - p)) / (2 * (n + z * z))
    return centre - half, centre + half


def _tango(lost, gained, n, z):
    """{Δ0 : |Z(Δ0)| <= z}, Z the score statistic with first = gained, second = lost."""
    from scipy.optimize import brentq  # here, not at import: keeps `qualgate power` start-up fast

    estimate = (gained - lost) / n
    edge = 1 - 1e-12  # Z is decreasing in Δ0; its variance vanishes at ±1

    def crossing(target, a, b):
        return brentq(lambda d: score_z(gained, lost, n, d) - target, a, b, xtol=1e-14)

    low = -1.0 if score_z(gained, lost, n, -edge) <= z else crossing(z, -edge, estimate)
    high = 1.0 if score_z(gained, lost, n, edge) >= -z else crossing(-z, estimate, edge)
    return low, high


def _newcombe(a, lost, gained, d, n, z):
    # Marginal accuracies: p1 = acc(C) = (a + gained)/n, p2 = acc(B) = (a + lost)/n.
    x1, x2 = a + gained, a + lost
    p1, p2 = x1 / n, x2 / n
    l1, u1 = _wilson(x1, n, z)
    l2, u2 = _wilson(x2, n, z)
    margins = x1 * (n - x1) * x2 * (n - x2)
    cross = a * d - gained * lost
    if margins == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    else:  # Newcombe's adjustment of the correlation: AD − BC − n/2 when AD − BC > n/2
        phi = (cross - n / 2 if cross > 0 else cross) / math.sqrt(margins)
    est = p1 - p2
    d1, e1, d2, e2 = p1 - l1, u1 - p1, p2 - l2, u2 - p2
    low = est - math.sqrt(max(d1**2 - 2 * phi * d1 * e2 + e2**2, 0.0))
    high = est + math.sqrt(max(e1**2 - 2 * phi * e1 * d2 + d2**2, 0.0))
    return low, high


def paired_difference_ci(both_correct, lost, gained, both_wrong, *, confidence_level=0.95, method="tango"):
    r"""Confidence interval for accuracy(C) − accuracy(B) from a paired 2×2 table.

    The estimate is ``(gained - lost) / n``; the interval is two-sided, clipped to [−1, 1] and
    defined for any table, including tables with zero cells (``n = 0`` gives (−1, 1)).

    Parameters
    ----------
    both_correct, lost, gained, both_wrong : int
        The paired counts (see :mod:`qualgate` for the conventions).
    confidence_level : float, optional
        In (0, 1); default 0.95.
    method : str, optional
        ``'tango'`` (default)
            Tango's (1998) asymptotic score interval: the Δ0 at which the restricted-ML score
            statistic :math:`|Z(Δ_0)| \le z`. Recommended by Fagerland et al. (2014); it is the
            interval that matches :func:`noninferiority` (its upper limit for the loss at level
            1 − 2α is that test's ``upper_bound``).
        ``'newcombe'``
            Newcombe's (1998) hybrid score interval, his method 10: Wilson intervals for the two
            marginal accuracies combined by square-and-add with the correlation
            :math:`\hat\phi` (adjusted: AD − BC − n/2 when AD − BC > n/2, 0 when
            0 <= AD − BC <= n/2 or a margin is 0).
        ``'wald'``
            Estimate ± z·SE, SE = sqrt(gained + lost − (gained − lost)²/n)/n. Poor coverage
            with few discordant pairs; for comparison only.
        ``'wald-cc'``
            Wald widened by 1/n on each side (continuity correction of Fleiss, Levin & Paik
            2003, §13.1).
        ``'agresti-min'``
            Wald on the table with 1/2 added to every cell (Agresti & Min 2005).
        ``'bonett-price'``
            Wald with the Laplace-adjusted discordant proportions (gained + 1)/(n + 2) and
            (lost + 1)/(n + 2) (Bonett & Price 2012).

    Returns
    -------
    ConfidenceInterval
        Named tuple ``(low, high)``.

    References
    ----------
    .. [1] Tango T. Equivalence test and confidence interval for the difference in proportions
       for the paired-sample design. Stat Med 1998;17:891-908.
    .. [2] Newcombe RG. Improved confidence intervals for the difference between binomial
       proportions based on paired data. Stat Med 1998;17:2635-2650.
    .. [3] Agresti A, Min Y. Simple improved confidence intervals for comparing matched
       proportions. Stat Med 2005;24:729-740.
    .. [4] Bonett DG, Price RM. Adjusted Wald confidence interval for a difference of binomial
       proportions based on paired data. J Educ Behav Stat 2012;37:479-488.
    .. [5] Fagerland MW, Lydersen S, Laake P. Recommended tests and confidence intervals for
       paired binomial proportions. Stat Med 2014;33:2850-2875.

    Examples
    --------
    >>> low, high = paired_difference_ci(59, 16, 6, 80)  # Cavo et al. 2012, via Fagerland 2014
    >>> round(low, 4), round(high, 4)
    (-0.124, -0.0054)
    """
    a, lost, gained, d = _counts(both_correct, lost, gained, both_wrong)
    confidence_level = checks.fraction("confidence_level", confidence_level)
    checks.choice("method", method, _METHODS)
    n = a + lost + gained + d
    if n == 0:
        return ConfidenceInterval(-1.0, 1.0)
    z = float(-special.ndtri((1 - confidence_level) / 2))
    if method == "tango":
        low, high = _tango(lost, gained, n, z)
    elif method == "newcombe":
        low, high = _newcombe(a, lost, gained, d, n, z)
    else:
        if method in ("wald", "wald-cc"):
            centre = (gained - lost) / n
            se = math.sqrt(max(gained + lost - (gained - lost) ** 2 / n, 0.0)) / n
            half = z * se + (1 / n if method == "wald-cc" else 0.0)
        else:
            add = 0.5 if method == "agresti-min" else 1.0  # per discordant cell
            g, l, m = (gained + add) / (n + 2), (lost + add) / (n + 2), n + 2
            centre = g - l
            half = z * math.sqrt(max(g + l - centre**2, 0.0) / m)
        low, high = centre - half, centre + half
    return ConfidenceInterval(max(-1.0, low), min(1.0, high))
