"""``qualgate run`` on one GPU and on every visible GPU: speed, loading share, same records.

Runs ``configs/plans/demo-gpu.yaml`` (the demo pair; every config, or ``--configs``) twice
through the harness: pinned to ``cuda:0``, then spread over all visible GPUs (one engine per
GPU, :mod:`qualgate.backends._devices`). Prints per run the loading time (worker processes,
models, first CUDA use), the decoding-loop time, the total, output tokens/s and the speed-up
over one GPU, then how many records differ between the two runs apart from timing fields.

    python benchmarks/bench_devices.py --seeds 6              # on a machine with 2+ GPUs
    python benchmarks/bench_devices.py --devices cpu,cpu --questions 8 --seeds 1 --configs target
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qualgate.backends import open_backend  # noqa: E402
from qualgate.backends._devices import DeviceParallelBackend, comparable_records as records, visible_cuda_devices  # noqa: E402
from qualgate.config import load_plan  # noqa: E402
from qualgate.harness import run_plan  # noqa: E402

def timed_run(plan, out: Path, factory) -> dict:
    t = time.perf_counter()
    run_plan(plan, out, backend_factory=factory)
    total = time.perf_counter() - t
    manifest = json.loads((out / "manifest.json").read_text())
    configs = manifest["configs"].values()
    return {
        "total_s": total,
        "load_s": sum(c.get("load_s", 0.0) for c in configs),
        "loop_s": sum(c["throughput"]["wall_s"] for c in configs),
        "tokens": sum(c["throughput"]["output_tokens"] for c in configs),
        "requests": sum(c["throughput"]["requests"] for c in configs),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", default=str(ROOT / "configs" / "plans" / "demo-gpu.yaml"))
    ap.add_argument("--configs", default=None, help="comma-separated config names (default: all)")
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--devices", default=None, help="comma-separated devices (default: every CUDA device)")
    ap.add_argument("--out", default=None, help="folder for the two runs (default: a temporary one)")
    args = ap.parse_args(argv)
    devices = args.devices.split(",") if args.devices else visible_cuda_devices()
    if len(devices) < 2:
        ap.error(f"needs two or more devices, found {devices}")

    plan = load_plan(args.plan)
    names = args.configs.split(",") if args.configs else list(plan.configs)
    plan = dataclasses.replace(
        plan,
        configs={n: plan.configs[n] for n in names},
        baseline=names[0],
        candidates=tuple(names[1:]),
        seeds=tuple(range(args.seeds)),
        suites=tuple(dataclasses.replace(s, limit=args.questions) for s in plan.suites),
    )

    def pinned(config):  # one GPU: the first device, in this process
        return open_backend(dataclasses.replace(config, engine_options={**config.engine_options, "device": devices[0]}))

    opened = []

    def spread(config):
        opened.append(DeviceParallelBackend(config, devices))
        return opened[-1]

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_devices-"))
    rows = []
    one = timed_run(plan, root / "one", pinned)
    many = timed_run(plan, root / "many", spread)
    rows += [(devices[0], one), (",".join(devices), many)]
    a, b = records(root / "one"), records(root / "many")
    differ = sum(a[k] != b.get(k) for k in a) + len(set(b) - set(a))

    print(f"# bench_devices: plan {Path(args.plan).name}, configs {', '.join(names)}; "
          f"{args.questions} questions x {args.seeds} seeds = {one['requests']} requests, "
          f"{one['tokens']:,} output tokens (one GPU)")
    print("# load s: worker processes, models, first CUDA use (all configs); loop s: the harness's "
          "decoding loops; total s: run_plan, gate included")
    print()
    print(f"| {'devices':<24} | {'load s':>7} | {'loop s':>7} | {'total s':>8} | {'load share':>10} "
          f"| {'tokens/s (total)':>16} | {'speed-up loop':>13} | {'speed-up total':>14} |")
    print(f"|{'-' * 26}|{'-' * 9}|{'-' * 9}|{'-' * 10}|{'-' * 12}|{'-' * 18}|{'-' * 15}|{'-' * 16}|")
    for label, r in rows:
        print(f"| {label:<24} | {r['load_s']:>7.1f} | {r['loop_s']:>7.1f} | {r['total_s']:>8.1f} "
              f"| {r['load_s'] / r['total_s']:>10.1%} | {r['tokens'] / r['total_s']:>16,.0f} "
              f"| {one['loop_s'] / r['loop_s']:>12.2f}x | {one['total_s'] / r['total_s']:>13.2f}x |")
    busy = [sum(b.busy_s[i] for b in opened) for i in range(len(devices))]
    print(f"# {','.join(devices)}: seconds each device spent decoding (in its worker), and their share "
          f"of the loop: " + ", ".join(f"{d} {s:.1f} s ({s / many['loop_s']:.0%})" for d, s in zip(devices, busy)))
    print()
    print(f"# records differing between the two runs (timing fields aside): {differ} of {len(a)}")


if __name__ == "__main__":
    main()
