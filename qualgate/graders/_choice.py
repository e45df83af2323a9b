r"""The option a multiple-choice answer commits to (``final_choice``).

Models that do not write the requested ``Answer: X`` still commit to one option, usually in a
sentence such as "the correct answer is **(B)**", "Therefore: C. 5 peaks", ``\boxed{D}``, "I
choose A" or "Option B is correct", and then often discuss the other options ("Option (C)
would require…"). :func:`final_choice` finds the last such commitment, so letters mentioned
in a discussion of alternatives after it do not count; failing that, it takes the last line
that restates one option by its letter ("D. somatic hypermutation") or, given the option
texts, restates one option's text. A text that commits to nothing is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["final_choice"]

# What may stand between a commitment phrase and its letter: spaces, colons, markdown, math
# delimiters, "option"/"choice", an opening parenthesis or a LaTeX text/box command.
_GAP = (
    r"[\s:*_$#>\[({-]*"
    r"(?:\\(?:boxed|textbf|text|mathrm|mathbf)\s*\{\s*)?"
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
    # I choose / pick / select / go with X; this matches option X
    r"(?i:\bI\s+(?:would\s+|will\s+)?(?:choose|pick|select|go\s+with)\b"
    r"|\b(?:matches|corresponds\s+to)(?=\s+(?:option|choice)\b))",
)
_COMMIT = rf"(?:{'|'.join(_PHRASES)}){_GAP}(?P<a>[{{letters}}]){_END}"
# "B is correct", "Option (C) is the correct answer", \boxed{D}
_NAMED_CORRECT = (
    rf"(?:(?i:option|choice)\s*)?[(*]*(?P<b>[{{letters}}])[)*]*\s+"
    rf"(?i:is|appears\s+to\s+be|seems\s+to\s+be|would\s+be)\s+(?:the\s+)?(?i:correct|right|best)\b"
)
_BOXED = rf"\\boxed\s*\{{\s*(?:\\text(?:bf)?\s*\{{\s*)?\(?(?P<c>[{{letters}}]){_END}"
# A line that restates one option by its letter: "D. somatic hypermutation", "**(B)**".
_OPTION_LINE = rf"(?m)^[ \t>*_#-]*\(?(?P<d>[{{letters}}])(?:[.):]|\*\*|[ \t]*$)"

# The start of an elimination: "The other options are less likely:" followed by all but one.
_OTHERS = re.compile(r"(?i)\b(?:the\s+)?other\s+(?:options|choices|answers)\b[^\n]*")

_CACHE: dict[str, tuple[re.Pattern, re.Pattern]] = {}


def _patterns(letters: str) -> tuple[re.Pattern, re.Pattern]:
    if letters not in _CACHE:
        if not letters.isalpha() or not letters.isupper():
            raise ValueError(f"letters must be upper-case letters, got {letters!r}")
        commit = "|".join(p.replace("{letters}", letters) for p in (
            _COMMIT, _NAMED_CORRECT, _BOXED))  # fmt: skip
        _CACHE[letters] = re.compile(commit), re.compile(_OPTION_LINE.replace("{letters}", letters))
    return _CACHE[letters]


def _squash(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def final_choice(
    text: str, letters: str = "ABCD", options: Sequence[str] | None = None
) -> str | None:
    r"""The option letter ``text`` commits to, or ``None``.

    In order: the last commitment ("the answer is (X)", "correct option: X", "X is correct",
    ``\boxed{X}``, "I choose X", "this matches option X"); else the option an elimination
    leaves ("The other options are less likely:" followed by lines for every option but X);
    else the last line that starts with a lone option letter ("X. text", "(X)", "**X**") when
    the line before it introduces it (ends with a colon) and is not itself an option; else,
    with ``options`` (the option texts in letter order), the one option whose text the last
    line restates.

    >>> final_choice("The answer is (B). Option (C) would require a catalyst.")
    'B'
    >>> final_choice("Therefore, the correct statement is:\n\nC. The eigenfunction is real.")
    'C'
    """
    commit, option_line = _patterns(letters)
    last = None
    for last in commit.finditer(text):
        pass
    if last is not None:
        return next(g for g in last.groups() if g is not None)
    lines = list(option_line.finditer(text))
    others = None
    for others in _OTHERS.finditer(text):
        pass
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
