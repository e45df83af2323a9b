"""The demo's synthetic task: multi-step integer arithmetic with a worked chain of thought.

A question is a flat expression of two or three terms (by default), each a number or a product
of two numbers, joined by ``+`` and ``-``: ``What is 17 + 3 * 14 - 9?``. Its chain of thought works
the products first, then the sums left to right, one step per sentence, and ends in a fixed
format::

    First, 3*14=42. Then 42+17=59. So 59-9=50. The answer is 50.

Several continuations are equally correct at some positions (the *ambiguous* positions): the
operands of ``+`` and ``*`` may come in either order, independent products may be worked in
either order, and each step opens with one of a few connectives. Everywhere else exactly one
token is correct: the digits of every intermediate result and of the answer. A verifier that
keeps a drafter's token where the target is unsure therefore costs nothing at the first
kind of position and can cost the answer at the second.

Questions are split into disjoint sets by a stable hash of their text (``test``: about one
in eight, ``val``: another eighth, ``train``: the rest), so that training data never contain
an evaluation question, and no question appears twice in one set. Every row is drawn from its
own generator seeded by ``(split, seed, index)``: ids and rows are identical across
processes, machines and Python versions, and the first ``n`` rows do not depend on how many
are asked for.
"""

from __future__ import annotations

import random
import re
import zlib

__all__ = [
    "FIRST_OPENERS",
    "OPENERS",
    "SPLITS",
    "SYSTEM_PROMPT",
    "chains",
    "continuations",
    "extract_answer",
    "generate",
    "messages",
    "parse",
    "solve",
]

#: The system message the demo models were trained with (the suite must render the same).
SYSTEM_PROMPT = "End with: The answer is N."
#: How the first step of a chain may open.
FIRST_OPENERS = ("First, ", "")
#: How every later step may open.
OPENERS = ("Then ", "Next, ", "So ")
SPLITS = ("train", "val", "test")
_SPLIT_OF_BUCKET = {0: "test", 1: "val"}  # crc32(question) % 8; other buckets are train

_QUESTION = re.compile(r"What is (.+)\?")
_STRICT = re.compile(r"The answer is (-?\d+)")


def _split_of(question: str) -> str:
    return _SPLIT_OF_BUCKET.get(zlib.crc32(question.encode()) % 8, "train")


def _terms(rng: random.Random, *, min_terms: int, max_terms: int, p_product: float, max_addend: int, max_factor: int):
    """Draw signed terms (sign, factors) whose running total never goes negative."""
    while True:
        terms = []
        for i in range(rng.randint(min_terms, max_terms)):
            sign = "+" if i == 0 else rng.choice("+-")
            if rng.random() < p_product:
                big, small = rng.randint(10, max_factor), rng.randint(2, 9)
                factors = (big, small) if rng.random() < 0.5 else (small, big)
            else:
                factors = (rng.randint(1, max_addend),)
            terms.append((sign, factors))
        total, ok = 0, True
        for sign, factors in terms:
            total += _value(factors) if sign == "+" else -_value(factors)
            ok = ok and total >= 0
        if ok:
            return terms


def _value(factors) -> int:
    out = 1
    for f in factors:
        out *= f
    return out


def _question(terms) -> str:
    parts = []
    for i, (sign, factors) in enumerate(terms):
        if i:
            parts.append(sign)
        parts.append(" * ".join(map(str, factors)))
    return f"What is {' '.join(parts)}?"


def parse(question: str):
    """The signed terms of a question: a list of ``(sign, factors)`` pairs.

    >>> parse("What is 17 + 3 * 14 - 9?")
    [('+', (17,)), ('+', (3, 14)), ('-', (9,))]
    """
    m = _QUESTION.fullmatch(question.strip())
    if m is None:
        raise ValueError(f"question must look like 'What is <expression>?', got {question!r}")
    terms, sign, factors = [], "+", []
    for token in m.group(1).split() + ["+"]:
        if token in ("+", "-"):
            terms.append((sign, tuple(factors)))
            sign, factors = token, []
        elif token != "*":
            factors.append(int(token))
    return terms


def solve(question: str) -> int:
    """The value of a question's expression.

    >>> solve("What is 17 + 3 * 14 - 9?")
    50
    """
    return sum(_value(f) if s == "+" else -_value(f) for s, f in parse(question))


def _chain(terms, *, product_order, swaps, openers) -> str:
    steps, values = [], [_value(f) for _, f in terms]
    it_swaps = iter(swaps)
    for i in product_order:
        a, b = terms[i][1]
        if next(it_swaps):
            a, b = b, a
        steps.append(f"{a}*{b}={a * b}")
    total = values[0]
    for (sign, _), v in zip(terms[1:], values[1:]):
        if sign == "+":
            a, b = (v, total) if next(it_swaps) else (total, v)
            total += v
            steps.append(f"{a}+{b}={total}")
        else:
            steps.append(f"{total}-{v}={total - v}")
            total -= v
    text = " ".join(f"{o}{s}." for o, s in zip(openers, steps))
    return f"{text} The answer is {total}."


def _shape(terms):
    """(indices of product terms, number of commutative steps, number of steps)."""
    products = [i for i, (_, f) in enumerate(terms) if len(f) == 2]
    n_plus = sum(1 for s, _ in terms[1:] if s == "+")
    return products, len(products) + n_plus, len(products) + len(terms) - 1


def _sample_chain(terms, rng: random.Random) -> str:
    products, n_swaps, n_steps = _shape(terms)
    order = rng.sample(products, len(products))
    swaps = [rng.random() < 0.5 for _ in range(n_swaps)]
    openers = [rng.choice(FIRST_OPENERS)] + [rng.choice(OPENERS) for _ in range(n_steps - 1)]
    return _chain(terms, product_order=order, swaps=swaps, openers=openers)


def _walk(terms, prefix: str, *, early: bool):
    """Depth-first walk of every correct chain, pruned to those consistent with ``prefix``.

    With ``early``, a branch stops as soon as its text runs one character past ``prefix``
    (enough to know the next character); otherwise complete chains are yielded.
    """
    products, _, n_steps = _shape(terms)
    values = [_value(f) for _, f in terms]

    def visit(text, step, remaining, index, total):
        if not (text.startswith(prefix) or prefix.startswith(text)):
            return
        if early and len(text) > len(prefix):
            yield text
            return
        if step == n_steps:
            yield f"{text} The answer is {total}."
            return
        options = []  # (step text, remaining products, next additive index, total)
        if remaining:
            for i in remaining:
                a, b = terms[i][1]
                rest = tuple(j for j in remaining if j != i)
                for x, y in dict.fromkeys(((a, b), (b, a))):
                    options.append((f"{x}*{y}={a * b}", rest, index, total))
        elif terms[index][0] == "+":
            v = values[index]
            for x, y in dict.fromkeys(((total, v), (v, total))):
                options.append((f"{x}+{y}={total + v}", (), index + 1, total + v))
        else:
            v = values[index]
            options.append((f"{total}-{v}={total - v}", (), index + 1, total - v))
        openers = FIRST_OPENERS if step == 0 else OPENERS
        for opener in openers:
            for body, rest, nxt, new_total in options:
                sep = " " if step else ""
                yield from visit(f"{text}{sep}{opener}{body}.", step + 1, rest, nxt, new_total)

    yield from visit("", 0, tuple(products), 1, values[0])


def chains(question: str, *, limit: int = 100_000) -> list[str]:
    """Every correct chain of thought for a question, in a fixed order.

    They differ only at the ambiguous positions (operand order of ``+`` and ``*``, order of
    the products, connectives); the model is trained on them with equal weight per choice.
    Their number grows exponentially with the number of steps: more than ``limit`` raises
    ``ValueError`` (use :func:`continuations` on long questions).

    >>> len(chains("What is 3 * 14 + 17?"))
    24
    """
    out = []
    for chain in _walk(parse(question), "", early=False):
        out.append(chain)
        if len(out) > limit:
            raise ValueError(f"question has more than limit={limit} chains: {question!r}")
    return list(dict.fromkeys(out))


def continuations(question: str, prefix: str) -> set[str]:
    """The characters that may follow ``prefix`` in a correct chain of thought.

    An empty set means ``prefix`` is not the start of any correct chain; ``""`` in the set
    means ``prefix`` is itself a complete correct chain.

    >>> sorted(continuations("What is 17 + 42?", "First, "))
    ['1', '4']
    >>> continuations("What is 17 + 42?", "First, 17+42=")
    {'5'}
    """
    out = set()
    for text in _walk(parse(question), prefix, early=True):
        out.add(text[len(prefix)] if len(text) > len(prefix) else "")
    return out


def messages(question: str) -> list[dict]:
    """The chat messages of a question, as the demo models were trained on them."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]


def extract_answer(text: str) -> int | None:
    """The integer after the last ``The answer is`` of ``text`` (strict format), or None.

    The quick evaluations of :mod:`qualgate.demo.train` use it; the suite grades with the
    equivalent ``after_marker`` extractor of :mod:`qualgate.graders`.
    """
    found = _STRICT.findall(text)
    return int(found[-1]) if found else None


def generate(
    *,
    n: int,
    seed: int,
    split: str = "test",
    min_terms: int = 2,
    max_terms: int = 3,
    p_product: float = 0.4,
    max_addend: int = 99,
    max_factor: int = 99,
) -> list[dict]:
    """Generate ``n`` questions of one split.

    Parameters
    ----------
    n : int
        Number of rows (>= 0).
    seed : int
        Seed of the set; rows ``(split, seed, i)`` are the same everywhere.
    split : {'test', 'val', 'train'}
        Which of the disjoint question sets to draw from.
    min_terms, max_terms : int
        Number of terms of the expression (each a number or a product).
    p_product : float
        Probability that a term is a product of a number in ``[10, max_factor]`` and a digit
        in ``[2, 9]``.
    max_addend : int
        Largest plain number.

    Returns
    -------
    list of dict
        Rows with ``id`` (``"{split}-{seed}-{i}"``), ``question``, ``answer`` (the integer
        answer as a string), ``reference`` (one correct chain of thought, drawn from the
        same distribution as the training data) and ``steps``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if not 2 <= min_terms <= max_terms:
        raise ValueError(
            f"min_terms and max_terms must satisfy 2 <= min_terms <= max_terms, got {min_terms!r} and {max_terms!r}"
        )
    if not 0.0 <= p_product <= 1.0:
        raise ValueError(f"p_product must be in [0, 1], got {p_product!r}")
    if max_addend < 1:
        raise ValueError(f"max_addend must be >= 1, got {max_addend!r}")
    if max_factor < 10:
        raise ValueError(f"max_factor must be >= 10, got {max_factor!r}")
    rows, seen = [], set()
    for i in range(n):
        rng = random.Random(f"qualgate-demo:{split}:{seed}:{i}")
        while True:
            terms = _terms(
                rng,
                min_terms=min_terms,
                max_terms=max_terms,
                p_product=p_product,
                max_addend=max_addend,
                max_factor=max_factor,
            )
            question = _question(terms)
            if _split_of(question) == split and question not in seen:
                seen.add(question)
                break
        rows.append(
            {
                "id": f"{split}-{seed}-{i}",
                "question": question,
                "answer": str(solve(question)),
                "reference": _sample_chain(terms, rng),
                "steps": _shape(terms)[2],
            }
        )
    return rows
