"""Records as columns: the columnar path from reading to pairing, without a Python object per record.

:func:`read_columns` reads a JSON Lines or Parquet record file into an Arrow table of the
fields pairing, flips and the divergence audit read (:data:`KEPT`), validated a column at a
time against :data:`~qualgate.records.schema.SCHEMA`. It is a fast path, never a second set of
rules: it accepts a file only when every check below holds, and otherwise returns ``None``, so
that the strict reader (:func:`qualgate.records.read_records`) reads the file and accepts it or
names its first invalid line, field and value. What it accepts is what the strict reader
accepts (``tests/records/test_columns.py`` checks this on random and hostile files):

- JSON Lines is parsed by Arrow's JSON reader with the schema as an explicit schema: unknown
  fields, duplicate keys, a wrong JSON type, an integer outside 64 bits, lone surrogate escapes
  and control characters in strings are parse errors there. The rest is checked here: the file
  is UTF-8 without NUL bytes, has no CR, no blank line, a final newline, every line starts with
  ``{`` and ends with ``}``, and there are as many records as lines. As no field holds an
  object and no string holds a raw newline, a ``}`` at a line's end closes a record and a
  ``{`` at its start opens one: each line holds exactly one record (two records on a line or
  one record over two lines are left to the strict reader, which refuses them);
- numbers: ``NaN`` (which Arrow reads) and values at or over 2^63 in a float field (an integer
  literal that big is refused by the schema, a float that big is left to the strict reader)
  make the file fall back; list items are never null;
- Parquet columns of a type the strict reader would convert differently (bool, decimal,
  timestamps ...) fall back; float columns of integer fields (pandas' integers with missing
  values) are converted as the strict reader converts them;
- then every field's schema rule (required, non-empty, allowed values, ranges) per column.

The file's SHA-256 is of the bytes parsed; a file that changes while it is read is refused.
Records that supersede an ``error`` record of their key (``qualgate run --resume``) fall back
to the strict reader too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import numpy as np

from qualgate.errors import DataError
from qualgate.records.schema import SCHEMA, Record
from qualgate.records.strict import LIMITS, open_regular

__all__ = ["KEPT", "columns_of", "read_columns", "write_parquet"]

#: The fields kept as columns: what pairing, flips and the divergence audit read.
KEPT = (
    "suite",
    "question_id",
    "seed",
    "sample_index",
    "suite_version",
    "prompt_hash",
    "outcome",
    "config_id",
    "mode",
    "run_id",
    "decided_by",
    "error",
    "gold",
    "answer_strict",
    "answer_lenient",
    "output",
    "token_ids",
    "top2_margins",
    "engine",
    "engine_version",
)
#: JSON Lines is read this many bytes at a time (each block cut at its last newline).
BLOCK = 16 << 20
_I63 = float(1 << 63)


def _arrow():
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    return pa, pc


def _types(pa) -> dict:
    """The Arrow type of each schema field, from its kind's label (schema.py's Kind.label)."""
    by_label = {
        "string": pa.string(),
        "int": pa.int64(),
        "int ≥ 0": pa.int64(),
        "number ≥ 0": pa.float64(),
        "list of int ≥ 0": pa.list_(pa.int64()),
        "list of number in [0, 1]": pa.list_(pa.float64()),
    }
    return {f.name: by_label[f.kind.label] for f in SCHEMA}


def columns_of(records: Sequence[Record]):
    """The :data:`KEPT` columns of a side (an Arrow table): those read on the columnar path
    (a record set's ``columns``), or taken from records already read."""
    table = getattr(records, "columns", None)
    if table is not None:
        return table
    pa, _ = _arrow()
    types = _types(pa)
    records = getattr(records, "records", records)
    return pa.table(
        {name: pa.array([getattr(r, name) for r in records], type=types[name]) for name in KEPT},
    )


def read_columns(path, *, kind: str = "records"):
    """``(table, sha256)`` of one record file read on the columnar path, or ``None`` when the
    strict reader must read it (see the module docstring). ``table`` holds :data:`KEPT`."""
    arrow = _arrow()
    suffix = os.path.splitext(os.fspath(path))[1]
    if arrow is None or suffix not in (".jsonl", ".parquet"):
        return None
    got = _jsonl(path, *arrow) if suffix == ".jsonl" else _parquet(path, *arrow)
    if got is None:
        return None
    table, digest = got
    if _supersedes(table, *arrow):
        return None
    pa, _ = arrow
    pa.default_memory_pool().release_unused()  # the reader's buffers (a third of the memory held)
    return table, digest


def _jsonl(path, pa, pc):
    import pyarrow.json as pj

    types = _types(pa)
    options = pj.ParseOptions(
        explicit_schema=pa.schema([(f.name, types[f.name]) for f in SCHEMA]),
        unexpected_field_behavior="error",
        newlines_in_values=False,
    )
    fd, st = open_regular(path, kind="records")
    digest, tables, carry, size = hashlib.sha256(), [], b"", 0
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while chunk := fh.read(BLOCK):
            size += len(chunk)
            if size > LIMITS["records"]:
                return None
            digest.update(chunk)
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            block, carry = data[:cut], data[cut:]
            if not block:
                continue
            table = _jsonl_block(block, pa, pj, options)
            if table is None or not _valid(table, pa, pc):
                return None
            tables.append(_compact(table.select(list(KEPT)), pa))
        after = os.fstat(fh.fileno())
    if carry or not tables:  # no final newline (perhaps a torn line), or empty
        return None
    if size != st.st_size or (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise DataError("the record file changed while it was read; gate it again", file=os.fspath(path))
    return pa.concat_tables(tables, promote_options="default"), digest.hexdigest()


def _jsonl_block(block: bytes, pa, pj, options):
    """One block of whole lines as a table, or None where the strict reader must decide."""
    # (no blank line: after every newline but the last comes a "{", checked below)
    if b"\r" in block or b"\x00" in block or block[0] != 0x7B:
        return None
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    a = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(a == 10)
    if (a[ends - 1] != 0x7D).any() or (a[ends[:-1] + 1] != 0x7B).any():
        return None
    longest = int(max(ends[0], np.diff(ends).max(initial=0)))  # an Arrow block holds whole lines
    try:
        table = pj.read_json(
            pa.BufferReader(block),
            # Arrow's own blocks of 1 MiB (cut at newlines): a fifth less CPU than one block
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, longest + 2)),
            parse_options=options,
        )
    except pa.ArrowInvalid:
        return None
    return table if table.num_rows == len(ends) else None


def _parquet(path, pa, pc):
    import pyarrow.parquet as pq

    from qualgate.records.files import _parquet_bounded
    from qualgate.records.strict import read_bytes

    data = read_bytes(path, kind="records")
    _parquet_bounded(pq, pa, data, path)  # refuses too many rows, as the strict reader does
    try:  # in batches: reading the whole table at once took three times the CPU and memory
        batches = pq.ParquetFile(pa.BufferReader(data)).iter_batches(batch_size=1 << 16, use_threads=False)
        table = pa.Table.from_batches(list(batches))
    except Exception:  # noqa: BLE001 - the strict reader names the problem
        return None
    names = table.column_names
    types = _types(pa)
    if len(set(names)) != len(names) or not set(names) <= set(types):
        return None
    columns = {}
    for f in SCHEMA:
        if f.name in names:
            column = _parquet_column(table[f.name], types[f.name], f, pa, pc)
            if column is None:
                return None
        else:
            column = pa.nulls(table.num_rows, types[f.name])
        columns[f.name] = column
    table = pa.table(columns)
    if not _valid(table, pa, pc):
        return None
    return _compact(table.select(list(KEPT)), pa), hashlib.sha256(data).hexdigest()


_INT_LABELS = ("int", "int ≥ 0")


def _parquet_column(column, target, field, pa, pc):
    """``column`` (a chunked array) as ``target``, converted as the strict reader converts its
    cells, or None where it would convert them otherwise."""
    t = column.type
    if pa.types.is_dictionary(t):
        t = t.value_type
        column = column.cast(t)
    if t == target:
        return column
    if pa.types.is_null(t):
        return pa.nulls(len(column), target)
    label = field.kind.label
    try:
        if label == "string":
            return column.cast(target) if pa.types.is_large_string(t) else None
        if label in _INT_LABELS:
            if pa.types.is_integer(t):
                return column.cast(target)  # a uint64 over 2^63 fails the cast: fall back
            if pa.types.is_floating(t):  # pandas' integers with missing values: NaN is missing
                values = pc.if_else(pc.is_nan(column), None, column)
                valid = pc.drop_null(values)
                if len(valid) and not pc.all(pc.equal(pc.floor(valid), valid)).as_py():
                    return None
                if len(valid) and pc.max(pc.abs(valid)).as_py() >= _I63:
                    return None
                return values.cast(target)
            return None
        if label == "number ≥ 0":
            if pa.types.is_integer(t):
                return column.cast(target)
            if pa.types.is_floating(t):  # NaN is missing (pandas)
                column = column.cast(target)
                return pc.if_else(pc.is_nan(column), None, column) if pc.any(pc.is_nan(column)).as_py() else column
            return None
        if pa.types.is_list(t) or pa.types.is_large_list(t):  # the items as they are: NaN is refused
            item = t.value_type
            wanted = target.value_type
            if pa.types.is_integer(item) or (pa.types.is_floating(item) and pa.types.is_floating(wanted)):
                return column.cast(target)
        return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


#: Columns with a value or two per side (one configuration): kept dictionary-encoded.
_LABELS = ("config_id", "run_id", "mode", "engine", "engine_version")


def _compact(table, pa):
    """The table in less memory, same values: a column without a value as a null column, the
    label columns dictionary-encoded (a tenth of the memory of a million short strings)."""
    n = table.num_rows
    columns = {}
    for name in table.column_names:
        column = table[name]
        if n and column.null_count == n:
            column = pa.nulls(n)
        elif name in _LABELS:
            column = column.dictionary_encode()
        columns[name] = column
    return pa.table(columns)


def _valid(table, pa, pc) -> bool:
    """Every field's schema rule, a column at a time."""
    for f in SCHEMA:
        column = table[f.name]
        present = len(column) - column.null_count
        if f.required and column.null_count:
            return False
        if not present:
            continue
        label = f.kind.label
        if label == "string":
            try:
                column.validate(full=True)  # UTF-8 (Parquet's strings are not checked on reading)
            except pa.ArrowInvalid:
                return False
            if f.kind.nonempty and pc.min(pc.binary_length(column)).as_py() < 1:
                return False
        elif label in _INT_LABELS:
            if label == "int ≥ 0" and pc.min(column).as_py() < 0:
                return False
        elif label == "number ≥ 0":
            if pc.any(pc.is_nan(column)).as_py() or pc.min(column).as_py() < 0 or pc.max(column).as_py() >= _I63:
                return False
        else:
            items = pc.list_flatten(column)
            if items.null_count:
                return False
            if len(items):
                if pa.types.is_floating(items.type) and pc.any(pc.is_nan(items)).as_py():
                    return False
                low, high = pc.min(items).as_py(), pc.max(items).as_py()
                if low < 0 or (label == "list of number in [0, 1]" and high > 1):
                    return False
        if f.values and not set(pc.unique(pc.drop_null(column)).to_pylist()) <= set(f.values):
            return False
    return True


def _supersedes(table, pa, pc) -> bool:
    """Whether a record follows an ``error``/``judge_error`` record of its key (the strict
    reader drops the superseded one, see files._supersede)."""
    if not {"error", "judge_error"} & set(pc.unique(table["outcome"]).to_pylist()):
        return False
    keys = key_codes([table])[0][0]
    return len(np.unique(keys)) != len(keys)


def factorize(*arrays):
    """Joint codes of several Arrow (or NumPy) arrays of one type: equal values get equal codes,
    across the arrays. ``(codes, n, values)``: an int64 array per array, the number of distinct
    values, and the values (an Arrow array; ``values[code]``)."""
    pa, pc = _arrow()
    chunks = []
    for a in arrays:
        a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
        chunks.append(a if isinstance(a, pa.Array) else pa.array(a))
    joint = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
    encoded = pc.dictionary_encode(joint)
    codes = _integers(encoded.indices).astype(np.int64, copy=False)
    ends = np.cumsum([len(c) for c in chunks])[:-1]
    return np.split(codes, ends), len(encoded.dictionary), encoded.dictionary


def _integers(array):
    """An Arrow integer array without nulls as NumPy, read from its buffer: ``to_numpy``
    converts through pyarrow's pandas path, which imports pandas (0.3 CPU-s; issue 47:
    ``qualgate power --discordance-from``)."""
    pa, _ = _arrow()
    if array.null_count or not pa.types.is_integer(array.type):
        return array.to_numpy(zero_copy_only=False)
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(array.type) else 'u'}{array.type.bit_width // 8}")
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _combine(a: list, na: int, b: list, nb: int):
    """Joint codes of the pairs (a[i], b[i]) (per array), and their count: through a table of
    all na * nb combinations when that is small, else by hashing."""
    combined = [x * nb + y for x, y in zip(a, b)]
    if na * nb <= max(1 << 20, 4 * sum(map(len, a))):
        used = np.zeros(na * nb, dtype=bool)
        for c in combined:
            used[c] = True
        dense = np.cumsum(used) - 1
        return [dense[c] for c in combined], int(dense[-1]) + 1 if len(dense) else 0
    codes, n, _ = factorize(*combined)
    return codes, n


def key_codes(tables: list):
    """Joint codes of the pairing key ``(suite, question_id, seed, sample_index)`` of each
    table, and of its question ``(suite, question_id)``: ``(keys, questions)``, each a list of
    int64 arrays (one per table); equal keys get equal codes across the tables.

    The last few results are kept (pairing, flips and the divergence audit of one gate ask for
    the same tables); the cache holds the tables, so their ids stay theirs."""
    for held, result in _KEY_CACHE:
        if len(held) == len(tables) and all(a is b for a, b in zip(held, tables)):
            return result
    result = _key_codes(tables)
    _KEY_CACHE.insert(0, (tuple(tables), result))
    del _KEY_CACHE[4:]
    return result


_KEY_CACHE: list = []


def _key_codes(tables: list):
    if len(tables) == 2 and all(
        tables[0][n].equals(tables[1][n]) for n in ("suite", "question_id", "seed", "sample_index")
    ):
        (keys,), (questions,) = _key_codes(tables[:1])  # the same keys in the same order: one side's codes
        return [keys, keys], [questions, questions]
    suites, ns, _ = factorize(*(t["suite"] for t in tables))
    qids, nq, _ = factorize(*(t["question_id"] for t in tables))
    questions, nquestions = _combine(suites, ns, qids, nq)
    seeds, nseed, _ = factorize(*(t["seed"] for t in tables))
    samples, nsample, _ = factorize(*(t["sample_index"] for t in tables))
    draws, ndraws = _combine(seeds, nseed, samples, nsample)
    keys, _ = _combine(questions, nquestions, draws, ndraws)
    return keys, questions


def last_row_of_key(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key code, the last row holding it (-1: none), as a dict of records by key keeps the last."""
    where = np.full(n_keys, -1, dtype=np.int64)
    unique, first_reversed = np.unique(keys[::-1], return_index=True)
    where[unique] = len(keys) - 1 - first_reversed
    return where


def write_parquet(records: Sequence[Record], path) -> None:
    """Write records (validated: :class:`Record` objects) as a Parquet file of the schema's
    columns, atomically (a temporary file beside it, then a rename); an existing file is
    never overwritten. The gate reads it on the columnar path."""
    import pyarrow.parquet as pq

    pa, _ = _arrow()
    types = _types(pa)
    path = os.fspath(path)
    if os.path.lexists(path):
        raise DataError("exists: records are never overwritten (give a new file)", file=path)
    table = pa.table({f.name: pa.array([getattr(r, f.name) for r in records], type=types[f.name]) for f in SCHEMA})
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
