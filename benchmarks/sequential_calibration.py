"""Calibrate the sequential gate against the fixed-n non-inferiority gate, by seeded simulation.

For each scenario (true loss 0, margin/2, margin, 2x margin; discordance 4-10 %; one seed per
question, or three seeds with between-seed correlation) it runs 10,000 sequential gates,
monitored after every question, and 10,000 fixed-n gates of the size that gives the target
power against no loss. It prints, per scenario: how often each gate PASSes (type-I error at
the margin, power at loss 0), how the sequential gate stopped, and the mean and 90th
percentile of questions it used against the fixed n. It exits 1 if the sequential PASS rate
at the margin exceeds alpha + 2 Monte Carlo standard errors.

    python benchmarks/sequential_calibration.py [--reps 10000] [--margin 0.02] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy import stats

from qualgate.stats import noninferiority_sample_size
from qualgate.stats._clustered import _score_z, design_effect
from qualgate.stats._sequential import _BUDGET, _EXHAUSTED, _FAIL, _FUTILE, _PASS, _paths

ICC = 0.3  # between-seed correlation of a question's discordance and of its direction
PRIOR, PRIOR_WEIGHT = 0.1, 20.0  # the gate's defaults


def _beta(rng, mean, icc, size):
    """Beta draws with the given mean and intra-class correlation (degenerate at 0 or 1)."""
    if mean <= 0 or mean >= 1:
        return np.full(size, float(mean))
    s = (1 - icc) / icc
    return rng.beta(mean * s, (1 - mean) * s, size)


def simulate(rng, reps, questions, seeds, discordant, loss):
    """Lost and gained counts per (replicate, question), shape (reps, questions) each."""
    direction = (1 + loss / discordant) / 2  # P(lost | discordant)
    if seeds == 1:
        u = rng.random((reps, questions))
        lost = u < discordant * direction
        gained = ~lost & (u < discordant)
        return lost.astype(np.int8), gained.astype(np.int8)
    z = _beta(rng, discordant, ICC, (reps, questions))
    w = _beta(rng, direction, ICC, (reps, questions))
    disc = rng.binomial(seeds, z)
    lost = rng.binomial(disc, w)
    return lost.astype(np.int8), (disc - lost).astype(np.int8)


def per_question_variance(rng, seeds, discordant):
    """Var of a question's mean difference under no loss (for the fixed-n size)."""
    lost, gained = simulate(rng, 1, 400_000, seeds, discordant, 0.0)
    return float(np.var((gained - lost) / seeds))


def fixed_pass_rate(lost, gained, seeds, margin, alpha):
    """PASS rate of the fixed-n gate (clustered score test when seeds > 1)."""
    n_q = lost.shape[1]
    pairs = n_q * seeds
    b, c = lost.sum(axis=1).astype(float), gained.sum(axis=1).astype(float)
    if seeds == 1:
        deff = 1.0
    else:
        d = (lost - gained).astype(float)
        deff = design_effect(pairs, b, c, n_q, (d * d).sum(axis=1), seeds * d.sum(axis=1), seeds**2 * n_q)
    z = _score_z(b, c, pairs, margin, deff)
    return float(np.mean(z < -stats.norm.isf(alpha)))


def run(reps, margin, alpha, power, seed):
    rng = np.random.default_rng(seed)
    rows, worst = [], []
    for seeds in (1, 3):
        for discordant in (0.04, 0.06, 0.08, 0.10):
            n_pairs = noninferiority_sample_size(margin, discordant, alpha=alpha, power=power).n
            if seeds == 1:
                n_fixed = n_pairs
            else:  # the same information: scale by the per-question variance (design effect)
                n_fixed = int(np.ceil(n_pairs * per_question_variance(rng, seeds, discordant) / discordant))
            budget = 3 * n_fixed
            for loss in (0.0, margin / 2, margin, 2 * margin):
                t0 = time.perf_counter()
                stop, reason = [], []
                for chunk in np.array_split(np.arange(reps), max(1, reps // 2500)):
                    lost, gained = simulate(rng, len(chunk), budget, seeds, discordant, loss)
                    d = (gained - lost).astype(np.float64) / seeds
                    s, r, _, _ = _paths(d, margin, alpha, 1 - power, PRIOR, PRIOR_WEIGHT, budget)
                    stop.append(s)
                    reason.append(r)
                stop, reason = np.concatenate(stop), np.concatenate(reason)
                lost, gained = simulate(rng, reps, n_fixed, seeds, discordant, loss)
                fixed = fixed_pass_rate(lost, gained, seeds, margin, alpha)
                row = {
                    "seeds": seeds,
                    "discordant": discordant,
                    "loss": loss,
                    "pass": np.mean(reason == _PASS),
                    "fail": np.mean(reason == _FAIL),
                    "futile": np.mean(reason == _FUTILE),
                    "budget": np.mean((reason == _BUDGET) | (reason == _EXHAUSTED)),
                    "mean_n": stop.mean(),
                    "p90_n": np.percentile(stop, 90),
                    "n_fixed": n_fixed,
                    "fixed_pass": fixed,
                    "seconds": time.perf_counter() - t0,
                }
                row["saving"] = 1 - row["mean_n"] / n_fixed
                rows.append(row)
                if loss == margin:
                    worst.append(row["pass"])
                print(_format(row), flush=True)
    return rows, worst


HEADER = (
    f"{'seeds':>5} {'disc':>5} {'loss':>6} | {'PASS':>6} {'FAIL':>6} {'futile':>6} {'budget':>6} "
    f"{'mean n':>7} {'p90 n':>7} | {'fixed n':>7} {'PASS':>6} | {'saving':>7} {'s':>5}"
)


def _format(r):
    return (
        f"{r['seeds']:>5} {r['discordant']:>5.2f} {r['loss']:>6.3f} | {r['pass']:>6.3f} "
        f"{r['fail']:>6.3f} {r['futile']:>6.3f} {r['budget']:>6.3f} {r['mean_n']:>7.0f} "
        f"{r['p90_n']:>7.0f} | {r['n_fixed']:>7d} {r['fixed_pass']:>6.3f} | {r['saving']:>+7.0%} "
        f"{r['seconds']:>5.1f}"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10_000)
    p.add_argument("--margin", type=float, default=0.02)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    print(
        f"sequential vs fixed-n non-inferiority gate: margin {a.margin}, alpha {a.alpha}, "
        f"power {a.power}, {a.reps} gates per scenario, monitored after every question; "
        f"budget 3x fixed n; three seeds with ICC {ICC}"
    )
    print("PASS at loss = margin is the type-I error; at loss 0 it is the power.")
    print(HEADER)
    rows, worst = run(a.reps, a.margin, a.alpha, a.power, a.seed)
    se = np.sqrt(a.alpha * (1 - a.alpha) / a.reps)
    limit = a.alpha + 2 * se
    ok = max(worst) <= limit
    for loss in (0.0, 2 * a.margin):
        s = [r["saving"] for r in rows if r["loss"] == loss]
        print(f"questions saved at loss {loss:.3f}: {min(s):.0%} to {max(s):.0%} (mean {np.mean(s):.0%})")
    print(
        f"largest sequential PASS rate at the margin: {max(worst):.4f} "
        f"(limit alpha + 2 MC SE = {limit:.4f}): {'OK' if ok else 'EXCEEDED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
