"""What a single-run accuracy table can and cannot show: :func:`reanalyze`."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from ._table import Num, Row, Table, read_table

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
    "reanalyze",
    "DEFAULT_DISCORDANCE",
]

#: Discordant fractions (lost + gained over n) at which "what it would take" is stated.
DEFAULT_DISCORDANCE = (0.05, 0.10, 0.20)
_REL = 1e-9  # relative slack for float comparisons of rounding bounds


class _Result:
    def to_dict(self) -> dict:
        return _plain(asdict(self))


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
        from ._render import render

        return render(self, "text")

    def to_markdown(self) -> str:
        from ._render import render

        return render(self, "markdown")


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
    from ..stats import _checks

    _checks.fraction("confidence_level", confidence_level)
    _checks.fraction("alpha", alpha)
    _checks.fraction("power", power)
    levels = tuple(_checks.fraction("discordance", d) for d in _as_tuple(discordance))
    if not levels:
        raise ValueError("discordance must list at least one fraction in (0, 1), got ()")
    t = read_table(table, reference=reference, source=source)
    cells = _cells(t, confidence_level)
    other = t.modes[1:]
    totals = tuple(_totals(cells, m) for m in other)
    datasets = list(dict.fromkeys(c.dataset for c in cells))
    by_dataset = tuple(
        DatasetTotals(d, tuple(_totals([c for c in cells if c.dataset == d], m) for m in other))
        for d in datasets
    )
    return Reanalysis(
        source=t.source,
        reference=t.reference,
        modes=t.modes,
        cells=tuple(cells),
        totals=tuple(x for x in totals if x.cells),
        by_dataset=by_dataset,
        derived=_derived(t, confidence_level),
        speed=_speed(t),
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
            gaps.append(CellGap(m, c, c / r.n, gap, c - rc, abs(gap) > band * (1 + _REL)))
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


# --- printed derived columns ----------------------------------------------------------------
def _ratio(a: Num | None, b: Num | None):
    """Value and bounds of a/b given the rounding of a and b; None when undefined."""
    if a is None or b is None or b.value == 0:
        return None
    lo_den = b.value + b.half
    hi_den = b.value - b.half
    lo = (a.value - a.half) / lo_den
    hi = (a.value + a.half) / hi_den if hi_den > 0 else math.inf
    return a.value / b.value, lo, hi


def _exact(n: int) -> Num:
    return Num(float(n), 0.0, str(n))


def _judge(printed: Num, cand) -> str | None:
    """'exact' when the candidate rounds to the printed figure, 'within_input_rounding' when
    only the rounding of its inputs allows it, else None."""
    if cand is None:
        return None
    value, lo, hi = cand
    slack = _REL * max(1.0, abs(printed.value))
    if abs(value - printed.value) <= printed.half + slack:
        return "exact"
    if lo <= printed.high + slack and hi >= printed.low - slack:
        return "within_input_rounding"
    return None


def _candidates(t: Table, r: Row, column: str) -> dict:
    """formula -> (value, low, high) or None, in order of preference."""
    out = {}
    modes = list(t.modes)
    if column.endswith("_printed") and column != "retention_printed":
        m = column[: -len("_printed")]
        c = r.counts.get(m)
        if c is not None:
            out[f"{m}_correct/n"] = _ratio(_exact(c), _exact(r.n)) if r.n else None
            if r.n_questions and r.n_questions != r.n:
                out[f"{m}_correct/n_questions"] = _ratio(_exact(c), _exact(r.n_questions))
        else:
            out[f"{m}_correct/n"] = None
        return out
    if column == "retention_printed":
        order = [m for m in reversed(modes) if m != t.reference] + [t.reference]
        for a in order:
            for b in modes:
                if a != b:
                    ca, cb = r.counts.get(a), r.counts.get(b)
                    ok = ca is not None and cb is not None
                    out[f"{a}/{b}"] = _ratio(_exact(ca), _exact(cb)) if ok else None
        return out
    # speed ratios: throughput and mean acceptance length, candidate over baseline first
    sm = list(t.speed_modes)
    pairs = [(a, b) for a in reversed(sm) for b in sm if a != b]
    keys = ("tok_per_s", "tau") if column == "speedup_x" else ("tau", "tok_per_s")
    for key in keys:
        for a, b in pairs:
            x, y = r.speed.get(a, {}).get(key), r.speed.get(b, {}).get(key)
            name = f"{a}/{b} {'tok/s' if key == 'tok_per_s' else 'tau'}"
            if x is not None or y is not None or column == "speedup_x":
                out[name] = _ratio(x, y)
    return out


def _count_pairs(printed: Num, n: int) -> tuple:
    """(a, b), 0 <= a <= n, 1 <= b <= n, with a/b rounding to a printed ratio."""
    out = []
    for b in range(1, n + 1):
        centre = printed.value * b
        for a in range(max(0, math.floor(centre) - 1), min(n, math.ceil(centre) + 1) + 1):
            if abs(a / b - printed.value) <= printed.half * (1 + _REL):
                out.append((a, b))
    return tuple(sorted(set(out), key=lambda ab: (ab[1], ab[0])))


def _derived(t: Table, confidence_level) -> tuple:
    from ..stats import unpaired_ci_halfwidth

    columns = [f"{m}_printed" for m in t.modes] + ["retention_printed", "speedup_x", "tau_ratio_x"]
    out = []
    for column in columns:
        rows = [(r, r.printed[column]) for r in t.rows if column in r.printed]
        if not rows:
            continue
        per_row = [(r, p, _candidates(t, r, column)) for r, p in rows]
        names = list(dict.fromkeys(k for _, _, c in per_row for k in c))
        score = {k: sum(_judge(p, c.get(k)) is not None for _, p, c in per_row) for k in names}
        formula = max(names, key=lambda k: score[k]) if names and max(score.values()) > 0 else None
        checks = []
        for r, p, cands in per_row:
            reproduced = tuple(k for k, v in cands.items() if _judge(p, v))
            target = cands.get(formula) if formula else next((v for v in cands.values() if v), None)
            if target is None:
                status = "not_computable"
            else:
                status = (_judge(p, target) if formula else None) or "mismatch"
            pairs, gap, band = (), None, None
            if status == "not_computable" and column == "retention_printed" and r.n and p.kind != "fraction":
                pairs = _count_pairs(p, r.n)
                if len(pairs) == 1:
                    a, b = pairs[0]
                    gap = 100 * (a - b) / r.n
                    band = 100 * unpaired_ci_halfwidth(b / r.n, r.n, confidence_level=confidence_level)
            checks.append(
                DerivedCheck(
                    line=r.line,
                    label=r.label,
                    printed=p.text,
                    candidates={k: (None if v is None else v[0]) for k, v in cands.items()},
                    reproduced_by=reproduced,
                    recomputed=None if target is None else target[0],
                    status=status,
                    count_pairs=pairs,
                    implied_gap_points=gap,
                    implied_band_points=band,
                )
            )
        checked = sum(c.status != "not_computable" for c in checks)
        mism = sum(c.status == "mismatch" for c in checks)
        out.append(DerivedColumn(column, formula, checked, checked - mism, mism, tuple(checks)))
    return tuple(out)


# --- speed -----------------------------------------------------------------------------------
def _speed(t: Table) -> Speed | None:
    sm = list(t.speed_modes)
    base, cand = (sm[0], sm[1]) if len(sm) >= 2 else (None, None)
    rows, sources = [], []
    for r in t.rows:
        s = r.numbers.get("speedup_x")
        source = "speedup_x"
        if s is None and base:
            ratio = _ratio(r.speed.get(cand, {}).get("tok_per_s"), r.speed.get(base, {}).get("tok_per_s"))
            if ratio is not None:
                s, source = Num(ratio[0], 0.0, ""), f"{cand}/{base} tok/s"
        if s is None:
            continue
        sources.append(source)
        item = {"line": r.line, "label": r.label, "speedup": s.value}
        if base:
            tau = _ratio(r.speed.get(cand, {}).get("tau"), r.speed.get(base, {}).get("tau"))
            if tau is not None:
                item[f"{cand}/{base} tau"] = tau[0]
            a, b = r.speed.get(cand, {}).get("acceptance_pct"), r.speed.get(base, {}).get("acceptance_pct")
            if a is not None and b is not None:
                item[f"{cand}-{base} acceptance points"] = a.value - b.value
        if "acceptance_gain" in r.numbers:
            item["acceptance_gain"] = r.numbers["acceptance_gain"].value
        rows.append(item)
    ranges = _ranges(t)
    k_values, k_pairs = _draft_length(t)
    if not rows and not ranges and not k_pairs:
        return None
    values = [x["speedup"] for x in rows]
    included = [x for x in ranges if x.included]
    lows = [x.low for x in included if x.low is not None]
    highs = [x.high for x in included if x.high is not None]
    return Speed(
        column=", else ".join(dict.fromkeys(sources)),
        rows=tuple(rows),
        count=len(values),
        low=min(values) if values else None,
        high=max(values) if values else None,
        median=statistics.median(values) if values else None,
        correlations=_correlations(rows),
        ranges=ranges,
        range_low=min(lows) if lows else None,
        range_high=max(highs) if highs else None,
        median_range_low=statistics.median(lows) if lows else None,
        median_range_high=statistics.median(highs) if highs else None,
        draft_length=k_values,
        draft_length_pairs=k_pairs,
    )


def _correlations(rows) -> tuple:
    from scipy import stats

    out = []
    gains = [k for k in dict.fromkeys(k for x in rows for k in x) if k not in ("line", "label", "speedup")]
    for g in gains:
        pts = [(x["speedup"], x[g]) for x in rows if g in x]
        if len(pts) < 3:
            continue
        xs, ys = zip(*pts)
        if len(set(xs)) < 2 or len(set(ys)) < 2:
            continue
        pr = stats.pearsonr(xs, ys)
        sr = stats.spearmanr(xs, ys)
        out.append(
            Correlation(g, len(pts), float(pr.statistic), float(pr.pvalue), float(sr.statistic), float(sr.pvalue))
        )
    return tuple(out)


def _ranges(t: Table) -> tuple:
    out = []
    if "speedup_min_x" in t.columns or "speedup_max_x" in t.columns:
        for r in t.rows:
            lo, hi = r.numbers.get("speedup_min_x"), r.numbers.get("speedup_max_x")
            baseline = r.ids.get("baseline") or "standard"
            note = ""
            if baseline != "standard":
                note = f"measured against {baseline}, not standard speculative decoding"
            elif lo is None and hi is None:
                note = "no range given"
            out.append(
                SpeedRange(
                    r.label if "model" not in r.ids else _pair_label(r),
                    None if lo is None else lo.value,
                    None if hi is None else hi.value,
                    baseline,
                    not note,
                    note,
                )
            )
    elif "pair_speedup_min_x" in t.columns:
        seen = {}
        for r in t.rows:
            key = _pair_label(r)
            lo, hi = r.numbers.get("pair_speedup_min_x"), r.numbers.get("pair_speedup_max_x")
            if key in seen or (lo is None and hi is None):
                continue
            seen[key] = SpeedRange(
                key, None if lo is None else lo.value, None if hi is None else hi.value,
                "standard", True, "pair range repeated on every row of the pair, not a per-row value",
            )
        out = list(seen.values())
    return tuple(out)


def _pair_label(r: Row) -> str:
    parts = [r.ids.get(c, "") for c in ("runner", "platform", "model", "drafter")]
    k = r.ids.get("k")
    if k:
        parts.append(f"K={k}")
    return " / ".join(p for p in parts if p)


def _draft_length(t: Table):
    """Whole K consistent, within printing precision, with tau = 1 + K * rate on every row."""
    lo, hi, pairs = 0.0, math.inf, 0
    for r in t.rows:
        for m in t.speed_modes:
            rate, tau = r.speed.get(m, {}).get("acceptance_pct"), r.speed.get(m, {}).get("tau")
            if rate is None or tau is None or rate.value <= 0:
                continue
            pairs += 1
            lo = max(lo, (tau.low - 1) / ((rate.value + rate.half) / 100))
            top = (rate.value - rate.half) / 100
            hi = min(hi, (tau.high - 1) / top if top > 0 else math.inf)
    if not pairs or hi < lo or not math.isfinite(hi):
        return (), pairs
    return tuple(range(max(1, math.ceil(lo - _REL)), math.floor(hi + _REL) + 1)), pairs


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
            out.append(f"{len(speedless)} of {len(rows)} rows have no speed-up, throughput or acceptance values: {_lines(speedless)}")
    for col in ("retention_printed",):
        dashed = [r for r in rows if r.raw.get(col, "").strip().lower() in {"—", "–", "-", "n/a", "na"}]
        if dashed:
            out.append(f"{col} printed without a value (—) on {_lines(dashed)}")
    if "pair_speedup_min_x" in t.columns:
        out.append("pair_speedup_min_x/pair_speedup_max_x repeat each pair's range on every row: not per-row values")
    if status:
        out.append("value_status: " + ", ".join(f"{s} ({sum(r.raw.get('value_status') == s for r in rows)} rows)" for s in status))
    return tuple(out)
