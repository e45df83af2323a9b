"""Is the exact non-inferiority p-value's supremum over the discordance found? (issue 14)

For attainable score statistics near the exact test's critical value at several n and margins,
compare the library's supremum of P_ψ(Z <= z) over ψ (:func:`_sup_tail`: a grid uniform in
arcsin(sqrt(ψ)) and refined peaks) with the maximum over 30,000 discordances spaced evenly in
ψ and in arcsin(sqrt(ψ)). A grid can only under-estimate a supremum, so the library must never
be below the fine grid (it may be above: it refines between grid points).

Run: ``PYTHONPATH=$PWD python benchmarks/exact_supremum.py`` (about 20 minutes on 2 CPU cores).
"""

import math

import numpy as np

from qualgate.stats._noninferiority import _attainable, _sup_tail, _tail, _thresholds, exact_critical_value

rng = np.random.default_rng(1)
worst = 0
count = 0
for n in (30, 60, 133, 300, 700, 1018, 1500, 2000):
    for m in (0.01, 0.02, 0.05):
        c = exact_critical_value(n, m, 0.05)
        if not math.isfinite(c):
            continue
        vals = _attainable(n, m, c - 0.15, min(c + 0.15, 0))
        for z in rng.choice(vals, size=min(4, len(vals)), replace=False):
            b = _thresholds(n, m, z)
            lib = _sup_tail(n, m, b)
            count += 1
            low = max(m, 1e-9)
            g = np.unique(
                np.concatenate(
                    [
                        np.linspace(low, 1, 15001),
                        np.sin(np.linspace(math.asin(math.sqrt(low)), math.pi / 2, 15001)) ** 2,
                    ]
                )
            )
            fine = float(max(_tail(n, m, b, g[i : i + 1000]).max() for i in range(0, len(g), 1000)))
            worst = max(worst, fine - lib)
            if fine - lib > 1e-9:
                print("SHORT", n, m, z, lib, fine, flush=True)
    print(f"n={n}: {count} cases so far, worst shortfall {worst:.3g}", flush=True)
print("cases", count, "worst shortfall (fine grid - library)", worst, flush=True)
