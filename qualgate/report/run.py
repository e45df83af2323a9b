"""The report of a run directory: per config, quality and speed side by side with the gate.

:func:`summarize` reads ``OUT/manifest.json``, ``OUT/records/*.jsonl`` and ``OUT/gate.json``
(written by :func:`qualgate.run.runner.run_plan`) and returns a :class:`RunReport`; it never
recomputes statistics (the verdicts come from ``gate.json``). Per config:

- accuracy per suite (correct / graded; ``error`` records are excluded and counted apart),
- the no-answer rate (nothing could be extracted; counted as incorrect in accuracy),
- the mean acceptance length, ``1 + accepted / drafting steps`` (speculative configs),
- output tokens per second of engine time and the speed-up over the baseline's: with the
  run's interleaved speed rounds (``run --speed-rounds``), each config's median tokens/s over
  the rounds and the median of per-round ratios with its confidence interval
  (:mod:`qualgate.run.speed`), so both columns come from one measurement; otherwise the ratio of the two configs'
  tokens/s over the whole run, timed at different moments (``speedup_ci`` is then ``None``),
- for candidates: the gate's verdict and the upper confidence bound of the loss;
- below the table, each candidate's divergence audit against the baseline
  (:mod:`qualgate.verdict.divergence`) and, for a chained plan, the claim against target-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualgate.evidence.contract import Candidate
from qualgate.evidence.gate_report import Evidence
from qualgate.formatting import fmt_pct, fmt_points, markdown_table, text_table

__all__ = ["ConfigSummary", "RunReport", "render_markdown", "render_text", "summarize"]


@dataclass(frozen=True)
class ConfigSummary:
    """One config's row of the report."""

    name: str
    config_id: str
    mode: str
    lossy: bool
    role: str  #: ``baseline``, ``candidate`` or ``other``
    records: int
    errors: int
    suites: dict[str, dict[str, Any]]  #: suite -> n, correct, accuracy, no_answer_rate, errors
    accuracy: float | None
    no_answer_rate: float | None
    acceptance_length: float | None
    tokens_per_s: float | None
    speedup: float | None
    speedup_ci: tuple[float, float] | None = None  #: with interleaved speed rounds
    verdict: str | None = None
    loss_upper: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunReport:
    """Everything ``qualgate report`` prints."""

    out: str
    run_id: str
    plan: str
    status: str
    baseline: str
    margin: float
    alpha: float
    suites: tuple[str, ...]
    configs: tuple[ConfigSummary, ...]
    gate: dict[str, Any] = field(default_factory=dict)  #: the manifest's gate entry, with the report's content
    evidence: Evidence | None = None  #: ``gate.json``, when the gate decided
    #: ``(candidate, DivergenceAudit)`` per candidate (:mod:`qualgate.verdict.divergence`)
    divergence: tuple = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "run_id": self.run_id,
            "plan": self.plan,
            "status": self.status,
            "baseline": self.baseline,
            "margin": self.margin,
            "alpha": self.alpha,
            "suites": list(self.suites),
            "configs": [c.to_dict() for c in self.configs],
            "gate": self.gate,
            "divergence": {name: a.to_dict() for name, a in self.divergence},
        }


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _scan(path: Path):
    """Per-suite counts and speculative totals of one records file (no pairing)."""
    from qualgate.records import read_records

    suites: dict[str, dict[str, int]] = {}
    steps = accepted = records = errors = 0
    if path.exists():
        for r in read_records(path, drop_truncated=True):
            s = suites.setdefault(r.suite, {"n": 0, "correct": 0, "no_answer": 0, "errors": 0})
            records += 1
            if r.outcome in ("error", "judge_error"):  # a failure to answer or to grade: not a wrong answer
                s["errors"] += 1
                errors += 1
                continue
            s["n"] += 1
            s["correct"] += r.outcome == "correct"
            s["no_answer"] += r.outcome == "no_answer"
            if r.spec_steps:
                steps += r.spec_steps
                accepted += r.accepted_tokens or 0
    return suites, steps, accepted, records, errors


def _interleaved_tps(measured: dict, name: str, baseline: str) -> float | None:
    """``name``'s median output tokens/s over the interleaved speed rounds (None: not timed)."""
    import statistics

    if name in measured:
        values = measured[name].get("tokens_per_s")
    else:
        values = next((r.get("baseline_tokens_per_s") for r in measured.values()), None) if name == baseline else None
    return float(statistics.median(values)) if values else None


def _interval(speed: dict | None) -> tuple[float, float] | None:
    """The interleaved speed-up's interval; ``None`` when unmeasured or unbounded (too few rounds)."""
    ci = (speed or {}).get("confidence_interval") or (None, None)
    return None if None in ci else (float(ci[0]), float(ci[1]))


def _comparisons(evidence: Evidence | None) -> dict[str, Candidate]:
    """Candidate name -> its entry of gate.json (verdict, reason, loss_upper_bound, ...)."""
    return {c.name: c for c in evidence.candidates} if evidence is not None else {}


def summarize(out: str | Path) -> RunReport:
    """Read a run directory into a :class:`RunReport` (see the module docstring)."""
    from qualgate.run.manifest import read_manifest

    out = Path(out)
    manifest = read_manifest(out)
    plan = manifest["plan"]
    gate_path = out / "gate.json"
    gate: dict[str, Any] = dict(manifest.get("gate") or {})
    evidence = None
    if gate.get("status") == "ok" and gate_path.exists():
        evidence = Evidence.read(gate_path)  # the one reader of gate reports
        gate["report"] = evidence.to_dict()
    comparisons = _comparisons(evidence)
    baseline = plan["baseline"]
    candidates = set(plan.get("candidates") or [])
    suite_names = tuple(s["name"] for s in manifest.get("suites", []))

    rows = []
    base_tps = (manifest["configs"].get(baseline, {}).get("throughput") or {}).get("tokens_per_s")
    measured = (manifest.get("speed") or {}).get("results", {})
    for name, entry in manifest["configs"].items():
        suites, steps, accepted, records, errors = _scan(out / entry["records"])
        per_suite = {
            s: {
                "n": c["n"],
                "correct": c["correct"],
                "accuracy": _rate(c["correct"], c["n"]),
                "no_answer_rate": _rate(c["no_answer"], c["n"]),
                "errors": c["errors"],
            }
            for s, c in suites.items()
        }
        n = sum(c["n"] for c in suites.values())
        tps = (entry.get("throughput") or {}).get("tokens_per_s")
        if measured:  # one measure in the column: the interleaved rounds' median tokens/s
            tps = _interleaved_tps(measured, name, baseline)
        cmp_ = comparisons.get(name)
        rows.append(
            ConfigSummary(
                name=name,
                config_id=entry["config_id"],
                mode=entry.get("mode", "?"),
                lossy=bool(entry.get("lossy")),
                role="baseline" if name == baseline else "candidate" if name in candidates else "other",
                records=records,
                errors=errors,
                suites=per_suite,
                accuracy=_rate(sum(c["correct"] for c in suites.values()), n),
                no_answer_rate=_rate(sum(c["no_answer"] for c in suites.values()), n),
                acceptance_length=1 + accepted / steps if steps else None,
                tokens_per_s=tps,
                # with interleaved rounds, a config they did not time has no speed-up: the
                # naive ratio would mix two methods in one column
                speedup=measured[name]["speedup"]
                if name in measured
                else None
                if measured
                else tps / base_tps
                if tps and base_tps
                else None,
                speedup_ci=_interval(measured.get(name)),
                verdict=cmp_.verdict.value if cmp_ else None,
                loss_upper=cmp_.loss_upper_bound if cmp_ else None,
                reason=cmp_.reason if cmp_ else None,
            )
        )
    g = plan.get("gate", {})
    return RunReport(
        out=str(out),
        run_id=manifest["run_id"],
        plan=plan.get("name", "?"),
        status=manifest.get("status", "?"),
        baseline=baseline,
        margin=g.get("margin"),
        alpha=g.get("alpha"),
        suites=suite_names,
        configs=tuple(rows),
        gate=gate,
        evidence=evidence,
        divergence=run_divergence(out, manifest),
    )


def run_divergence(out: Path, manifest: dict) -> tuple:
    """``(candidate, audit)`` of every candidate of the run against its baseline."""
    from qualgate.errors import DataError
    from qualgate.verdict.divergence import divergence_audit
    from qualgate.verdict.pairing import load_side

    plan, configs = manifest["plan"], manifest["configs"]
    baseline = plan["baseline"]

    def greedy(name):
        return float(((plan.get("configs") or {}).get(name) or {}).get("sampling", {}).get("temperature", 1.0)) == 0

    try:
        base = load_side(out / configs[baseline]["records"], drop_truncated=True).records
    except (DataError, KeyError):
        return ()
    audits = []
    for name in plan.get("candidates") or []:
        try:
            cand = load_side(out / configs[name]["records"], drop_truncated=True).records
        except (DataError, KeyError):
            continue
        audits.append((name, divergence_audit(base, cand, greedy=greedy(baseline) and greedy(name))))
    return tuple(audits)


def _divergence_notes(report: RunReport) -> list[str]:
    """The divergence audit of each candidate, and a chained plan's claim against target-only."""
    from qualgate.report.divergence import audit_lines

    out = [line for name, a in report.divergence for line in audit_lines(name, a)]
    return out + chain_lines(report)


def chain_lines(report: RunReport) -> list[str]:
    """A chained plan's lossless leg and its claim against target-only (none without a chain)."""
    out = []
    chain = report.evidence.chain if report.evidence is not None else None
    if chain and chain.get("leg") == "candidate":
        leg = chain.get("lossless")
        if leg is None:
            out.append(f"chain: the lossless leg is missing ({chain.get('reason')}): no claim against target-only")
        else:
            leg_verdict = leg["candidates"][0]["verdict"] if leg.get("candidates") else "?"
            passed = [c.name for c in report.evidence.candidates if c.verdict == "PASS"]
            claim = (
                f"{', '.join(passed)} lose{'s' if len(passed) == 1 else ''} less than "
                f"{fmt_points(chain['margin'])} points against target-only"
                if leg_verdict == "PASS" and passed
                else "no claim against target-only"
            )
            out.append(
                f"chain: lossless leg (baseline against target-only, margin {fmt_points(leg['settings']['margin'])} "
                f"points) {leg_verdict}; each leg at alpha {report.alpha:g} (intersection-union test): {claim}"
            )
    return out


def _rows(report: RunReport) -> tuple[list[str], list[list[str]]]:
    header = ["config", "mode"] + [f"acc {s}" for s in report.suites]
    header += ["no-answer", "errors", "accept len", "tok/s", "speed-up", "verdict", "loss UB"]
    rows = []
    for c in report.configs:
        row = [c.name + (" (baseline)" if c.role == "baseline" else ""), c.mode]
        row += [fmt_pct(c.suites.get(s, {}).get("accuracy")) for s in report.suites]
        row += [
            fmt_pct(c.no_answer_rate),
            str(c.errors),
            "—" if c.acceptance_length is None else f"{c.acceptance_length:.2f}",
            "—" if c.tokens_per_s is None else f"{c.tokens_per_s:,.0f}",
            fmt_speedup(c.speedup, c.speedup_ci),
            c.verdict or "—",
            fmt_points(c.loss_upper),
        ]
        rows.append(row)
    return header, rows


def _notes(report: RunReport) -> list[str]:
    g = report.gate
    status = g.get("status")
    if status is None:
        return ["gate: not evaluated yet (the run is incomplete; continue it with --resume)"]
    if status == "no-candidates":
        return ["gate: none (the plan has no candidate configs)"]
    if status != "ok":
        return [f"gate: refused the records: {g.get('message')}"]
    out = [
        f"gate: {report.evidence.settings.policy}, margin {fmt_points(report.margin)} points, "
        f"alpha {report.alpha:g} (loss UB: upper confidence bound of the loss, in points); "
        f"verdict {g.get('verdict')} (exit {g.get('exit_code')})"
    ]
    if report.evidence.design == "sequential":
        out.append(
            "sequential run: each candidate answered only the questions it needed before it "
            "stopped (and the baseline as many as the last of them), so the accuracies above are "
            "over different questions; the verdicts pair the same questions"
        )
    out += [f"{c.name}: {c.verdict}: {c.reason}" for c in report.configs if c.reason]
    return out + _divergence_notes(report)


def fmt_speedup(speedup: float | None, ci: tuple[float, float] | None) -> str:
    """``1.51``, or with an interleaved interval ``1.51 [1.48, 1.55]``."""
    if speedup is None:
        return "—"
    return f"{speedup:.2f}" if ci is None else f"{speedup:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _title(report: RunReport) -> str:
    interleaved = any(c.speedup_ci is not None for c in report.configs)
    how = (
        "median of interleaved per-round tok/s ratios [confidence interval]; tok/s: median over those rounds"
        if interleaved
        else "tok/s over the baseline's, each config timed on its own (no interval: --speed-rounds measures one)"
    )
    return (
        f"qualgate run {report.run_id}: plan {report.plan} ({report.status}), "
        f"baseline {report.baseline}; speed-up = {how}"
    )


def render_text(report: RunReport) -> str:
    """The side-by-side table, then the gate's verdict and one sentence per candidate."""
    header, rows = _rows(report)
    lines = [_title(report), "", text_table(rows, header), ""] + _notes(report)
    return "\n".join(lines) + "\n"


def render_markdown(report: RunReport) -> str:
    """The same report as a GitHub-flavoured markdown section."""
    header, rows = _rows(report)
    lines = [f"### {_title(report)}", "", markdown_table(rows, header), ""]
    lines += [f"- {n}" for n in _notes(report)]
    return "\n".join(lines) + "\n"
