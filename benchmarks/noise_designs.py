"""Which design gates FLy with the fewest questions: against target-only or against standard?

Decodes the demo pair (``configs/plans/demo-gpu.yaml``: the demo target and drafter on the
synthetic arithmetic suite) as target-only, standard, FLy W = 2 and aggressive FLy, at each
temperature, in each of the reference engine's vLLM noise modes (``vllm-v1``: vLLM 0.33's
per-request generator order; ``vllm-v2``: vLLM 0.34's counter-based draws; docs/engine.md),
with ``qualgate run``'s harness; then, for every noise mode and pair of configs compared,
prints and writes one table:

- ψ, the discordance per (question, seed) pair: the share whose correctness differs;
- the questions needed for a paired non-inferiority test at a 2-point margin (alpha 0.05,
  power 0.8, no true loss: :func:`qualgate.stats.noninferiority_sample_size`, the function
  ``qualgate power`` uses), counting one (question, seed) pair as one question;
- the share of requests with identical output tokens, the 10th/50th/90th percentile of the
  first differing token position among the others, and the baseline's median top-2 margin
  there (the records' ``token_ids`` and ``top2_margins``);
- per FLy design, the ratio of questions needed against target-only to against standard,
  and the baseline that needs fewer (the design to use on that vLLM release).

    python benchmarks/noise_designs.py --device cuda --out benchmarks/results/noise_designs-h200.txt
    python benchmarks/noise_designs.py --device cpu --questions 50 --temperatures 1.0 \
        --runs /tmp/nd --out /tmp/nd.txt                  # CPU check of the script

No network: the demo weights are in the package. ``--resume`` continues killed runs in ``--runs``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qualgate.config.decoding import load_plan  # noqa: E402
from qualgate.formatting import text_table  # noqa: E402
from qualgate.records import read_records  # noqa: E402
from qualgate.run.runner import run_plan  # noqa: E402
from qualgate.stats import noninferiority_sample_size  # noqa: E402

CONFIGS = ("target", "standard", "fly-w2", "fly-aggressive")
#: (baseline, candidate) pairs compared at each temperature
PAIRS = (
    ("target", "standard"),
    ("target", "fly-w2"),
    ("standard", "fly-w2"),
    ("target", "fly-aggressive"),
    ("standard", "fly-aggressive"),
)
MARGIN, ALPHA, POWER = 0.02, 0.05, 0.8


#: the reference engine's noise mode that draws as each vLLM release does (docs/engine.md)
RELEASES = {"vllm-v1": "0.33", "vllm-v2": "0.34"}


def plan_at(base, temperature: float, noise: str, args):
    """The base plan's four configs at ``temperature``, in ``noise``."""
    configs = {}
    for name in CONFIGS:
        c = base.configs[name]
        opts = {k: v for k, v in c.engine_options.items() if k != "coupled"}
        opts["noise"] = noise
        for key, value in (("device", args.device), ("batch_size", args.batch_size), ("max_num_seqs", args.batch_size)):
            if value:
                opts[key] = value
        configs[name] = dataclasses.replace(c, sampling={**c.sampling, "temperature": temperature}, engine_options=opts)
    suites = tuple(dataclasses.replace(s, limit=args.questions) for s in base.suites)
    return dataclasses.replace(
        base,
        name=f"{base.name}-{noise}-T{temperature:g}",
        suites=suites,
        seeds=tuple(range(args.seeds)),
        configs=configs,
        baseline="target",
        candidates=CONFIGS[1:],
    )


def first_difference(a, b) -> int | None:
    """The first token index where ``a`` and ``b`` differ (None: identical)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def quantiles(xs, qs=(0.1, 0.5, 0.9)) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    return " / ".join(str(xs[min(len(xs) - 1, int(q * len(xs)))]) for q in qs)


def better(n_target: int | None, n_standard: int | None) -> str:
    """The baseline whose design needs fewer questions ('-' where neither has a discordant pair)."""
    if n_target is None and n_standard is None:
        return "-"
    if n_target == n_standard:
        return "either"
    if n_target is None or (n_standard is not None and n_target < n_standard):
        return "target"
    return "standard"


def needed(psi: float) -> int | None:
    return None if psi <= 0 else noninferiority_sample_size(MARGIN, psi, alpha=ALPHA, power=POWER).n


def compare(records, a: str, b: str) -> dict:
    base = {r.key: r for r in records[a]}
    pairs = [(base[r.key], r) for r in records[b] if r.key in base]
    usable = [(x, y) for x, y in pairs if x.outcome != "error" and y.outcome != "error"]
    discordant = sum((x.outcome == "correct") != (y.outcome == "correct") for x, y in usable)
    positions, margins, same = [], [], 0
    for x, y in usable:
        if x.token_ids is None or y.token_ids is None:
            raise SystemExit(f"records of {a} or {b} carry no token_ids: run with this branch's engine")
        i = first_difference(x.token_ids, y.token_ids)
        if i is None:
            same += 1
        else:
            positions.append(i)
            if x.top2_margins and i < len(x.top2_margins):
                margins.append(x.top2_margins[i])
    n = len(usable)
    psi = discordant / n if n else float("nan")
    return {
        "pairs": n,
        "psi": psi,
        "n": needed(psi) if n else None,
        "identical": same / n if n else float("nan"),
        "positions": positions,
        "margin": statistics.median(margins) if margins else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", type=Path, default=ROOT / "configs" / "plans" / "demo-gpu.yaml")
    p.add_argument("--questions", type=int, default=2000, help="questions of the suite (default 2000)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--temperatures", default="0,0.6,1.0", help="comma-separated (default 0,0.6,1.0)")
    p.add_argument("--noise", default="vllm-v1,vllm-v2", help="comma-separated noise modes (default vllm-v1,vllm-v2)")
    p.add_argument("--device", help="every config's engine_options.device (cpu, cuda, cuda:N)")
    p.add_argument("--batch-size", type=int, help="engine_options.batch_size and max_num_seqs")
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "noise_designs", help="run directories")
    p.add_argument("--out", type=Path, required=True, help="where the table is written")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args(argv)
    temperatures = [float(t) for t in args.temperatures.split(",") if t.strip()]
    noises = [n.strip() for n in args.noise.split(",") if n.strip()]
    unknown = [n for n in noises if n not in RELEASES]
    if unknown:
        raise SystemExit(f"--noise: unknown mode(s) {unknown}; choose from {list(RELEASES)}")

    base = load_plan(args.plan)
    missing = [c for c in CONFIGS if c not in base.configs]
    if missing:
        raise SystemExit(f"{args.plan}: the plan has no config(s) {missing}")
    t_all = time.perf_counter()
    rows, ratio_rows, info = [], [], None
    for noise in noises:
        for temperature in temperatures:
            plan = plan_at(base, temperature, noise, args)
            out = args.runs / noise / f"T{temperature:g}"
            print(
                f"{noise}, T = {temperature:g}: decoding {len(CONFIGS)} configs into {out}", file=sys.stderr, flush=True
            )
            t0 = time.perf_counter()
            result = run_plan(plan, out, resume=args.resume, log=lambda m: print(m, file=sys.stderr, flush=True))
            print(f"{noise}, T = {temperature:g}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            if info is None:
                info = next(iter(result.manifest["configs"].values())).get("info") or {}
            records = {name: list(read_records(out / "records" / f"{name}.jsonl")) for name in CONFIGS}
            found = {}
            for a, b in PAIRS:
                r = found[a, b] = compare(records, a, b)
                rows.append(
                    [
                        noise,
                        f"{temperature:g}",
                        f"{b} vs {a}",
                        f"{r['pairs']:,}",
                        f"{r['psi']:.4f}",
                        "-" if r["n"] is None else f"{r['n']:,}",
                        f"{100 * r['identical']:.1f}%",
                        quantiles(r["positions"]),
                        "-" if r["margin"] is None else f"{r['margin']:.3f}",
                    ]
                )
            for fly in ("fly-w2", "fly-aggressive"):
                n_target, n_standard = found["target", fly]["n"], found["standard", fly]["n"]
                ratio = "-" if not n_target or not n_standard else f"{n_target / n_standard:.2f}x"
                ratio_rows.append(
                    [
                        f"{noise} ({RELEASES[noise]})",
                        f"{temperature:g}",
                        fly,
                        "-" if n_target is None else f"{n_target:,}",
                        "-" if n_standard is None else f"{n_standard:,}",
                        ratio,
                        better(n_target, n_standard),
                    ]
                )
    lines = [
        f"noise designs: plan {args.plan.name}, {args.questions} questions x {args.seeds} seeds, "
        f"T in {temperatures}, noise {', '.join(noises)}; device {info.get('device')}, GPU {info.get('gpu') or '-'}; "
        f"{time.perf_counter() - t_all:.0f} s",
        f"questions needed: paired non-inferiority at a {100 * MARGIN:g}-point margin, alpha {ALPHA}, "
        f"power {POWER}, no true loss (qualgate.stats.noninferiority_sample_size; one (question, seed) "
        "pair counted as one question); '-' where psi = 0 (no discordant pair: any sample passes)",
        "",
        text_table(
            rows,
            [
                "noise",
                "T",
                "candidate vs baseline",
                "pairs",
                "psi",
                "questions @2pt",
                "identical",
                "1st diff q10/50/90",
                "margin",
            ],
        ),
        "",
        "margin: the baseline's median top-2 probability margin at the first differing token.",
        "",
        text_table(
            ratio_rows,
            ["noise (vLLM)", "T", "FLy", "vs target", "vs standard", "ratio (target / standard)", "fewer questions"],
        ),
        "",
        "command: python benchmarks/noise_designs.py " + " ".join(sys.argv[1:] if argv is None else argv),
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
