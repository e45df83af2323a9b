"""One comparison scope's statistics and the decision rule: layers 2 and 3 of the gate.

:func:`analyze` computes, from one :class:`~qualgate.stats.ClusteredTable` (a suite, or all
suites pooled), everything a verdict rests on: the loss and its interval, the
non-inferiority test of the gate's policy (with one pair per question the exact
unconditional test, ``ONE_SEED_METHOD``; with several the robust clustered score test), the
loss test, the power and the questions a decision would still need. :func:`decide` is the
rule, a pure (vectorised) function of two p-values. :mod:`qualgate.verdict.fixed` applies them to
candidates (Holm's adjustment, exit codes); the policies are documented there.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from qualgate.config.options import POLICIES
from qualgate.evidence.contract import Verdict
from qualgate.formatting import fmt_p_is, fmt_pct, fmt_points
from qualgate.stats import (
    ClusteredTable,
    ConfidenceInterval,
    checks,
    clustered_difference_ci,
    clustered_mcnemar,
    clustered_noninferiority,
    mcnemar,
    mcnemar_power,
    noninferiority,
    noninferiority_sample_size,
    one_seed_bound,
    stratified_score_test,
)

__all__ = ["FAIL", "INCONCLUSIVE", "ONE_SEED_METHOD", "PASS", "Analysis", "analyze", "decide"]

PASS, FAIL, INCONCLUSIVE = (
    Verdict.PASS,
    Verdict.FAIL,
    Verdict.INCONCLUSIVE,
)  #: :class:`~qualgate.evidence.contract.Verdict`
_TARGET_POWER = 0.8
#: Non-inferiority test with one pair per question: the exact unconditional test, whose size
#: is at most alpha at every n and discordance (the asymptotic score test's reaches 0.068 at
#: n = 133 and 2 % discordance). Its power is within a point of the score test's from a few
#: hundred questions on (benchmarks/gate_calibration.py). Above 2,000 pairs it is the
#: continuity-corrected score test ("score-cc", result method), whose size is enumerated in
#: benchmarks/results/exact_switch.txt; it costs microseconds at any n.
ONE_SEED_METHOD = "exact"
METHOD_NAMES = {
    "exact": "exact unconditional score test (Hsueh et al. 2001)",
    "score-cc": "continuity-corrected score test (above 2,000 pairs; size enumerated)",
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
    Verdict or ndarray of str
        :class:`~qualgate.evidence.contract.Verdict` ``PASS``, ``FAIL`` or ``INCONCLUSIVE``
        (an array of their names for array input).

    Examples
    --------
    >>> decide("noninferiority", pvalue_noninferiority=0.01, pvalue_loss=0.6, alpha=0.05)
    <Verdict.PASS: 'PASS'>
    >>> decide("noninferiority", pvalue_noninferiority=0.4, pvalue_loss=0.01, alpha=0.05)
    <Verdict.FAIL: 'FAIL'>
    >>> decide("mcnemar", pvalue_noninferiority=None, pvalue_loss=0.2, alpha=0.05)
    <Verdict.PASS: 'PASS'>
    """
    checks.choice("policy", policy, POLICIES)
    loss_significant = np.asarray(pvalue_loss) <= alpha
    if policy == "mcnemar":
        out = np.where(loss_significant, FAIL.value, PASS.value)
    else:
        out = np.where(
            np.asarray(pvalue_noninferiority) < alpha,
            PASS.value,
            np.where(loss_significant, FAIL.value, INCONCLUSIVE.value),
        )
    return Verdict(str(out)) if out.ndim == 0 else out


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
    verdict: Verdict
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
    # in the unit of the test: pairs, or questions weighted equally where their sizes differ
    each = [
        t.accuracies() if clustered else ((t.both_correct + t.lost) / t.n, (t.both_correct + t.gained) / t.n)
        for t in tables
    ]
    if w is None:
        acc_b, acc_c = each[0]
    else:
        acc_b = float(sum(wi * a for wi, (a, _) in zip(w, each)))
        acc_c = float(sum(wi * c for wi, (_, c) in zip(w, each)))
    target = tables[0] if w is None else tables
    if clustered or w is not None:
        ni = clustered_noninferiority(target, margin=margin, alpha=alpha, weights=w, design_effect=deff_arg)
        deff = ni.design_effect
    else:  # one pair per question: the exact test (ONE_SEED_METHOD)
        t = tables[0]
        ni = noninferiority(
            t.both_correct, t.lost, t.gained, t.both_wrong, margin=margin, alpha=alpha, method=ONE_SEED_METHOD
        )
        deff = 1.0
    if clustered or w is not None:
        ci = clustered_difference_ci(target, confidence_level=1 - 2 * alpha, weights=w, design_effect=deff_arg)
    else:  # the one-seed test inverted on both sides: the interval's lower end is minus the bound
        t = tables[0]
        ci = ConfidenceInterval(-ni.upper_bound, one_seed_bound(t.gained, t.lost, t.n, alpha))
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
    reason += f" [{METHOD_NAMES.get(decisive, decisive)}]"
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
            "interval": (
                "tango" + ("-clustered-robust" if clustered else "") + ("-stratified" if w is not None else "")
                if clustered or w is not None
                else ni_method + "-inverted"
            ),
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
        else (
            "; the observed loss is at or above the margin, so more questions will not help unless it shrinks"
            if more is None
            else ""
        )
    )
    return (
        f"the observed loss ({loss} points) is not significant, but its {level} upper bound ({ub} points) is not "
        f"below the {m}-point margin{tail}"
    )


# ------------------------------------------------------------------------ candidates
