"""The gate: does a candidate configuration lose answer quality against the baseline?

Layers, each usable on its own (the sequential gate reuses the lower ones):

1. :mod:`qualgate.records` / :mod:`qualgate.pairing` read and pair the records;
2. :func:`analyze` computes the statistics of one comparison scope (a suite, or all suites
   pooled) from a :class:`~qualgate.stats.ClusteredTable`;
3. :func:`decide` is the decision rule, a pure function of two p-values (vectorised);
4. :func:`gate` applies it to several candidates with Holm's adjustment and sets the exit
   code; :func:`run_gate` goes from paths to a :class:`GateReport`;
5. :func:`render_text` / :func:`render_markdown` and ``GateReport.to_dict()`` render it.

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
(:mod:`qualgate.stats._clustered`). Several suites: each suite is reported, and the decision
is taken on all suites pooled (counts summed; ``weighting='equal'`` weights suites equally with
a stratified score test). Several candidates: Holm's step-down adjustment across candidates of
the decisive p-values (non-inferiority p-values for ``noninferiority``, the loss test's for
``mcnemar``), so that the chance of any false PASS (resp. FAIL) stays below alpha.

Exit codes: PASS 0, FAIL 1, INCONCLUSIVE 4 (``inconclusive='fail'|'pass'`` maps it to 1 or 0);
with several candidates the worst verdict decides.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import __version__
from ._render import fmt_p, fmt_pct, fmt_points, markdown_section, markdown_table, text_table
from .errors import DataError, ExitCode
from .flips import Flips, find_flips
from .flips import render_markdown as render_flips_markdown
from .pairing import Pairing, Side, pair_records
from .policy import Policy
from .stats import (
    ClusteredTable,
    ConfidenceInterval,
    clustered_difference_ci,
    clustered_mcnemar,
    clustered_noninferiority,
    mcnemar,
    mcnemar_power,
    noninferiority,
    noninferiority_sample_size,
    stratified_score_test,
)
from .stats import _checks

__all__ = [
    "INCONCLUSIVE_AS",
    "POLICIES",
    "REPORT_KIND",
    "REPORT_VERSION",
    "WEIGHTINGS",
    "Analysis",
    "CalibrationReport",
    "Comparison",
    "GateReport",
    "analyze",
    "calibrate",
    "decide",
    "gate",
    "holm",
    "render_calibration_markdown",
    "render_calibration_text",
    "render_markdown",
    "render_text",
    "run_calibration",
    "run_gate",
]

POLICIES = ("noninferiority", "mcnemar")
WEIGHTINGS = ("pooled", "equal")
INCONCLUSIVE_AS = ("inconclusive", "fail", "pass")
REPORT_KIND = "qualgate.gate_report"
REPORT_VERSION = 1
PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
_EXIT = {PASS: ExitCode.OK, FAIL: ExitCode.FAIL, INCONCLUSIVE: ExitCode.INCONCLUSIVE}
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


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (reject hypothesis i when adjusted p_i < alpha).

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(round(x, 15)) for x in out]


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


def _p_is(p) -> str:
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def _reason(policy, verdict, ni, p_loss, margin, alpha, discordant, more, power, clustered):
    level = f"{1 - alpha:.0%}"
    ub, m = fmt_points(ni.upper_bound), fmt_points(margin)
    loss = fmt_points(ni.loss)
    unit = " (questions as clusters)" if clustered else ""
    if policy == "mcnemar":
        if verdict == FAIL:
            return f"the candidate loses {loss} points and the exact test{unit} finds the loss significant ({_p_is(p_loss)} <= {alpha:g})"
        return f"no significant loss (observed loss {loss} points, {_p_is(p_loss)}); power to detect a {m}-point loss is {power:.0%}"
    if verdict == PASS:
        return f"the loss is at most {ub} points ({level} upper bound{unit}), below the {m}-point margin"
    if verdict == FAIL:
        return (
            f"the candidate loses {loss} points, significantly ({_p_is(p_loss)}), and the "
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
    dropped: dict | None = None
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
            "side": self.candidate.to_dict(),
            "pooled": self.pooled.to_dict(),
            "suites": suites,
            "notes": list(self.notes),
            "dropped": self.dropped,
            "flips": self.flips.to_dict() if self.flips is not None else None,
        }


@dataclasses.dataclass(frozen=True)
class GateReport:
    """Everything ``qualgate gate`` decides; ``to_dict()`` is the evidence file's content."""

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
    suite_policy: Policy | None = None

    def comparison(self, config_id: str) -> Comparison | None:
        """The comparison whose candidate has this config id."""
        return next((c for c in self.comparisons if c.candidate.config_id == config_id), None)

    def to_dict(self) -> dict:
        return {
            "kind": REPORT_KIND,
            "version": REPORT_VERSION,
            "created_at": self.created_at,
            "qualgate_version": __version__,
            "policy": self.policy,
            "margin": self.margin,
            "alpha": self.alpha,
            "weighting": self.weighting,
            "inconclusive": self.inconclusive,
            "multiplicity": "holm" if len(self.comparisons) > 1 or self.suite_policy else None,
            "suite_policy": self.suite_policy.to_dict() if self.suite_policy else None,
            "baseline": self.baseline.to_dict(),
            "candidates": [c.to_dict() for c in self.comparisons],
            "verdict": self.verdict,
            "exit_code": self.exit_code,
        }


def _check_settings(policy, margin, alpha, weighting, inconclusive):
    _checks.choice("policy", policy, POLICIES)
    _checks.choice("weighting", weighting, WEIGHTINGS)
    _checks.choice("inconclusive", inconclusive, INCONCLUSIVE_AS)
    margin = _checks.real("margin", margin, low=0.0, high=1.0)
    alpha = _checks.real("alpha", alpha, low=0.0, high=0.5)
    return margin, alpha


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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


def gate(
    pairings: Sequence[Pairing],
    *,
    names: Sequence[str] | None = None,
    policy: str = "noninferiority",
    margin: float | None = None,
    alpha: float = 0.05,
    weighting: str = "pooled",
    inconclusive: str = "inconclusive",
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
    _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    if not pairings:
        raise ValueError("pairings must hold at least one candidate's pairing")
    names = list(names) if names is not None else [p.candidate.path for p in pairings]
    flips = list(flips) if flips is not None else [None] * len(pairings)
    analyses = [_analyses(p, policy, margin, alpha, weighting, suite_policy) for p in pairings]
    decide_p = (lambda a: a.pvalue_noninferiority) if policy == "noninferiority" else (lambda a: a.pvalue_loss)

    def verdict_at(a: Analysis, p_adj: float) -> str:
        if policy == "noninferiority":
            return decide(policy, pvalue_noninferiority=p_adj, pvalue_loss=a.pvalue_loss, alpha=alpha)
        return decide(policy, pvalue_noninferiority=None, pvalue_loss=p_adj, alpha=alpha)

    # the decisions Holm's adjustment runs over: pooled per candidate, or blocking suites
    if suite_policy is None:
        units = [(i, None) for i in range(len(pairings))]
    else:
        units = [(i, j) for i, (suites, _, _) in enumerate(analyses) for j, a in enumerate(suites)
                 if suite_policy.for_suite(a.scope).tier == "blocking"]  # fmt: skip
    adjusted = dict(zip(units, holm([decide_p(analyses[i][1] if j is None else analyses[i][0][j])
                                     for i, j in units]))) if units else {}  # fmt: skip
    comparisons = []
    for i, (p, name, (suites, a, _), f) in enumerate(zip(pairings, names, analyses, flips)):
        notes = _reading_notes(p) + list(p.notes) + list(a.warnings)
        tiers, suite_verdicts = (), ()
        if suite_policy is None:
            p_adj = adjusted[i, None]
            verdict = verdict_at(a, p_adj)
            reason = a.reason
            if verdict != a.verdict:
                reason = (
                    f"{a.reason}; but after Holm's adjustment across {len(pairings)} candidates "
                    f"(adjusted {_p_is(p_adj)}) the verdict is {verdict}"
                )
        else:
            verdict, p_adj, reason, tiers, suite_verdicts, more = suite_policy.decide(
                suites, {j: adjusted[i, j] for ii, j in units if ii == i}, verdict_at, len(units))
            notes += more + suite_policy.check_present(p.suites)
        if a.no_answer_candidate > a.no_answer_baseline:
            notes.append(
                f"the candidate gave no answer on {a.no_answer_candidate} pairs, the baseline on "
                f"{a.no_answer_baseline}: a candidate that stops answering is a finding"
            )
        comparisons.append(Comparison(name, p.candidate, suites, a, verdict, a.verdict, p_adj, reason, tuple(notes),
                                      p.dropped, tiers, suite_verdicts, f))  # fmt: skip
    verdicts = [c.verdict for c in comparisons]
    overall = FAIL if FAIL in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts else PASS
    code = _EXIT[overall]
    if overall == INCONCLUSIVE and inconclusive != "inconclusive":
        code = ExitCode.FAIL if inconclusive == "fail" else ExitCode.OK
    if margin is None:  # the loosest blocking margin used: what a --max-margin check must see
        margin = max(m for *_, m in analyses)
    return GateReport(
        _now(), policy, margin, alpha, weighting, inconclusive, pairings[0].baseline,
        tuple(comparisons), overall, int(code), suite_policy,
    )  # fmt: skip


def _reading_notes(p: Pairing) -> list[str]:
    return [f"dropped {d}" for d in p.baseline.dropped_truncated + p.candidate.dropped_truncated]


def _names(paths) -> list[str]:
    stems = [Path(p).stem if Path(p).suffix else Path(p).name for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def run_gate(
    baseline,
    candidates,
    *,
    policy: str = "noninferiority",
    margin: float | None = None,
    alpha: float = 0.05,
    weighting: str = "pooled",
    inconclusive: str = "inconclusive",
    on_missing: str = "error",
    max_errors: int = 0,
    drop_truncated: bool = False,
    allow_unknown: bool = False,
    suite_policy: Policy | None = None,
    input_format: str = "auto",
    import_options=None,
    on_prompt_mismatch: str = "error",
) -> GateReport:
    """Read, pair and gate: ``baseline`` and each of ``candidates`` is a record file or directory,
    or another tool's log (``input_format``, detected per path by default; see
    :mod:`qualgate.importers`, whose ``ImportOptions`` ``import_options`` are).

    Every candidate's flips (:func:`qualgate.flips.find_flips`) are carried into the report.
    Raises :class:`~qualgate.errors.DataError` for invalid or unpairable records and
    ``ValueError`` for invalid settings. See :func:`gate` and :func:`~qualgate.pairing.pair_records`.
    """
    if isinstance(candidates, (str, Path)):
        candidates = [candidates]
    _check_settings(policy, margin if margin is not None else 0.5, alpha, weighting, inconclusive)
    base = _read_side(baseline, input_format, import_options, drop_truncated, allow_unknown)
    pairings, flips = [], []
    for c in candidates:
        cand = _read_side(c, input_format, import_options, drop_truncated, allow_unknown)
        pairings.append(pair_records(base, cand, on_missing=on_missing, max_errors=max_errors,
                                     on_prompt_mismatch=on_prompt_mismatch))  # fmt: skip
        flips.append(find_flips(base, cand))
    return gate(
        pairings, names=_names(candidates), policy=policy, margin=margin, alpha=alpha,
        weighting=weighting, inconclusive=inconclusive, suite_policy=suite_policy, flips=flips,
    )  # fmt: skip


def _read_side(path, input_format, import_options, drop_truncated, allow_unknown):
    from .importers import load_records

    return load_records(path, fmt=input_format, options=import_options, drop_truncated=drop_truncated,
                        allow_unknown=allow_unknown)  # fmt: skip


# ------------------------------------------------------------------------ rendering

def _headers(report: GateReport) -> list[str]:
    tier = ["tier", "margin"] if report.suite_policy else []
    return [
        "candidate", "suite", *tier, "questions", "pairs", "acc B", "acc C", "lost", "gained", "net",
        "no-ans B/C", "p loss", "p NI", f"{1 - 2 * report.alpha:.0%} CI diff (pts)",
        f"loss UB {1 - report.alpha:.0%}", "verdict",
    ]  # fmt: skip


def _row(name, a: Analysis, verdict=None):
    low, high = a.ci_difference
    return [
        name, a.scope, f"{a.questions:,}", f"{a.pairs:,}", fmt_pct(a.accuracy_baseline), fmt_pct(a.accuracy_candidate),
        a.lost, a.gained, f"{a.net:+d}", f"{a.no_answer_baseline}/{a.no_answer_candidate}",
        fmt_p(a.pvalue_loss), fmt_p(a.pvalue_noninferiority),
        f"[{fmt_points(low, sign=True)}, {fmt_points(high, sign=True)}]", fmt_points(a.loss_upper_bound),
        verdict or a.verdict,
    ]  # fmt: skip


def _rows(report: GateReport):
    rows = []
    for c in report.comparisons:
        if report.suite_policy is not None:  # every suite with its tier; blocking verdicts in capitals
            for a, tier, v in zip(c.suites, c.tiers, c.suite_verdicts):
                row = _row(c.name, a, v if tier == "blocking" else v.lower())
                rows.append(row[:2] + [tier, fmt_points(a.margin)] + row[2:])
            row = _row(c.name, c.pooled, c.pooled.verdict.lower())
            rows.append(row[:1] + ["pooled (info)", "—", fmt_points(c.pooled.margin)] + row[2:])
            continue
        if len(c.suites) > 1:
            rows += [_row(c.name, a, a.verdict.lower()) for a in c.suites]
        rows.append(_row(c.name, c.pooled, c.verdict))
    return rows


def _header(report: GateReport) -> str:
    b = report.baseline
    policy = (
        f"non-inferiority, margin {fmt_points(report.margin)} points"
        if report.policy == "noninferiority"
        else f"McNemar (power at a {fmt_points(report.margin)}-point loss)"
    )
    if report.suite_policy is not None:
        policy = f"{report.policy}, per-suite margins and tiers from {report.suite_policy.path}"
    return (
        f"qualgate gate: {policy}, alpha {report.alpha:g} one-sided, suites {report.weighting}\n"
        f"baseline: {b.path} (config {b.config_id}" + (f", mode {b.mode}" if b.mode else "") + ")"
    )


def _decided_by(report: GateReport) -> list[str]:
    """Per side, the share of records each extractor decided (beside the no-answer column)."""
    sides = [("baseline", report.baseline)] + [(c.name, c.candidate) for c in report.comparisons]
    out = []
    for name, side in sides:
        if side.decided_by and side.n_records:
            shares = [f"{label} {fmt_pct(n / side.n_records)}" for label, n in side.decided_by]
            none = side.n_records - sum(n for _, n in side.decided_by)
            shares += [f"none {fmt_pct(none / side.n_records)}"] if none else []
            out.append(f"decided by, {name} ({side.n_records:,} records): {', '.join(shares)}")
    return out


def render_text(report: GateReport) -> str:
    """The aligned text table, the share decided by each extractor, one sentence per candidate
    and any notes."""
    out = [_header(report), "", text_table(_rows(report), _headers(report))]
    out += _decided_by(report) + [""]
    for c in report.comparisons:
        a = c.pooled
        unit = f"; {a.pairs_per_question} pairs per question, design effect {a.design_effect:.2f}" if a.clustered else ""
        out.append(f"{c.name}: {c.verdict}: {c.reason}{unit}.")
        out += [f"  note: {n}" for n in c.notes]
    if report.suite_policy is not None:
        out.append("(policy file: blocking suites decide, in capitals; warning and advisory suites and the "
                   "pooled row are for information)")
    elif any(len(c.suites) > 1 for c in report.comparisons):
        out.append("(per-suite verdicts, in lower case, are for information; the pooled row decides)")
    flipped = [c for c in report.comparisons if c.flips is not None and c.flips.flips]
    if flipped:
        out.append("flips: " + "; ".join(f"{c.name} {len(c.flips.lost)} lost, {len(c.flips.gained)} gained"
                                         for c in flipped) + " (every one: qualgate flips BASELINE CANDIDATE)")
    code = report.exit_code
    out.append(f"verdict: {report.verdict} (exit {code})")
    return "\n".join(out) + "\n"


def render_markdown(report: GateReport) -> str:
    """The report as a markdown section (for ``--markdown`` and the GitHub step summary)."""
    items = list(_decided_by(report))
    for c in report.comparisons:
        items.append(f"**{c.name}**: {c.verdict}: {c.reason}.")
        items += [f"  note: {n}" for n in c.notes]
    page = markdown_section(f"qualgate gate: {report.verdict}", _header(report), _rows(report),
                            _headers(report), items)  # fmt: skip
    for c in report.comparisons:
        if c.flips is not None:
            page += "\n" + render_flips_markdown(c.flips, c.name)
    return page


# ------------------------------------------------------------------------ A/A calibration


@dataclasses.dataclass(frozen=True)
class CalibrationReport:
    """Two runs that should be equivalent (A/A): their discordance and whether they agree.

    ``sample_sizes``: for each loss, the questions a gate would need at the observed
    discordance and at its upper confidence bound: ``mcnemar`` to detect that loss (one-sided
    exact-level normal approximation, power 80%) and ``noninferiority`` to pass with that loss
    as the margin when the true loss is 0. With clusters the pair counts are inflated by the
    design effect and divided by the pairs per question.
    """

    created_at: str
    run_a: Side
    run_b: Side
    alpha: float
    power: float
    questions: int
    pairs: int
    pairs_per_question: int
    clustered: bool
    design_effect: float
    both_correct: int
    a_only: int  #: A correct, B wrong
    b_only: int  #: A wrong, B correct
    both_wrong: int
    accuracy_a: float
    accuracy_b: float
    discordant: float
    discordant_ci: ConfidenceInterval
    pvalue: float  #: two-sided test of no net difference
    test_method: str
    ci_difference: ConfidenceInterval  #: accuracy(B) − accuracy(A), level 1 − alpha
    consistent: bool
    sample_sizes: tuple[dict, ...]
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return int(ExitCode.OK if self.consistent else ExitCode.FAIL)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["run_a"], out["run_b"] = self.run_a.to_dict(), self.run_b.to_dict()
        out["discordant_ci"], out["ci_difference"] = list(self.discordant_ci), list(self.ci_difference)
        out["sample_sizes"], out["notes"] = list(self.sample_sizes), list(self.notes)
        return {"kind": "qualgate.calibration_report", "version": 1, **out, "exit_code": self.exit_code}


def _discordance_ci(discordant_pairs, n, deff, alpha):
    """Clopper-Pearson interval on the effective sample size n/deff (Korn & Graubard 1998)."""
    from scipy import stats

    n_eff = n / deff
    x = discordant_pairs / deff
    low = 0.0 if x <= 0 else float(stats.beta.ppf(alpha / 2, x, n_eff - x + 1))
    high = 1.0 if x >= n_eff else float(stats.beta.ppf(1 - alpha / 2, x + 1, n_eff - x))
    return ConfidenceInterval(low, high)


def calibrate(
    pairing: Pairing,
    *,
    losses: Sequence[float] = (0.01, 0.02, 0.03),
    alpha: float = 0.05,
    power: float = 0.8,
) -> CalibrationReport:
    """A/A calibration of a pairing of two runs that should be equivalent.

    Tests that the net difference is null (two-sided exact McNemar, or the exact sign-flip
    test with several pairs per question); a significant difference (p <= alpha) points at a
    harness or engine bug. Reports the discordant fraction with its 1 − alpha interval and the
    questions a gate needs for each loss in ``losses``.
    """
    alpha = _checks.real("alpha", alpha, low=0.0, high=0.5)
    power = _checks.real("power", power, low=0.5, high=1.0, low_open=False)
    losses = [_checks.real("losses", x, low=0.0, high=1.0) for x in losses]
    clustered = pairing.max_cluster_size > 1
    t = ClusteredTable.from_outcomes(pairing.question, pairing.baseline_correct, pairing.candidate_correct)
    deff = t.design_effect if clustered else 1.0
    if clustered:
        test = clustered_mcnemar(t, alternative="two-sided")
        method = "sign-flip-exact"
    else:
        test = mcnemar(t.lost, t.gained, alternative="two-sided")
        method = "mcnemar-exact"
    psi = (t.lost + t.gained) / t.n
    psi_ci = _discordance_ci(t.lost + t.gained, t.n, deff, alpha)
    ci = clustered_difference_ci(t, confidence_level=1 - alpha, design_effect=None if clustered else 1.0)
    per_q = t.n / t.clusters
    sizes, notes = [], []
    for loss in losses:
        for at, d in (("observed", psi), ("upper", psi_ci.high)):
            used = max(d, loss)
            row = {"loss": loss, "at": at, "discordant": d, "discordant_used": used}
            mc = _questions(
                lambda: _mcnemar_n(loss, used, alpha, power), deff, per_q
            )
            ni = _questions(
                lambda: noninferiority_sample_size(loss, used, alpha=alpha, power=power).n, deff, per_q
            )
            sizes.append(row | {"mcnemar": mc, "noninferiority": ni})
            if used > d:
                note = (f"a loss of {fmt_points(loss)} points makes at least that fraction of pairs "
                        f"discordant, so its sample sizes use a discordance of {fmt_pct(used)}")  # fmt: skip
                if note not in notes:
                    notes.append(note)
    consistent = test.pvalue > alpha
    if not consistent:
        notes.append(
            f"the two runs differ significantly ({_p_is(test.pvalue)}): runs that should be "
            "equivalent are not; look for a harness or engine bug (prompts, seeds, grading, batching)"
        )
    return CalibrationReport(
        _now(), pairing.baseline, pairing.candidate, alpha, power, t.clusters, t.n, t.max_cluster_size,
        clustered, deff, t.both_correct, t.lost, t.gained, t.both_wrong,
        (t.both_correct + t.lost) / t.n, (t.both_correct + t.gained) / t.n, psi, psi_ci,
        test.pvalue, method, ci, consistent, tuple(sizes), tuple(_reading_notes(pairing) + list(pairing.notes) + notes),
    )  # fmt: skip


def _mcnemar_n(loss, discordant, alpha, power):
    from .stats import mcnemar_sample_size

    return mcnemar_sample_size(loss, discordant, alpha=alpha, power=power, alternative="less").n


def _questions(solve, deff, per_question):
    try:
        pairs = solve()
    except ValueError:
        return None
    return math.ceil(pairs * deff / per_question)


def run_calibration(run_a, run_b, *, losses=(0.01, 0.02, 0.03), alpha=0.05, power=0.8, on_missing="error",
                    max_errors=0, drop_truncated=False, allow_unknown=False, input_format="auto",
                    import_options=None, on_prompt_mismatch="error") -> CalibrationReport:  # fmt: skip
    """Read and pair two runs (files, directories or other tools' logs), then :func:`calibrate`."""
    a, b = (_read_side(r, input_format, import_options, drop_truncated, allow_unknown) for r in (run_a, run_b))
    pairing = pair_records(a, b, on_missing=on_missing, max_errors=max_errors, on_prompt_mismatch=on_prompt_mismatch)
    return calibrate(pairing, losses=losses, alpha=alpha, power=power)


def _calibration_rows(r: CalibrationReport):
    rows = []
    for s in r.sample_sizes:
        rows.append([
            fmt_points(s["loss"]), s["at"], fmt_pct(s["discordant_used"], 2),
            f"{s['mcnemar']:,}" if s["mcnemar"] is not None else "—",
            f"{s['noninferiority']:,}" if s["noninferiority"] is not None else "—",
        ])  # fmt: skip
    return rows


_CAL_HEADERS = ["loss (pts)", "discordance", "ψ used", "questions (McNemar)", "questions (non-inferiority)"]


def _calibration_summary(r: CalibrationReport) -> list[str]:
    level = f"{1 - r.alpha:.0%}"
    unit = (
        f", {r.pairs_per_question} pairs per question, design effect {r.design_effect:.2f}" if r.clustered else ""
    )
    low, high = r.discordant_ci
    dlow, dhigh = r.ci_difference
    return [
        f"A: {r.run_a.path} (config {r.run_a.config_id})   B: {r.run_b.path} (config {r.run_b.config_id})",
        f"{r.questions:,} questions, {r.pairs:,} pairs{unit}",
        f"accuracy A {fmt_pct(r.accuracy_a)}, B {fmt_pct(r.accuracy_b)}; A only {r.a_only}, B only {r.b_only}",
        f"discordant {fmt_pct(r.discordant, 2)} ({level} CI {fmt_pct(low, 2)} to {fmt_pct(high, 2)})",
        f"difference B − A {fmt_points(r.accuracy_b - r.accuracy_a, sign=True)} points ({level} CI "
        f"{fmt_points(dlow, sign=True)} to {fmt_points(dhigh, sign=True)}); test of no difference "
        f"({r.test_method}) {_p_is(r.pvalue)}: {'consistent' if r.consistent else 'NOT consistent'}",
    ]


def render_calibration_text(r: CalibrationReport) -> str:
    out = ["qualgate calibrate (A/A)"] + _calibration_summary(r) + [""]
    out.append(text_table(_calibration_rows(r), _CAL_HEADERS))
    out += [f"note: {n}" for n in r.notes]
    return "\n".join(out) + "\n"


def render_calibration_markdown(r: CalibrationReport) -> str:
    out = [f"### qualgate calibrate: {'consistent' if r.consistent else 'NOT consistent'}", ""]
    out += [f"- {line}" for line in _calibration_summary(r)] + [""]
    out.append(markdown_table(_calibration_rows(r), _CAL_HEADERS))
    out += [f"- note: {n}" for n in r.notes]
    return "\n".join(out) + "\n"
