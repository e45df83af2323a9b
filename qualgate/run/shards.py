"""A plan cut into shards for a batch scheduler, and the merge of their run directories.

``qualgate run PLAN --shard I/N --out DIR`` decodes, under every config, only the requests
of shard ``I`` (:meth:`Shard.select`): a question belongs to shard :func:`shard_of` of its
``(suite, question_id)``, a hash of the key alone, so the assignment is the same for every
config (each shard's pairs are complete), on every machine, for every ``--order-seed``, and a
question's seeds and samples stay together (they are batched together, as in a one-machine
run). The shard's ``manifest.json`` carries the plan's fingerprint and
``"shard": {"index": I, "count": N, ...}``; ``--resume`` continues one shard in its own
directory and refuses another shard's.

:func:`merge_shards` (``qualgate merge DIR_1 ... DIR_N --out DIR``) checks that the shards come
from one plan and fingerprint, that each of ``0 .. N-1`` is there exactly once and complete,
and that every request of the plan is in exactly one shard, under the plan's config ids;
then it writes the directory a one-machine ``qualgate run`` writes: the records of each
config in the plan's run order, ``manifest.json`` (the shards' throughput added up, and each
shard's provenance under ``shards``) and ``gate.json``. Records are copied as the shards wrote
them (each keeps the ``run_id`` of the shard run that decoded it). A shard that is missing,
given twice, of another plan or fingerprint, torn (an incomplete last line, or fewer records
than its part), or that holds another shard's requests is refused by name
(:class:`~qualgate.errors.DataError`, exit 3), and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.evidence.gate_report import now as _now

__all__ = ["SHARD_ASSIGNMENT", "Shard", "merge_shards", "shard_of"]

SHARD_ASSIGNMENT = (
    "shard = int(sha256('qualgate-shard\\x1fsuite\\x1fquestion_id')[:16], 16) % count (qualgate.run.shards.shard_of)"
)
_SPEC = re.compile(r"(\d{1,6})/(\d{1,6})")


def shard_of(suite: str, question_id: str, count: int) -> int:
    """The shard, in ``[0, count)``, that decodes every seed and sample of a question.

    A pure function of the question's key and ``count``: the same under every config and on
    every machine.

    >>> shard_of("gsm8k", "17", 3) == shard_of("gsm8k", "17", 3)
    True
    >>> shard_of("gsm8k", "17", 1)
    0
    """
    blob = "\x1f".join(("qualgate-shard", suite, question_id)).encode()
    return int(hashlib.sha256(blob).hexdigest()[:16], 16) % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``qualgate run --shard index/count``)."""

    index: int
    count: int

    def __post_init__(self):
        if (
            not (isinstance(self.count, int) and isinstance(self.index, int))
            or self.count < 1
            or not 0 <= self.index < self.count
        ):
            raise ValueError(f"a shard is I/N with 0 <= I < N, got {self.index!r}/{self.count!r}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"1/3"`` -> ``Shard(1, 3)`` (:class:`ValueError` otherwise).

        >>> Shard.parse("1/3")
        Shard(index=1, count=3)
        """
        m = _SPEC.fullmatch(str(text).strip())
        if not m:
            raise ValueError(f"--shard must be I/N (e.g. 0/4, with 0 <= I < N), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, key: Sequence) -> bool:
        """Whether this shard decodes record key ``(suite, question_id, seed, sample_index)``."""
        return shard_of(key[0], key[1], self.count) == self.index

    def select(self, work: Sequence) -> list:
        """The work items (:class:`qualgate.run.runner.WorkItem`) of this shard, in run order."""
        return [w for w in work if self.holds(w.key)]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "assignment": SHARD_ASSIGNMENT}


@dataclass
class _Part:
    """One shard directory as given to the merge."""

    dir: Path
    manifest: dict
    shard: Shard

    def __str__(self) -> str:
        return f"shard {self.shard} ({self.dir})"


def _read_part(d: Path) -> _Part:
    from qualgate.run.manifest import read_manifest

    manifest = read_manifest(d)
    spec = manifest.get("shard")
    if not isinstance(spec, dict):
        raise DataError(
            "not a shard: this run directory was not written by qualgate run --shard I/N",
            file=str(d / "manifest.json"),
            field="shard",
            value=spec,
        )
    try:
        shard = Shard(spec.get("index"), spec.get("count"))
    except ValueError as exc:
        raise DataError(str(exc), file=str(d / "manifest.json"), field="shard", value=spec) from None
    part = _Part(d, manifest, shard)
    if manifest.get("status") != "complete":
        raise DataError(
            f"{part} did not finish (status {manifest.get('status')!r}): continue it with "
            f"qualgate run PLAN --shard {shard} --out {d} --resume",
            file=str(d / "manifest.json"),
            field="status",
            value=manifest.get("status"),
        )
    return part


def _check_same_plan(parts: list[_Part], plan, fingerprint: dict, where: str) -> None:
    from qualgate.run.manifest import FINGERPRINT_VERSION, _diff

    for p in parts:
        mpath = str(p.dir / "manifest.json")
        name = (p.manifest.get("plan") or {}).get("name")
        if name != plan.name:
            raise DataError(
                f"{p} is a shard of another plan ({name!r}, not {plan.name!r} of {where})",
                file=mpath,
                field="plan.name",
                value=name,
            )
        theirs = p.manifest.get("fingerprint") or {}
        if theirs.get("fingerprint_version") != FINGERPRINT_VERSION:
            raise DataError(
                f"{p} was fingerprinted by another qualgate (fingerprint version "
                f"{theirs.get('fingerprint_version')!r}, this one writes {FINGERPRINT_VERSION})",
                file=mpath,
                field="fingerprint.fingerprint_version",
            )
        changed = _diff(theirs, fingerprint)
        if changed:
            raise DataError(
                f"{p} has another fingerprint than {where} (a shard of another version of the "
                "plan): " + "; ".join(changed[:5]),
                file=mpath,
                field="fingerprint",
            )


def _check_same_code(parts: list[_Part]) -> dict | None:
    """The code identity every shard was written by (:mod:`qualgate.run.code`); shards written by
    different qualgate code (a requeued task after an update, pods on mixed image tags) are
    refused, naming the first that differs from shard 0 and what differs."""
    from qualgate.run.code import compare

    first = min(parts, key=lambda p: p.shard.index)
    for p in parts:
        for key in ("code", *(["resumes"] if p.manifest.get("resumes") else [])):
            codes = [p.manifest.get("code")] if key == "code" else [r.get("code") for r in p.manifest["resumes"]]
            for code in codes:
                differs = compare(first.manifest.get("code"), code)
                if differs:
                    raise DataError(
                        f"{p} was written by other qualgate code than {first} ({differs}): rerun it with "
                        "the code of the other shards, then merge",
                        file=str(p.dir / "manifest.json"),
                        field=key,
                    )
    return first.manifest.get("code")


def _shard_limits(parts: list[_Part]) -> list:
    """The per-suite question limits the shards ran with (``qualgate run --limit``), the same
    in every shard (a refusal names the option)."""
    seen: dict[str, list] = {}
    for p in parts:
        limits = [s.get("limit") if isinstance(s, dict) else None for s in p.manifest.get("suites") or []]
        seen.setdefault(repr(limits), [limits, p])
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.values())[:2]
        raise DataError(
            f"the shards ran with different question limits (--limit): {pa} {a}, {pb} {b}; "
            "run every shard with the same --limit",
            file=str(pb.dir / "manifest.json"),
            field="suites.limit",
        )
    return next(iter(seen.values()))[0]


def _with_limits(plan, limits: list):
    """``plan`` with each suite's limit as the shards ran it (a shard of ``qualgate run --limit``)."""
    import dataclasses

    if len(limits) != len(plan.suites) or all(a == s.limit for a, s in zip(limits, plan.suites)):
        return plan
    suites = tuple(dataclasses.replace(s, limit=a) for s, a in zip(plan.suites, limits))
    return dataclasses.replace(plan, suites=suites)


def _check_indices(parts: list[_Part]) -> None:
    counts = {p.shard.count for p in parts}
    if len(counts) > 1:
        first = parts[0]
        other = next(p for p in parts if p.shard.count != first.shard.count)
        raise DataError(
            f"{other} and {first} cut the plan into different numbers of shards",
            file=str(other.dir / "manifest.json"),
            field="shard.count",
            value=other.shard.count,
        )
    count = counts.pop()
    seen: dict[int, _Part] = {}
    for p in parts:
        if p.shard.index in seen:
            same = p.dir.resolve() == seen[p.shard.index].dir.resolve()
            raise DataError(
                f"shard {p.shard} is given twice: {seen[p.shard.index].dir} and {p.dir}"
                + (" (the same directory)" if same else ""),
                file=str(p.dir / "manifest.json"),
                field="shard.index",
                value=p.shard.index,
            )
        seen[p.shard.index] = p
    missing = [i for i in range(count) if i not in seen]
    if missing:
        raise DataError(
            "shard "
            + ", ".join(f"{i}/{count}" for i in missing)
            + f" {'is' if len(missing) == 1 else 'are'} missing: the merge needs all {count} "
            f"shards, got {', '.join(str(p.dir) for p in parts)}",
            field="shard",
            value=[f"{i}/{count}" for i in missing],
        )


def _read_config(p: _Part, name: str, cfg, wanted: dict, owner: dict) -> list:
    """The records of config ``name`` in shard ``p``, checked: every one a request of ``p``'s
    part of the plan under ``cfg``'s config id, none twice, none missing."""
    from qualgate.records import read_records

    entry = (p.manifest.get("configs") or {}).get(name)
    mpath = str(p.dir / "manifest.json")
    if not isinstance(entry, dict) or entry.get("config_id") != cfg.config_id:
        raise DataError(
            f"{p} did not run config {name!r} with config id {cfg.config_id}",
            file=mpath,
            field=f"configs.{name}.config_id",
            value=entry.get("config_id") if isinstance(entry, dict) else None,
        )
    path = p.dir / "records" / f"{name}.jsonl"
    expected = [k for k in wanted if p.shard.holds(k)]
    if not path.is_file() and not expected:
        return []  # (a part with no question: nothing was written)
    if not path.is_file():
        raise DataError(f"{p} has no records of config {name!r}", file=str(path))
    try:
        records = read_records(path)
    except DataError as exc:
        raise DataError(
            f"{p} is torn or damaged ({exc.message}); continue it with qualgate run PLAN --shard "
            f"{p.shard} --out {p.dir} --resume",
            file=exc.file,
            line=exc.line,
            field=exc.field,
        ) from None
    mine = {}
    for i, r in enumerate(records):
        key = r.key
        where = records.origin(i)
        if r.config_id != cfg.config_id:
            raise DataError(
                f"{p} holds a record of another config id than {name!r}'s {cfg.config_id}",
                file=where,
                field="config_id",
                value=r.config_id,
            )
        if key not in wanted:
            raise DataError(f"{p} holds a request that is not in the plan", file=where, field="key", value=key)
        if not p.shard.holds(key):
            other = owner.get(key)
            raise DataError(
                f"{p} holds a request of shard {shard_of(key[0], key[1], p.shard.count)}/"
                f"{p.shard.count}" + (f" ({other.dir})" if other else "") + ": the shards overlap",
                file=where,
                field="key",
                value=key,
            )
        if key in mine:
            raise DataError(f"{p} holds this request twice", file=where, field="key", value=key)
        mine[key] = r
    lacking = [k for k in expected if k not in mine]
    if lacking:
        raise DataError(
            f"{p} is torn: it lacks {len(lacking)} of the {len(expected)} records of config "
            f"{name!r} in its part (first: {lacking[0]}); continue it with qualgate run PLAN "
            f"--shard {p.shard} --out {p.dir} --resume",
            file=str(path),
        )
    return list(mine.values())


def _sha256(path: Path) -> str:
    from qualgate.verdict.pairing import sha256_file

    return sha256_file(path)


def _provenance(p: _Part, names: Sequence[str], counts: dict[str, int]) -> dict[str, Any]:
    m = p.manifest
    return {
        "index": p.shard.index,
        "count": p.shard.count,
        "dir": str(p.dir.resolve()),
        "run_id": m.get("run_id"),
        "manifest_sha256": _sha256(p.dir / "manifest.json"),
        "started_at": m.get("started_at"),
        "ended_at": m.get("ended_at"),
        "resumed_at": m.get("resumed_at", []),
        "host": m.get("host"),
        "code": {k: v for k, v in m["code"].items() if k != "files"} if m.get("code") else None,
        "git": m.get("git"),
        "packages": m.get("packages"),
        "gpu": m.get("gpu"),
        "cluster": m.get("cluster"),
        "configs": {
            name: {
                "records": counts[name],
                "sha256": _sha256(p.dir / "records" / f"{name}.jsonl") if counts[name] else None,
                "throughput": m["configs"][name].get("throughput"),
                "load_s": m["configs"][name].get("load_s"),
                "info": m["configs"][name].get("info"),
            }
            for name in names
        },
    }


def _added_throughput(parts: list[_Part], name: str) -> dict[str, Any]:
    from qualgate.run.runner import _throughput

    total = {"requests": 0, "output_tokens": 0, "engine_s": 0.0, "wall_s": 0.0}
    for p in parts:
        t = p.manifest["configs"][name].get("throughput") or {}
        for k in total:
            total[k] += t.get(k) or 0
    return _throughput(total)


def merge_shards(
    dirs: Sequence[str | Path],
    out: str | Path,
    *,
    plan=None,
    suites: Sequence | None = None,
    max_errors: int = 0,
    order_seed: int = 0,
    log: Callable[[str], None] | None = None,
):
    """Merge the shard directories ``dirs`` into the run directory ``out`` and gate it.

    Parameters
    ----------
    dirs : sequence of path
        One directory per shard ``0/N .. N-1/N``, each written by ``qualgate run --shard``.
    out : path
        The merged run directory (absent or empty).
    plan : qualgate.config.decoding.Plan, optional
        The plan the shards ran (default: the plan file the first shard's manifest names); its
        fingerprint must be every shard's.
    suites : sequence of Suite, optional
        The plan's loaded suites (default: :func:`qualgate.run.runner.load_suites`).
    max_errors : int
        As :func:`qualgate.run.runner.run_plan`.
    order_seed : int
        The run order the merged records are written in (as ``qualgate run --order-seed``).

    Returns
    -------
    qualgate.run.runner.RunResult

    Raises
    ------
    DataError
        A shard is missing, given twice, unfinished, torn, of another plan or fingerprint, or
        holds requests of another shard; ``out`` is not empty.
    """
    from qualgate.config.decoding import load_plan
    from qualgate.records import RecordWriter, read_records
    from qualgate.run.code import code_identity
    from qualgate.run.manifest import (
        LOCK_FILES,
        MANIFEST_VERSION,
        RunLock,
        plan_fingerprint,
        write_json_atomic,
    )
    from qualgate.run.runner import RunResult, config_entry, environment, evaluate_gate, load_suites, work_items

    log = log or (lambda msg: None)
    if not dirs:
        raise ValueError("merge needs the shard directories")
    parts = [_read_part(Path(d)) for d in dirs]
    if plan is None:
        path = parts[0].manifest.get("plan_path")
        if not path or not Path(path).is_file():
            raise DataError(
                f"the plan file {parts[0]} names is not here: pass it with --plan",
                file=str(parts[0].dir / "manifest.json"),
                field="plan_path",
                value=path,
            )
        plan = load_plan(path)
        where = f"its plan file {path} (named by {parts[0]})"
    else:
        where = f"the plan {plan.path}"
    code = _check_same_code(parts)
    plan = _with_limits(plan, _shard_limits(parts))
    if suites is None:
        suites = load_suites(plan)
    fingerprint = json.loads(json.dumps(plan_fingerprint(plan, suites), default=str))
    _check_same_plan(parts, plan, fingerprint, where)
    _check_indices(parts)
    parts.sort(key=lambda p: p.shard.index)

    work = work_items(suites, plan.seeds, plan.samples, order_seed=order_seed)
    wanted = {w.key: i for i, w in enumerate(work)}
    owner = {}
    for p in parts:
        owner.update({k: p for k in wanted if p.shard.holds(k)})
    merged: dict[str, list] = {}
    counts: dict[str, dict[str, int]] = {str(p.dir): {} for p in parts}
    for name, cfg in plan.configs.items():
        rows = []
        for p in parts:
            got = _read_config(p, name, cfg, wanted, owner)
            counts[str(p.dir)][name] = len(got)
            rows.extend(got)
        merged[name] = sorted(rows, key=lambda r: wanted[r.key])  # the one-machine run's order
    retried = {}
    for name in plan.configs:
        side = [
            r
            for p in parts
            if (p.dir / "retried_errors" / f"{name}.jsonl").is_file()
            for r in read_records(p.dir / "retried_errors" / f"{name}.jsonl")
        ]
        if side:
            retried[name] = side

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError("the output path exists and is not a directory", file=str(out))
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out) as lock:
        if any(q.name not in LOCK_FILES for q in out.iterdir()):
            raise DataError("the output directory is not empty: merge into a new directory", file=str(out))
        lock.announce()
        for name, rows in merged.items():
            with RecordWriter(out / "records" / f"{name}.jsonl") as w:
                w.write_batch(rows)
        for name, rows in retried.items():
            with RecordWriter(out / "retried_errors" / f"{name}.jsonl") as w:
                w.write_batch(rows)
        first = parts[0].manifest
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "run_id": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3),
            "status": "running",
            "started_at": min(p.manifest.get("started_at") or "" for p in parts),
            "merged_at": _now(),
            "plan_path": plan.path,
            "plan": plan.to_dict(),
            "fingerprint": fingerprint,
            "suites": first.get("suites"),
            **environment(plan),
            "code": code,  # the code that wrote the records (every shard's); the merge's own below
            "merged_by": code_identity(files=False),
            "gpu": next((p.manifest.get("gpu") for p in parts if p.manifest.get("gpu")), None),
            "configs": {
                name: config_entry(name, c, "complete", _added_throughput(parts, name))
                | ({"retried_errors": len(retried[name])} if name in retried else {})
                for name, c in plan.configs.items()
            },
            "shards": [_provenance(p, list(plan.configs), counts[str(p.dir)]) for p in parts],
        }
        write_json_atomic(out / "manifest.json", manifest)
        log(f"merged {len(parts)} shards: " + ", ".join(f"{n} {len(r)}" for n, r in merged.items()) + " records")
        report, summary = evaluate_gate(plan, out, max_errors=max_errors)
        if report is not None:
            from qualgate.run.chain import chained_evidence

            chained_evidence(plan, out, report.evidence(), manifest=manifest, max_errors=max_errors).write(
                out / "gate.json"
            )
        manifest["status"] = "complete"
        manifest["ended_at"] = _now()
        manifest["gate"] = summary
        write_json_atomic(out / "manifest.json", manifest)
    written = {name: len(rows) for name, rows in merged.items()}
    return RunResult(str(out), manifest, report, summary["exit_code"], written, [])
