"""Answer extraction and grading: small named functions, looked up by name from suite YAML.

Three registries map the names a suite file may use to functions:

``EXTRACTORS`` -- ``(text, **params) -> str | None``: the answer found in a model's text, or
    ``None`` when there is none in that format (then the outcome is ``no_answer``).

    ``boxed``         content of the last ``\\boxed{}``/``\\fbox{}`` (nested braces; an unclosed
                      last box is read to the end of its line; ``take: number`` reads its result)
    ``after_marker``  what follows the last ``marker`` (``take``: number, letter or line; a
                      number is the result of an equation on that line)
    ``json_answer``   the value of the last ``"answer"`` member of a JSON object (``take`` as
                      for ``after_marker``)
    ``last_number``   the last number in the text
    ``last_letter``   the last letter among ``letters`` (default ``ABCD``) named as an option,
                      not a symbol or the article "A"; none after a hedge, list or refusal
    ``final_choice``  the option letter the text commits to ("the answer is (B)", ``\\boxed{B}``,
                      "I choose B", a restated option), not a letter of a later discussion;
                      none for a hedge ("either B or C") or a letter beyond the options
    ``code_block``    the first fenced Python (else untagged) code block
    ``code``          ``code_block``, else the whole text (a program given without a fence)

``GRADERS`` -- ``(pred, gold, **params) -> bool``: whether an extracted answer is right, or
    a :class:`Verdict` (``outcome`` correct/incorrect/error and a short ``detail``).

    ``numeric``      exact numeric equality after normalising commas, currency, units,
                     ``%``, signs, trailing ``.0`` and Unicode digits (GSM8K)
    ``integer``      integer equality; non-numeric text goes to ``math_verify`` (AIME)
    ``math_verify``  equivalence by ``math-verify`` with a per-comparison time limit that
                     works in any thread; ordinals, text units and number words are read as
                     numbers; ``canonical`` demands the form a problem asks for (MATH)
    ``choice``       letter equality (multiple choice)
    ``exact``        string equality (``case_sensitive`` param)
    ``unit_tests``   runs the program with the question's tests in a sandbox (own process,
                     CPU, memory, output, file, process and wall-clock limits, no network:
                     :mod:`qualgate.graders._sandbox`); ``detail`` says why it failed

``GOLD_PARSERS`` -- ``(value, **params) -> str``: the gold answer from a dataset field;
    raises ``ValueError`` on a malformed value.

    ``text``          the field as a stripped string
    ``after_marker``  the text after the last ``marker`` (GSM8K: ``####``)
    ``integer``       an integer given as ``int`` or ``str``, within ``[low, high]`` (AIME)
    ``unit_tests``    the ``prefix``, ``test`` and ``entry_point`` columns (``gold.fields``) as
                      one JSON document (HumanEval)

:func:`grade` combines them into a :class:`Grade` with both extractions, their outcomes, the
decision of the suite's policy (:data:`DECISIONS`) and the extractor that made it. Reasoning
blocks (``<think>…</think>``) are removed first (:data:`THINKING`, :func:`strip_think`).
:func:`choice_permutation` gives the order of multiple-choice options from a stable hash.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import re
from dataclasses import asdict, dataclass

from ._choice import final_choice, last_letter
from ._code import Verdict, code, code_block, unit_tests, unit_tests_gold
from ._compare import choice, exact, integer, numeric, to_number, words_to_number
from ._extract import after_marker, boxed, json_answer, last_number, normalize_text, strip_think
from ._math import math_verify
from ._sandbox import Limits

__all__ = [
    "DECISIONS",
    "EXTRACTORS",
    "GOLD_PARSERS",
    "GRADERS",
    "OUTCOMES",
    "Grade",
    "Limits",
    "Verdict",
    "after_marker",
    "boxed",
    "choice",
    "choice_permutation",
    "code",
    "code_block",
    "exact",
    "final_choice",
    "grade",
    "integer",
    "json_answer",
    "last_letter",
    "last_number",
    "math_verify",
    "normalize_text",
    "register_extractor",
    "register_gold_parser",
    "register_grader",
    "numeric",
    "strip_think",
    "THINKING",
    "to_number",
    "unit_tests",
    "words_to_number",
]

OUTCOMES = ("correct", "incorrect", "no_answer", "error")
#: Decision policies: the strict extraction only; the lenient extraction only; strict when it
#: found an answer, else lenient.
DECISIONS = ("strict", "lenient", "either")
#: What to do with reasoning blocks: ``off`` (grade the whole text), ``strip`` (remove them;
#: an output ending inside one is ``no_answer``), ``prefilled`` (as ``strip``, and the prompt
#: opened the block, so an output without a closing tag ends inside it).
THINKING = ("off", "strip", "prefilled")
#: ``decided_by`` of an output that ends inside its reasoning block, or whose solution after
#: the block is cut off before its answer (see :func:`grade`).
UNFINISHED_THINK = "think:unfinished"
# The end of a cut-off text: a letter, a comma or an operator, not a sentence's or a formula's end.
_CUT_OFF = re.compile(r"[A-Za-z,(\[{+\-*/=^\\]\s*\Z")


@dataclass(frozen=True)
class Grade:
    """The grade of one model output.

    ``strict`` and ``lenient`` are the answers each list of extractors found (``None``: none)
    and ``strict_outcome``/``lenient_outcome`` what each would give; ``outcome`` is what the
    suite's decision policy (:data:`DECISIONS`) gives, and ``decided_by`` names the extractor
    that found the deciding answer (``"strict:boxed"``, ``"lenient:last_number"``), or
    :data:`UNFINISHED_THINK` for an output cut off in its reasoning block or in the solution
    after it (:func:`grade`), or ``None`` when nothing was found. ``detail`` is the deciding
    grader's reason when it gives one (``unit_tests``: ``"passed"``, ``"timeout: ..."``,
    ``"failed assertion: ..."``); an ``error`` outcome means the grader could not decide (its
    sandbox failed).
    """

    outcome: str
    strict: str | None
    lenient: str | None
    strict_outcome: str
    lenient_outcome: str
    decided_by: str | None = None
    detail: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _gold_text(value, **_) -> str:
    text = "" if value is None else str(value).strip()
    if not text:
        raise ValueError(f"empty gold answer {value!r}")
    return text


def _gold_after_marker(value, *, marker: str = "####") -> str:
    text = str(value)
    at = text.rfind(marker)
    if at < 0:
        raise ValueError(f"no {marker!r} in gold answer {text[-80:]!r}")
    return _gold_text(text[at + len(marker) :])


def _gold_integer(value, *, low: int = 0, high: int = 999) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"gold answer must be an integer (int or str), got {value!r}")
    text = str(value).strip()
    try:
        number = int(text, 10)
    except ValueError:
        raise ValueError(f"gold answer is not an integer: {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"gold answer {number} is outside [{low}, {high}]")
    return str(number)


EXTRACTORS = {
    "boxed": boxed,
    "after_marker": after_marker,
    "json_answer": json_answer,
    "last_number": last_number,
    "last_letter": last_letter,
    "final_choice": final_choice,
    "code_block": code_block,
    "code": code,
}
GRADERS = {
    "numeric": numeric,
    "integer": integer,
    "math_verify": math_verify,
    "choice": choice,
    "exact": exact,
    "unit_tests": unit_tests,
}
GOLD_PARSERS = {
    "text": _gold_text,
    "after_marker": _gold_after_marker,
    "integer": _gold_integer,
    "unit_tests": unit_tests_gold,
}


def _register(registry: dict, kind: str, name: str, fn) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"the {kind} name must be a non-empty string, got {name!r}")
    if not callable(fn):
        raise ValueError(f"the {kind} {name!r} must be callable, got {fn!r}")
    registry[name] = fn


def register_extractor(name: str, fn) -> None:
    """Make ``fn(text, **params) -> str | None`` an extractor that suite files can name
    (``extract: {strict: NAME}``); a name already registered is replaced."""
    _register(EXTRACTORS, "extractor", name, fn)


def register_grader(name: str, fn) -> None:
    """Make ``fn(pred, gold, **params) -> bool`` (or a :class:`Verdict`) a grader that suite
    files can name (``grader: NAME``); a name already registered is replaced."""
    _register(GRADERS, "grader", name, fn)


def register_gold_parser(name: str, fn) -> None:
    """Make ``fn(value, **params) -> str`` a gold parser that suite files can name
    (``gold: {field: F, parse: NAME}``); a name already registered is replaced."""
    _register(GOLD_PARSERS, "gold parser", name, fn)


def grade(
    text: str,
    gold: str,
    *,
    strict,
    lenient,
    grader,
    decides: str = "strict",
    think: str = "off",
    problem: str | None = None,
    options: tuple[str, ...] = (),
) -> Grade:
    """Grade ``text`` against ``gold``.

    ``strict`` and ``lenient`` are sequences of extractors (callables ``text -> str | None``,
    or ``(label, callable)`` pairs; the label defaults to the function's name) tried in
    order; the first answer of each list counts. ``grader`` is a callable ``(pred, gold) ->
    bool``; one that takes a ``problem`` keyword gets ``problem`` (the question's text), an
    extractor that takes ``options`` gets ``options`` (multiple choice: the option texts in
    letter order, as shown). An empty or missing extraction is ``no_answer``; otherwise the
    grader decides ``correct`` or ``incorrect`` (a grader that returns a :class:`Verdict` may
    also say ``error``, and its ``detail`` becomes the grade's). ``decides`` is the policy (:data:`DECISIONS`), ``think`` the handling of
    reasoning blocks (:data:`THINKING`).

    An output cut off in its reasoning block is ``no_answer`` (``decided_by``
    :data:`UNFINISHED_THINK`), and so is one whose solution after the block is cut off: it ends
    mid-sentence (on a letter, a comma or an operator), holds no strict answer, and only a
    last-resort extractor (``last_number``, ``last_letter``) would read something from it,
    which would be a stray number of the unfinished solution, not its answer.
    """
    if decides not in DECISIONS:
        raise ValueError(f"decides must be one of {DECISIONS}, got {decides!r}")
    if think not in THINKING:
        raise ValueError(f"think must be one of {THINKING}, got {think!r}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    unfinished = Grade("no_answer", None, None, "no_answer", "no_answer", UNFINISHED_THINK)
    thought = False
    if think != "off":
        answer_text = strip_think(text, prefilled=think == "prefilled")
        if answer_text is None:
            return unfinished
        thought, text = answer_text != text, answer_text
    judge = functools.partial(_judge, gold=gold, grader=grader, problem=problem)
    s, s_by = _first(strict, text, options)
    le, le_by = _first(lenient, text, options)
    if thought and s is None and _CUT_OFF.search(text) and _last_resort(lenient, le_by):
        return unfinished  # the stray number of a solution cut off after its reasoning block
    s_out, s_why = judge(s)
    le_out, le_why = (s_out, s_why) if le == s else judge(le)
    if decides == "strict" or (decides == "either" and s is not None):
        outcome, by, why = s_out, s_by and f"strict:{s_by}", s_why
    else:
        outcome, by, why = le_out, le_by and f"lenient:{le_by}", le_why
    return Grade(outcome, s, le, s_out, le_out, by, why)


def _first(extractors, text: str, options=()) -> tuple[str | None, str | None]:
    for extract in extractors:
        label, extract = extract if isinstance(extract, tuple) else (_name(extract), extract)
        found = extract(text, options=options) if options and _accepts(extract, "options") else extract(text)
        if found is not None and found.strip():
            return found.strip(), label
    return None, None


def _last_resort(extractors, label: str | None) -> bool:
    """Whether the extractor labelled ``label`` reads whatever comes last (a number, a letter)."""
    for extract in extractors:
        found, fn = extract if isinstance(extract, tuple) else (_name(extract), extract)
        if found == label:
            return getattr(fn, "func", fn) in (last_number, last_letter)
    return False


def _name(fn) -> str:
    return getattr(getattr(fn, "func", fn), "__name__", "extractor")


@functools.lru_cache(maxsize=256)
def _accepts(fn, keyword: str) -> bool:
    try:
        return keyword in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _judge(pred: str | None, *, gold: str, grader, problem: str | None) -> tuple[str, str | None]:
    if pred is None:
        return "no_answer", None
    if problem is not None and _accepts(grader, "problem"):
        ok = grader(pred, gold, problem=problem)
    else:
        ok = grader(pred, gold)
    if isinstance(ok, Verdict):
        return ok.outcome, ok.detail
    return ("correct" if ok else "incorrect"), None


def choice_permutation(key: str, n: int = 4, *, salt: str = "") -> tuple[int, ...]:
    """A permutation of ``range(n)`` chosen by SHA-256 of ``salt`` and ``key``.

    The same ``(key, n, salt)`` gives the same permutation in every process, on every
    machine and Python version (no use of ``hash()`` or a global RNG). Permutations are
    numbered in lexicographic order and the digest, read as a big-endian integer, is reduced
    modulo ``n!``; for ``n = 4`` the bias of that reduction is below ``24 / 2**256``.

    ``result[i]`` is the index, in the caller's original order, of the option shown at
    position ``i``.

    >>> choice_permutation("rec0001")
    (1, 3, 2, 0)
    """
    if not isinstance(n, int) or not 1 <= n <= 20:
        raise ValueError(f"n must be an int in [1, 20], got {n!r}")
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    index = int.from_bytes(digest, "big") % math.factorial(n)
    pool = list(range(n))
    order = []
    for k in range(n - 1, -1, -1):  # decode the factorial-base (Lehmer) digits
        digit, index = divmod(index, math.factorial(k))
        order.append(pool.pop(digit))
    return tuple(order)
