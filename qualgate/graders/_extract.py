"""Answer extractors: small named functions ``(text, **params) -> str | None``.

An extractor returns the answer it found as a (trimmed) substring of the model's text, or
``None`` when the text holds no answer in its format. It never raises on any ``str`` input
and runs in time linear in the length of the text.
"""

from __future__ import annotations

import json
import re
import unicodedata

__all__ = [
    "THINK",
    "after_marker",
    "boxed",
    "json_answer",
    "last_number",
    "normalize_text",
    "result_number",
    "strip_think",
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
    last = next(reversed(list(_NUMBER.finditer(normalize_text(text)))), None)
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


def boxed(text: str, take: str = "text") -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``), braces balanced.

    Nested braces are kept (``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``); an empty box is
    no answer. A last box that is never closed (``\boxed{2\sqrt{5}`` at the end of a line, a
    brace the model forgot) is read to the end of its line, without a trailing ``$``, ``\]``,
    ``\)`` or period. ``take='number'`` reads the box as :func:`result_number` does (the
    result of ``\boxed{2 \times 12 = 24}``, the number of ``\boxed{25}\%``).

    >>> boxed(r"so $x = \boxed{\frac{1}{2}}$, not \boxed{3}")
    '3'
    >>> boxed(r"so the distance is $\boxed{2\sqrt{5}$.")
    '2\\sqrt{5}'
    """
    if take not in ("text", "number"):
        raise ValueError(f"take must be 'text' or 'number', got {take!r}")
    starts = [m.end() - 1 for m in _BOX.finditer(text)]
    if not starts:
        return None
    pairs = _closing_braces(text)
    start = starts[-1]
    end = pairs.get(start)
    if end is not None:
        found = text[start + 1 : end].strip()
    else:
        found = _UNCLOSED_TAIL.sub("", text[start + 1 :].split("\n", 1)[0]).strip()
    if take == "number":
        return result_number(found)
    return found or None


# What ends an unclosed box's line but is not part of the answer: math delimiters, a period.
_UNCLOSED_TAIL = re.compile(r"(?:\s*(?:\$+|\\\]|\\\)|\.|\*+))+\s*$")


def result_number(text: str) -> str | None:
    """The number a short answer states: after its last ``=`` (``64 - 2 * 24 = 16`` gives
    ``16``), the first number there, as :func:`last_number` reads numbers; ``None`` if none.
    An ``=`` inside parentheses is a remark, not the result (``20 (= 4 x 5)`` gives ``20``).

    >>> result_number("Answer: 64 - 48 = 16 eggs"), result_number("20 (= 4 * 5)")
    ('16', '20')
    """
    bare = _PARENTHESES.sub(" ", text)
    rest = bare.rsplit("=", 1)[-1] if "=" in bare else text
    found = _NUMBER.search(normalize_text(rest))
    return None if found is None else found.group()


_PARENTHESES = re.compile(r"\([^()]*\)")


_TAKE = ("number", "letter", "line")


def after_marker(
    text: str,
    marker: str | list[str] = "The answer is",
    take: str = "number",
    letters: str = "ABCD",
) -> str | None:
    """What follows the last occurrence of ``marker`` (case-insensitive).

    ``take`` says what to read after it: ``'number'`` (the number the rest of that line
    states, as :func:`result_number` reads it: ``#### 64 - 2 * 24 = 16`` gives ``16``), ``'letter'`` (a standalone letter among
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
    return _take(rest.lstrip(" \t:").split("\n", 1)[0], take, letters)


def _take(line: str, take: str, letters: str) -> str | None:
    """What ``take`` reads from the answer ``line`` (see :func:`after_marker`)."""
    if take == "number":
        return result_number(line)
    if take == "letter":
        found = re.match(rf"[\s*_$(\[{{]*(?:\\text\{{)?\(?([{letters}])(?![A-Za-z0-9])", line)
        return None if found is None else found.group(1)
    value = line.strip().strip("*$ ").rstrip(".").strip()
    return value or None


# A JSON member named ``answer`` (any case): ``"answer": "$145"``, ``"Answer": 18``.
_JSON_KEY = re.compile(r'"(?i:answer)"\s*:\s*')
_JSON = json.JSONDecoder()
_CONTROL = re.compile(r"[\x00-\x1f]")


def json_answer(text: str, take: str = "line", letters: str = "ABCD") -> str | None:
    r"""The value of the last ``"answer"`` member of a JSON object in the text, or ``None``.

    Harnesses such as ZeroEval ask for ``{"reasoning": "...", "answer": "..."}``; what follows
    the object (a summary "The key steps are: 1. ... 2. ... 3.") does not count. A string
    value is decoded (``"\\frac{1}{2}"`` gives ``\frac{1}{2}``; one whose escapes decode to
    control characters, as LaTeX written with single backslashes does, is read as written);
    any other value is read to the end of its line. ``take`` reads it as :func:`after_marker`
    does (``'number'``: the result ``2`` of ``"2:00 pm"``, ``145`` of ``"$145"``); ``null``,
    ``true``, ``false`` and an empty string are no answer.

    >>> json_answer('{"answer": "$145"}\nThe key steps are: 1. add 2. subtract 3.', take="number")
    '145'
    """
    if take not in _TAKE:
        raise ValueError(f"take must be one of {_TAKE}, got {take!r}")
    for key in reversed(list(_JSON_KEY.finditer(text))):
        at = key.end()
        if text.startswith('"', at):
            try:
                value, end = _JSON.raw_decode(text, at)
            except ValueError:
                continue
            if _CONTROL.search(value):
                value = text[at + 1 : end - 1].replace("\\\\", "\\").replace('\\"', '"')
        else:
            value = text[at:].split("\n", 1)[0].split("}", 1)[0].strip().rstrip(",")
            if value in ("null", "true", "false"):
                return None
        return _take(value, take, letters) if value.strip() else None
    return None


#: Reasoning blocks, as (opening, closing) tags: Qwen3 / DeepSeek-R1 ``<think>``, and the
#: Sky-T1 / Bespoke / OpenThoughts ``<|begin_of_thought|>``.
THINK = (("<think>", "</think>"), ("<|begin_of_thought|>", "<|end_of_thought|>"))


def strip_think(text: str, *, prefilled: bool = False) -> str | None:
    """The text after the reasoning block, or ``None`` when the output ends inside one.

    Everything up to the end of the last closing tag (:data:`THINK`) is removed, so drafts of
    an answer inside the block never count. An opening tag after the last closing tag means
    the output was cut off while thinking (``None``: no answer). With ``prefilled`` the chat
    template opened the block in the prompt (Qwen3 with thinking on, DeepSeek-R1), so an
    output without any closing tag also ends inside the block. A text without tags is
    returned unchanged (unless ``prefilled``).

    >>> strip_think("<think>maybe #### 3</think>#### 4")
    '#### 4'
    >>> strip_think("<think>so the answer is 3, but") is None
    True
    """
    close_at, close_end = -1, 0
    open_at = -1
    for opening, closing in THINK:
        at = text.rfind(closing)
        if at > close_at:
            close_at, close_end = at, at + len(closing)
        open_at = max(open_at, text.rfind(opening))
    if open_at > close_at or (prefilled and close_at < 0):
        return None
    return text if close_at < 0 else text[close_end:]
