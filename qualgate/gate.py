"""The gate: does a candidate configuration lose answer quality against the baseline?

Layers, each usable on its own (the sequential gate reuses the lower ones):

1. :mod:`qualgate.records` / :mod:`qualgate.pairing` read and pair the records;
2. :func:`analyze` computes the statistics of one comparison scope (a suite, or all suites
   pooled) from a :class:`~qualgate.stats.ClusteredTable`;
3. :func:`decide` is the decision rule, a pure function of two p-values (vectorised);
4. :func:`gate` applies it to several candidates with Holm's adjustment and sets the exit
   code; :func:`run_gate` goes from paths to a :class:`GateReport`;
5. :mod:`qualgate.gate_render` renders it; ``GateReport.evidence()`` is the report file
   (:mod:`qualgate.evidence`, the one writer and reader of gate reports).

The A/A calibration of two runs that should be equivalent is :mod:`qualgate.calibration`.

This module is longer than the others (about 700 lines) because it is the decision and only
the decision: layers 2 to 4 are one chain (a scope's statistics, the rule, Holm's adjustment
across candidates, the notes on incomplete pairs) that shares the verdict wording and the
names of the tests, and the policies below are documented once, here. Should it need
splitting, the seam is between layer 2 (:class:`Analysis`, :func:`analyze`: one scope) and
layer 4 (:class:`Comparison`, :class:`GateReport`, :func:`gate`: the candidates).

Policies
--------
``noninferiority`` (default), three outcomes:

- **PASS** when the one-sided upper confidence bound of the loss (level 1 − alpha) is below
  the margin, i.e. the test of H0: loss >= margin rejects (p < alpha): with one pair per
  question the exact unconditional test (``ONE_SEED_METHOD``; size <= alpha at every n), with
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
with several candidates the worst verdict decides (:func:`qualgate.evidence.decide_exit`).

Incomplete pairs (``--on-missing drop``, ``--max-errors``): by default (``missing='worst-case'``)
a candidate-side gap on a question the baseline answered correctly counts as lost; the verdict
with those pairs dropped is reported beside it (:mod:`qualgate.pairing`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._render import fmt_p_is, fmt_pct, fmt_points
from .errors import DataError
from .evidence import Evidence, decide_exit, names, now
from .flips import Flips, find_flips
from .options import INCONCLUSIVE_AS, MISSING, POLICIES, READING_DEFAULTS, WEIGHTINGS
from .pairing import Pairing, Side, pair_records
from .policy import Policy
from .stats import (
    ClusteredTable,
    ConfidenceInterval,
    _checks,
    clustered_difference_ci,
    clustered_mcnemar,
    clustered_noninferiority,
    holm,
    mcnemar,
    mcnemar_power,
    noninferiority,
    noninferiority_sample_size,
    stratified_score_test,
)

__all__ = [
    "Analysis",
    "Comparison",
    "GateReport",
    "analyze",
    "decide",
    "gate",
    "run_gate",
]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
_TARGET_POWER = 0.8
#: Non-inferiority test with one pair per question: the exact unconditional test, whose size
#: is at most alpha at every n and discordance (the asymptotic score test's reaches 0.068 at
#: n = 133 and 2 % discordance). Its power is within a point of the score test's from a few
#: hundred questions on (benchmarks/gate_calibration.py) and it costs about a second.
ONE_SEED_METHOD = "exact"
_METHOD_NAMES = {
    "exact": "exact unconditional score test (Hsueh et al. 2001)",
    "score": "asymptotic score test (Tango 1998)",
    "score-clustered": "design-effect score test, questions as clusters",
    "score-clustered-robust": "robust clustered score test, questions as clusters",
    "score-clustered-stratified": "stratified design-effect score test, questions as clusters",
    "score-clustered-robust-stratified": "stratified robust clustered score test, questions as clusters",
    "mcnemar-exact": "exact McNemar test",
    "sign-flip-exact": "exact sign-flip test, questions as clusters",
    "score-stratified": "stratified score test",
}


# ------------------------------------------------------------------------ decision rule


def decide(policy, *, pvalue_noninferiority, pvalue_loss, alpha):
    """The gate's decision rule: a verdict from two p-values (vectorised over arrays).

    Parameters
    ----------
    policy : {'noninferiority', 'mcnemar'}
    pvalue_noninferiority : float or array
        p-value of H0: loss >= margin (``< alpha`` exactly when the upper confidence bound of
        the loss is below the margin). Ignored by ``mcnemar``.
    pvalue_loss : float or array
        One-sided p-value of H0: no loss against H1: the candidate is worse.
    alpha : float

    Returns
    -------
    str or ndarray of str
        ``'PASS'``, ``'FAIL'`` or ``'INCONCLUSIVE'``.

    Examples
    --------
    >>> decide("noninferiority", pvalue_noninferiority=0.01, pvalue_loss=0.6, alpha=0.05)
    'PASS'
    >>> decide("noninferiority", pvalue_noninferiority=0.4, pvalue_loss=0.01, alpha=0.05)
    'FAIL'
    >>> decide("mcnemar", pvalue_noninferiority=None, pvalue_loss=0.2, alpha=0.05)
    'PASS'
    """
    _checks.choice("policy", policy, POLICIES)
    loss_significant = np.asarray(pvalue_loss) <= alpha
    if policy == "mcnemar":
        out = np.where(loss_significant, FAIL, PASS)
    else:
        out = np.where(
            np.asarray(pvalue_noninferiority) < alpha, PASS, np.where(loss_significant, FAIL, INCONCLUSIVE)
        )
    return str(out) if out.ndim == 0 else out

# ------------------------------------------------------------------------ one scope


@dataclasses.dataclass(frozen=True)
class Analysis:
    """Statistics and verdict of one comparison scope: one suite, or all suites pooled.

    Accuracies are over pairs (``no_answer`` counts as not correct). ``difference`` is
    accuracy(C) − accuracy(B) and the loss its negative. ``pvalue_loss`` is one-sided (H1: the
    candidate is worse); ``pvalue_two_sided`` tests no difference; ``pvalue_noninferiority``
    tests H0: loss >= margin. ``loss_upper_bound`` is the one-sided 1 − alpha upper bound of the
    loss; ``ci_difference`` the two-sided 1 − 2·alpha interval of the difference (so that its
    lower end is minus the bound). ``more_questions``: for an INCONCLUSIVE non-inferiority
    verdict, how many further questions would give 80% power at the observed discordance.
    ``power``: for the ``mcnemar`` policy, the power to detect a loss of the margin.
    """

    scope: str
    questions: int
    pairs: int
    pairs_per_question: int
    clustered: bool
    design_effect: float
    both_correct: int
    lost: int
    gained: int
    both_wrong: int
    no_answer_baseline: int
    no_answer_candidate: int
    accuracy_baseline: float
    accuracy_candidate: float
    difference: float
    discordant: float
    pvalue_loss: float
    pvalue_two_sided: float
    pvalue_noninferiority: float
    ci_difference: ConfidenceInterval
    confidence_level: float
    loss_upper_bound: float
    verdict: str
    reason: str
    more_questions: int | None = None
    power: float | None = None
    methods: dict = dataclasses.field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    margin: float | None = None  #: the margin this scope was decided at

    @property
    def net(self) -> int:
        """gained − lost."""
        return self.gained - self.lost

    @property
    def loss(self) -> float:
        return -self.difference

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["ci_difference"] = list(self.ci_difference)
        out["warnings"] = list(self.warnings)
        out["net"] = self.net
        out["loss"] = self.loss
        return out


def _loss_tests(tables, weights, clustered):
    """(one-sided p of a loss, two-sided p, method)."""
    if weights is not None:
        deff = None if clustered else 1.0
        less = stratified_score_test(tables, weights=weights, design_effect=deff, alternative="less")
        both = stratified_score_test(tables, weights=weights, design_effect=deff)
        return less.pvalue, both.pvalue, less.method
    (table,) = tables
    if clustered:
        less = clustered_mcnemar(table, alternative="less")
        both = clustered_mcnemar(table, alternative="two-sided")
    else:
        less = mcnemar(table.lost, table.gained, alternative="less")
        both = mcnemar(table.lost, table.gained, alternative="two-sided")
    return less.pvalue, both.pvalue, ("sign-flip-exact" if clustered else "mcnemar-exact")


def analyze(
    tables,
    *,
    policy: str = "noninferiority",
    margin: float,
    alpha: float = 0.05,
    clustered: bool | None = None,
    weights=None,
    scope: str = "pooled",
    no_answer=(0, 0),
) -> Analysis:
    """Statistics and verdict of one scope from its table(s).

    Parameters
    ----------
    tables : ClusteredTable or sequence of ClusteredTable
        One table, or one per stratum (suite) combined with ``weights``.
    policy, margin, alpha
        As for :func:`gate`.
    clustered : bool, optional
        Treat questions as clusters; by default when any question holds more than one pair.
    weights : sequence of float, optional
        Stratum weights (summing to 1) for several tables.
    scope : str
        Label (suite name or ``'pooled'``).
    no_answer : (int, int)
        Pairs with ``no_answer`` on the baseline and on the candidate side.
    """
    tables = [tables] if isinstance(tables, ClusteredTable) else list(tables)
    if len(tables) > 1 and weights is None:
        raise ValueError("several tables need weights")
    if clustered is None:
        clustered = any(t.max_cluster_size > 1 for t in tables)
    deff_arg = None if clustered else 1.0
    n = sum(t.n for t in tables)
    lost, gained = sum(t.lost for t in tables), sum(t.gained for t in tables)
    both_correct, both_wrong = sum(t.both_correct for t in tables), sum(t.both_wrong for t in tables)
    w = np.asarray(weights, dtype=float) if weights is not None else None
    if w is None:
        acc_b, acc_c = (both_correct + lost) / n, (both_correct + gained) / n
    else:
        acc_b = float(sum(wi * (t.both_correct + t.lost) / t.n for wi, t in zip(w, tables)))
        acc_c = float(sum(wi * (t.both_correct + t.gained) / t.n for wi, t in zip(w, tables)))
    target = tables[0] if w is None else tables
    if clustered or w is not None:
        ni = clustered_noninferiority(target, margin=margin, alpha=alpha, weights=w, design_effect=deff_arg)
        deff = ni.design_effect
    else:  # one pair per question: the exact test (ONE_SEED_METHOD)
        t = tables[0]
        ni = noninferiority(t.both_correct, t.lost, t.gained, t.both_wrong, margin=margin, alpha=alpha,
                            method=ONE_SEED_METHOD)  # fmt: skip
        deff = 1.0
    ci = clustered_difference_ci(target, confidence_level=1 - 2 * alpha, weights=w, design_effect=deff_arg)
    p_loss, p_two, loss_method = _loss_tests(tables, w, clustered)
    verdict = decide(policy, pvalue_noninferiority=ni.pvalue, pvalue_loss=p_loss, alpha=alpha)
    questions = sum(t.clusters for t in tables)
    discordant = (lost + gained) / n
    warnings = []
    more = power = None
    if policy == "mcnemar":
        n_eff = max(1, int(n / deff))
        power = mcnemar_power(
            n_eff, margin, max(discordant, margin), alpha=alpha, alternative="less", method="normal"
        ).power
        if power < _TARGET_POWER:
            warnings.append(
                f"the sample is too small: power to detect a loss of {fmt_points(margin)} points is "
                f"{power:.0%} (< {_TARGET_POWER:.0%}); a PASS here is weak evidence"
            )
    elif verdict == INCONCLUSIVE:
        more = _more_questions(ni.loss, discordant, margin, alpha, deff, n / questions, questions)
    reason = _reason(policy, verdict, ni, p_loss, margin, alpha, discordant, more, power, clustered)
    ni_method = ni.method if w is None or clustered else "score-stratified"
    decisive = loss_method if policy == "mcnemar" else ni_method
    reason += f" [{_METHOD_NAMES.get(decisive, decisive)}]"
    return Analysis(
        scope=scope,
        questions=questions,
        pairs=n,
        pairs_per_question=max(t.max_cluster_size for t in tables),
        clustered=clustered,
        design_effect=deff,
        both_correct=both_correct,
        lost=lost,
        gained=gained,
        both_wrong=both_wrong,
        no_answer_baseline=int(no_answer[0]),
        no_answer_candidate=int(no_answer[1]),
        accuracy_baseline=float(acc_b),
        accuracy_candidate=float(acc_c),
        difference=float(acc_c - acc_b),
        discordant=discordant,
        pvalue_loss=p_loss,
        pvalue_two_sided=p_two,
        pvalue_noninferiority=ni.pvalue,
        ci_difference=ci,
        confidence_level=1 - 2 * alpha,
        loss_upper_bound=ni.upper_bound,
        verdict=verdict,
        reason=reason,
        more_questions=more,
        power=power,
        methods={
            "loss_test": loss_method,
            "noninferiority": ni_method,
            "interval": "tango" + ("-clustered-robust" if clustered else "") + ("-stratified" if w is not None else ""),
        },
        warnings=tuple(warnings),
        margin=float(margin),
    )


def _more_questions(loss, discordant, margin, alpha, deff, pairs_per_question, questions):
    """Further questions for 80% power at the observed discordance (and loss, if in [0, margin))."""
    if loss >= margin:
        return None
    try:
        pairs = noninferiority_sample_size(
            margin, max(discordant, 1e-9), expected_loss=max(loss, 0.0), alpha=alpha, power=_TARGET_POWER
        ).n
    except ValueError:
        return None
    return max(0, math.ceil(pairs * deff / pairs_per_question) - questions)


def _reason(policy, verdict, ni, p_loss, margin, alpha, discordant, more, power, clustered):
    level = f"{1 - alpha:.0%}"
    ub, m = fmt_points(ni.upper_bound), fmt_points(margin)
    loss = fmt_points(ni.loss)
    unit = " (questions as clusters)" if clustered else ""
    if policy == "mcnemar":
        if verdict == FAIL:
            return f"the candidate loses {loss} points and the exact test{unit} finds the loss significant ({fmt_p_is(p_loss)} <= {alpha:g})"
        return f"no significant loss (observed loss {loss} points, {fmt_p_is(p_loss)}); power to detect a {m}-point loss is {power:.0%}"
    if verdict == PASS:
        return f"the loss is at most {ub} points ({level} upper bound{unit}), below the {m}-point margin"
    if verdict == FAIL:
        return (
            f"the candidate loses {loss} points, significantly ({fmt_p_is(p_loss)}), and the "
            f"{m}-point margin cannot be excluded (upper bound {ub} points)"
        )
    tail = (
        f"; about {more:,} more questions would be needed at the observed discordance ({fmt_pct(discordant)})"
        if more
        else ("; the observed loss is at or above the margin, so more questions will not help unless it shrinks" if more is None else "")
    )
    return (
        f"the observed loss ({loss} points) is not significant, but its {level} upper bound ({ub} points) is not "
        f"below the {m}-point margin{tail}"
    )


# ------------------------------------------------------------------------ candidates


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The baseline against one candidate: per-suite analyses, the pooled one, the verdict.

    ``verdict`` is the pooled verdict after Holm's adjustment across candidates
    (``verdict_unadjusted`` before it; ``pvalue_holm`` the adjusted decisive p-value).
    ``missing``: the verdict with incomplete candidate-side pairs counted as lost
    (``verdict_worst_case``) and with them dropped (``verdict_dropped``), and what was
    incomplete, by side and by the baseline's outcome (:mod:`qualgate.pairing`).
    """

    name: str
    candidate: Side
    suites: tuple[Analysis, ...]
    pooled: Analysis
    verdict: str
    verdict_unadjusted: str
    pvalue_holm: float
    reason: str
    notes: tuple[str, ...] = ()
    missing: dict | None = None
    #: with a policy file: each suite's tier, and its verdict (blocking ones after Holm)
    tiers: tuple[str, ...] = ()
    suite_verdicts: tuple[str, ...] = ()
    flips: Flips | None = None  #: every lost and gained pair (:mod:`qualgate.flips`)

    def to_dict(self) -> dict:
        suites = [a.to_dict() for a in self.suites]
        for d, tier, verdict in zip(suites, self.tiers, self.suite_verdicts):
            d.update(tier=tier, verdict_decisive=verdict)
        return {
            "name": self.name,
            "config_id": self.candidate.config_id,
            "mode": self.candidate.mode,
            "verdict": self.verdict,
            "reason": self.reason,
            "verdict_unadjusted": self.verdict_unadjusted,
            "pvalue_holm": self.pvalue_holm,
            "loss_upper_bound": self.pooled.loss_upper_bound,
            "missing": self.missing,
            "side": self.candidate.to_dict(),
            "pooled": self.pooled.to_dict(),
            "suites": suites,
            "notes": list(self.notes),
            "flips": self.flips.to_dict() if self.flips is not None else None,
        }


@dataclasses.dataclass(frozen=True)
class GateReport:
    """Everything ``qualgate gate`` decides; :meth:`evidence` is the report file
    (:class:`qualgate.evidence.Evidence`), ``to_dict()`` its content."""

    created_at: str
    policy: str
    margin: float
    alpha: float
    weighting: str
    inconclusive: str
    baseline: Side
    comparisons: tuple[Comparison, ...]
    verdict: str
    exit_code: int
    missing: str = "worst-case"
    reading: dict = dataclasses.field(default_factory=lambda: dict(READING_DEFAULTS))
    baseline_config: dict | None = None  #: :func:`qualgate.evidence.describe_config` of the baseline
    plan: dict | None = None  #: the plan file's and the run's digests (harness runs)
    suite_policy: Policy | None = None

    def evidence(self) -> Evidence:
        settings = {"policy": self.policy, "margin": self.margin, "alpha": self.alpha, "weighting": self.weighting,
                    "inconclusive": self.inconclusive, "missing": self.missing, **self.reading,
                    "suite_policy": self.suite_policy.to_dict() if self.suite_policy else None}  # fmt: skip
        return Evidence(
            self.created_at, "fixed", settings, self.baseline.to_dict() | {"config": self.baseline_config},
            tuple(c.to_dict() for c in self.comparisons), self.verdict, int(self.exit_code), self.plan,
        )

    def to_dict(self) -> dict:
        return self.evidence().to_dict()


def _check_settings(policy, margin, alpha, weighting, inconclusive):
    _checks.choice("policy", policy, POLICIES)
    _checks.choice("weighting", weighting, WEIGHTINGS)
    _checks.choice("inconclusive", inconclusive, INCONCLUSIVE_AS)
    margin = _checks.real("margin", margin, low=0.0, high=1.0)
    alpha = _checks.real("alpha", alpha, low=0.0, high=0.5)
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
                raise DataError(f"the relative margin of suite {name!r} is 0 (the baseline never answers it "
                                "correctly): use an absolute drop", file=suite_policy.path, field=f"suites.{name}")
        suites.append(analyze(t, policy=policy, margin=m, alpha=alpha, clustered=clustered, scope=name, no_answer=na))
    if suite_policy is not None:  # the pooled row (for information) at the loosest blocking margin
        used = [(suite_policy.for_suite(a.scope).tier, a.margin) for a in suites]
        margin = max((m for tier, m in used if tier == "blocking"), default=max(m for _, m in used))
    na = (int(p.baseline_no_answer.sum()), int(p.candidate_no_answer.sum()))
    if len(tables) == 1:
        pooled = suites[0]
    elif weighting == "equal":
        w = np.full(len(tables), 1 / len(tables))
        pooled = analyze(tables, policy=policy, margin=margin, alpha=alpha, clustered=clustered, weights=w, no_answer=na)
    else:
        t = ClusteredTable.from_outcomes(p.question, p.baseline_correct, p.candidate_correct)
        pooled = analyze(t, policy=policy, margin=margin, alpha=alpha, clustered=clustered, no_answer=na)
    return tuple(suites), pooled, margin


def _decide_all(pairings, policy, margin, alpha, weighting, suite_policy=None):
    """Per candidate: ``(suites, pooled, p_adj, verdict, reason, tiers, suite_verdicts, notes, margin)``.

    Holm's adjustment runs over the pooled decision of each candidate or, with a suite
    policy, over every blocking (candidate, suite) decision (:mod:`qualgate.policy`).
    """
    analyses = [_analyses(p, policy, margin, alpha, weighting, suite_policy) for p in pairings]
    decide_p = (lambda a: a.pvalue_noninferiority) if policy == "noninferiority" else (lambda a: a.pvalue_loss)

    def verdict_at(a: Analysis, p_adj: float) -> str:
        if policy == "noninferiority":
            return decide(policy, pvalue_noninferiority=p_adj, pvalue_loss=a.pvalue_loss, alpha=alpha)
        return decide(policy, pvalue_noninferiority=None, pvalue_loss=p_adj, alpha=alpha)

    if suite_policy is None:
        units = [(i, None) for i in range(len(pairings))]
    else:
        units = [(i, j) for i, (suites, _, _) in enumerate(analyses) for j, a in enumerate(suites)
                 if suite_policy.for_suite(a.scope).tier == "blocking"]  # fmt: skip
    adjusted = dict(zip(units, holm([decide_p(analyses[i][1] if j is None else analyses[i][0][j])
                                     for i, j in units]))) if units else {}  # fmt: skip
    out = []
    for i, (p, (suites, a, m)) in enumerate(zip(pairings, analyses)):
        tiers, suite_verdicts, notes = (), (), []
        if suite_policy is None:
            p_adj = adjusted[i, None]
            verdict = verdict_at(a, p_adj)
            reason = a.reason
            if verdict != a.verdict:
                reason = (f"{a.reason}; but after Holm's adjustment across {len(pairings)} candidates "
                          f"(adjusted {fmt_p_is(p_adj)}) the verdict is {verdict}")  # fmt: skip
        else:
            verdict, p_adj, reason, tiers, suite_verdicts, more = suite_policy.decide(
                suites, {j: adjusted[i, j] for ii, j in units if ii == i}, verdict_at, len(units))
            notes = list(more) + list(suite_policy.check_present(p.suites))
        out.append((suites, a, p_adj, verdict, reason, tiers, suite_verdicts, notes, m))
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
        Per-suite margins and tiers (:mod:`qualgate.policy`): each suite is decided at its own
        margin, the blocking suites decide (Holm's adjustment over every blocking
        (candidate, suite) decision), warning suites become notes; the pooled row, at the
        loosest blocking margin, is for information. ``margin`` must then be None.
    flips : sequence of Flips, optional
        One per candidate (:func:`qualgate.flips.find_flips`), carried into the report.
    """
    if (margin is None) == (suite_policy is None):
        raise ValueError("give either a margin or a suite policy (a policy file), not both or neither")
    checked, alpha = _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    margin = checked if margin is not None else None
    _checks.choice("missing", missing, MISSING)
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
        suites, a, p_adj, verdict, reason, tiers, suite_verdicts, more, _ = w if missing == "worst-case" else d
        notes = _reading_notes(p) + list(p.notes) + list(a.warnings) + more
        if a.no_answer_candidate > a.no_answer_baseline:
            notes.append(
                f"the candidate gave no answer on {a.no_answer_candidate} pairs, the baseline on "
                f"{a.no_answer_baseline}: a candidate that stops answering is a finding"
            )
        if p.dropped and p.dropped["pairs"]:
            notes.append(_incomplete_note(p.dropped, w[3], d[3]))
        if w[3] != d[3]:
            notes.append(
                f"the verdict depends on incomplete pairs: {w[3]} with the {p.n_imputed} candidate-side gaps on "
                f"baseline-correct questions counted as lost, {d[3]} with them dropped"
                + ("" if missing == "worst-case" else " (--missing drop: qualgate check refuses this report "
                   "unless --allow-missing-dependence)")
            )
        info = {"imputed_as_lost": p.n_imputed, "verdict_worst_case": w[3], "verdict_dropped": d[3],
                "loss_upper_bound_worst_case": w[1].loss_upper_bound,
                "loss_upper_bound_dropped": d[1].loss_upper_bound, "incomplete": p.dropped}  # fmt: skip
        comparisons.append(Comparison(name, p.candidate, suites, a, verdict, a.verdict, p_adj, reason, tuple(notes),
                                      info, tiers, suite_verdicts, f))  # fmt: skip
    overall, code = decide_exit([c.verdict for c in comparisons], inconclusive)
    if margin is None:  # the loosest blocking margin used: what a --max-margin check must see
        margin = max(w[-1] for w in worst)
    return GateReport(
        now(), policy, margin, alpha, weighting, inconclusive, pairings[0].baseline,
        tuple(comparisons), overall, int(code), missing, suite_policy=suite_policy,
    )  # fmt: skip


def _incomplete_note(dropped: dict, worst: str, without: str) -> str:
    def part(counts):
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)

    return (f"{dropped['pairs']} incomplete pairs (by side: {part(dropped['by_side'])}; by the baseline's outcome: "
            f"{part(dropped['by_baseline_outcome'])}); verdict with the {dropped['imputed_as_lost']} candidate-side "
            f"ones on baseline-correct questions counted as lost: {worst}, with all of them dropped: {without}")


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
    suite_policy: Policy | None = None,
    input_format: str = "auto",
    import_options=None,
    on_prompt_mismatch: str = "error",
) -> GateReport:
    """Read, pair and gate: ``baseline`` and each of ``candidates`` is a record file or directory,
    or another tool's log (``input_format``, detected per path by default; see
    :mod:`qualgate.importers`, whose ``ImportOptions`` ``import_options`` are).

    Every candidate's flips (:func:`qualgate.flips.find_flips`) are carried into the report.
    ``baseline_config``: what the baseline serves (:func:`qualgate.evidence.describe_config`);
    its config id must be the baseline records'. ``plan``: digests of the plan and the run
    (harness runs). Both are written into the report for ``qualgate check``.

    Raises :class:`~qualgate.errors.DataError` for invalid or unpairable records and
    ``ValueError`` for invalid settings. See :func:`gate` and :func:`~qualgate.pairing.pair_records`.
    """
    if isinstance(candidates, (str, Path)):
        candidates = [candidates]
    _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    from .importers import load_records

    opts = dict(drop_truncated=drop_truncated, allow_unknown=allow_unknown)
    base = load_records(baseline, fmt=input_format, options=import_options, **opts)
    pairings, flips = [], []
    for c in candidates:
        cand = load_records(c, fmt=input_format, options=import_options, **opts)
        pairings.append(pair_records(base, cand, on_missing=on_missing, max_errors=max_errors,
                                     on_prompt_mismatch=on_prompt_mismatch))  # fmt: skip
        flips.append(find_flips(base, cand))
    _check_baseline_config(baseline_config, pairings[0].baseline)
    report = gate(
        pairings, names=names(candidates), policy=policy, margin=margin, alpha=alpha,
        weighting=weighting, inconclusive=inconclusive, missing=missing, suite_policy=suite_policy, flips=flips,
    )  # fmt: skip
    reading = dict(on_missing=on_missing, max_errors=max_errors, **opts)
    return dataclasses.replace(report, reading=reading, baseline_config=baseline_config, plan=plan)


def _check_baseline_config(description, side: Side) -> None:
    if description is not None and description.get("config_id") != side.config_id:
        raise DataError(
            f"the baseline config given has config id {description.get('config_id')}, but the baseline records "
            f"carry {side.config_id}: it is not the config that produced them",
            file=side.path, field="config_id",
        )
