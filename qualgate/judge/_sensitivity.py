"""How much of a real loss a pairwise judge sees: its sensitivity, measured on planted pairs.

A judge that gives a random verdict, or favours a position, on *every* pair turns some real
losses into ties: the net loss it measures is ``a`` times the true one, ``a < 1``
(``benchmarks/judge_gate_size.py``: with a position bias of 0.4 and 30 % random verdicts
``a`` is about 0.41, and a gate at a 5-point margin on the judge's verdicts passes a true
5-point loss 35 % of the time instead of 5 %). The A/A decisive rate cannot show it: between
equivalent answers such a judge is as noisy as one that is reliable where an answer is
better.

So ``qualgate judge --sensitivity N`` also asks the judge, in both orders and with the same
template, about ``N`` **planted pairs** whose better side is known by construction: one of
the baseline's own answers against a degraded copy of it. Two degradations, alternating over
a seeded sample of the baseline's answers:

- ``truncated``: the answer cut to its first third (at a word boundary);
- ``other_answer``: the baseline's answer to another question of the sample.

A planted pair is *detected* when the original wins in both orders, *inverted* when the
degraded copy does, *missed* otherwise (a tie, orders that disagree, or a ``judge_error``:
an unreadable reply lowers the sensitivity, it never raises it). The sensitivity is
``a = P(detected) - P(inverted)``: under a judge whose errors do not depend on which side
is better, the judged net loss is ``a`` times the true net loss (equivalent pairs add as
many lost as gained pairs in expectation, since both orders are asked).

The gate uses a lower confidence bound ``a_L`` (Clopper-Pearson for ``P(detected)`` and for
``P(inverted)``, each at ``(1 - confidence_level) / 2``, combined by Bonferroni: exact, no
approximation): a margin ``m`` of true loss becomes ``a_L * m`` of judged loss, and the gate
runs at ``alpha - gamma`` with ``gamma = 1 - confidence_level`` (the bound is floored to two
decimals first: a smaller margin, so no less valid, and a margin from a short list), so its size against the true
loss is at most ``(alpha - gamma) + gamma = alpha`` whenever the planted pairs are as hard for
the judge as the real differences are (:func:`judged_gate`).

What a planted pair cannot promise: a real loss can be subtler than a truncated or foreign
answer, and a judge can detect the planted ones more easily than the real ones; then ``a_L``
overstates the sensitivity and the correction is too small. The report says which
degradations were measured; ``docs/traffic.md`` says what that covers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.errors import DataError

__all__ = [
    "KINDS",
    "JudgedGate",
    "Sensitivity",
    "degrade",
    "is_pairwise_record",
    "judged_gate",
    "planted_pairs",
    "sensitivity_lower_bound",
]

#: the degradations, in the order they alternate over the sample
KINDS = ("truncated", "other_answer")
#: an answer shorter than this is not truncated (a third of it would be a word or two)
MIN_CHARS = 60
DEFAULT_CONFIDENCE = 0.995
#: the ``answer_strict`` of a record ``qualgate judge`` wrote: the two orders' verdicts
_PAIRWISE_LABEL = re.compile(r"^(identical|(baseline|candidate|tie|error),(baseline|candidate|tie|error))$")


def sensitivity_lower_bound(detected: int, inverted: int, n: int, confidence_level: float = DEFAULT_CONFIDENCE):
    """Lower confidence bound of ``P(detected) - P(inverted)`` from ``n`` planted pairs.

    Clopper-Pearson's one-sided lower bound of ``P(detected)`` and upper bound of
    ``P(inverted)``, each at ``(1 - confidence_level) / 2`` (Bonferroni), so the bound holds
    with probability at least ``confidence_level`` for any judge.

    >>> round(sensitivity_lower_bound(180, 0, 200, 0.995), 4)  # 0.8265 - (1 - 0.0025 ** (1 / 200))
    0.797
    >>> sensitivity_lower_bound(0, 0, 0)
    -1.0
    """
    from qualgate.stats import discordance_interval

    for name, v in (("detected", detected), ("inverted", inverted), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    if detected + inverted > n:
        raise ValueError(f"detected + inverted ({detected + inverted}) exceeds n ({n})")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if n == 0:
        return -1.0
    # a two-sided Clopper-Pearson interval at ``confidence_level`` holds (1 - level) / 2 in each
    # tail: its low end for P(detected), its high end for P(inverted)
    low = discordance_interval(detected, n, confidence_level=confidence_level).low
    high = discordance_interval(inverted, n, confidence_level=confidence_level).high
    return low - high


@dataclass(frozen=True)
class Sensitivity:
    """The planted pairs' counts (``judge.json``'s ``sensitivity``)."""

    pairs: int
    detected: int  #: the original won in both orders
    inverted: int  #: the degraded copy won in both orders
    missed: int  #: anything else: a tie, orders that disagree, a judge_error
    judge_error: int  #: of the missed: an unreadable reply or a failed request
    by_kind: dict[str, dict[str, int]]  #: per degradation: pairs, detected, inverted
    confidence_level: float = DEFAULT_CONFIDENCE

    @property
    def estimate(self) -> float | None:
        return (self.detected - self.inverted) / self.pairs if self.pairs else None

    @property
    def lower_bound(self) -> float:
        return sensitivity_lower_bound(self.detected, self.inverted, self.pairs, self.confidence_level)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"estimate": self.estimate, "lower_bound": self.lower_bound}

    @classmethod
    def from_dict(cls, d, *, file=None) -> Sensitivity:
        names = [f.name for f in dataclasses.fields(cls)]
        try:
            s = cls(**{k: d[k] for k in names})
            ints = (s.pairs, s.detected, s.inverted, s.missed, s.judge_error)
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
                raise TypeError
            if s.detected + s.inverted + s.missed != s.pairs or s.judge_error > s.missed:
                raise ValueError
            bound = s.lower_bound
        except (KeyError, TypeError, ValueError):
            raise DataError(
                "not a sensitivity measurement of qualgate judge (counts missing or inconsistent)",
                file=file,
                field="sensitivity",
            ) from None
        if d.get("lower_bound") is not None and abs(d["lower_bound"] - bound) > 1e-9:
            raise DataError(
                "the stored lower bound is not the one its counts give", file=file, field="sensitivity.lower_bound"
            )
        return s


def degrade(kind: str, answer: str, other: str) -> str:
    """The degraded copy of ``answer``: its first third (``truncated``) or ``other``."""
    if kind == "truncated":
        cut = answer[: len(answer) // 3]
        space = cut.rfind(" ")
        return cut[:space] if space > 0 else cut
    if kind == "other_answer":
        return other
    raise ValueError(f"unknown degradation {kind!r}; known: {', '.join(KINDS)}")


def _rank(seed: int, key) -> str:
    return hashlib.sha256(f"{seed}\x1f{json.dumps(list(key), default=str)}".encode()).hexdigest()


#: planted pairs asked for by default (fewer when the baseline has fewer eligible answers)
DEFAULT_PAIRS = 200


def planted_pairs(records: Sequence, n: int | None, *, seed: int = 0) -> list[tuple[Any, str, str, str]]:
    """``(key, kind, original, degraded)`` for ``n`` planted pairs built from ``records``.

    ``n`` None: :data:`DEFAULT_PAIRS`, or as many as there are eligible records (none when
    fewer than 2). The sample is the ``n`` records with the smallest ``sha256(seed, key)`` among those with an
    output of at least :data:`MIN_CHARS` characters and no ``error`` (one per question); the
    kinds alternate in that order, and ``other_answer`` takes the next sampled answer that is
    a different text. Fewer eligible records than ``n`` is a :class:`DataError`.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"n must be a non-negative integer or None, got {n!r}")
    seen, pool = set(), []
    for r in sorted(records, key=lambda r: _rank(seed, r.key)):
        q = r.key[:2]
        if q in seen or r.outcome == "error" or not isinstance(r.output, str) or len(r.output) < MIN_CHARS:
            continue
        seen.add(q)
        pool.append(r)
    if n is None:
        n = min(DEFAULT_PAIRS, len(pool)) if len(pool) >= 2 else 0
    if n == 0:
        return []
    if len(pool) < max(n, 2):
        raise DataError(
            f"{n} planted pairs need {max(n, 2)} questions whose baseline answer has at least {MIN_CHARS} "
            f"characters; the baseline has {len(pool)} (lower --sensitivity)",
            field="sensitivity",
            value=n,
        )
    out = []
    for i, r in enumerate(pool[:n]):
        kind = KINDS[i % len(KINDS)]
        other = next(o.output for o in pool[i + 1 :] + pool[:i] if o.output != r.output)
        out.append((r.key, kind, r.output, degrade(kind, r.output, other)))
    return out


def is_pairwise_record(row: dict) -> bool:
    """Whether a record (as a dict) was written by ``qualgate judge``."""
    by = row.get("decided_by")
    label = row.get("answer_strict")
    return (
        isinstance(by, str)
        and by.startswith("judge:")
        and isinstance(label, str)
        and bool(_PAIRWISE_LABEL.match(label))
    )


def _first_record(path: Path) -> dict | None:
    """The first record of a JSON Lines file (one bounded line), or None for other files."""
    if path.suffix != ".jsonl":
        return None
    with open(path, "rb") as fh:
        for raw in iter(lambda: fh.readline(1 << 20), b""):
            if raw.strip():
                try:
                    row = json.loads(raw)
                except ValueError:
                    return None  # the gate's strict reader names the line
                return row if isinstance(row, dict) else None
    return None


def _judged_root(path) -> tuple[Path, str] | None:
    """``(OUT, judge id)`` when ``path`` holds records ``qualgate judge`` wrote into OUT, else None."""
    p = Path(path)
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    for f in filter(Path.is_file, files):  # a FIFO or a directory: never opened here, the reader names it
        row = _first_record(f)
        if row is not None and is_pairwise_record(row):
            return f.resolve().parent.parent, str(row.get("run_id"))
    return None


@dataclass(frozen=True)
class JudgedGate:
    """What :func:`judged_gate` decided: the margin and level the gate runs at, and why."""

    margin: float
    alpha: float
    note: str
    sensitivity: Sensitivity | None = None


def judged_gate(
    baseline,
    candidates: Sequence,
    margin: float | None,
    alpha: float,
    *,
    judge_units: bool = False,
    max_errors: int = 0,
):
    """The gate's margin and level for records ``qualgate judge`` wrote, or None for others.

    The margin is meant in true loss: it becomes ``lower_bound * margin`` of judged loss and the
    level ``alpha - (1 - confidence_level)`` (module docstring). ``judge_units``: the margin is
    meant in the judge's own verdicts (no correction; the note says so), refused when the
    measured sensitivity is 0 or less. ``max_errors``: the gate's ``--max-errors`` (judge errors
    it counts as lost: the note says how many; refused when they outnumber the pairs the judge
    decided). Refused (DataError):
    judged records mixed with others, several candidates, baseline and candidate from different
    ``qualgate judge`` runs, a missing or changed ``judge.json``, no sensitivity measured, a
    lower bound at or below 0, a bound whose level leaves no alpha.
    """
    roots = [_judged_root(p) for p in (baseline, *candidates)]
    if not any(roots):
        return None
    if not all(roots) or len(candidates) != 1 or roots[0] != roots[1]:
        raise DataError(
            "records qualgate judge wrote are gated as one pair: OUT/baseline against OUT/candidate of one "
            "judge run (not mixed with other records, not several candidates)",
            file=str(candidates[0] if roots[0] else baseline),
        )
    root, judge_id = roots[0]
    doc_path = root / "judge.json"
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise DataError(
            "judged records need the judge.json qualgate judge wrote beside them (it holds the judge's "
            "measured sensitivity)",
            file=str(doc_path),
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("kind") != "qualgate.judged_pairs"
        or (doc.get("judge") or {}).get("judge_id") != judge_id
    ):
        raise DataError(f"not the judge.json of judge {judge_id}", file=str(doc_path), field="judge.judge_id")
    _check_digests(root, doc, doc_path)
    if margin is None:
        raise DataError("judged records are gated at one --margin (no --policy-file)", file=str(doc_path))
    counts = doc.get("counts") or {}
    errors, lost, gained = (counts.get(k, 0) for k in ("judge_error", "lost", "gained"))
    if max_errors and errors and errors > lost + gained:
        raise DataError(
            f"{errors} of {counts.get('pairs')} pairs are judge errors, more than the {lost + gained} pairs the "
            "judge decided: counted as lost they would decide the gate (a judge that never ran would FAIL the "
            "candidate); fix the judge and run qualgate judge again (it re-asks only what failed)",
            file=str(doc_path),
            field="counts.judge_error",
            value=errors,
        )
    counted = (
        f"; {errors} of {counts.get('pairs')} pairs are judge errors, counted as lost (--max-errors)"
        if max_errors and errors
        else ""
    )
    if judge_units:
        note = (
            f"judge {judge_id}: the margin is in the judge's own verdicts (--judge-units): a judge that is "
            "noisy on every pair sees less than the true loss, so this bounds the loss as the judge sees it"
        )
        if doc.get("sensitivity"):
            s = Sensitivity.from_dict(doc["sensitivity"], file=str(doc_path))
            if s.estimate is None or s.estimate <= 0:
                raise DataError(
                    f"the judge detected {s.detected} and inverted {s.inverted} of {s.pairs} planted pairs "
                    f"(sensitivity {s.estimate if s.estimate is not None else 'unmeasured'}): it does not tell an "
                    "answer from a degraded copy of it, so a gate in its own verdicts would pass any loss",
                    file=str(doc_path),
                    field="sensitivity",
                )
            note += (
                f"; measured sensitivity {s.estimate:.2f} ({s.detected} of {s.pairs} planted pairs detected, "
                f"{s.inverted} inverted): a true loss of L shows as about {s.estimate:.2f} L in its verdicts"
                + (", so a loss much larger than the margin can pass" if s.estimate < 0.5 else "")
            )
        return JudgedGate(margin, alpha, note + counted)
    if not doc.get("sensitivity"):
        raise DataError(
            "the judge's sensitivity was not measured: the loss it reports may be a fraction of the true "
            "loss. Run qualgate judge again with --sensitivity N (the cache answers what was asked before), "
            "or gate with --judge-units to bound the loss in the judge's own verdicts",
            file=str(doc_path),
            field="sensitivity",
        )
    s = Sensitivity.from_dict(doc["sensitivity"], file=str(doc_path))
    gamma = 1 - s.confidence_level
    if gamma >= alpha:
        raise DataError(
            f"the sensitivity bound's level {s.confidence_level:g} leaves no alpha for the gate (alpha {alpha:g})",
            file=str(doc_path),
            field="sensitivity.confidence_level",
        )
    a = math.floor(s.lower_bound * 100) / 100  # floored: conservative, and a margin from a short list
    if a <= 0:
        raise DataError(
            f"the judge cannot be shown to tell an answer from a degraded copy of it ({s.detected} of {s.pairs} "
            f"planted pairs detected, {s.inverted} inverted; lower bound {s.lower_bound:.3f}): no pairwise gate on its "
            "verdicts can bound the true loss",
            file=str(doc_path),
            field="sensitivity",
        )
    note = (
        f"judge {judge_id}: sensitivity >= {a:.2f} ({s.confidence_level:.1%} lower bound {s.lower_bound:.4f}, "
        f"floored; {s.detected} of "
        f"{s.pairs} planted pairs detected, {s.inverted} inverted): a margin of {margin:.2%} true loss is "
        f"{a * margin:.2%} of judged loss, gated at alpha {alpha - gamma:.4g} (alpha {alpha:g} less "
        f"{gamma:.4g} for the bound){counted}"
    )
    return JudgedGate(a * margin, alpha - gamma, note, s)


def _check_digests(root: Path, doc: dict, doc_path: Path) -> None:
    from qualgate.verdict.pairing import sha256_file

    digests = doc.get("records_sha256")
    if not isinstance(digests, dict) or set(digests) != {"baseline", "candidate"}:
        raise DataError(
            "judge.json names no digests of the records it wrote (written by an earlier qualgate): judge again",
            file=str(doc_path),
            field="records_sha256",
        )
    for side, digest in digests.items():
        f = root / doc["records"][side]
        if not f.is_file() or sha256_file(f) != digest:
            raise DataError("the judged records changed after qualgate judge wrote them", file=str(f), field="sha256")
