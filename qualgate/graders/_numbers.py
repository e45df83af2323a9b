"""Numbers as answers are written: digits with thousands separators, decimals, fractions
(``3/4``, ``\\frac{3}{4}``) and English number words (``seventy-two``)."""

from __future__ import annotations

import re
from fractions import Fraction

from ._extract import normalize_text

__all__ = ["to_number", "words_to_number"]

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


_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
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
