"""Comparers ``(pred, gold, **params) -> bool`` for numbers, integers, letters and strings.

A comparer gets an extracted answer (never ``None``: no extraction is ``no_answer`` before
any comparison) and the gold answer string. It never raises on any ``str`` input.
"""

from __future__ import annotations

from ._numbers import to_number, words_to_number

__all__ = ["choice", "exact", "integer", "numeric", "to_number", "words_to_number"]


def numeric(pred: str, gold: str) -> bool:
    """Exact numeric equality of the first number in each, after :func:`to_number`.

    ``"$18.00"``, ``"18 dollars"``, ``"18.0"`` and ``"+18"`` all equal ``"18"``; ``"1,000"``
    equals ``"1000"``; ``"50%"`` equals ``"50"``.
    """
    a, b = to_number(pred), to_number(gold)
    return a is not None and b is not None and a == b


def integer(pred: str, gold: str, *, timeout_s: float = 5.0) -> bool:
    """Integer equality (AIME): ``pred`` is read as a whole number (``"070"``, ``"70.0"``,
    ``"70^\\circ"`` equal ``70``); anything else (``"2^{6}"``, ``"\\frac{140}{2}"``) is
    compared with :func:`qualgate.graders.math_verify` against the integer gold.
    """
    g = to_number(gold, whole=True)
    if g is None or g.denominator != 1:
        return False
    p = to_number(pred, whole=True)
    if p is not None:
        return p == g
    from ._math import math_verify

    return math_verify(pred, str(g.numerator), timeout_s=timeout_s)


def choice(pred: str, gold: str) -> bool:
    """Letter equality, ignoring case, surrounding space, parentheses and ``*``."""
    return pred.strip().strip("()*. ").upper() == gold.strip().upper()


def exact(pred: str, gold: str, *, case_sensitive: bool = False) -> bool:
    """String equality after stripping surrounding space (case-insensitive by default)."""
    a, b = pred.strip(), gold.strip()
    return a == b if case_sensitive else a.casefold() == b.casefold()
