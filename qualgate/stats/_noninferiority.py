"""Non-inferiority of the candidate against a margin on the paired loss."""

from __future__ import annotations

import dataclasses

from scipy import special

from . import _checks
from ._paired_ci import _counts
from ._score import score_z

__all__ = ["NoninferiorityResult", "noninferiority"]

_METHODS = ("score",)


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


def noninferiority(both_correct, lost, gained, both_wrong, *, margin, alpha=0.05, method="score"):
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

    Only ``method='score'`` is offered: an exact version must maximise the p-value over the
    nuisance discordance (Hsueh et al. 2001), which costs O(n²) per point and is not needed
    at the sample sizes of LLM evaluations, where the score test's size is close to nominal.

    Parameters
    ----------
    both_correct, lost, gained, both_wrong : int
        Paired counts.
    margin : float
        Largest tolerable loss, in (0, 1) (e.g. 0.01 for one accuracy point).
    alpha : float, optional
        One-sided level, in (0, 0.5); default 0.05.
    method : {'score'}, optional

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

    Examples
    --------
    >>> r = noninferiority(900, 12, 10, 78, margin=0.02)
    >>> r.noninferior, round(r.upper_bound, 4)
    (True, 0.0103)
    """
    from scipy.optimize import brentq  # here, not at import: keeps `qualgate power` start-up fast

    a, lost, gained, d = _counts(both_correct, lost, gained, both_wrong)
    margin = _checks.real("margin", margin, low=0.0, high=1.0)
    alpha = _checks.real("alpha", alpha, low=0.0, high=0.5)
    _checks.choice("method", method, _METHODS)
    n = a + lost + gained + d
    if n == 0:
        return NoninferiorityResult(0.0, 1.0, 1.0, False, float("nan"), 0, margin, alpha, method)
    z_alpha = float(-special.ndtri(alpha))
    statistic = float(score_z(lost, gained, n, margin))
    pvalue = float(special.ndtr(statistic))
    estimate = (lost - gained) / n
    edge = 1 - 1e-12
    if estimate >= 1 or score_z(lost, gained, n, edge) >= -z_alpha:
        upper = 1.0
    else:
        upper = brentq(
            lambda t: score_z(lost, gained, n, t) + z_alpha, estimate, edge, xtol=1e-14
        )
    return NoninferiorityResult(
        statistic, pvalue, float(upper), pvalue < alpha, estimate, n, margin, alpha, method
    )
