"""The report of a run directory: per config, quality and speed side by side with the gate.

:func:`summarize` reads ``OUT/manifest.json``, ``OUT/records/*.jsonl`` and ``OUT/gate.json``
(written by :func:`qualgate.harness.run_plan`) and returns a :class:`RunReport`; it never
recomputes statistics (the verdicts come from ``gate.json``). Per config:

- accuracy per suite (correct / graded; ``error`` records are excluded and counted apart),
- the no-answer rate (nothing could be extracted; counted as incorrect in accuracy),
- the mean acceptance length, ``1 + accepted / drafting steps`` (speculative configs),
- output tokens per second of engine time and the speed-up over the baseline's,
- for candidates: the gate's verdict and the upper confidence bound of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._render import fmt_pct, fmt_points, markdown_table, text_table
from .evidence import Evidence

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
    gate: dict[str, Any] = field(default_factory=dict)

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
        }


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _scan(path: Path):
    """Per-suite counts and speculative totals of one records file (no pairing)."""
    from .records import read_records

    suites: dict[str, dict[str, int]] = {}
    steps = accepted = records = errors = 0
    if path.exists():
        for r in read_records(path, drop_truncated=True):
            s = suites.setdefault(r.suite, {"n": 0, "correct": 0, "no_answer": 0, "errors": 0})
            records += 1
            if r.outcome == "error":
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


def _comparisons(gate: dict) -> dict[str, dict[str, Any]]:
    """Candidate name -> its entry of gate.json (verdict, reason, loss_upper_bound, ...)."""
    return {c["name"]: c for c in gate.get("candidates", [])}


def summarize(out: str | Path) -> RunReport:
    """Read a run directory into a :class:`RunReport` (see the module docstring)."""
    from .harness import read_manifest

    out = Path(out)
    manifest = read_manifest(out)
    plan = manifest["plan"]
    gate_path = out / "gate.json"
    gate: dict[str, Any] = dict(manifest.get("gate") or {})
    if gate.get("status") == "ok" and gate_path.exists():
        gate["report"] = Evidence.read(gate_path).to_dict()  # the one reader of gate reports
    comparisons = _comparisons(gate.get("report") or {})
    baseline = plan["baseline"]
    candidates = set(plan.get("candidates") or [])
    suite_names = tuple(s["name"] for s in manifest.get("suites", []))

    rows = []
    base_tps = (manifest["configs"].get(baseline, {}).get("throughput") or {}).get("tokens_per_s")
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
        cmp_ = comparisons.get(name, {})
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
                speedup=tps / base_tps if tps and base_tps else None,
                verdict=cmp_.get("verdict"),
                loss_upper=cmp_.get("loss_upper_bound"),
                reason=cmp_.get("reason"),
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
    )


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
            "—" if c.speedup is None else f"{c.speedup:.2f}",
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
        f"gate: {g['report']['settings']['policy']}, margin {fmt_points(report.margin)} points, "
        f"alpha {report.alpha:g} (loss UB: upper confidence bound of the loss, in points); "
        f"verdict {g.get('verdict')} (exit {g.get('exit_code')})"
    ]
    if g["report"]["design"] == "sequential":
        out.append(
            "sequential run: each candidate answered only the questions it needed before it "
            "stopped (and the baseline as many as the last of them), so the accuracies above are "
            "over different questions; the verdicts pair the same questions"
        )
    out += [f"{c.name}: {c.verdict}: {c.reason}" for c in report.configs if c.reason]
    return out


def _title(report: RunReport) -> str:
    return (f"qualgate run {report.run_id}: plan {report.plan} ({report.status}), "
            f"baseline {report.baseline}; speed-up = tok/s over the baseline's")


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
