"""Answer extraction and grading: small named functions, looked up by name from suite YAML.

Three registries map the names a suite file may use to functions:

``EXTRACTORS`` -- ``(text, **params) -> str | None``: the answer found in a model's text, or
    ``None`` when there is none in that format (then the outcome is ``no_answer``).

    ``boxed``         content of the last complete ``\\boxed{}``/``\\fbox{}`` (nested braces)
    ``after_marker``  what follows the last ``marker`` (``take``: number, letter or line)
    ``last_number``   the last number in the text
    ``last_letter``   the last standalone letter among ``letters`` (default ``ABCD``)

``GRADERS`` -- ``(pred, gold, **params) -> bool``: whether an extracted answer is right.

    ``numeric``      exact numeric equality after normalising commas, currency, units,
                     ``%``, signs, trailing ``.0`` and Unicode digits (GSM8K)
    ``integer``      integer equality; non-numeric text goes to ``math_verify`` (AIME)
    ``math_verify``  equivalence by ``math-verify`` with a per-comparison time limit that
                     works in any thread (MATH)
    ``choice``       letter equality (multiple choice)
    ``exact``        string equality (``case_sensitive`` param)

``GOLD_PARSERS`` -- ``(value, **params) -> str``: the gold answer from a dataset field;
    raises ``ValueError`` on a malformed value.

    ``text``          the field as a stripped string
    ``after_marker``  the text after the last ``marker`` (GSM8K: ``####``)
    ``integer``       an integer given as ``int`` or ``str``, within ``[low, high]`` (AIME)

:func:`grade` combines them into a :class:`Grade` with both extractions and their outcomes.
:func:`choice_permutation` gives the order of multiple-choice options from a stable hash.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass

from ._compare import choice, exact, integer, numeric, to_number
from ._extract import after_marker, boxed, last_letter, last_number, normalize_text
from ._math import math_verify

__all__ = [
    "EXTRACTORS",
    "GOLD_PARSERS",
    "GRADERS",
    "OUTCOMES",
    "Grade",
    "after_marker",
    "boxed",
    "choice",
    "choice_permutation",
    "exact",
    "grade",
    "integer",
    "last_letter",
    "last_number",
    "math_verify",
    "normalize_text",
    "numeric",
    "to_number",
]

OUTCOMES = ("correct", "incorrect", "no_answer")


@dataclass(frozen=True)
class Grade:
    """The grade of one model output.

    ``outcome`` is decided by the extraction the suite names (``strict`` or ``lenient``);
    ``strict_outcome`` and ``lenient_outcome`` are what each would give, so that reports can
    show both rates. ``lenient`` equals ``strict`` whenever the strict format was found (the
    lenient extractor is a fallback, so the lenient rate is never below the strict one).
    """

    outcome: str
    strict: str | None
    lenient: str | None
    strict_outcome: str
    lenient_outcome: str

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
    "last_number": last_number,
    "last_letter": last_letter,
}
GRADERS = {
    "numeric": numeric,
    "integer": integer,
    "math_verify": math_verify,
    "choice": choice,
    "exact": exact,
}
GOLD_PARSERS = {
    "text": _gold_text,
    "after_marker": _gold_after_marker,
    "integer": _gold_integer,
}


def grade(text: str, gold: str, *, strict, lenient, grader, decides: str = "strict") -> Grade:
    """Grade ``text`` against ``gold``.

    ``strict`` and ``lenient`` are sequences of extractors (callables ``text -> str | None``)
    tried in order; the lenient ones are tried only when no strict one found an answer.
    ``grader`` is a callable ``(pred, gold) -> bool``. An empty or missing extraction is
    ``no_answer``; otherwise the grader decides ``correct`` or ``incorrect``.
    """
    if decides not in ("strict", "lenient"):
        raise ValueError(f"decides must be 'strict' or 'lenient', got {decides!r}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    s = _first(strict, text)
    s_out = _judge(s, gold, grader)
    if s is not None:
        le, le_out = s, s_out
    else:
        le = _first(lenient, text)
        le_out = _judge(le, gold, grader)
    return Grade(
        outcome=s_out if decides == "strict" else le_out,
        strict=s,
        lenient=le,
        strict_outcome=s_out,
        lenient_outcome=le_out,
    )


def _first(extractors, text: str) -> str | None:
    for extract in extractors:
        found = extract(text)
        if found is not None and found.strip():
            return found.strip()
    return None


def _judge(pred: str | None, gold: str, grader) -> str:
    if pred is None:
        return "no_answer"
    return "correct" if grader(pred, gold) else "incorrect"


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
    digest = hashlib.sha256(f"{salt}\x00{key}".encode("utf-8")).digest()
    index = int.from_bytes(digest, "big") % math.factorial(n)
    pool = list(range(n))
    order = []
    for k in range(n - 1, -1, -1):  # decode the factorial-base (Lehmer) digits
        digit, index = divmod(index, math.factorial(k))
        order.append(pool.pop(digit))
    return tuple(order)
