"""What an *unpaired* comparison of two accuracies can resolve."""

from __future__ import annotations

import numpy as np
from scipy import special

from . import checks

__all__ = ["unpaired_ci_halfwidth"]


def unpaired_ci_halfwidth(p, n, *, confidence_level=0.95):
    r"""Half-width of the Wald interval for the difference of two independent accuracies.

    Two configurations are each scored once on ``n`` questions with accuracy near ``p`` and
    compared *without* pairing, as published single-run tables are. The half-width is

    .. math:: z_{1-(1-\text{confidence\_level})/2}\,\sqrt{2p(1-p)/n}.

    A difference smaller than this cannot be told from run-to-run noise by such a table.

    Parameters
    ----------
    p : float or array_like
        Accuracy of each configuration, in [0, 1].
    n : int or array_like
        Number of questions per configuration, >= 1.
    confidence_level : float, optional
        Two-sided confidence level, in (0, 1). Default 0.95.

    Returns
    -------
    float or ndarray
        The half-width (a fraction, not percentage points); an array when ``p`` or ``n`` is.

    Examples
    --------
    >>> round(unpaired_ci_halfwidth(0.9, 198), 4)
    0.0591
    """
    checks.fraction("confidence_level", confidence_level)
    p_arr = np.asarray(p, dtype=float)
    n_arr = np.asarray(n)
    if not np.all(np.isfinite(p_arr) & (p_arr >= 0) & (p_arr <= 1)):
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    if n_arr.dtype.kind not in "iu" or np.any(n_arr < 1):
        raise ValueError(f"n must be a positive integer (or an array of them), got {n!r}")
    z = -special.ndtri((1 - confidence_level) / 2)
    out = z * np.sqrt(2 * p_arr * (1 - p_arr) / n_arr)
    return float(out) if out.ndim == 0 else out
