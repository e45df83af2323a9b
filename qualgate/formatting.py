"""Rendering helpers shared by every command: tables, JSON, atomic writes, step summaries.

Numbers are formatted by the caller (every cell is a string or a number); these helpers only
lay them out. Text tables right-align cells that look numeric and left-align the rest.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "append_step_summary",
    "fmt_p",
    "fmt_p_is",
    "fmt_points",
    "fmt_pct",
    "inert",
    "json_ready",
    "markdown_section",
    "markdown_table",
    "text_table",
    "to_json",
    "write_atomic",
]

_NUMERIC = re.compile(r"^[-+−]?[\d.,]+(e[-+]?\d+)?%?$|^[<>≤≥]\s?[\d.e-]+$|^[-—]$|^\[.*\]$|^\d+/\d+$")


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def text_table(rows: Sequence[Sequence], headers: Sequence[str], *, indent: str = "") -> str:
    """An aligned plain-text table: numeric-looking cells right-aligned, others left-aligned.

    Examples
    --------
    >>> print(text_table([["gsm8k", "1,319", "88.1%"]], ["suite", "n", "acc"]))
    suite      n    acc
    gsm8k  1,319  88.1%
    """
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(cells) and all(_NUMERIC.match(r[i]) for r in cells) for i in range(len(headers))]

    def line(values):
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(list(headers))] + [line(r) for r in cells])


def markdown_table(rows: Sequence[Sequence], headers: Sequence[str]) -> str:
    """A GitHub-flavoured markdown table (``|`` in cells and headers escaped).

    Examples
    --------
    >>> print(markdown_table([["a|b", 1]], ["x", "n"]))
    | x | n |
    | --- | ---: |
    | a\\|b | 1 |
    """
    cells = [[_cell(v).replace("|", "\\|") for v in row] for row in rows]
    numeric = [bool(cells) and all(_NUMERIC.match(r[i]) for r in cells) for i in range(len(headers))]
    head = [str(h).replace("|", "\\|") for h in headers]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(out)


def markdown_section(
    title: str, preamble: str, rows: Sequence[Sequence], headers: Sequence[str], items: Sequence[str]
) -> str:
    """A report as markdown: a heading, the preamble as a code block, the table, a bullet list.

    ``items`` are markdown bullets' texts; an item starting with two spaces is nested.
    """
    out = [f"### {title}", "", "```\n" + preamble + "\n```", "", markdown_table(rows, headers), ""]
    out += [f"  - {i.strip()}" if i.startswith("  ") else f"- {i}" for i in items]
    return "\n".join(out) + "\n"


_PLAIN = frozenset({str, int, bool})


def json_ready(obj):
    """Recursively convert to JSON-ready values: NaN/inf become ``None``, tuples lists,
    numpy scalars Python numbers, objects with ``to_dict()`` their dict."""
    if obj is None or type(obj) in _PLAIN:  # most values of a large report: no lookups
        return obj
    if hasattr(obj, "to_dict") and not isinstance(obj, type):
        return json_ready(obj.to_dict())
    if isinstance(obj, enum.Enum):  # a Verdict: its name
        return json_ready(obj.value)
    if type(obj) is dict and all(v is None or type(v) in _PLAIN for v in obj.values()):
        return {str(k): v for k, v in obj.items()}  # a flat dict (a flip, a row): no call per value
    if isinstance(obj, Mapping):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json(obj, *, indent: int | None = 2) -> str:
    """One JSON document (NaN and inf written as ``null``).

    Indented as ``json.dumps(..., indent=indent)`` writes it, byte for byte (a test checks it),
    but encoded compactly by the C encoder and then indented by msgspec: ``json.dumps`` with an
    indent runs its pure-Python encoder, which took 2 s of a million-pair gate's report.
    """
    data = json_ready(obj)
    if not indent:
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    import msgspec.json

    compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return msgspec.json.format(compact, indent=indent)


def write_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, fsync, ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def append_step_summary(markdown: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Append ``markdown`` to the file named by ``GITHUB_STEP_SUMMARY``, if it is set.

    Returns the path written, or ``None`` when the variable is unset or empty.
    """
    target = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(markdown.rstrip("\n") + "\n\n")
    return target


def fmt_pct(x, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.8812 -> '88.1%'``; ``None``/NaN -> '—'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:.{digits}f}%"


def fmt_points(x, digits: int = 2, *, sign: bool = False) -> str:
    """A difference of fractions in percentage points: ``-0.0123 -> '-1.23'``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:{'+' if sign else ''}.{digits}f}"


def fmt_p(p) -> str:
    """A p-value: 3 significant digits, ``<1e-10`` below that."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    if p < 1e-10:
        return "<1e-10"
    return f"{p:.3g}" if p < 0.001 else f"{p:.3f}"


def fmt_p_is(p) -> str:
    """A p-value in a sentence: ``'p = 0.012'``, or ``'p < 1e-10'`` below that.

    Examples
    --------
    >>> fmt_p_is(0.0123), fmt_p_is(1e-12)
    ('p = 0.012', 'p < 1e-10')
    """
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


#: what stderr shows before an engine's imitation of vLLM's one-time warnings
ENGINE_WARNING_PREFIX = "reference engine (as vLLM 0.33 would log): WARNING"


def show_engine_warnings(stream=None) -> None:
    """Print the reference engine's warnings (logger ``qualgate.engines``) on stderr, each on
    its own line and prefixed so that it does not read as qualgate's own (nor lands glued to a
    progress bar). Installed once per process (the CLI, each engine worker)."""
    import logging
    import sys

    logger = logging.getLogger("qualgate.engines")
    if any(getattr(h, "_qualgate", False) for h in logger.handlers):
        return
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    # (a terminal's progress bar has no newline yet: start a line of our own)
    lead = "\n" if getattr(stream, "isatty", lambda: False)() else ""
    handler.setFormatter(logging.Formatter(f"{lead}{ENGINE_WARNING_PREFIX} %(message)s"))
    handler.setLevel(logging.WARNING)
    handler._qualgate = True
    logger.addHandler(handler)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_COMMAND = re.compile(r"^(\s*)(::|##\[)", re.MULTILINE)


def inert(text: str) -> str:
    """``text`` safe to print where a CI runner reads commands from the output: control
    characters but newline and tab escaped (``\\r``, ``\\x1b``), and a line that would start a
    GitHub workflow command (``::notice::``, ``##[error]``, from a file name with a newline
    in it) prefixed with a backslash, so that it is printed, never run."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))
    return _COMMAND.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
