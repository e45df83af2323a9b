"""Reanalysis of published single-run accuracy tables: what they can and cannot show.

A speed-up pull request usually shows quality as one run per configuration and benchmark.
:func:`reanalyze` takes such a table (one row per (model, platform, dataset) cell: ``n``,
``<mode>_correct`` counts for ``target``, ``standard``, ``fly`` and any other mode, optional
printed figures) and reports, per cell, each mode's gap to target-only against the band two
unpaired runs of that size differ by; across cells, mean absolute gaps (lossless standard SD
is the noise yardstick) and pooled answer totals, also per dataset; every printed derived
figure recomputed from the raw counts, with the candidate formula that reproduces it; speed-up
range, median and its correlation with acceptance gains; and the paired McNemar sample size a
gate would need for the gaps seen.

Column names are documented in :mod:`qualgate.reanalysis._table`; the tables shipped with
qualgate (:func:`published_tables`, :func:`load_published`) use them.

Examples
--------
>>> from qualgate.reanalysis import load_published, reanalyze
>>> r = reanalyze(load_published("fly_pr53987_v1_eval"), source="fly_pr53987_v1_eval")
>>> [(t.mode, t.net_answers) for t in r.totals]
[('standard', -8), ('fly', -10)]
"""

from ._analysis import DEFAULT_DISCORDANCE, reanalyze
from ._published import load_published, published_path, published_tables
from ._results import (
    Cell,
    CellGap,
    Correlation,
    DatasetTotals,
    DerivedCheck,
    DerivedColumn,
    ModeTotals,
    Reanalysis,
    Requirement,
    Speed,
    SpeedRange,
)
from ._table import canonical_column, parse_number

__all__ = [
    "DEFAULT_DISCORDANCE",
    "Cell",
    "CellGap",
    "Correlation",
    "DatasetTotals",
    "DerivedCheck",
    "DerivedColumn",
    "ModeTotals",
    "Reanalysis",
    "Requirement",
    "Speed",
    "SpeedRange",
    "canonical_column",
    "load_published",
    "parse_number",
    "published_path",
    "published_tables",
    "reanalyze",
]
