"""Answer extractors: small named functions ``(text, **params) -> str | None``.

An extractor returns the answer it found as a (trimmed) substring of the model's text, or
``None`` when the text holds no answer in its format. It never raises on any ``str`` input
and runs in time linear in the length of the text.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "after_marker",
    "boxed",
    "last_letter",
    "last_number",
    "normalize_text",
]

_SIGNS = "\u2212\u2012\u2013\ufe63\uff0d"
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _ascii_digit(match: re.Match) -> str:
    c = match.group()
    if c in _SIGNS:
        return "-"
    d = unicodedata.decimal(c, None)
    return c if d is None else str(d)


def normalize_text(text: str) -> str:
    """Map every Unicode decimal digit to its ASCII digit and minus-like dashes to ``-``.

    Fullwidth, Arabic-Indic, Devanagari... digits become ``0-9`` so that the number patterns
    below (ASCII only) see them; nothing else changes, so offsets keep their meaning.
    """
    return text if text.isascii() else _NON_ASCII.sub(_ascii_digit, text)


# A number: optional sign (only where it cannot be a binary minus, e.g. not in "5-3"),
# digits with optional thousands commas, optional decimals; or a bare ".5".
_NUMBER = re.compile(
    r"(?:(?<![\w)\]}])[-+])?"
    r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
    r"|(?:(?<![\w)\]}])[-+])?\.\d+",
    re.ASCII,
)


def last_number(text: str) -> str | None:
    """The last number in the text (sign, thousands commas and decimals kept), or ``None``.

    >>> last_number("16 - 3 - 4 = 9 eggs, so $18 a day.")
    '18'
    >>> last_number("It costs $1,250.50.")
    '1,250.50'
    """
    last = None
    for last in _NUMBER.finditer(normalize_text(text)):
        pass
    return None if last is None else last.group()


_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)


def _closing_braces(text: str) -> dict[int, int]:
    """Index of each ``{`` -> index of its matching ``}`` (escaped braces ignored); linear."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for tok in _BRACE_TOKEN.finditer(text):
        c = tok.group()
        if c == "{":
            stack.append(tok.start())
        elif c == "}" and stack:
            pairs[stack.pop()] = tok.start()
    return pairs


def boxed(text: str) -> str | None:
    r"""Content of the last complete ``\boxed{...}`` (or ``\fbox{...}``), braces balanced.

    Nested braces are kept (``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``); an unclosed
    ``\boxed{`` is skipped in favour of an earlier complete one; an empty box is no answer.

    >>> boxed(r"so $x = \boxed{\frac{1}{2}}$, not \boxed{3}")
    '3'
    """
    starts = [m.end() - 1 for m in _BOX.finditer(text)]
    if not starts:
        return None
    pairs = _closing_braces(text)
    for start in reversed(starts):
        end = pairs.get(start)
        if end is not None:
            return text[start + 1 : end].strip() or None
    return None


_TAKE = ("number", "letter", "line")


def after_marker(
    text: str,
    marker: str | list[str] = "The answer is",
    take: str = "number",
    letters: str = "ABCD",
) -> str | None:
    """What follows the last occurrence of ``marker`` (case-insensitive).

    ``take`` says what to read after it: ``'number'`` (the first number on the rest of that
    line, as :func:`last_number` reads numbers), ``'letter'`` (a standalone letter among
    ``letters``, optionally in parentheses or bold) or ``'line'`` (the rest of the line,
    stripped of surrounding ``$``, ``*`` and a final period). ``marker`` may be a list: the
    occurrence of any of them that comes last counts.

    >>> after_marker("... so 9 * 2 = 18.\\n#### 18", marker="####")
    '18'
    >>> after_marker("Answer: **(C)**", marker="Answer:", take="letter")
    'C'
    """
    if take not in _TAKE:
        raise ValueError(f"take must be one of {_TAKE}, got {take!r}")
    markers = [marker] if isinstance(marker, str) else list(marker)
    lowered = text.lower()
    best = -1
    best_len = 0
    for m in markers:
        at = lowered.rfind(m.lower())
        if at > best:
            best, best_len = at, len(m)
    if best < 0:
        return None
    rest = text[best + best_len :]
    line = rest.lstrip(" \t:").split("\n", 1)[0]
    if take == "number":
        found = _NUMBER.search(normalize_text(line))
        return None if found is None else found.group()
    if take == "letter":
        found = re.match(
            rf"[\s*_$(\[{{]*(?:\\text\{{)?\(?([{letters}])(?![A-Za-z0-9])", line
        )
        return None if found is None else found.group(1)
    value = line.strip().strip("*$ ").rstrip(".").strip()
    return value or None


def last_letter(text: str, letters: str = "ABCD") -> str | None:
    """The last standalone letter among ``letters`` (not part of a word), or ``None``.

    >>> last_letter("Between (B) and (D), I pick D.")
    'D'
    """
    last = None
    for last in re.finditer(rf"(?<![A-Za-z0-9])([{letters}])(?![A-Za-z0-9])", text):
        pass
    return None if last is None else last.group(1)
