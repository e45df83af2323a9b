"""A/A calibration: two runs that should be equivalent, their discordance and whether they agree.

:func:`calibrate` tests that the net difference of a pairing is null (a significant difference
points at a harness or engine bug), reports the discordant fraction with its Clopper-Pearson
interval (:func:`qualgate.stats.discordance_interval`) and the questions a gate needs for each
loss at that discordance; :func:`run_calibration` goes from paths to a
:class:`CalibrationReport`, which :func:`render_calibration_text` and
:func:`render_calibration_markdown` render (``qualgate calibrate``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from qualgate.errors import ExitCode
from qualgate.evidence.gate_report import now
from qualgate.formatting import fmt_p_is, fmt_pct, fmt_points, markdown_table, text_table
from qualgate.stats import (
    ClusteredTable,
    ConfidenceInterval,
    checks,
    clustered_difference_ci,
    clustered_mcnemar,
    discordance_interval,
    mcnemar,
    mcnemar_sample_size,
    noninferiority_sample_size,
)
from qualgate.verdict.fixed import _reading_notes
from qualgate.verdict.pairing import Pairing, Side, pair_records

__all__ = [
    "CalibrationReport",
    "PilotDiscordance",
    "pilot_discordance",
    "calibrate",
    "render_calibration_markdown",
    "render_calibration_text",
    "run_calibration",
]


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
    alpha = checks.real("alpha", alpha, low=0.0, high=0.5)
    power = checks.real("power", power, low=0.5, high=1.0, low_open=False)
    losses = [checks.real("losses", x, low=0.0, high=1.0) for x in losses]
    t, clustered, deff, psi, psi_ci = _discordance(pairing, alpha)
    if clustered:
        test = clustered_mcnemar(t, alternative="two-sided")
        method = "sign-flip-exact"
    else:
        test = mcnemar(t.lost, t.gained, alternative="two-sided")
        method = "mcnemar-exact"
    ci = clustered_difference_ci(t, confidence_level=1 - alpha, design_effect=None if clustered else 1.0)
    per_q = t.n / t.clusters
    sizes, notes = [], []
    for loss in losses:
        for at, d in (("observed", psi), ("upper", psi_ci.high)):
            used = max(d, loss)
            row = {"loss": loss, "at": at, "discordant": d, "discordant_used": used}
            mc = _questions(
                lambda loss=loss, used=used: (
                    mcnemar_sample_size(loss, used, alpha=alpha, power=power, alternative="less").n
                ),
                deff,
                per_q,
            )
            ni = _questions(
                lambda loss=loss, used=used: noninferiority_sample_size(loss, used, alpha=alpha, power=power).n,
                deff,
                per_q,
            )
            sizes.append(row | {"mcnemar": mc, "noninferiority": ni})
            if used > d:
                note = (
                    f"a loss of {fmt_points(loss)} points makes at least that fraction of pairs "
                    f"discordant, so its sample sizes use a discordance of {fmt_pct(used)}"
                )
                if note not in notes:
                    notes.append(note)
    consistent = test.pvalue > alpha
    if not consistent:
        notes.append(
            f"the two runs differ significantly ({fmt_p_is(test.pvalue)}): runs that should be "
            "equivalent are not; look for a harness or engine bug (prompts, seeds, grading, batching)"
        )
    return CalibrationReport(
        now(),
        pairing.baseline,
        pairing.candidate,
        alpha,
        power,
        t.clusters,
        t.n,
        t.max_cluster_size,
        clustered,
        deff,
        t.both_correct,
        t.lost,
        t.gained,
        t.both_wrong,
        (t.both_correct + t.lost) / t.n,
        (t.both_correct + t.gained) / t.n,
        psi,
        psi_ci,
        test.pvalue,
        method,
        ci,
        consistent,
        tuple(sizes),
        tuple(_reading_notes(pairing) + list(pairing.notes) + notes),
    )


def _discordance(pairing: Pairing, alpha: float):
    """(table, clustered, design effect, ψ, its 1 − alpha interval) of a pairing."""
    clustered = pairing.max_cluster_size > 1
    t = ClusteredTable.from_outcomes(pairing.question, pairing.baseline_correct, pairing.candidate_correct)
    deff = t.design_effect if clustered else 1.0
    psi = (t.lost + t.gained) / t.n
    psi_ci = discordance_interval(t.lost + t.gained, t.n, design_effect=deff, confidence_level=1 - alpha)
    return t, clustered, deff, psi, psi_ci


def _questions(solve, deff, per_question):
    try:
        pairs = solve()
    except ValueError:
        return None
    return math.ceil(pairs * deff / per_question)


def run_calibration(
    run_a,
    run_b,
    *,
    losses=(0.01, 0.02, 0.03),
    alpha=0.05,
    power=0.8,
    on_missing="error",
    max_errors=0,
    drop_truncated=False,
    allow_unknown=False,
    input_format="auto",
    import_options=None,
    on_prompt_mismatch="error",
) -> CalibrationReport:
    """Read and pair two runs (files, directories or other tools' logs), then :func:`calibrate`."""
    pairing = _read_pairing(
        run_a,
        run_b,
        on_missing=on_missing,
        max_errors=max_errors,
        drop_truncated=drop_truncated,
        allow_unknown=allow_unknown,
        input_format=input_format,
        import_options=import_options,
        on_prompt_mismatch=on_prompt_mismatch,
    )
    return calibrate(pairing, losses=losses, alpha=alpha, power=power)


def _read_pairing(
    run_a,
    run_b,
    *,
    on_missing="error",
    max_errors=0,
    drop_truncated=False,
    allow_unknown=False,
    input_format="auto",
    import_options=None,
    on_prompt_mismatch="error",
) -> Pairing:
    """:func:`run_calibration`'s reading: two runs, read and paired."""
    from qualgate.records.importers import load_records

    a, b = (
        load_records(
            r, fmt=input_format, options=import_options, drop_truncated=drop_truncated, allow_unknown=allow_unknown
        )
        for r in (run_a, run_b)
    )
    return pair_records(a, b, on_missing=on_missing, max_errors=max_errors, on_prompt_mismatch=on_prompt_mismatch)


def _calibration_rows(r: CalibrationReport):
    rows = []
    for s in r.sample_sizes:
        rows.append(
            [
                fmt_points(s["loss"]),
                s["at"],
                fmt_pct(s["discordant_used"], 2),
                f"{s['mcnemar']:,}" if s["mcnemar"] is not None else "—",
                f"{s['noninferiority']:,}" if s["noninferiority"] is not None else "—",
            ]
        )
    return rows


_CAL_HEADERS = ["loss (pts)", "discordance", "ψ used", "questions (McNemar)", "questions (non-inferiority)"]


def _calibration_summary(r: CalibrationReport) -> list[str]:
    level = f"{1 - r.alpha:.0%}"
    unit = f", {r.pairs_per_question} pairs per question, design effect {r.design_effect:.2f}" if r.clustered else ""
    low, high = r.discordant_ci
    dlow, dhigh = r.ci_difference
    return [
        f"A: {r.run_a.path} (config {r.run_a.config_id})   B: {r.run_b.path} (config {r.run_b.config_id})",
        f"{r.questions:,} questions, {r.pairs:,} pairs{unit}",
        f"accuracy A {fmt_pct(r.accuracy_a)}, B {fmt_pct(r.accuracy_b)}; A only {r.a_only}, B only {r.b_only}",
        f"discordant {fmt_pct(r.discordant, 2)} ({level} CI {fmt_pct(low, 2)} to {fmt_pct(high, 2)})",
        f"difference B − A {fmt_points(r.accuracy_b - r.accuracy_a, sign=True)} points ("
        + (
            f"{level} CI {fmt_points(dlow, sign=True)} to {fmt_points(dhigh, sign=True)}"
            if not _uninformative(dlow, dhigh)
            else f"too few questions ({r.questions}) for an interval: at {level} it spans every difference possible"
        )
        + f"); test of no difference ({r.test_method}) {fmt_p_is(r.pvalue)}: "
        f"{'consistent' if r.consistent else 'NOT consistent'}",
    ]


def _uninformative(low: float, high: float) -> bool:
    """An interval of the accuracy difference that covers (nearly) all of [-1, 1] says
    nothing: too few questions.

    >>> _uninformative(-1.0, 1.0), _uninformative(-0.3, 0.2)
    (True, False)
    """
    return high - low >= 1.9


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


@dataclasses.dataclass(frozen=True)
class PilotDiscordance:
    """The discordance ψ of a pilot or a stored A/A run of the design a gate will run (for
    ``qualgate power --discordance-from`` and ``qualgate sweep --discordance-from``): measured
    on the pairs of two record sets, with its 1 − alpha Clopper-Pearson interval (the design
    effect applied) and what converts pairs to questions."""

    paths: tuple[str, str]
    pairs: int
    questions: int
    pairs_per_question: float
    design_effect: float
    discordant: float
    interval: ConfidenceInterval
    bound: str  #: ``estimate`` or ``upper``: the value :attr:`value` sizes with

    @property
    def value(self) -> float:
        return self.discordant if self.bound == "estimate" else self.interval.high

    def questions_for(self, pairs: int) -> int:
        """Questions holding ``pairs`` independent-equivalent pairs (design effect over pairs per question)."""
        return math.ceil(pairs * self.design_effect / self.pairs_per_question)

    def describe(self) -> str:
        used = "the estimate" if self.bound == "estimate" else "the interval's upper end"
        clusters = (
            f"; {self.pairs_per_question:g} pairs per question, design effect {self.design_effect:.2f}"
            if self.pairs_per_question > 1
            else ""
        )
        return (
            f"discordance from {self.paths[0]} and {self.paths[1]}: {fmt_pct(self.discordant, 2)} of "
            f"{self.pairs:,} pairs ({self.questions:,} questions{clusters}), interval "
            f"[{fmt_pct(self.interval.low, 2)}, {fmt_pct(self.interval.high, 2)}]; sized with {used}"
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"value": self.value}


def pilot_discordance(run_a, run_b, *, alpha: float = 0.05, bound: str = "estimate", **read) -> PilotDiscordance:
    """ψ of two record sets (``run_a`` the baseline's: files, directories or other tools' logs;
    ``read``: :func:`run_calibration`'s reading options), for sizing a gate of that design."""
    if bound not in ("estimate", "upper"):
        raise ValueError(f"bound must be 'estimate' or 'upper', got {bound!r}")
    # calibrate()'s discordance alone (not its test and interval of the difference: issue 47,
    # `qualgate power --discordance-from` answers at once)
    alpha = checks.real("alpha", alpha, low=0.0, high=0.5)
    t, _, deff, psi, psi_ci = _discordance(_read_pairing(run_a, run_b, **read), alpha)
    return PilotDiscordance((str(run_a), str(run_b)), t.n, t.clusters, t.n / t.clusters, deff, psi, psi_ci, bound)
