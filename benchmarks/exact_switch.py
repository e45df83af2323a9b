"""Size of the one-seed test above the exact test's switch point, by enumeration (issue 34 item 7).

From ``EXACT_MAX_PAIRS`` + 1 pairs on, ``noninferiority(method='exact')`` runs the score test
with a continuity correction ("score-cc", :func:`qualgate.stats._noninferiority.corrected_z`)
instead of the exact unconditional test, whose cost grows with n. This script proves its size
cell by cell: for each (n, loss δ0 at H0's boundary, alpha) the test rejects on
{B <= b*(S)} (b*(s): the largest number lost, out of s discordant pairs, that it rejects), so
its size at discordance ψ is Σ_s Bin(s; n, ψ)·F_Bin(b*(s); s, π), with no Monte Carlo error.
The supremum over ψ in [|δ0|, 1] is taken by the library's certified search
(:func:`_sup_tail` with ``known_at=alpha``: "proven" means the supremum is below alpha,
whatever the grid). δ0 = 0 is the one-seed loss test (H0: no loss). The plain score test
(no correction) is shown beside it.

Run: ``python benchmarks/exact_switch.py [--n 2001,2500,5000,10007] [--alpha ...] [--loss ...]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special

from qualgate.stats._noninferiority import (
    CONTINUITY,
    EXACT_MAX_PAIRS,
    SWITCH_MAX_LOSS,
    _sup_tail,
    corrected_z,
)
from qualgate.stats._score import restricted_p21


def z_cc(b, c, n, delta, cc):
    """Vectorised corrected statistic (checked against the library's scalar one below)."""
    q = restricted_p21(b / n, c / n, delta)
    var = n * (2 * q + delta * (1 - delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, (b - c - n * delta + cc) / np.sqrt(var), np.inf)


def thresholds(n, delta, alpha, cc):
    """b*(s) = the largest b with z_cc(b, s − b) < Φ⁻¹(alpha) (−1 if none): bisection over b."""
    z = float(special.ndtri(alpha))
    s = np.arange(n + 1)
    lo, hi = np.full(n + 1, -1), s.copy()
    while (lo < hi).any():
        open_ = lo < hi
        mid = (lo + hi + 1) // 2
        ok = z_cc(mid.astype(float), (s - mid).astype(float), float(n), delta, cc) < z
        lo = np.where(open_ & ok, mid, lo)
        hi = np.where(open_ & ~ok, mid - 1, hi)
    return lo


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default=f"{EXACT_MAX_PAIRS + 1},2500,5000,10007")
    ap.add_argument("--loss", default="0,0.0005,0.005,0.01,0.02,0.05,0.1,0.25,0.3,0.5,0.9,0.99")
    ap.add_argument("--alpha", default="0.05,0.025,0.0125,0.00625,0.003125")
    a = ap.parse_args(argv)
    ns = [int(x) for x in a.n.split(",")]
    losses = [float(x) for x in a.loss.split(",")]
    alphas = [float(x) for x in a.alpha.split(",")]
    # the vectorised statistic is the library's
    for b, c, d in ((30, 3, 0.01), (0, 0, 0.02), (700, 650, 0.3), (5, 9, 0.0)):
        cc = CONTINUITY * (1 if abs(d) <= SWITCH_MAX_LOSS else 2)
        assert abs(float(z_cc(np.float64(b), np.float64(c), 3000.0, d, cc)) - corrected_z(b, c, 3000, d)) < 1e-12
    print(
        f"size of score-cc (continuity {CONTINUITY} counts, {2 * CONTINUITY} above a loss of {SWITCH_MAX_LOSS}) "
        f"above the switch (n > {EXACT_MAX_PAIRS}); sup over psi in [|loss|, 1]; size/alpha"
    )
    print(f"{'n':>7} {'loss':>7} {'alpha':>9} | {'score-cc':>9} {'proven':>7} | {'plain score':>11}")
    t0 = time.process_time()
    worst, unproven = 0.0, 0
    for n in ns:
        for d in losses:
            cc = CONTINUITY * (1 if abs(d) <= SWITCH_MAX_LOSS else 2)
            for alpha in alphas:
                size = _sup_tail(n, d, thresholds(n, d, alpha, cc))
                proven = _sup_tail(n, d, thresholds(n, d, alpha, cc), known_at=alpha) < alpha
                plain = _sup_tail(n, d, thresholds(n, d, alpha, 0.0))
                worst = max(worst, size / alpha)
                unproven += not proven
                print(
                    f"{n:>7} {d:>7g} {alpha:>9g} | {size / alpha:>9.4f} {'yes' if proven else 'NO':>7} | "
                    f"{plain / alpha:>11.4f}",
                    flush=True,
                )
    print(
        f"largest size/alpha {worst:.4f}; cells not proven <= alpha: {unproven} ({time.process_time() - t0:.0f} CPU-s)"
    )
    return 0 if unproven == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
