"""Printed derived figures (accuracies, retention, speed-up ratios) recomputed from the raw values.

For every printed derived column the candidate formulas are tried on every row; the one that
reproduces most rows is the column's formula, and each row is ``exact`` (it rounds to the
printed figure), ``within_input_rounding`` (only the rounding of its printed inputs allows it),
``mismatch`` or ``not_computable``. A printed ratio whose counts were not published is matched
against every count pair a/b that rounds to it.
"""

from __future__ import annotations

import math

from ._results import DerivedCheck, DerivedColumn
from ._table import RATIO_PRINTED, REL, Num, Row, Table, exact, ratio

__all__ = ["derived"]


def _judge(printed: Num, cand) -> str | None:
    """'exact' when the candidate rounds to the printed figure, 'within_input_rounding' when
    only the rounding of its inputs allows it, else None."""
    if cand is None:
        return None
    value, lo, hi = cand
    slack = REL * max(1.0, abs(printed.value))
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
            out[f"{m}_correct/n"] = ratio(exact(c), exact(r.n)) if r.n else None
            if r.n_questions and r.n_questions != r.n:
                out[f"{m}_correct/n_questions"] = ratio(exact(c), exact(r.n_questions))
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
                    out[f"{a}/{b}"] = ratio(exact(ca), exact(cb)) if ok else None
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
                out[name] = ratio(x, y)
    return out


def _count_pairs(printed: Num, n: int) -> tuple:
    """(a, b), 0 <= a <= n, 1 <= b <= n, with a/b rounding to a printed ratio."""
    out = []
    for b in range(1, n + 1):
        centre = printed.value * b
        for a in range(max(0, math.floor(centre) - 1), min(n, math.ceil(centre) + 1) + 1):
            if abs(a / b - printed.value) <= printed.half * (1 + REL):
                out.append((a, b))
    return tuple(sorted(set(out), key=lambda ab: (ab[1], ab[0])))


def derived(t: Table, confidence_level) -> tuple:
    """One :class:`DerivedColumn` per printed derived column of ``t``."""
    from ..stats import unpaired_ci_halfwidth

    columns = [f"{m}_printed" for m in t.modes] + list(RATIO_PRINTED)
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
