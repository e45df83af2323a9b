"""The record schema, declared once (:data:`SCHEMA`), and what is derived from it.

:data:`SCHEMA` lists every field with its kind (type and range), whether it is required, its
allowed values where they are restricted, and its meaning. From it come :data:`FIELDS` and
:data:`REQUIRED`, the table in :mod:`qualgate.records`' docstring (:func:`schema_table`), both
validators — :func:`_validate` (one row, naming the first invalid field) and
:func:`_rows_valid` (all rows at once, a column at a time: the fast path of reading) — and the
conversion of CSV and Parquet cells. The fields of :class:`Record` are written out for
readers and type checkers; a test checks them against :data:`SCHEMA`.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from qualgate.errors import DataError

SCHEMA_VERSION = 1
#: ``judge_error``: the judge's reply could not be read (or the judge failed); like ``error``,
#: a failure to grade, never a wrong answer (qualgate.judge)
OUTCOMES = ("correct", "incorrect", "no_answer", "error", "judge_error")

_I64 = 1 << 63


def _types(allowed):
    return lambda column: set(map(type, column)) <= allowed


def _ints(low):
    # ``min``/``max`` after the type check: a C-level pass each, not a call per value
    return lambda column: (
        set(map(type, column)) <= {int} and (not column or (low <= min(column) and max(column) < _I64))
    )


def _number(v) -> bool:
    # an int is compared, never converted (a 400-digit int overflows a float)
    return (type(v) is float and 0 <= v < math.inf) or (type(v) is int and 0 <= v < _I64)


class Kind(NamedTuple):
    """A field's type and range: one check per value and one per column, which must agree."""

    says: str  #: what a value must be, in errors ("must be <says>")
    label: str  #: the type in the schema tables (the README's "type" column)
    check: Callable[[object], bool]  #: one value (not None)
    column_check: Callable[[list], bool]  #: a list of values (no None), C-level where possible
    parse: Callable[[str], object]  #: a CSV cell's text to a value
    nonempty: bool = False  #: the empty string is refused ("must not be empty")


def _token_id(v) -> bool:
    return type(v) is int and 0 <= v < _I64


def _margin(v) -> bool:
    return (type(v) is float or type(v) is int) and 0 <= v <= 1


def _json_list(text: str) -> list:
    """A CSV cell's JSON array."""
    value = json.loads(text)
    if type(value) is not list:
        raise ValueError(text)
    return value


_json_list.__name__ = "list"  # the type named in Record's annotations


def _lists_of(item: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: type(v) is list and all(map(item, v))


# fmt: off
_NAME = Kind("a string", "string", lambda v: type(v) is str, _types({str}), str, nonempty=True)
_TEXT = Kind("a string", "string", lambda v: type(v) is str, _types({str}), str)
_INT = Kind("an integer (64-bit)", "int", lambda v: type(v) is int and -_I64 <= v < _I64, _ints(-_I64), int)
_COUNT = Kind("an integer >= 0 (64-bit)", "int ≥ 0", lambda v: type(v) is int and 0 <= v < _I64, _ints(0), int)
_NUMBER = Kind("a finite number >= 0", "number ≥ 0", _number,
               lambda column: _types({int, float})(column) and all(map(_number, column)), float)
_TOKEN_IDS = Kind("a list of integers >= 0 (64-bit)", "list of int ≥ 0", _lists_of(_token_id),
                  lambda column: all(map(_lists_of(_token_id), column)), _json_list)
_MARGINS = Kind("a list of numbers in [0, 1]", "list of number in [0, 1]", _lists_of(_margin),
                lambda column: all(map(_lists_of(_margin), column)), _json_list)
# fmt: on


class Field(NamedTuple):
    """One field of the record schema."""

    name: str
    kind: Kind
    required: bool
    meaning: str
    values: tuple = ()  #: the allowed values, when restricted
    refused: str = "must be one of {values}"  #: the error for a value not in ``values``


# fmt: off
#: The record schema (``schema_version`` 1), in field order.
SCHEMA = (
    Field("schema_version",  _INT,    True,  "the schema version", values=(SCHEMA_VERSION,),
          refused="unsupported schema version (this qualgate reads {values})"),
    Field("run_id",          _NAME,   True,  "the run that wrote the record"),
    Field("config_id",       _NAME,   True,  "hash of the resolved decoding configuration"),
    Field("suite",           _NAME,   True,  "suite name"),
    Field("suite_version",   _NAME,   True,  "suite version (bumped when prompting or grading changes)"),
    Field("question_id",     _NAME,   True,  "question id within the suite"),
    Field("seed",            _INT,    True,  "the request's sampling seed"),
    Field("sample_index",    _COUNT,  True,  "index of the sample for this (question, seed)"),
    Field("outcome",         _NAME,   True,  "the scored outcome", values=OUTCOMES),
    Field("prompt_hash",     _NAME,   True,  "hash of the rendered prompt"),
    Field("mode",            _TEXT,   False, "a label (``target``, ``standard``, ``fly`` ...)"),
    Field("answer_strict",   _TEXT,   False, "answer extracted by the strict extractor"),
    Field("answer_lenient",  _TEXT,   False, "answer extracted by the lenient extractor"),
    Field("decided_by",      _TEXT,   False, "the extractor whose answer decided ``outcome`` (``strict:boxed``)"),
    Field("gold",            _TEXT,   False, "the reference answer"),
    Field("output",          _TEXT,   False, "the generated text"),
    Field("output_tokens",   _COUNT,  False, "generated tokens"),
    Field("spec_steps",      _COUNT,  False, "speculative drafting steps"),
    Field("draft_tokens",    _COUNT,  False, "draft tokens proposed"),
    Field("accepted_tokens", _COUNT,  False, "draft tokens accepted, deferred ones included"),
    Field("deferred_tokens", _COUNT,  False, "draft tokens kept by a deferral (FLy)"),
    Field("latency_s",       _NUMBER, False, "request latency in seconds"),
    Field("token_ids",       _TOKEN_IDS, False, "the emitted token ids, in order"),
    Field("top2_margins",    _MARGINS, False, "per emitted token: the target's top-1 minus top-2 probability there"),
    Field("error",           _TEXT,   False, "the engine's (or the judge's) error message (with outcome ``error`` or ``judge_error``)"),
    Field("engine",          _NAME,   False, "the engine that decoded (``vllm``, ``reference``); absent in records written before it was kept"),
    Field("engine_version",  _NAME,   False, "that engine's version (``0.34.0``; vLLM's ``__version__`` or a server's ``/version``)"),
)
# fmt: on

FIELDS = tuple(f.name for f in SCHEMA)
REQUIRED = tuple(f.name for f in SCHEMA if f.required)
BY_NAME = {f.name: f for f in SCHEMA}
_REQUIRED_SET = frozenset(REQUIRED)
_FIELD_SET = frozenset(FIELDS)


def schema_table() -> str:
    """The schema as a reStructuredText table (field, required, type, meaning)."""
    rows = [("field", "required", "type", "meaning")]
    for f in SCHEMA:
        kind = f"{f.kind.label} (non-empty)" if f.kind.nonempty else f.kind.label
        meaning = f"{f.meaning}: {', '.join(f'``{v}``' for v in f.values)}" if f.values else f.meaning
        rows.append((f.name, "yes" if f.required else "no", kind, meaning))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    rule = "  ".join("=" * w for w in widths) + "  " + "=" * max(len(row[3]) for row in rows)
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3] for row in rows]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule])


@dataclass(frozen=True)
class Record:
    """One scored request. Field meanings: see :mod:`qualgate.records` (and the README).

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
    token_ids: list | None = None
    top2_margins: list | None = None
    error: str | None = None
    engine: str | None = None
    engine_version: str | None = None

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


def _value_check(f: Field) -> Callable[[object], bool]:
    """The whole check of one present (not None) value of ``f``."""
    check, values = f.kind.check, frozenset(f.values)
    if values:
        return lambda v: check(v) and v in values
    if f.kind.nonempty:
        return lambda v: check(v) and v != ""
    return check


_ROW_CHECKS = tuple((f.name, _value_check(f), f.required) for f in SCHEMA)


def _validate(d: Mapping) -> None:
    """Raise :class:`_FieldError` for the first invalid field of ``d`` (None = absent)."""
    g = d.get
    for name, check, required in _ROW_CHECKS:
        v = g(name)
        if v is None:
            if required:
                break
        elif not check(v):
            break
    else:
        return
    _explain(d)


def _explain(d: Mapping) -> None:
    """Raise the error of the first invalid field: types and ranges first, then values."""
    for f in SCHEMA:
        value = d.get(f.name)
        if value is None:
            if f.required:
                raise _FieldError("required field is missing", field=f.name)
        elif not f.kind.check(value):
            raise _FieldError(f"must be {f.kind.says}", field=f.name, value=value)
        elif f.kind.nonempty and not value:
            raise _FieldError("must not be empty", field=f.name, value=value)
    for f in SCHEMA:
        if f.values and (value := d.get(f.name)) is not None and value not in f.values:
            values = ", ".join(map(str, f.values))
            raise _FieldError(f.refused.format(values=values), field=f.name, value=value)
    raise AssertionError(f"_explain found nothing invalid in {d!r}")  # pragma: no cover


def _rows_valid(rows: list) -> bool:
    """Whether every row is a valid record, checked a column at a time (C-level loops).

    Accepts exactly the rows :func:`_validate` accepts, without unknown fields (a property
    test checks this); when it returns False the rows are validated one by one, which names
    the first invalid row.
    """
    if not rows:
        return True
    try:
        if set(map(type, rows)) != {dict}:
            return False
        present = set().union(*rows)
        if not _REQUIRED_SET <= present <= _FIELD_SET:
            return False
        for f in SCHEMA:
            if f.name not in present:
                continue
            if f.required:  # a row without the field raises KeyError
                column = list(map(operator.itemgetter(f.name), rows))
            else:  # None is absent
                column = list(map(dict.get, rows, repeat(f.name)))
                if None in column:
                    column = [v for v in column if v is not None]
            if not (
                f.kind.column_check(column)
                and (not f.kind.nonempty or all(column))
                and (not f.values or set(column) <= set(f.values))
            ):
                return False
        return True
    except (KeyError, TypeError):  # a missing field, an unhashable value: checked row by row
        return False


class _FieldError(DataError):
    """A record-level error that does not know its file and line yet."""
