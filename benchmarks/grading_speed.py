"""Grading speed on real model outputs, with math-verify's time limit enforced.

Grades the real outputs of ../shared/data/real_outputs (GSM8K, MATH-500, AIME 2024,
GPQA-Diamond; about 4,700) with the built-in suites, ``--passes`` times over (default 3: about
14,000 gradings), split over ``--workers`` processes (default 2, one per core of the CI
machine). Each worker grades in its main thread, so every math-verify comparison runs under
the SIGALRM limit of the suite (MATH-500: 5 s); the comparisons that reached it are counted.
Gold answers are parsed once per process (as in a run, where each gold is graded for every
seed, sample and configuration); outputs are never cached.

Prints one table: per suite the outputs graded, the CPU seconds spent (summed over workers),
the outputs per CPU second and the comparisons that reached the time limit; then the wall
time of the whole grading and the load average (the limit is wall-clock time, and on a
shared machine other jobs' load inflates both).

    python benchmarks/grading_speed.py [--workers 2] [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import time
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real_outputs"
SUITES = ("gsm8k", "math500", "aime25", "gpqa_diamond")


class _Count(logging.Handler):
    def __init__(self):
        super().__init__()
        self.timeouts = 0

    def emit(self, record):
        self.timeouts += "ran past" in record.getMessage()


_suites: dict = {}


def _grade(job):
    """Grade a chunk of (suite, question, gold, output); CPU seconds and timeouts per suite."""
    from qualgate.suites import Question, Suite, suite_path
    from qualgate.suites._spec import read_spec

    counter = _Count()
    logging.getLogger("qualgate.graders").addHandler(counter)
    cpu, n, timeouts, outcomes = Counter(), Counter(), Counter(), Counter()
    for name, question, gold, output in job:
        if name not in _suites:
            spec = read_spec(suite_path(name))
            _suites[name] = Suite(name, spec.version, (), {}, "either", _spec=spec)
        before, t = counter.timeouts, time.process_time()
        g = _suites[name].grade(Question("q", ({"role": "user", "content": question},), gold, "-"), output)
        cpu[name] += time.process_time() - t
        n[name] += 1
        timeouts[name] += counter.timeouts - before
        outcomes[g.outcome] += 1
    logging.getLogger("qualgate.graders").removeHandler(counter)
    return cpu, n, timeouts, outcomes


def _warm(_):
    from qualgate.graders import _math

    _math._mv()  # import math-verify once per worker, outside the timing
    return os.getpid()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    items = []
    for name in SUITES:
        with open(DATA / f"{name}.jsonl", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        items += [(name, r["question"], r["gold"], r["output"]) for r in rows]
    work = items * args.passes
    # Interleave the suites so that the workers get the same mix; chunks keep IPC small.
    work = work[::2] + work[1::2]
    chunks = [work[i : i + 50] for i in range(0, len(work), 50)]
    load = os.getloadavg()
    with mp.get_context("fork").Pool(args.workers) as pool:
        pool.map(_warm, range(args.workers))
        t0 = time.perf_counter()
        results = pool.map(_grade, chunks, chunksize=1)
        wall = time.perf_counter() - t0
    cpu, n, timeouts, outcomes = Counter(), Counter(), Counter(), Counter()
    for c, k, t, o in results:
        cpu.update(c), n.update(k), timeouts.update(t), outcomes.update(o)
    print(
        f"{len(work):,} gradings ({len(items):,} real outputs x {args.passes} passes), "
        f"{args.workers} worker processes, os.cpu_count() = {os.cpu_count()}"
    )
    print("| suite | outputs | CPU s | outputs per CPU s | comparisons that reached the time limit |")
    print("|---|---:|---:|---:|---:|")
    for name in SUITES:
        print(f"| {name} | {n[name]:,} | {cpu[name]:.1f} | {n[name] / cpu[name]:,.0f} | {timeouts[name]} |")
    total = sum(cpu.values())
    print(f"| all | {sum(n.values()):,} | {total:.1f} | {sum(n.values()) / total:,.0f} | {sum(timeouts.values())} |")
    print(f"outcomes: {dict(outcomes)}")
    print(
        f"wall time: {wall:.1f} s for {len(work):,} outputs ({len(work) / wall:,.0f} per second); "
        f"load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f} (other jobs share the cores)"
    )


if __name__ == "__main__":
    main()
