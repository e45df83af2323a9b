"""``qualgate run`` on one GPU and on every visible GPU: speed, loading share, same records.

Runs ``configs/plans/demo-gpu.yaml`` (the demo pair; every config, or ``--configs``) through
the harness once per variant (``--variants``, in order; the first is the reference):

- ``one``: the first device, in one worker process (``qualgate run`` on one GPU);
- ``many``: every device, one worker each, as ``qualgate run`` opens them
  (:mod:`qualgate.backends._devices`: a share of the CPU threads each, bound to the GPU's
  NUMA node);
- ``many-plain``: every device, one worker each, torch's default threads and no binding;
- ``in-process``: the first device, the engine in this process (as before the workers).

Prints per run the loading time (worker processes, models, first CUDA use; the first
config's and the others'), the decoding-loop time, the engine's own seconds (in this
process, or the busiest worker), the rest of the run (suites, gate, report), the total,
output tokens/s and the speed-up over the reference; then, per run and device, where the
engine's seconds went (:meth:`qualgate.engines.reference.ReferenceEngine.timing`: steps and
milliseconds per step, prompt encoding, prefills, outputs); then how many records differ from
the reference's apart from timing fields.

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

from qualgate.backends import open_backend
from qualgate.backends._devices import DeviceParallelBackend, visible_cuda_devices
from qualgate.backends._devices import comparable_records as records
from qualgate.config.decoding import load_plan
from qualgate.engines.reference import TIMING_KEYS
from qualgate.run.runner import run_plan


def timed_run(plan, out: Path, factory) -> dict:
    t = time.perf_counter()
    run_plan(plan, out, backend_factory=factory)
    total = time.perf_counter() - t
    manifest = json.loads((out / "manifest.json").read_text())
    configs = list(manifest["configs"].values())
    infos = [c.get("info", {}) for c in configs]
    load = [c.get("load_s", 0.0) for c in configs]
    # each device's seconds decoding and engine timing, summed over the configs (from each
    # config's info at its close: per worker, or this process's engine)
    if "devices" in infos[0]:
        n = len(infos[0]["devices"])
        busy = [sum(i["busy_s"][d] for i in infos) for d in range(n)]
        per_device = [[i["engine_timing"][d] or {} for i in infos] for d in range(n)]
    else:
        busy, per_device = [], [[i.get("engine_timing") or {} for i in infos]]
    timing = [{k: sum(t.get(k, 0) for t in ts) for k in TIMING_KEYS} for ts in per_device]
    return {
        "total_s": total,
        "load_s": sum(load),
        "load_first_s": load[0],
        "loop_s": sum(c["throughput"]["wall_s"] for c in configs),
        # in this process: the engine's calls; spread: the busiest worker's seconds decoding
        "engine_s": max(busy) if busy else sum(c["throughput"]["engine_s"] for c in configs),
        "busy": busy,
        "timing": timing,
        "tokens": sum(c["throughput"]["output_tokens"] for c in configs),
        "requests": sum(c["throughput"]["requests"] for c in configs),
        "info": infos[0],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", default=str(ROOT / "configs" / "plans" / "demo-gpu.yaml"))
    ap.add_argument("--configs", default=None, help="comma-separated config names (default: all)")
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--devices", default=None, help="comma-separated devices (default: every CUDA device)")
    ap.add_argument("--out", default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument(
        "--variants",
        default="one,many",
        help="comma-separated runs among one, many, many-plain, in-process (default: one,many)",
    )
    args = ap.parse_args(argv)
    devices = args.devices.split(",") if args.devices else visible_cuda_devices()
    variants = args.variants.split(",")
    if not set(variants) <= {"one", "many", "many-plain", "in-process"}:
        ap.error(f"unknown variant in {args.variants!r}")
    if len(devices) < 2 and any(v.startswith("many") for v in variants):
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

    def factory(variant):
        if variant == "in-process":  # the first device, in this process
            return lambda config: open_backend(
                dataclasses.replace(config, engine_options={**config.engine_options, "device": devices[0]})
            )
        on = devices[:1] if variant == "one" else devices
        plain = variant == "many-plain"
        return lambda config: DeviceParallelBackend(
            config, on, threads=_torch_default_threads() if plain else None, pin=not plain
        )

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_devices-"))
    rows = []
    for v in variants:
        rows.append((v, timed_run(plan, root / v, factory(v))))
        r = rows[-1][1]  # (as it finishes: a run cut short still tells what it measured)
        print(f"# {v}: load {r['load_s']:.1f} s, loop {r['loop_s']:.1f} s, total {r['total_s']:.1f} s", flush=True)
    ref_name, ref = rows[0]
    ref_records = records(root / ref_name)

    print(
        f"# bench_devices: plan {Path(args.plan).name}, configs {', '.join(names)}; "
        f"{args.questions} questions x {args.seeds} seeds = {ref['requests']} requests, "
        f"{ref['tokens']:,} output tokens ({ref_name}); devices {', '.join(devices)}"
    )
    print(
        "# load s: worker processes, models, first CUDA use (all configs; first: the first config's); "
        "loop s: the harness's decoding loops; engine s: the engine's own seconds (spread: the busiest "
        "worker's); rest s: suites, gate, report; total s: run_plan"
    )
    print()
    cols = (
        "variant",
        "load s",
        "first",
        "loop s",
        "engine s",
        "rest s",
        "total s",
        "load share",
        "tokens/s",
        "loop speed-up",
        "total speed-up",
        "threads",
        "pinned CPUs",
    )
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("-" * (len(c) + 2) for c in cols) + "|")
    for v, r in rows:
        rest = r["total_s"] - r["load_s"] - r["loop_s"]
        info = r["info"]
        print(
            f"| {v} | {r['load_s']:.1f} | {r['load_first_s']:.1f} | {r['loop_s']:.1f} | {r['engine_s']:.1f} "
            f"| {rest:.1f} | {r['total_s']:.1f} | {r['load_s'] / r['total_s']:.1%} "
            f"| {r['tokens'] / r['total_s']:,.0f} | {ref['loop_s'] / r['loop_s']:.2f}x "
            f"| {ref['total_s'] / r['total_s']:.2f}x | {info.get('threads')} | {info.get('pinned_cpus', '-')} |"
        )
    print()
    for v, r in rows:
        if r["busy"]:
            print(
                f"# {v}: seconds each device spent decoding (in its worker), and their share of the loop: "
                + ", ".join(
                    f"{d} {s:.1f} s ({s / r['loop_s']:.0%})"
                    for d, s in zip(r["info"].get("devices", devices), r["busy"])
                )
            )
    print()
    print(
        "# where each engine's seconds went (ReferenceEngine.timing, all configs): prepare = arguments and "
        "prompt encoding, prefill = batch set-up and prefill, steps = decoding steps, finish = outputs"
    )
    tcols = ("variant", "device", "rows", "steps", "ms per step", "prepare s", "prefill s", "steps s", "finish s")
    print("| " + " | ".join(tcols) + " |")
    print("|" + "|".join("-" * (len(c) + 2) for c in tcols) + "|")
    for v, r in rows:
        names = r["info"].get("devices") or [devices[0]]
        for d, t in zip(names, r["timing"]):
            ms = 1000 * t["steps_s"] / t["steps"] if t["steps"] else float("nan")
            print(
                f"| {v} | {d} | {t['rows']:,} | {t['steps']:,} | {ms:.2f} | {t['prepare_s']:.1f} "
                f"| {t['prefill_s']:.1f} | {t['steps_s']:.1f} | {t['finish_s']:.1f} |"
            )
    print()
    for v, _ in rows[1:]:
        other = records(root / v)
        differ = sum(ref_records[k] != other.get(k) for k in ref_records) + len(set(other) - set(ref_records))
        print(f"# records of {v} differing from {ref_name}'s (timing fields aside): {differ} of {len(ref_records)}")


def _torch_default_threads() -> int:
    """torch's own intra-op thread count on this machine (a new process's default)."""
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
