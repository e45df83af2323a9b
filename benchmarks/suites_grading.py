"""Grading rates and costs of the built-in suites on the real test sets in ../shared/data.

Prints two tables:

1. per suite: how many reference solutions grade correct, how many deliberately wrong
   answers grade incorrect, and the strict and lenient extraction rates on the references
   as given and with the requested format removed;
2. the cost of one math-verify comparison (MATH-500 gold against the next item's gold, so
   every comparison parses): unlimited, under the main-thread signal timer, and in a worker
   thread (helper process), plus the helper's start-up time.

    python benchmarks/suites_grading.py
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from qualgate.graders import _math
from qualgate.suites import load_suite

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FILES = {"gsm8k": "gsm8k/test.jsonl", "math500": "math500/test.jsonl", "aime25": "aime2025/test.jsonl"}


def rows(name):
    with open(DATA / FILES[name], encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def references(name, qs, rs):
    """(as given, without the requested format, deliberately wrong) texts per question."""
    if name == "gsm8k":
        given = [r["answer"] for r in rs]
        plain = [t.replace("####", "The answer is") for t in given]
        wrong = [t.rsplit("####", 1)[0] + f"#### {int(q.gold.replace(',', '')) + 1}" for t, q in zip(given, qs)]
    elif name == "math500":
        given = [r["solution"] for r in rs]
        plain = [re.sub(r"\\boxed\{", "{", t) for t in given]
        wrong = [rf"\boxed{{{qs[(i + 1) % len(qs)].gold}}}" for i in range(len(qs))]
    else:  # AIME has no solutions: the gold in the requested format
        given = [rf"The answer is \boxed{{{q.gold}}}." for q in qs]
        plain = [f"The answer is {q.gold}." for q in qs]
        wrong = [rf"\boxed{{{(int(q.gold) + 1) % 1000}}}" for q in qs]
    return given, plain, wrong


def main():
    cache = tempfile.mkdtemp(prefix="qualgate-hf-")
    print(
        "| suite | n | reference correct (decides) | wrong graded incorrect | strict extracted "
        "(given / format removed) | lenient extracted (given / format removed) | lenient correct, format removed | s/item |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in FILES:
        suite = load_suite(name, data_files=DATA / FILES[name], cache_dir=cache)
        qs, rs = suite.questions, rows(name)
        given, plain, wrong = references(name, qs, rs)
        t = time.perf_counter()
        g_given = [suite.grade(q, x) for q, x in zip(qs, given)]
        g_plain = [suite.grade(q, x) for q, x in zip(qs, plain)]
        g_wrong = [suite.grade(q, x) for q, x in zip(qs, wrong)]
        per_item = (time.perf_counter() - t) / (3 * len(qs))
        n = len(qs)
        ok = sum(g.outcome == "correct" for g in g_given)
        bad = sum(g.outcome == "incorrect" for g in g_wrong)
        s_given = sum(g.strict is not None for g in g_given)
        s_plain = sum(g.strict is not None for g in g_plain)
        l_given = sum(g.lenient is not None for g in g_given)
        l_plain = sum(g.lenient is not None for g in g_plain)
        l_ok = sum(g.lenient_outcome == "correct" for g in g_plain)
        print(
            f"| {name} | {n} | {ok}/{n} | {bad}/{n} | {s_given}/{n} / {s_plain}/{n} | "
            f"{l_given}/{n} / {l_plain}/{n} | {l_ok}/{n} | {per_item:.4f} |"
        )

    golds = [q.gold for q in load_suite("math500", data_files=DATA / FILES["math500"], cache_dir=cache).questions]
    pairs = [(golds[(i + 1) % len(golds)], g) for i, g in enumerate(golds)]
    _math._equivalent("1", "1")  # import math-verify before timing

    def timed(fn):
        t = time.perf_counter()
        for p, g in pairs:
            fn(p, g)
        return (time.perf_counter() - t) / len(pairs) * 1e3

    limited = lambda p, g: _math.run_limited(p, g, 5.0)  # noqa: E731
    best = {"none": [], "signal": [], "process": []}
    with ThreadPoolExecutor(1) as pool:
        t0 = time.perf_counter()
        pool.submit(_math._worker).result()
        startup = time.perf_counter() - t0
        for _ in range(3):  # interleaved rounds; the minimum is the least disturbed by load
            best["none"].append(timed(_math._equivalent))
            best["signal"].append(timed(limited))
            best["process"].append(pool.submit(timed, limited).result())
    unlimited, signal_ms, process_ms = (min(best[k]) for k in ("none", "signal", "process"))
    print()
    print(f"math-verify, {len(pairs)} MATH-500 comparisons that parse (ms per comparison):")
    print("| mechanism | ms/comparison | overhead vs unlimited |")
    print("|---|---:|---:|")
    print(f"| none (no limit) | {unlimited:.2f} | - |")
    print(f"| main thread, SIGALRM timer | {signal_ms:.2f} | {signal_ms - unlimited:+.2f} |")
    print(f"| worker thread, helper process | {process_ms:.2f} | {process_ms - unlimited:+.2f} |")
    print(f"helper process start-up (import math-verify, once per thread): {startup:.2f} s")


if __name__ == "__main__":
    main()
