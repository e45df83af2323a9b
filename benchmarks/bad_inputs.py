"""Run the bad-input corpus (tests/inputs/corpus.py) against a qualgate checkout and print a
table: per group of inputs, how many end cleanly (expected exit code, named file/field, no
traceback) and how many hang, crash with a traceback, exit with the wrong code or do not name
what is wrong.

    python benchmarks/bad_inputs.py                  # this checkout
    python benchmarks/bad_inputs.py --qualgate ../main   # another one (a "before")

Each case runs under a 20 s alarm and a 6 GiB address-space limit (tests/inputs/run_corpus.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "inputs"))

from run_corpus import drive  # noqa: E402

from corpus import cases, verdict  # noqa: E402

COLUMNS = ("ok", "hang", "killed", "traceback", "wrong exit", "unnamed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qualgate", default=str(HERE.parent), help="checkout whose qualgate is measured")
    ap.add_argument("--show", type=int, default=0, help="list up to this many failing cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        results = drive(work, pythonpath=str(Path(args.qualgate).resolve()))
    table: dict[str, Counter] = defaultdict(Counter)
    failing = []
    for case in cases():
        v = verdict(case, results.get(case.id))
        key = "wrong exit" if v.startswith("exit") else v
        table[case.group][key] += 1
        table["all"][key] += 1
        if v != "ok":
            failing.append((v, case.id))
    width = max(map(len, table))
    print(f"bad-input corpus against {Path(args.qualgate).resolve()}: {len(cases())} cases")
    print(f"{'group':<{width}}  {'cases':>5}  " + "  ".join(f"{c:>10}" for c in COLUMNS))
    for group in sorted(table, key=lambda g: (g == "all", g)):
        row = table[group]
        print(f"{group:<{width}}  {sum(row.values()):>5}  " + "  ".join(f"{row[c]:>10}" for c in COLUMNS))
    for v, cid in failing[: args.show]:
        print(f"  {v:<12} {cid}")


if __name__ == "__main__":
    main()
