"""Run an evaluation plan: every config over the same questions x seeds x samples.

:func:`run_plan` is what ``qualgate run PLAN --out OUT`` calls. It writes::

    OUT/manifest.json             plan, config ids, versions, device, git revision, times,
                                  per-config throughput (rewritten atomically as it goes;
                                  qualgate.run.manifest)
    OUT/records/<config>.jsonl    one record per (suite, question, seed, sample), appended
                                  and fsynced per batch (qualgate.records)
    OUT/gate.json                 the plan's gate, evaluated when every config is complete

Every config gets the same work list in the same order; each request's sampling seed is
:func:`request_seed` of its key, so a (question, seed, sample) is decoded with the same seed
under every config, and different questions never share a random stream.

``resume=True`` continues a killed run: the plan must be unchanged (everything that can
change an output; see :func:`qualgate.run.manifest.plan_fingerprint`), a truncated last record
line is removed, and keys already written are skipped, so nothing is duplicated or lost. Keys
whose record is an ``error`` or a ``judge_error`` are decoded again (unless ``keep_errors``): the new record is
appended and supersedes the error (:func:`qualgate.records.read_records`), and the error is
also copied to ``OUT/retried_errors/<config>.jsonl``.

``shard`` decodes one shard's part of every config (:mod:`qualgate.run.shards`, which also
merges the shards' directories into the one this module writes).

One run at a time holds ``OUT`` (:class:`qualgate.run.manifest.RunLock`). A sequential run's
rounds are scheduled by :mod:`qualgate.run.sequential` (decoding through this module's config
runner); the interleaved speed rounds are measured by :func:`qualgate.run.speed.measure_speed`.

This module is over the ~450 lines the package aims at: :func:`run_plan`, its locked body and
the config runner share one run's state (the manifest being rewritten, the records being
appended, the throughput being counted), which a further split would pass between modules.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import itertools
import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualgate.backends import Request, open_on_devices, package_versions
from qualgate.errors import DataError, ExitCode
from qualgate.evidence.gate_report import now as _now
from qualgate.run.chain import chained_evidence, check_chain_plan
from qualgate.run.code import code_identity, compare
from qualgate.run.manifest import (
    FINGERPRINT_VERSION,
    LOCK_FILES,
    MANIFEST_VERSION,
    RunLock,
    _diff,
    _git_revision,
    _host,
    _provenance,
    plan_fingerprint,
    read_manifest,
    write_json_atomic,
)
from qualgate.run.sequential import SequentialSettings, _run_sequential

if TYPE_CHECKING:
    from qualgate.run.shards import Shard
    from qualgate.run.speed import SpeedSettings

__all__ = [
    "RunResult",
    "WorkItem",
    "evaluate_gate",
    "load_suites",
    "request_seed",
    "run_plan",
    "work_items",
]

#: the manifest's running throughput is rewritten at most this often (and after each config)
MANIFEST_EVERY_S = 10.0
#: the packages whose versions a run's manifest records
PACKAGES = ("numpy", "scipy", "torch", "transformers", "vllm")
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

    def request(self, sampling: dict) -> Request:
        """This item's request under a config's ``sampling``, seeded by its key; a traffic
        question's own sampling fields (``Question.sampling``) override the config's."""
        own = getattr(self.question, "sampling", None) or {}
        return Request(self.question.prompt, {**sampling, **own, "seed": self.request_seed})


def work_items(suites: Sequence, seeds: Sequence[int], samples: int, *, order_seed: int = 0) -> list[WorkItem]:
    """The plan's requests in run order: questions in their seeded arrival order
    (:func:`qualgate.verdict.sequential.arrival_order`, over every suite), then seed, then sample.

    A plain run and a sequential run use the same order, so the records of a sequential run
    that stopped early are a prefix of a full run's, and a full run can resume from them.
    """
    from qualgate.verdict.sequential import arrival_order

    questions = [(s, q) for s in suites for q in s.questions]
    order = arrival_order([(s.name, str(q.id)) for s, q in questions], seed=order_seed)
    return [WorkItem(*questions[i], seed, k) for i in order for seed in seeds for k in range(samples)]


def load_suites(plan) -> list:
    """Load every suite of the plan (with its limit, local data file and revision)."""
    from qualgate.suites import load_suite

    return [
        load_suite(ref.suite, data_files=ref.data_file, revision=ref.revision, limit=ref.limit) for ref in plan.suites
    ]


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass


class _Generations:
    """The backend's results for ``batches``, in order: ``(generations, engine seconds)``.

    A backend with ``in_flight`` > 1 queues work itself: that many batches are kept submitted
    (``backend.submit``), so that it decodes the next ones while the caller grades and stores
    the last. Otherwise each batch decodes when it is asked for. Results are taken in order,
    so the records are those of a serial run. A batch's engine seconds run from when it was
    submitted, or when the batch before it completed if later, to when it completed, so they
    add up to the time the engine worked. Leaving the ``with`` block waits for the calls still
    running (an interrupted run), so that the backend is never closed under them.
    """

    def __init__(self, backend, cfg, batches):
        self.backend, self.cfg, self.batches = backend, cfg, batches
        self.window = max(1, int(getattr(backend, "in_flight", 1)))
        self.pending: collections.deque = collections.deque()

    def _requests(self, batch):
        return [w.request(self.cfg.sampling) for w in batch]

    def _submit(self, batch) -> None:
        times = [time.perf_counter()]
        fut = self.backend.submit(self._requests(batch))
        fut.add_done_callback(lambda _: times.append(time.perf_counter()))
        self.pending.append((fut, times))

    def __iter__(self):
        if self.window == 1:
            for batch in self.batches:
                t0 = time.perf_counter()
                gens = self.backend.generate(self._requests(batch))
                yield gens, time.perf_counter() - t0
            return
        todo = iter(self.batches)
        for batch in itertools.islice(todo, self.window):
            self._submit(batch)
        last_done = 0.0
        while self.pending:
            fut, times = self.pending[0]
            gens = fut.result()
            self.pending.popleft()
            for batch in itertools.islice(todo, 1):
                self._submit(batch)
            # (the callback may run just after result() returns)
            submitted, done = times[0], times[1] if len(times) > 1 else time.perf_counter()
            yield gens, done - max(submitted, last_done)
            last_done = done

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        concurrent.futures.wait([fut for fut, _ in self.pending])


@dataclass(frozen=True)
class RunResult:
    """What :func:`run_plan` did: the run directory, its manifest, the gate and exit code."""

    out: str
    manifest: dict[str, Any]
    gate: Any  #: the :class:`~qualgate.verdict.fixed.GateReport`, or None (see :func:`evaluate_gate`)
    exit_code: int
    written: dict[str, int] = field(default_factory=dict)  #: records written now, per config
    repaired: list[str] = field(default_factory=list)  #: truncated lines removed on resume


def _throughput(t: dict[str, Any]) -> dict[str, Any]:
    s = t["engine_s"]
    timed = t["requests"] - t.get("untimed_requests", 0)
    t["tokens_per_s"] = t["output_tokens"] / s if s > 0 else None
    t["requests_per_s"] = timed / s if s > 0 else None
    return t


def _count_untimed(tput: dict[str, Any], present: int) -> None:
    """On a resume: records written after the killed run last saved its manifest were decoded
    but not counted. ``requests`` counts them (it is the records' count), ``untimed_requests``
    says how many have no time, tokens or engine seconds in the totals, and the rates leave
    them out."""
    if present > tput["requests"]:
        tput["untimed_requests"] = tput.get("untimed_requests", 0) + present - tput["requests"]
        tput["requests"] = present
        _throughput(tput)


def _grades(batch: Sequence[WorkItem], gens) -> list:
    """The grade of each answered item (None for a failed request), a suite's items graded
    together (:meth:`qualgate.suites.Suite.grade_many`: a judge grader asks its judge once)."""
    out: list = [None] * len(batch)
    by_suite: dict[int, list[int]] = {}
    for i, (w, g) in enumerate(zip(batch, gens)):
        if g.error is None:
            by_suite.setdefault(id(w.suite), []).append(i)
    for idx in by_suite.values():
        suite = batch[idx[0]].suite
        many = getattr(suite, "grade_many", None)
        items = [(batch[i].question, gens[i].text) for i in idx]
        grades = many(items) if many is not None else [suite.grade(q, t) for q, t in items]
        for i, grade in zip(idx, grades):
            out[i] = grade
    return out


def _record(run_id, config_id, mode, item: WorkItem, gen, grade=None, identity=None) -> dict[str, Any]:
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
        grade = grade if grade is not None else suite.grade(q, gen.text)
        rec.update(
            outcome=grade.outcome,
            answer_strict=None if grade.strict is None else str(grade.strict),
            answer_lenient=None if grade.lenient is None else str(grade.lenient),
            decided_by=grade.decided_by,
            output=gen.text,
            error=getattr(grade, "error", None),  # a judge's failure (outcome judge_error)
        )
    for name in (
        "output_tokens",
        "spec_steps",
        "draft_tokens",
        "accepted_tokens",
        "deferred_tokens",
        "latency_s",
        "token_ids",
        "top2_margins",
    ):
        rec[name] = getattr(gen, name)
    if identity:  # the engine and its version, as the backend reports them (info()["identity"])
        rec.update(engine=identity.get("engine"), engine_version=identity.get("version"))
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
    shard: Shard | None = None,
) -> RunResult:
    """Run every config of ``plan`` into ``out``, then evaluate the plan's gate.

    Parameters
    ----------
    plan : qualgate.config.decoding.Plan
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
        (:mod:`qualgate.verdict.sequential`) decides; ``OUT/gate.json`` is then its report.
    order_seed : int
        Seed of the questions' arrival order (:func:`work_items`).
    speed : SpeedSettings, optional
        After the quality run, measure every config's speed-up over the baseline in
        interleaved rounds (:func:`qualgate.run.speed.measure_speed`); the manifest's ``speed``
        entry holds it and the report uses it.
    keep_errors : bool
        With ``resume``: keep ``error`` records as they are instead of retrying them.
    shard : qualgate.run.shards.Shard, optional
        Decode only this shard's requests (:meth:`~qualgate.run.shards.Shard.select`) under
        every config; the manifest says which shard, and the gate is left to
        :func:`qualgate.run.shards.merge_shards` (``qualgate merge``).

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
    if shard is not None and (sequential is not None or speed is not None):
        raise ValueError(
            "a shard runs its part of a plain run: --sequential and --speed-rounds need the whole plan on one machine"
        )
    owned = suites is None  # suites loaded here are closed here (a judge grader holds a backend)
    if owned:
        suites = load_suites(plan)
    try:
        check_chain_plan(
            plan, sequential, suites, {"packages": package_versions(*PACKAGES), "seed_derivation": SEED_DERIVATION}
        )
        from qualgate.config.decoding import check_model_sources
        from qualgate.vllm033.installed import check_installed

        for config in plan.configs.values():  # after the plan's and the suites' own checks
            check_model_sources(config)
            check_installed(config)  # engine: vllm: installed, with the config's verifier
        if out.exists() and not out.is_dir():
            raise DataError("the output path exists and is not a directory", file=str(out))
        if not resume and out.is_dir() and any(p.name not in LOCK_FILES for p in out.iterdir()):
            _refuse_non_empty(out)  # before the lock: a refused run leaves nothing in the user's folder
        out.mkdir(parents=True, exist_ok=True)
        with RunLock(out) as lock:
            return _run_locked(
                plan,
                out,
                lock,
                resume,
                suites,
                progress,
                log,
                backend_factory,
                max_errors,
                sequential,
                order_seed,
                keep_errors,
                speed,
                shard,
            )
    finally:
        if owned:
            for suite in suites:
                suite.close()


def _check_names(plan) -> None:
    from qualgate.config.decoding import CONFIG_NAME

    for name in plan.configs:
        if not isinstance(name, str) or not CONFIG_NAME.fullmatch(name):
            raise DataError(
                "a config name must be a plain name (it names the records file)",
                file=plan.path,
                field="configs",
                value=name,
            )


def environment(plan) -> dict:
    """What a run's manifest records of the plan's seeding and of the machine that ran it."""
    return {
        "seeds": list(plan.seeds),
        "samples": plan.samples,
        "seed_derivation": SEED_DERIVATION,
        "packages": package_versions(*PACKAGES),
        "host": _host(),
        "git": _git_revision(Path(plan.path).parent if plan.path else Path.cwd()),
        "code": code_identity(),
    }


def _check_same_code(manifest: dict, manifest_path) -> None:
    """Refuse to resume records that another version of qualgate wrote (a requeued array task
    after an update, a pod on another image tag): its request seeds, grading or records may
    differ, and a run of mixed code is no run of one plan."""
    differs = compare(manifest.get("code"), code_identity())
    if differs:
        raise DataError(
            f"this run was written by other qualgate code than this one ({differs}), so its records "
            "cannot be resumed by it: resume with the code that started the run, or start a new run",
            file=str(manifest_path),
            field="code",
        )


def config_entry(name: str, config, status: str, throughput: dict) -> dict:
    """A config's entry in a run's manifest."""
    return {
        "config_id": config.config_id,
        "engine": config.engine,
        "mode": config.mode,
        "lossy": config.lossy,
        "records": f"records/{name}.jsonl",
        "status": status,
        "throughput": throughput,
    }


def _refuse_non_empty(out: Path):
    raise DataError(
        "the output directory is not empty; pass --resume to continue the run in it, or choose a new directory",
        file=str(out),
    )


def _run_locked(
    plan,
    out,
    lock,
    resume,
    suites,
    progress,
    log,
    backend_factory,
    max_errors,
    sequential,
    order_seed,
    keep_errors,
    speed,
    shard=None,
) -> RunResult:
    """:func:`run_plan` once ``out`` is locked."""
    log = log or (lambda msg: None)
    progress = progress or (lambda label, total: _NoProgress())
    fingerprint = json.loads(json.dumps(plan_fingerprint(plan, suites), default=str))
    manifest_path = out / "manifest.json"

    repaired: list[str] = []
    nonempty = any(p.name not in LOCK_FILES for p in out.iterdir())
    if nonempty and not resume:
        lock.discard()  # the directory is someone else's: leave it as it was found
        _refuse_non_empty(out)  # filled since the check before the lock
    if nonempty:
        manifest = read_manifest(out)
        if manifest.get("fingerprint", {}).get("fingerprint_version") != FINGERPRINT_VERSION:
            raise DataError(
                "this run was started by a qualgate whose resume fingerprint does not "
                "cover every engine option and suite revision, so it cannot be resumed "
                "safely: start a new run",
                file=str(manifest_path),
                field="fingerprint",
            )
        if not isinstance(manifest.get("configs"), dict) or set(manifest["configs"]) != set(plan.configs):
            raise DataError(
                "the manifest's configs are not the plan's: resume a run with the plan that started it",
                file=str(manifest_path),
                field="configs",
                value=sorted(map(str, manifest.get("configs") or ()))[:5],
            )
        for name, entry in manifest["configs"].items():
            if not isinstance(entry, dict) or entry.get("records") != f"records/{name}.jsonl":
                raise DataError(
                    "a config's records must be records/<config>.jsonl",
                    file=str(manifest_path),
                    field=f"configs.{name}.records",
                    value=entry.get("records"),
                )
        if manifest.get("shard") != (None if shard is None else shard.to_dict()):
            held = manifest.get("shard")
            raise DataError(
                "this directory holds "
                + (
                    f"shard {held.get('index')}/{held.get('count')}"
                    if isinstance(held, dict)
                    else "a run of the whole plan"
                )
                + ", not "
                + (f"shard {shard}" if shard else "the whole plan")
                + ": resume it as it was started",
                file=str(manifest_path),
                field="shard",
                value=held,
            )
        changed = _diff(manifest.get("fingerprint", {}), fingerprint)
        if changed:
            raise DataError(
                "the plan changed since this run started, so its records cannot be resumed: " + "; ".join(changed[:5]),
                file=str(manifest_path),
            )
        _check_same_code(manifest, manifest_path)
        manifest["plan"] = plan.to_dict()  # gate settings may have changed
        manifest.setdefault("resumed_at", []).append(_now())
        manifest.setdefault("resumes", []).append(
            {"at": manifest["resumed_at"][-1], "code": code_identity(files=False)}
        )
        manifest["status"] = "running"
        manifest.pop("ended_at", None)
    else:
        out.mkdir(parents=True, exist_ok=True)
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "run_id": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3),
            "status": "running",
            "started_at": _now(),
            "plan_path": plan.path,
            "plan": plan.to_dict(),
            "fingerprint": fingerprint,
            **({} if shard is None else {"shard": shard.to_dict()}),
            "suites": [
                {
                    "name": s.name,
                    "version": str(s.version),
                    "questions": len(s.questions),
                    "limit": ref.limit,
                    "source": ref.suite,
                }
                for s, ref in zip(suites, plan.suites)
            ],
            **environment(plan),
            "gpu": None,  # the first GPU a backend reports (per config: configs.*.info)
            "configs": {
                name: config_entry(
                    name,
                    c,
                    "pending",
                    {
                        "requests": 0,
                        "output_tokens": 0,
                        "engine_s": 0.0,
                        "wall_s": 0.0,
                        "tokens_per_s": None,
                        "requests_per_s": None,
                    },
                )
                for name, c in plan.configs.items()
            },
        }
    lock.announce()
    write_json_atomic(manifest_path, manifest)

    from qualgate.records import repair_truncated

    run_id = manifest["run_id"]
    work = work_items(suites, plan.seeds, plan.samples, order_seed=order_seed)
    if shard is not None:
        work = shard.select(work)
    written: dict[str, int] = {name: 0 for name in plan.configs}
    for entry in manifest["configs"].values():
        path = in_run_dir(out, entry["records"])
        if os.path.lexists(path):
            cut = repair_truncated(path)
            if cut is not None:
                repaired.append(cut.describe())
                log(
                    f"{entry['records']}: removed an incomplete last line ({cut.nbytes} bytes) "
                    f"left by an interrupted run"
                )
    runner = _ConfigRunner(plan, out, manifest, run_id, progress, log, backend_factory, written, keep_errors)
    if sequential is None:
        for name in plan.configs:
            runner.run(name, work)
            if speed is None:  # (else the speed rounds reuse the loaded models)
                runner.close(name)
        report, summary = (
            (
                None,
                {
                    "status": "shard",
                    "exit_code": int(ExitCode.OK),
                    "message": (f"shard {shard}: the gate is evaluated on the merge of all shards (qualgate merge)"),
                },
            )
            if shard is not None
            else _timed(evaluate_gate, plan, out, max_errors=max_errors)
        )
    else:
        report, summary = _run_sequential(plan, out, work, runner, sequential, order_seed, max_errors, log)
    if speed is not None:
        from qualgate.run.speed import measure_speed

        try:
            manifest["speed"] = measure_speed(
                plan,
                work,
                speed,
                backend_factory=backend_factory,
                log=log,
                progress=progress,
                open_backends=runner.backends,
            )
        finally:
            runner.close_all()
        write_json_atomic(manifest_path, manifest)
    gate_path = out / "gate.json"
    if report is not None:  # signed when QUALGATE_EVIDENCE_KEY is set; with the plan's chain (run.chain)
        chained_evidence(plan, out, report.evidence(), manifest=manifest, max_errors=max_errors).write(gate_path)
    else:
        gate_path.unlink(missing_ok=True)
    manifest["status"] = "complete"
    manifest["ended_at"] = _now()
    manifest["gate"] = summary
    write_json_atomic(manifest_path, manifest)
    return RunResult(str(out), manifest, report, summary["exit_code"], written, repaired)


def in_run_dir(out: Path, relative: str) -> Path:
    """``out / relative``, refused unless it stays in the run directory: a relative path of
    plain names (no ``..``), none of them a symbolic link (a planted ``records`` link, or a
    manifest entry ``../../victim``, would send appends or a truncation outside ``--out``).
    The file itself is then opened with ``O_NOFOLLOW`` (:class:`~qualgate.records.RecordWriter`)."""
    rel = Path(relative)
    if rel.is_absolute() or not rel.parts or any(part in ("..", ".") for part in rel.parts):
        raise DataError("a path outside the run directory: refused", file=str(out), value=str(relative))
    here = Path(out)
    for part in rel.parts:
        here = here / part
        if os.path.islink(here):
            raise DataError(
                "a symbolic link in the run directory: refused (records are written inside --out only)",
                file=str(here),
            )
    return here


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
            raise DataError(f"engine {cfg.engine!r} refused config {name!r}: {exc}", file=cfg.path) from exc
        entry["info"] = backend.info()
        if entry["info"].get("gpu"):
            self.manifest["gpu"] = entry["info"]["gpu"]
        if entry["info"].get("cluster"):  # a backend on a cluster (qualgate.run.ray_backend)
            self.manifest["cluster"] = entry["info"]["cluster"]
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
        from qualgate.records import RecordWriter, read_records

        if not os.path.lexists(path):
            return set()
        records = read_records(path)
        done = {r.key for r in records if self.keep_errors or r.outcome not in ("error", "judge_error")}
        wanted = {w.key for w in items}
        retry = [r for r in records if r.key not in done and r.key in wanted]
        if retry:
            side = f"retried_errors/{name}.jsonl"
            with RecordWriter(in_run_dir(self.out, side)) as w:
                w.write_batch(retry)
            entry = self.manifest["configs"][name]
            entry["retried_errors"] = entry.get("retried_errors", 0) + len(retry)
            self.log(
                f"{name}: retrying {len(retry)} error records (the errors are kept in {side}; "
                "--keep-errors keeps them instead)"
            )
        return done

    def run(self, name: str, items: Sequence[WorkItem]) -> None:
        """Decode the ``items`` this config has no record for yet, appending their records."""
        from qualgate.records import RecordWriter

        cfg = self.plan.configs[name]
        entry = self.manifest["configs"][name]
        path = in_run_dir(self.out, entry["records"])
        done = self._done(name, path, items)
        pending = [w for w in items if w.key not in done]
        if done and not self.written[name]:  # (a resume)
            _count_untimed(entry["throughput"], len(done & {w.key for w in items}))
        if not pending:
            if entry["status"] == "pending" and (done or not items):  # (a shard's part may be empty)
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
        with (
            RecordWriter(path) as writer,
            self.progress(name, len(pending)) as bar,
            _Generations(backend, cfg, batches) as generations,
        ):
            for batch, (gens, engine_s) in zip(batches, generations):
                if len(gens) != len(batch):
                    raise RuntimeError(f"backend {cfg.engine!r} returned {len(gens)} results for {len(batch)} requests")
                writer.write_batch(
                    [
                        _record(self.run_id, cid, cfg.mode, w, g, grade, entry["info"].get("identity"))
                        for w, g, grade in zip(batch, gens, _grades(batch, gens))
                    ]
                )
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
        self.log(
            f"{name}: {len(pending)} records in {time.perf_counter() - t_wall:.1f} s"
            + (f", {tp:,.0f} output tokens/s" if tp else "")
        )
        if getattr(backend, "exclusive", False):
            self.close(name)
        write_json_atomic(self.out / "manifest.json", self.manifest)


def _greedy(config) -> bool:
    """Whether a config decodes greedily (temperature 0: the engines ignore the seed)."""
    return float(config.sampling.get("temperature", 1.0)) == 0.0


def _timed(evaluate, *args, **kwargs):
    """``evaluate(...)``'s ``(report, summary)``, with the wall seconds it took in the summary."""
    t0 = time.perf_counter()
    report, summary = evaluate(*args, **kwargs)
    return report, {**summary, "wall_s": round(time.perf_counter() - t0, 3)}


def evaluate_gate(plan, out: str | Path, *, max_errors: int = 0):
    """Evaluate the plan's gate on the run's records with :func:`qualgate.verdict.fixed.run_gate`.

    Returns ``(report, summary)``: the :class:`~qualgate.verdict.fixed.GateReport` (``None`` when the
    gate refused the records or the plan has no candidates) and a JSON-ready summary for the
    manifest: ``status`` (``ok``, ``refused`` or ``no-candidates``), ``exit_code`` (3 when
    refused, with the ``message``).
    """
    from qualgate.verdict.fixed import run_gate

    if not plan.candidates:
        return None, {
            "status": "no-candidates",
            "exit_code": int(ExitCode.OK),
            "message": "the plan has no candidate configs to gate",
        }
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
            greedy=[_greedy(plan.configs[plan.baseline]) and _greedy(plan.configs[c]) for c in plan.candidates],
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
