"""Per-question records: the one schema every run, tool and gate reads and writes.

A *record* is the scored outcome of one request: one question of one suite, with one seed and
one sample index, under one decoding configuration. Baseline and candidate records pair on
``(suite, question_id, seed, sample_index)`` (:attr:`Record.key`), never on row order.

Storage is JSON Lines: one JSON object per line, UTF-8, every line ended by ``\\n``.
:class:`RecordWriter` only appends, and flushes and fsyncs once per batch, so a crash can leave
at most one incomplete last line. Readers detect that line and refuse it
(:func:`read_records` raises :class:`~qualgate.errors.DataError`) unless it is dropped
explicitly (``drop_truncated=True``) or removed with :func:`repair_truncated`; it is never
parsed silently. Parquet and CSV exports with the same columns are read too.

The schema (``schema_version`` 1) is a public contract, documented in the README:

=================  ========  =====================================================
field              required  meaning
=================  ========  =====================================================
schema_version     yes       1
run_id             yes       the run that wrote the record
config_id          yes       hash of the resolved decoding configuration
suite              yes       suite name
suite_version      yes       suite version (string; bumped when prompting or grading changes)
question_id        yes       question id within the suite (string)
seed               yes       the request's sampling seed (int)
sample_index       yes       index of the sample for this (question, seed), >= 0
outcome            yes       ``correct``, ``incorrect``, ``no_answer`` or ``error``
prompt_hash        yes       hash of the rendered prompt
mode               no        a label (``target``, ``standard``, ``fly`` ...)
answer_strict      no        answer extracted by the strict extractor
answer_lenient     no        answer extracted by the lenient extractor
decided_by         no        the extractor whose answer decided ``outcome`` (``strict:boxed``)
gold               no        the reference answer
output             no        the generated text
output_tokens      no        generated tokens (int >= 0)
spec_steps         no        speculative drafting steps (int >= 0)
draft_tokens       no        draft tokens proposed (int >= 0)
accepted_tokens    no        draft tokens accepted, deferred ones included (int >= 0)
deferred_tokens    no        draft tokens kept by a deferral (FLy) (int >= 0)
latency_s          no        request latency in seconds (finite, >= 0)
error              no        the engine's error message (with outcome ``error``)
=================  ========  =====================================================

``no_answer`` (nothing could be extracted) is distinct from ``incorrect``; ``error`` (the engine
failed) is neither: the gate never counts it as a wrong answer.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import repeat
from pathlib import Path

from ._strict import DuplicateKey, NonFinite, decode_text, is_regular_file, parse_json, read_bytes, sniff
from .errors import DataError

__all__ = [
    "OUTCOMES",
    "RECORD_SUFFIXES",
    "SCHEMA_VERSION",
    "Record",
    "RecordSet",
    "RecordWriter",
    "TruncatedLine",
    "existing_keys",
    "read_records",
    "record_files",
    "repair_truncated",
]

SCHEMA_VERSION = 1
OUTCOMES = ("correct", "incorrect", "no_answer", "error")
#: File suffixes read as records (a directory argument means every such file in it).
RECORD_SUFFIXES = (".jsonl", ".parquet", ".csv")

_STR, _INT, _COUNT, _FLOAT = (
    "a string", "an integer (64-bit)", "an integer >= 0 (64-bit)", "a finite number >= 0",
)  # fmt: skip
_I64 = 1 << 63


@dataclass(frozen=True)
class Record:
    """One scored request. Field meanings: see the module docstring (and the README).

    Constructing a record validates it (:class:`~qualgate.errors.DataError` names the field
    and value); :meth:`from_dict` validates a parsed JSON object.
    """

    schema_version: int
    run_id: str
    config_id: str
    suite: str
    suite_version: str
    question_id: str
    seed: int
    sample_index: int
    outcome: str
    prompt_hash: str
    mode: str | None = None
    answer_strict: str | None = None
    answer_lenient: str | None = None
    decided_by: str | None = None
    gold: str | None = None
    output: str | None = None
    output_tokens: int | None = None
    spec_steps: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    deferred_tokens: int | None = None
    latency_s: float | None = None
    error: str | None = None

    def __post_init__(self):
        _validate(self.__dict__)

    @property
    def key(self) -> tuple[str, str, int, int]:
        """The pairing key ``(suite, question_id, seed, sample_index)``."""
        return (self.suite, self.question_id, self.seed, self.sample_index)

    def to_dict(self) -> dict:
        """The JSON object of this record: required fields, then the optional fields that are set."""
        d = self.__dict__
        return {name: d[name] for name in FIELDS if name in _REQUIRED_SET or d.get(name) is not None}

    @classmethod
    def from_dict(cls, data: Mapping, *, allow_unknown: bool = False) -> Record:
        """Validate a mapping (a parsed JSON object); ``None`` means absent.

        Unknown fields raise :class:`~qualgate.errors.DataError` unless ``allow_unknown``,
        which ignores them.
        """
        if not isinstance(data, Mapping):
            raise _FieldError(f"a record must be a JSON object, got {type(data).__name__}")
        if not data.keys() <= _FIELD_SET:
            unknown = sorted(data.keys() - _FIELD_SET, key=str)
            if not allow_unknown:
                raise _FieldError(
                    f"unknown field ({len(unknown)} unknown: {', '.join(map(str, unknown))}; "
                    "allow unknown fields explicitly to ignore them)",
                    field=str(unknown[0]),
                    value=data[unknown[0]],
                )
            data = {k: data[k] for k in data.keys() & _FIELD_SET}
        _validate(data)
        # Validated: fill the instance directly (absent optional fields fall back to the
        # class defaults); this skips the frozen __init__, which dominates reading time.
        record = object.__new__(cls)
        record.__dict__.update(data)
        return record


FIELDS = tuple(f.name for f in fields(Record))
REQUIRED = FIELDS[:10]
_REQUIRED_SET = frozenset(REQUIRED)
_FIELD_SET = frozenset(FIELDS)
_OUTCOME_SET = frozenset(OUTCOMES)
_KINDS = {
    "schema_version": _INT, "seed": _INT, "sample_index": _COUNT,
    "output_tokens": _COUNT, "spec_steps": _COUNT, "draft_tokens": _COUNT,
    "accepted_tokens": _COUNT, "deferred_tokens": _COUNT, "latency_s": _FLOAT,
}  # fmt: skip
_SCHEMA = tuple((name, _KINDS.get(name, _STR), name in _REQUIRED_SET) for name in FIELDS)
_CHECK = {
    _STR: lambda v: type(v) is str,
    _INT: lambda v: type(v) is int and -_I64 <= v < _I64,
    _COUNT: lambda v: type(v) is int and 0 <= v < _I64,
    # an int is compared, never converted (a 400-digit int overflows a float)
    _FLOAT: lambda v: (type(v) is float and 0 <= v < math.inf) or (type(v) is int and 0 <= v < _I64),
}


def _validate(d: Mapping) -> None:
    """Raise :class:`_FieldError` for the first invalid field of ``d`` (None = absent)."""
    g = d.get
    # One expression for the common valid case (reading speed); _explain finds the culprit.
    if (
        g("schema_version") == SCHEMA_VERSION and type(g("schema_version")) is int
        and type(v := g("run_id")) is str and v
        and type(v := g("config_id")) is str and v
        and type(v := g("suite")) is str and v
        and type(v := g("suite_version")) is str and v
        and type(v := g("question_id")) is str and v
        and type(v := g("seed")) is int and -_I64 <= v < _I64
        and type(v := g("sample_index")) is int and 0 <= v < _I64
        and g("outcome") in OUTCOMES
        and type(v := g("prompt_hash")) is str and v
        and (len(d) == 10 or (
            ((v := g("mode")) is None or type(v) is str)
            and ((v := g("answer_strict")) is None or type(v) is str)
            and ((v := g("answer_lenient")) is None or type(v) is str)
            and ((v := g("decided_by")) is None or type(v) is str)
            and ((v := g("gold")) is None or type(v) is str)
            and ((v := g("output")) is None or type(v) is str)
            and ((v := g("output_tokens")) is None or type(v) is int and 0 <= v < _I64)
            and ((v := g("spec_steps")) is None or type(v) is int and 0 <= v < _I64)
            and ((v := g("draft_tokens")) is None or type(v) is int and 0 <= v < _I64)
            and ((v := g("accepted_tokens")) is None or type(v) is int and 0 <= v < _I64)
            and ((v := g("deferred_tokens")) is None or type(v) is int and 0 <= v < _I64)
            and ((v := g("latency_s")) is None or _CHECK[_FLOAT](v))
            and ((v := g("error")) is None or type(v) is str)
        ))
    ):  # fmt: skip
        return
    _explain(d)


def _explain(d: Mapping) -> None:
    for name, kind, required in _SCHEMA:
        value = d.get(name)
        if value is None:
            if required:
                raise _FieldError("required field is missing", field=name)
        elif not _CHECK[kind](value):
            raise _FieldError(f"must be {kind}", field=name, value=value)
        elif kind == _STR and required and not value:
            raise _FieldError("must not be empty", field=name, value=value)
    if d["schema_version"] != SCHEMA_VERSION:
        raise _FieldError(
            f"unsupported schema version (this qualgate reads {SCHEMA_VERSION})",
            field="schema_version",
            value=d["schema_version"],
        )
    raise _FieldError(f"must be one of {', '.join(OUTCOMES)}", field="outcome", value=d["outcome"])


@dataclass(frozen=True)
class TruncatedLine:
    """An incomplete last line (no final newline, not a complete JSON object)."""

    file: str
    line: int  #: 1-based line number
    nbytes: int  #: bytes in the incomplete line
    preview: str  #: its first 60 characters

    def describe(self) -> str:
        return f"{self.file}:{self.line}: incomplete last line ({self.nbytes} bytes: {self.preview!r})"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "nbytes": self.nbytes, "preview": self.preview}


@dataclass(frozen=True, eq=False)
class RecordSet:
    """Records read from one file or directory, in file order.

    Iterable and sized like a sequence of :class:`Record`. ``dropped`` lists incomplete last
    lines that were dropped (``drop_truncated=True``); :meth:`origin` says where record ``i``
    came from.
    """

    path: str
    files: tuple[str, ...]
    records: tuple[Record, ...]
    dropped: tuple[TruncatedLine, ...] = ()
    #: per file, the line (row) number of each of its records
    line_numbers: tuple[Sequence[int], ...] = ()
    #: ``file:line`` of each ``error`` record superseded by a later record of its key
    superseded: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __getitem__(self, i):
        return self.records[i]

    def origin(self, i: int) -> str:
        """``file:line`` of record ``i``."""
        for file, lines in zip(self.files, self.line_numbers):
            if i < len(lines):
                return f"{file}:{lines[i]}"
            i -= len(lines)
        return f"{self.path}[{i}]"


def record_files(path) -> list[Path]:
    """The record files a path names: the file itself, or every record file in a directory.

    A directory is read non-recursively; its entries with a record suffix
    (:data:`RECORD_SUFFIXES`) are sorted by name (one that is not a regular file is refused
    when read, never skipped). A missing path, an unsupported suffix or an empty directory is
    a :class:`~qualgate.errors.DataError`.
    """
    p = Path(path)
    if p.is_dir():
        found = sorted(q for q in p.iterdir() if q.suffix in RECORD_SUFFIXES)
        if not found:
            raise DataError(f"no record files ({', '.join(RECORD_SUFFIXES)}) in this directory", file=str(p))
        return found
    if not p.exists():
        raise DataError("no such file or directory", file=str(p))
    if p.suffix not in RECORD_SUFFIXES:
        raise DataError(f"unsupported record file type (use {', '.join(RECORD_SUFFIXES)})", file=str(p))
    return [p]


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while building many acyclic objects (parsed rows,
    records, key tuples): its passes over the growing heap cost a fifth of the reading time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_records(path, *, allow_unknown: bool = False, drop_truncated: bool = False) -> RecordSet:
    """Read and validate the records of a ``.jsonl``, ``.parquet`` or ``.csv`` file or directory.

    Parameters
    ----------
    path : str or Path
        A record file, or a directory whose record files are all read (see :func:`record_files`).
    allow_unknown : bool
        Ignore fields the schema does not define instead of refusing them.
    drop_truncated : bool
        Drop an incomplete last line of a JSON Lines file (listed in ``RecordSet.dropped``)
        instead of refusing the file.

    Raises
    ------
    qualgate.errors.DataError
        Naming the file, line, field and value of the first invalid record.
    """
    files = record_files(path)
    records, numbers, dropped, superseded = [], [], [], []
    with _gc_paused():
        _read_files(files, records, numbers, dropped if drop_truncated else None, allow_unknown, superseded)
    return RecordSet(str(path), tuple(map(str, files)), tuple(records), tuple(dropped), tuple(numbers),
                     tuple(superseded))


def _read_files(files, records, numbers, dropped, allow_unknown, superseded):
    """Append the records of ``files`` to ``records`` and their line numbers to ``numbers``."""
    for f in files:
        reader = {".jsonl": _jsonl_rows, ".csv": _csv_rows, ".parquet": _parquet_rows}[f.suffix]
        lines, rows = reader(f, dropped)
        if _rows_valid(rows):
            got = _unchecked(rows)
        else:  # validate row by row, to name the first invalid one
            got = []
            try:
                got.extend(Record.from_dict(row, allow_unknown=allow_unknown) for row in rows)
            except DataError as exc:
                raise _located(exc, f, lines[len(got)]) from None
        got, lines = _supersede(got, lines, f, superseded)
        records.extend(got)
        numbers.append(lines)


_KEY = operator.attrgetter("suite", "question_id", "seed", "sample_index")


def _supersede(records: list, lines, file, superseded: list):
    """Drop each ``error`` record followed, in the same file, by a record of the same key.

    Records are append-only, so ``qualgate run --resume`` retries an error by appending the
    new record; the new one supersedes the error. A key repeated in any other way is kept
    (and refused by pairing as a duplicate).
    """
    keys = list(map(_KEY, records))
    if len(set(keys)) == len(keys):
        return records, lines
    last = {k: i for i, k in enumerate(keys)}
    drop = {i for i, k in enumerate(keys) if last[k] != i and records[i].outcome == "error"}
    if not drop:
        return records, lines
    superseded.extend(f"{file}:{lines[i]}" for i in sorted(drop))
    kept = [i for i in range(len(records)) if i not in drop]
    return [records[i] for i in kept], [lines[i] for i in kept]


def _unchecked(rows: list) -> list[Record]:
    """Records from rows already validated (by :func:`_rows_valid`); each row becomes the
    record's ``__dict__``, absent optional fields falling back to the class defaults."""
    records = [_new(Record) for _ in rows]
    list(map(object.__setattr__, records, repeat("__dict__"), rows))
    return records


_new = object.__new__


def _rows_valid(rows: list) -> bool:
    """Whether every row is a valid record, checked a column at a time (C-level loops).

    Never more permissive than :func:`_validate`: anything unusual returns False, and the
    rows are then validated one by one (which names the first invalid row).
    """
    if not rows:
        return True
    try:
        if set(map(type, rows)) != {dict}:
            return False
        present = set().union(*rows)
        if not _REQUIRED_SET <= present <= _FIELD_SET:
            return False
        for name, kind, required in _SCHEMA:
            if name not in present:
                continue
            # required: a row without the field raises KeyError; optional: None is absent
            column = list(map(operator.itemgetter(name), rows) if required else map(dict.get, rows, repeat(name)))
            types = set(map(type, column))
            if not required and type(None) in types:
                types.discard(type(None))
                column = [v for v in column if v is not None]
            if kind == _STR:
                ok = types <= {str} and (not required or all(column))
            elif kind == _FLOAT:
                ok = types <= {int, float} and all(map(_CHECK[_FLOAT], column))
            else:
                low = 0 if kind == _COUNT else -_I64
                ok = types <= {int} and (not column or (low <= min(column) and max(column) < _I64))
            if not ok:
                return False
        versions = set(map(operator.itemgetter("schema_version"), rows))
        return versions == {SCHEMA_VERSION} and set(map(operator.itemgetter("outcome"), rows)) <= _OUTCOME_SET
    except (KeyError, TypeError):  # a missing field, an unhashable value: checked row by row
        return False


def existing_keys(path, *, drop_truncated: bool = False, errors: bool = True) -> set[tuple[str, str, int, int]]:
    """Pairing keys already written to ``path`` (empty when it does not exist); for resuming.

    ``errors=False`` leaves out the keys whose latest record is an ``error`` (to retry them).
    """
    if not Path(path).exists():
        return set()
    return {r.key for r in read_records(path, drop_truncated=drop_truncated) if errors or r.outcome != "error"}


def repair_truncated(path) -> TruncatedLine | None:
    """Remove an incomplete last line from a JSON Lines file; return what was removed.

    Only a last line that has no final newline *and* is not a complete JSON object is removed
    (the file is truncated to just after its last newline, one atomic ``truncate``, then
    fsynced). A complete last object that only lacks its newline is kept. Returns ``None``
    when nothing was removed.
    """
    path = Path(path)
    _regular(path)
    tail, start = _last_line(path)
    cut = _incomplete(path, tail, lambda: _count_newlines(path, start) + 1)
    if cut is None:
        return None
    with open(path, "r+b") as fh:
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    return cut


class RecordWriter:
    """Append records to a JSON Lines file, one object per line; flush and fsync per batch.

    Existing lines are never rewritten. Opening a file whose last line is incomplete raises
    :class:`~qualgate.errors.DataError` (call :func:`repair_truncated` first); a complete last
    object that lacks its newline gets one before the first new line.

    Examples
    --------
    >>> with RecordWriter(path) as w:  # doctest: +SKIP
    ...     w.write_batch(records)
    """

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._prefix = b""
        if self.path.exists():
            _regular(self.path)
            tail, start = _last_line(self.path)
            cut = _incomplete(self.path, tail, lambda: _count_newlines(self.path, start) + 1)
            if cut is not None:
                raise DataError(
                    "incomplete last line: remove it with qualgate.records.repair_truncated() "
                    "before appending",
                    file=str(self.path),
                    line=cut.line,
                    value=cut.preview,
                )
            if tail:  # a complete last object without its newline
                self._prefix = b"\n"
        self._fh = open(self.path, "ab")
        self.written = 0

    def write_batch(self, records: Iterable[Record | Mapping]) -> int:
        """Validate, append, flush and fsync one batch; return how many records were written."""
        lines = [
            _dumps(r if isinstance(r, Record) else Record.from_dict(r)) for r in records
        ]
        if lines:
            self._fh.write(self._prefix + b"".join(lines))
            self._prefix = b""
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.written += len(lines)
        return len(lines)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _dumps(record: Record) -> bytes:
    text = json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode() + b"\n"


class _FieldError(DataError):
    """A record-level error that does not know its file and line yet."""

    def __init__(self, message, *, field=None, value=None):
        self.message = message
        super().__init__(message, field=field, value=value)


def _located(exc: DataError, file, line) -> DataError:
    message = getattr(exc, "message", str(exc))
    return DataError(message, file=str(file), line=line, field=exc.field, value=exc.value)


def _incomplete(path, tail: bytes, line) -> TruncatedLine | None:
    """The last line ``tail`` (bytes after the last newline) as a TruncatedLine if it is not a
    complete JSON object; ``line()`` gives its line number (computed only then)."""
    if not tail.strip():
        return None
    try:
        if isinstance(json.loads(tail), dict):
            return None
    except (ValueError, RecursionError):
        pass
    return TruncatedLine(str(path), line(), len(tail), tail[:60].decode("utf-8", "replace"))


def _regular(path: Path) -> None:
    if not is_regular_file(path):
        raise DataError("not a regular file: refused (records are appended to regular files only)",
                        file=str(path))


def _last_line(path: Path, block: int = 1 << 16) -> tuple[bytes, int]:
    """(bytes after the file's last newline, their offset), read from the end of the file."""
    with open(path, "rb") as fh:
        pos = fh.seek(0, os.SEEK_END)
        tail = b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            tail = fh.read(step) + tail
            cut = tail.rfind(b"\n")
            if cut >= 0:
                return tail[cut + 1 :], pos + cut + 1
        return tail, 0


def _count_newlines(path: Path, end: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(end).count(b"\n")


def _jsonl_rows(path: Path, dropped: list | None):
    data = sniff(read_bytes(path, kind="records"), file=str(path))
    _not_json_lines(data, path)
    start = data.rfind(b"\n") + 1
    cut = _incomplete(path, data[start:], lambda: data.count(b"\n", 0, start) + 1)
    if cut is not None:
        if dropped is None:
            raise DataError(
                "incomplete last line (was the writer interrupted?): drop it explicitly "
                "(--drop-truncated, or qualgate.records.repair_truncated)",
                file=str(path),
                line=cut.line,
                value=cut.preview,
            )
        dropped.append(cut)
        data = data[: len(data) - cut.nbytes]
    text = decode_text(data, file=str(path))
    lines = text.split("\n")
    numbers = [i for i, raw in enumerate(lines, 1) if raw.strip()]
    if len(numbers) == len(lines) - (lines[-1] == ""):
        numbers = range(1, len(numbers) + 1)
    else:
        lines = [lines[i - 1] for i in numbers]
    # One parse of the whole file is several times faster than a parse per line; a line
    # that is not exactly one JSON value makes it fail (or miscount), and the per-line
    # parse below then names it.
    try:
        rows = parse_json("[" + ",".join(lines[: len(numbers)]) + "]")
        if len(rows) == len(numbers):
            return numbers, rows
    except ValueError:
        pass
    for i, raw in zip(numbers, lines):
        try:
            parse_json(raw)
        except DuplicateKey as exc:
            raise DataError(str(exc), file=str(path), line=i, field=str(exc.key)) from None
        except NonFinite as exc:
            field, value = _non_finite_field(raw)
            raise DataError(f"must be {_KINDS.get(field, 'a JSON value')} ({exc})", file=str(path), line=i,
                            field=field, value=value) from None
        except ValueError as exc:
            raise DataError(f"not a JSON object ({exc})", file=str(path), line=i, value=raw[:60]) from None
    raise DataError("a line holds more than one JSON value", file=str(path))  # pragma: no cover


def _non_finite_field(raw: str):
    """(field, value) of the first NaN/Infinity in a line (parsed leniently), or (None, None)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if isinstance(obj, dict):
        for key, value in obj.items():
            if type(value) is float and not math.isfinite(value):
                return key, value
    return None, None


def _not_json_lines(data: bytes, path) -> None:
    """Refuse a file that is JSON but not JSON Lines: one array, or CR-only line ends."""
    first = re.match(rb"\s*", data).end()
    if data[first : first + 1] == b"[":
        raise DataError("a JSON array, not JSON Lines (one record object per line): convert it, "
                        "e.g. jq -c '.[]'", file=str(path), line=data.count(b"\n", 0, first) + 1)
    if data.count(b"\r") > data.count(b"\r\n"):  # a CR never appears raw inside JSON
        raise DataError("line ends are CR (classic Mac), not LF: records are JSON Lines ended by "
                        "LF or CRLF", file=str(path), line=data.count(b"\n", 0, data.find(b"\r")) + 1)


_INT_FIELDS = frozenset(name for name, kind, _ in _SCHEMA if kind in (_INT, _COUNT))


def _csv_rows(path: Path, dropped):
    numbers, rows = [], []
    text = decode_text(read_bytes(path, kind="records"), file=str(path), bom="strip")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        repeated = sorted({k for k in header if header.count(k) > 1})
        if repeated:
            raise DataError("a column is named twice in the header (the last one would win silently)",
                            file=str(path), line=1, field=repeated[0])
        for row in reader:
            line = reader.line_num
            if None in row:
                raise DataError(f"{len(header) + len(row[None])} values for {len(header)} header columns",
                                file=str(path), line=line)
            rows.append({k: _from_text(k, v, path, line) for k, v in row.items() if v not in ("", None)})
            numbers.append(line)
    except csv.Error as exc:
        raise DataError(f"not valid CSV: {exc}", file=str(path), line=reader.line_num) from None
    return numbers, rows


def _from_text(name, text, path, line):
    try:
        if name in _INT_FIELDS:
            return int(text)
        if name == "latency_s":
            return float(text)
    except ValueError:
        raise DataError(f"must be {_KINDS[name]}", file=str(path), line=line, field=name, value=text) from None
    return text


def _parquet_rows(path: Path, dropped):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is in the test extra
        raise DataError("reading Parquet needs pyarrow (pip install pyarrow)", file=str(path)) from exc
    import pyarrow as pa

    data = read_bytes(path, kind="records")
    try:
        table = pq.read_table(pa.BufferReader(data))
        repeated = sorted({k for k in table.column_names if table.column_names.count(k) > 1})
        if not repeated:
            rows = table.to_pylist()
    except Exception as exc:  # noqa: BLE001 - any reader failure is invalid data
        raise DataError(f"not a readable Parquet file ({exc})", file=str(path)) from None
    if repeated:
        raise DataError("a column is named twice (the last one would win silently)", file=str(path),
                        field=repeated[0])
    rows = [{k: _from_parquet(k, v) for k, v in row.items() if v is not None} for row in rows]
    return range(1, len(rows) + 1), rows


def _from_parquet(name, value):
    # pandas writes integer columns with missing values as float64 (NaN for missing).
    if type(value) is float:
        if math.isnan(value):
            return None
        if name in _INT_FIELDS and value.is_integer():
            return int(value)
    return value
