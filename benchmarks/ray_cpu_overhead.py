"""What ``qualgate run --ray`` costs in CPU against the one-machine run of the same plan.

Each run is a ``qualgate`` process started in a cgroup of its own (cgroup v1 ``cpuacct`` or v2
``cpu.stat``), so its CPU-seconds include every process it starts: Ray's GCS, raylet and
worker (actor) processes, which are not all reaped children of the command and so escape
``getrusage``. Where no cgroup can be made, the children's ``getrusage`` is reported instead
and the table says so (a lower bound for Ray).

    python benchmarks/ray_cpu_overhead.py --limit 256 --actors 2
    python benchmarks/ray_cpu_overhead.py --limit 256 --actors 2 --pythonpath /path/to/other/checkout

Prints one row per path: CPU-seconds (user + system), wall seconds, and the ratio to the
one-machine run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qualgate.formatting import text_table  # noqa: E402

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")


def _cgroup(name: str) -> tuple[Path, str] | None:
    """A new cgroup and how to read its CPU time, or None."""
    for base, kind in ((V1, "v1"), (V2, "v2")):
        if kind == "v2" and not (base / "cgroup.controllers").exists():
            continue
        if kind == "v1" and not base.is_dir():
            continue
        path = base / name
        try:
            path.mkdir(exist_ok=True)
            return path, kind
        except OSError:
            continue
    return None


def _cpu_s(group: tuple[Path, str]) -> float:
    path, kind = group
    if kind == "v1":
        return int((path / "cpuacct.usage").read_text()) / 1e9
    for line in (path / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec"):
            return int(line.split()[1]) / 1e6
    raise RuntimeError("no usage_usec in cpu.stat")


def measure(argv: list[str], env: dict, label: str) -> dict:
    group = _cgroup(f"qualgate-bench-{os.getpid()}-{label}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    start_cpu = _cpu_s(group) if group else 0.0

    def enter():  # in the child, before exec: join the cgroup
        if group:
            (group[0] / "cgroup.procs").write_text(str(os.getpid()))

    proc = subprocess.run(argv, env=env, preexec_fn=enter, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 4):
        raise SystemExit(f"{label}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    if group:
        time.sleep(1.0)  # Ray's daemons finish exiting
        cpu, how = _cpu_s(group) - start_cpu, f"cgroup {group[1]}"
        try:
            group[0].rmdir()
        except OSError:
            pass
    else:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        how = "getrusage(children): a lower bound"
    return {"path": label, "cpu_s": cpu, "wall_s": wall, "how": how}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", default=str(ROOT / "configs" / "plans" / "demo.yaml"))
    p.add_argument("--limit", type=int, default=256)
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pythonpath", default=None, help="run another checkout's qualgate (its root)")
    args = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    base = [
        sys.executable,
        "-c",
        "from qualgate.cli import main; main()",
        "run",
        args.plan,
        "--limit",
        str(args.limit),
        "--quiet",
    ]
    base += ["--threads", str(args.threads)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        one = measure([*base, "--out", f"{tmp}/one"], env, "one machine")
        ray = measure([*base, "--out", f"{tmp}/ray", "--ray", "--ray-actors", str(args.actors)], env, "ray")
    for r in (one, ray):
        rows.append(
            [r["path"], f"{r['cpu_s']:.1f}", f"{r['wall_s']:.1f}", f"{r['cpu_s'] / one['cpu_s']:.2f}x", r["how"]]
        )
    print(f"plan {args.plan}, --limit {args.limit}, --threads {args.threads}, {args.actors} Ray actor(s)")
    print(text_table(rows, ["path", "CPU-s", "wall s", "CPU vs one machine", "measured by"]))


if __name__ == "__main__":
    main()
