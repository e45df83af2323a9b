"""Text and markdown renderings of a :class:`~qualgate.verdict.fixed.GateReport` (tables laid out by
:mod:`qualgate.formatting`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qualgate.formatting import fmt_p, fmt_pct, fmt_points, markdown_section, text_table
from qualgate.verdict.flips import render_markdown as render_flips_markdown

if TYPE_CHECKING:
    from qualgate.verdict.fixed import GateReport
    from qualgate.verdict.scope import Analysis

__all__ = ["render_markdown", "render_text"]


def _headers(report: GateReport) -> list[str]:
    tier = ["tier", "margin"] if report.suite_policy else []
    return [
        "candidate",
        "suite",
        *tier,
        "questions",
        "pairs",
        "acc B",
        "acc C",
        "lost",
        "gained",
        "net",
        "no-ans B/C",
        "p loss",
        "p NI",
        f"{1 - 2 * report.alpha:.0%} CI diff (pts)",
        f"loss UB {1 - report.alpha:.0%}",
        "verdict",
    ]


def _row(name, a: Analysis, verdict=None):
    low, high = a.ci_difference
    return [
        name,
        a.scope,
        f"{a.questions:,}",
        f"{a.pairs:,}",
        fmt_pct(a.accuracy_baseline),
        fmt_pct(a.accuracy_candidate),
        a.lost,
        a.gained,
        f"{a.net:+d}",
        f"{a.no_answer_baseline}/{a.no_answer_candidate}",
        fmt_p(a.pvalue_loss),
        fmt_p(a.pvalue_noninferiority),
        f"[{fmt_points(low, sign=True)}, {fmt_points(high, sign=True)}]",
        fmt_points(a.loss_upper_bound),
        verdict or a.verdict,
    ]


def _rows(report: GateReport):
    rows = []
    for c in report.comparisons:
        if report.suite_policy is not None:  # every suite with its tier; blocking verdicts in capitals
            for a, tier, v in zip(c.suites, c.tiers, c.suite_verdicts):
                row = _row(c.name, a, v if tier == "blocking" else v.lower())
                rows.append(row[:2] + [tier, fmt_points(a.margin)] + row[2:])
            row = _row(c.name, c.pooled, c.pooled.verdict.lower())
            rows.append(row[:1] + ["pooled (info)", "—", fmt_points(c.pooled.margin)] + row[2:])
            continue
        if len(c.suites) > 1:
            rows += [_row(c.name, a, a.verdict.lower()) for a in c.suites]
        rows.append(_row(c.name, c.pooled, c.verdict))
    return rows


def _header(report: GateReport) -> str:
    b = report.baseline
    policy = (
        f"non-inferiority, margin {fmt_points(report.margin)} points"
        if report.policy == "noninferiority"
        else f"McNemar (power at a {fmt_points(report.margin)}-point loss)"
    )
    if report.suite_policy is not None:
        policy = f"{report.policy}, per-suite margins and tiers from {report.suite_policy.path}"
    return (
        f"qualgate gate: {policy}, alpha {report.alpha:g} one-sided, suites {report.weighting}\n"
        f"baseline: {b.path} (config {b.config_id}" + (f", mode {b.mode}" if b.mode else "") + ")"
    )


def _decided_by(report: GateReport) -> list[str]:
    """Per side, the share of records each extractor decided (beside the no-answer column)."""
    sides = [("baseline", report.baseline)] + [(c.name, c.candidate) for c in report.comparisons]
    out = []
    for name, side in sides:
        if side.decided_by and side.n_records:
            shares = [f"{label} {fmt_pct(n / side.n_records)}" for label, n in side.decided_by]
            none = side.n_records - sum(n for _, n in side.decided_by)
            shares += [f"none {fmt_pct(none / side.n_records)}"] if none else []
            out.append(f"decided by, {name} ({side.n_records:,} records): {', '.join(shares)}")
    return out


def _divergence(report: GateReport) -> list[str]:
    """The divergence audit of each candidate (:mod:`qualgate.verdict.divergence`), when computed."""
    from qualgate.report.divergence import audit_lines

    return [line for c in report.comparisons for line in audit_lines(c.name, getattr(c, "divergence", None))]


def _methods(report: GateReport) -> list[str]:
    """Which test each column comes from (issue 36 item 8): p loss is a test of its own; the
    interval and the bound invert the non-inferiority test, so they agree on the margin and 0."""
    from qualgate.verdict.scope import METHOD_NAMES

    def names(key):
        found = dict.fromkeys(a.methods.get(key) for c in report.comparisons for a in (c.pooled, *c.suites))
        return ", ".join(METHOD_NAMES.get(m, m) for m in found if m)

    return [
        f"columns: p loss from the {names('loss_test')}; p NI, CI diff and loss UB from the "
        f"{names('noninferiority')}, inverted (CI low = -UB); the CI's upper end is not the p loss test"
    ]


#: the columns of the default (100-column) table; ``wide=True`` shows every one of :func:`_headers`
NARROW = ("candidate", "suite", "tier", "margin", "pairs", "acc B", "acc C", "lost", "gained", "no-ans B/C")


def _narrow(report: GateReport, headers: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """The columns that fit 100 characters: the counts, the loss bound and the verdict (the
    p-values and the two-sided interval are in ``--wide``, the JSON and the markdown); the
    suite column only when there are several suites or a policy file."""
    keep = set(NARROW) | {headers[-2], headers[-1]}
    single = report.suite_policy is None and all(len(c.suites) <= 1 for c in report.comparisons)
    if single:
        keep.discard("suite")
    idx = [i for i, h in enumerate(headers) if h in keep]
    return [headers[i] for i in idx], [[row[i] for i in idx] for row in rows]


def _gain_note(c) -> str | None:
    """The sentence a PASS with a bound below zero needs: the candidate gained."""
    a = c.pooled
    ub = a.loss_upper_bound
    if c.verdict != "PASS" or ub is None or ub >= 0:
        return None
    return (
        f"the bound is below zero because the candidate gained ({a.gained} gained against {a.lost} lost): "
        "the gate tests for a loss larger than the margin, and a gain is not a loss, so it passes"
    )


def render_text(report: GateReport, *, wide: bool = False) -> str:
    """The aligned text table, the share decided by each extractor, one sentence per candidate
    and any notes. The table fits 100 columns (see :func:`_narrow`) unless ``wide``."""
    headers, rows = _headers(report), _rows(report)
    if not wide:
        headers, rows = _narrow(report, headers, rows)
    scope = ""
    if not wide and "suite" not in headers and report.comparisons:
        scope = f"suite: {report.comparisons[0].pooled.scope}; "
    table = text_table(rows, headers)
    out = [_header(report), "", table]
    if not wide:
        out.append(f"({scope}p-values and the two-sided interval: --wide or --format json)")
    out += _decided_by(report) + (_methods(report) if wide else []) + [""]
    for c in report.comparisons:
        a = c.pooled
        unit = (
            f"; {a.pairs_per_question} pairs per question, design effect {a.design_effect:.2f}" if a.clustered else ""
        )
        out.append(f"{c.name}: {c.verdict}: {c.reason}{unit}.")
        gain = _gain_note(c)
        out += [f"  note: {gain}"] if gain else []
        out += [f"  note: {n}" for n in c.notes]
    if report.suite_policy is not None:
        out.append(
            "(policy file: blocking suites decide, in capitals; warning and advisory suites and the "
            "pooled row are for information)"
        )
    elif any(len(c.suites) > 1 for c in report.comparisons):
        out.append("(per-suite verdicts, in lower case, are for information; the pooled row decides)")
    flipped = [c for c in report.comparisons if c.flips is not None and c.flips.flips]
    if flipped:
        out.append(
            "flips: "
            + "; ".join(f"{c.name} {len(c.flips.lost)} lost, {len(c.flips.gained)} gained" for c in flipped)
            + " (every one: qualgate flips BASELINE CANDIDATE)"
        )
    out += _divergence(report)
    code = report.exit_code
    out.append(f"verdict: {report.verdict} (exit {code})")
    return "\n".join(out) + "\n"


def render_markdown(report: GateReport) -> str:
    """The report as a markdown section (for ``--markdown`` and the GitHub step summary)."""
    items = list(_decided_by(report)) + _methods(report)
    for c in report.comparisons:
        items.append(f"**{c.name}**: {c.verdict}: {c.reason}.")
        gain = _gain_note(c)
        items += [f"  note: {gain}"] if gain else []
        items += [f"  note: {n}" for n in c.notes]
    items += _divergence(report)
    page = markdown_section(f"qualgate gate: {report.verdict}", _header(report), _rows(report), _headers(report), items)
    for c in report.comparisons:
        if c.flips is not None:
            page += "\n" + render_flips_markdown(c.flips, c.name)
    return page
