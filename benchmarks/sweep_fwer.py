"""Family-wise error of ``qualgate sweep``'s fixed sequence, by seeded simulation.

A sweep tests K candidates in a fixed order, each with the sequential non-inferiority gate
(:func:`qualgate.stats.sequential_noninferiority`) at the full alpha, and stops at the first
that does not PASS (:mod:`qualgate.run.sweep`). The family-wise error (FWER) is the chance of
declaring *any* candidate whose true loss is at least the margin non-inferior. For each loss
pattern (monotone in aggressiveness, non-monotone, all lossless, first lossy config exactly at
the margin) and each data cell (one seed, d in {-1, 0, 1}; three seeds, d the question's mean
with between-seed correlation ICC 0.3; discordance; n questions) it simulates ``--reps``
sweeps and prints, for three ways of testing the same K candidates:

- ``fixed-seq``: the sweep's fixed sequence (each at alpha, stop at the first non-PASS);
- ``independent``: every candidate at alpha, no multiplicity control;
- ``bonferroni``: every candidate at alpha / K;

the FWER with its Monte Carlo standard error and whether it is <= alpha + 2 SE (SE at alpha) for
the fixed sequence and the independent tests (Bonferroni's FWER is at most (lossy candidates) x
alpha / K by the union bound; it is not simulated, which would double the run time), the
power (the chance that the *target* is declared non-inferior: the last loss-0 candidate before
the first lossy one, the last candidate when all are lossless, i.e. the fastest safe config
the sweep should find), and, for the fixed sequence, the mean questions the candidates used
against running every candidate at the fixed n (K x n).

Each candidate's test is the gate's own vectorised engine ``qualgate.stats._sequential._paths``
(the function ``sequential_noninferiority`` runs on one row, with its defaults: power 0.8,
prior discordance 0.1 of weight 20, ``max_questions = n``); the script re-runs
``sequential_noninferiority`` itself on some sweeps and exits 2 if a verdict or stop differs.
The candidates' data are independent across candidates, or with ``--correlation rho`` drawn
on a shared ``rho`` of the questions from common random numbers (a sweep's candidates answer the
same questions against the same baseline records, and neighbouring settings mostly agree; the
FWER bound needs no assumption about their dependence, but the power of a long sequence does). A candidate the sequence never reaches is not simulated for the
fixed sequence (it cannot change the outcome); the lossy candidates and the target are
simulated for every sweep so that the methods are evaluated on the same data. The script
exits 1 if the fixed sequence's FWER exceeds alpha + 2 SE in any row.

    python benchmarks/sweep_fwer.py [--reps 10000] [--margin 0.02] [--alpha 0.05] [--seed 0]
        [--cells 1:0.04:2000,3:0.06:1000,1:0.10:1000] [--patterns monotone,...] [--power 0.8]
        [--correlation 0.0]

The default run takes about 4 minutes of CPU on one core (6 minutes of wall time per cell on the shared, loaded 2-core machine) (``--power`` is each gate's target
power; with a budget, as in a sweep, the gate stops for futility on conditional power and
ignores it).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from qualgate.stats import sequential_noninferiority
from qualgate.stats._sequential import _FINAL, _PASS, _paths

ICC = 0.3  # between-seed correlation of a question's discordance and of its direction


def _beta(rng, mean, icc, size):
    """Beta draws with the given mean and intra-class correlation (degenerate at 0 or 1)."""
    if mean <= 0 or mean >= 1:
        return np.full(size, float(mean))
    s = (1 - icc) / icc
    return rng.beta(mean * s, (1 - mean) * s, size)


def simulate(rng, reps, questions, seeds, discordant, loss):
    """Lost and gained counts per (replicate, question), shape (reps, questions) each: a pair is
    discordant with probability ``discordant`` (per question Beta with ICC with several seeds)
    and lost with probability (1 + loss / discordant) / 2 given discordant."""
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


PRIOR, PRIOR_WEIGHT = 0.1, 20.0  # sequential_noninferiority's defaults (and power 0.8, the sweep's)

#: loss patterns over 8 candidates, least aggressive first, in units of the margin
PATTERNS = {
    "monotone": (0, 0, 0.25, 0.5, 1.25, 1.5, 1.75, 2),
    "boundary": (0, 0, 0, 0, 1, 1, 1, 1),
    "non-monotone": (0, 1, 0, 0, 0.5, 2, 0, 0),
    "all lossless": (0, 0, 0, 0, 0, 0, 0, 0),
}
#: (seeds, discordance per seed, questions)
CELLS = ((1, 0.04, 2000), (3, 0.06, 1000), (1, 0.10, 1000))
METHODS = ("fixed-seq", "independent", "bonferroni")


def target_index(losses) -> int:
    """The last loss-0 candidate before the first lossy one (the last one if none is lossy)."""
    first_lossy = next((j for j, x in enumerate(losses) if x >= 1), len(losses))
    zeros = [j for j in range(first_lossy) if losses[j] == 0]
    return zeros[-1] if zeros else -1


def gate_rows(rng, idx, reps, n, seeds, discordant, loss, margin, alpha, common=None, power=0.8):
    """Simulate one candidate's data for the sweeps ``idx`` and run the sequential gate on each:
    (pass?, questions used, the data).

    ``common = (seed, rho)``: each question's data are, with probability ``rho`` (a mask shared
    by every candidate), drawn from common random numbers (the generator ``seed``, restarted for
    every candidate, so that the candidates' differences move together), else independently;
    each candidate's data keep their distribution.
    """
    if len(idx) == 0:
        return np.zeros(0, bool), np.zeros(0, int), None
    lost, gained = simulate(rng, len(idx), n, seeds, discordant, loss)
    d = (gained - lost).astype(np.float64) / seeds
    if common is not None and common[1] > 0:
        crn = np.random.default_rng(common[0])
        mask = crn.random((reps, n))[idx] < common[1]
        lost, gained = simulate(crn, reps, n, seeds, discordant, loss)
        d = np.where(mask, (gained[idx] - lost[idx]).astype(np.float64) / seeds, d)
    stop, reason, _, _ = _paths(
        d, margin=margin, alpha=alpha, beta=1 - power, prior=PRIOR, weight=PRIOR_WEIGHT, max_questions=n, pairs=seeds
    )
    return (reason == _PASS) | (reason == _FINAL), stop, d


def cross_check(d, passed, stop, margin, alpha, n, power, seeds, k=3):
    """Re-run the public function on the first ``k`` rows; raise if anything differs."""
    for i in range(min(k, len(d))):
        r = sequential_noninferiority(d[i], margin=margin, alpha=alpha, power=power, max_questions=n, pairs=seeds)
        if (r.verdict == "PASS") != bool(passed[i]) or r.n_questions != int(stop[i]):
            raise AssertionError(
                f"row {i}: sequential_noninferiority gave {r.verdict} after {r.n_questions}, "
                f"the vectorised gate {bool(passed[i])} after {int(stop[i])}"
            )
    return min(k, len(d))


def sweep_scenario(rng, reps, pattern, seeds, discordant, n, margin, alpha, correlation=0.0, power=0.8):
    """One scenario: 'reps' sweeps; returns per-method FWER and power, and fixed-seq questions."""
    losses = [x * margin for x in pattern]
    lossy = [x >= 1 for x in pattern]
    k = len(pattern)
    target = target_index(pattern)
    reached = np.ones(reps, bool)  # the fixed sequence got to candidate j in this sweep
    questions = np.zeros(reps)
    false_pass = {m: np.zeros(reps, bool) for m in METHODS}
    target_pass = {m: np.zeros(reps, bool) for m in METHODS}
    checked = 0
    common = (int(rng.integers(2**63)), correlation) if correlation else None
    for j, loss in enumerate(losses):
        every = lossy[j] or j == target
        idx = np.arange(reps) if every else np.flatnonzero(reached)
        passed, stop, d = gate_rows(rng, idx, reps, n, seeds, discordant, loss, margin, alpha, common, power)
        if d is not None and checked < 6:
            checked += cross_check(d, passed, stop, margin, alpha, n, power, seeds)
        ok = np.zeros(reps, bool)
        ok[idx] = passed
        used = np.zeros(reps)
        used[idx] = stop
        questions += np.where(reached, used, 0)
        fixed_ok = reached & ok
        if lossy[j]:
            false_pass["fixed-seq"] |= fixed_ok
            false_pass["independent"] |= ok
        if j == target:
            target_pass["fixed-seq"] = fixed_ok
            target_pass["independent"] = ok
        if j == target:
            everyone = np.arange(reps)
            target_pass["bonferroni"] = gate_rows(
                rng, everyone, reps, n, seeds, discordant, loss, margin, alpha / k, common, power
            )[0]
        reached = fixed_ok  # the sequence goes on only after a PASS
    return {
        "fwer": {m: float(false_pass[m].mean()) for m in METHODS if m != "bonferroni"},
        "bonferroni_bound": sum(lossy) * alpha / k,
        "power": {m: float(target_pass[m].mean()) if target >= 0 else None for m in METHODS},
        "questions": float(questions.mean()),
        "fixed_questions": k * n,
        "target": target,
        "checked": checked,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10_000)
    p.add_argument("--margin", type=float, default=0.02)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--power", type=float, default=0.8, help="each gate's target power (sets its futility stop)")
    p.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated loss patterns to run")
    p.add_argument(
        "--correlation",
        type=float,
        default=0.0,
        help="share of each question's data drawn from common random numbers across candidates",
    )
    p.add_argument(
        "--cells",
        default=",".join(f"{s}:{d}:{n}" for s, d, n in CELLS),
        help="comma-separated seeds:discordance:questions",
    )
    a = p.parse_args(argv)
    cells = [(int(s), float(d), int(n)) for s, d, n in (c.split(":") for c in a.cells.split(","))]
    se = float(np.sqrt(a.alpha * (1 - a.alpha) / a.reps))
    limit = a.alpha + 2 * se
    print(
        f"fixed-sequence sweep FWER: {len(next(iter(PATTERNS.values())))} candidates, margin {a.margin}, "
        f"alpha {a.alpha}, {a.reps:,} sweeps per scenario, seed {a.seed}; three seeds with ICC {ICC}"
        + (f"; each gate's power {a.power} (futility)" if a.power != 0.8 else "")
        + (
            f"; candidates' data from common random numbers on a shared {a.correlation:.0%} of the questions"
            if a.correlation
            else ""
        )
    )
    print(
        "loss patterns (x margin, least aggressive first): " + "; ".join(f"{k} {list(v)}" for k, v in PATTERNS.items())
    )
    print(
        f"FWER = P(any candidate with loss >= margin declared non-inferior); ok = FWER <= alpha + 2 SE "
        f"= {limit:.4f} (SE at alpha {se:.4f}); power = P(target declared non-inferior), target = the last "
        "loss-0 candidate before the first lossy one; questions = mean questions the fixed sequence's "
        "candidates used (candidates never reached use none) against K x n"
    )
    header = (
        f"{'scenario':<13} {'seeds':>5} {'disc':>5} {'n':>5} {'sweeps':>6} {'method':<11} "
        f"{'FWER':>6} {'MC SE':>6} {'ok':>3} {'power':>6} {'questions':>15} {'s':>5}"
    )
    print(header)
    worst, checked = 0.0, 0
    t_all = time.perf_counter()
    for ci, (seeds, disc, n) in enumerate(cells):
        for si, (name, pattern) in enumerate(PATTERNS.items()):
            if name not in a.patterns.split(","):
                continue
            t0 = time.perf_counter()
            rng = np.random.default_rng([a.seed, ci, si])
            try:
                r = sweep_scenario(rng, a.reps, pattern, seeds, disc, n, a.margin, a.alpha, a.correlation, a.power)
            except AssertionError as exc:
                print(f"the vectorised gate disagrees with sequential_noninferiority: {exc}")
                return 2
            checked += r["checked"]
            secs = time.perf_counter() - t0
            for m in METHODS:
                if m in r["fwer"]:
                    f = r["fwer"][m]
                    fwer = f"{f:>6.4f} {np.sqrt(f * (1 - f) / a.reps):>6.4f} {'yes' if f <= limit else 'NO':>3}"
                else:
                    fwer = f"<={r['bonferroni_bound']:<4.3f} {'—':>6} {'yes':>3}"
                if m == "fixed-seq":
                    worst = max(worst, r["fwer"][m])
                pw = r["power"][m]
                first = m == METHODS[0]
                q = f"{r['questions']:>6.0f} / {r['fixed_questions']:>6,}" if first else ""
                print(
                    f"{name if first else '':<13} {seeds:>5} {disc:>5.2f} {n:>5} {a.reps:>6} {m:<11} {fwer} "
                    f"{'' if pw is None else f'{pw:.3f}':>6} {q:>15} {f'{secs:.0f}' if first else '':>5}",
                    flush=True,
                )
    print(
        f"largest fixed-sequence FWER: {worst:.4f} (limit {limit:.4f}): "
        f"{'OK' if worst <= limit else 'EXCEEDED'}; {checked} gates re-run with sequential_noninferiority "
        f"agreed; {time.perf_counter() - t_all:.0f} s in all"
    )
    return 0 if worst <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
