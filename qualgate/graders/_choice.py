r"""The option a multiple-choice answer commits to (``final_choice``, ``last_letter``).

Models that do not write the requested ``Answer: X`` still commit to one option, usually in a
sentence such as "the correct answer is **(B)**", "Therefore: C. 5 peaks", ``\boxed{D}``, "I
choose A" or "Option B is correct", and then often discuss the other options ("Option (C)
would require…", "(D) is correct, but…"). :func:`final_choice` finds the last such commitment,
so letters mentioned in a discussion of alternatives after it do not count; failing that, it
takes the last line that restates one option by its letter ("D. somatic hypermutation") or,
given the option texts, restates one option's text. :func:`last_letter`, the last resort,
takes the last letter the text names as an option.

Neither gives a letter where the text does not commit to one option: a hedge ("either A or
C", "the correct answers are A and C"), a list ("without selecting (A), (B), (C), or (D)") or
a letter outside the options ("The answer is (E) None of the above") is ``None`` (no answer),
and so is a text that commits to nothing; :func:`last_letter` also gives ``None`` when a
refusal ("None of the provided options match") or an answer that is no letter ("the correct
answer is: \boxed{35}") comes after its letter. Letters that are not option letters do not
count: a symbol in a formula (``k*B``, ``m_{A^{0}}``, ``A = 1``) or the article "A" ("A more
accurate value").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["final_choice", "last_letter"]

# What may stand between a commitment phrase and its letter: spaces, colons, markdown, math
# delimiters, "either", "option"/"choice", an opening parenthesis or a LaTeX text/box command.
_GAP = (
    r"[\s:*_$#>\[({-]*"
    r"(?:\\(?:boxed|textbf|text|mathrm|mathbf)\s*\{\s*)?"
    r"(?:(?i:either)\s+)?"
    r"(?:(?i:option|choice)\s*)?"
    r"[\s*_({\[]*"
)
# The letter, not the start of a word or of an equation ("A = benzoquinone").
_END = r"(?![A-Za-z0-9'])(?!\s*=)"
_PHRASES = (
    # the answer/option/choice is X; final answer: X; correct answer would be X
    r"(?i:\b(?:answer|option|choice|selection)(?:\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be"
    r"|then\s+is|therefore\s+is|here\s+is))(?:\s+(?:likely|probably|clearly|therefore|thus))?\b"
    r"|\banswer\s*:)",
    # the correct / best / most plausible <up to ten words> is X
    r"(?i:\b(?:correct|best|right|final|most\s+(?:likely|plausible|appropriate|suitable|accurate))"
    r"(?:[ \t]+[\w'-]+){0,10}?\s+(?:is|would\s+be|should\s+be|are|matches|fits)"
    r"(?:\s+(?:likely|probably|clearly|therefore|thus))?\b)",
    # EXCEPT / NOT questions: the incorrect statement is X; the exception is X
    r"(?i:\b(?:incorrect|false|wrong|untrue)\s+(?:statement|option|answer|choice|one|claim|assertion)"
    r"\s+(?:is|would\s+be)|\bexception\s+is)\b",
    # I choose / pick / select / go with X; this matches option X
    r"(?i:\bI\s+(?:would\s+|will\s+)?(?:choose|pick|select|go\s+with)\b"
    r"|\b(?:matches|corresponds\s+to)(?=\s+(?:option|choice)\b))",
)
# {letters}: the options and the letters just beyond them ("The answer is (E)": none of them).
_COMMIT = rf"(?:{'|'.join(_PHRASES)}){_GAP}(?P<a>[{{letters}}]){_END}"
# "B is correct", "Option (C) is the correct answer": weaker, as in a discussion of each option
# (bounded markup around the letter: a run of "*" must not cost time quadratic in its length)
_NAMED_CORRECT = (
    r"(?:(?i:option|choice)\s*)?[(*]{0,3}(?P<b>[{options}])[)*]{0,3}\s+"
    r"(?i:is|appears\s+to\s+be|seems\s+to\s+be|would\s+be)\s+(?:the\s+)?(?i:correct|right|best)\b"
)
_BOXED = rf"\\boxed\s*\{{\s*(?:\\text(?:bf)?\s*\{{\s*)?\(?(?P<c>[{{letters}}]){_END}"
# A line that restates one option by its letter: "D. somatic hypermutation", "**(B)**".
_OPTION_LINE = r"(?m)^[ \t>*_#-]*\(?(?P<d>[{options}])(?:[.):]|\*\*|[ \t]*$)"

# The start of an elimination: "The other options are less likely:" followed by all but one.
_OTHERS = re.compile(r"(?i)\b(?:the\s+)?other\s+(?:options|choices|answers)\b[^\n]*")
# A refusal: "None of the provided options (A, B, C, D) match", "none of the above", "34 is not
# among the options".
_DECLINE = re.compile(
    r"(?i)\bnone\s+of\s+the\s+(?:above|(?:[\w-]+\s+){0,2}(?:options|choices|answers|alternatives))\b"
    r"|\bnot\s+(?:among|one\s+of|listed\s+(?:in|among))\s+the\s+(?:[\w-]+\s+)?(?:options|choices|answers)\b"
)
# What joins two letters of a hedge or a list: "A or C", "(A), (B), (C), or (D)", "**Option A**
# or **Option C**", "A (Classical Electrodynamics) and C".
_JOIN = r"[\s*)\]]*(?:\([^()\n]{0,80}\)[\s*]*)?(?:,[ \t]*(?:or\b|and\b)?|\bor\b|\band\b|\bnor\b|&|/)[\s*(\[]*(?:(?i:option|choice)s?\s*)?[\s*(\[]*"
_JOINED_BEFORE = re.compile(rf"(?<![A-Za-z0-9])[A-HJ-Z](?![A-Za-z0-9']){_JOIN}\Z")
_ALSO = re.compile(rf"{_JOIN}(?P<x>[A-Z])(?![A-Za-z0-9'])")
# A letter that is a symbol, not an option: in a formula ("k*B", "m_{A^{0}}", "x = B", "B^2").
_SYMBOL_BEFORE = re.compile(r"(?:[_^]\{?|\\|[\w)\]}][ \t]*(?:[/+=^-]|(?<!\*)\*)[ \t]*)\Z")
_SYMBOL_AFTER = re.compile(r"[ \t]*(?:[/+=^_]|\*(?!\*))")
# "A" before a word that is not a verb or conjunction is the article ("A more accurate value").
_ARTICLE = re.compile(r"[ \t]+([a-z]+)")
_VERBS = frozenset(
    "is was would could should seems appears and or has does matches fits gives remains cannot "
    "can might must will not only also correctly best looks describes represents shows contains "
    "includes lacks fails requires involves corresponds agrees aligns".split()
)
_NAMED_AS_OPTION = re.compile(r"(?i:option|choice|answer)[\s:*]*\(?\Z|[(*]\Z")

# Where a text states its answer: "the answer is", "Final answer:", "the correct sequence ...
# matches", \boxed{ (after the last letter, an answer that is not a letter).
_ANSWER_IS = re.compile(rf"{_PHRASES[0]}|{_PHRASES[1]}|\\boxed\s*\{{")

_CACHE: dict[str, tuple[re.Pattern, re.Pattern]] = {}


def _patterns(letters: str) -> tuple[re.Pattern, re.Pattern]:
    """The commitment and option-line patterns for the options ``letters``."""
    if letters not in _CACHE:
        if not letters.isalpha() or not letters.isupper() or not letters.isascii():
            raise ValueError(f"letters must be upper-case letters, got {letters!r}")
        beyond = "".join(c for c in "EFGHJKLMNOPQRSTUVWXYZ" if c > max(letters))[:4]  # not "I"
        fill = {"{letters}": letters + beyond, "{options}": letters}
        commit = "|".join(_fill(p, fill) for p in (_COMMIT, _NAMED_CORRECT, _BOXED))
        _CACHE[letters] = re.compile(commit), re.compile(_fill(_OPTION_LINE, fill))
    return _CACHE[letters]


def _fill(pattern: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        pattern = pattern.replace(key, value)
    return pattern


def _is_symbol(text: str, start: int, end: int) -> bool:
    """Whether the letter at ``text[start:end]`` is not an option letter (see the patterns)."""
    before = text[max(0, start - 24) : start]
    if _SYMBOL_BEFORE.search(before) or _SYMBOL_AFTER.match(text, end):
        return True
    if text[start:end] == "A" and not _NAMED_AS_OPTION.search(before):
        word = _ARTICLE.match(text, end)
        return word is not None and word.group(1) not in _VERBS
    return False


def _squash(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def final_choice(text: str, letters: str = "ABCD", options: Sequence[str] | None = None) -> str | None:
    r"""The option letter ``text`` commits to, or ``None``.

    In order: the last commitment ("the answer is (X)", "correct option: X", ``\boxed{X}``,
    "I choose X", "this matches option X", "the incorrect statement is X"), where "X is
    correct" counts only if no such commitment comes before it (after one, it is a discussion
    of the options: "The answer is B. ... (A) is correct, but ..."); a commitment to two
    options ("either B or C", "the correct answers are A and C") or to a letter beyond
    ``letters`` ("The answer is (E) None of the above") is ``None``. Without any commitment:
    the option an elimination leaves ("The other options are less likely:" followed by lines
    for every option but X); else the last line that starts with a lone option letter ("X.
    text", "(X)", "**X**") when the line before it introduces it (ends with a colon) and is not
    itself an option; else, with ``options`` (the option texts in letter order), the one option
    whose text the last line restates.

    >>> final_choice("The answer is (B). Option (C) would require a catalyst.")
    'B'
    >>> final_choice("Therefore, the correct statement is:\n\nC. The eigenfunction is real.")
    'C'
    >>> final_choice("The answer is either B or C.") is None
    True
    """
    commit, option_line = _patterns(letters)
    answer, strong, seen = None, False, False
    for m in commit.finditer(text):
        seen, letter = True, m.group("a") or m.group("c")
        if letter is None:  # "X is correct"
            if not strong:
                answer = None if _two_options(text, m, letters) else m.group("b")
        elif letter not in letters or _two_options(text, m, letters):
            answer, strong = None, letter not in letters
        else:
            answer, strong = letter, True
    if seen:
        return answer
    lines = list(option_line.finditer(text))
    others = next(reversed(list(_OTHERS.finditer(text))), None)  # the last such sentence
    if others is not None:  # "The other options are less likely: B. ... C. ... D. ..."
        rest = {m.group("d") for m in lines if m.start() > others.start()}
        if len(rest) == len(letters) - 1:
            return next(c for c in letters if c not in rest)
    if lines:
        m = lines[-1]
        before = [ln.strip(" \t*_#>") for ln in text[: m.start()].splitlines() if ln.strip(" \t*_#>")]
        if before and before[-1].endswith(":") and not option_line.match(before[-1]):
            return m.group("d")
    if options:
        tail = [ln for ln in text.strip().splitlines() if ln.strip()]
        last_line = _squash(tail[-1]) if tail else ""
        hits = [letters[i] for i, o in enumerate(options[: len(letters)]) if _squash(o) and _squash(o) in last_line]
        if len(hits) == 1:
            return hits[0]
    return None


def _two_options(text: str, m: re.Match, letters: str) -> bool:
    """Whether the letter that ``m`` commits to is joined to another ("B or C", "A and C")."""
    also = _ALSO.match(text, m.end())
    return also is not None and also.group("x") in letters and not _is_symbol(text, *also.span("x"))


def last_letter(text: str, letters: str = "ABCD") -> str | None:
    r"""The last letter among ``letters`` that ``text`` names as an option, or ``None``.

    A standalone letter (not part of a word) counts unless it is a symbol in a formula
    (``k*B``, ``m_{A^{0}}``, ``x = B``) or the article "A" ("A more accurate value"). The
    text commits to no option (``None``) when that last letter is one of a list or hedge
    ("either Option A or Option C", "(A), (B), (C), or (D)", "C and T"), or when a refusal
    ("none of the provided options", "none of the above") or an answer that is not an
    option's letter ("the correct answer is: \boxed{35}", "The answer is (E)") comes after it.

    >>> last_letter("Between (B) and (D), I pick D.")
    'D'
    >>> last_letter("It is either Option A or Option C.") is None
    True
    """
    _patterns(letters)  # checks letters
    last = None
    for m in re.finditer(rf"(?<![A-Za-z0-9])([{letters}])(?![A-Za-z0-9])", text):
        if not _is_symbol(text, m.start(), m.end()):
            last = m
    if last is None:
        return None
    if (
        _DECLINE.search(text, last.start())
        or _ANSWER_IS.search(text, last.end())
        or _JOINED_BEFORE.search(text[max(0, last.start() - 80) : last.start()])
    ):
        return None
    also = _ALSO.match(text, last.end())
    return None if also is not None and also.group("x") != "I" else last.group(1)
