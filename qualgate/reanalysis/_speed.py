"""Speed figures of a published table: per-row speed-ups, ranges, correlation with acceptance
gains, and the draft length K that mean acceptance length = 1 + K x acceptance rate implies."""

from __future__ import annotations

import math
import statistics

from ._results import Correlation, Speed, SpeedRange
from ._table import REL, Num, Row, Table, ratio

__all__ = ["speed"]


def speed(t: Table) -> Speed | None:
    """The table's speed figures, or ``None`` when it has none."""
    sm = list(t.speed_modes)
    base, cand = (sm[0], sm[1]) if len(sm) >= 2 else (None, None)
    rows, sources = [], []
    for r in t.rows:
        s = r.numbers.get("speedup_x")
        source = "speedup_x"
        if s is None and base:
            tps = ratio(r.speed.get(cand, {}).get("tok_per_s"), r.speed.get(base, {}).get("tok_per_s"))
            if tps is not None:
                s, source = Num(tps[0], 0.0, ""), f"{cand}/{base} tok/s"
        if s is None:
            continue
        sources.append(source)
        item = {"line": r.line, "label": r.label, "speedup": s.value}
        if base:
            tau = ratio(r.speed.get(cand, {}).get("tau"), r.speed.get(base, {}).get("tau"))
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
                key,
                None if lo is None else lo.value,
                None if hi is None else hi.value,
                "standard",
                True,
                "pair range repeated on every row of the pair, not a per-row value",
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
    return tuple(range(max(1, math.ceil(lo - REL)), math.floor(hi + REL) + 1)), pairs
