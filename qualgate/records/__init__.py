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

The schema (``schema_version`` 1) is a public contract, documented in the README. It is
declared once, in :data:`qualgate.records.schema.SCHEMA`, which this table is generated from:

{schema}

``no_answer`` (nothing could be extracted) is distinct from ``incorrect``; ``error`` (the engine
failed) is neither: the gate never counts it as a wrong answer.
"""

from qualgate.records.files import (
    RECORD_SUFFIXES,
    RecordSet,
    RecordWriter,
    TruncatedLine,
    existing_keys,
    read_records,
    record_files,
    repair_truncated,
)
from qualgate.records.schema import (
    FIELDS,
    OUTCOMES,
    REQUIRED,
    SCHEMA,
    SCHEMA_VERSION,
    Record,
    schema_table,
)

if __doc__:  # None under python -OO
    __doc__ = __doc__.replace("{schema}", schema_table())

__all__ = [
    "FIELDS",
    "OUTCOMES",
    "RECORD_SUFFIXES",
    "REQUIRED",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Record",
    "RecordSet",
    "RecordWriter",
    "TruncatedLine",
    "existing_keys",
    "read_records",
    "record_files",
    "repair_truncated",
    "schema_table",
]
