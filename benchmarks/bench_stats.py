"""Time the statistics core against its 1-second goal and print a table.

    python benchmarks/bench_stats.py

Library calls are timed in-process (median of several runs, after one warm-up); the CLI grid
is timed end to end as a subprocess, interpreter start-up and imports included. Both wall-clock
and CPU time (user + system, of the child process for the CLI) are shown: on a shared machine
the wall time includes waiting for a core, so the verdict uses CPU time and the load average
is printed beside it.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from qualgate.stats import mcnemar, mcnemar_sample_size

GOAL_S = 1.0


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, repeat=5):
    """Median wall-clock and CPU seconds of ``fn()`` over ``repeat`` runs after a warm-up."""
    fn()  # warm-up (imports, caches)
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), _cpu()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def cli(*args):
    exe = shutil.which("qualgate")
    cmd = [exe] if exe else [sys.executable, "-c", "from qualgate.cli import main; main()"]
    return lambda: subprocess.run([*cmd, "power", *args], check=True, capture_output=True)


GRID = ("--loss", "0.01,0.02,0.03", "--discordant", "0.04,0.06,0.08")
CASES = [
    ("exact McNemar, 10^6 discordant pairs", lambda: mcnemar(500_500, 499_500), 20),
    ("mid-p McNemar, 10^6 discordant pairs", lambda: mcnemar(500_500, 499_500, method="midp"), 20),
    ("exact sample size, loss 0.01, discordant 0.06", lambda: mcnemar_sample_size(0.01, 0.06, method="exact"), 5),
    ("exact sample size, loss 0.005, discordant 0.06", lambda: mcnemar_sample_size(0.005, 0.06, method="exact"), 3),
    ("CLI grid 3x3, normal (subprocess)", cli(*GRID), 3),
    ("CLI grid 3x3, exact (subprocess)", cli(*GRID, "--method", "exact"), 3),
]


def main():
    rows = [(name, *timed(fn, repeat)) for name, fn, repeat in CASES]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'task':<{width}}  {'wall ms':>8}  {'CPU ms':>8}  {'goal ms':>7}  within goal (CPU)")
    for name, wall, cpu in rows:
        verdict = "yes" if cpu < GOAL_S else "NO"
        print(f"{name:<{width}}  {wall * 1e3:8.2f}  {cpu * 1e3:8.2f}  {GOAL_S * 1e3:7.0f}  {verdict}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average {load} on {os.cpu_count()} cores; median of 3-20 runs after a warm-up")
    print(
        f"result: exact McNemar p = {mcnemar(500_500, 499_500).pvalue:.6f}; "
        f"exact n(0.01, 0.06) = {mcnemar_sample_size(0.01, 0.06, method='exact').n}"
    )


if __name__ == "__main__":
    main()
