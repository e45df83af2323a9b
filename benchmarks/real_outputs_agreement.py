"""Agreement of the built-in suites' grading with third-party labels on real model outputs.

Grades every row of ../shared/data/real_outputs with the suite of its file and prints, per
suite and per source and model, the share of outputs on which qualgate's outcome (correct, or
not) equals the label: under the strict decision on the outputs that hold the requested format,
and under `either` (strict if found, else lenient) and `lenient` on every output. The `either`
outcome is formed here from the strict and lenient outcomes, so the script also runs on the code
before issue 15, where `lenient` already fell back from strict (there `either` = `lenient`):

    python benchmarks/real_outputs_agreement.py                      # this checkout
    PYTHONPATH=OLD_CHECKOUT python benchmarks/real_outputs_agreement.py   # another version

tests/suites/test_real_outputs.py checks the same agreement against a list of accepted
disagreements.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

from qualgate.suites import Question, Suite, suite_path
from qualgate.suites._spec import read_spec

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "real_outputs"
SUITES = ("gsm8k", "math500", "aime25", "gpqa_diamond")


def _pct(agree: int, n: int) -> str:
    return f"{agree}/{n} ({100 * agree / n:.1f}%)" if n else "-"


def main():
    print(
        "| suite | source (model) | outputs | requested format found | strict agrees (format found) "
        "| either agrees (all) | lenient agrees (all) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in SUITES:
        spec = read_spec(suite_path(name))
        suite = Suite(name, spec.version, (), {}, spec.decides, _spec=spec)
        with open(DATA / f"{name}.jsonl", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        groups = defaultdict(list)
        t = time.perf_counter()
        for i, r in enumerate(rows):
            q = Question(str(i), ({"role": "user", "content": r["question"]},), r["gold"], "-")
            g = suite.grade(q, r["output"])
            either = g.strict_outcome if g.strict is not None else g.lenient_outcome
            ok = lambda o: (o == "correct") == (r["label"] == "correct")  # noqa: E731
            cells = (g.strict is not None, ok(g.strict_outcome), ok(either), ok(g.lenient_outcome))
            repo, _, path = r["source"].partition(":")
            groups[f"{repo.split('@')[0]}:{Path(path).name} ({r['model']})"].append(cells)
            groups["all"].append(cells)
        seconds = time.perf_counter() - t
        for key in sorted(groups, key=lambda k: (k == "all", k)):
            cells = groups[key]
            found = [c for c in cells if c[0]]
            label = f"**all** ({seconds:.1f} s)" if key == "all" else key
            print(
                f"| {name} | {label} | {len(cells)} | {len(found)} | {_pct(sum(c[1] for c in found), len(found))} | "
                f"{_pct(sum(c[2] for c in cells), len(cells))} | {_pct(sum(c[3] for c in cells), len(cells))} |"
            )


if __name__ == "__main__":
    main()
