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

The discordance covers all of [margin, 1] by default (issue 36: the grid stopped at 0.2 while
the worst ψ is 0.93-0.99 in most cells).

Run: ``python benchmarks/exact_size.py [--n-max 2000] [--margin 0.02] [--step 1]``
(every n up to ``--dense``, then every ``--step``-th).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats

from qualgate.stats._noninferiority import _sup_tail, _thresholds, exact_critical_value


def size(n, psi, margin, z):
    """max over ``psi`` (an array) of P(Z <= z) with n pairs, discordance psi and loss = margin,
    and the psi where it is reached."""
    s = np.arange(n + 1)
    b_star = _thresholds(n, margin, z)
    best = (-1.0, 0.0)
    for chunk in np.array_split(np.atleast_1d(psi), max(1, len(np.atleast_1d(psi)) // 64)):
        pi = (chunk + margin) / (2 * chunk)
        inside = np.where(b_star < 0, 0.0, stats.binom.cdf(np.maximum(b_star, 0), s, pi[:, None]))
        values = np.sum(stats.binom.pmf(s, n, chunk[:, None]) * inside, axis=1)
        i = int(np.argmax(values))
        best = max(best, (float(values[i]), float(chunk[i])))
    return best


def full_grid(n, margin):
    """[margin, 1] in the parametrisation the library's search uses (psi = m + (1 − m)sin²t),
    8·sqrt(n) steps per radian (an eighth of the scale on which the tail changes), and the
    end points."""
    t = np.linspace(0, np.pi / 2, int(np.ceil(4 * np.pi * np.sqrt(n))) + 2)
    return np.unique(np.concatenate([margin + (1 - margin) * np.sin(t) ** 2, [margin, 1.0]]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-min", type=int, default=10)
    ap.add_argument("--n-max", type=int, default=2000)
    ap.add_argument("--dense", type=int, default=2000, help="every n up to this one, then every --step-th")
    ap.add_argument("--step", type=int, default=10)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument(
        "--psi",
        default="full",
        help="'full': all of [margin, 1] (a grid in the library's parametrisation, and the "
        "library's proven comparison with alpha); or a comma list of discordances",
    )
    a = ap.parse_args(argv)
    full = a.psi == "full"
    grid = [] if full else [p for p in (float(x) for x in a.psi.split(",")) if p >= a.margin]
    skipped = [] if full else [p for p in (float(x) for x in a.psi.split(",")) if p < a.margin]
    ns = [n for n in range(a.n_min, a.n_max + 1) if n <= a.dense or n % a.step == 0]
    z_score = -stats.norm.isf(a.alpha)
    print(
        f"exact size of the one-seed non-inferiority tests: margin {a.margin}, alpha {a.alpha}, "
        f"n = {ns[0]}..{ns[-1]} ({len(ns)} values: every n up to {min(a.dense, a.n_max)}"
        + (f", then every {a.step}th" if a.dense < a.n_max else "")
        + ")"
    )
    if full:
        print(f"discordance: all of [{a.margin:g}, 1] (issue 36: the worst psi is often 0.93-0.99)")
    else:
        print(f"discordance grid {grid}" + (f" ({skipped} < margin: impossible at loss = margin)" if skipped else ""))
    t0 = time.perf_counter()
    worst_exact = worst_score = (-1.0, 0, 0.0)
    blocks = {}
    z = None
    unproven = 0
    for n in ns:
        z = exact_critical_value(n, a.margin, a.alpha, near=z)
        cells = [full_grid(n, a.margin)] if full else [np.array([p]) for p in grid]
        if full and math.isfinite(z):  # the library's proof that the supremum over [margin, 1] is below alpha
            unproven += _sup_tail(n, a.margin, _thresholds(n, a.margin, z), known_at=a.alpha) >= a.alpha
        for psis in cells:
            e, pe = size(n, psis, a.margin, z) if math.isfinite(z) else (0.0, float(psis[0]))
            sc, ps = size(n, psis, a.margin, z_score)
            key = min(b for b in (50, 100, 200, 500, 1000, 1500, 2000, 10**9) if n <= b)
            block = blocks.setdefault(
                key, {"exact": (-1.0, 0, 0.0), "score": (-1.0, 0, 0.0), "sum_e": 0.0, "sum_s": 0.0, "count": 0}
            )
            block["exact"] = max(block["exact"], (e, n, pe))
            block["score"] = max(block["score"], (sc, n, ps))
            block["sum_e"] += e
            block["sum_s"] += sc
            block["count"] += 1
            worst_exact = max(worst_exact, (e, n, pe))
            worst_score = max(worst_score, (sc, n, ps))
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
    ok = worst_exact[0] <= a.alpha and not unproven
    if full:
        print(f"n where the library could not prove the supremum over [margin, 1] below alpha: {unproven}")
    print(
        f"largest exact size {worst_exact[0]:.5f} at n = {worst_exact[1]}, psi = {worst_exact[2]:g} "
        f"({'<=' if ok else '>'} alpha {a.alpha}); largest score size {worst_score[0]:.5f} at n = "
        f"{worst_score[1]}, psi = {worst_score[2]:g}  ({time.perf_counter() - t0:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
