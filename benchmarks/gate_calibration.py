"""Calibration of the gate by simulation: type-I error at the margin and power.

For every scenario (true loss 0, margin/2, margin, 2 x margin; discordance 4-10%; one seed per
question, or three seeds whose outcomes are correlated within a question) it simulates
10,000 paired evaluations and applies the gate's decision rule (:func:`qualgate.gate.decide`)
to the gate's own statistics:

- one seed: the restricted score statistic of :func:`qualgate.stats.noninferiority`
  (Nam/Tango) and the exact McNemar test;
- three seeds, clustered (what the gate does automatically): the design-effect-adjusted
  score statistic of :func:`qualgate.stats.clustered_noninferiority` and the exact sign-flip
  test :func:`qualgate.stats.clustered_mcnemar`;
- three seeds, naive: the same pairs treated as independent (what the gate must not do),
  shown for contrast.

Three correlated seeds: question k has a discordance propensity psi_k ~ Beta with mean psi
and intra-question correlation ``--icc`` (0.3), each seed flips with probability psi_k, and
all flips of a question go the same way (lost with probability (1 + loss/psi)/2), so the
mean loss per pair is ``loss`` and the mean discordance ``psi``.

The number of questions per scenario is the non-inferiority sample size for 80% power with
one seed at loss 0 (:func:`qualgate.stats.noninferiority_sample_size`).

A gate's type-I error is P(PASS) at a true loss equal to the margin; it must stay at or below
alpha + 2 Monte Carlo standard errors. P(FAIL) at loss 0 is the false-FAIL rate (<= alpha).

Run: ``python benchmarks/gate_calibration.py`` (about a minute on one core; ``--gates`` to change).
"""

from __future__ import annotations

import argparse
import functools
import math
import time

import numpy as np
from scipy import special
from scipy import stats as sps

from qualgate.gate import decide
from qualgate.stats import (
    ClusteredTable,
    clustered_mcnemar,
    design_effect,
    mcnemar,
    noninferiority_sample_size,
)
from qualgate.stats._clustered import _score_z  # the vectorised statistic clustered_noninferiority uses


@functools.lru_cache(maxsize=None)
def _mcnemar_less(lost, gained):
    return mcnemar(lost, gained, alternative="less").pvalue


@functools.lru_cache(maxsize=None)
def _signflip_less(abs_d, lost, gained):
    table = ClusteredTable(0, 0, 0, lost, gained, 0, 0, 0, 0, abs_d, 0)  # only abs_d and the counts matter
    return clustered_mcnemar(table, alternative="less").pvalue


def _verdicts(lost, gained, n, deff, p_loss, margin, alpha):
    p_ni = sps.norm.cdf(_score_z(lost, gained, n, margin, deff))
    return decide("noninferiority", pvalue_noninferiority=p_ni, pvalue_loss=p_loss, alpha=alpha)


def simulate_one_seed(rng, gates, questions, psi, loss, margin, alpha):
    counts = rng.multinomial(questions, [(psi + loss) / 2, (psi - loss) / 2, 1 - psi], size=gates)
    lost, gained = counts[:, 0], counts[:, 1]
    p_loss = np.array([_mcnemar_less(int(b), int(c)) for b, c in zip(lost, gained)])
    return {"score (1 seed)": _verdicts(lost, gained, questions, 1.0, p_loss, margin, alpha)}


def simulate_three_seeds(rng, gates, questions, psi, loss, margin, alpha, icc, seeds=3, chunk=1000):
    out = {"clustered (3 seeds)": [], "naive (3 seeds)": []}
    ab = 1 / icc - 1 if icc > 0 else None
    for start in range(0, gates, chunk):
        g = min(chunk, gates - start)
        psi_k = rng.beta(psi * ab, (1 - psi) * ab, size=(g, questions)) if ab else np.full((g, questions), psi)
        flips = rng.binomial(seeds, psi_k)
        lossy = rng.random((g, questions)) < (1 + loss / psi) / 2
        lost = np.where(lossy, flips, 0).sum(axis=1)
        gained = np.where(lossy, 0, flips).sum(axis=1)
        d = np.where(lossy, flips, -flips)
        n = questions * seeds
        deff = design_effect(n, lost, gained, questions, (d * d).sum(axis=1), seeds * d.sum(axis=1), questions * seeds**2)
        abs_d = np.stack([(flips == j).sum(axis=1) for j in range(1, seeds + 1)], axis=1)
        p_flip = np.array([_signflip_less(tuple(map(int, a)), int(b), int(c)) for a, b, c in zip(abs_d, lost, gained)])
        p_mcn = np.array([_mcnemar_less(int(b), int(c)) for b, c in zip(lost, gained)])
        out["clustered (3 seeds)"].append(_verdicts(lost, gained, n, deff, p_flip, margin, alpha))
        out["naive (3 seeds)"].append(_verdicts(lost, gained, n, 1.0, p_mcn, margin, alpha))
    return {k: np.concatenate(v) for k, v in out.items()}


def exact_one_seed_size(questions, psi, margin, alpha):
    """P(PASS) at loss = margin with one seed, by enumerating every (lost, gained): no MC error."""
    p_lost, p_gained = (psi + margin) / 2, (psi - margin) / 2
    top = int(questions * psi + 12 * math.sqrt(questions * psi)) + 20
    lost, gained = np.arange(top)[:, None], np.arange(top)[None, :]
    rest = np.maximum(questions - lost - gained, 0)
    log_p = (special.gammaln(questions + 1) - special.gammaln(lost + 1) - special.gammaln(gained + 1)
             - special.gammaln(rest + 1) + lost * np.log(p_lost) + gained * np.log(p_gained)
             + rest * np.log1p(-psi))  # fmt: skip
    prob = np.where(lost + gained <= questions, np.exp(log_p), 0.0)
    passes = sps.norm.cdf(_score_z(lost, gained, questions, margin, 1.0)) < alpha
    return float(prob[passes].sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gates", type=int, default=10_000, help="simulated gates per scenario")
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--icc", type=float, default=0.3, help="intra-question correlation of the discordance propensity")
    ap.add_argument("--discordance", default="0.04,0.06,0.08,0.10")
    ap.add_argument("--seed", type=int, default=20260101)
    args = ap.parse_args(argv)
    margin, alpha, gates = args.margin, args.alpha, args.gates
    losses = {"0": 0.0, "m/2": margin / 2, "m": margin, "2m": 2 * margin}
    limit = alpha + 2 * math.sqrt(alpha * (1 - alpha) / gates)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    rows, exact = [], []
    for psi in (float(x) for x in args.discordance.split(",")):
        questions = noninferiority_sample_size(margin, psi, alpha=alpha, power=0.8).n
        exact.append(f"psi {psi:.2f}: {exact_one_seed_size(questions, psi, margin, alpha):.4f}")
        results: dict[str, dict[str, np.ndarray]] = {}
        for name, loss in losses.items():
            verdicts = simulate_one_seed(rng, gates, questions, psi, loss, margin, alpha)
            verdicts |= simulate_three_seeds(rng, gates, questions, psi, loss, margin, alpha, args.icc)
            for analysis, v in verdicts.items():
                results.setdefault(analysis, {})[name] = v
        for analysis, r in results.items():
            pass_ = {k: float(np.mean(v == "PASS")) for k, v in r.items()}
            fail = {k: float(np.mean(v == "FAIL")) for k, v in r.items()}
            ok = pass_["m"] <= limit and fail["0"] <= limit
            rows.append([analysis, f"{psi:.2f}", questions, pass_["0"], pass_["m/2"], pass_["m"], pass_["2m"],
                         fail["0"], fail["m"], fail["2m"], "yes" if ok else "NO"])  # fmt: skip
    elapsed = time.perf_counter() - t0

    headers = ["analysis", "psi", "questions", "PASS@0", "PASS@m/2", "PASS@m (type I)", "PASS@2m",
               "FAIL@0", "FAIL@m", "FAIL@2m", "type I ok"]  # fmt: skip
    widths = [max(len(h), 19 if i == 0 else 6) for i, h in enumerate(headers)]
    print(f"gate calibration: margin {margin}, alpha {alpha}, {gates:,} gates per scenario, "
          f"icc {args.icc}, seed {args.seed}")  # fmt: skip
    print(f"type-I limit alpha + 2 MC SE = {limit:.4f}; questions = non-inferiority n for 80% power at loss 0")
    print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths))))
    for row in rows:
        cells = [row[0], row[1], str(row[2])] + [f"{x:.4f}" for x in row[3:10]] + [row[10]]
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))))
    print("exact type-I error of the one-seed gate (enumeration, no MC error): " + ", ".join(exact))
    print(f"({elapsed:.0f} s)")
    gated = [r for r in rows if not r[0].startswith("naive")]
    return 0 if all(r[10] == "yes" for r in gated) else 1


if __name__ == "__main__":
    raise SystemExit(main())
