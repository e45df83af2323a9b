"""CPU time of the one-seed non-inferiority test at 10^4, 10^5 and 10^6 pairs, before and after
issue 34 item 7 (``noninferiority(method='exact')``, what ``qualgate gate`` runs with one seed:
p-value and upper bound).

"before" imports ``qualgate/stats/_noninferiority.py`` as it was at ``--before`` (a commit) from
git, in a child process under an RLIMIT_CPU of ``--limit`` CPU-seconds: a cell over it prints
"> LIMIT". "after" is the working tree's module. Each table: 3 % of pairs lost, 2.5 % gained,
margin 2 points.

Run: ``PYTHONPATH=$PWD python benchmarks/bench_exact_scaling.py [--before 49ccf10] [--limit 60]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import importlib.util, json, resource, sys, time
limit, path, n = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_CPU, (int(limit), int(limit) + 1))
import qualgate.stats  # the package first; the module under test loads beside it under its own name
spec = importlib.util.spec_from_file_location("qualgate.stats._noninferiority_bench", path)
mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
lost, gained = int(0.03 * n), int(0.025 * n)
t = time.process_time()
r = mod.noninferiority(n - lost - gained, lost, gained, 0, margin=0.02)
print(json.dumps({"cpu": time.process_time() - t, "p": r.pvalue, "ub": r.upper_bound, "method": r.method}))
"""


def cell(path, n, limit):
    out = subprocess.run([sys.executable, "-c", CHILD, str(limit), path, str(n)], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="49ccf10")
    ap.add_argument("--limit", type=float, default=60)
    ap.add_argument("--n", default="10000,100000,1000000")
    a = ap.parse_args(argv)
    old = "/tmp/_noninferiority_before.py"
    with open(old, "w") as fh:
        fh.write(
            subprocess.run(
                ["git", "show", f"{a.before}:qualgate/stats/_noninferiority.py"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
    new = "qualgate/stats/_noninferiority.py"
    print(f"one-seed noninferiority(method='exact'), margin 0.02, 3 % lost, 2.5 % gained; CPU-s (limit {a.limit:g})")
    print(f"{'pairs':>9} | {'before ' + a.before:>16} {'UB before':>11} | {'after':>8} {'UB after':>11} {'method':>9}")
    t0 = time.process_time()
    skip = False
    for n in (int(x) for x in a.n.split(",")):
        before = None if skip else cell(old, n, a.limit)
        skip = skip or before is None  # a larger n cannot be faster
        after = cell(new, n, a.limit)
        b = f"{before['cpu']:.2f}" if before else f"> {a.limit:g}"
        ub = f"{before['ub']:.6f}" if before else "-"
        print(
            f"{n:>9,} | {b:>16} {ub:>11} | {after['cpu']:>8.4f} {after['ub']:>11.6f} {after['method']:>9}", flush=True
        )
    print(f"(this script's own CPU: {time.process_time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
