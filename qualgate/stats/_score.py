"""The restricted-maximum-likelihood score statistic for a paired difference (Tango 1998).

Shared by the Tango interval, the non-inferiority test and its sample size. With counts (or
probabilities) ``first`` = P(first only) and ``second`` = P(second only) of the two discordant
cells, the difference Δ = P(first only) − P(second only) is tested at Δ0 by

    Z(Δ0) = (first − second − n·Δ0) / sqrt(n·(2·q̃ + Δ0·(1 − Δ0)))

where q̃ is the maximum-likelihood estimate of P(second only) under the constraint Δ = Δ0
(Nam 1997; Tango 1998, eq. 5; Liu et al. 2002). Z decreases in Δ0.
"""

from __future__ import annotations

import math

import numpy as np


def _q_scalar(p12, p21, delta):
    b = -p12 - p21 + (2 - p12 + p21) * delta
    c = -p21 * delta * (1 - delta)
    root = math.sqrt(max(b * b - 8 * c, 0.0))
    if b <= 0:
        q = (root - b) / 4
    else:
        q = -2 * c / (b + root)
    return max(q, 0.0, -delta)  # guard against rounding below the feasible set


def restricted_p21(p12, p21, delta):
    """Restricted ML estimate of the second discordant probability given Δ = p12 − p21 = ``delta``.

    ``p12`` and ``p21`` are the observed proportions (counts / n) of the two discordant cells;
    the estimate is the positive root of 2q² + Bq + C = 0 with
    B = −p12 − p21 + (2 − p12 + p21)·Δ and C = −p21·Δ·(1 − Δ), computed without cancellation.
    Vectorised over numpy arrays; plain floats take a fast scalar path.
    """
    if all(isinstance(x, (int, float)) for x in (p12, p21, delta)):
        return _q_scalar(float(p12), float(p21), float(delta))
    p12, p21, delta = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (p12, p21, delta)))
    b = -p12 - p21 + (2 - p12 + p21) * delta
    c = -p21 * delta * (1 - delta)
    root = np.sqrt(np.maximum(b * b - 8 * c, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(b <= 0, (root - b) / 4, -2 * c / (b + root))
    q = np.where(np.isfinite(q), q, 0.0)
    out = np.maximum(q, np.maximum(0.0, -delta))
    return out if out.ndim else float(out)


def score_z(first, second, n, delta):
    """Z(Δ0) above, vectorised over any argument; 0 where the numerator is 0."""
    if all(isinstance(x, (int, float)) for x in (first, second, n, delta)):
        num = first - second - n * delta
        if num == 0:
            return 0.0
        q = _q_scalar(first / n, second / n, float(delta))
        var = n * (2 * q + delta * (1 - delta))
        return num / math.sqrt(var) if var > 0 else math.copysign(math.inf, num)
    first, second, n, delta = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (first, second, n, delta)))
    q = restricted_p21(first / n, second / n, delta)
    num = first - second - n * delta
    var = n * (2 * q + delta * (1 - delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(num == 0, 0.0, num / np.sqrt(np.maximum(var, 0.0)))
    return z if z.ndim else float(z)
