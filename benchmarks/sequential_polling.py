"""Size of ``qualgate gate --sequential --max-questions B`` re-run on growing records (issue 47).

A CI job polls a running evaluation: every 100 questions it re-runs the gate on the records
so far (not declared final: only the always-valid e-process decides) and stops at the first
PASS; once the run has finished it runs the gate once more with ``--final`` (the budget's
fixed-n test may decide). The null: loss exactly at the margin 0.02, one pair per question,
discordance ψ. ``before``: each look treated as final (the former behaviour). Through the
gate's own vectorised path (:func:`qualgate.stats._sequential._paths`).

Usage: ``python benchmarks/sequential_polling.py [--reps 4000]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qualgate.stats._sequential import _FINAL, _PASS, _paths

MARGIN, ALPHA = 0.02, 0.05


def polled_size(psi, budget, reps, rng, *, before=False, every=100):
    p_lost, p_gained = (psi + MARGIN) / 2, (psi - MARGIN) / 2
    u = rng.random((reps, budget))
    d = np.where(u < p_lost, -1.0, np.where(u < p_lost + p_gained, 1.0, 0.0))
    kw = dict(margin=MARGIN, alpha=ALPHA, beta=0.2, prior=0.1, weight=20.0)
    passed = np.zeros(reps, dtype=bool)
    for look in range(every, budget + 1, every):
        final = look == budget
        if before:  # every look capped the budget at the questions present and ran the final test
            _, reason, _, _ = _paths(d[:, :look], max_questions=look, **kw)
        else:
            _, reason, _, _ = _paths(d[:, :look], max_questions=budget, final_test=final, **kw)
        passed |= (reason == _PASS) | (reason == _FINAL)
    return passed.mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    t0 = time.process_time()
    print(f"margin {MARGIN}, alpha {ALPHA}, loss at the margin, a look every 100 questions, {args.reps:,} runs a cell")
    print(f"{'psi':>5} {'budget':>6} {'design':<34} {'P(PASS)':>8} {'95% CI':>18}")
    for psi, budget in ((0.04, 1000), (0.10, 500)):
        for before in (True, False):
            p = polled_size(psi, budget, args.reps, np.random.default_rng(int(psi * 100) + budget), before=before)
            half = 1.96 * np.sqrt(p * (1 - p) / args.reps)
            name = "before: every look final" if before else "now: looks e-process, last --final"
            print(f"{psi:>5.2f} {budget:>6} {name:<34} {p:>8.4f} [{max(p - half, 0):.4f}, {p + half:.4f}]")
    print(f"CPU time {time.process_time() - t0:.0f} s")


if __name__ == "__main__":
    main()
