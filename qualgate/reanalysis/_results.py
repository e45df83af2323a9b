"""The frozen results of :func:`~qualgate.reanalysis.reanalyze`, one dataclass per finding."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from qualgate.formatting import json_ready

from ._render import render

__all__ = [
    "CellGap",
    "Cell",
    "ModeTotals",
    "DatasetTotals",
    "DerivedCheck",
    "DerivedColumn",
    "SpeedRange",
    "Correlation",
    "Speed",
    "Requirement",
    "Reanalysis",
]


class _Result:
    def to_dict(self) -> dict:
        """The fields as JSON-ready values (NaN as ``None``, tuples as lists)."""
        return json_ready(asdict(self))


@dataclass(frozen=True)
class CellGap(_Result):
    """One mode in one cell, compared with the reference (target-only) run."""

    mode: str
    correct: int
    accuracy: float
    gap_points: float  #: 100 * (accuracy - reference accuracy); negative = fewer correct
    net_answers: int  #: correct - reference correct
    exceeds_band: bool  #: |gap| > the cell's unpaired band


@dataclass(frozen=True)
class Cell(_Result):
    """One (model, platform, dataset) row with counts."""

    line: int
    label: str
    dataset: str
    n: int
    reference_correct: int
    reference_accuracy: float
    band_points: float  #: half-width, in points, that two unpaired runs can differ by
    gaps: tuple  #: of CellGap, one per non-reference mode with a count


@dataclass(frozen=True)
class ModeTotals(_Result):
    """A mode pooled over cells (only cells where both it and the reference have counts)."""

    mode: str
    cells: int
    n: int
    correct: int
    reference_correct: int
    net_answers: int  #: correct - reference correct (negative: fewer right answers)
    accuracy: float
    reference_accuracy: float
    gap_points: float
    mean_abs_gap_points: float  #: mean over cells of |gap|
    cells_above: int
    cells_below: int
    cells_equal: int
    cells_exceeding_band: int


@dataclass(frozen=True)
class DatasetTotals(_Result):
    dataset: str
    modes: tuple  #: of ModeTotals


@dataclass(frozen=True)
class DerivedCheck(_Result):
    """One printed derived figure recomputed from the raw values."""

    line: int
    label: str
    printed: str
    candidates: dict  #: formula -> recomputed value (None when its inputs are missing)
    reproduced_by: tuple  #: formulas whose value rounds to the printed figure
    recomputed: float | None  #: value of the column's formula on this row
    status: str  #: exact | within_input_rounding | mismatch | not_computable
    count_pairs: tuple = ()  #: (a, b) with a/b reproducing a printed ratio when counts are missing
    #: with a single count pair: its gap (a - b) / n and the unpaired band at b / n, in points
    implied_gap_points: float | None = None
    implied_band_points: float | None = None


@dataclass(frozen=True)
class DerivedColumn(_Result):
    """A printed derived column: the formula that reproduces most rows, and the rows it does not."""

    column: str
    formula: str | None  #: None when no candidate reproduces any row
    checked: int
    reproduced: int
    mismatches: int
    checks: tuple  #: of DerivedCheck


@dataclass(frozen=True)
class SpeedRange(_Result):
    label: str
    low: float | None
    high: float | None
    baseline: str
    included: bool
    note: str = ""


@dataclass(frozen=True)
class Correlation(_Result):
    """Correlation across rows between the speed-up and an acceptance gain."""

    gain: str
    n: int
    pearson_r: float
    pearson_pvalue: float
    spearman_rho: float
    spearman_pvalue: float


@dataclass(frozen=True)
class Speed(_Result):
    column: str  #: where the per-row speed-ups come from
    rows: tuple  #: of {"line", "label", "speedup", gains...}
    count: int
    low: float | None
    high: float | None
    median: float | None
    correlations: tuple  #: of Correlation
    ranges: tuple  #: of SpeedRange
    range_low: float | None
    range_high: float | None
    median_range_low: float | None
    median_range_high: float | None
    draft_length: tuple  #: whole K with mean acceptance length = 1 + K * acceptance rate on every row
    draft_length_pairs: int  #: (row, mode) pairs that K was checked on


@dataclass(frozen=True)
class Requirement(_Result):
    """Paired questions a McNemar gate needs to detect a gap of the size seen."""

    mode: str
    scope: str  #: "pooled" or a cell label
    n_seen: int
    loss: float  #: (reference - mode) / n: positive = the mode is worse
    discordance: float
    n_required: int | None  #: None when the discordance cannot produce this loss
    note: str = ""


@dataclass(frozen=True)
class Reanalysis(_Result):
    """Everything :func:`reanalyze` found; render with :meth:`to_text` or :meth:`to_markdown`."""

    source: str
    reference: str
    modes: tuple
    cells: tuple
    totals: tuple  #: of ModeTotals
    by_dataset: tuple  #: of DatasetTotals
    derived: tuple  #: of DerivedColumn
    speed: Speed | None
    requirements: tuple  #: of Requirement
    missing: tuple  #: of str: what the table lacks
    ignored_columns: tuple
    confidence_level: float
    alpha: float
    power: float
    discordance: tuple

    def to_text(self) -> str:
        return render(self, "text")

    def to_markdown(self) -> str:
        return render(self, "markdown")
