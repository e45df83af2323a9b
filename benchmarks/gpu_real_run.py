"""The real run on one GPU: the demo pair, every mode, the gate, and the A/A calibrations.

Runs ``configs/plans/demo-gpu.yaml`` (the demo target and drafter on 2,000 synthetic
questions x 3 seeds; target-only, standard, standard with coupled noise, FLy W=2 and an
aggressive FLy, each FLy also with coupled noise) with ``qualgate run``'s harness, then writes
one text report (no data dumps) to ``benchmarks/results/demo-gpu.txt`` and prints it:

- the run: device, GPU, versions, wall time, per-config time and throughput;
- ``qualgate report``'s table (accuracy, no-answer, acceptance length, tokens/s, speed-up,
  verdict, loss bound);
- the gate (every candidate against target-only, Holm-adjusted);
- the A/A calibrations target vs standard with independent noise and with coupled noise
  (discordance, test of no difference, questions needed per loss).

    python benchmarks/gpu_real_run.py                     # on the H200
    python benchmarks/gpu_real_run.py --device cpu --questions 16 --seeds 1 --out /tmp/x \
        --results /tmp/x.txt                              # CPU smoke test of the script

``--resume`` continues a killed run in ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qualgate.config.decoding import load_plan  # noqa: E402
from qualgate.formatting import text_table  # noqa: E402
from qualgate.report.gate_text import render_text  # noqa: E402
from qualgate.report.run import render_text as render_report  # noqa: E402
from qualgate.report.run import summarize  # noqa: E402
from qualgate.run.runner import run_plan  # noqa: E402
from qualgate.verdict.calibration import render_calibration_text, run_calibration  # noqa: E402

AA = (("target", "standard", "independent noise"), ("target", "standard-coupled", "coupled noise"))


def identical_outputs(a, b) -> tuple[int, int]:
    """How many requests (same key) decoded to the same text under both configs."""
    from qualgate.records import read_records

    texts = {r.key: r.output for r in read_records(a)}
    pairs = [(texts.get(r.key), r.output) for r in read_records(b) if r.key in texts]
    return sum(x == y and x is not None for x, y in pairs), len(pairs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", type=Path, default=ROOT / "configs" / "plans" / "demo-gpu.yaml")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "demo-gpu")
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "demo-gpu.txt")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--device", help="override every config's engine_options.device")
    p.add_argument("--questions", type=int, help="override the suite limit (smoke tests)")
    p.add_argument("--seeds", type=int, help="override the seeds with range(N) (smoke tests)")
    p.add_argument("--batch-size", type=int, help="override engine_options.batch_size")
    args = p.parse_args(argv)

    plan = load_plan(args.plan)
    if args.questions:
        plan = dataclasses.replace(
            plan, suites=tuple(dataclasses.replace(s, limit=args.questions) for s in plan.suites)
        )
    if args.seeds:
        plan = dataclasses.replace(plan, seeds=tuple(range(args.seeds)))
    override = {
        k: v
        for k, v in (("device", args.device), ("batch_size", args.batch_size), ("max_num_seqs", args.batch_size))
        if v
    }
    if override:
        plan = dataclasses.replace(
            plan,
            configs={
                n: dataclasses.replace(c, engine_options={**c.engine_options, **override})
                for n, c in plan.configs.items()
            },
        )

    t0 = time.perf_counter()
    result = run_plan(plan, args.out, resume=args.resume, log=lambda m: print(m, file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0

    m = result.manifest
    infos = [c.get("info") or {} for c in m["configs"].values()]
    gpu = next((i["gpu"] for i in infos if i.get("gpu")), None)
    lines = [
        f"qualgate real run: plan {plan.name} ({args.plan.relative_to(ROOT) if args.plan.is_relative_to(ROOT) else args.plan})",
        f"run {m['run_id']}, started {m['started_at']}, ended {m['ended_at']}"
        + (f", resumed {len(m['resumed_at'])}x" if m.get("resumed_at") else ""),
        f"device {infos[0].get('device') if infos else '?'}, GPU {gpu or '-'}, "
        f"torch {m['packages'].get('torch')}, transformers {m['packages'].get('transformers')}, "
        f"qualgate {m['packages'].get('qualgate')}, git {(m.get('git') or {}).get('commit', '-')}",
        f"{m['suites'][0]['questions']} questions x {len(m['seeds'])} seeds x "
        f"{len(m['configs'])} configs; this invocation {wall:.0f} s",
        "",
    ]
    rows = []
    for name, c in m["configs"].items():
        t = c["throughput"]
        rows.append(
            [
                name,
                c["mode"],
                str((c.get("info") or {}).get("coupled", "-")).lower(),
                f"{t['requests']:,}",
                f"{t['output_tokens']:,}",
                f"{c.get('load_s', 0):.1f}",
                f"{t['engine_s']:.1f}",
                f"{t['wall_s']:.1f}",
                "-" if t["tokens_per_s"] is None else f"{t['tokens_per_s']:,.0f}",
            ]
        )
    lines += [
        text_table(
            rows, ["config", "mode", "coupled", "requests", "output tokens", "load s", "engine s", "loop s", "tok/s"]
        ),
        "",
    ]
    lines += [render_report(summarize(args.out)), ""]
    if result.gate is not None:
        lines += [render_text(result.gate), ""]
    else:
        lines += [f"gate: {m['gate'].get('message')}", ""]
    records = args.out / "records"
    for a, b, label in AA:
        if (records / f"{a}.jsonl").exists() and (records / f"{b}.jsonl").exists():
            cal = run_calibration(records / f"{a}.jsonl", records / f"{b}.jsonl")
            same, n = identical_outputs(records / f"{a}.jsonl", records / f"{b}.jsonl")
            lines += [
                f"A/A {a} vs {b} ({label}): identical output text in {same:,} of {n:,} "
                f"requests ({100 * same / max(n, 1):.1f}%)",
                render_calibration_text(cal),
                "",
            ]
    text = "\n".join(lines).rstrip() + "\n"
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
