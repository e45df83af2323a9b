"""Speed of the gate on 100,000 paired records (goal: under 2 s end to end).

Writes a baseline and a candidate JSON Lines file of 100,000 records each (realistic fields:
hashes, mode, token counts, latency) in a temporary directory, then times, best of
``--repeat`` runs, wall clock and CPU:

- reading and validating both files (:func:`qualgate.records.read_records`);
- pairing them (:func:`qualgate.verdict.pairing.pair_records`);
- the statistics and verdict (:func:`qualgate.verdict.fixed.gate`);
- everything, as the command runs it (``qualgate gate B C --margin 0.02 --format json``).

Two layouts: 100,000 questions with one seed, and 33,334 questions with three seeds
(clustered analysis).

Run: ``python benchmarks/bench_gate.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import Record, RecordWriter, read_records
from qualgate.verdict.fixed import gate
from qualgate.verdict.pairing import pair_records


def write_pair(directory: Path, pairs: int, seeds: int, rng) -> tuple[Path, Path]:
    base = rng.random(pairs) < 0.8
    cand = base ^ (rng.random(pairs) < 0.03)
    paths = []
    for name, correct, mode in (("baseline", base, "target"), ("candidate", cand, "fly")):
        path = directory / f"{name}-{seeds}.jsonl"
        records = [
            Record(
                1,
                "run-0001",
                f"cfg-{mode}",
                "gsm8k",
                "3",
                f"gsm8k-{i // seeds:06d}",
                1000 + i % seeds,
                0,
                "correct" if c else "incorrect",
                f"sha256:{i // seeds:064x}",
                mode=mode,
                answer_strict="42",
                gold="42",
                output_tokens=int(300 + i % 97),
                latency_s=1.5,
            )
            for i, c in enumerate(correct)
        ]
        with RecordWriter(path) as w:
            w.write_batch(records)
        paths.append(path)
    return paths[0], paths[1]


def best(fn, repeat):
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seeds in (1, 3):
            b, c = write_pair(Path(tmp), args.pairs, seeds, rng)
            size = (b.stat().st_size + c.stat().st_size) / 2**20
            w, u, (rb, rc) = best(lambda: (read_records(b), read_records(c)), args.repeat)
            rows.append((seeds, "read + validate both files", w, u))
            w, u, pairing = best(lambda: pair_records(rb, rc), args.repeat)
            rows.append((seeds, "pair", w, u))
            w, u, report = best(lambda: gate([pairing], margin=0.02), args.repeat)
            rows.append((seeds, "statistics + verdict", w, u))
            cmd = ["gate", str(b), str(c), "--margin", "0.02", "--format", "json"]
            w, u, result = best(lambda: CliRunner().invoke(cli, cmd, env={"GITHUB_STEP_SUMMARY": ""}), args.repeat)
            rows.append((seeds, "qualgate gate (end to end)", w, u))
            assert result.exit_code in (0, 1, 4), result.output
            a = report.comparisons[0].pooled
            print(
                f"{seeds} seed(s): {a.pairs:,} pairs, {a.questions:,} questions, {size:.1f} MiB per file, "
                f"verdict {report.verdict}, design effect {a.design_effect:.2f}"
            )
    print(f"\nbest of {args.repeat}; goal: end to end < 2 s")
    print(f"{'seeds':>5}  {'step':<28}  {'wall s':>7}  {'cpu s':>7}")
    for seeds, step, w, u in rows:
        print(f"{seeds:>5}  {step:<28}  {w:>7.3f}  {u:>7.3f}")


if __name__ == "__main__":
    main()
