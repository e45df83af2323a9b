"""Comparers ``(pred, gold, **params) -> bool`` for numbers, integers, letters and strings.

A comparer gets an extracted answer (never ``None``: no extraction is ``no_answer`` before
any comparison) and the gold answer string. It never raises on any ``str`` input.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ._extract import normalize_text

__all__ = ["choice", "exact", "integer", "numeric", "to_number", "words_to_number"]

_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_DROP = re.compile(r"\\[$%!,;: ]|\\left|\\right|[$%€£¥*]|\^\s*\{?\\circ\}?|\\circ|\\boxed")
_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d*)?|[-+]?\.\d+"
_VALUE = re.compile(rf"({_NUM})(?:\s*/\s*({_NUM}))?", re.ASCII)


def _clean(text: str) -> str:
    s = normalize_text(text).replace("{,}", ",")
    s = _LATEX_FRAC.sub(r"\1/\2", s)
    s = _LATEX_TEXT.sub(r" \1 ", s)
    s = _DROP.sub("", s).replace("{", "").replace("}", "")
    # A sign separated from its number ("- 5", "-$5") joins it.
    return re.sub(r"(^|[\s(=])([-+])\s+(?=[\d.])", r"\1\2", s.strip())


_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_WORD = re.compile(r"[a-z]+")


def words_to_number(text: str) -> int | None:
    """The whole number that ``text`` starts with, written in English words, or ``None``.

    Reads ``zero`` to ``nineteen``, tens, ``hundred``/``thousand``/``million``/``billion``,
    hyphens and ``and`` (``"one hundred and five"``); words after the number (units, nouns)
    are ignored.

    >>> words_to_number("Twenty-one boxes"), words_to_number("three"), words_to_number("box")
    (21, 3, None)
    """
    total = current = 0
    seen = False
    for word in _WORD.findall(text.lower().replace("-", " ")):
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word in _SCALES and seen:
            if _SCALES[word] == 100:
                current *= 100
            else:
                total, current = total + current * _SCALES[word], 0
        elif word == "and" and seen:
            continue
        else:
            break
        seen = True
    return total + current if seen else None


def _fraction(num: str, den: str | None) -> Fraction | None:
    try:
        value = Fraction(num.replace(",", "").rstrip("."))
        if den is not None:
            d = Fraction(den.replace(",", "").rstrip("."))
            value = value / d if d else None
        return value
    except (ValueError, ZeroDivisionError):
        return None


def to_number(text: str, *, whole: bool = False) -> Fraction | None:
    r"""The number written in ``text``, as an exact fraction, or ``None``.

    Normalises Unicode digits and minus signs, thousands commas (also LaTeX ``{,}``),
    currency symbols, ``%``, degree signs, ``\frac``/``\dfrac``, ``\text{}`` and a trailing
    ``.0``. With ``whole=False`` the first number is read and the rest (units, words) is
    ignored, and a text without digits may start with a number in words (``"three boxes"``,
    :func:`words_to_number`); with ``whole=True`` the cleaned text must be a number and nothing else.

    >>> to_number("$1,250.00 per week")
    Fraction(1250, 1)
    >>> to_number(r"-\dfrac{3}{4}")
    Fraction(-3, 4)
    >>> to_number("2^6", whole=True) is None
    True
    """
    s = _clean(text)
    found = _VALUE.fullmatch(s) if whole else _VALUE.search(s)
    if found is None:
        words = None if whole else words_to_number(s)
        return None if words is None else Fraction(words)
    return _fraction(found.group(1), found.group(2))


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
