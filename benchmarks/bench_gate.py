"""CPU time and peak memory of the gate on N paired records per side.

Writes a baseline and a candidate JSON Lines file of ``--pairs`` records each (realistic
fields: hashes, mode, token counts, latency; ``--seeds`` seeds per question) in a temporary
directory, then runs each step in a fresh child process and reports its CPU seconds (user +
system) and peak resident memory (``ru_maxrss``, from ``os.wait4``):

- ``read+pair``: :func:`qualgate.verdict.pairing.load_side` on both sides (reading,
  validating, hashing) and :func:`~qualgate.verdict.pairing.pair_records`;
- ``gate``: the command, ``qualgate gate B C --margin 0.02 --format json`` (one seed: the
  exact unconditional test runs too; three seeds: the clustered path).

A child still running after ``--timeout`` CPU seconds is killed and reported as a cut-off.
With ``--repeat N`` each step runs N times: "cpu s" is the median run (user + system; "sys s"
its system part), "least" the least, "peak MiB" the largest peak.
``--pythonpath`` measures another copy of the package (the "before").

Run: ``python benchmarks/bench_gate.py --pairs 1000000 --seeds 1 3``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_READ_PAIR = """
import sys
from qualgate.verdict.pairing import load_side, pair_records
b, c = load_side(sys.argv[1]), load_side(sys.argv[2])
p = pair_records(b, c)
print(p.n_pairs, "pairs")
"""


def write_pair(directory: Path, pairs: int, seeds: int, rng, fmt: str = "jsonl") -> tuple[Path, Path]:
    """Two record files as ``qualgate run`` writes them (canonical JSON, one object a line), or
    the same records as Parquet (``fmt="parquet"``, written by pyarrow from the JSON Lines)."""
    base = rng.random(pairs) < 0.8
    cand = base ^ (rng.random(pairs) < 0.03)
    paths = []
    for name, correct, mode in (("baseline", base, "target"), ("candidate", cand, "fly")):
        path = directory / f"{name}-{pairs}-{seeds}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for i, c in enumerate(correct.tolist()):
                row = {
                    "schema_version": 1,
                    "run_id": "run-0001",
                    "config_id": f"cfg-{mode}",
                    "suite": "gsm8k",
                    "suite_version": "3",
                    "question_id": f"gsm8k-{i // seeds:07d}",
                    "seed": 1000 + i % seeds,
                    "sample_index": 0,
                    "outcome": "correct" if c else "incorrect",
                    "prompt_hash": f"sha256:{i // seeds:064x}",
                    "mode": mode,
                    "answer_strict": "42",
                    "gold": "42",
                    "output_tokens": 300 + i % 97,
                    "latency_s": 1.5,
                }
                fh.write(json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n")
        if fmt == "parquet":
            import pyarrow.json as pj
            import pyarrow.parquet as pq

            parquet = path.with_suffix(".parquet")
            pq.write_table(pj.read_json(path), parquet)
            path.unlink()
            path = parquet
        paths.append(path)
    return paths[0], paths[1]


def measure(argv: list[str], env: dict, timeout: float, cwd) -> tuple[float, float, float, str]:
    """(CPU seconds, of them system, peak RSS in MiB, status) of one child process, run in
    ``cwd`` (``-m`` and ``-c`` put the working directory first on the path: never the checkout,
    so that ``--pythonpath`` decides which package is measured)."""
    log = tempfile.TemporaryFile()  # never a pipe: a report over the pipe's buffer would block the child
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        resource.prlimit(proc.pid, resource.RLIMIT_CPU, (int(timeout), int(timeout) + 5))
    except (OSError, ValueError):  # pragma: no cover - prlimit unavailable
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    log.seek(0)
    out = log.read().decode(errors="replace").strip().splitlines()
    log.close()
    cpu = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    state = f"exit {code}" if code >= 0 else f"killed (signal {-code}) at the {int(timeout)} CPU-s cut-off"
    return cpu, usage.ru_stime, usage.ru_maxrss / 1024, f"{state}: {out[-1][:80] if out else ''}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[100_000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--formats", nargs="+", default=["jsonl"], choices=["jsonl", "parquet"])
    ap.add_argument("--steps", nargs="+", default=["read+pair", "gate"], choices=["read+pair", "gate"])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each step: the table shows the median and the least")
    ap.add_argument("--timeout", type=float, default=120, help="CPU seconds before a step is cut off")
    ap.add_argument("--pythonpath", default=None, help="the qualgate package to measure (default: this one)")
    args = ap.parse_args(argv)
    env = dict(os.environ, GITHUB_STEP_SUMMARY="")
    env["PYTHONPATH"] = args.pythonpath or str(Path(__file__).resolve().parents[1])
    rng = np.random.default_rng(0)
    print(f"qualgate from {env['PYTHONPATH']}")
    print(
        f"{'pairs':>9} {'seeds':>5} {'format':>7}  {'step':<10} {'cpu s':>7} {'least':>7} {'sys s':>6} "
        f"{'peak MiB':>9}  status"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for pairs, seeds, fmt in itertools.product(args.pairs, args.seeds, args.formats):
            b, c = write_pair(Path(tmp), pairs, seeds, rng, fmt)
            for step in args.steps:
                if step == "read+pair":
                    cmd = [sys.executable, "-c", _READ_PAIR, str(b), str(c)]
                else:
                    cmd = [sys.executable, "-m", "qualgate", "gate", str(b), str(c), "--margin", "0.02"]
                    cmd += ["--format", "json"]
                runs = sorted(measure(cmd, env, args.timeout, tmp) for _ in range(args.repeat))
                cpu, sys_s, _, state = runs[len(runs) // 2]
                least, peak = runs[0][0], max(r[2] for r in runs)
                if step == "gate" and state.startswith("exit"):
                    state = state.split(":")[0]
                print(
                    f"{pairs:>9,} {seeds:>5} {fmt:>7}  {step:<10} {cpu:>7.2f} {least:>7.2f} {sys_s:>6.2f} "
                    f"{peak:>9.0f}  {state}",
                    flush=True,
                )
            b.unlink()
            c.unlink()


if __name__ == "__main__":
    main()
