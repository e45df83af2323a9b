"""Run an evaluation plan: every config over the same questions x seeds x samples.

:func:`run_plan` is what ``qualgate run PLAN --out OUT`` calls. It writes::

    OUT/manifest.json             plan, config ids, versions, device, git revision, times,
                                  per-config throughput (rewritten atomically as it goes)
    OUT/records/<config>.jsonl    one record per (suite, question, seed, sample), appended
                                  and fsynced per batch (qualgate.records)
    OUT/gate.json                 the plan's gate, evaluated when every config is complete

Every config gets the same work list in the same order; each request's sampling seed is
:func:`request_seed` of its key, so a (question, seed, sample) is decoded with the same seed
under every config, and different questions never share a random stream.

``resume=True`` continues a killed run: the plan must be unchanged (config ids, sampling,
suites, their versions and questions, seeds, samples; see :func:`plan_fingerprint`), a
truncated last record line is removed, and keys already written are skipped, so nothing is
duplicated or lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .backends import Request, open_backend, package_versions
from .errors import DataError, ExitCode

__all__ = [
    "MANIFEST_VERSION",
    "RunResult",
    "WorkItem",
    "demo_plan",
    "evaluate_gate",
    "load_suites",
    "plan_fingerprint",
    "read_manifest",
    "request_seed",
    "run_plan",
    "work_items",
    "write_json_atomic",
]

MANIFEST_VERSION = 1
#: the manifest's running throughput is rewritten at most this often (and after each config)
MANIFEST_EVERY_S = 10.0
SEED_DERIVATION = (
    "request seed = int(sha256('suite\\x1fquestion_id\\x1fseed\\x1fsample_index')[:8], 16) "
    "% 2**31 (qualgate.harness.request_seed)"
)


def request_seed(suite: str, question_id: str, seed: int, sample_index: int) -> int:
    """The sampling seed passed to the engine for one request, in ``[0, 2**31)``.

    A pure function of the record key: the same under every config, on every machine, and
    different for different questions, so that no two questions share a random stream.

    >>> request_seed("gsm8k", "17", 0, 0) == request_seed("gsm8k", "17", 0, 0)
    True
    """
    blob = "\x1f".join((suite, question_id, str(seed), str(sample_index))).encode()
    return int(hashlib.sha256(blob).hexdigest()[:8], 16) % 2**31


@dataclass(frozen=True)
class WorkItem:
    """One request of the plan: a question of a suite, a seed and a sample index."""

    suite: Any  #: the loaded suite (``qualgate.suites.Suite``)
    question: Any  #: one of ``suite.questions``
    seed: int
    sample_index: int

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.suite.name, str(self.question.id), self.seed, self.sample_index)

    @property
    def request_seed(self) -> int:
        return request_seed(*self.key)


def work_items(suites: Sequence, seeds: Sequence[int], samples: int) -> list[WorkItem]:
    """The plan's requests in run order: suite, question, seed, sample."""
    return [
        WorkItem(s, q, seed, i)
        for s in suites
        for q in s.questions
        for seed in seeds
        for i in range(samples)
    ]


def load_suites(plan) -> list:
    """Load every suite of the plan (with its limit, local data file and revision)."""
    from .suites import load_suite

    return [
        load_suite(ref.suite, data_files=ref.data_file, revision=ref.revision, limit=ref.limit)
        for ref in plan.suites
    ]


def _questions_digest(suite) -> str:
    h = hashlib.sha256()
    for q in suite.questions:
        h.update(f"{q.id}\x1f{q.prompt_hash}\x1e".encode())
    return h.hexdigest()[:16]


def plan_fingerprint(plan, suites: Sequence) -> dict[str, Any]:
    """What must not change between a run and its ``--resume``.

    The configs (name -> config id, engine, sampling, coupled noise), the suites (name,
    version, and a digest of question ids and prompt hashes), the seeds and the samples.
    Gate settings (margin, alpha, policy) may change: they do not touch the records.
    """
    return {
        "configs": {
            name: {
                "config_id": c.config_id,
                "engine": c.engine,
                "sampling": c.sampling,
                "coupled": bool(c.engine_options.get("coupled", False)),
            }
            for name, c in plan.configs.items()
        },
        "suites": [
            {"name": s.name, "version": str(s.version), "questions": len(s.questions),
             "digest": _questions_digest(s)}
            for s in suites
        ],
        "seeds": list(plan.seeds),
        "samples": plan.samples,
    }


def _diff(old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key == "configs":
                a, b = old.get(key) or {}, new.get(key) or {}
                for name in sorted(set(a) | set(b)):
                    if a.get(name) != b.get(name):
                        out.append(f"config {name!r}: {a.get(name)} -> {b.get(name)}")
            else:
                out.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    return out


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file, fsync and an atomic rename."""
    from ._render import to_json, write_atomic

    write_atomic(path, to_json(data) + "\n")


def read_manifest(out: str | Path) -> dict[str, Any]:
    """The manifest of a run directory (:class:`DataError` when missing or invalid)."""
    path = Path(out) / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("not a qualgate run directory (no manifest.json)", file=str(out)) from None
    except ValueError as exc:
        raise DataError(f"invalid JSON ({exc})", file=str(path)) from None
    if not isinstance(data, dict) or data.get("manifest_version") != MANIFEST_VERSION:
        raise DataError(f"unsupported manifest (this qualgate reads version {MANIFEST_VERSION})",
                        file=str(path), field="manifest_version",
                        value=data.get("manifest_version") if isinstance(data, dict) else None)
    return data


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _git_revision(where: Path) -> dict[str, Any] | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=5)
        if rev.returncode:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=where, capture_output=True, text=True, timeout=5)
        return {"commit": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _host() -> dict[str, Any]:
    return {"platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "argv": sys.argv[1:]}


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass


@dataclass(frozen=True)
class RunResult:
    """What :func:`run_plan` did: the run directory, its manifest, the gate and exit code."""

    out: str
    manifest: dict[str, Any]
    gate: Any  #: the :class:`~qualgate.gate.GateReport`, or None (see :func:`evaluate_gate`)
    exit_code: int
    written: dict[str, int] = field(default_factory=dict)  #: records written now, per config
    repaired: list[str] = field(default_factory=list)  #: truncated lines removed on resume


def _throughput(t: dict[str, Any]) -> dict[str, Any]:
    s = t["engine_s"]
    t["tokens_per_s"] = t["output_tokens"] / s if s > 0 else None
    t["requests_per_s"] = t["requests"] / s if s > 0 else None
    return t


def _record(run_id, config_id, mode, item: WorkItem, gen) -> dict[str, Any]:
    q, suite = item.question, item.suite
    rec: dict[str, Any] = {
        "schema_version": 1,
        "run_id": run_id,
        "config_id": config_id,
        "suite": suite.name,
        "suite_version": str(suite.version),
        "question_id": str(q.id),
        "seed": item.seed,
        "sample_index": item.sample_index,
        "prompt_hash": q.prompt_hash,
        "mode": mode,
        "gold": None if q.gold is None else str(q.gold),
    }
    if gen.error is not None:
        rec.update(outcome="error", error=gen.error)
    else:
        grade = suite.grade(q, gen.text)
        rec.update(
            outcome=grade.outcome,
            answer_strict=None if grade.strict is None else str(grade.strict),
            answer_lenient=None if grade.lenient is None else str(grade.lenient),
            output=gen.text,
        )
    for name in ("output_tokens", "spec_steps", "draft_tokens", "accepted_tokens",
                 "deferred_tokens", "latency_s"):
        rec[name] = getattr(gen, name)
    return {k: v for k, v in rec.items() if v is not None}


def run_plan(
    plan,
    out: str | Path,
    *,
    resume: bool = False,
    suites: Sequence | None = None,
    progress: Callable[[str, int], Any] | None = None,
    log: Callable[[str], None] | None = None,
    backend_factory: Callable = open_backend,
    max_errors: int = 0,
) -> RunResult:
    """Run every config of ``plan`` into ``out``, then evaluate the plan's gate.

    Parameters
    ----------
    plan : qualgate.config.Plan
    out : path
        The run directory. It must be absent or empty unless ``resume``.
    resume : bool
        Continue the run in ``out`` (same plan), skipping records already written.
    suites : sequence of Suite, optional
        Already loaded suites (default: :func:`load_suites` of the plan).
    progress : callable, optional
        ``progress(label, total)`` returns a context manager with ``update(n)``, entered
        once per config (for a progress bar).
    log : callable, optional
        Receives one-line diagnostics (for stderr).
    backend_factory : callable
        ``backend_factory(config)`` returns a :class:`qualgate.backends.Backend`.
    max_errors : int
        Pairs with an ``error`` outcome the gate may drop (as ``qualgate gate --max-errors``).

    Returns
    -------
    RunResult
        ``exit_code`` is the gate's (0 PASS, 1 FAIL, 4 INCONCLUSIVE) or 3 when the gate
        refused the records.

    Raises
    ------
    DataError
        ``out`` is not empty and ``resume`` is false; the plan changed since the run
        started; a suite or config is invalid; an engine package is missing.
    """
    out = Path(out)
    log = log or (lambda msg: None)
    progress = progress or (lambda label, total: _NoProgress())
    if suites is None:
        suites = load_suites(plan)
    fingerprint = json.loads(json.dumps(plan_fingerprint(plan, suites), default=str))
    manifest_path = out / "manifest.json"

    repaired: list[str] = []
    if out.exists() and not out.is_dir():
        raise DataError("the output path exists and is not a directory", file=str(out))
    nonempty = out.is_dir() and any(out.iterdir())
    if nonempty and not resume:
        raise DataError("the output directory is not empty; pass --resume to continue the run "
                        "in it, or choose a new directory", file=str(out))
    if nonempty:
        manifest = read_manifest(out)
        changed = _diff(manifest.get("fingerprint", {}), fingerprint)
        if changed:
            raise DataError("the plan changed since this run started, so its records cannot be "
                            "resumed: " + "; ".join(changed[:5]), file=str(manifest_path))
        manifest["plan"] = plan.to_dict()  # gate settings may have changed
        manifest.setdefault("resumed_at", []).append(_now())
        manifest["status"] = "running"
        manifest.pop("ended_at", None)
    else:
        out.mkdir(parents=True, exist_ok=True)
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "run_id": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-")
            + secrets.token_hex(3),
            "status": "running",
            "started_at": _now(),
            "plan_path": plan.path,
            "plan": plan.to_dict(),
            "fingerprint": fingerprint,
            "suites": [
                {"name": s.name, "version": str(s.version), "questions": len(s.questions),
                 "limit": ref.limit, "source": ref.suite}
                for s, ref in zip(suites, plan.suites)
            ],
            "seeds": list(plan.seeds),
            "samples": plan.samples,
            "seed_derivation": SEED_DERIVATION,
            "packages": package_versions("numpy", "scipy", "torch", "transformers", "vllm"),
            "host": _host(),
            "git": _git_revision(Path(plan.path).parent if plan.path else Path.cwd()),
            "gpu": None,  # the first GPU a backend reports (per config: configs.*.info)
            "configs": {
                name: {
                    "config_id": c.config_id,
                    "engine": c.engine,
                    "mode": c.mode,
                    "lossy": c.lossy,
                    "records": f"records/{name}.jsonl",
                    "status": "pending",
                    "throughput": {"requests": 0, "output_tokens": 0, "engine_s": 0.0,
                                   "wall_s": 0.0, "tokens_per_s": None, "requests_per_s": None},
                }
                for name, c in plan.configs.items()
            },
        }
    write_json_atomic(manifest_path, manifest)

    from .records import RecordWriter, existing_keys, repair_truncated

    run_id = manifest["run_id"]
    work = work_items(suites, plan.seeds, plan.samples)
    written: dict[str, int] = {}
    for name, cfg in plan.configs.items():
        entry = manifest["configs"][name]
        path = out / entry["records"]
        if path.exists():
            cut = repair_truncated(path)
            if cut is not None:
                repaired.append(cut.describe())
                log(f"{name}: removed an incomplete last line ({cut.nbytes} bytes) "
                    f"left by an interrupted run")
        done = existing_keys(path)
        pending = [w for w in work if w.key not in done]
        written[name] = 0
        if not pending:
            entry["status"] = "complete"
            continue
        if done:
            log(f"{name}: {len(done)} records already written, {len(pending)} to go")
        entry["status"] = "running"
        t_open = time.perf_counter()
        try:
            backend = backend_factory(cfg)
        except DataError:
            raise
        except ValueError as exc:  # the engine refused the config
            raise DataError(f"engine {cfg.engine!r} refused config {name!r}: {exc}",
                            file=cfg.path) from exc
        with backend:
            entry["info"] = backend.info()
            if entry["info"].get("gpu"):
                manifest["gpu"] = entry["info"]["gpu"]
            entry["load_s"] = round(time.perf_counter() - t_open, 3)
            write_json_atomic(manifest_path, manifest)
            tput = entry["throughput"]
            cid = cfg.config_id
            size = max(1, int(backend.batch_size))
            t_wall = t_mark = t_saved = time.perf_counter()
            with RecordWriter(path) as writer, progress(name, len(pending)) as bar:
                for start in range(0, len(pending), size):
                    batch = pending[start : start + size]
                    requests = [
                        Request(w.question.prompt, {**cfg.sampling, "seed": w.request_seed})
                        for w in batch
                    ]
                    t0 = time.perf_counter()
                    gens = backend.generate(requests)
                    engine_s = time.perf_counter() - t0
                    if len(gens) != len(batch):
                        raise RuntimeError(
                            f"backend {cfg.engine!r} returned {len(gens)} results for "
                            f"{len(batch)} requests"
                        )
                    writer.write_batch([_record(run_id, cid, cfg.mode, w, g)
                                        for w, g in zip(batch, gens)])
                    written[name] += len(batch)
                    tput["requests"] += len(batch)
                    tput["output_tokens"] += sum(g.output_tokens or 0 for g in gens)
                    tput["engine_s"] += engine_s
                    # wall_s - engine_s: the harness's own time (requests, grading, storage)
                    now = time.perf_counter()
                    tput["wall_s"] += now - t_mark
                    t_mark = now
                    _throughput(tput)
                    if now - t_saved >= MANIFEST_EVERY_S:  # an fsync costs ~10 ms
                        write_json_atomic(manifest_path, manifest)
                        t_saved = now
                    bar.update(len(batch))
            entry["info"] = backend.info()  # again: what the engine logged while running
            entry["status"] = "complete"
            tp = tput["tokens_per_s"]
            log(f"{name}: {written[name]} records in {time.perf_counter() - t_wall:.1f} s"
                + (f", {tp:,.0f} output tokens/s" if tp else ""))
        write_json_atomic(manifest_path, manifest)

    report, summary = evaluate_gate(plan, out, max_errors=max_errors)
    gate_path = out / "gate.json"
    if report is not None:
        write_json_atomic(gate_path, report.to_dict())
    else:
        gate_path.unlink(missing_ok=True)
    manifest["status"] = "complete"
    manifest["ended_at"] = _now()
    manifest["gate"] = summary
    write_json_atomic(manifest_path, manifest)
    return RunResult(str(out), manifest, report, summary["exit_code"], written, repaired)


def evaluate_gate(plan, out: str | Path, *, max_errors: int = 0):
    """Evaluate the plan's gate on the run's records with :func:`qualgate.gate.run_gate`.

    Returns ``(report, summary)``: the :class:`~qualgate.gate.GateReport` (``None`` when the
    gate refused the records or the plan has no candidates) and a JSON-ready summary for the
    manifest: ``status`` (``ok``, ``refused`` or ``no-candidates``), ``exit_code`` (3 when
    refused, with the ``message``).
    """
    from .gate import run_gate

    if not plan.candidates:
        return None, {"status": "no-candidates", "exit_code": int(ExitCode.OK),
                      "message": "the plan has no candidate configs to gate"}
    records = Path(out) / "records"
    try:
        report = run_gate(
            records / f"{plan.baseline}.jsonl",
            [records / f"{c}.jsonl" for c in plan.candidates],
            policy=plan.policy,
            margin=plan.margin,
            alpha=plan.alpha,
            weighting=plan.weighting,
            inconclusive=plan.inconclusive,
            max_errors=max_errors,
        )
    except DataError as exc:
        return None, {"status": "refused", "exit_code": int(ExitCode.DATA), "message": str(exc)}
    return report, {
        "status": "ok",
        "file": "gate.json",
        "verdict": report.verdict,
        "exit_code": int(report.exit_code),
        "verdicts": {c.name: c.verdict for c in report.comparisons},
    }


def demo_plan(*, questions: int | None = None, seeds: int | Sequence[int] | None = None):
    """The embedded demo plan (``qualgate/demo/plan.yaml``), with the suite's question limit
    and the seeds optionally replaced (``seeds``: a count or a list)."""
    import dataclasses
    from importlib import resources

    from .config import load_plan

    path = Path(str(resources.files("qualgate.demo") / "plan.yaml"))
    plan = load_plan(path)
    changes: dict[str, Any] = {}
    if questions is not None:
        if isinstance(questions, bool) or not isinstance(questions, int) or questions < 1:
            raise ValueError(f"questions must be a positive integer, got {questions!r}")
        changes["suites"] = tuple(dataclasses.replace(s, limit=questions) for s in plan.suites)
    if seeds is not None:
        seeds = list(range(seeds)) if isinstance(seeds, int) and not isinstance(seeds, bool) else list(seeds)
        if not seeds or len(set(seeds)) != len(seeds) or any(
            isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds
        ):
            raise ValueError(f"seeds must be a count or distinct non-negative integers, got {seeds!r}")
        changes["seeds"] = tuple(seeds)
    return dataclasses.replace(plan, **changes)
