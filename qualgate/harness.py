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

``resume=True`` continues a killed run: the plan must be unchanged (everything that can
change an output; see :func:`plan_fingerprint`), a truncated last record line is removed,
and keys already written are skipped, so nothing is duplicated or lost. Keys whose record is
an ``error`` are decoded again (unless ``keep_errors``): the new record is appended and
supersedes the error (:func:`qualgate.records.read_records`), and the error is also copied
to ``OUT/retried_errors/<config>.jsonl``.

One run at a time holds ``OUT``: :class:`RunLock` takes an exclusive ``flock`` on the
directory (released by the kernel when the process ends, however it ends) and writes the
holder's pid and host to ``OUT/.qualgate.lock``; a second ``run`` or ``--resume`` on the same
directory is refused naming them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .backends import Request, open_backend, package_versions
from .backends._devices import open_on_devices
from .errors import DataError, ExitCode
from .evidence import now as _now

__all__ = [
    "MANIFEST_VERSION",
    "RunLock",
    "RunResult",
    "SequentialSettings",
    "SpeedSettings",
    "WorkItem",
    "demo_plan",
    "evaluate_gate",
    "load_suites",
    "plan_fingerprint",
    "batch_generator",
    "measure_speed",
    "read_manifest",
    "request_seed",
    "run_plan",
    "work_items",
    "write_json_atomic",
]

MANIFEST_VERSION = 1
#: version of :func:`plan_fingerprint` (a run fingerprinted otherwise is not resumed)
FINGERPRINT_VERSION = 2
#: engine options that only say how to reach or pace an engine, never what it outputs;
#: every other option enters the resume fingerprint
TRANSPORT_OPTIONS = frozenset({"base_urls", "api_key_env", "timeout_s", "max_retries", "retry_backoff_s"})
LOCK_NAME = ".qualgate.lock"
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


def work_items(suites: Sequence, seeds: Sequence[int], samples: int, *, order_seed: int = 0) -> list[WorkItem]:
    """The plan's requests in run order: questions in their seeded arrival order
    (:func:`qualgate.sequential.arrival_order`, over every suite), then seed, then sample.

    A plain run and a sequential run use the same order, so the records of a sequential run
    that stopped early are a prefix of a full run's, and a full run can resume from them.
    """
    from .sequential import arrival_order

    questions = [(s, q) for s in suites for q in s.questions]
    order = arrival_order([(s.name, str(q.id)) for s, q in questions], seed=order_seed)
    return [
        WorkItem(*questions[i], seed, k)
        for i in order
        for seed in seeds
        for k in range(samples)
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
    """What must not change between a run and its ``--resume``: everything that can change
    an output.

    The configs (name -> config id, engine, model, resolved speculative config, sampling,
    and every engine option but the transport ones of :data:`TRANSPORT_OPTIONS`, so
    ``chat_template_kwargs``, ``dtype``, ``max_num_seqs``, ``seed`` ... all count), the
    suites (name, version, pinned revision, the source rows came from, and a digest of
    question ids and prompt hashes), the seeds and the samples. Gate settings (margin,
    alpha, policy) may change: they do not touch the records.
    """
    refs = list(plan.suites) + [None] * max(0, len(suites) - len(plan.suites))
    return {
        "fingerprint_version": FINGERPRINT_VERSION,
        "configs": {
            name: {
                "config_id": c.config_id,
                "engine": c.engine,
                "model": c.model,
                "speculative": c.speculative,
                "sampling": c.sampling,
                "engine_options": {k: v for k, v in sorted(c.engine_options.items())
                                   if k not in TRANSPORT_OPTIONS},
            }
            for name, c in plan.configs.items()
        },
        "suites": [
            {"name": s.name, "version": str(s.version), "revision": getattr(ref, "revision", None),
             "source": getattr(s, "source", None), "questions": len(s.questions),
             "digest": _questions_digest(s)}
            for s, ref in zip(suites, refs)
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
    from ._strict import load_json

    path = Path(out) / "manifest.json"
    if not path.exists():
        raise DataError("not a qualgate run directory (no manifest.json)", file=str(out))
    data = load_json(path)
    if not isinstance(data, dict) or data.get("manifest_version") != MANIFEST_VERSION:
        raise DataError(f"unsupported manifest (this qualgate reads version {MANIFEST_VERSION})",
                        file=str(path), field="manifest_version",
                        value=data.get("manifest_version") if isinstance(data, dict) else None)
    return data


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


class RunLock:
    """An exclusive lock on a run directory: ``flock`` on the directory itself.

    The kernel releases the lock when the holder's process ends, even by SIGKILL, so a dead
    holder never blocks a new run. :meth:`announce` writes the holder's pid, host and start
    time to ``OUT/.qualgate.lock`` for the refusal message of a second run (that file is
    only information: it may be stale, the lock never is).
    """

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.info = self.out / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        fd = os.open(self.out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataError(f"cannot lock the run directory ({exc.strerror}); run on a "
                                "file system with flock", file=str(self.out)) from None
            raise DataError(self._refusal(), file=str(self.out)) from None
        self._fd = fd
        return self

    def announce(self) -> None:
        """Write who holds the lock to ``OUT/.qualgate.lock``."""
        write_json_atomic(self.info, {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()})

    def _refusal(self) -> str:
        try:
            holder = json.loads(self.info.read_text(encoding="utf-8"))
            pid, host, since = int(holder["pid"]), str(holder["host"]), str(holder.get("since"))
        except (OSError, ValueError, KeyError, TypeError):
            return "another qualgate run holds this run directory (it has not said which yet)"
        said = f"another qualgate run holds this run directory: pid {pid} on host {host!r}, since {since}"
        if host == socket.gethostname() and not _alive(pid):
            said += ("; that pid has ended but a process it started (an engine worker?) still "
                     "holds the lock: stop that process")
        return said + "; wait for it to end or choose another --out"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (another user's)
        return True
    return True


class _Generations:
    """The backend's results for ``batches``, in order: ``(generations, engine seconds)``.

    With ``backend.overlap`` the next batch decodes in a helper thread while the caller
    grades and stores the previous one (one ``generate`` call at a time, in order, so the
    records are those of a serial run); otherwise each batch decodes when it is asked for.
    Leaving the ``with`` block waits for a call still running (an interrupted run), so that
    the backend is never closed under it.
    """

    def __init__(self, backend, cfg, batches):
        self.backend, self.cfg, self.batches = backend, cfg, batches
        self.pool = None
        if getattr(backend, "overlap", False) and len(batches) > 1:
            self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qualgate-generate")

    def _generate(self, batch):
        requests = [Request(w.question.prompt, {**self.cfg.sampling, "seed": w.request_seed}) for w in batch]
        t0 = time.perf_counter()
        gens = self.backend.generate(requests)
        return gens, time.perf_counter() - t0

    def __iter__(self):
        if self.pool is None:
            yield from map(self._generate, self.batches)
            return
        ahead = self.pool.submit(self._generate, self.batches[0])
        for nxt in self.batches[1:]:
            done = ahead.result()
            ahead = self.pool.submit(self._generate, nxt)
            yield done
        yield ahead.result()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


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
            decided_by=grade.decided_by,
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
    backend_factory: Callable = open_on_devices,
    max_errors: int = 0,
    sequential: SequentialSettings | None = None,
    order_seed: int = 0,
    speed: SpeedSettings | None = None,
    keep_errors: bool = False,
) -> RunResult:
    """Run every config of ``plan`` into ``out``, then evaluate the plan's gate.

    Parameters
    ----------
    plan : qualgate.config.Plan
    out : path
        The run directory. It must be absent or empty unless ``resume``.
    resume : bool
        Continue the run in ``out`` (same plan), skipping records already written and
        decoding again the keys whose record is an ``error``.
    suites : sequence of Suite, optional
        Already loaded suites (default: :func:`load_suites` of the plan).
    progress : callable, optional
        ``progress(label, total)`` returns a context manager with ``update(n)``, entered
        once per config (for a progress bar).
    log : callable, optional
        Receives one-line diagnostics (for stderr).
    backend_factory : callable
        ``backend_factory(config)`` returns a :class:`qualgate.backends.Backend`; the default
        spreads a reference-engine config over every visible GPU, one engine per GPU
        (:func:`qualgate.backends._devices.open_on_devices`).
    max_errors : int
        Pairs with an ``error`` outcome the gate may drop (as ``qualgate gate --max-errors``).
    sequential : SequentialSettings, optional
        Run in rounds of questions and stop each candidate as soon as the sequential gate
        (:mod:`qualgate.sequential`) decides; ``OUT/gate.json`` is then its report.
    order_seed : int
        Seed of the questions' arrival order (:func:`work_items`).
    speed : SpeedSettings, optional
        After the quality run, measure every config's speed-up over the baseline in
        interleaved rounds (:func:`measure_speed`); the manifest's ``speed`` entry holds it
        and the report uses it.
    keep_errors : bool
        With ``resume``: keep ``error`` records as they are instead of retrying them.

    Returns
    -------
    RunResult
        ``exit_code`` is the gate's (0 PASS, 1 FAIL, 4 INCONCLUSIVE) or 3 when the gate
        refused the records.

    Raises
    ------
    DataError
        ``out`` is not empty and ``resume`` is false; another run holds ``out``; the plan
        changed since the run started; a suite or config is invalid; an engine package is
        missing.
    """
    out = Path(out)
    _check_names(plan)
    if suites is None:
        suites = load_suites(plan)
    if out.exists() and not out.is_dir():
        raise DataError("the output path exists and is not a directory", file=str(out))
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out) as lock:
        return _run_locked(plan, out, lock, resume, suites, progress, log, backend_factory, max_errors,
                           sequential, order_seed, keep_errors, speed)


def _check_names(plan) -> None:
    from .config import CONFIG_NAME

    for name in plan.configs:
        if not isinstance(name, str) or not CONFIG_NAME.fullmatch(name):
            raise DataError("a config name must be a plain name (it names the records file)",
                            file=plan.path, field="configs", value=name)


def _run_locked(plan, out, lock, resume, suites, progress, log, backend_factory, max_errors, sequential,
                order_seed, keep_errors, speed) -> RunResult:
    """:func:`run_plan` once ``out`` is locked."""
    log = log or (lambda msg: None)
    progress = progress or (lambda label, total: _NoProgress())
    fingerprint = json.loads(json.dumps(plan_fingerprint(plan, suites), default=str))
    manifest_path = out / "manifest.json"

    repaired: list[str] = []
    nonempty = any(p.name != LOCK_NAME for p in out.iterdir())
    if nonempty and not resume:
        raise DataError("the output directory is not empty; pass --resume to continue the run "
                        "in it, or choose a new directory", file=str(out))
    if nonempty:
        manifest = read_manifest(out)
        if manifest.get("fingerprint", {}).get("fingerprint_version") != FINGERPRINT_VERSION:
            raise DataError("this run was started by a qualgate whose resume fingerprint does not "
                            "cover every engine option and suite revision, so it cannot be resumed "
                            "safely: start a new run", file=str(manifest_path), field="fingerprint")
        for name, entry in manifest.get("configs", {}).items():
            if entry.get("records") != f"records/{name}.jsonl":
                raise DataError("a config's records must be records/<config>.jsonl", file=str(manifest_path),
                                field=f"configs.{name}.records", value=entry.get("records"))
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
    lock.announce()
    write_json_atomic(manifest_path, manifest)

    from .records import repair_truncated

    run_id = manifest["run_id"]
    work = work_items(suites, plan.seeds, plan.samples, order_seed=order_seed)
    written: dict[str, int] = {name: 0 for name in plan.configs}
    for entry in manifest["configs"].values():
        path = out / entry["records"]
        if path.exists():
            cut = repair_truncated(path)
            if cut is not None:
                repaired.append(cut.describe())
                log(f"{entry['records']}: removed an incomplete last line ({cut.nbytes} bytes) "
                    f"left by an interrupted run")
    runner = _ConfigRunner(plan, out, manifest, run_id, progress, log, backend_factory, written, keep_errors)
    if sequential is None:
        for name in plan.configs:
            runner.run(name, work)
            runner.close(name)
        report, summary = evaluate_gate(plan, out, max_errors=max_errors)
    else:
        report, summary = _run_sequential(plan, out, work, runner, sequential, order_seed, max_errors, log)
    if speed is not None:
        manifest["speed"] = measure_speed(plan, work, speed, backend_factory=backend_factory, log=log)
        write_json_atomic(manifest_path, manifest)
    gate_path = out / "gate.json"
    if report is not None:
        report.evidence().write(gate_path)  # signed when QUALGATE_EVIDENCE_KEY is set
    else:
        gate_path.unlink(missing_ok=True)
    manifest["status"] = "complete"
    manifest["ended_at"] = _now()
    manifest["gate"] = summary
    write_json_atomic(manifest_path, manifest)
    return RunResult(str(out), manifest, report, summary["exit_code"], written, repaired)


class _ConfigRunner:
    """Runs work items through one config's backend and appends their records.

    A backend stays open between calls until :meth:`close`, so that a sequential run can
    feed a config several rounds without reloading its model; a backend that must hold the
    accelerator alone (``Backend.exclusive``) is closed after every call instead.
    """

    def __init__(self, plan, out, manifest, run_id, progress, log, backend_factory, written, keep_errors=False):
        self.plan, self.out, self.manifest, self.run_id = plan, Path(out), manifest, run_id
        self.progress, self.log, self.factory, self.written = progress, log, backend_factory, written
        self.keep_errors = keep_errors
        self.backends: dict[str, Any] = {}

    def _open(self, name, cfg, entry):
        backend = self.backends.get(name)
        if backend is not None:
            return backend
        t_open = time.perf_counter()
        try:
            backend = self.factory(cfg)
        except DataError:
            raise
        except ValueError as exc:  # the engine refused the config
            raise DataError(f"engine {cfg.engine!r} refused config {name!r}: {exc}",
                            file=cfg.path) from exc
        entry["info"] = backend.info()
        if entry["info"].get("gpu"):
            self.manifest["gpu"] = entry["info"]["gpu"]
        entry["load_s"] = round(entry.get("load_s", 0.0) + time.perf_counter() - t_open, 3)
        write_json_atomic(self.out / "manifest.json", self.manifest)
        self.backends[name] = backend
        return backend

    def close(self, name) -> None:
        backend = self.backends.pop(name, None)
        if backend is not None:
            self.manifest["configs"][name]["info"] = backend.info()  # what it logged while running
            backend.close()
            write_json_atomic(self.out / "manifest.json", self.manifest)

    def close_all(self) -> None:
        for name in list(self.backends):
            self.close(name)

    def _done(self, name: str, path: Path, items: Sequence[WorkItem]) -> set:
        """Keys of ``items`` not to decode again: every key written, but those whose record is
        an ``error`` unless ``keep_errors`` (their errors are copied to the side log first)."""
        from .records import RecordWriter, read_records

        if not path.exists():
            return set()
        records = read_records(path)
        done = {r.key for r in records if self.keep_errors or r.outcome != "error"}
        wanted = {w.key for w in items}
        retry = [r for r in records if r.key not in done and r.key in wanted]
        if retry:
            side = f"retried_errors/{name}.jsonl"
            with RecordWriter(self.out / side) as w:
                w.write_batch(retry)
            entry = self.manifest["configs"][name]
            entry["retried_errors"] = entry.get("retried_errors", 0) + len(retry)
            self.log(f"{name}: retrying {len(retry)} error records (the errors are kept in {side}; "
                     "--keep-errors keeps them instead)")
        return done

    def run(self, name: str, items: Sequence[WorkItem]) -> None:
        """Decode the ``items`` this config has no record for yet, appending their records."""
        from .records import RecordWriter

        cfg = self.plan.configs[name]
        entry = self.manifest["configs"][name]
        path = self.out / entry["records"]
        done = self._done(name, path, items)
        pending = [w for w in items if w.key not in done]
        if not pending:
            if entry["status"] == "pending" and done:
                entry["status"] = "complete"
            return
        if done and not self.written[name]:
            self.log(f"{name}: {len(done)} records already written, {len(pending)} to go")
        entry["status"] = "running"
        backend = self._open(name, cfg, entry)
        tput = entry["throughput"]
        cid = cfg.config_id
        size = max(1, int(backend.batch_size))
        batches = [pending[start : start + size] for start in range(0, len(pending), size)]
        t_wall = t_mark = t_saved = time.perf_counter()
        with RecordWriter(path) as writer, self.progress(name, len(pending)) as bar, \
                _Generations(backend, cfg, batches) as generations:
            for batch, (gens, engine_s) in zip(batches, generations):
                if len(gens) != len(batch):
                    raise RuntimeError(
                        f"backend {cfg.engine!r} returned {len(gens)} results for "
                        f"{len(batch)} requests"
                    )
                writer.write_batch([_record(self.run_id, cid, cfg.mode, w, g)
                                    for w, g in zip(batch, gens)])
                self.written[name] += len(batch)
                tput["requests"] += len(batch)
                tput["output_tokens"] += sum(g.output_tokens or 0 for g in gens)
                tput["engine_s"] += engine_s
                # wall_s - engine_s: the harness's own time (requests, grading, storage)
                now = time.perf_counter()
                tput["wall_s"] += now - t_mark
                t_mark = now
                _throughput(tput)
                if now - t_saved >= MANIFEST_EVERY_S:  # an fsync costs ~10 ms
                    write_json_atomic(self.out / "manifest.json", self.manifest)
                    t_saved = now
                bar.update(len(batch))
        entry["status"] = "complete"
        tp = tput["tokens_per_s"]
        self.log(f"{name}: {len(pending)} records in {time.perf_counter() - t_wall:.1f} s"
                 + (f", {tp:,.0f} output tokens/s" if tp else ""))
        if getattr(backend, "exclusive", False):
            self.close(name)
        write_json_atomic(self.out / "manifest.json", self.manifest)


@dataclass(frozen=True)
class SequentialSettings:
    """How ``qualgate run --sequential`` schedules and stops (see :func:`run_plan`).

    ``batch_questions`` questions (with all their seeds and samples) are run per round, the
    baseline first; after each round every candidate still running is tested with
    :func:`qualgate.sequential.sequential_gate` and stops at PASS, FAIL, futility or
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
        if self.multiplicity not in ("bonferroni", "fixed-sequence"):
            raise ValueError(f"multiplicity must be 'bonferroni' or 'fixed-sequence', got {self.multiplicity!r}")


def _sequential_report(plan, out, settings, order_seed, max_errors, candidates=None):
    from .pairing import load_side, pair_records
    from .sequential import sequential_gate

    records = Path(out) / "records"
    base = load_side(records / f"{plan.baseline}.jsonl")
    candidates = list(plan.candidates if candidates is None else candidates)
    pairings = [
        pair_records(base, load_side(records / f"{c}.jsonl"), on_missing="drop", max_errors=max_errors)
        for c in candidates
    ]
    report = sequential_gate(
        pairings, names=candidates, margin=plan.margin, alpha=plan.alpha,
        power=settings.power, order="seeded", seed=order_seed,
        max_questions=settings.max_questions, inconclusive=plan.inconclusive,
        multiplicity=settings.multiplicity,
    )  # fmt: skip
    reading = {"on_missing": "drop", "max_errors": max_errors, "drop_truncated": False, "allow_unknown": False}
    return dataclasses.replace(report, reading=reading, **_provenance(plan, out))


def _provenance(plan, out) -> dict[str, Any]:
    """What a run's gate report says about the baseline config and the plan (for ``check``)."""
    from .config import IDENTITY_OPTIONS
    from .evidence import describe_config
    from .pairing import sha256_file

    base = plan.configs[plan.baseline]
    numerics = {k: base.engine_options.get(k) for k in IDENTITY_OPTIONS}
    try:
        manifest = read_manifest(out)
    except DataError:  # records gated outside a run directory
        manifest = {}
    fingerprint = json.dumps(manifest.get("fingerprint"), sort_keys=True, separators=(",", ":"))
    return {
        "baseline_config": describe_config(base.model, base.speculative, numerics),
        "plan": {
            "name": plan.name,
            "path": plan.path,
            "sha256": sha256_file(plan.path) if plan.path and Path(plan.path).is_file() else None,
            "run_id": manifest.get("run_id"),
            "fingerprint_sha256": hashlib.sha256(fingerprint.encode()).hexdigest(),
        },
    }


def _run_sequential(plan, out, work, runner, settings, order_seed, max_errors, log):
    """Rounds of ``settings.batch_questions`` questions until every candidate has stopped.

    With ``settings.multiplicity == 'fixed-sequence'`` the candidates run one after another
    in the plan's order (each with the baseline, whose records are reused) and the run stops
    at the first candidate that does not PASS: the rest are never run.
    """
    if plan.policy != "noninferiority":
        raise DataError("a sequential run decides non-inferiority; the plan's gate policy is "
                        f"{plan.policy!r}", file=plan.path, field="gate.policy", value=plan.policy)
    if not plan.candidates:
        raise DataError("a sequential run needs at least one candidate", file=plan.path,
                        field="candidates")
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
            report = _sequential_rounds(plan, out, work[: questions * per_question], runner, settings,
                                        order_seed, max_errors, log, group, per_question, stops, tested)  # fmt: skip
            if isinstance(report, dict):  # the records cannot be paired: the gate refuses them
                return None, report
            if any(stops[c]["verdict"] != "PASS" for c in group):
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


def _sequential_rounds(plan, out, work, runner, settings, order_seed, max_errors, log, active, per_question,
                       stops, tested):  # fmt: skip
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
            report = _sequential_report(plan, out, settings, order_seed, max_errors, tested)
        except DataError as exc:
            return {"status": "refused", "exit_code": int(ExitCode.DATA), "message": str(exc)}
        for c in report.comparisons:
            if c.name in active and (c.result.reason != "exhausted" or last == questions):
                active.remove(c.name)
                stops[c.name] = {"after_questions": last, "verdict": c.verdict,
                                 "stopped_by": c.result.reason, "questions_used": c.result.n_questions}  # fmt: skip
                runner.close(c.name)
                log(f"{c.name}: {c.verdict} ({c.result.reason}) after {c.result.n_questions} questions")
        if not active:
            break
    return report


@dataclass(frozen=True)
class SpeedSettings:
    """Interleaved speed rounds after the quality run (see :mod:`qualgate.speed`): ``rounds``
    rounds of ``questions`` work items each, the first ones of the seeded order."""

    rounds: int = 7
    questions: int = 64
    confidence_level: float = 0.95
    max_relative_width: float = 0.2

    def __post_init__(self):
        for name in ("rounds", "questions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"speed {name} must be a positive integer, got {v!r}")


def batch_generator(cfg, backend) -> Callable[[Sequence[WorkItem]], list]:
    """``generate(items)``: decode work items under ``cfg`` through ``backend``, in its batch
    size, each with its request seed; the generations in order."""
    size = max(1, int(backend.batch_size))

    def generate(items):
        gens = []
        for start in range(0, len(items), size):
            gens += backend.generate([Request(w.question.prompt, {**cfg.sampling, "seed": w.request_seed})
                                      for w in items[start : start + size]])  # fmt: skip
        return gens

    return generate


def measure_speed(plan, work: Sequence[WorkItem], settings: SpeedSettings, *, names: Sequence[str] | None = None,
                  backend_factory: Callable = open_backend, log: Callable[[str], None] | None = None) -> dict:  # fmt: skip
    """Interleaved speed of ``names`` (default: every config) against the plan's baseline.

    Every config's backend is open at once, so that round ``r`` can send the same requests to
    each config back to back; a backend that must hold the accelerator alone cannot take part
    (``DataError``). Returns the manifest's ``speed`` entry: the settings and, per candidate,
    :meth:`qualgate.speed.SpeedResult.to_dict`.
    """
    from .speed import interleaved_speed

    log = log or (lambda msg: None)
    names = [plan.baseline] + [n for n in (names or plan.configs) if n != plan.baseline]
    per_round = settings.questions
    if len(work) < settings.rounds * per_round:
        per_round = max(1, len(work) // settings.rounds)
    rounds = [work[r * per_round : (r + 1) * per_round] for r in range(settings.rounds)]
    rounds = [r for r in rounds if r]
    backends = {}
    try:
        for name in names:
            backend = backend_factory(plan.configs[name])
            backends[name] = backend
            if getattr(backend, "exclusive", False):
                raise DataError(f"engine {backend.engine!r} of config {name!r} holds the accelerator alone, so its "
                                "speed cannot be measured interleaved with the others; measure it without "
                                "--speed-rounds", field="engine", value=backend.engine)  # fmt: skip

        def generate_for(name):
            return batch_generator(plan.configs[name], backends[name])

        for name in names:  # one warm-up batch each: lazy initialisation is not speed
            generate_for(name)(rounds[0][:1])
        results = interleaved_speed({n: generate_for(n) for n in names}, rounds, baseline=plan.baseline,
                                    confidence_level=settings.confidence_level,
                                    max_relative_width=settings.max_relative_width)  # fmt: skip
    finally:
        for backend in backends.values():
            backend.close()
    for r in results.values():
        log(f"{r.config}: speed-up {r.speedup:.2f}x ({r.confidence_level:.0%} CI {r.confidence_interval[0]:.2f}"
            f"-{r.confidence_interval[1]:.2f}) over {r.rounds} interleaved rounds")
        if r.warning:
            log(f"{r.config}: warning: {r.warning}")
    return {"method": "interleaved", "rounds": len(rounds), "questions_per_round": per_round,
            "confidence_level": settings.confidence_level, "max_relative_width": settings.max_relative_width,
            "results": {name: r.to_dict() for name, r in results.items()}}  # fmt: skip


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
            **_provenance(plan, out),
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
