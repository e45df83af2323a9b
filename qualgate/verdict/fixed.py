"""The gate: does a candidate configuration lose answer quality against the baseline?

Layers, each usable on its own (the sequential gate reuses the lower ones):

1. :mod:`qualgate.records` / :mod:`qualgate.verdict.pairing` read and pair the records;
2. :func:`~qualgate.verdict.scope.analyze` computes the statistics of one comparison scope (a
   suite, or all suites pooled) from a :class:`~qualgate.stats.ClusteredTable`
   (:mod:`qualgate.verdict.scope`);
3. :func:`~qualgate.verdict.scope.decide` is the decision rule, a pure function of two p-values
   (vectorised);
4. :func:`gate` applies it to several candidates with Holm's adjustment and sets the exit
   code; :func:`run_gate` goes from paths to a :class:`GateReport`;
5. :mod:`qualgate.report.gate_text` renders it; ``GateReport.evidence()`` is the report file
   (:mod:`qualgate.evidence.gate_report`, the one writer and reader of gate reports).

The A/A calibration of two runs that should be equivalent is :mod:`qualgate.verdict.calibration`.

Policies
--------
``noninferiority`` (default), three outcomes:

- **PASS** when the one-sided upper confidence bound of the loss (level 1 − alpha) is below
  the margin, i.e. the test of H0: loss >= margin rejects (p < alpha): with one pair per
  question the exact unconditional test (``ONE_SEED_METHOD``; size <= alpha at every n; above
  2,000 pairs the continuity-corrected score test, size enumerated), with
  several the robust clustered score test (monotone, conservative at small n), with suites
  weighted equally the stratified score test. The test used is named in every verdict;
- **FAIL** when the loss is significantly positive (one-sided exact test, p <= alpha) and the
  margin cannot be excluded (which includes a lower bound of the loss at or above the margin);
- **INCONCLUSIVE** otherwise, with the number of further questions that would be needed at
  the observed discordance (and observed loss, if below the margin) for 80% power.

``mcnemar``: **FAIL** when the one-sided exact McNemar test shows a significant loss, else
**PASS**, with the power to detect a loss of the margin beside it and a warning below 80%.

Several seeds (or samples) per question: when any question has more than one pair, the
question is the unit: the loss test becomes the exact sign-flip test on per-question
differences and the bound and interval use the null-centred cluster-robust variance
(:mod:`qualgate.stats._cluster_variance`). Several suites: each suite is reported, and the decision
is taken on all suites pooled (counts summed; ``weighting='equal'`` weights suites equally with
a stratified score test). Several candidates: Holm's step-down adjustment across candidates of
the decisive p-values (non-inferiority p-values for ``noninferiority``, the loss test's for
``mcnemar``), so that the chance of any false PASS (resp. FAIL) stays below alpha.

Exit codes: PASS 0, FAIL 1, INCONCLUSIVE 4 (``inconclusive='fail'|'pass'`` maps it to 1 or 0);
with several candidates the worst verdict decides (:func:`qualgate.evidence.gate_report.decide_exit`).

Incomplete pairs (``--on-missing drop``, ``--max-errors``): by default (``missing='worst-case'``)
a pair that may hide a loss counts as lost (a candidate-side gap where the baseline was correct,
a baseline-side gap where the candidate is not correct); the verdict
with those pairs dropped is reported beside it (:mod:`qualgate.verdict.pairing`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from qualgate.config.options import INCONCLUSIVE_AS, MISSING, POLICIES, WEIGHTINGS
from qualgate.errors import DataError
from qualgate.evidence.contract import FixedCandidate, FixedMissingness, FixedSettings, ReportSide, Verdict
from qualgate.evidence.gate_report import decide_exit, names, now
from qualgate.formatting import fmt_p_is
from qualgate.stats import (
    ClusteredTable,
    checks,
    holm,
)
from qualgate.verdict.flips import Flips, find_flips
from qualgate.verdict.pairing import IMPUTED_BASELINE, Pairing, Side, pair_records
from qualgate.verdict.policy import Policy
from qualgate.verdict.result import GateResult

__all__ = ["Comparison", "GateReport", "gate", "run_gate"]

from qualgate.verdict.scope import (
    Analysis,
    analyze,
    decide,
)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The baseline against one candidate: per-suite analyses, the pooled one, the verdict.

    ``verdict`` is the pooled verdict after Holm's adjustment across candidates
    (``verdict_unadjusted`` before it; ``pvalue_holm`` the adjusted decisive p-value).
    ``missing``: the verdict with the incomplete pairs that may hide a loss counted as lost
    (``verdict_worst_case``) and with them dropped (``verdict_dropped``), and what was
    incomplete, by side and by the baseline's outcome (:mod:`qualgate.verdict.pairing`).
    :meth:`to_candidate` is its part of the report file.
    """

    name: str
    candidate: Side
    suites: tuple[Analysis, ...]
    pooled: Analysis
    verdict: Verdict
    verdict_unadjusted: Verdict
    pvalue_holm: float
    reason: str
    notes: tuple[str, ...] = ()
    missing: FixedMissingness | None = None
    #: with a policy file: each suite's tier, and its verdict (blocking ones after Holm)
    tiers: tuple[str, ...] = ()
    suite_verdicts: tuple[Verdict, ...] = ()
    flips: Flips | None = None  #: every lost and gained pair (:mod:`qualgate.verdict.flips`)
    #: the divergence audit (:mod:`qualgate.verdict.divergence`); not part of the report file
    divergence: Any = None

    def to_candidate(self) -> FixedCandidate:
        """This comparison as the report file holds it."""
        suites = [a.to_dict() for a in self.suites]
        for d, tier, verdict in zip(suites, self.tiers, self.suite_verdicts):
            d.update(tier=tier, verdict_decisive=verdict)
        return FixedCandidate(
            name=self.name,
            config_id=self.candidate.config_id,
            mode=self.candidate.mode,
            verdict=self.verdict,
            reason=self.reason,
            verdict_unadjusted=self.verdict_unadjusted,
            pvalue_holm=self.pvalue_holm,
            loss_upper_bound=self.pooled.loss_upper_bound,
            missing=self.missing,
            side=ReportSide.of(self.candidate),
            pooled=self.pooled.to_dict(),
            suites=tuple(suites),
            notes=self.notes,
            flips=self.flips.to_dict() if self.flips is not None else None,
        )

    def to_dict(self) -> dict:
        return self.to_candidate().to_dict()


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateReport(GateResult):
    """Everything ``qualgate gate`` decides (:class:`~qualgate.verdict.result.GateResult`, with
    the fixed design's settings); :meth:`evidence` is the report file, ``to_dict()`` its content."""

    DESIGN: ClassVar[str] = "fixed"
    policy: str
    weighting: str
    comparisons: tuple[Comparison, ...]
    suite_policy: Policy | None = None

    def settings(self) -> FixedSettings:
        return FixedSettings(
            policy=self.policy,
            margin=self.margin,
            alpha=self.alpha,
            weighting=self.weighting,
            inconclusive=self.inconclusive,
            missing=self.missing,
            **self.reading,
            suite_policy=self.suite_policy.to_dict() if self.suite_policy else None,
        )

    def __str__(self) -> str:  # what ``qualgate gate`` prints
        from qualgate.report.gate_text import render_text

        return render_text(self)

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{c.name}: {c.verdict}" for c in self.comparisons)
        return f"<GateReport {self.verdict} ({verdicts}); margin {self.margin:g}, alpha {self.alpha:g}>"


def _check_settings(policy, margin, alpha, weighting, inconclusive):
    checks.choice("policy", policy, POLICIES)
    checks.choice("weighting", weighting, WEIGHTINGS)
    checks.choice("inconclusive", inconclusive, INCONCLUSIVE_AS)
    margin = checks.real("margin", margin, low=0.0, high=1.0)
    alpha = checks.real("alpha", alpha, low=0.0, high=0.5)
    return margin, alpha


def _analyses(p: Pairing, policy, margin, alpha, weighting, suite_policy: Policy | None = None):
    clustered = p.max_cluster_size > 1
    tables, suites = [], []
    for s, name in enumerate(p.suites):
        mask = p.suite == s
        t = ClusteredTable.from_outcomes(p.question[mask], p.baseline_correct[mask], p.candidate_correct[mask])
        tables.append(t)
        na = (int(p.baseline_no_answer[mask].sum()), int(p.candidate_no_answer[mask].sum()))
        m = margin
        if suite_policy is not None:
            m = suite_policy.for_suite(name).absolute_margin((t.both_correct + t.lost) / t.n)
            if not 0 < m < 1:
                raise DataError(
                    f"the relative margin of suite {name!r} is 0 (the baseline never answers it "
                    "correctly): use an absolute drop",
                    file=suite_policy.path,
                    field=f"suites.{name}",
                )
        suites.append(analyze(t, policy=policy, margin=m, alpha=alpha, clustered=clustered, scope=name, no_answer=na))
    if suite_policy is not None:  # the pooled row (for information) at the loosest blocking margin
        used = [(suite_policy.for_suite(a.scope).tier, a.margin) for a in suites]
        margin = max((m for tier, m in used if tier == "blocking"), default=max(m for _, m in used))
    na = (int(p.baseline_no_answer.sum()), int(p.candidate_no_answer.sum()))
    if len(tables) == 1:
        pooled = suites[0]
    elif weighting == "equal":
        w = np.full(len(tables), 1 / len(tables))
        pooled = analyze(
            tables, policy=policy, margin=margin, alpha=alpha, clustered=clustered, weights=w, no_answer=na
        )
    else:
        t = ClusteredTable.from_outcomes(p.question, p.baseline_correct, p.candidate_correct)
        pooled = analyze(t, policy=policy, margin=margin, alpha=alpha, clustered=clustered, no_answer=na)
    return tuple(suites), pooled, margin


@dataclasses.dataclass(frozen=True)
class _Decided:
    """One candidate's decision on one pairing (with or without its imputed pairs)."""

    suites: tuple[Analysis, ...]
    pooled: Analysis
    pvalue_holm: float  #: the decisive p-value after Holm's adjustment
    verdict: Verdict
    reason: str
    tiers: tuple[str, ...] = ()  #: with a policy file (:class:`qualgate.verdict.policy.PolicyDecision`)
    suite_verdicts: tuple[Verdict, ...] = ()
    notes: tuple[str, ...] = ()
    margin: float | None = None  #: the pooled row's margin


def _decide_all(pairings, policy, margin, alpha, weighting, suite_policy=None) -> list[_Decided]:
    """One :class:`_Decided` per candidate.

    Holm's adjustment runs over the pooled decision of each candidate or, with a suite
    policy, over every blocking (candidate, suite) decision (:mod:`qualgate.verdict.policy`).
    """
    analyses = [_analyses(p, policy, margin, alpha, weighting, suite_policy) for p in pairings]
    decide_p = (lambda a: a.pvalue_noninferiority) if policy == "noninferiority" else (lambda a: a.pvalue_loss)

    def verdict_at(a: Analysis, p_adj: float) -> Verdict:
        if policy == "noninferiority":
            return decide(policy, pvalue_noninferiority=p_adj, pvalue_loss=a.pvalue_loss, alpha=alpha)
        return decide(policy, pvalue_noninferiority=None, pvalue_loss=p_adj, alpha=alpha)

    if suite_policy is None:
        units = [(i, None) for i in range(len(pairings))]
    else:
        units = [
            (i, j)
            for i, (suites, _, _) in enumerate(analyses)
            for j, a in enumerate(suites)
            if suite_policy.for_suite(a.scope).tier == "blocking"
        ]
    adjusted = (
        dict(zip(units, holm([decide_p(analyses[i][1] if j is None else analyses[i][0][j]) for i, j in units])))
        if units
        else {}
    )
    out = []
    for i, (p, (suites, a, m)) in enumerate(zip(pairings, analyses)):
        if suite_policy is None:
            p_adj = adjusted[i, None]
            verdict = verdict_at(a, p_adj)
            reason = a.reason
            if verdict != a.verdict:
                reason = (
                    f"{a.reason}; but after Holm's adjustment across {len(pairings)} candidates "
                    f"(adjusted {fmt_p_is(p_adj)}) the verdict is {verdict}"
                )
            out.append(_Decided(suites, a, p_adj, verdict, reason, margin=m))
        else:
            d = suite_policy.decide(suites, {j: adjusted[i, j] for ii, j in units if ii == i}, verdict_at, len(units))
            notes = d.notes + tuple(suite_policy.check_present(p.suites))
            out.append(_Decided(suites, a, d.pvalue, d.verdict, d.reason, d.tiers, d.suite_verdicts, notes, m))
    return out


def gate(
    pairings: Sequence[Pairing],
    *,
    names: Sequence[str] | None = None,
    policy: str = "noninferiority",
    margin: float | None = None,
    alpha: float = 0.05,
    weighting: str = "pooled",
    inconclusive: str = "inconclusive",
    missing: str = "worst-case",
    suite_policy: Policy | None = None,
    flips: Sequence[Flips] | None = None,
) -> GateReport:
    """Decide each candidate's verdict from its pairing with the (same) baseline.

    Parameters
    ----------
    pairings : sequence of Pairing
        One per candidate, all with the same baseline.
    names : sequence of str, optional
        Candidate labels (default: the candidate paths).
    policy : {'noninferiority', 'mcnemar'}
    margin : float
        Largest tolerable loss, in (0, 1) (0.02 = two accuracy points). Not with ``suite_policy``.
    alpha : float
        One-sided level, in (0, 0.5).
    weighting : {'pooled', 'equal'}
        How suites combine into the pooled decision: counts summed, or suites weighted equally.
    inconclusive : {'inconclusive', 'fail', 'pass'}
        Exit code of an INCONCLUSIVE verdict: 4, 1 or 0. Verdicts themselves are unchanged.
    missing : {'worst-case', 'drop'}
        Which verdict decides: with the pairings' imputed pairs (candidate missing or
        ``error`` where the baseline was correct) counted as lost, or with them dropped. Both
        are reported.
    suite_policy : Policy, optional
        Per-suite margins and tiers (:mod:`qualgate.verdict.policy`): each suite is decided at its own
        margin, the blocking suites decide (Holm's adjustment over every blocking
        (candidate, suite) decision), warning suites become notes; the pooled row, at the
        loosest blocking margin, is for information. ``margin`` must then be None.
    flips : sequence of Flips, optional
        One per candidate (:func:`qualgate.verdict.flips.find_flips`), carried into the report.
    """
    if (margin is None) == (suite_policy is None):
        raise ValueError("give either a margin or a suite policy (a policy file), not both or neither")
    checked, alpha = _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    margin = checked if margin is not None else None
    checks.choice("missing", missing, MISSING)
    if not pairings:
        raise ValueError("pairings must hold at least one candidate's pairing")
    names = list(names) if names is not None else [p.candidate.path for p in pairings]
    flips = list(flips) if flips is not None else [None] * len(pairings)
    worst = _decide_all(pairings, policy, margin, alpha, weighting, suite_policy)
    if any(p.n_imputed for p in pairings):
        dropped = _decide_all([p.without_imputed() for p in pairings], policy, margin, alpha, weighting, suite_policy)
    else:
        dropped = worst
    comparisons = []
    for p, name, w, d, f in zip(pairings, names, worst, dropped, flips):
        decided = w if missing == "worst-case" else d
        a = decided.pooled
        notes = _reading_notes(p) + list(p.notes) + list(a.warnings) + list(decided.notes)
        if a.no_answer_candidate > a.no_answer_baseline:
            notes.append(
                f"the candidate gave no answer on {a.no_answer_candidate} pair"
                f"{'' if a.no_answer_candidate == 1 else 's'}, the baseline on "
                f"{a.no_answer_baseline}: a candidate that stops answering is a finding"
            )
        if p.dropped and p.dropped["pairs"]:
            notes.append(_incomplete_note(p, w.verdict, d.verdict))
        if w.verdict != d.verdict:
            notes.append(
                f"the verdict depends on incomplete pairs: {w.verdict} with the {p.n_imputed} {_imputed_what(p)} "
                f"counted as lost, {d.verdict} with them dropped"
                + (
                    ""
                    if missing == "worst-case"
                    else " (--missing drop: qualgate check refuses this report unless --allow-missing-dependence)"
                )
            )
        info = FixedMissingness(
            imputed_as_lost=p.n_imputed,
            verdict_worst_case=w.verdict,
            verdict_dropped=d.verdict,
            loss_upper_bound_worst_case=w.pooled.loss_upper_bound,
            loss_upper_bound_dropped=d.pooled.loss_upper_bound,
            incomplete=p.dropped,
        )
        comparisons.append(
            Comparison(
                name,
                p.candidate,
                decided.suites,
                a,
                decided.verdict,
                a.verdict,
                decided.pvalue_holm,
                decided.reason,
                tuple(notes),
                info,
                decided.tiers,
                decided.suite_verdicts,
                f,
            )
        )
    overall, code = decide_exit([c.verdict for c in comparisons], inconclusive)
    if margin is None:  # the loosest blocking margin used: what a --max-margin check must see
        margin = max(w.margin for w in worst)
    return GateReport(
        created_at=now(),
        policy=policy,
        margin=margin,
        alpha=alpha,
        weighting=weighting,
        inconclusive=inconclusive,
        baseline=pairings[0].baseline,
        comparisons=tuple(comparisons),
        verdict=overall,
        exit_code=int(code),
        missing=missing,
        suite_policy=suite_policy,
    )


def _imputed_what(p: Pairing) -> str:
    """What the imputed pairs are, in words (the candidate's gaps, or the baseline's too)."""
    if p.imputed is not None and (p.imputed == IMPUTED_BASELINE).any():
        return "gaps or errors that may hide a loss (either side)"
    return "candidate-side gaps on baseline-correct questions"


def _incomplete_note(p: Pairing, worst: str, without: str) -> str:
    def part(counts):
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)

    dropped = p.dropped
    what = (
        "gaps or errors that may hide a loss (either side)"
        if p.imputed is not None and (p.imputed == IMPUTED_BASELINE).any()
        else "candidate-side ones on baseline-correct questions"
    )
    return (
        f"{dropped['pairs']} incomplete pairs (by side: {part(dropped['by_side'])}; by the baseline's outcome: "
        f"{part(dropped['by_baseline_outcome'])}); verdict with the {dropped['imputed_as_lost']} {what} "
        f"counted as lost: {worst}, with all of them dropped: {without}"
    )


def _reading_notes(p: Pairing) -> list[str]:
    return [f"dropped {d}" for d in p.baseline.dropped_truncated + p.candidate.dropped_truncated]


def run_gate(
    baseline,
    candidates,
    *,
    policy: str = "noninferiority",
    margin: float | None = None,
    alpha: float = 0.05,
    weighting: str = "pooled",
    inconclusive: str = "inconclusive",
    missing: str = "worst-case",
    on_missing: str = "error",
    max_errors: int = 0,
    drop_truncated: bool = False,
    allow_unknown: bool = False,
    baseline_config: dict | None = None,
    plan: dict | None = None,
    candidate_configs: Sequence[dict | None] | None = None,
    suite_policy: Policy | None = None,
    input_format: str = "auto",
    import_options=None,
    on_prompt_mismatch: str = "error",
    greedy: Sequence[bool | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> GateReport:
    """Read, pair and gate: ``baseline`` and each of ``candidates`` is a record file or directory,
    or another tool's log (``input_format``, detected per path by default; see
    :mod:`qualgate.records.importers`, whose ``ImportOptions`` ``import_options`` are).

    Every candidate's flips (:func:`qualgate.verdict.flips.find_flips`) are carried into the report.
    ``baseline_config``: what the baseline serves (:func:`qualgate.evidence.gate_report.describe_config`);
    its config id must be the baseline records'. ``plan``: digests of the plan and the run
    (harness runs). Both are written into the report for ``qualgate check``. Each comparison
    carries its divergence audit (:func:`qualgate.verdict.divergence.divergence_audit`;
    ``greedy``: per candidate, whether both sides decoded greedily, when known).
    (harness runs). Both are written into the report for ``qualgate check``. ``progress(stage)``
    is called as each stage starts (reading, pairing each candidate, testing), for a progress line.

    Raises :class:`~qualgate.errors.DataError` for invalid or unpairable records and
    ``ValueError`` for invalid settings. See :func:`gate` and :func:`~qualgate.verdict.pairing.pair_records`.
    """
    if isinstance(candidates, (str, Path)):
        candidates = [candidates]
    _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    from qualgate.records.importers import load_records

    opts = dict(drop_truncated=drop_truncated, allow_unknown=allow_unknown)
    progress = progress or (lambda stage: None)
    progress("reading the baseline's records")
    base = load_records(baseline, fmt=input_format, options=import_options, **opts)
    from qualgate.verdict.divergence import divergence_audit

    pairings, flips, audits = [], [], []
    for i, c in enumerate(candidates):
        progress(f"reading and pairing candidate {i + 1} of {len(candidates)}")
        cand = load_records(c, fmt=input_format, options=import_options, **opts)
        pairings.append(
            pair_records(
                base, cand, on_missing=on_missing, max_errors=max_errors, on_prompt_mismatch=on_prompt_mismatch
            )
        )
        flips.append(find_flips(base, cand))
        audits.append(divergence_audit(base, cand, greedy=greedy[i] if greedy else None))
    _check_baseline_config(baseline_config, pairings[0].baseline)
    _check_candidate_configs(candidate_configs, pairings)
    progress(f"testing {len(pairings)} candidate(s)")
    report = gate(
        pairings,
        names=names(candidates),
        policy=policy,
        margin=margin,
        alpha=alpha,
        weighting=weighting,
        inconclusive=inconclusive,
        missing=missing,
        suite_policy=suite_policy,
        flips=flips,
    )
    reading = dict(on_missing=on_missing, max_errors=max_errors, **opts)
    comparisons = tuple(dataclasses.replace(c, divergence=a) for c, a in zip(report.comparisons, audits))
    return dataclasses.replace(
        report,
        comparisons=comparisons,
        reading=reading,
        baseline_config=baseline_config,
        plan=plan,
        candidate_configs=None if candidate_configs is None else tuple(candidate_configs),
    )


def _check_baseline_config(description, side: Side) -> None:
    if description is not None and description.get("config_id") != side.config_id:
        raise DataError(
            f"the baseline config given has config id {description.get('config_id')}, but the baseline records "
            f"carry {side.config_id}: it is not the config that produced them",
            file=side.path,
            field="config_id",
        )


def _check_candidate_configs(descriptions, pairings) -> None:
    """Each candidate's description (``None``: not known) is of the config its records carry."""
    if descriptions is None:
        return
    if len(descriptions) != len(pairings):
        raise DataError(f"{len(descriptions)} candidate configs given for {len(pairings)} candidates")
    for d, p in zip(descriptions, pairings):
        if d is not None and d.get("config_id") != p.candidate.config_id:
            raise DataError(
                f"the candidate config given has config id {d.get('config_id')}, but the candidate records "
                f"carry {p.candidate.config_id}: it is not the config that produced them",
                file=p.candidate.path,
                field="config_id",
            )
