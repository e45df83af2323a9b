"""Flips: the questions a candidate lost or gained against the baseline, one by one.

A pair is *lost* when the baseline is correct and the candidate is not (``incorrect`` or
``no_answer``), *gained* the other way round; pairs with an ``error`` outcome on either side
are not flips (the gate does not count them either). :func:`find_flips` pairs on
:attr:`~qualgate.records.Record.key`, as the gate does, and keeps for each flip both outputs,
both extracted answers and the gold, so a reviewer can read what changed. It reads records
only: validate the pairing first (:func:`qualgate.verdict.pairing.pair_records`), as ``qualgate
flips`` and ``qualgate gate`` do.

Examples
--------
>>> from qualgate.records import Record
>>> def rec(qid, outcome, answer):
...     return Record(1, "r", "c", "s", "1", qid, 0, 0, outcome, "h", answer_strict=answer, gold="4")
>>> f = find_flips([rec("q1", "correct", "4"), rec("q2", "incorrect", "5")],
...                [rec("q1", "incorrect", "3"), rec("q2", "correct", "4")])
>>> [(x.kind, x.question_id, x.baseline_answer, x.candidate_answer) for x in f.flips]
[('lost', 'q1', '4', '3'), ('gained', 'q2', '5', '4')]
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, fields

from qualgate.records import Record

__all__ = ["Flip", "Flips", "find_flips", "render_csv", "render_markdown", "render_text"]


@dataclass(frozen=True)
class Flip:
    """One lost or gained pair. ``*_answer`` is the strict extraction (else the lenient one)."""

    kind: str  #: ``lost`` or ``gained``
    suite: str
    question_id: str
    seed: int
    sample_index: int
    gold: str | None
    baseline_outcome: str
    candidate_outcome: str
    baseline_answer: str | None
    candidate_answer: str | None
    baseline_output: str | None
    candidate_output: str | None

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in COLUMNS}  # dataclasses.asdict deep-copies: 10x slower


COLUMNS = tuple(f.name for f in fields(Flip))


@dataclass(frozen=True)
class Flips:
    """Every flip of one candidate against the baseline, lost ones first, in baseline order."""

    pairs: int  #: pairs compared (without the error pairs)
    flips: tuple[Flip, ...]

    @property
    def lost(self) -> tuple[Flip, ...]:
        return tuple(f for f in self.flips if f.kind == "lost")

    @property
    def gained(self) -> tuple[Flip, ...]:
        return tuple(f for f in self.flips if f.kind == "gained")

    def to_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "lost": len(self.lost),
            "gained": len(self.gained),
            "flips": [f.to_dict() for f in self.flips],
        }


def find_flips(baseline: Sequence[Record], candidate: Sequence[Record]) -> Flips:
    """The lost and gained pairs of ``candidate`` against ``baseline`` (paired on keys; records,
    or record sets read on the columnar path or not)."""
    import numpy as np
    import pyarrow as pa

    from qualgate.records.columns import columns_of, factorize, key_codes, last_row_of_key

    bt, ct = columns_of(baseline), columns_of(candidate)
    (bk, ck), _ = key_codes([bt, ct])
    n_keys = int(max(bk.max(initial=-1), ck.max(initial=-1))) + 1
    matched = last_row_of_key(ck, n_keys)[bk]  # per baseline record, its candidate record
    (b_out, c_out), _, outcomes = factorize(bt["outcome"], ct["outcome"])
    outcomes = np.array(outcomes.to_pylist(), dtype=object)
    failed_code, correct_code = np.isin(outcomes, ["error", "judge_error"]), outcomes == "correct"
    rows = np.flatnonzero(matched >= 0)
    bo, co = b_out[rows], c_out[matched[rows]]
    failed = failed_code[bo] | failed_code[co]
    rows, bo, co = rows[~failed], bo[~failed], co[~failed]
    bc, cc = correct_code[bo], correct_code[co]
    flipped = bc != cc
    lost, gained = rows[flipped & bc], rows[flipped & cc]
    flips = []
    for kind, b_rows in (("lost", lost), ("gained", gained)):
        b_take, c_take = pa.array(b_rows), pa.array(matched[b_rows])
        b = {n: bt[n].take(b_take).to_pylist() for n in _FLIP_FIELDS}
        c = {n: ct[n].take(c_take).to_pylist() for n in _FLIP_FIELDS}
        for i in range(len(b_rows)):
            flips.append(
                Flip(
                    kind,
                    b["suite"][i],
                    b["question_id"][i],
                    b["seed"][i],
                    b["sample_index"][i],
                    b["gold"][i] if b["gold"][i] is not None else c["gold"][i],
                    b["outcome"][i],
                    c["outcome"][i],
                    _answer(b, i),
                    _answer(c, i),
                    b["output"][i],
                    c["output"][i],
                )
            )
    return Flips(len(rows), tuple(flips))


_FLIP_FIELDS = (
    "suite",
    "question_id",
    "seed",
    "sample_index",
    "gold",
    "outcome",
    "answer_strict",
    "answer_lenient",
    "output",
)


def _answer(columns: dict, i: int) -> str | None:
    strict = columns["answer_strict"][i]
    return strict if strict is not None else columns["answer_lenient"][i]


def _one_line(text: str | None, width: int = 100) -> str:
    if text is None:
        return "—"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(flips: Flips, *, title: str = "", reasons=None) -> str:
    """Each flip as a short block: key, gold, both answers and both outputs (one line each).

    ``reasons``: for pairs a judge decided (:func:`qualgate.judge.judged_reasons`), key ->
    ``[(order, verdict, text)]``, shown under the flip (the judge's text, shortened)."""
    out = [f"{title}{len(flips.lost)} lost, {len(flips.gained)} gained of {flips.pairs:,} pairs"]
    for f in flips.flips:
        out += [
            "",
            f"{f.kind.upper()} {f.suite}/{f.question_id} seed {f.seed} sample {f.sample_index}: gold {f.gold!r}",
            f"  baseline  {f.baseline_outcome:<9} answer {f.baseline_answer!r}: {_one_line(f.baseline_output)}",
            f"  candidate {f.candidate_outcome:<9} answer {f.candidate_answer!r}: {_one_line(f.candidate_output)}",
        ]
        for order, verdict, text in (reasons or {}).get((f.suite, f.question_id, f.seed, f.sample_index), ()):
            out.append(f"  judge, {order.replace('_', ' ')}: {verdict}: {_one_line(text, 300)}")
    return "\n".join(out) + "\n"


def render_csv(flips: Flips) -> str:
    """One CSV row per flip with the columns of :class:`Flip` (full outputs, RFC 4180 quoting)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for f in flips.flips:
        writer.writerow(["" if v is None else v for v in (getattr(f, c) for c in COLUMNS)])
    return buf.getvalue()


def render_markdown(flips: Flips, name: str) -> str:
    """A markdown table of the flips of candidate ``name`` (answers, gold; outputs shortened)."""
    if not flips.flips:
        return f"No flips for {name} ({flips.pairs:,} pairs).\n"
    rows = [
        f"<details><summary>Flips of {name}: {len(flips.lost)} lost, {len(flips.gained)} gained of "
        f"{flips.pairs:,} pairs</summary>",
        "",
        "| flip | suite | question | seed | sample | gold | baseline answer | candidate answer | baseline output | candidate output |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- | --- | --- |",
    ]
    for f in flips.flips:
        cells = [
            f.kind,
            f.suite,
            f.question_id,
            f.seed,
            f.sample_index,
            f.gold,
            f.baseline_answer,
            f.candidate_answer,
            _one_line(f.baseline_output, 60),
            _one_line(f.candidate_output, 60),
        ]
        rows.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(rows) + "\n\n</details>\n"


def _md(value) -> str:
    return "—" if value is None else str(value).replace("|", "\\|").replace("\n", " ")
