"""Paired statistics for baseline-vs-candidate comparisons.

Conventions (stated once in :mod:`qualgate`): ``lost`` = B correct and C wrong, ``gained`` =
B wrong and C correct; the *difference* is accuracy(C) − accuracy(B) = (gained − lost)/n and
the *loss* its negative; ``alternative='less'`` means the candidate is worse.

Tests and intervals
    :class:`PairedTable`, :func:`mcnemar`, :func:`paired_difference_ci`,
    :func:`noninferiority` (asymptotic score test, or ``method='exact'``: the exact
    unconditional test the gate uses with one seed), :func:`discordance_interval`
    (Clopper-Pearson interval of the discordant fraction, for A/A calibration)
Multiplicity
    :func:`holm` (Holm's step-down adjusted p-values, across the gate's candidates)
Design
    :func:`mcnemar_sample_size`, :func:`mcnemar_power`, :func:`mcnemar_detectable_loss`,
    :func:`noninferiority_sample_size`, :func:`noninferiority_power`,
    :func:`unpaired_ci_halfwidth`
Clustered (several seeds per question)
    :class:`ClusteredTable`, :func:`clustered_mcnemar`, :func:`clustered_noninferiority`,
    :func:`clustered_difference_ci` (monotone robust score test by default)
Sequential (stop as soon as the verdict is decided)
    :func:`sequential_noninferiority`
"""

import importlib

from ._discordance import discordance_interval
from ._mcnemar import McNemarResult, mcnemar
from ._multiplicity import holm
from ._noninferiority import NoninferiorityResult, noninferiority, one_seed_bound
from ._paired_ci import ConfidenceInterval, paired_difference_ci
from ._power import (
    EXACT_MAX_N,
    PowerResult,
    mcnemar_detectable_loss,
    mcnemar_power,
    mcnemar_sample_size,
    noninferiority_power,
    noninferiority_sample_size,
)
from ._sequential import SequentialResult, sequential_noninferiority
from ._table import PairedTable
from ._unpaired import unpaired_ci_halfwidth

# Families whose modules import heavier parts of scipy load on first use, so that
# ``import qualgate.stats`` (and with it ``qualgate power``) starts in a fraction of a second.
# They are re-exported all the same: ``from qualgate.stats import clustered_mcnemar`` works.
_LAZY = {
    name: "_clustered"
    for name in (
        "ClusteredMcNemarResult",
        "ClusteredNoninferiorityResult",
        "ClusteredTable",
        "clustered_difference_ci",
        "clustered_mcnemar",
        "clustered_noninferiority",
        "design_effect",
        "stratified_score_test",
    )
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "EXACT_MAX_N",
    "ClusteredMcNemarResult",
    "ClusteredNoninferiorityResult",
    "ClusteredTable",
    "ConfidenceInterval",
    "McNemarResult",
    "NoninferiorityResult",
    "PairedTable",
    "PowerResult",
    "SequentialResult",
    "clustered_difference_ci",
    "clustered_mcnemar",
    "clustered_noninferiority",
    "design_effect",
    "discordance_interval",
    "holm",
    "mcnemar",
    "mcnemar_detectable_loss",
    "mcnemar_power",
    "mcnemar_sample_size",
    "noninferiority",
    "noninferiority_power",
    "noninferiority_sample_size",
    "one_seed_bound",
    "paired_difference_ci",
    "sequential_noninferiority",
    "stratified_score_test",
    "unpaired_ci_halfwidth",
]
