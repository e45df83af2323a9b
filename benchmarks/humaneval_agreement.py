"""Agreement of the ``unit_tests`` grader with the 820 labelled HumanEval completions.

Loads the built-in ``humaneval`` suite from ../shared/data/humaneval/HumanEval.jsonl.gz,
grades the canonical solutions (timed) and every ``solution`` of
../shared/data/humaneval/completions/ldb (five files: four models, two runs of gpt-4) as a
model's output, and prints per file how often the outcome (correct or not) equals the
source's ``is_solved`` label, and each disagreement with the grader's detail. Grading runs in
parallel, as many sandboxes at once as there are CPUs (``--workers`` to change it):

    python benchmarks/humaneval_agreement.py [--workers N]

tests/suites/test_humaneval.py checks the same agreement against the disagreements the
data's README names as defects of the labels.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import Counter
from pathlib import Path

from qualgate.graders._sandbox import cpu_count, isolation, run_parallel
from qualgate.suites import load_suite

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "humaneval"
FILES = (
    "codellama/seed.jsonl",
    "gpt-3.5-turbo-0613/seed.jsonl",
    "gpt-4-1106-preview/seed.jsonl",
    "gpt-4-1106-preview/seed.4cc3655.jsonl",
    "starcoder/seed.jsonl",
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=None, help="sandboxes at once (default: CPUs)")
    args = ap.parse_args()
    workers = args.workers or cpu_count()
    iso = isolation()
    print(
        f"sandbox: namespaces={iso['namespaces']}; network: {iso['network']}; "
        f"processes: {iso['processes']}; nproc: {iso['nproc']}; filesystem: {iso['filesystem']}"
    )
    suite = load_suite("humaneval", data_files=DATA / "HumanEval.jsonl.gz")
    by_id = {q.id: q for q in suite.questions}
    with gzip.open(DATA / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        canonical = {r["task_id"]: r["prompt"] + r["canonical_solution"] for r in map(json.loads, f)}

    t = time.perf_counter()
    grades = run_parallel(lambda q: suite.grade(q, canonical[q.id]), suite.questions, workers=workers)
    seconds = time.perf_counter() - t
    n_ok = sum(g.outcome == "correct" for g in grades)
    print(
        f"\ncanonical solutions: {n_ok}/{len(grades)} correct in {seconds:.1f} s "
        f"({workers} workers, {seconds / len(grades) * 1000:.0f} ms per problem of wall time)"
    )
    t = time.perf_counter()
    grades = run_parallel(lambda q: suite.grade(q, ""), suite.questions, workers=workers)
    print(
        f"empty completion: {sum(g.outcome == 'correct' for g in grades)}/{len(grades)} correct "
        f"({dict(Counter(g.outcome for g in grades))})"
    )

    print("\n| file | completions | labelled solved | graded correct | agree | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    disagreements = []
    for name in FILES:
        with open(DATA / "completions" / "ldb" / name, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        t = time.perf_counter()
        grades = run_parallel(lambda r: suite.grade(by_id[r["task_id"]], r["solution"]), rows, workers=workers)
        seconds = time.perf_counter() - t
        agree = 0
        for r, g in zip(rows, grades):
            if (g.outcome == "correct") == bool(r["is_solved"]):
                agree += 1
            else:
                disagreements.append((name, r["task_id"], r["is_solved"], g.outcome, g.detail))
        solved = sum(bool(r["is_solved"]) for r in rows)
        correct = sum(g.outcome == "correct" for g in grades)
        print(f"| {name} | {len(rows)} | {solved} | {correct} | {agree}/{len(rows)} | {seconds:.1f} |")
    print(f"\n{len(disagreements)} disagreements:")
    for name, task, label, outcome, detail in disagreements:
        print(f"  {name} {task}: label is_solved={label}, graded {outcome} ({detail})")


if __name__ == "__main__":
    main()
