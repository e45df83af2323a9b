"""Calibrate the budgeted sequential gate against the fixed-n gate on the same budget.

For each generative model (``benchmarks/models.py``), seeds per question (1, 3, 5), budget
(``--budgets`` questions) and true loss (0, margin, 2×margin) it simulates ``--reps`` data
sets of ``budget`` questions and runs on each

- the sequential gate with ``max_questions = budget``, monitored after every question
  (``qualgate.stats._sequential._paths``, the function ``qualgate gate --sequential`` uses);
- the fixed-n gate on all ``budget`` questions (exact test with one seed, robust clustered
  test with several), on the same data.

It prints both PASS rates (at loss 0 the power, at the margin the size), the sequential
gate's stopping reasons and its mean questions as a fraction of the budget, beside Wald's
SPRT approximation for a normal mean at the same alpha and power 0.8 (0.62 of the fixed n at
loss 0). It exits 1 if a sequential size exceeds alpha + 2 MC SE or a power falls more than
3 points below the fixed gate's (beyond 2 MC SE of the difference).

    python benchmarks/sequential_calibration.py [--reps 4000] [--budgets 100,300,1000,2000]

With ``--available N`` every data set has only N questions, fewer than each budget (issue 36: a
budget larger than the suite). The gate then runs its final test on the N questions (budget =
min(budget, N), as ``sequential_noninferiority`` does with complete data); the former gate,
which ended ``exhausted`` without it, is printed beside (``former``), and the fixed gate is on
the same N questions.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MODELS, draw  # noqa: E402

from qualgate.stats._sequential import _FAIL, _FINAL, _FUTILE, _PASS, _budget, _final_pass, _paths  # noqa: E402

PRIOR, PRIOR_WEIGHT = 0.1, 20.0  # the gate's defaults


def wald_ratio(loss_in_margins, alpha=0.05, beta=0.2):
    """Wald's expected sample size of the SPRT of H0: loss = m vs H1: loss = 0 (normal mean,
    known variance) at a true loss of ``loss_in_margins``·m, as a fraction of the fixed n."""
    upper, lower = math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))
    r = 0.5 - loss_in_margins  # drift of the log-likelihood ratio per unit of information
    if abs(r) < 1e-9:
        asn = -upper * lower
    else:
        theta = -2 * r  # E exp(theta · step) = 1
        p_up = (1 - math.exp(theta * lower)) / (math.exp(theta * upper) - math.exp(theta * lower))
        asn = (p_up * upper + (1 - p_up) * lower) / r
    return asn / (stats.norm.isf(alpha) + stats.norm.isf(beta)) ** 2


def run_cell(rng, model, seeds, budget, loss, reps, margin, alpha, available=None):
    questions = budget if available is None else available
    stop, reason, fixed, former = [], [], [], []
    kw = dict(margin=margin, alpha=alpha, beta=0.2, prior=PRIOR, weight=PRIOR_WEIGHT, pairs=seeds)
    for chunk in np.array_split(np.arange(reps), max(1, reps * questions * seeds // 3_000_000)):
        lost, gained = draw(model, rng, len(chunk), questions, seeds, loss)
        d = (gained - lost).astype(float) / seeds
        s, r, _, _ = _paths(d, max_questions=_budget(budget, questions, True), counts=(lost, gained), **kw)
        stop.append(s)
        reason.append(r)
        if available is not None:  # the former gate: the budget as asked, never reached
            former.append(np.isin(_paths(d, max_questions=budget, counts=(lost, gained), **kw)[1], (_PASS, _FINAL)))
        # the fixed gate at level alpha on all questions: the same final test, full alpha
        fixed.append(_final_pass(d, seeds, margin, alpha, (lost, gained)))
    stop, reason, fixed = np.concatenate(stop), np.concatenate(reason), np.concatenate(fixed)
    return {
        "former": np.concatenate(former).mean() if former else float("nan"),
        "pass": np.mean((reason == _PASS) | (reason == _FINAL)),
        "early": np.mean(reason == _PASS),
        "fail": np.mean(reason == _FAIL),
        "futile": np.mean(reason == _FUTILE),
        "used": stop.mean() / questions,
        "fixed": fixed.mean(),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=4000)
    p.add_argument("--budgets", default="100,300,1000,2000")
    p.add_argument("--seeds", default="1,3,5")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--margin", type=float, default=0.02)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--available", type=int, help="questions in each data set, fewer than every budget")
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    se = math.sqrt(a.alpha * (1 - a.alpha) / a.reps)
    print(
        f"budgeted sequential gate vs fixed-n gate on the same budget: margin {a.margin}, alpha {a.alpha}, "
        f"{a.reps:,} data sets a cell, monitored after every question"
        + (f"; {a.available:,} questions available, fewer than the budget ('q used' of them)" if a.available else "")
    )
    print(
        f"Wald SPRT (normal, power 0.8): questions/fixed n = {wald_ratio(0):.2f} at loss 0, "
        f"{wald_ratio(1):.2f} at the margin, {wald_ratio(2):.2f} at 2x margin"
    )
    print(
        f"{'model':<15}{'seeds':>6}{'budget':>7}{'loss':>6} | {'seq PASS':>8}{'early':>7}{'FAIL':>7}"
        f"{'futile':>7}{'q used':>7}{'Wald':>6} | {'fixed PASS':>10}{'diff':>7} | ok"
        + (f" | {'former':>7}" if a.available else "")
    )
    t0, bad = time.perf_counter(), 0
    for model in a.models.split(","):
        for seeds in (int(x) for x in a.seeds.split(",")):
            for budget in (int(x) for x in a.budgets.split(",")):
                for k in (0, 1, 2):
                    loss = k * a.margin
                    r = run_cell(rng, model, seeds, budget, loss, a.reps, a.margin, a.alpha, a.available)
                    diff = r["pass"] - r["fixed"]
                    if k == 1:
                        ok = r["pass"] <= a.alpha + 2 * se
                    elif k == 0:
                        diff_se = math.sqrt(max(r["fixed"] * (1 - r["fixed"]), 1e-4) / a.reps)
                        ok = diff >= -0.03 - 2 * diff_se
                    else:
                        ok = True
                    bad += not ok
                    print(
                        f"{model:<15}{seeds:>6}{budget:>7}{loss:>6.3f} | {r['pass']:>8.4f}{r['early']:>7.3f}"
                        f"{r['fail']:>7.3f}{r['futile']:>7.3f}{r['used']:>7.2f}{wald_ratio(k):>6.2f} | "
                        f"{r['fixed']:>10.4f}{diff:>+7.3f} | {'yes' if ok else 'NO'}"
                        + (f" | {r['former']:>7.4f}" if a.available else ""),
                        flush=True,
                    )
    print(
        f"size limit alpha + 2 MC SE = {a.alpha + 2 * se:.4f}; power limit fixed − 3 points − 2 MC SE; "
        f"{bad} cell(s) outside ({time.perf_counter() - t0:.0f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
