"""A self-contained HTML page for a run directory or a gate: plots, verdicts and the flips.

The page is one file that opens from disk with no network: the figures are inline SVG drawn
by matplotlib (:mod:`qualgate.report.plots`), the style and the flips filter are inline, nothing is
fetched. It reads well in light and dark mode (``prefers-color-scheme``) and when printed.

Its title is the finding (:func:`finding`: the failing candidates and their loss bounds, then
the inconclusive ones, then those that pass), not a run id. What it shows, in order:

1. the verdict table with each candidate's reason and speed-up with its interval (named by its
   achieved level, as everywhere on the page), then the warnings the run logged about the
   speed-ups and each interval that includes 1.0;
2. a forest plot per candidate of the loss interval per suite and pooled, the margin drawn;
3. speed-up (with its interval where the run measured one) against the loss upper bound;
4. the mean acceptance length per speculative config;
5. for a sequential run, the always-valid bounds of the loss against the questions used;
6. the A/A check: the discordance of each lossless candidate with the baseline
   (:func:`qualgate.verdict.calibration.calibrate`), where the run has one;
7. the flips: every question a candidate lost or gained against the baseline, a FAIL
   candidate's first (all of them listed before "show more"), with the gold answer; opened, a
   flip shows the prompt and both outputs at the table's full width (side by side where two fit,
   else stacked), the extracted answers highlighted and the first difference outlined;
   filterable by candidate, suite and direction;
8. provenance: config ids, versions, GPU, git revision, seeds.

:func:`run_html` builds the page from a run directory (``qualgate report DIR --html``);
:func:`gate_html` from a gate report and its record files (``qualgate gate ... --html``). The
statistics are never recomputed for the verdicts: they come from the gate report. Only the
sequential trajectory (the bounds at earlier looks) is recomputed from the records with the
same public test, and the A/A discordance with :func:`qualgate.verdict.calibration.calibrate`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qualgate.evidence.contract import FixedCandidate, SequentialCandidate, Verdict
from qualgate.evidence.gate_report import Evidence
from qualgate.formatting import fmt_points
from qualgate.report.divergence import audit_rows
from qualgate.report.page import MAX_OUTPUT_CHARS, HtmlReport, PageFlip, render_html
from qualgate.verdict.divergence import divergence_audit

__all__ = [
    "MAX_OUTPUT_CHARS",
    "HtmlReport",
    "PageFlip",
    "collect_flips",
    "gate_html",
    "finding",
    "headline",
    "natural_key",
    "render_html",
    "run_html",
]

#: flips listed per candidate; more are counted in the page but not listed
MAX_FLIPS_PER_CANDIDATE = 2000
#: looks at which the sequential bounds are drawn
SEQUENTIAL_LOOKS = 40


# ----------------------------------------------------------------------------- flips


def natural_key(text: str) -> tuple:
    """Sort key reading digit runs as numbers: ``test-0-2`` before ``test-0-13`` before ``test-0-100``."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text)))


def collect_flips(baseline, candidate, name: str, prompts: Mapping | None = None) -> list[PageFlip]:
    """Every pair (same suite, question, seed, sample) that one side got right and the other not.

    ``baseline`` and ``candidate`` are record sequences; pairs with an ``error`` on either
    side are not flips (the gate report counts them). ``prompts`` maps (suite, question id)
    to the prompt text.
    """
    from qualgate.verdict.flips import find_flips

    flips = [
        PageFlip(name, f, (prompts or {}).get((f.suite, f.question_id))) for f in find_flips(baseline, candidate).flips
    ]
    flips.sort(
        key=lambda p: (
            p.flip.kind != "lost",
            p.flip.suite,
            natural_key(p.flip.question_id),
            p.flip.seed,
            p.flip.sample_index,
        )
    )
    return flips


# ---------------------------------------------------------------------- from reports


def _interval(label, analysis: Mapping, verdict=None, pooled=False):
    from qualgate.report.plots import Interval

    low_d, high_d = analysis["ci_difference"]
    return Interval(label, 100 * analysis["loss"], -100 * high_d, -100 * low_d, verdict, pooled)


def _forest(gate: Evidence) -> list:
    """Forest rows: per candidate, each suite and (with several suites) the pooled scope."""
    rows = []
    for c in gate.candidates:
        if not isinstance(c, FixedCandidate) or c.pooled is None:  # sequential: no fixed-n intervals
            continue
        rows += [_interval(f"{c.name} · {a['scope']}", a, a.get("verdict")) for a in c.suites]
        if len(c.suites) != 1:
            rows.append(_interval(f"{c.name} · pooled", c.pooled, c.verdict, pooled=True))
    return rows


def _plus_zero(x):
    """``x`` with a negative zero written as zero (a loss of "-0.00" points reads as a gain)."""
    return None if x is None else x + 0.0


def _loss(c) -> float | None:
    """The observed loss: the pooled scope's (fixed design) or over the questions used (sequential)."""
    if isinstance(c, FixedCandidate):
        return (c.pooled or {}).get("loss")
    return c.loss


def _verdict_rows(
    gate: Evidence, summaries: Mapping[str, Any], baseline: Mapping | None = None, speed: Mapping | None = None
) -> list[dict]:
    """One row per candidate, after the baseline's (``baseline``: its name and accuracy); ``speed``:
    the manifest's interleaved speed results, whose warnings the rows carry."""
    rows = []
    if baseline is not None:
        rows.append(
            {
                "name": baseline["name"],
                "mode": gate.baseline.mode,
                "verdict": "baseline",
                "loss": None,
                "loss_upper": None,
                "accuracy": baseline["accuracy"],
                "speedup": None,
                "reason": "the configuration every candidate is compared with",
            }
        )
    for c in gate.candidates:
        s = summaries.get(c.name)
        rows.append(
            {
                "name": c.name,
                "mode": c.mode,
                "verdict": c.verdict,
                "loss": _plus_zero(_loss(c)),
                "loss_upper": _plus_zero(c.loss_upper_bound),
                "accuracy": getattr(s, "accuracy", None),
                "speedup": getattr(s, "speedup", None),
                "speedup_ci": getattr(s, "speedup_ci", None),
                "speed_warning": ((speed or {}).get(c.name) or {}).get("warning"),
                "reason": c.reason or "",
            }
        )
    return rows


def _accuracy(records) -> float | None:
    """Correct among the graded records (``error`` ones left out), as the run report counts it."""
    graded = [r for r in records if r.outcome not in ("error", "judge_error")]
    return sum(r.outcome == "correct" for r in graded) / len(graded) if graded else None


def finding(gate: Evidence) -> str:
    """The page's title, the finding in one line: ``fly-aggressive may lose up to 13.00 points:
    FAIL; fly-w2 and standard pass`` (failing candidates, then inconclusive ones, then those that pass)."""

    def names(cs):
        cs = [c.name for c in cs]
        return cs[0] if len(cs) == 1 else f"{', '.join(cs[:-1])} and {cs[-1]}"

    def bound(c):
        ub = c.loss_upper_bound
        return "" if ub is None or not math.isfinite(ub) else f" may lose up to {fmt_points(ub)} points"

    if not gate.candidates:
        return f"{gate.verdict}: no candidates"
    parts = [f"{c.name}{bound(c)}: {c.verdict}" for c in gate.candidates if c.verdict == Verdict.FAIL]
    parts += [f"{c.name}{bound(c)}: {c.verdict}" for c in gate.candidates if c.verdict == Verdict.INCONCLUSIVE]
    passed = [c for c in gate.candidates if c.verdict == Verdict.PASS]
    if passed:
        parts.append(f"{names(passed)} pass{'es' if len(passed) == 1 else ''}")
    return "; ".join(parts)


def headline(gate: Evidence) -> str:
    """The page's first line: the verdict and the worst candidate (FAIL before INCONCLUSIVE
    before PASS, then the highest loss upper bound)."""
    rank = {Verdict.FAIL: 0, Verdict.INCONCLUSIVE: 1, Verdict.PASS: 2}
    if not gate.candidates:
        return f"Verdict {gate.verdict}: no candidates."

    def key(c):
        ub = c.loss_upper_bound
        return rank.get(c.verdict, 1), -(ub if ub is not None and math.isfinite(ub) else math.inf)

    worst = min(gate.candidates, key=key)
    bound = "" if worst.loss_upper_bound is None else f", loss at most {fmt_points(worst.loss_upper_bound)} points"
    return (
        f"Verdict {gate.verdict}. Worst candidate: {worst.name} ({worst.verdict}{bound}; "
        f"margin {fmt_points(gate.settings.margin)} points)."
    )


def _sequential_paths(gate: Evidence, pairings: Mapping[str, Any]) -> list[dict]:
    """The always-valid bounds at up to :data:`SEQUENTIAL_LOOKS` looks, per candidate."""
    import numpy as np

    from qualgate.stats import sequential_noninferiority
    from qualgate.verdict.sequential import arrival_order, question_differences

    if gate.design != SequentialCandidate.DESIGN:
        return []
    s = gate.settings
    split = s.multiplicity == "bonferroni"
    alpha_each = s.alpha / max(1, len(gate.candidates)) if split else s.alpha
    paths = []
    for c in gate.candidates:
        p = pairings.get(c.name)
        if p is None or not c.questions_used:
            continue
        if s.order == "seeded":
            order = arrival_order(p.question_keys, seed=s.order_seed or 0)
        else:
            order = np.arange(p.n_questions)
        d = question_differences(p, order)[: c.questions_used]
        looks = sorted({int(x) for x in np.linspace(1, d.size, min(SEQUENTIAL_LOOKS, d.size))})
        low, high = [], []
        for k in looks:
            r = sequential_noninferiority(d[:k], margin=s.margin, alpha=alpha_each, power=s.power, max_questions=k)
            low.append(100 * r.lower_bound)
            high.append(100 * r.upper_bound)
        paths.append({"label": c.name, "questions": looks, "low": low, "high": high, "verdict": c.verdict})
    return paths


def _calibrations(pairings: Mapping[str, Any], lossless: Sequence[str]) -> list[dict]:
    from qualgate.verdict.calibration import calibrate

    out = []
    for name in lossless:
        p = pairings.get(name)
        if p is None or p.n_pairs == 0:
            continue
        r = calibrate(p)
        out.append({"name": name, "report": r})
    return out


def _flip_counts(flips: Sequence[PageFlip]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for f in flips:
        c = counts.setdefault(f.candidate, {"lost": 0, "gained": 0})
        c[f.flip.kind] += 1
    return counts


def _capped(flips: list[PageFlip]) -> list[PageFlip]:
    seen: dict[str, int] = {}
    out = []
    for f in flips:
        seen[f.candidate] = seen.get(f.candidate, 0) + 1
        if seen[f.candidate] <= MAX_FLIPS_PER_CANDIDATE:
            out.append(f)
    return out


def _prompt_text(question) -> str:
    return "\n\n".join(f"[{m.get('role', '?')}] {m.get('content', '')}" for m in question.prompt)


def _prompts(manifest: Mapping) -> tuple[dict, list[str]]:
    """(suite, question id) -> prompt text, from the run's suites; notes on what failed."""
    from qualgate.suites import load_suite

    prompts, notes = {}, []
    for ref in manifest.get("plan", {}).get("suites", []):
        try:
            suite = load_suite(
                ref["suite"], data_files=ref.get("data_file"), revision=ref.get("revision"), limit=ref.get("limit")
            )
        except Exception as exc:  # noqa: BLE001 - the page says why the prompts are missing
            notes.append(f"prompts of suite {ref['suite']} not shown: it could not be loaded ({exc})")
            continue
        for q in suite.questions:
            prompts[(suite.name, q.id)] = _prompt_text(q)
    return prompts, notes


def _speed_points(gate: Evidence, summaries: Mapping[str, Any]) -> list[dict]:
    points = []
    for c in gate.candidates:
        s = summaries.get(c.name)
        if s is None or s.speedup is None or c.loss_upper_bound is None:
            continue
        ci = s.speedup_ci or (None, None)
        points.append(
            {
                "label": c.name,
                "loss_upper": 100 * c.loss_upper_bound,
                "speedup": s.speedup,
                "speedup_low": ci[0],
                "speedup_high": ci[1],
                "verdict": c.verdict,
            }
        )
    return points


def run_html(out: str | Path) -> str:
    """The page of a run directory written by ``qualgate run`` (or ``qualgate demo``)."""
    from qualgate.errors import DataError
    from qualgate.report.run import summarize
    from qualgate.run.manifest import read_manifest
    from qualgate.verdict.pairing import load_side, pair_records

    out = Path(out)
    report = summarize(out)
    manifest = read_manifest(out)
    gate = report.evidence
    if gate is None:
        raise DataError("the run has no gate report yet (continue it with --resume)", file=str(out / "gate.json"))
    records = {
        name: load_side(out / entry["records"], drop_truncated=True) for name, entry in manifest["configs"].items()
    }
    base = report.baseline
    prompts, notes = _prompts(manifest)
    flips, pairings = [], {}
    for c in gate.candidates:
        name = c.name
        flips += collect_flips(records[base].records, records[name].records, name, prompts)
        try:
            pairings[name] = pair_records(records[base], records[name], on_missing="drop", max_errors=10**9)
        except DataError as exc:
            notes.append(f"{name}: records could not be paired for the A/A and sequential plots ({exc})")
    from qualgate.report.run import chain_lines

    notes += chain_lines(report)
    summaries = {c.name: c for c in report.configs}
    lossless = [c.name for c in report.configs if c.role == "candidate" and not c.lossy]
    provenance = _provenance(manifest)
    speed = manifest.get("speed") or {}
    subtitle = (
        f"plan {report.plan} ({report.status}); baseline {base}; {gate.settings.policy}"
        f"{' (sequential)' if gate.design == 'sequential' else ''}, margin "
        f"{fmt_points(report.margin)} points, alpha {report.alpha:g}; verdict {gate.verdict}"
    )
    return render_html(
        HtmlReport(
            title=finding(gate),
            subtitle=subtitle,
            headline=headline(gate),
            margin=100 * report.margin,
            verdicts=_verdict_rows(
                gate, summaries, {"name": base, "accuracy": summaries[base].accuracy}, speed.get("results")
            ),
            forest=_forest(gate),
            speed=_speed_points(gate, summaries),
            acceptance=[(c.name, c.acceptance_length) for c in report.configs if c.acceptance_length],
            sequential=_sequential_paths(gate, pairings),
            calibration=_calibrations(pairings, lossless),
            flips=_capped(flips),
            flip_counts=_flip_counts(flips),
            provenance=provenance,
            notes=notes,
            divergence=audit_rows(report.divergence),
            # the achieved level (order statistics give discrete levels), the same for every candidate
            speed_level=next((r.get("confidence_level") for r in (speed.get("results") or {}).values()), None),
        )
    )


def gate_html(gate: Evidence | Mapping, baseline, candidates: Sequence, **read) -> str:
    """The page of ``qualgate gate``: ``gate`` is the report (or its dict), ``baseline`` and
    ``candidates`` the record paths (or other tools' logs) it was decided on (in the report's
    order); ``read``: :func:`qualgate.records.importers.load_records`'s options."""
    from qualgate.errors import DataError
    from qualgate.records.importers import load_records
    from qualgate.verdict.pairing import pair_records

    if not isinstance(gate, Evidence):
        gate = Evidence.from_dict(gate)
    base = load_records(baseline, **read)
    flips, pairings, notes, audits = [], {}, [], []
    for c, path in zip(gate.candidates, candidates):
        cand = load_records(path, **read)
        flips += collect_flips(base.records, cand.records, c.name)
        audits.append((c.name, divergence_audit(base.records, cand.records)))
        try:
            pairings[c.name] = pair_records(base, cand, on_missing="drop", max_errors=10**9)
        except DataError as exc:
            notes.append(f"{c.name}: records could not be paired for the sequential plot ({exc})")
    design = " (sequential)" if gate.design == "sequential" else ""
    s = gate.settings
    subtitle = (
        f"baseline {gate.baseline.path or '?'} (config {gate.baseline.config_id}); "
        f"{s.policy}{design}, margin {fmt_points(s.margin)} points, "
        f"alpha {s.alpha:g}; verdict {gate.verdict}"
    )
    provenance = [
        ("qualgate", str(gate.qualgate_version)),
        ("created", str(gate.created_at)),
        ("baseline config id", str(gate.baseline.config_id)),
    ]
    provenance += [(f"config id of {c.name}", str(c.config_id)) for c in gate.candidates]
    return render_html(
        HtmlReport(
            title=finding(gate),
            subtitle=subtitle,
            headline=headline(gate),
            margin=100 * s.margin,
            verdicts=_verdict_rows(gate, {}, {"name": "baseline", "accuracy": _accuracy(base.records)}),
            forest=_forest(gate),
            speed=[],
            acceptance=[],
            sequential=_sequential_paths(gate, pairings),
            calibration=[],
            flips=_capped(flips),
            flip_counts=_flip_counts(flips),
            provenance=provenance,
            notes=notes,
            divergence=audit_rows(audits),
        )
    )


def _provenance(manifest: Mapping) -> list[tuple[str, str]]:
    plan = manifest.get("plan", {})
    rows = [
        ("run id", manifest.get("run_id", "?")),
        ("status", manifest.get("status", "?")),
        ("started", str(manifest.get("started_at"))),
        ("finished", str(manifest.get("ended_at") or "not yet")),
        ("seeds", ", ".join(map(str, plan.get("seeds", [])))),
        ("samples", str(plan.get("samples"))),
    ]
    for s in manifest.get("suites", []):
        rows.append((f"suite {s.get('name')}", json.dumps({k: v for k, v in s.items() if k != "name"})))
    for name, c in manifest.get("configs", {}).items():
        spec = (plan.get("configs", {}).get(name) or {}).get("speculative")
        rows.append((f"config {name}", f"{c.get('config_id')} ({c.get('mode')}) {json.dumps(spec) if spec else ''}"))
    for key in ("git", "host", "gpu", "packages"):
        if manifest.get(key):
            rows.append((key, json.dumps(manifest[key])))
    return rows
