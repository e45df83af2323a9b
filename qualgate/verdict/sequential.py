"""The sequential gate on paired records: decide as soon as the evidence allows.

Questions are taken in an *arrival order* — the seeded order in which ``qualgate run
--sequential`` schedules them (:func:`arrival_order`), or the order of the baseline's records
— and after each one the always-valid test of :func:`qualgate.stats.sequential_noninferiority`
is updated on that question's mean difference over its seeds (the question is the unit). A
candidate stops at PASS, FAIL, futility, or its question budget. With several candidates the
level is split equally among them (Bonferroni), which keeps every e-process valid under any
monitoring.

The report is written by the same writer as the fixed gate's
(:class:`qualgate.evidence.gate_report.Evidence`, ``design: sequential``), so ``qualgate check`` accepts a
sequential PASS as evidence.

Incomplete pairs: as in the fixed gate, a candidate-side ``error`` or gap on a question the
baseline answered correctly, or a baseline-side one where the candidate is not correct, counts
as lost (``missing='worst-case'``), except candidate gaps on
questions after the last one the candidate has any record for in the arrival order: those
were never asked (a sequential run stops each candidate early).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from qualgate.config.options import INCONCLUSIVE_AS, MISSING, MULTIPLICITIES, ORDERS
from qualgate.evidence.contract import Missingness, ReportSide, SequentialCandidate, SequentialSettings, Verdict
from qualgate.evidence.gate_report import decide_exit, names, now
from qualgate.formatting import fmt_points, markdown_section, text_table
from qualgate.stats import SequentialResult, sequential_noninferiority
from qualgate.stats.checks import choice, count, real
from qualgate.verdict.pairing import IMPUTED_MISSING, Pairing, Side, load_side, pair_records
from qualgate.verdict.result import GateResult

__all__ = [
    "SequentialComparison",
    "SequentialReport",
    "arrival_order",
    "question_counts",
    "question_differences",
    "run_sequential_gate",
    "render_markdown",
    "render_text",
    "sequential_gate",
]


def arrival_order(keys: Sequence[tuple[str, str]], *, seed: int) -> np.ndarray:
    """Positions of ``keys`` (``(suite, question_id)``) in their seeded arrival order.

    Each question's rank is a SHA-256 of (seed, suite, question id), so the order is the same
    on every machine and in every process, and adding or removing questions never reorders
    the others: the questions a sequential run used are a prefix of any larger run's order.
    """

    def rank(key):
        return hashlib.sha256(f"{seed}\x00{key[0]}\x00{key[1]}".encode()).hexdigest()

    return np.array(sorted(range(len(keys)), key=lambda i: rank(keys[i])), dtype=np.intp)


def question_differences(p: Pairing, order: np.ndarray) -> np.ndarray:
    """Per question, in ``order``: mean over its pairs of (candidate correct − baseline correct)."""
    diff = p.candidate_correct.astype(float) - p.baseline_correct.astype(float)
    sums = np.bincount(p.question, weights=diff, minlength=p.n_questions)
    sizes = np.bincount(p.question, minlength=p.n_questions)
    return (sums / sizes)[order]


def question_counts(p: Pairing, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per question, in ``order``: its lost and its gained pairs."""
    b, c = p.baseline_correct.astype(bool), p.candidate_correct.astype(bool)
    lost = np.bincount(p.question, weights=b & ~c, minlength=p.n_questions)
    gained = np.bincount(p.question, weights=~b & c, minlength=p.n_questions)
    return lost[order].astype(np.int64), gained[order].astype(np.int64)


@dataclasses.dataclass(frozen=True)
class SequentialComparison:
    """One candidate's sequential test against the baseline."""

    name: str
    candidate: Side
    result: SequentialResult
    pairs_per_question: int
    reason: str
    missing: Missingness | None = None  #: as :attr:`qualgate.verdict.fixed.Comparison.missing`

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.result.verdict)

    def to_candidate(self) -> SequentialCandidate:
        """This comparison as the report file holds it."""
        r = self.result
        return SequentialCandidate(
            name=self.name,
            config_id=self.candidate.config_id,
            mode=self.candidate.mode,
            verdict=self.verdict,
            reason=self.reason,
            stopped_by=r.reason,
            questions_used=r.n_questions,
            questions_available=r.n_available,
            pairs_per_question=self.pairs_per_question,
            loss=r.loss,
            loss_lower_bound=r.lower_bound,
            loss_upper_bound=r.upper_bound,
            e_pass=r.e_pass,
            e_fail=r.e_fail,
            alpha=r.alpha,
            missing=self.missing,
            side=ReportSide.of(self.candidate),
        )

    def to_dict(self) -> dict:
        return self.to_candidate().to_dict()


@dataclasses.dataclass(frozen=True, kw_only=True)
class SequentialReport(GateResult):
    """Everything ``qualgate gate --sequential`` decides (:class:`~qualgate.verdict.result.GateResult`,
    with the sequential design's settings); :meth:`evidence` is the report file."""

    DESIGN: ClassVar[str] = "sequential"
    power: float
    order: str
    order_seed: int | None
    max_questions: int | None
    comparisons: tuple[SequentialComparison, ...]
    multiplicity: str = "bonferroni"
    final: bool = True  #: the records were declared final: the budget's fixed-n test could decide

    def settings(self) -> SequentialSettings:
        return SequentialSettings(
            policy="noninferiority",
            margin=self.margin,
            alpha=self.alpha,
            power=self.power,
            order=self.order,
            order_seed=self.order_seed,
            max_questions=self.max_questions,
            multiplicity=self.multiplicity,
            inconclusive=self.inconclusive,
            missing=self.missing,
            **self.reading,
            final=self.final,
        )


def _method(r: SequentialResult, pairs_per_question: int) -> str:
    """The test behind a sequential verdict, as printed with it."""
    if r.reason in ("final", "budget", "exhausted") and r.max_questions is not None:
        final = (
            "robust clustered score test (the fixed gate's, on the same pairs)"
            if pairs_per_question > 1
            else "exact unconditional score test"
        )
        return f"budgeted design: always-valid betting test at alpha/50, then the fixed-n {final}"
    return "always-valid betting test (Waudby-Smith & Ramdas 2024)"


def _sentence(r: SequentialResult, margin: float, final: bool = True) -> str:
    level = f"{1 - r.alpha:.1%}".replace(".0%", "%")
    used = f"{r.n_questions:,} of {r.n_available:,} questions"
    if r.max_questions is not None and r.budget is not None and r.budget < r.max_questions:
        used += f" (the budget of {r.max_questions:,} is more than the questions there are: it is {r.budget:,})"
    ub, lb, m = fmt_points(r.upper_bound), fmt_points(r.lower_bound), fmt_points(margin)
    if r.reason == "pass":
        return f"after {used} the always-valid {level} upper bound of the loss ({ub} points) fell below the {m}-point margin"
    if r.reason == "fail":
        return f"after {used} the loss is significantly positive (always-valid {level} lower bound {lb} points)"
    if r.reason == "futility":
        return (
            f"stopped for futility after {used}: at the observed loss ({fmt_points(r.loss)} points) a PASS "
            f"has become unlikely (upper bound {ub} points against the {m}-point margin)"
        )
    if r.reason == "final":
        return (
            f"after {used} (the budget or all questions) the fixed-n test at the end of the budgeted design "
            f"puts the loss at most {ub} points ({1 - 0.98 * r.alpha:.1%} upper bound), below the {m}-point margin"
        )
    what = "the budget ran out" if r.reason == "budget" else "the questions ran out"
    if r.max_questions is not None and r.reason == "exhausted" and not final:
        what = "the records are not declared final (--final), so the budget's fixed-n test did not run; the questions ran out"
    return f"{what} after {used} without a decision (upper bound {ub} points against the {m}-point margin)"


def sequential_gate(
    pairings: Sequence[Pairing],
    *,
    names: Sequence[str] | None = None,
    margin: float,
    alpha: float = 0.05,
    power: float = 0.8,
    order: str = "seeded",
    seed: int = 0,
    max_questions: int | None = None,
    inconclusive: str = "inconclusive",
    missing: str = "worst-case",
    multiplicity: str = "bonferroni",
    complete: bool = True,
    final: bool = True,
) -> SequentialReport:
    """Run the sequential test for each candidate's pairing with the (same) baseline.

    Parameters
    ----------
    order : {'seeded', 'records'}
        Arrival order of the questions: :func:`arrival_order` with ``seed``, or the order in
        which they first appear in the baseline's records.
    max_questions : int, optional
        Question budget per candidate; above the questions there are, the final test runs on
        all of them (``min(max_questions, available)``, said in the reason).
    complete : bool
        The records hold every question there will be (``False`` in the rounds of ``qualgate
        run --sequential`` before the last).
    final : bool
        The records are declared final: the budget's fixed-n test may decide. ``False``
        (``qualgate gate --sequential`` without ``--final``): only the always-valid test.
    missing : {'worst-case', 'drop'}
        As :func:`qualgate.verdict.fixed.gate` (see the module docstring).
    multiplicity : {'bonferroni', 'fixed-sequence'}
        ``bonferroni``: each candidate is tested at ``alpha / len(pairings)``.
        ``fixed-sequence``: the pairings are a fixed sequence, each tested at ``alpha``, and
        every candidate but the last must have passed (:mod:`qualgate.run.sweep` stops at the
        first that does not); the chance of any false PASS stays below ``alpha``
        (Maurer, Hothorn & Lehmacher 1995; Westfall & Krishen 2001).
    Other parameters as :func:`qualgate.verdict.fixed.gate` and
    :func:`qualgate.stats.sequential_noninferiority`.
    """
    choice("order", order, ORDERS)
    choice("inconclusive", inconclusive, INCONCLUSIVE_AS)
    margin = real("margin", margin, low=0.0, high=1.0)
    alpha = real("alpha", alpha, low=0.0, high=0.5)
    seed = count("seed", seed)
    if not pairings:
        raise ValueError("pairings must hold at least one candidate's pairing")
    names = list(names) if names is not None else [p.candidate.path for p in pairings]
    choice("missing", missing, MISSING)
    choice("multiplicity", multiplicity, MULTIPLICITIES)
    each = alpha / len(pairings) if multiplicity == "bonferroni" else alpha
    comparisons = []
    for p, name in zip(pairings, names):
        p = _asked(p, order, seed)
        runs = {}
        for how, q in (("worst-case", p), ("drop", p.without_imputed())):
            positions = arrival_order(q.question_keys, seed=seed) if order == "seeded" else np.arange(q.n_questions)
            sizes = np.bincount(q.question, minlength=q.n_questions)[positions]
            runs[how] = sequential_noninferiority(
                question_differences(q, positions),
                margin=margin,
                alpha=each,
                power=power,
                max_questions=max_questions,
                pairs=sizes,
                counts=question_counts(q, positions),
                complete=complete,
                final=final,
            )
        r, w, d = runs[missing], runs["worst-case"].verdict, runs["drop"].verdict
        info = Missingness(
            imputed_as_lost=p.n_imputed, verdict_worst_case=Verdict(w), verdict_dropped=Verdict(d), incomplete=p.dropped
        )
        comparisons.append(
            SequentialComparison(
                name,
                p.candidate,
                r,
                p.max_cluster_size,
                f"{_sentence(r, margin, final)} [{_method(r, p.max_cluster_size)}]",
                info,
            )
        )
    verdicts = [c.verdict for c in comparisons]
    if multiplicity == "fixed-sequence" and any(v != Verdict.PASS for v in verdicts[:-1]):
        raise ValueError("in a fixed sequence every candidate but the last must have passed")
    overall, code = decide_exit(verdicts, inconclusive)
    return SequentialReport(
        created_at=now(),
        margin=margin,
        alpha=alpha,
        power=float(power),
        order=order,
        order_seed=seed if order == "seeded" else None,
        max_questions=max_questions,
        inconclusive=inconclusive,
        baseline=pairings[0].baseline,
        comparisons=tuple(comparisons),
        verdict=overall,
        exit_code=int(code),
        missing=missing,
        multiplicity=multiplicity,
        final=final,
    )


def _asked(p: Pairing, order: str, seed: int) -> Pairing:
    """``p`` without the imputed gaps on questions after the candidate's last record (in arrival
    order): those questions were not asked yet, not lost."""
    if not p.n_imputed:
        return p
    positions = arrival_order(p.question_keys, seed=seed) if order == "seeded" else np.arange(p.n_questions)
    rank = np.empty(p.n_questions, dtype=np.intp)
    rank[positions] = np.arange(p.n_questions)
    asked = np.bincount(p.question, weights=p.imputed != IMPUTED_MISSING, minlength=p.n_questions) > 0
    last = rank[asked].max() if asked.any() else -1
    return p.subset((p.imputed != IMPUTED_MISSING) | (rank[p.question] <= last))


def run_sequential_gate(
    baseline,
    candidates,
    *,
    on_missing: str = "error",
    max_errors: int = 0,
    drop_truncated: bool = False,
    allow_unknown: bool = False,
    baseline_config: dict | None = None,
    plan: dict | None = None,
    candidate_configs=None,
    **settings,
) -> SequentialReport:
    """Read, pair and run :func:`sequential_gate` (``settings`` are its keyword arguments);
    ``baseline_config`` and ``plan`` as :func:`qualgate.verdict.fixed.run_gate`."""
    from qualgate.verdict.fixed import _check_baseline_config, _check_candidate_configs

    if isinstance(candidates, (str, Path)):
        candidates = [candidates]
    opts = dict(drop_truncated=drop_truncated, allow_unknown=allow_unknown)
    base = load_side(baseline, **opts)
    pairings = [
        pair_records(base, load_side(c, **opts), on_missing=on_missing, max_errors=max_errors) for c in candidates
    ]
    _check_baseline_config(baseline_config, pairings[0].baseline)
    _check_candidate_configs(candidate_configs, pairings)
    report = sequential_gate(pairings, names=names(candidates), **settings)
    reading = dict(on_missing=on_missing, max_errors=max_errors, **opts)
    return dataclasses.replace(
        report,
        reading=reading,
        baseline_config=baseline_config,
        plan=plan,
        candidate_configs=None if candidate_configs is None else tuple(candidate_configs),
    )


_HEADERS = [
    "candidate",
    "questions used",
    "pairs/question",
    "loss (pts)",
    "always-valid bounds (pts)",
    "stopped by",
    "verdict",
]


def _rows(report: SequentialReport):
    return [
        [
            c.name,
            f"{c.result.n_questions:,}/{c.result.n_available:,}",
            c.pairs_per_question,
            fmt_points(c.result.loss, sign=True),
            f"[{fmt_points(c.result.lower_bound, sign=True)}, {fmt_points(c.result.upper_bound, sign=True)}]",
            c.result.reason,
            c.verdict,
        ]
        for c in report.comparisons
    ]


def _header(report: SequentialReport) -> str:
    b = report.baseline
    order = (
        f"seeded order (seed {report.order_seed})"
        if report.order == "seeded"
        else "record order (for analysis only: not evidence, qualgate check refuses it)"
    )
    budget = f", budget {report.max_questions:,} questions" if report.max_questions else ""
    split = f", alpha split over {len(report.comparisons)} candidates" if len(report.comparisons) > 1 else ""
    return (
        f"qualgate gate --sequential: non-inferiority, margin {fmt_points(report.margin)} points, "
        f"alpha {report.alpha:g}{split}, target power {report.power:g}, {order}{budget}\n"
        f"baseline: {b.path} (config {b.config_id}" + (f", mode {b.mode}" if b.mode else "") + ")"
    )


def render_text(report: SequentialReport) -> str:
    out = [_header(report), "", text_table(_rows(report), _HEADERS), ""]
    out += [f"{c.name}: {c.verdict}: {c.reason}." for c in report.comparisons]
    out.append(f"verdict: {report.verdict} (exit {report.exit_code})")
    return "\n".join(out) + "\n"


def render_markdown(report: SequentialReport) -> str:
    items = [f"**{c.name}**: {c.verdict}: {c.reason}." for c in report.comparisons]
    return markdown_section(
        f"qualgate gate --sequential: {report.verdict}", _header(report), _rows(report), _HEADERS, items
    )
