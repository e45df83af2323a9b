"""Exact size of the one-seed non-inferiority tests, by enumeration (no Monte Carlo error).

For every n in the range and every discordance ψ of the grid, the pair is trinomial at H0's
boundary (P(lost) = (ψ + m)/2, P(gained) = (ψ − m)/2, loss = m) and the size is the total
probability of the outcomes (lost, gained) that the test rejects:

- the exact unconditional test (``noninferiority(method='exact')``): it rejects exactly when
  the score statistic is at most ``exact_critical_value(n, m, alpha)`` (its p-value is
  non-decreasing in the statistic), so the rejection region is {B <= b*(S)} for each number
  S of discordant pairs and the size is Σ_s Bin(s; n, ψ)·F_Bin(b*(s); s, π);
- the asymptotic score test (rejects when Z < −z_{1−alpha}), for comparison (issue 14: its
  size reaches 0.068 at n = 133 and 2 % discordance).

The binomial terms come from ``scipy.stats.binom`` (not the library's own sum), and b*(s) from
the library's vectorised search, which ``tests/stats/test_exact.py`` checks against brute force.

The critical value is the largest attainable Z whose p-value (the supremum over ψ, computed
on a grid and refined) is below alpha. A grid can only under-estimate a supremum, so a
critical value found with a coarser grid is at least the one of the exact supremum, and the
sizes it gives are upper bounds for the exact test's: the runs in
``benchmarks/results/exact_size.txt`` made before the grid was refined (issue 14's last
check) bound the size of the test as it is now.

Run: ``python benchmarks/exact_size.py [--n-max 2000] [--margin 0.02] [--step 1]``
(every n up to ``--dense``, then every ``--step``-th).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

from qualgate.stats._noninferiority import _thresholds, exact_critical_value


def size(n, psi, margin, z):
    """P(Z <= z) with n pairs, discordance psi and loss = margin."""
    s = np.arange(n + 1)
    b_star = _thresholds(n, margin, z)
    pi = (psi + margin) / (2 * psi)
    inside = np.where(b_star < 0, 0.0, stats.binom.cdf(np.maximum(b_star, 0), s, pi))
    return float(np.dot(stats.binom.pmf(s, n, psi), inside))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-min", type=int, default=10)
    ap.add_argument("--n-max", type=int, default=2000)
    ap.add_argument("--dense", type=int, default=2000, help="every n up to this one, then every --step-th")
    ap.add_argument("--step", type=int, default=10)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--psi", default="0.01,0.02,0.03,0.04,0.05,0.06,0.08,0.10,0.12,0.15,0.20")
    a = ap.parse_args(argv)
    grid = [p for p in (float(x) for x in a.psi.split(",")) if p >= a.margin]
    skipped = [p for p in (float(x) for x in a.psi.split(",")) if p < a.margin]
    ns = [n for n in range(a.n_min, a.n_max + 1) if n <= a.dense or n % a.step == 0]
    z_score = -stats.norm.isf(a.alpha)
    print(
        f"exact size of the one-seed non-inferiority tests: margin {a.margin}, alpha {a.alpha}, "
        f"n = {ns[0]}..{ns[-1]} ({len(ns)} values: every n up to {min(a.dense, a.n_max)}"
        + (f", then every {a.step}th" if a.dense < a.n_max else "")
        + ")"
    )
    print(f"discordance grid {grid}" + (f" ({skipped} < margin: impossible at loss = margin)" if skipped else ""))
    t0 = time.perf_counter()
    worst_exact = worst_score = (-1.0, 0, 0.0)
    blocks = {}
    z = None
    for n in ns:
        z = exact_critical_value(n, a.margin, a.alpha, near=z)
        for psi in grid:
            e = size(n, psi, a.margin, z) if math.isfinite(z) else 0.0
            sc = size(n, psi, a.margin, z_score)
            key = min(b for b in (50, 100, 200, 500, 1000, 1500, 2000, 10**9) if n <= b)
            block = blocks.setdefault(
                key, {"exact": (-1.0, 0, 0.0), "score": (-1.0, 0, 0.0), "sum_e": 0.0, "sum_s": 0.0, "count": 0}
            )
            block["exact"] = max(block["exact"], (e, n, psi))
            block["score"] = max(block["score"], (sc, n, psi))
            block["sum_e"] += e
            block["sum_s"] += sc
            block["count"] += 1
            worst_exact = max(worst_exact, (e, n, psi))
            worst_score = max(worst_score, (sc, n, psi))
    print(
        f"{'n up to':>8} | {'exact: max size':>16} {'at (n, psi)':>14} {'mean':>7} | {'score: max size':>16} "
        f"{'at (n, psi)':>14} {'mean':>7}"
    )
    for key in sorted(blocks):
        b = blocks[key]
        (e, en, ep), (s, sn, sp) = b["exact"], b["score"]
        print(
            f"{key:>8} | {e:>16.4f} {f'({en}, {ep:g})':>14} {b['sum_e'] / b['count']:>7.4f} | {s:>16.4f} "
            f"{f'({sn}, {sp:g})':>14} {b['sum_s'] / b['count']:>7.4f}"
        )
    ok = worst_exact[0] <= a.alpha
    print(
        f"largest exact size {worst_exact[0]:.5f} at n = {worst_exact[1]}, psi = {worst_exact[2]:g} "
        f"({'<=' if ok else '>'} alpha {a.alpha}); largest score size {worst_score[0]:.5f} at n = "
        f"{worst_score[1]}, psi = {worst_score[2]:g}  ({time.perf_counter() - t0:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
