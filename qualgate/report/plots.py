"""The figures of the HTML report, drawn with matplotlib and returned as inline SVG text.

Every function takes plain numbers (no qualgate objects) and returns one ``<svg>`` element
(no XML prolog, no external references), so the page that holds it opens from disk with no
network. Colours are mid-tones that read on a white page; the page inverts the figures in
dark mode. matplotlib is an optional dependency (the ``html`` extra); it is imported here,
lazily, with the non-interactive Agg backend.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from qualgate.evidence.contract import Verdict

__all__ = ["Interval", "acceptance_plot", "forest_plot", "sequential_plot", "speed_risk_plot"]

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
_VERDICT_COLOURS = {Verdict.PASS: "#2ca02c", Verdict.FAIL: "#d62728", Verdict.INCONCLUSIVE: "#ff7f0e"}


@dataclass(frozen=True)
class Interval:
    """One row of a forest plot: a point and its interval, in points of accuracy."""

    label: str
    point: float
    low: float
    high: float
    verdict: str | None = None
    pooled: bool = False


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.hashsalt": "qualgate",
        }
    )
    return plt


def _svg(fig, plt, prefix: str) -> str:
    """The figure as one ``<svg>`` element whose ids (and the references to them) start with
    ``prefix``: matplotlib numbers them the same way in every figure, and one page holds several."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", transparent=True, metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.index("<svg")
    # responsive: the page sets the width, the height follows the viewBox
    head, rest = text[start:].split(">", 1)
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    svg = f'{head} role="img">{rest}'.strip()
    ids = set(re.findall(r'\sid="([^"]+)"', svg))
    return re.sub(
        r'(\sid="|url\(#|href="#)([^")]+)',
        lambda m: m.group(1) + (f"{prefix}-{m.group(2)}" if m.group(2) in ids else m.group(2)),
        svg,
    )


def forest_plot(rows: Sequence[Interval], *, margin: float) -> str:
    """Loss (points) of each row with its interval, the margin drawn as a dashed line.

    A loss above zero means the candidate answers fewer questions right than the baseline.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 0.32 * len(rows) + 1.0))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        colour = _VERDICT_COLOURS.get(r.verdict or "", "#555555")
        ax.plot([r.low, r.high], [y, y], color=colour, lw=2.4 if r.pooled else 1.4)
        ax.plot([r.point], [y], marker="D" if r.pooled else "o", color=colour, ms=7 if r.pooled else 5)
    ax.axvline(0, color="#888888", lw=0.8)
    ax.axvline(margin, color="#d62728", lw=1.2, ls="--")
    ax.text(margin, len(rows) - 0.4, f" margin {margin:g}", color="#d62728", va="bottom", ha="left")
    ax.set_yticks(ys, [r.label for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.2)
    ax.set_xlabel("loss in points of accuracy (candidate below baseline →)")
    return _svg(fig, plt, "svg-forest")


def speed_risk_plot(points: Sequence[dict], *, margin: float) -> str:
    """Speed-up over the baseline (with its interval where measured) against the loss bound.

    ``points``: dicts with ``label``, ``loss_upper`` (points), ``speedup``, optional
    ``speedup_low``/``speedup_high`` and ``verdict``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    for p in points:
        colour = _VERDICT_COLOURS.get(p.get("verdict") or "", "#555555")
        lo, hi = p.get("speedup_low"), p.get("speedup_high")
        if lo is not None and hi is not None:
            ax.plot([p["loss_upper"]] * 2, [lo, hi], color=colour, lw=1.4)
        ax.plot([p["loss_upper"]], [p["speedup"]], "o", color=colour, ms=6)
        ax.annotate(p["label"], (p["loss_upper"], p["speedup"]), xytext=(5, 4), textcoords="offset points")
    ax.axvline(margin, color="#d62728", lw=1.2, ls="--")
    ax.axhline(1.0, color="#888888", lw=0.8)
    ax.set_xlabel("upper confidence bound of the loss (points); right of the dashed line: not shown safe")
    ax.set_ylabel("speed-up over the baseline")
    return _svg(fig, plt, "svg-speed")


def acceptance_plot(labels: Sequence[str], values: Sequence[float]) -> str:
    """Mean acceptance length (tokens per target step) of each speculative config."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 0.32 * len(labels) + 0.8))
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, values, color=_PALETTE[0])
    for y, v in zip(ys, values):
        ax.text(v, y, f" {v:.2f}", va="center")
    ax.set_yticks(ys, labels)
    ax.set_xlabel("mean acceptance length (1 + accepted draft tokens per drafting step)")
    return _svg(fig, plt, "svg-acceptance")


def sequential_plot(paths: Sequence[dict], *, margin: float) -> str:
    """Always-valid bounds of the loss (points) against the questions used, per candidate.

    ``paths``: dicts with ``label``, ``questions`` (x), ``low`` and ``high`` (points, same
    length; ``nan`` where unbounded) and ``verdict``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    for i, p in enumerate(paths):
        colour = _PALETTE[i % len(_PALETTE)]
        ax.plot(p["questions"], p["high"], color=colour, lw=1.4, label=f"{p['label']} ({p['verdict']})")
        ax.plot(p["questions"], p["low"], color=colour, lw=1.0, ls=":")
    ax.axhline(margin, color="#d62728", lw=1.2, ls="--")
    ax.axhline(0, color="#888888", lw=0.8)
    ax.set_ylim(-4 * margin, 5 * margin)  # the first looks' bounds (up to ±100) are clipped
    ax.set_xlabel("questions used")
    ax.set_ylabel("loss bounds (points): upper solid, lower dotted")
    ax.legend(loc="upper right", frameon=False)
    return _svg(fig, plt, "svg-sequential")
