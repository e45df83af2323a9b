"""Text and Markdown renderings of a :class:`~qualgate.reanalysis.Reanalysis` (tables laid out
by :mod:`qualgate.formatting`)."""

from __future__ import annotations

import math

from qualgate.formatting import markdown_table, text_table


def _f(x, digits=2, signed=False):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


class _Doc:
    """Lines of a text or Markdown document, built section by section."""

    def __init__(self, md: bool):
        self.md = md
        self.out: list[str] = []

    def heading(self, text):
        self.out.append("")
        self.out.append(f"## {text}" if self.md else text)
        self.out.append("" if self.md else "-" * len(text))

    def para(self, text):
        self.out.append(text)
        if self.md:
            self.out.append("")

    def grid(self, headers, rows):
        if self.md and self.out and self.out[-1] != "":
            self.out.append("")
        self.out.append(markdown_table(rows, headers) if self.md else text_table(rows, headers))
        if self.md:
            self.out.append("")

    def text(self) -> str:
        text = "\n".join(self.out).strip("\n") + "\n"
        while "\n\n\n" in text:
            text = text.replace("\n\n\n", "\n\n")
        return text


def render(r, fmt: str) -> str:
    """``r`` as ``text`` or ``markdown``: each section of the report, in order, when it has content."""
    doc = _Doc(fmt == "markdown")
    for section in (_title, _per_cell, _across_cells, _derived, _speed, _requirements, _missing):
        section(doc, r)
    return doc.text()


def _title(doc: _Doc, r) -> None:
    level = f"{100 * r.confidence_level:g}%"
    doc.out.append(f"# Reanalysis of {r.source}" if doc.md else f"Reanalysis of {r.source}")
    if doc.md:
        doc.out.append("")
    if r.modes:
        doc.para(
            f"{len(r.cells)} cell(s) with counts; modes: {r.reference} (reference), "
            f"{', '.join(r.modes[1:])}. Gaps are mode minus {r.reference} in points; the band is "
            f"the {level} half-width two unpaired single runs of that size differ by at the "
            f"{r.reference} accuracy."
        )


def _per_cell(doc: _Doc, r) -> None:
    if not r.cells:
        return
    doc.heading("Per cell")
    others = list(r.modes[1:])
    headers = ["line", "cell", "n", r.reference]
    for m in others:
        headers += [m, f"{m} gap"]
    headers += ["band ±", "gap beyond band"]
    rows = []
    for c in r.cells:
        g = {x.mode: x for x in c.gaps}
        row = [c.line, c.label, c.n, _f(100 * c.reference_accuracy)]
        for m in others:
            row += [_f(100 * g[m].accuracy), _f(g[m].gap_points, signed=True)] if m in g else ["—", "—"]
        beyond = [x.mode for x in c.gaps if x.exceeds_band]
        row += [_f(c.band_points), ", ".join(beyond) or "none"]
        rows.append(row)
    doc.grid(headers, rows)


def _across_cells(doc: _Doc, r) -> None:
    if not r.totals:
        return
    doc.heading("Across cells")
    headers = [
        "mode",
        "cells",
        "mean |gap|",
        "n",
        "correct",
        r.reference,
        "net answers",
        "pooled gap",
        "cells above/below/equal",
        "beyond band",
    ]
    rows = [
        [
            t.mode,
            t.cells,
            _f(t.mean_abs_gap_points),
            t.n,
            t.correct,
            t.reference_correct,
            f"{t.net_answers:+d}",
            _f(t.gap_points, signed=True),
            f"{t.cells_above}/{t.cells_below}/{t.cells_equal}",
            t.cells_exceeding_band,
        ]
        for t in r.totals
    ]
    doc.grid(headers, rows)
    _noise_yardstick(doc, r)
    if len(r.by_dataset) < len(r.cells):
        doc.heading("By dataset")
        headers = ["dataset", "mode", "cells", "n", "correct", r.reference, "net answers", "gap"]
        rows = [
            [
                d.dataset,
                t.mode,
                t.cells,
                t.n,
                t.correct,
                t.reference_correct,
                f"{t.net_answers:+d}",
                _f(t.gap_points, signed=True),
            ]
            for d in r.by_dataset
            for t in d.modes
            if t.cells
        ]
        doc.grid(headers, rows)


def _noise_yardstick(doc: _Doc, r) -> None:
    """Each mode's movement against the lossless standard mode's, where the table has one."""
    std = next((t for t in r.totals if t.mode == "standard"), None)
    if std is None:
        return
    for t in r.totals:
        if t is not std:
            doc.para(
                f"Noise yardstick: lossless standard SD moves {_f(std.mean_abs_gap_points)} points "
                f"from {r.reference} on average (mean |gap|); {t.mode} moves {_f(t.mean_abs_gap_points)}. "
                f"Pooled, standard has {std.net_answers:+d} and {t.mode} {t.net_answers:+d} answers "
                f"against {r.reference} over {t.n} questions."
            )


def _derived(doc: _Doc, r) -> None:
    if not r.derived:
        return
    doc.heading("Printed derived columns, recomputed")
    for col in r.derived:
        _derived_summary(doc, r, col)
        shown = [c for c in col.checks if c.status != "exact"]
        if shown:
            headers = ["line", "cell", "printed", f"{col.formula or 'recomputed'}", "status", "reproduced by"]
            rows = [
                [
                    c.line,
                    c.label,
                    c.printed,
                    "—" if c.recomputed is None else _num(c.printed, c.recomputed),
                    c.status,
                    _reproduced_by(c),
                ]
                for c in shown
            ]
            doc.grid(headers, rows)


def _derived_summary(doc: _Doc, r, col) -> None:
    """Whether a formula reproduces a printed derived column, and how often."""
    if col.formula:
        loose = sum(c.status == "within_input_rounding" for c in col.checks)
        doc.para(
            f"{col.column}: {col.formula} reproduces {col.reproduced} of {col.checked} printed value(s)"
            + (f" ({loose} only within the rounding of its printed inputs)" if loose else "")
            + f"; {col.mismatches} mismatch(es)."
        )
        base = col.formula.split("/")[-1].split(" ")[0]
        if col.column == "retention_printed" and base != r.reference:
            doc.para(f"Note: {col.formula} is relative to {base}, not to {r.reference}.")
    elif col.checked:
        doc.para(f"{col.column}: no candidate formula reproduces any of {col.checked} printed value(s).")
    else:
        doc.para(f"{col.column}: {len(col.checks)} printed value(s), none recomputable from this table.")


def _reproduced_by(c) -> str:
    """What reproduces one printed value: formulas, counts, or a gap against the noise band."""
    by = ", ".join(c.reproduced_by) or "no candidate"
    if c.count_pairs:
        by = "counts " + ", ".join(f"{a}/{b}" for a, b in c.count_pairs[:6])
        by += " …" if len(c.count_pairs) > 6 else ""
    if c.implied_gap_points is not None:
        by += (
            f" only: a gap of {_f(c.implied_gap_points, signed=True)} points against a band "
            f"of ±{_f(c.implied_band_points)}"
        )
    return by


def _speed(doc: _Doc, r) -> None:
    s = r.speed
    if s is None:
        return
    doc.heading("Speed")
    if s.count:
        doc.para(
            f"Speed-up ({s.column}, {s.count} row(s)): {_f(s.low, 3)} to {_f(s.high, 3)}, median {_f(s.median, 3)}."
        )
    for c in s.correlations:
        doc.para(
            f"Speed-up vs {c.gain} over {c.n} rows: Pearson r = {_f(c.pearson_r)} (p = {_f(c.pearson_pvalue, 3)}), "
            f"Spearman rho = {_f(c.spearman_rho)} (p = {_f(c.spearman_pvalue, 3)})."
        )
    _draft_length(doc, s)
    if s.ranges:
        doc.para(
            f"Speed-up ranges: {_f(s.range_low, 3)} to {_f(s.range_high, 3)} over "
            f"{sum(x.included for x in s.ranges)} range(s); median minimum {_f(s.median_range_low, 3)}, "
            f"median maximum {_f(s.median_range_high, 3)}."
        )
        rows = [
            [x.label, _f(x.low, 3), _f(x.high, 3), x.baseline, "yes" if x.included else "no", x.note] for x in s.ranges
        ]
        doc.grid(["pair", "min", "max", "baseline", "in range", "note"], rows)


def _draft_length(doc: _Doc, s) -> None:
    """Whether mean acceptance length = 1 + K x acceptance rate for one whole K."""
    if not s.draft_length_pairs:
        return
    if s.draft_length:
        ks = ", ".join(map(str, s.draft_length))
        doc.para(
            f"Mean acceptance length = 1 + K x acceptance rate holds, within printing precision, "
            f"on all {s.draft_length_pairs} (row, mode) pairs for K = {ks}."
        )
    else:
        doc.para(
            f"No single whole K makes mean acceptance length = 1 + K x acceptance rate on all "
            f"{s.draft_length_pairs} (row, mode) pairs."
        )


def _requirements(doc: _Doc, r) -> None:
    if not r.requirements:
        return
    doc.heading("What it would take")
    doc.para(
        f"Paired questions a two-sided McNemar test (alpha {r.alpha:g}, power {r.power:g}) needs to "
        f"detect a true loss of the size seen, at a discordant fraction of "
        f"{', '.join(f'{d:g}' for d in r.discordance)}."
    )
    keyed: dict = {}
    for q in r.requirements:
        keyed.setdefault((q.mode, q.scope, q.n_seen, q.loss), {})[q.discordance] = q.n_required
    headers = ["mode", "scope", "n seen", "loss (points)"] + [f"n @ {d:g}" for d in r.discordance]
    rows = [
        [m, sc, n, _f(100 * loss, signed=True)] + [("—" if v.get(d) is None else v[d]) for d in r.discordance]
        for (m, sc, n, loss), v in keyed.items()
    ]
    doc.grid(headers, rows)
    doc.para("— : the discordant fraction is smaller than the loss, which it cannot be.")


def _missing(doc: _Doc, r) -> None:
    if not (r.missing or r.ignored_columns):
        return
    doc.heading("Missing or not analysed")
    for m in r.missing:
        doc.out.append(f"- {m}")
    if r.ignored_columns:
        doc.out.append(f"- columns not analysed: {', '.join(r.ignored_columns)}")


def _num(printed: str, value: float) -> str:
    if printed.endswith("%"):
        return f"{100 * value:.2f}%"
    if "/" in printed:
        return f"{value:.4f}"
    return f"{value:.4f}"
