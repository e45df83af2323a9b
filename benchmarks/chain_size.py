"""Size of the chained design (issue 33): FLy against standard, standard against target-only.

The claim "the candidate F loses less than δ = δ1 + δ2 against target-only T" is accepted when
both legs pass the gate's exact non-inferiority test at the same ``alpha``: F against standard S
at margin δ1, and S against T at margin δ2. This is an intersection-union test (Berger 1982):
accuracy losses add up (acc T − acc F = (acc T − acc S) + (acc S − acc F)), so when the claim is
false (loss of F against T at least δ) at least one leg's null hypothesis holds, and the chain
passes only if that leg's test rejects a true null, which happens with probability at most
alpha. No alpha split is needed; the simulation checks it.

Each replicate draws n questions with outcomes (T, S, F) in {0, 1}: S correct with probability
``--accuracy``; T and F independent given S, with the discordant cells of each leg set by its
loss l_i and discordance ψ_i (P(lost) = (ψ_i + l_i)/2, P(gained) = (ψ_i − l_i)/2). The true
losses sit on the null's boundary l1 + l2 = δ, split in every proportion w: l1 = w·δ,
l2 = (1 − w)·δ, w from −0.25 (standard better than target) to 1.25 (the candidate leg takes more
than all of δ). A leg cannot lose more than it discords, so ψ_i = max(ψ, |l_i|) (the cells where
this raises ψ are marked ``*``). The tests are the gate's own: the exact unconditional test of
``qualgate.stats.noninferiority(method='exact')``, which rejects exactly when the score
statistic is at most ``exact_critical_value(n, δ_i, alpha)``.

Run: ``python benchmarks/chain_size.py [--n 2000] [--reps 20000] [--seed 0]``
(prints a table; the size is the share of replicates in which both legs pass).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from qualgate.stats._noninferiority import exact_critical_value
from qualgate.stats._score import score_z


def cell_probabilities(accuracy, l1, psi1, l2, psi2):
    """P of the 8 outcome cells (T, S, F) in the order T*4 + S*2 + F, T and F independent given S."""
    p_s = accuracy
    t1_s0 = (psi2 + l2) / 2 / (1 - p_s)  # P(T=1 | S=0): the lost pairs of the lossless leg
    t0_s1 = (psi2 - l2) / 2 / p_s  # P(T=0 | S=1): its gained pairs
    f0_s1 = (psi1 + l1) / 2 / p_s  # P(F=0 | S=1): the candidate leg's lost pairs
    f1_s0 = (psi1 - l1) / 2 / (1 - p_s)  # P(F=1 | S=0): its gained pairs
    probs = np.zeros(8)
    for t in (0, 1):
        for s in (0, 1):
            for f in (0, 1):
                pt = (t1_s0 if t else 1 - t1_s0) if s == 0 else (1 - t0_s1 if t else t0_s1)
                pf = (f1_s0 if f else 1 - f1_s0) if s == 0 else (1 - f0_s1 if f else f0_s1)
                probs[t * 4 + s * 2 + f] = (p_s if s else 1 - p_s) * pt * pf
    if probs.min() < -1e-12:
        raise ValueError(f"infeasible cell: accuracy {accuracy}, losses {l1}, {l2}, discordances {psi1}, {psi2}")
    return np.clip(probs, 0, None) / probs.sum()


def leg_counts(counts):
    """(lost, gained) of each leg from the 8-cell counts: F against S, and S against T."""
    c = counts.reshape(-1, 2, 2, 2)  # [replicate, T, S, F]
    lost1, gained1 = c[:, :, 1, 0].sum(axis=1), c[:, :, 0, 1].sum(axis=1)
    lost2, gained2 = c[:, 1, 0, :].sum(axis=1), c[:, 0, 1, :].sum(axis=1)
    return lost1, gained1, lost2, gained2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="questions per replicate")
    ap.add_argument("--reps", type=int, default=20000, help="replicates per cell")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--accuracy", type=float, default=0.8, help="standard's accuracy")
    ap.add_argument("--psi", default="0.01,0.03,0.10,0.20,0.30")
    ap.add_argument("--margins", default="0.01+0.01,0.015+0.005", help="δ1+δ2 pairs (candidate + lossless leg)")
    ap.add_argument("--splits", default="-0.25,0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.75,0.8,0.9,1,1.25")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    psis = [float(x) for x in a.psi.split(",")]
    splits = [float(x) for x in a.splits.split(",")]
    margins = [tuple(float(x) for x in pair.split("+")) for pair in a.margins.split(",")]
    t0 = time.perf_counter()
    mc = 2 * math.sqrt(a.alpha * (1 - a.alpha) / a.reps)
    print(
        f"size of the chained design: n = {a.n} questions, {a.reps} replicates per cell, alpha {a.alpha} per leg "
        f"(no split), standard's accuracy {a.accuracy}, seed {a.seed}; true losses l1 + l2 = δ1 + δ2 (the null's "
        f"boundary), l1 = w·δ; 2 Monte Carlo s.e. at alpha: {mc:.4f}"
    )
    worst = (-1.0, None)
    for d1, d2 in margins:
        delta = d1 + d2
        z1 = exact_critical_value(a.n, d1, a.alpha)
        z2 = exact_critical_value(a.n, d2, a.alpha)
        print(f"\nmargins δ1 = {d1:g} (FLy vs standard) + δ2 = {d2:g} (standard vs target) = δ {delta:g}")
        print("rows: w (share of δ lost by the candidate leg); columns: ψ; cell: size of the chain (both legs pass)")
        print(f"{'w':>6} | " + " | ".join(f"{f'ψ {p:g}':>10}" for p in psis))
        alone = {}
        for w in splits:
            l1, l2 = w * delta, (1 - w) * delta
            cells = []
            for psi in psis:
                psi1, psi2 = max(psi, abs(l1)), max(psi, abs(l2))
                probs = cell_probabilities(a.accuracy, l1, psi1, l2, psi2)
                counts = rng.multinomial(a.n, probs, size=a.reps)
                lost1, gained1, lost2, gained2 = leg_counts(counts)
                pass1 = score_z(lost1, gained1, a.n, d1) <= z1
                pass2 = score_z(lost2, gained2, a.n, d2) <= z2
                size = float(np.mean(pass1 & pass2))
                if math.isclose(w * delta, d1):
                    alone[psi] = (float(np.mean(pass1)), float(np.mean(pass2)))
                worst = max(worst, (size, (d1, d2, w, psi)))
                mark = "*" if (psi1, psi2) != (psi, psi) else " "
                cells.append(f"{size:>9.4f}{mark}")
            print(f"{w:>6g} | " + " | ".join(cells))
        if alone:
            print(
                f"each leg alone at its own boundary (w = {d1 / delta:g}; candidate leg / lossless leg): "
                + ", ".join(f"ψ {p:g}: {x:.4f} / {y:.4f}" for p, (x, y) in alone.items())
            )
    size, (d1, d2, w, psi) = worst
    ok = size <= a.alpha
    print(
        f"\nlargest size {size:.4f} (margins {d1:g} + {d2:g}, w {w:g}, ψ {psi:g}): {'<=' if ok else '>'} alpha "
        f"{a.alpha}  (* : ψ raised to the leg's loss; {time.perf_counter() - t0:.0f} s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
