"""Reading and writing record files (JSON Lines, Parquet, CSV); public through :mod:`qualgate.records`.

(About 470 lines, a little over the usual 450: it is all file input and output, and the three
formats share the one error path that names file, line, field and value, and the append-only,
crash-safe writer.)
"""

from __future__ import annotations

import contextlib
import csv
import errno
import gc
import io
import json
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

from qualgate.errors import DataError
from qualgate.records.schema import BY_NAME, SCHEMA, Record, _rows_valid
from qualgate.records.strict import (
    LIMITS,
    DuplicateKey,
    NonFinite,
    decode_text,
    is_regular_file,
    parse_json,
    read_bytes,
    sniff,
)

#: File suffixes read as records (a directory argument means every such file in it).
RECORD_SUFFIXES = (".jsonl", ".parquet", ".csv")


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
def gc_paused():
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
    with gc_paused():
        _read_files(files, records, numbers, dropped if drop_truncated else None, allow_unknown, superseded)
    return RecordSet(
        str(path), tuple(map(str, files)), tuple(records), tuple(dropped), tuple(numbers), tuple(superseded)
    )


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
_OUTCOME = operator.attrgetter("outcome")


def _supersede(records: list, lines, file, superseded: list):
    """Drop each ``error`` (or ``judge_error``) record followed, in the same file, by a record of the same key.

    Records are append-only, so ``qualgate run --resume`` retries an error by appending the
    new record; the new one supersedes the error. A key repeated in any other way is kept
    (and refused by pairing as a duplicate).
    """
    outcomes = set(map(_OUTCOME, records))
    if "error" not in outcomes and "judge_error" not in outcomes:  # nothing to supersede
        return records, lines
    keys = list(map(_KEY, records))
    if len(set(keys)) == len(keys):
        return records, lines
    last = {k: i for i, k in enumerate(keys)}
    drop = {i for i, k in enumerate(keys) if last[k] != i and records[i].outcome in ("error", "judge_error")}
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
    with _open_no_follow(path, os.O_RDWR, "r+b") as fh:
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
        if os.path.lexists(self.path):
            _regular(self.path)
            tail, start = _last_line(self.path)
            cut = _incomplete(self.path, tail, lambda: _count_newlines(self.path, start) + 1)
            if cut is not None:
                raise DataError(
                    "incomplete last line: remove it with qualgate.records.repair_truncated() before appending",
                    file=str(self.path),
                    line=cut.line,
                    value=cut.preview,
                )
            if tail:  # a complete last object without its newline
                self._prefix = b"\n"
        self._fh = _open_no_follow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "ab")
        self.written = 0

    def write_batch(self, records: Iterable[Record | Mapping]) -> int:
        """Validate, append, flush and fsync one batch; return how many records were written."""
        lines = [_dumps(r if isinstance(r, Record) else Record.from_dict(r)) for r in records]
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
    if os.path.islink(path):
        raise DataError(_LINK_REFUSED, file=str(path))
    if not is_regular_file(path):
        raise DataError("not a regular file: refused (records are appended to regular files only)", file=str(path))


_LINK_REFUSED = "a symbolic link: refused (records are written to regular files only, never through a link)"


def _open_no_follow(path: Path, flags: int, mode: str):
    """``open(path, mode)`` that refuses a symbolic link as the last component (``O_NOFOLLOW``):
    a link planted in a run directory never redirects a write outside it."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise DataError(_LINK_REFUSED, file=str(path)) from None
        raise
    return os.fdopen(fd, mode)


def _last_line(path: Path, block: int = 1 << 16) -> tuple[bytes, int]:
    """(bytes after the file's last newline, their offset), read from the end of the file."""
    with _open_no_follow(path, os.O_RDONLY, "rb") as fh:
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
    with _open_no_follow(path, os.O_RDONLY, "rb") as fh:
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
            says = BY_NAME[field].kind.says if field in BY_NAME else "a JSON value"
            raise DataError(f"must be {says} ({exc})", file=str(path), line=i, field=field, value=value) from None
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
        raise DataError(
            "a JSON array, not JSON Lines (one record object per line): convert it, e.g. jq -c '.[]'",
            file=str(path),
            line=data.count(b"\n", 0, first) + 1,
        )
    if data.count(b"\r") > data.count(b"\r\n"):  # a CR never appears raw inside JSON
        raise DataError(
            "line ends are CR (classic Mac), not LF: records are JSON Lines ended by LF or CRLF",
            file=str(path),
            line=data.count(b"\n", 0, data.find(b"\r")) + 1,
        )


_INT_FIELDS = frozenset(f.name for f in SCHEMA if f.kind.parse is int)


def _csv_rows(path: Path, dropped):
    numbers, rows = [], []
    text = decode_text(read_bytes(path, kind="records"), file=str(path), bom="strip")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        repeated = sorted({k for k in header if header.count(k) > 1})
        if repeated:
            raise DataError(
                "a column is named twice in the header (the last one would win silently)",
                file=str(path),
                line=1,
                field=repeated[0],
            )
        for row in reader:
            line = reader.line_num
            if None in row:
                raise DataError(
                    f"{len(header) + len(row[None])} values for {len(header)} header columns", file=str(path), line=line
                )
            rows.append({k: _from_text(k, v, path, line) for k, v in row.items() if v not in ("", None)})
            numbers.append(line)
    except csv.Error as exc:
        raise DataError(f"not valid CSV: {exc}", file=str(path), line=reader.line_num) from None
    return numbers, rows


def _from_text(name, text, path, line):
    f = BY_NAME.get(name)
    if f is None:
        return text
    try:
        return f.kind.parse(text)
    except ValueError:
        raise DataError(f"must be {f.kind.says}", file=str(path), line=line, field=name, value=text) from None


def _parquet_rows(path: Path, dropped):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is in the test extra
        raise DataError("reading Parquet needs pyarrow (pip install pyarrow)", file=str(path)) from exc
    import pyarrow as pa

    data = read_bytes(path, kind="records")
    _parquet_bounded(pq, pa, data, path)
    try:
        table = pq.read_table(pa.BufferReader(data))
        repeated = sorted({k for k in table.column_names if table.column_names.count(k) > 1})
        if not repeated:
            rows = table.to_pylist()
    except Exception as exc:  # noqa: BLE001 - any reader failure is invalid data
        raise DataError(f"not a readable Parquet file ({exc})", file=str(path)) from None
    if repeated:
        raise DataError("a column is named twice (the last one would win silently)", file=str(path), field=repeated[0])
    rows = [{k: _from_parquet(k, v) for k, v in row.items() if v is not None} for row in rows]
    return range(1, len(rows) + 1), rows


#: Most rows read from one Parquet file: its metadata is checked before any row is decoded
#: (compression made a 317 KB file of 3 million rows run past 300 s at 3.1 GB).
MAX_PARQUET_ROWS = 2_000_000


def _parquet_bounded(pq, pa, data: bytes, path) -> None:
    """Refuse, from the footer alone, a Parquet file whose rows or decoded size are over the bounds."""
    try:
        meta = pq.ParquetFile(pa.BufferReader(data)).metadata
        rows = meta.num_rows
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    except Exception as exc:  # noqa: BLE001 - any reader failure is invalid data
        raise DataError(f"not a readable Parquet file ({exc})", file=str(path)) from None
    if rows > MAX_PARQUET_ROWS:
        raise DataError(
            f"{rows:,} rows, over the bound of {MAX_PARQUET_ROWS:,} rows a Parquet file (split it, "
            "or write JSON Lines)",
            file=str(path),
        )
    if decoded > LIMITS["records"]:
        raise DataError(
            f"{decoded:,} bytes decoded, over the {LIMITS['records']:,} byte limit for a records file", file=str(path)
        )


def _from_parquet(name, value):
    # pandas writes integer columns with missing values as float64 (NaN for missing).
    if type(value) is float:
        if math.isnan(value):
            return None
        if name in _INT_FIELDS and value.is_integer():
            return int(value)
    return value
