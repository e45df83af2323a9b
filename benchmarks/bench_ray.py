"""What Ray costs: ``qualgate run --ray`` against the default path of ``qualgate run``.

The same plan is run by :func:`qualgate.run.runner.run_plan` with the default backend factory
(:func:`qualgate.backends._devices.open_on_devices`: in this process on CPU, one worker
process per GPU on CUDA) and on the actors of a Ray cluster (:class:`qualgate.run.ray_backend.RayCluster`,
``--actors`` of them), alternating, ``--repeats`` times each. Per path:

- *first batch s*: from calling ``run_plan`` to the first batch's records on disk (the
  backend's start: for Ray the actors' processes, their imports and model loads; the Ray
  instance's own start is *ray.init s*, apart);
- *loop s*: the harness loops of every config (manifest ``throughput.wall_s``);
- *engine s*: time inside the engine's ``generate``: in the process (``throughput.engine_s``), or
  inside the actors, summed over them (``info.ray.busy_s``);
- *overhead/request*: ``(loop s - engine s / actors) / requests``: what the path adds per
  request beyond decoding, with the actors' decoding counted as parallel (grading, records,
  transport, queueing, idle actors);
- *records*: the records differing from the default path's, timing fields left out.

    python benchmarks/bench_ray.py                                  # demo weights, CPU
    python benchmarks/bench_ray.py --plan configs/plans/demo-gpu.yaml --actors 1   # one GPU
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qualgate.backends._devices import comparable_records, open_on_devices  # noqa: E402
from qualgate.config.decoding import Plan, SuiteRef, load_plan, parse_config  # noqa: E402
from qualgate.formatting import text_table  # noqa: E402
from qualgate.run.runner import load_suites, run_plan  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "qualgate" / "demo" / "weights"


def built_plan(args) -> Plan:
    """A one-config plan (target-only) on the demo weights over the demo suite."""
    cfg = parse_config(
        {
            "name": "target",
            "engine": "reference",
            "model": str(DEMO / "target"),
            "sampling": {"temperature": 1.0, "max_tokens": args.max_tokens},
            "engine_options": {"device": args.device, "batch_size": args.batch_size},
        }
    )
    return Plan(
        name="bench-ray",
        suites=(SuiteRef("demo_arithmetic", limit=args.questions),),
        seeds=(0,),
        samples=1,
        configs={"target": cfg},
        baseline="target",
        candidates=(),
    )


class _FirstBatch:
    """``progress`` for run_plan that notes when the first batch was written."""

    def __init__(self):
        self.at = None

    def __call__(self, label, total):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        if self.at is None:
            self.at = time.perf_counter()


def one_run(plan, suites, out, factory):
    first = _FirstBatch()
    t0 = time.perf_counter()
    result = run_plan(plan, out, suites=suites, backend_factory=factory, progress=first)
    configs = result.manifest["configs"].values()
    loop = sum(c["throughput"]["wall_s"] for c in configs)
    requests = sum(c["throughput"]["requests"] for c in configs)
    ray_info = [c["info"].get("ray") for c in configs]
    if all(ray_info):
        engine = sum(b for r in ray_info for b in r["busy_s"] if b is not None)
        actors = len(ray_info[0]["actors"])
    else:
        engine, actors = sum(c["throughput"]["engine_s"] for c in configs), 1
    return {
        "first": first.at - t0,
        "loop": loop,
        "engine": engine,
        "actors": actors,
        "requests": requests,
        "total": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", type=Path, help="a plan file (default: a one-config plan on the demo weights)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--questions", type=int, default=96)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--actors", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads in this process and in each actor")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--address", default=None, help="a Ray address (default: a local instance)")
    p.add_argument("--keep", type=Path, help="keep the run directories here")
    args = p.parse_args(argv)

    import torch

    from qualgate.run.ray_backend import RayCluster, import_ray

    torch.set_num_threads(args.threads)
    plan = load_plan(args.plan) if args.plan else built_plan(args)
    suites = load_suites(plan)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="bench-ray-"))
    ray = import_ray()
    t0 = time.perf_counter()
    init = {} if args.address else {"runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(args.threads)}}}
    rows, runs = [], {"qualgate run": [], "--ray": []}
    with RayCluster(args.address, actors=args.actors, threads=args.threads, init=init) as cluster:
        init_s = time.perf_counter() - t0
        described = cluster.describe()
        for rep in range(args.repeats):
            runs["qualgate run"].append(one_run(plan, suites, tmp / f"default-{rep}", open_on_devices))
            # a fresh set of actors per repeat, so that each first batch pays for their start
            for key in list(cluster._pools):
                cluster._kill(key)
            runs["--ray"].append(one_run(plan, suites, tmp / f"ray-{rep}", cluster.open))
    reference = comparable_records(tmp / "default-0")
    for path, got in runs.items():
        differ = []
        for rep in range(args.repeats):
            mine = comparable_records(tmp / f"{'default' if path == 'qualgate run' else 'ray'}-{rep}")
            differ.append(sum(mine.get(k) != v for k, v in reference.items()) + len(set(mine) - set(reference)))
        best = min(got, key=lambda r: r["loop"])
        per_request = [(r["loop"] - r["engine"] / r["actors"]) / r["requests"] for r in got]
        rows.append(
            [
                path,
                best["actors"],
                best["requests"],
                f"{statistics.median(r['first'] for r in got):.2f}",
                f"{best['loop']:.2f}",
                f"{best['engine']:.2f}",
                f"{1000 * min(per_request):.2f}",
                f"{100 * (best['loop'] / (best['engine'] / best['actors']) - 1):.1f}%",
                f"{best['total']:.2f}",
                "/".join(map(str, differ)),
            ]
        )
    what = (
        str(args.plan)
        if args.plan
        else (
            f"one config (target) on the demo weights, {args.questions} questions, "
            f"batch {args.batch_size}, max_tokens {args.max_tokens}"
        )
    )
    print(
        f"Ray against qualgate run's default path: {what}; device {args.device if not args.plan else 'from the plan'}; "
        f"{args.threads} torch thread(s) per process; ray {ray.__version__}, {len(described['nodes'])} node(s), "
        f"{described['cpus']:g} CPUs, {described['gpus']:g} GPUs; ray.init s {init_s:.2f}; best of {args.repeats} "
        "(first batch: median)"
    )
    print(
        text_table(
            rows,
            [
                "path",
                "actors",
                "requests",
                "first batch s",
                "loop s",
                "engine s",
                "overhead/request ms",
                "overhead",
                "run s",
                "records differing",
            ],
        )
    )
    print(
        "loop s: the harness loops (every config); engine s: inside the engine's generate (in the actors for "
        "--ray, summed); overhead/request = (loop - engine/actors) / requests; overhead = loop / (engine/actors) - 1; "
        "run s: run_plan from the call to its return (backend start, gate, manifest); records differing: "
        "per repeat, against the default path's first run, timing fields left out."
    )
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
