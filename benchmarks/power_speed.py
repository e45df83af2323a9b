"""Wall time of every ``qualgate power`` example of its ``--help`` (issue 47: answer at once).

Each example runs as its own process (``python -m qualgate power ... --format json``), so the
time includes start-up, as a user sees it. ``--code DIR``: time the package in DIR instead of
this checkout (a copy of it before the change: ``git archive <commit> qualgate | tar -x -C DIR``). The ``--discordance-from`` example needs a pilot: the
script writes one (300 questions, 18 flips) into a temporary directory.

Usage: ``python benchmarks/power_speed.py [--code /tmp/old] [--timeout 600] [--methods default,exact,normal]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

EXAMPLES = [
    "--margin 0.02 --discordant 0.06",
    "--margin 0.02 --loss 0.005 --discordant 0.06",
    "--margin 0.02 --n 1000 --discordant 0.06",
    "--design mcnemar --loss 0.02 --discordant 0.06",
    "--design mcnemar --n 428 --discordant 0.06",
    "--margin 0.02 --loss 0,0.005 --discordant 0.04,0.06",
    "--margin 0.02 --discordance-from {pilot}/standard.jsonl {pilot}/fly.jsonl",
]


def write_pilot(folder):
    """300 questions, one seed: the candidate flips 18 (10 lost, 8 gained), ψ = 0.06 (qualgate's writer)."""
    from qualgate.records import Record, RecordWriter

    for name, flip in (("standard", set()), ("fly", set(range(18)))):
        with RecordWriter(os.path.join(folder, f"{name}.jsonl")) as writer:
            writer.write_batch(
                [Record(1, "pilot", name, "gsm8k", "1", f"q{q}", 0, 0, outcome(q, flip), f"p{q}") for q in range(300)]
            )


def outcome(q, flip):
    correct = (q % 2 == 0 or q < 10) != (q in flip)
    return "correct" if correct else "incorrect"


def run(code, example, method, timeout):
    args = [sys.executable, "-m", "qualgate", "power", *example.split(), "--format", "json"]
    if method:
        args += ["--method", method]
    env = dict(os.environ, PYTHONPATH=str(code))
    cpu0 = _child_cpu()
    t0 = time.perf_counter()
    try:
        out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=code)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0, math.nan
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if out.returncode:
        return f"exit {out.returncode}: {out.stderr.strip()[-200:]}", wall, cpu
    rows = json.loads(out.stdout)
    rows = rows if isinstance(rows, list) else [rows]
    key = rows[0]["solved_for"]
    answer = ",".join(
        str(r[key] if key == "n" else round(r[key], 5)) + (f"/{r['n_stable']}" if key == "n" else "") for r in rows
    )
    return answer, wall, cpu


def _child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--code", default=str(ROOT), help="the folder holding the qualgate/ to time (default: this checkout)"
    )
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--methods", default="default,exact,normal")
    ap.add_argument("--examples", default="", help="1-based numbers of the examples to run (default: all)")
    args = ap.parse_args()
    methods = [None if m == "default" else m for m in args.methods.split(",")]
    with tempfile.TemporaryDirectory() as pilot:
        write_pilot(pilot)
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        print(f"{'example':<58} {'method':<8} {'answer (n/n_stable, power or loss)':<36} {'wall s':>7} {'CPU s':>6}")
        chosen = [int(i) for i in args.examples.split(",")] if args.examples else range(1, len(EXAMPLES) + 1)
        for example in (EXAMPLES[i - 1] for i in chosen):
            example = example.format(pilot=pilot)
            for method in methods:
                answer, wall, cpu = run(pathlib.Path(args.code), example, method, args.timeout)
                shown = example.replace(pilot, "PILOT")
                answer = "timed out" if answer is None else answer
                print(f"{shown:<58} {method or 'default':<8} {answer:<36} {wall:>7.2f} {cpu:>6.2f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}; CPU s: user + system of the process")


if __name__ == "__main__":
    main()
