"""Multiplicity adjustment: Holm's step-down procedure."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import checks

__all__ = ["holm"]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values.

    Rejecting hypothesis ``i`` when its adjusted p-value is below ``alpha`` keeps the
    family-wise error rate at most ``alpha`` under any dependence between the tests. With the
    p-values sorted, :math:`p_{(1)} \\le \\dots \\le p_{(m)}`, the adjusted value of
    :math:`p_{(i)}` is :math:`\\min(1, \\max_{j \\le i} (m - j + 1) p_{(j)})` (Wright 1992); ties
    keep their input order. This is R's ``p.adjust(p, method = "holm")``.

    Parameters
    ----------
    pvalues : sequence of float
        The p-values, each in [0, 1].

    Returns
    -------
    list of float
        Adjusted p-values, in the order of ``pvalues`` (rounded to 15 decimals, so that
        ``3 * 0.01`` prints as 0.03).

    References
    ----------
    .. [1] Holm S. A simple sequentially rejective multiple test procedure. Scand J Stat
       1979;6:65-70.
    .. [2] Wright SP. Adjusted P-values for simultaneous inference. Biometrics
       1992;48:1005-1013.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(
        [checks.real("pvalues", x, low=0.0, high=1.0, low_open=False, high_open=False) for x in pvalues], dtype=float
    )
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(round(x, 15)) for x in out]
