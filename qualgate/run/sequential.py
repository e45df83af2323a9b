"""``qualgate run --sequential``: run a plan in rounds of questions and stop each candidate as
soon as the sequential gate (:mod:`qualgate.verdict.sequential`) decides.

:func:`qualgate.run.runner.run_plan` calls :func:`_run_sequential` with its config runner (the
object that decodes work items under a config and appends their records), so this module
schedules the rounds and tests after each, and never decodes anything itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.config.options import MULTIPLICITIES
from qualgate.errors import DataError, ExitCode
from qualgate.evidence.contract import Verdict
from qualgate.run.manifest import _provenance, describe_decoding

__all__ = ["SequentialSettings"]


@dataclass(frozen=True)
class SequentialSettings:
    """How ``qualgate run --sequential`` schedules and stops (see :func:`qualgate.run.runner.run_plan`).

    ``batch_questions`` questions (with all their seeds and samples) are run per round, the
    baseline first; after each round every candidate still running is tested with
    :func:`qualgate.verdict.sequential.sequential_gate` and stops at PASS, FAIL, futility or
    ``max_questions``.
    """

    batch_questions: int = 100
    max_questions: int | None = None
    power: float = 0.8
    #: ``bonferroni``: every candidate runs in the same rounds, each tested at alpha / m;
    #: ``fixed-sequence``: the candidates run one after another in the plan's order, each
    #: tested at alpha, and the run stops at the first that does not PASS (``qualgate sweep``)
    multiplicity: str = "bonferroni"

    def __post_init__(self):
        for name in ("batch_questions", "max_questions"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if not 0 < self.power < 1:
            raise ValueError(f"power must be in (0, 1), got {self.power!r}")
        if self.multiplicity not in MULTIPLICITIES:
            raise ValueError(f"multiplicity must be one of {list(MULTIPLICITIES)}, got {self.multiplicity!r}")


def _sequential_report(plan, out, settings, order_seed, max_errors, candidates=None, complete=True):
    from qualgate.verdict.pairing import load_side, pair_records
    from qualgate.verdict.sequential import sequential_gate

    records = Path(out) / "records"
    base = load_side(records / f"{plan.baseline}.jsonl")
    candidates = list(plan.candidates if candidates is None else candidates)
    pairings = [
        pair_records(base, load_side(records / f"{c}.jsonl"), on_missing="drop", max_errors=max_errors)
        for c in candidates
    ]
    report = sequential_gate(
        pairings,
        names=candidates,
        margin=plan.margin,
        alpha=plan.alpha,
        power=settings.power,
        order="seeded",
        seed=order_seed,
        max_questions=settings.max_questions,
        inconclusive=plan.inconclusive,
        multiplicity=settings.multiplicity,
        complete=complete,
    )
    reading = {"on_missing": "drop", "max_errors": max_errors, "drop_truncated": False, "allow_unknown": False}
    provenance = _provenance(plan, out)
    provenance["candidate_configs"] = tuple(describe_decoding(plan.configs[c]) for c in candidates)
    return dataclasses.replace(report, reading=reading, **provenance)


def _run_sequential(plan, out, work, runner, settings, order_seed, max_errors, log):
    """Rounds of ``settings.batch_questions`` questions until every candidate has stopped.

    With ``settings.multiplicity == 'fixed-sequence'`` the candidates run one after another
    in the plan's order (each with the baseline, whose records are reused) and the run stops
    at the first candidate that does not PASS: the rest are never run.
    """
    if plan.policy != "noninferiority":
        raise DataError(
            f"a sequential run decides non-inferiority; the plan's gate policy is {plan.policy!r}",
            file=plan.path,
            field="gate.policy",
            value=plan.policy,
        )
    if not plan.candidates:
        raise DataError("a sequential run needs at least one candidate", file=plan.path, field="candidates")
    per_question = len(plan.seeds) * plan.samples
    questions = len(work) // per_question
    if settings.max_questions is not None:
        questions = min(questions, settings.max_questions)
    fixed = settings.multiplicity == "fixed-sequence"
    groups = [[c] for c in plan.candidates] if fixed else [list(plan.candidates)]
    stops: dict[str, dict[str, Any]] = {}
    tested: list[str] = []
    report = None
    try:
        for group in groups:
            tested += group
            report = _sequential_rounds(
                plan,
                out,
                work[: questions * per_question],
                runner,
                settings,
                order_seed,
                max_errors,
                log,
                group,
                per_question,
                stops,
                tested,
            )
            if isinstance(report, dict):  # the records cannot be paired: the gate refuses them
                return None, report
            if any(stops[c]["verdict"] != Verdict.PASS for c in group):
                break
    finally:
        runner.close_all()
    runner.manifest["sequential"] = {
        "batch_questions": settings.batch_questions,
        "max_questions": settings.max_questions,
        "power": settings.power,
        "order_seed": order_seed,
        "questions_available": len(work) // per_question,
        "multiplicity": settings.multiplicity,
        "not_run": [c for c in plan.candidates if c not in tested],
        "stops": stops,
    }
    return report, {
        "status": "ok",
        "file": "gate.json",
        "design": "sequential",
        "verdict": report.verdict,
        "exit_code": int(report.exit_code),
        "verdicts": {c.name: c.verdict for c in report.comparisons},
    }


def _sequential_rounds(
    plan, out, work, runner, settings, order_seed, max_errors, log, active, per_question, stops, tested
):
    """Rounds for the baseline and the ``active`` candidates until each has stopped (entered in
    ``stops``); returns the last report over the ``tested`` candidates, or the refusal summary
    (a dict) when the records cannot be paired."""
    active = list(active)
    questions = len(work) // per_question
    report = None
    for first in range(0, questions, settings.batch_questions):
        last = min(first + settings.batch_questions, questions)
        items = work[first * per_question : last * per_question]
        for name in [plan.baseline, *active]:
            runner.run(name, items)
        try:
            # a budget above the plan's questions: the final test runs when they run out
            report = _sequential_report(plan, out, settings, order_seed, max_errors, tested, last == questions)
        except DataError as exc:
            return {"status": "refused", "exit_code": int(ExitCode.DATA), "message": str(exc)}
        for c in report.comparisons:
            if c.name in active and (c.result.reason != "exhausted" or last == questions):
                active.remove(c.name)
                stops[c.name] = {
                    "after_questions": last,
                    "verdict": c.verdict,
                    "stopped_by": c.result.reason,
                    "questions_used": c.result.n_questions,
                }
                runner.close(c.name)
                log(f"{c.name}: {c.verdict} ({c.result.reason}) after {c.result.n_questions} questions")
        if not active:
            break
    return report
