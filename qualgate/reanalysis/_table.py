"""Reading, naming and validating a published table (one row per cell) before any analysis.

Column vocabulary (canonical names; the spellings of the recovered vLLM #53987 files are
accepted as aliases, see :func:`canonical_column`):

- identity: ``model``, ``drafter``, ``k``, ``platform``, ``runner``, ``dataset``,
  ``batch_size``, ``proposer``, ``aggregate`` (used for labels and grouping);
- size: ``n`` (questions scored), else ``n_scored``, else ``n_questions``;
- per mode ``<mode>``: ``<mode>_correct`` (count), ``<mode>_printed`` (accuracy as printed:
  ``92.0%``, ``20/30``), ``<mode>_tok_per_s``, ``<mode>_acceptance_pct``, ``<mode>_tau``
  (mean acceptance length);
- printed derived figures: ``retention_printed``, ``speedup_x``, ``tau_ratio_x``,
  ``acceptance_gain``;
- speed-up ranges: ``speedup_min_x``, ``speedup_max_x`` (with ``baseline``), or
  ``pair_speedup_min_x``/``pair_speedup_max_x`` repeated on every row of a pair.

An empty cell means "not recovered"; ``—`` or ``-`` means "printed without a value".
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ..errors import DataError

ID_COLUMNS = ("model", "drafter", "k", "platform", "runner", "dataset", "batch_size", "proposer", "aggregate")
LABEL_COLUMNS = ("aggregate", "model", "platform", "runner", "dataset", "batch_size")
RATIO_PRINTED = ("retention_printed", "speedup_x", "tau_ratio_x")
NUMERIC_SINGLE = (
    "speedup_x",
    "tau_ratio_x",
    "acceptance_gain",
    "speedup_min_x",
    "speedup_max_x",
    "pair_speedup_min_x",
    "pair_speedup_max_x",
)
MODE_SUFFIXES = ("_correct", "_printed", "_tok_per_s", "_acceptance_pct", "_tau")
_RENAMES = {
    "target_draft": "model",
    "model_configuration": "model",
    "fly_over_sd_x": "speedup_x",
    "speedup_fly_over_sd_x": "speedup_x",
    "speedup_min_x_vs_standard_sd": "speedup_min_x",
    "speedup_max_x_vs_standard_sd": "speedup_max_x",
    "pair_speedup_min_x_docs": "pair_speedup_min_x",
    "pair_speedup_max_x_docs": "pair_speedup_max_x",
    "workloads": "workload",
}
_SUFFIXES = (
    ("_raw", "_printed"),
    ("_output_tok_per_s", "_tok_per_s"),
    ("_draft_acceptance_pct", "_acceptance_pct"),
    ("_acceptance_rate_pct", "_acceptance_pct"),
    ("_acceptance_length", "_tau"),
)
DASHES = frozenset({"—", "–", "-", "n/a", "na"})  #: "printed without a value"
_MODE_RE = re.compile(r"^[a-z][a-z0-9]*$")


def canonical_column(name: str) -> str:
    """The canonical name of a column (``target_raw`` -> ``target_printed`` and so on)."""
    name = str(name).strip().lower()
    if name in _RENAMES:
        return _RENAMES[name]
    if name.startswith("standard_sd_"):
        name = "standard_" + name[len("standard_sd_") :]
    for old, new in _SUFFIXES:
        if name.endswith(old):
            return name[: -len(old)] + new
    return name


@dataclass(frozen=True)
class Num:
    """A figure as printed: its value and the half-width its rounding leaves.

    Percentages are stored as fractions (``92.0%`` -> 0.92, half-width 0.0005); ``k/n`` is
    exact (half-width 0) and keeps ``k`` and ``n``.
    """

    value: float
    half: float
    text: str
    kind: str = "number"  # number | percent | fraction
    count: int | None = None
    of: int | None = None

    @property
    def low(self) -> float:
        return self.value - self.half

    @property
    def high(self) -> float:
        return self.value + self.half


#: Relative slack for float comparisons of rounding bounds.
REL = 1e-9


def exact(n: int) -> Num:
    """A count as a figure with no rounding."""
    return Num(float(n), 0.0, str(n))


def ratio(a: Num | None, b: Num | None):
    """``(value, low, high)`` of a/b given the rounding of a and b; ``None`` when undefined."""
    if a is None or b is None or b.value == 0:
        return None
    lo_den = b.value + b.half
    hi_den = b.value - b.half
    lo = (a.value - a.half) / lo_den
    hi = (a.value + a.half) / hi_den if hi_den > 0 else math.inf
    return a.value / b.value, lo, hi


def parse_number(text: str) -> Num | None:
    """Parse a printed figure; ``None`` when empty or printed as a dash.

    Raises ``ValueError`` when the text is not a number, a percentage or ``k/n``.
    """
    s = text.strip()
    if s == "" or s.lower() in DASHES:
        return None
    if "/" in s:
        k, _, n = s.partition("/")
        k, n = _int_text(k), _int_text(n)
        if k is None or n is None or n <= 0:
            raise ValueError(f"not a fraction k/n: {text!r}")
        return Num(k / n, 0.0, s, "fraction", k, n)
    percent = s.endswith("%")
    body = s[:-1].strip() if percent else s
    body = body.replace(",", "")
    try:
        d = Decimal(body)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    exponent = d.as_tuple().exponent
    decimals = max(0, -exponent) if isinstance(exponent, int) else 0
    half = 0.5 * 10.0 ** (-decimals)
    if percent:
        return Num(float(d) / 100, half / 100, s, "percent")
    return Num(float(d), half, s, "number")


def _int_text(text: str) -> int | None:
    try:
        d = Decimal(text.strip().replace(",", ""))
    except InvalidOperation:
        return None
    if not d.is_finite() or d != d.to_integral_value():
        return None
    return int(d)


@dataclass(frozen=True)
class Row:
    line: int  #: line in the CSV file (header = line 1)
    ids: dict
    n: int | None
    n_questions: int | None
    counts: dict  #: mode -> int or None
    printed: dict  #: canonical column -> Num (printed accuracies and derived figures)
    speed: dict  #: mode -> {"tok_per_s"|"acceptance_pct"|"tau": Num}
    numbers: dict  #: canonical column -> Num (NUMERIC_SINGLE)
    raw: dict  #: canonical column -> text

    label: str = ""  #: identity columns that vary across the table, joined with " / "


@dataclass(frozen=True)
class Table:
    source: str
    columns: tuple  #: canonical names in file order
    rows: tuple
    modes: tuple  #: modes with ``<mode>_correct``, reference first
    speed_modes: tuple  #: modes with throughput or acceptance columns
    reference: str
    ignored: tuple  #: columns not analysed (sources, notes, unknown)


def read_table(table, *, reference: str = "target", source: str | None = None) -> Table:
    """Read a path, a :class:`pandas.DataFrame` or a list of mappings into a :class:`Table`.

    Raises
    ------
    DataError
        Missing columns, unreadable or negative values, counts above ``n``; the message names
        every offending line and column.
    """
    header, records, source = _records(table, source)
    return validate(header, records, reference=reference, source=source)


def _records(table, source):
    if isinstance(table, (str, os.PathLike)):
        import csv
        import io

        from qualgate.records.strict import read_text

        path = os.fspath(table)
        try:
            rows = list(csv.reader(io.StringIO(read_text(path, bom="strip"), newline="")))
        except csv.Error as exc:
            raise DataError(f"not valid CSV: {exc}", file=path) from None
        if not rows:
            raise DataError("empty file: no header", file=path)
        header, body = rows[0], rows[1:]
        records = []
        for i, r in enumerate(body):
            if not any(c.strip() for c in r):
                continue
            if len(r) != len(header):
                raise DataError(f"{len(r)} fields, header has {len(header)}", file=path, line=i + 2)
            records.append((i + 2, r))
        return header, records, source or path
    if hasattr(table, "columns") and hasattr(table, "itertuples"):  # pandas.DataFrame
        header = [str(c) for c in table.columns]
        records = []
        for i, r in enumerate(table.itertuples(index=False, name=None)):
            records.append((i + 2, [_cell_text(v) for v in r]))
        return header, records, source or "<DataFrame>"
    rows = list(table)
    header = list(rows[0]) if rows else []
    records = [(i + 2, [_cell_text(r.get(c)) for c in header]) for i, r in enumerate(rows)]
    return header, records, source or "<records>"


def _cell_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and math.isnan(v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def validate(header, records, *, reference: str, source: str) -> Table:
    columns = []
    for name in header:
        c = canonical_column(name)
        if c in columns:
            raise DataError(f"two columns mean {c!r} (after renaming {name!r}); keep one", file=source, field=name)
        columns.append(c)
    modes = [c[: -len("_correct")] for c in columns if c.endswith("_correct")]
    speed_modes = []
    for c in columns:
        for suffix in ("_tok_per_s", "_acceptance_pct", "_tau"):
            m = c[: -len(suffix)] if c.endswith(suffix) else None
            if m and m not in speed_modes:
                speed_modes.append(m)
    for m in modes + speed_modes:
        if not _MODE_RE.match(m):
            raise DataError(f"mode name {m!r} must be lower-case letters and digits", file=source, field=f"{m}_correct")
    missing = []
    has_n = any(c in columns for c in ("n", "n_scored", "n_questions"))
    if modes:
        if reference not in modes:
            missing.append(f"{reference}_correct")
        if len(modes) < 2:
            missing.append("<mode>_correct for a second mode (e.g. fly_correct)")
        if "dataset" not in columns:
            missing.append("dataset")
        if not has_n:
            missing.append("n (or n_questions)")
    elif "retention_printed" in columns and not has_n:
        missing.append("n (or n_questions)")
    recognised = modes or speed_modes or any(c in columns for c in ("retention_printed", *NUMERIC_SINGLE))
    if not recognised:
        raise DataError(
            "no recognised columns: expected <mode>_correct counts (target_correct, "
            "standard_correct, fly_correct) with n and dataset, or speed-up columns "
            "(speedup_x, speedup_min_x/speedup_max_x, <mode>_tok_per_s)",
            file=source,
        )
    if missing:
        raise DataError(f"missing column(s): {', '.join(missing)}", file=source, field=missing[0])
    if modes:
        modes.remove(reference)
        modes.insert(0, reference)

    mode_cols = {f"{m}{s}" for m in set(modes) | set(speed_modes) for s in MODE_SUFFIXES}
    understood = set(ID_COLUMNS) | {"n", "n_scored", "n_questions", "baseline", *RATIO_PRINTED, *NUMERIC_SINGLE}
    understood |= {f"{m}_printed" for m in modes}
    ignored = tuple(c for c in columns if c not in understood and c not in mode_cols)

    problems: list[tuple[int, str, str, str]] = []  # line, column, value, message
    rows = []
    for line, values in records:
        raw = dict(zip(columns, (v.strip() for v in values)))
        rows.append(_row(line, raw, modes, speed_modes, columns, problems))
    if problems:
        lines = [f"line {ln}, column {col!r} = {val!r}: {msg}" for ln, col, val, msg in problems]
        err = DataError(f"{len(problems)} problem(s): " + "; ".join(lines), file=source)
        # the first problem's place, for callers that read the attributes
        err.line, err.field, err.value = problems[0][:3]
        err.problems = tuple(problems)
        raise err
    return Table(
        source=source,
        columns=tuple(columns),
        rows=tuple(_labelled(rows)),
        modes=tuple(modes),
        speed_modes=tuple(speed_modes),
        reference=reference,
        ignored=ignored,
    )


def _labelled(rows):
    """Label each row by the identity columns that tell rows apart (dataset always)."""
    keys = [
        c
        for c in LABEL_COLUMNS
        if any(r.ids.get(c) for r in rows) and (c == "dataset" or len({r.ids.get(c) for r in rows}) > 1)
    ]
    if "dataset" in keys and "batch_size" in keys:
        keys.remove("batch_size")
    out = []
    for r in rows:
        parts = [f"BS {r.ids[c]}" if c == "batch_size" else str(r.ids[c]) for c in keys if r.ids.get(c)]
        out.append(dataclasses.replace(r, label=" / ".join(parts) or f"line {r.line}"))
    return out


def _row(line, raw, modes, speed_modes, columns, problems) -> Row:
    def bad(col, msg):
        problems.append((line, col, raw.get(col, ""), msg))

    def integer(col, *, minimum):
        text = raw.get(col, "")
        if text == "":
            return None
        v = _int_text(text)
        if v is None:
            bad(col, "not a whole number")
            return None
        if v < minimum:
            bad(col, "is negative" if v < 0 else f"must be at least {minimum}")
            return None
        return v

    def number(col, *, positive=False):
        text = raw.get(col, "")
        try:
            v = parse_number(text)
        except ValueError:
            bad(col, "not a number")
            return None
        if v is not None and v.value < 0:
            bad(col, "is negative")
            return None
        if v is not None and positive and v.value == 0:
            bad(col, "must be positive")
            return None
        return v

    n_questions = integer("n_questions", minimum=1) if "n_questions" in columns else None
    n, n_given = None, False
    for col in ("n", "n_scored", "n_questions"):
        if col in columns and raw.get(col, "") != "":
            n = n_questions if col == "n_questions" else integer(col, minimum=1)
            n_given = True
            break
    if n is not None and n_questions is not None and n > n_questions:
        bad("n" if "n" in columns else "n_scored", f"exceeds n_questions = {n_questions}")
    counts = {}
    for m in modes:
        col = f"{m}_correct"
        c = integer(col, minimum=0)
        if c is not None and n is None:
            if not n_given:  # an unreadable n is reported once, above
                bad(col, "a count needs n (or n_questions) on the same row")
        elif c is not None and c > n:
            bad(col, f"exceeds n = {n}")
            c = None
        counts[m] = c
    printed = {}
    for col in [f"{m}_printed" for m in modes] + list(RATIO_PRINTED):
        if col in columns:
            v = number(col)
            if v is not None:
                printed[col] = v
    speed = {}
    for m in speed_modes:
        speed[m] = {}
        for key in ("tok_per_s", "acceptance_pct", "tau"):
            col = f"{m}_{key}"
            if col in columns:
                v = number(col, positive=key == "tau")
                if v is not None:
                    speed[m][key] = v
        if speed[m].get("acceptance_pct") and speed[m]["acceptance_pct"].value > 100:
            bad(f"{m}_acceptance_pct", "above 100")
    numbers = {}
    for col in NUMERIC_SINGLE:
        if col in columns:
            v = number(col, positive=True)
            if v is not None:
                numbers[col] = v
    ids = {c: raw[c] for c in ID_COLUMNS if c in raw}
    ids["baseline"] = raw.get("baseline", "")
    return Row(line, ids, n, n_questions, counts, printed, speed, numbers, raw)
