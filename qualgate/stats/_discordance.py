"""Confidence interval for the discordant fraction of pairs (Clopper-Pearson)."""

from __future__ import annotations

from . import checks
from ._paired_ci import ConfidenceInterval

__all__ = ["discordance_interval"]


def discordance_interval(discordant, n, *, design_effect=1.0, confidence_level=0.95) -> ConfidenceInterval:
    """Clopper-Pearson interval for the fraction of discordant pairs (``lost + gained``).

    With ``design_effect`` above 1 (several pairs per question), the exact interval is taken on
    the effective sample: ``discordant / design_effect`` discordant out of ``n / design_effect``
    (Korn & Graubard 1998); with 1 it is the exact binomial interval, R's
    ``binom.test(discordant, n)$conf.int``.

    Parameters
    ----------
    discordant : int
        Discordant pairs, at most ``n``.
    n : int
        Pairs, at least 1.
    design_effect : float, optional
        Variance inflation of the discordant fraction (> 0); default 1 (independent pairs).
    confidence_level : float, optional
        In (0, 1); default 0.95. Each tail holds ``(1 - confidence_level) / 2``.

    Returns
    -------
    ConfidenceInterval
        Named tuple ``(low, high)``: 0 is the low end when no pair is discordant, 1 the high
        end when every (effective) pair is.

    References
    ----------
    .. [1] Clopper CJ, Pearson ES. The use of confidence or fiducial limits illustrated in the
       case of the binomial. Biometrika 1934;26:404-413.
    .. [2] Korn EL, Graubard BI. Confidence intervals for proportions with small expected
       number of positive counts estimated from survey data. Survey Methodology
       1998;24:193-201.

    Examples
    --------
    >>> low, high = discordance_interval(7, 20)  # R: binom.test(7, 20)$conf.int
    >>> round(low, 7), round(high, 7)
    (0.1539092, 0.5921885)
    """
    beta_ppf = _beta_ppf()

    discordant = checks.count("discordant", discordant)
    n = checks.positive_count("n", n)
    if discordant > n:
        raise ValueError(f"discordant must be at most n = {n}, got {discordant!r}")
    deff = checks.real("design_effect", design_effect, low=0.0)
    alpha = 1 - checks.fraction("confidence_level", confidence_level)
    n_eff = n / deff
    x = discordant / deff
    low = 0.0 if x <= 0 else float(beta_ppf(alpha / 2, x, n_eff - x + 1))
    high = 1.0 if x >= n_eff else float(beta_ppf(1 - alpha / 2, x + 1, n_eff - x))
    return ConfidenceInterval(low, high)


def _beta_ppf():
    """The beta quantile ``scipy.stats.beta.ppf(q, a, b)``: for 0 < q < 1 and a, b > 0 it is
    the ufunc ``scipy.special._ufuncs._beta_ppf`` (Boost's ibeta_inv) times scale 1 plus loc 0,
    so the same numbers; that ufunc is taken when scipy has it, as importing scipy.stats costs
    0.5-0.9 CPU-s (``qualgate power --discordance-from``, issue 47; equality:
    ``tests/stats/test_discordance_interval.py``)."""
    try:
        from scipy.special._ufuncs import _beta_ppf as ufunc
    except ImportError:  # pragma: no cover - another scipy
        from scipy import stats

        return stats.beta.ppf
    return ufunc
