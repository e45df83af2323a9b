"""What a single-run accuracy table can and cannot show: :func:`reanalyze`.

The per-cell gaps, pooled totals and sample sizes are computed here; the printed derived
figures in :mod:`._forensics`, the speed figures in :mod:`._speed`; the results are the frozen
dataclasses of :mod:`._results`.
"""

from __future__ import annotations

import math
import statistics

from ._forensics import derived
from ._results import Cell, CellGap, DatasetTotals, ModeTotals, Reanalysis, Requirement
from ._speed import speed
from ._table import DASHES, REL, Table, read_table

__all__ = ["reanalyze", "DEFAULT_DISCORDANCE"]

#: Discordant fractions (lost + gained over n) at which "what it would take" is stated.
DEFAULT_DISCORDANCE = (0.05, 0.10, 0.20)


# --------------------------------------------------------------------------------------
def reanalyze(
    table,
    *,
    reference: str = "target",
    confidence_level: float = 0.95,
    discordance=DEFAULT_DISCORDANCE,
    alpha: float = 0.05,
    power: float = 0.8,
    source: str | None = None,
) -> Reanalysis:
    """Reanalyse a published single-run accuracy (and speed) table.

    Parameters
    ----------
    table : path, pandas.DataFrame or list of mappings
        One row per (model, platform, dataset) cell; see :mod:`qualgate.reanalysis` for the
        columns. Layout-only tables (no values) are accepted and reported as missing.
    reference : str
        The mode every other mode is compared with (``<reference>_correct``); default
        ``'target'`` (target-only decoding).
    confidence_level : float
        Of the unpaired band, default 0.95.
    discordance : sequence of float
        Discordant fractions (lost + gained) / n at which the McNemar sample size is stated.
    alpha, power : float
        Of the two-sided McNemar test whose sample size is stated.
    source : str, optional
        Name to show for the table (default: the path).

    Returns
    -------
    Reanalysis

    Raises
    ------
    qualgate.errors.DataError
        Missing columns, unreadable or negative values, counts above n (naming every line).
    ValueError
        An invalid argument.

    Notes
    -----
    The unpaired band of a cell is :func:`qualgate.stats.unpaired_ci_halfwidth` at the
    reference accuracy and the cell's n: the difference two independent single runs of that
    size can show by chance. A gap inside it says nothing about the verifier.
    """
    from ..stats import checks

    checks.fraction("confidence_level", confidence_level)
    checks.fraction("alpha", alpha)
    checks.fraction("power", power)
    levels = tuple(checks.fraction("discordance", d) for d in _as_tuple(discordance))
    if not levels:
        raise ValueError("discordance must list at least one fraction in (0, 1), got ()")
    t = read_table(table, reference=reference, source=source)
    cells = _cells(t, confidence_level)
    other = t.modes[1:]
    totals = tuple(_totals(cells, m) for m in other)
    datasets = list(dict.fromkeys(c.dataset for c in cells))
    by_dataset = tuple(
        DatasetTotals(d, tuple(_totals([c for c in cells if c.dataset == d], m) for m in other)) for d in datasets
    )
    return Reanalysis(
        source=t.source,
        reference=t.reference,
        modes=t.modes,
        cells=tuple(cells),
        totals=tuple(x for x in totals if x.cells),
        by_dataset=by_dataset,
        derived=derived(t, confidence_level),
        speed=speed(t),
        requirements=_requirements(cells, totals, levels, alpha, power),
        missing=_missing(t, cells),
        ignored_columns=t.ignored,
        confidence_level=confidence_level,
        alpha=alpha,
        power=power,
        discordance=levels,
    )


def _as_tuple(x):
    if isinstance(x, (int, float)):
        return (x,)
    return tuple(x)


# --- per cell and pooled ------------------------------------------------------------------
def _cells(t: Table, confidence_level) -> list[Cell]:
    from ..stats import unpaired_ci_halfwidth

    out = []
    ref = t.reference
    for r in t.rows:
        rc = r.counts.get(ref)
        if rc is None or r.n is None:
            continue
        p = rc / r.n
        band = 100 * unpaired_ci_halfwidth(p, r.n, confidence_level=confidence_level)
        gaps = []
        for m in t.modes[1:]:
            c = r.counts.get(m)
            if c is None:
                continue
            gap = 100 * (c - rc) / r.n
            gaps.append(CellGap(m, c, c / r.n, gap, c - rc, abs(gap) > band * (1 + REL)))
        if gaps:
            out.append(Cell(r.line, r.label, r.ids.get("dataset", ""), r.n, rc, p, band, tuple(gaps)))
    return out


def _totals(cells, mode) -> ModeTotals:
    pairs = [(c, g) for c in cells for g in c.gaps if g.mode == mode]
    n = sum(c.n for c, _ in pairs)
    correct = sum(g.correct for _, g in pairs)
    ref = sum(c.reference_correct for c, _ in pairs)
    nan = math.nan
    return ModeTotals(
        mode=mode,
        cells=len(pairs),
        n=n,
        correct=correct,
        reference_correct=ref,
        net_answers=correct - ref,
        accuracy=correct / n if n else nan,
        reference_accuracy=ref / n if n else nan,
        gap_points=100 * (correct - ref) / n if n else nan,
        mean_abs_gap_points=statistics.fmean(abs(g.gap_points) for _, g in pairs) if pairs else nan,
        cells_above=sum(g.net_answers > 0 for _, g in pairs),
        cells_below=sum(g.net_answers < 0 for _, g in pairs),
        cells_equal=sum(g.net_answers == 0 for _, g in pairs),
        cells_exceeding_band=sum(g.exceeds_band for _, g in pairs),
    )


# --- what it would take --------------------------------------------------------------------
def _requirements(cells, totals, levels, alpha, power) -> tuple:
    from ..stats import mcnemar_sample_size

    out = []
    scopes = [(t.mode, "pooled", t.n, -t.net_answers) for t in totals if t.cells]
    scopes += [(g.mode, c.label, c.n, -g.net_answers) for c in cells for g in c.gaps]
    for mode, scope, n, lost_net in scopes:
        if lost_net == 0:
            continue
        loss = lost_net / n
        for d in levels:
            if abs(loss) > d:
                out.append(Requirement(mode, scope, n, loss, d, None, "discordance must exceed |loss|"))
                continue
            res = mcnemar_sample_size(abs(loss), d, alpha=alpha, power=power, alternative="two-sided")
            out.append(Requirement(mode, scope, n, loss, d, int(res.n)))
    return tuple(out)


# --- what is missing -----------------------------------------------------------------------
def _lines(rows) -> str:
    lines = [r.line for r in rows]
    if len(lines) > 6:
        return f"{len(lines)} rows (lines {lines[0]}-{lines[-1]})"
    return f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"


def _missing(t: Table, cells) -> tuple:
    out = []
    rows = t.rows
    if not rows:
        return ("the table has a header but no rows",)
    status = sorted({r.raw.get("value_status", "") for r in rows} - {""})
    if t.modes:
        empty = [r for r in rows if all(r.counts.get(m) is None for m in t.modes)]
        if empty:
            what = ", ".join(f"{m}_correct" for m in t.modes)
            out.append(f"{len(empty)} of {len(rows)} rows have no counts ({what} empty): {_lines(empty)}")
        partial = [r for r in rows if r not in empty and any(r.counts.get(m) is None for m in t.modes)]
        for r in partial:
            gone = [f"{m}_correct" for m in t.modes if r.counts.get(m) is None]
            out.append(f"line {r.line} ({r.label}): {', '.join(gone)} empty")
        if not cells:
            out.append("no cell has counts: gaps, bands, totals and sample sizes cannot be computed")
    if t.speed_modes or "speedup_x" in t.columns:
        speedless = [r for r in rows if "speedup_x" not in r.numbers and not any(r.speed.get(m) for m in t.speed_modes)]
        if speedless:
            out.append(
                f"{len(speedless)} of {len(rows)} rows have no speed-up, throughput or acceptance values: {_lines(speedless)}"
            )
    for col in ("retention_printed",):
        dashed = [r for r in rows if r.raw.get(col, "").strip().lower() in DASHES]
        if dashed:
            out.append(f"{col} printed without a value (—) on {_lines(dashed)}")
    if "pair_speedup_min_x" in t.columns:
        out.append("pair_speedup_min_x/pair_speedup_max_x repeat each pair's range on every row: not per-row values")
    if status:
        out.append(
            "value_status: "
            + ", ".join(f"{s} ({sum(r.raw.get('value_status') == s for r in rows)} rows)" for s in status)
        )
    return tuple(out)
