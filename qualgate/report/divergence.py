"""The divergence audit (:mod:`qualgate.verdict.divergence`) in words: the lines the gate's text
and the run's report print, and the rows of the HTML page's section."""

from __future__ import annotations

from qualgate.formatting import fmt_pct

__all__ = ["audit_lines", "audit_rows"]


def _positions(a) -> str:
    q = a.quantiles()
    if q is None:
        return "—"
    return " / ".join(f"{x:g}" for x in q)


def _margins(a) -> str:
    if not a.margins:
        return "no top-2 margins in the records"
    return (
        f"{a.near_ties:,} of {len(a.margins):,} at a near-tie (top-2 margin < {a.near_tie:g}: the "
        f"target's numerics), {len(a.margins) - a.near_ties:,} at a changed decision"
    )


def _expectation(a) -> str | None:
    if not a.expects_identical:
        return None
    if a.differing == 0:
        return f"lossless and greedy: all {a.pairs:,} outputs identical, as expected"
    return (
        f"lossless and greedy, so every output should be the baseline's: {a.differing:,} of "
        f"{a.pairs:,} ({fmt_pct(a.differing / a.pairs)}) differ"
        + (f", {a.near_ties:,} of them at near-ties" if a.margins else "")
    )


def audit_lines(name: str, a) -> list[str]:
    """One line (two for a greedy lossless candidate) for candidate ``name``'s audit ``a``."""
    if a is None or not a.pairs:
        return [] if a is None else [f"divergence, {name}: no pair with an output on both sides"]
    line = f"divergence, {name}: {fmt_pct(a.identical_share)} of {a.pairs:,} pairs byte-identical"
    if a.differing:
        line += f"; first difference at {a.unit} {_positions(a)} (10th / 50th / 90th percentile, from 0)" + (
            "; " + _margins(a) if a.unit == "token" else ""
        )
    if a.without_output:
        line += f" ({a.without_output:,} pairs without an output on a side left out)"
    expectation = _expectation(a)
    return [line] + ([f"  {expectation}"] if expectation else [])


def audit_rows(audits) -> list[list[str]]:
    """``[candidate, pairs, identical, unit, p10 / p50 / p90, near-ties / margins, expectation]``."""
    rows = []
    for name, a in audits:
        if a is None or not a.pairs:
            continue
        rows.append(
            [
                name,
                f"{a.pairs:,}",
                fmt_pct(a.identical_share),
                a.unit,
                _positions(a),
                f"{a.near_ties:,} / {len(a.margins):,}" if a.margins else "—",
                _expectation(a) or "",
            ]
        )
    return rows
