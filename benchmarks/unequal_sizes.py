"""Size of the clustered non-inferiority test with questions of unequal size (issue 47).

The test weights each question's loss ``d_k/n_k`` equally when the sizes differ
(:mod:`qualgate.stats._clustered`, "Questions of unequal size"); its null is a mean
per-question loss at the margin. Three parts, all through the gate's statistic
(:func:`qualgate.stats._cluster_variance.robust_z` on :func:`question_arrays`, the arrays
``clustered_noninferiority`` builds; cross-checked against the public API on sample tables):

1. Exact size by enumeration in the issue's seven cells (``K1`` questions of one pair and
   ``KL`` of ``L`` pairs), each question losing (or gaining) all its pairs, with the loss
   carried by the large questions only, by the one-pair questions only, or by every question,
   with and without background gains; the size is the largest over these models. The
   "issue's model" column is the probability of a PASS in the issue's model (large questions
   losing all pairs with the probability that puts the *pair-weighted* loss at the margin),
   before (the former pair-weighted test, reproducing the issue's 0.378, 0.786, ...) and now
   (not a size: the question-weighted loss in that model is below the margin).
2. Monte Carlo size with sizes uniform on 1-10 and each question's loss proportional to its
   size (mean loss over questions at the margin): all-or-nothing questions and independent
   pairs, with and without background discordance.
3. Power at no loss: equal-size designs (the same statistic before and after: the price of
   validity is nil there) and sizes uniform on 1-10 (before: the pair-weighted test).

Usage: ``python benchmarks/unequal_sizes.py [--reps 20000] [--quick]`` (a few minutes on one core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special, stats

from qualgate.stats import ClusteredTable, clustered_noninferiority
from qualgate.stats._cluster_variance import question_arrays, robust_z

MARGIN = 0.02
ALPHA = 0.05
CELLS = [(160, 40, 20), (190, 10, 100), (180, 20, 10), (360, 40, 10), (300, 100, 5), (900, 100, 10), (1600, 400, 20)]


def trinomial(k, p_lost, p_gained):
    """log-free pmf of (lost, gained) questions among ``k``: grids L, G and probability."""
    lost, gained = np.arange(k + 1)[:, None], np.arange(k + 1)[None, :]
    rest = k - lost - gained
    ok = rest >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (
            special.gammaln(k + 1)
            - special.gammaln(lost + 1)
            - special.gammaln(gained + 1)
            - special.gammaln(np.maximum(rest, 0) + 1)
            + special.xlogy(lost, p_lost)
            + special.xlogy(gained, p_gained)
            + special.xlog1py(np.maximum(rest, 0), -(p_lost + p_gained))
        )
    prob = np.where(ok, np.exp(log_p), 0.0)
    return (lost + 0 * gained).ravel(), (gained + 0 * lost).ravel(), prob.ravel()


def passes_all_or_nothing(n, k, lost_q, gained_q, level, *, pair_sizes=None):
    """PASS for all-or-nothing tables: ``lost_q``/``gained_q`` questions lost/gained.

    Question-weighted (now): the statistics depend on the counts and the mean size only.
    ``pair_sizes`` = the size of the discordant questions: the former pair-weighted arrays.
    """
    crit = stats.norm.isf(level)
    lq, gq = np.asarray(lost_q, float), np.asarray(gained_q, float)
    s = n / k if pair_sizes is None else pair_sizes
    arrays = (n, s * lq, s * gq, float(k), s * s * (lq + gq), s * lq, s * gq, s * (lq + gq))
    return robust_z(arrays, MARGIN, crit) < -crit


def exact_cell(k1, kl, size, level):
    n, k = k1 + kl * size, k1 + kl
    rows = {}
    for where, group in (("large", kl), ("one-pair", k1), ("every", k)):
        p = MARGIN * k / group
        for g in (0.0, p / 2):
            lost, gained, prob = trinomial(group, p + g, g)
            rows[f"{where}{'+gains' if g else ''}"] = float(
                prob[passes_all_or_nothing(n, k, lost, gained, level)].sum()
            )
    # the issue's model: pair-weighted loss at the margin, carried by the large questions
    p_issue = MARGIN * n / (kl * size)
    lost, gained, prob = trinomial(kl, p_issue, 0.0)
    before = float(prob[passes_all_or_nothing(n, k, lost, gained, level, pair_sizes=size)].sum())
    now = float(prob[passes_all_or_nothing(n, k, lost, gained, level)].sum())
    return rows, before, now, kl * p_issue / k


def cross_check():
    """The vectorised arrays against the public API on a few unequal tables."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(20):
        sizes = rng.integers(1, 11, 80)
        lost = rng.binomial(sizes, 0.1)
        gained = rng.binomial(sizes - lost, 0.05)
        cluster = np.repeat(np.arange(80), sizes)
        base, cand = [], []
        for n_k, b, c in zip(sizes, lost, gained):
            base += [True] * b + [False] * c + [True] * (n_k - b - c)
            cand += [False] * b + [True] * c + [True] * (n_k - b - c)
        r = clustered_noninferiority(ClusteredTable.from_outcomes(cluster, base, cand), margin=MARGIN)
        z = robust_z(question_arrays(sizes, lost, gained), MARGIN, stats.norm.isf(ALPHA))
        worst = max(worst, abs(r.statistic - z))
    return worst


def monte_carlo(k, level, model, reps, rng, *, loss=MARGIN, background=0.0, pair_weighted=False, chunk=2000):
    """P(PASS) with sizes uniform on 1-10, each question's loss ∝ its size (mean ``loss``).

    ``pair_weighted``: the former test (pair counts), the loss ∝ size in its own unit."""
    crit = stats.norm.isf(level)
    hits = 0
    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        sizes = rng.integers(1, 11, (r, k)).astype(float)
        rate = loss * sizes / sizes.mean(axis=1, keepdims=True)  # mean over questions: the loss
        if pair_weighted:
            rate = loss * sizes * sizes.sum(axis=1, keepdims=True) / (sizes * sizes).sum(axis=1, keepdims=True)
        p_lost, p_gained = rate + background, np.full_like(rate, background)
        if model == "all-or-nothing":
            u = rng.random((r, k))
            lost = np.where(u < p_lost, sizes, 0.0)
            gained = np.where((u >= p_lost) & (u < p_lost + p_gained), sizes, 0.0)
        else:  # independent pairs
            lost = rng.binomial(sizes.astype(np.int64), p_lost).astype(float)
            gained = rng.binomial((sizes - lost).astype(np.int64), p_gained / (1 - p_lost)).astype(float)
        if pair_weighted:
            net = lost - gained
            arrays = (
                sizes.sum(1),
                lost.sum(1),
                gained.sum(1),
                float(k),
                (net * net).sum(1),
                np.maximum(net, 0).sum(1),
                np.maximum(-net, 0).sum(1),
                (net * net / sizes).sum(1),
            )
        else:
            arrays = question_arrays(sizes, lost, gained)
        hits += int(np.sum(robust_z(arrays, MARGIN, crit) < -crit))
    return hits / reps


def ci(p, reps):
    half = 1.96 * np.sqrt(max(p * (1 - p), 1e-12) / reps)
    return max(p - half, 0.0), p + half


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="fewer cells and replicates")
    args = ap.parse_args()
    t0 = time.process_time()
    print(
        f"margin {MARGIN}, all numbers P(PASS); statistic cross-check against the API: max |dz| = {cross_check():.1e}"
    )
    print("\n1. Exact size by enumeration (all-or-nothing questions; the size is the largest model)")
    head = f"{'cell':>18} {'level':>8} {'size':>8}  {'model of the size':<16} {'issue model before':>19} {'now':>7} {'q-loss':>7}"
    print(head)
    for k1, kl, size in CELLS[:2] if args.quick else CELLS:
        for level in (ALPHA, ALPHA / 4):
            rows, before, now, qloss = exact_cell(k1, kl, size, level)
            worst = max(rows, key=rows.get)
            flag = "" if rows[worst] <= level else "  > LEVEL"
            cell = f"{k1}x1 + {kl}x{size}"
            print(
                f"{cell:>18} {level:>8.4f} {rows[worst]:>8.4f}  {worst:<16} {before:>19.3f} {now:>7.3f} {qloss:>7.4f}{flag}"
            )
    print("   (q-loss: the mean per-question loss in the issue's model, below the 0.02 margin, so 'now' is not a size)")

    reps = args.reps // 4 if args.quick else args.reps
    rng = np.random.default_rng(47)
    print(f"\n2. Monte Carlo size, sizes uniform on 1-10, loss proportional to size ({reps:,} gates a cell)")
    print(f"{'questions':>9} {'level':>8} {'model':<16} {'background':>10} {'size':>8} {'95% CI':>18} {'bound':>8}")
    for k in (200,) if args.quick else (200, 1000):
        for level in (ALPHA, ALPHA / 4):
            for model in ("all-or-nothing", "pairs"):
                for background in (0.0, 0.02):
                    p = monte_carlo(k, level, model, reps, rng, background=background)
                    lo, hi = ci(p, reps)
                    se = np.sqrt(level * (1 - level) / reps)
                    flag = "" if hi <= level + se else "  > LEVEL + 1 SE"
                    print(
                        f"{k:>9} {level:>8.4f} {model:<16} {background:>10.2f} {p:>8.4f} [{lo:.4f}, {hi:.4f}] {level + se:>8.4f}{flag}"
                    )
    print("   (bound: alpha + one Monte Carlo standard error; the CI's upper end must not exceed it)")
    print("   before, for reference: the pair-weighted test with the pair-weighted loss at the margin")
    for k in (200,):
        p = monte_carlo(k, ALPHA, "all-or-nothing", reps, rng, pair_weighted=True)
        lo, hi = ci(p, reps)
        print(f"{k:>9} {ALPHA:>8.4f} {'all-or-nothing':<16} {0.0:>10.2f} {p:>8.4f} [{lo:.4f}, {hi:.4f}]")

    print(f"\n3. Power at no loss ({reps:,} gates a cell; pairs discordant independently, half lost, half gained)")
    print(f"{'design':<28} {'discordant':>10} {'before':>8} {'now':>8}")
    for k, seeds in ((200, 3), (1000, 3), (300, 10)):
        for disc in (0.04, 0.10):
            p_now = equal_power(k, seeds, disc, reps, np.random.default_rng(k * seeds), question_weighted=True)
            p_before = equal_power(k, seeds, disc, reps, np.random.default_rng(k * seeds), question_weighted=False)
            print(f"{f'{k} questions x {seeds} seeds':<28} {disc:>10.2f} {p_before:>8.4f} {p_now:>8.4f}")
    for k in (200, 1000):
        for disc in (0.04, 0.10):
            now = monte_carlo(k, ALPHA, "pairs", reps, np.random.default_rng(k), loss=0.0, background=disc / 2)
            before = monte_carlo(
                k, ALPHA, "pairs", reps, np.random.default_rng(k), loss=0.0, background=disc / 2, pair_weighted=True
            )
            print(f"{f'{k} questions, sizes 1-10':<28} {disc:>10.2f} {before:>8.4f} {now:>8.4f}")
    print(f"\nCPU time {time.process_time() - t0:.0f} s")


def equal_power(k, seeds, disc, reps, rng, *, question_weighted, chunk=2000):
    """P(PASS) at no loss with every question of ``seeds`` pairs, through the new arrays
    (``question_weighted``) or the former pair counts."""
    hits = sum(_equal_hits(k, seeds, disc, min(chunk, reps - s), rng, question_weighted) for s in range(0, reps, chunk))
    return hits / reps


def _equal_hits(k, seeds, disc, reps, rng, question_weighted):
    crit = stats.norm.isf(ALPHA)
    sizes = np.full((reps, k), float(seeds))
    lost = rng.binomial(seeds, disc / 2, (reps, k)).astype(float)
    gained = rng.binomial((seeds - lost).astype(np.int64), (disc / 2) / (1 - disc / 2)).astype(float)
    if question_weighted:
        arrays = question_arrays(sizes, lost, gained)
    else:
        net = lost - gained
        arrays = (
            sizes.sum(1),
            lost.sum(1),
            gained.sum(1),
            float(k),
            (net * net).sum(1),
            np.maximum(net, 0).sum(1),
            np.maximum(-net, 0).sum(1),
            (net * net / sizes).sum(1),
        )
    return int(np.sum(robust_z(arrays, MARGIN, crit) < -crit))


if __name__ == "__main__":
    main()
