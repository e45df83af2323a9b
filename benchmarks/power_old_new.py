"""The exact non-inferiority sample-size search on five small designs, for comparing two versions
of the package (issue 47: the fast search must give the slow one's answers).

Usage (the package imported is the one on PYTHONPATH; run it from outside the checkout for an
old copy): ``cd /tmp/old && PYTHONPATH=/tmp/old python /path/to/benchmarks/power_old_new.py``
"""

import time

import qualgate
from qualgate.stats import noninferiority_sample_size

DESIGNS = [(0.1, 0.3, 0.0), (0.1, 0.2, 0.02), (0.15, 0.4, -0.05), (0.1, 0.1, 0.0), (0.2, 0.5, 0.05)]

if __name__ == "__main__":
    print(qualgate.__file__)
    for margin, psi, loss in DESIGNS:
        t = time.process_time()
        r = noninferiority_sample_size(margin, psi, expected_loss=loss, method="exact")
        print(margin, psi, loss, r.n, r.n_stable, r.n_checked, repr(r.power), f"{time.process_time() - t:.2f} CPU-s")
