"""Argument validation shared by the statistics modules.

Every check raises :class:`ValueError` naming the argument, echoing the value and saying what
is allowed, so that the CLI can pass the message on unchanged.
"""

from __future__ import annotations

import math
import operator

ALTERNATIVES = ("two-sided", "greater", "less")


def count(name: str, value) -> int:
    """A non-negative integer (Python or numpy); floats, even integral ones, are refused."""
    try:
        if isinstance(value, bool):
            raise TypeError
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}") from None
    if out < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return out


def positive_count(name: str, value) -> int:
    out = count(name, value)
    if out < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return out


def real(name: str, value, *, low=-math.inf, high=math.inf, low_open=True, high_open=True) -> float:
    """A finite real number in the interval given (open or closed at each end)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    too_low = out <= low if low_open else out < low
    too_high = out >= high if high_open else out > high
    if not math.isfinite(out) or too_low or too_high:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lb}{low:g}, {high:g}{hb}, got {value!r}")
    return out


def fraction(name: str, value) -> float:
    """A probability strictly between 0 and 1 (alpha, power, confidence_level)."""
    return real(name, value, low=0.0, high=1.0)


def choice(name: str, value, options) -> str:
    if value not in options:
        valid = ", ".join(repr(o) for o in options)
        raise ValueError(f"{name} must be one of {valid}; got {value!r}")
    return value
