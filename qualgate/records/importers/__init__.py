"""Import per-sample logs of other evaluation tools as qualgate records.

One module per tool, each with ``detect(path) -> bool`` and
``read(path, options) -> list[Located]``:

==================  =========================================================================
format              what is read
==================  =========================================================================
``lm-eval``         lm-evaluation-harness ``--log_samples`` output: ``samples_<task>_<time>.jsonl``
                    files, a run's ``results_<time>.json`` (all its samples files), or the
                    output folder (model folders nested inside), with the
                    ``results_<time>.json`` beside each samples file (0.4.0 to 0.4.13)
``inspect``         inspect_ai logs (``.eval`` and ``.json``), through inspect_ai's own reader
                    (the ``inspect`` extra)
``nemo-evaluator``  NeMo Evaluator ``results.jsonl`` files, or a results bundle folder
``lighteval``       lighteval details Parquet files (``details_<task>_<time>.parquet``), or a
                    folder of them
==================  =========================================================================

No importer guesses the metric that decides a record's outcome (:func:`pick_metric`): it takes
``--metric``, else the one metric a line or row carries that could be the outcome, else the
metric the tool itself reports as the task's primary one (inspect_ai's headline metric), and
otherwise refuses, listing the metrics. The metric read is in each record's ``decided_by``
(``<tool>:<metric>``; lm-eval ``lm-eval:<filter>:<metric>``), which the gate prints, writes into
its report and compares between the sides (two logs read on different metrics are not gated).

Each importer maps the tool's question key to a stable ``question_id``, derives ``config_id``
from the model arguments the tool recorded (:func:`foreign_config_id`), hashes the prompt the
tool recorded with :func:`qualgate.records.prompts.prompt_hash`, and refuses what it cannot map with a
:class:`~qualgate.errors.DataError` naming the file, line and field. :func:`load_records` reads
a path in any of these formats (or qualgate's own) as a :class:`~qualgate.records.RecordSet`,
which is what ``qualgate gate`` and ``calibrate`` pair.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qualgate.config.options import INPUT_FORMATS
from qualgate.errors import DataError
from qualgate.records import Record, RecordSet

__all__ = [
    "FORMATS",
    "ImportOptions",
    "Located",
    "detect_format",
    "foreign_config_id",
    "import_records",
    "load_records",
    "pick_metric",
]

#: format name (:data:`qualgate.config.options.INPUT_FORMATS`) -> module (one per tool)
_MODULES = dict(
    zip(INPUT_FORMATS[1:], (f"qualgate.records.importers.{m}" for m in ("lm_eval", "inspect", "nemo", "lighteval")))
)
FORMATS = INPUT_FORMATS


@dataclass(frozen=True)
class ImportOptions:
    """Choices an importer cannot take from the log itself (``None``: the tool's own value).

    ``suite`` / ``suite_version``: name and version to give the suite (default: the tool's task
    name and version); ``id_field``: a field of the tool's document to use as question id
    instead of the tool's question key; ``filter`` (lm-eval): which filter's extracted answer
    decides (default: the task's first); ``metric``: which 0/1 metric (lm-eval, lighteval),
    scorer (inspect; ``scorer.key`` picks one value of a scorer that scores a dict) decides
    (default: see :func:`pick_metric`, never a guess); ``config_id`` / ``seed``: override the
    derived config id and the seed (default 0); ``partial``: read a log that holds fewer samples
    than its run reports (lm-eval ``n-samples`` or a results file listing tasks without their
    samples files, an inspect log whose status is not ``success``) instead of refusing it.
    """

    suite: str | None = None
    suite_version: str | None = None
    id_field: str | None = None
    filter: str | None = None
    metric: str | None = None
    config_id: str | None = None
    seed: int | None = None
    partial: bool = False


@dataclass(frozen=True)
class Located:
    """An imported record and where it came from (``file``, 1-based ``line`` or row)."""

    record: Record
    file: str
    line: int


def foreign_config_id(tool: str, model_args: Mapping) -> str:
    """``<tool>-`` and the first 16 hex of SHA-256 over the canonical JSON of the model
    arguments the tool recorded (sorted keys, no spaces)."""
    blob = json.dumps(
        {"tool": tool, "model": model_args}, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return f"{tool}-{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:16]}"


def _module(fmt: str):
    if fmt not in _MODULES:
        raise ValueError(f"format must be one of {', '.join(map(repr, FORMATS))}; got {fmt!r}")
    return importlib.import_module(_MODULES[fmt])


def detect_format(path) -> str:
    """The format of a path: ``qualgate`` for record files, else the tool whose layout it has.

    Raises :class:`~qualgate.errors.DataError` when no format recognises it.
    """
    p = Path(path)
    if not p.exists():
        raise DataError("no such file or directory", file=str(p))
    for fmt in _MODULES:
        if _module(fmt).detect(p):
            return fmt
    return "qualgate"


def import_records(fmt: str, path, options: ImportOptions | None = None) -> list[Located]:
    """Read one tool's log (a file or a folder) as records, with their origins.

    A path holding several runs is refused (:func:`check_runs`) when they are of different
    configurations or repeat a task: one side of a gate is one configuration.
    """
    located = _module(fmt).read(Path(path), options or ImportOptions())
    check_runs(fmt, located, str(path))
    return located


def check_runs(fmt: str, located: list[Located], where: str) -> None:
    """Refuse records of several runs (a run: the tool's file for it) that carry different config
    ids or that share a suite, naming each run by its file (lm-eval and lighteval: ``results_<time>.json``)
    and saying how to give one run."""
    module = _module(fmt)
    name = getattr(module, "run_file", lambda f: f)
    runs: dict = {}
    for x in located:
        file = Path(name(x.file))
        run = runs.setdefault(file, {"configs": set(), "suites": set(), "files": {}})
        run["configs"].add(x.record.config_id)
        run["suites"].add(x.record.suite)
        run["files"].setdefault(str(file.relative_to(where)) if file.is_relative_to(where) else str(file))
    if len(runs) < 2:
        return
    configs = {c for r in runs.values() for c in r["configs"]}
    suites = [s for r in runs.values() for s in r["suites"]]
    if len(configs) < 2 and len(suites) == len(set(suites)):
        return
    shown = "; ".join(
        f"{', '.join(r['files'])} (config {', '.join(sorted(r['configs']))}; {', '.join(sorted(r['suites']))})"
        for r in runs.values()
    )
    why = "of different configurations" if len(configs) > 1 else "of the same tasks"
    hint = getattr(module, "PICK_RUN", "give one run per side: its own files")
    base = Path(where) if Path(where).is_dir() else None
    first = [next(iter(r["files"])) for r in runs.values()][:2]
    example = " ".join(str(base / f) if base else f for f in first)
    raise DataError(f"{len(runs)} runs {why} here: {shown}; {hint} (e.g. qualgate gate {example})", file=where)


def load_records(
    path,
    *,
    fmt: str = "auto",
    options: ImportOptions | None = None,
    drop_truncated: bool = False,
    allow_unknown: bool = False,
) -> RecordSet:
    """One side for the gate: qualgate records, or another tool's log imported on the fly.

    ``fmt='auto'`` detects the format (:func:`detect_format`).
    """
    from qualgate.verdict.pairing import HashedRecordSet, load_side, sha256_file

    if isinstance(path, RecordSet):  # already read (qualgate.load_records)
        return path
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "qualgate":
        return load_side(path, drop_truncated=drop_truncated, allow_unknown=allow_unknown)
    located = import_records(fmt, path, options)
    files = list(dict.fromkeys(x.file for x in located))
    lines = [[x.line for x in located if x.file == f] for f in files]
    order = sorted(range(len(located)), key=lambda i: files.index(located[i].file))
    # the digests of the tool's own files: the evidence binds to what was imported
    return HashedRecordSet(
        str(path),
        tuple(files),
        tuple(located[i].record for i in order),
        (),
        tuple(lines),
        sha256=tuple(sha256_file(f) for f in files),
    )


# --- helpers shared by the importers ------------------------------------------------------------


def pick_metric(
    present,
    option: str | None,
    *,
    lower_is_better=(),
    primary: str | None = None,
    primary_from: str = "",
    tool: str,
    file,
    line=None,
    field: str = "metrics",
    option_hint: str = "--metric NAME",
) -> str:
    """The metric that decides a line's outcome, never a guess.

    ``present``: the metrics the line or row carries, in the tool's order. ``option``
    (``--metric``) wins and must be present. Else a metric the tool declares lower-is-better
    (``lower_is_better``: a failure rate such as lighteval's ``extract_fail``, lm-eval's
    ``perplexity``) cannot be a correctness outcome and is set aside; one metric left is the
    outcome; else ``primary``, the metric the tool itself reports as the task's primary
    (``primary_from`` says where it was read), when it is present. Otherwise a
    :class:`~qualgate.errors.DataError` lists the metrics and how to choose one.
    """
    present = list(dict.fromkeys(str(m) for m in present))
    if option is not None:
        if option in present:
            return option
        raise DataError(
            f"no metric {option!r} on this line (metrics: {', '.join(present) or 'none'})",
            file=str(file),
            line=line,
            field=field,
            value=option,
        )
    candidates = [m for m in present if m not in set(lower_is_better)]
    if len(candidates) == 1:
        return candidates[0]
    if primary is not None and primary in present:
        return primary
    if not candidates:
        raise DataError(
            f"no metric that could be the outcome on this line (metrics: {', '.join(present) or 'none'}"
            + (f"; lower-is-better: {', '.join(m for m in present if m in set(lower_is_better))}" if present else "")
            + ")",
            file=str(file),
            line=line,
            field=field,
        )
    raise DataError(
        f"{len(candidates)} metrics could be the outcome ({', '.join(candidates)}) and {tool} names none of them "
        f"as the task's primary metric{f' ({primary_from})' if primary_from else ''}: qualgate does not guess; "
        f"choose one with {option_hint.replace('NAME', candidates[0])} (or another of them)",
        file=str(file),
        line=line,
        field=field,
    )


def files_in(path: Path, pattern: str, what: str) -> list[Path]:
    """``path`` itself, or the files matching ``pattern`` under the folder ``path`` (any depth),
    sorted; none found is a DataError."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.rglob(pattern) if p.is_file())
    if not found:
        raise DataError(f"no {what} ({pattern}) in this folder", file=str(path))
    return found


def json_file(path: Path) -> dict:
    """A JSON file holding one object (a tool's results or bundle file)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"not a JSON file ({exc})", file=str(path)) from None
    if not isinstance(data, dict):
        raise DataError("not a JSON object", file=str(path))
    return data


def json_lines(path: Path):
    """``(line number, object)`` for each non-blank line of a JSON Lines file; a line that is
    not a JSON object is a DataError naming it."""
    with open(path, encoding="utf-8") as fh:
        for line, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except ValueError as exc:
                raise DataError(f"not a JSON object ({exc})", file=str(path), line=line, value=raw[:60]) from None
            if not isinstance(row, dict):
                raise DataError("not a JSON object", file=str(path), line=line, value=raw[:60])
            yield line, row


def require(data: Mapping, name: str, file, line, *, kind=None, where: str = ""):
    """``data[name]``, refusing a missing (or None) value or one of the wrong type."""
    value = data.get(name) if isinstance(data, Mapping) else None
    field = f"{where}{name}"
    if value is None:
        raise DataError("required field is missing", file=str(file), line=line, field=field)
    if kind is not None and not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DataError(f"must be {names}", file=str(file), line=line, field=field, value=_short(value))
    return value


def binary_outcome(value, file, line, field) -> str:
    """``correct`` / ``incorrect`` from a 0/1 score (bool, int or float exactly 0 or 1)."""
    if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
        return "correct" if value == 1 else "incorrect"
    raise DataError(
        "a score other than 0 or 1 cannot be a per-question outcome (choose a 0/1 metric)",
        file=str(file),
        line=line,
        field=field,
        value=_short(value),
    )


def located(data: dict, file, line) -> Located:
    """Validate ``data`` as a record, naming the source line on failure."""
    try:
        return Located(Record.from_dict(data), str(file), line)
    except DataError as exc:
        raise DataError(
            getattr(exc, "message", str(exc)), file=str(file), line=line, field=exc.field, value=exc.value
        ) from None


def as_text(value) -> str | None:
    """A tool's answer, gold or output as text (lists of one item unwrapped, None kept)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return as_text(value[0])
        return json.dumps(value, ensure_ascii=False, default=str)
    return value if isinstance(value, str) else str(value)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
