"""Declarative validation of the YAML inputs: one spec per field instead of hand-written guards.

A spec says what a value must be; :meth:`Spec.check` returns the value (a mapping with its
defaults filled in) or raises a :class:`~qualgate.errors.DataError` naming the file, the line
(when the reader gives a ``locate`` function), the field as a dotted path (``a.b[2].c``) and
the value. The rules are the ones the readers need and no more:

- :class:`Int` (a bool is not an integer), with optional bounds;
- :class:`Number`: an int or a float, never a bool, NaN or infinite, within an optional range
  (each end open or closed);
- :class:`Bool`, :class:`Str` (non-empty unless ``empty=True``; optionally a pattern),
  :class:`Choice` (one of given values);
- :class:`ListOf` (every item checked at its index; optionally non-empty, bounded, without
  repeats), :class:`AnyOf` (the first spec that takes the value);
- :class:`Mapping` with known :class:`Field`\\ s (required or optional, a default, ``None``
  let through when ``null=True``) or free-form keys and values; an unknown key is refused
  naming the key.

Each spec takes ``message=`` so that a reader keeps its own wording.

>>> spec = Mapping({"n": Field(Int(min=1), default=1), "tag": Field(Str(), required=True)})
>>> spec.check({"tag": "a"}, Where("plan.yaml"))
{'tag': 'a', 'n': 1}
>>> spec.check({"tag": "a", "n": True}, Where("plan.yaml"))
Traceback (most recent call last):
...
qualgate.errors.DataError: plan.yaml: field 'n' = True: must be an integer >= 1
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable
from collections.abc import Mapping as _AnyMapping
from dataclasses import dataclass, field
from typing import Any

from qualgate.errors import DataError

__all__ = ["AnyOf", "Bool", "Choice", "Field", "Int", "ListOf", "Mapping", "Number", "Spec", "Str", "Where"]

_MISSING: Any = object()
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 60, 60


@dataclass(frozen=True)
class Where:
    """Where a value is: the file, the dotted path to it and how to find a path's line."""

    file: Any = None
    path: str = ""
    locate: Callable[[str], int | None] | None = None

    def at(self, key) -> Where:
        """The place of ``key`` (a mapping key, or an ``int``: a list index) under this one."""
        if isinstance(key, int):
            path = f"{self.path}[{key}]"
        else:
            path = f"{self.path}.{key}" if self.path else str(key)
        return Where(self.file, path, self.locate)

    def fail(self, message: str, value: Any = _MISSING):
        """Raise the :class:`DataError` of ``message`` here (``value``: the offending value; at the
        document's root, which has no field name, the message shows it)."""
        if not self.path and value is not _MISSING:
            message = f"{message}, not {_SHORT.repr(value)}"
        line = self.locate(self.path) if self.locate and self.path else None
        raise DataError(
            message,
            file=self.file,
            line=line,
            field=self.path or None,
            value=None if value is _MISSING else value,
        )


class Spec:
    """What a value must be; subclasses define :meth:`accepts` and a default ``message``."""

    message: str | None = None

    def check(self, value, where: Where):
        if not self.accepts(value):
            where.fail(self.message or self.describe(), value)
        return value

    def accepts(self, value) -> bool:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every subclass defines it
        raise NotImplementedError


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class Int(Spec):
    """An integer (not a bool) in ``[min, max]`` (either bound optional)."""

    min: int | None = None
    max: int | None = None
    message: str | None = None

    def accepts(self, v) -> bool:
        return _is_int(v) and (self.min is None or v >= self.min) and (self.max is None or v <= self.max)

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            return f"must be an integer from {self.min} to {self.max}"
        if self.min is not None:
            return f"must be an integer >= {self.min}"
        if self.max is not None:
            return f"must be an integer <= {self.max}"
        return "must be an integer"


@dataclass(frozen=True)
class Number(Spec):
    """A finite int or float (not a bool), optionally in a range; ``*_open`` excludes the end."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    message: str | None = None

    def accepts(self, v) -> bool:
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
            return False
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return self.high is None or (v < self.high if self.high_open else v <= self.high)

    def describe(self) -> str:
        if self.low is None and self.high is None:
            return "must be a finite number"
        if self.high is None:
            return f"must be a finite number {'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"must be a finite number {'<' if self.high_open else '<='} {self.high:g}"
        span = f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        return f"must be a finite number in {span}"


@dataclass(frozen=True)
class Bool(Spec):
    """``true`` or ``false``."""

    message: str | None = None

    def accepts(self, v) -> bool:
        return isinstance(v, bool)

    def describe(self) -> str:
        return "must be true or false"


@dataclass(frozen=True)
class Str(Spec):
    """A string, non-blank unless ``empty``; matching ``pattern`` (whole string) when given."""

    empty: bool = False
    pattern: str | None = None
    message: str | None = None

    def check(self, value, where: Where):
        if not isinstance(value, str) or (not self.empty and not value.strip()):
            where.fail(self.message or self.describe(), value)
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            where.fail(self.message or f"must match {self.pattern}", value)
        return value

    def describe(self) -> str:
        return "must be a string" if self.empty else "must be a non-empty string"


@dataclass(frozen=True)
class Choice(Spec):
    """One of ``values`` (compared with ``==``; ``True`` is not taken for ``1``)."""

    values: tuple
    message: str | None = None

    def accepts(self, v) -> bool:
        return any(v == c and isinstance(v, bool) == isinstance(c, bool) for c in self.values)

    def describe(self) -> str:
        return f"must be one of {list(self.values)}"


@dataclass(frozen=True)
class ListOf(Spec):
    """A list whose items each pass ``item`` (``None``: any item); non-empty unless ``empty``;
    at most ``max_items``; ``unique``: no item twice."""

    item: Spec | None = None
    empty: bool = True
    unique: bool = False
    max_items: int | None = None
    message: str | None = None

    def check(self, value, where: Where):
        too_long = self.max_items is not None and isinstance(value, list) and len(value) > self.max_items
        if not isinstance(value, list) or (not self.empty and not value) or too_long:
            where.fail(self.message or self.describe(), value)
        out = value if self.item is None else [self.item.check(v, where.at(i)) for i, v in enumerate(value)]
        if self.unique and len({repr(v) for v in out}) != len(out):
            where.fail("a value is listed twice", value)
        return out

    def describe(self) -> str:
        return "must be a list" if self.empty else "must be a non-empty list"


@dataclass(frozen=True)
class AnyOf(Spec):
    """A value that one of ``specs`` takes (the first that does, checked as it checks)."""

    specs: tuple
    message: str | None = None

    def check(self, value, where: Where):
        for spec in self.specs:
            try:
                return spec.check(value, where)
            except DataError:
                continue
        where.fail(self.message or " or ".join(s.message or s.describe() for s in self.specs), value)

    def describe(self) -> str:
        return " or ".join(s.describe() for s in self.specs)


@dataclass(frozen=True)
class Field:
    """A key of a :class:`Mapping`: its spec, whether it is required, its default.

    ``null=True`` lets an explicit ``None`` through unchecked (a required key refuses it).
    """

    spec: Spec | None = None  #: ``None``: any value (checked elsewhere)
    required: bool = False
    default: Any = _MISSING
    null: bool = False
    missing: str = "required key is missing"

    def take(self, mapping, key, where: Where) -> dict:
        """``{key: value}`` of ``mapping`` checked (or the default; ``{}`` when absent)."""
        value = mapping.get(key, _MISSING)
        if value is _MISSING or (value is None and self.null):
            if self.required:
                where.fail(self.missing)
            if value is None:
                return {key: None}
            return {} if self.default is _MISSING else {key: self.default}
        return {key: self.spec.check(value, where) if self.spec is not None else value}

    def get(self, mapping, key, where: Where):
        """The value of ``key`` in ``mapping``, checked (the default, or ``None``, when absent)."""
        return self.take(mapping, key, where).get(key)


@dataclass(frozen=True)
class Mapping(Spec):
    """A mapping with known keys (``fields``) or, with ``keys``/``values``, free-form keys.

    Checked in this order: that it is a mapping, unknown keys (in the document's order), each
    field in ``fields``' order (missing, then its value), then any free-form keys. ``unknown``
    is the message of an unknown key (``{keys}``: the valid keys); ``unknown_value=False``
    leaves the value out.
    Returns a new dict: the keys given, in the document's order, then the defaults of the others.
    """

    fields: dict = field(default_factory=dict)
    keys: Spec | None = None
    values: Spec | None = None
    other: bool = False  #: keys beyond ``fields`` are taken (implied by ``keys`` or ``values``)
    empty: bool = True
    message: str | None = None
    unknown: str = "unknown key; valid keys: {keys}"
    unknown_value: bool = True

    def check(self, value, where: Where):
        if not isinstance(value, _AnyMapping) or (not self.empty and not value):
            where.fail(self.message or self.describe(), value)
        if not self.other and self.keys is None and self.values is None:
            for k in value:
                if k not in self.fields:
                    message = self.unknown.format(keys=list(self.fields))
                    where.at(str(k)).fail(message, value[k] if self.unknown_value else _MISSING)
        taken = {}
        for k, f in self.fields.items():
            taken.update(f.take(value, k, where.at(k)))
        out = {}
        for k, v in value.items():
            if k in self.fields:
                if k in taken:
                    out[k] = taken.pop(k)
                continue
            if self.keys is not None:
                self.keys.check(k, where)
            out[k] = self.values.check(v, where.at(str(k))) if self.values is not None else v
        return {**out, **taken}  # the defaults last

    def describe(self) -> str:
        return "must be a mapping" if self.empty else "must be a non-empty mapping"
