"""Judging throughput: pairs per second of ``qualgate judge`` against a loopback judge.

The judge is the OpenAI-compatible loopback server of ``tests/judge_double.py`` answering
every prompt after a fixed delay (a stand-in for a judge model's decode time; its verdict is
a function of the prompt's hash). 400 pairs of distinct outputs are judged in both orders
(800 requests) through ``engine: vllm-server``, so the judge requests are in flight together
up to the backend's ``concurrency``, over keep-alive connections; each cell starts with an
empty verdict cache. A last row judges the same pairs again: every verdict from the cache.

Run: ``python benchmarks/bench_judge.py`` (results: benchmarks/results/bench_judge.txt).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

TESTS = str(Path(__file__).resolve().parents[1] / "tests")
PAIRS, DELAYS, CONCURRENCY = 400, (0.0, 0.05), (1, 4, 16, 64)


def records(path: Path, config_id: str, tag: str) -> Path:
    from qualgate.records.prompts import prompt_hash

    with open(path, "w") as fh:
        for i in range(PAIRS):
            msgs = [{"role": "user", "content": f"Question {i}: explain item {i}."}]
            fh.write(
                json.dumps(
                    {
                        "schema_version": 1,
                        "run_id": "bench",
                        "config_id": config_id,
                        "suite": "bench",
                        "suite_version": "1",
                        "question_id": str(i),
                        "seed": 0,
                        "sample_index": 0,
                        "outcome": "correct",
                        "prompt_hash": prompt_hash(msgs),
                        "output": f"{tag} answer {i}: " + "word " * 150,
                    }
                )
                + "\n"
            )
    return path


def questions(path: Path) -> Path:
    with open(path, "w") as fh:
        for i in range(PAIRS):
            fh.write(
                json.dumps(
                    {
                        "suite": "bench",
                        "question_id": str(i),
                        "messages": [{"role": "user", "content": f"Question {i}: explain item {i}."}],
                    }
                )
                + "\n"
            )
    return path


def verdict(system: str, user: str) -> str:
    return "Reasons. [[" + "ABC"[hashlib.sha256(user.encode()).digest()[0] % 3] + "]]"


def main():
    sys.path.insert(0, TESTS)
    from qualgate.judge import judge_pairs, load_judge, load_questions
    from qualgate.verdict.pairing import load_side

    from judge_double import JudgeDouble

    print(f"qualgate judge: {PAIRS} pairs (2 requests each) against a loopback judge; python {sys.version.split()[0]}")
    print("| judge delay (s) | concurrency | requests | wall (s) | pairs/s | requests/s | most in flight |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = load_side(records(tmp / "base.jsonl", "cfg-b", "baseline"))
        cand = load_side(records(tmp / "cand.jsonl", "cfg-c", "candidate"))
        qs = load_questions(questions(tmp / "q.jsonl"))
        for delay in DELAYS:
            for conc in CONCURRENCY:
                with JudgeDouble({}, reply=verdict, delay_s=delay) as d:
                    cfg = d.config(tmp / f"judge-{delay}-{conc}.yaml", concurrency=conc, timeout_s=60)
                    out = tmp / f"out-{delay}-{conc}"
                    with load_judge(cfg, "pairwise", kind="pairwise") as j:
                        j.ask([[{"role": "user", "content": "warm-up"}]])  # open the backend first
                        t0 = time.perf_counter()
                        s = judge_pairs(base, cand, j, qs, out)
                        wall = time.perf_counter() - t0
                        assert s.calls == 2 * PAIRS and s.judge_error == 0, s
                        print(
                            f"| {delay:g} | {conc} | {s.calls} | {wall:.2f} | {PAIRS / wall:,.0f} | "
                            f"{s.calls / wall:,.0f} | {d.max_in_flight} |"
                        )
                        if delay == DELAYS[-1] and conc == CONCURRENCY[-1]:
                            t0 = time.perf_counter()
                            again = judge_pairs(base, cand, j, qs, out)
                            wall = time.perf_counter() - t0
                            assert again.calls == 0
                            print(f"| (cache) | - | 0 | {wall:.2f} | {PAIRS / wall:,.0f} | - | - |")


if __name__ == "__main__":
    main()
