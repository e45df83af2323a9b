"""McNemar's test for paired binary outcomes: exact, mid-p and asymptotic versions."""

from __future__ import annotations

import dataclasses
import math

from scipy import special

from . import checks

__all__ = ["McNemarResult", "mcnemar"]

_METHODS = ("exact", "midp", "asymptotic", "asymptotic-cc")


_CI_METHODS = ("exact", "wilson", "wilsoncc")


@dataclasses.dataclass(frozen=True)
class McNemarResult:
    """Result of :func:`mcnemar`.

    Attributes
    ----------
    lost, gained : int
        The discordant counts tested.
    statistic : float
        The estimate of π = P(gained | discordant), gained/(lost + gained), whatever the
        method (as ``scipy.stats.binomtest``'s statistic is k/n: the exact test *is* a
        binomial test of π = 1/2); below 1/2 points to a worse candidate. nan when there is
        no discordant pair.
    pvalue : float
    zstatistic : float or None
        ``asymptotic`` and ``asymptotic-cc``: the signed normal deviate the p-value comes
        from, z = (gained − lost)/sqrt(lost + gained); z² is McNemar's chi-square. For
        ``-cc`` the difference is moved 1 toward H0 (two-sided: ``|gained − lost| − 1``, not
        below 0; 'less': ``gained − lost + 1``; 'greater': ``gained − lost − 1``). 0 when
        there is no discordant pair. None for ``exact`` and ``midp``, whose p-values come
        from the count ``gained`` itself (Bin(lost + gained, 1/2) under H0).
    method : {'exact', 'midp', 'asymptotic', 'asymptotic-cc'}
    alternative : {'two-sided', 'greater', 'less'}
    """

    lost: int
    gained: int
    statistic: float
    pvalue: float
    zstatistic: float | None
    method: str
    alternative: str

    def confidence_interval(self, confidence_level=0.95, method="exact"):
        """Confidence interval for π = P(gained | discordant), the quantity :attr:`statistic` estimates.

        π = 1/2 is no difference in accuracy; π < 1/2 a worse candidate. As
        ``scipy.stats.binomtest(gained, lost + gained, alternative=...).proportion_ci``: the
        interval is one-sided for a one-sided ``alternative`` ('less': ``(0, high)``,
        'greater': ``(low, 1)``). With no discordant pair the data say nothing about π, and
        the interval is ``(0, 1)``.

        Parameters
        ----------
        confidence_level : float, optional
            In (0, 1).
        method : {'exact', 'wilson', 'wilsoncc'}, optional
            ``exact``: Clopper–Pearson (never below the nominal coverage); ``wilson``: the
            Wilson score interval; ``wilsoncc``: Wilson's with a continuity correction.

        Returns
        -------
        ConfidenceInterval
            ``(low, high)``.

        Examples
        --------
        >>> ci = mcnemar(13, 7).confidence_interval()  # R: binom.test(7, 20)$conf.int
        >>> print(f"{ci.low:.7f} {ci.high:.7f}")
        0.1539092 0.5921885
        """
        from scipy.stats import binomtest

        from ._paired_ci import ConfidenceInterval

        confidence_level = checks.fraction("confidence_level", confidence_level)
        checks.choice("method", method, _CI_METHODS)
        m = self.lost + self.gained
        if m == 0:
            return ConfidenceInterval(0.0, 1.0)
        ci = binomtest(self.gained, m, alternative=self.alternative).proportion_ci(confidence_level, method)
        return ConfidenceInterval(float(ci.low), float(ci.high))

    def to_dict(self) -> dict:
        """JSON-ready dict of the fields; ``statistic`` is None (JSON has no nan) when there is
        no discordant pair."""
        out = dataclasses.asdict(self)
        if self.lost + self.gained == 0:
            out["statistic"] = None
        return out


def _binom_half_pmf(k, m):
    """P(X = k) for X ~ Bin(m, 1/2)."""
    log_pmf = special.gammaln(m + 1) - special.gammaln(k + 1) - special.gammaln(m - k + 1)
    return math.exp(log_pmf - m * math.log(2))


def mcnemar(lost, gained, *, alternative="two-sided", method="exact"):
    r"""McNemar's test of H0: P(lost) = P(gained), i.e. accuracy(C) = accuracy(B).

    Only the discordant questions carry information. Conditionally on their number
    m = lost + gained, ``gained`` is Bin(m, π) with π = P(gained | discordant); H0 is π = 1/2.

    - ``alternative='two-sided'``: H1: accuracy(C) ≠ accuracy(B).
    - ``alternative='less'``: H1: accuracy(C) < accuracy(B), the candidate is worse.
    - ``alternative='greater'``: H1: accuracy(C) > accuracy(B).

    Parameters
    ----------
    lost, gained : int
        Questions the candidate lost (B correct, C wrong) and gained (B wrong, C correct).
    alternative : {'two-sided', 'less', 'greater'}, optional
    method : {'exact', 'midp', 'asymptotic', 'asymptotic-cc'}, optional
        ``exact`` (default)
            Conditional binomial test. One-sided 'less': P(X <= gained), X ~ Bin(m, 1/2);
            two-sided: min(1, 2·P(X <= min(lost, gained))). Never exceeds the nominal level.
        ``midp``
            Mid-p version (Fagerland et al. 2013): half the probability of the observed value
            is counted. One-sided 'less': P(X < gained) + P(X = gained)/2. Two-sided:
            2·P(X <= k) − P(X = k) with k = min(lost, gained), and 1 − P(X = k)/2 when
            lost = gained. Close to the nominal level, slightly above it at times.
        ``asymptotic``
            z = (gained − lost)/sqrt(m) against the standard normal (two-sided: McNemar's
            chi-square z² on 1 df).
        ``asymptotic-cc``
            As ``asymptotic`` with Edwards' continuity correction (two-sided: |gained − lost| − 1).

    Returns
    -------
    McNemarResult
        ``statistic`` estimates π (gained/(lost + gained)), whatever the method. No
        discordant pair gives statistic nan and p-value 1 for every method.

    References
    ----------
    .. [1] McNemar Q. Note on the sampling error of the difference between correlated
       proportions or percentages. Psychometrika 1947;12:153-157.
    .. [2] Fagerland MW, Lydersen S, Laake P. The McNemar test for binary matched-pairs data:
       mid-p and asymptotic are better than exact conditional. BMC Med Res Methodol
       2013;13:91.

    Examples
    --------
    >>> r = mcnemar(16, 6)  # Cavo et al. 2012, via Fagerland et al. 2014
    >>> round(r.pvalue, 6)
    0.052479
    >>> round(mcnemar(16, 6, method="midp").pvalue, 6)
    0.03469
    >>> round(r.statistic, 4)  # π estimated: 6 of the 22 discordant questions were gained
    0.2727
    >>> round(mcnemar(16, 6, method="asymptotic").zstatistic, 3)
    -2.132
    """
    lost = checks.count("lost", lost)
    gained = checks.count("gained", gained)
    checks.choice("alternative", alternative, checks.ALTERNATIVES)
    checks.choice("method", method, _METHODS)
    m = lost + gained
    if m == 0:
        z = None if method in ("exact", "midp") else 0.0
        return McNemarResult(lost, gained, math.nan, 1.0, z, method, alternative)
    pi = gained / m

    if method in ("exact", "midp"):
        half = 0.5 if method == "midp" else 0.0
        mass = _binom_half_pmf(gained, m) * half
        # P(X <= gained) and P(X >= gained), X ~ Bin(m, 1/2); mid-p counts half of P(X = gained)
        lower = special.bdtr(gained, m, 0.5) - mass
        upper = (special.bdtrc(gained - 1, m, 0.5) if gained > 0 else 1.0) - mass
        if alternative == "less":
            p = lower
        elif alternative == "greater":
            p = upper
        else:
            k = min(lost, gained)
            if method == "midp" and lost == gained:
                p = 1 - 0.5 * _binom_half_pmf(k, m)
            else:
                p = 2 * (special.bdtr(k, m, 0.5) - half * _binom_half_pmf(k, m))
        return McNemarResult(lost, gained, pi, float(min(1.0, p)), None, method, alternative)

    diff = gained - lost
    if method == "asymptotic-cc":  # move the difference 1 toward H0 (half a count per cell)
        if alternative == "less":
            diff += 1
        elif alternative == "greater":
            diff -= 1
        else:
            diff = math.copysign(max(abs(diff) - 1, 0), diff)
    z = diff / math.sqrt(m)
    if alternative == "less":
        p = special.ndtr(z)
    elif alternative == "greater":
        p = special.ndtr(-z)
    else:
        p = 2 * special.ndtr(-abs(z))
    return McNemarResult(lost, gained, pi, float(min(1.0, p)), float(z), method, alternative)
