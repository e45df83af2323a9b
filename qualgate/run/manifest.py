"""A run directory's own files: ``OUT/manifest.json`` and the lock on ``OUT``.

:func:`qualgate.run.runner.run_plan` writes the manifest (:func:`write_json_atomic`, rewritten
as the run goes) and :func:`read_manifest` reads it back, for ``qualgate report`` as for a
``--resume``. A resume is refused when :func:`plan_fingerprint` (everything in the plan that
can change an output) differs from the one the run started with.

One run at a time holds ``OUT``: :class:`RunLock` takes an exclusive ``flock`` on the file
``OUT/.qualgate.flock`` (released by the kernel when the process ends, however it ends) and
writes the holder's pid and host to ``OUT/.qualgate.lock``; a second ``run`` or ``--resume``
on the same directory is refused naming them. The lock is on a regular file opened for
writing, not on the directory, so that it also holds on NFS, the shared file system the
scale-out recipes use: Linux's NFS client turns ``flock`` into a whole-file POSIX lock held
by the server (``flock(2)``, "NFS details"), which needs a descriptor open for writing; a
directory cannot be opened so, and a directory's ``flock`` on NFS is either refused (EBADF)
or held by one client only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.evidence.gate_report import now as _now

__all__ = [
    "LOCK_FILES",
    "MANIFEST_VERSION",
    "RunLock",
    "plan_fingerprint",
    "read_manifest",
    "write_json_atomic",
]

MANIFEST_VERSION = 1
#: version of :func:`plan_fingerprint` (a run fingerprinted otherwise is not resumed)
FINGERPRINT_VERSION = 2
#: engine options that only say how to reach or pace an engine, never what it outputs;
#: every other option enters the resume fingerprint
TRANSPORT_OPTIONS = frozenset({"base_urls", "api_key_env", "timeout_s", "max_retries", "retry_backoff_s"})
LOCK_NAME = ".qualgate.lock"
#: the file whose ``flock`` is the lock (never replaced: the holder's details go to LOCK_NAME)
FLOCK_NAME = ".qualgate.flock"
#: the lock's files, which do not make a run directory "not empty"
LOCK_FILES = frozenset({LOCK_NAME, FLOCK_NAME})


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
                "engine_options": {k: v for k, v in sorted(c.engine_options.items()) if k not in TRANSPORT_OPTIONS},
            }
            for name, c in plan.configs.items()
        },
        "suites": [
            {
                "name": s.name,
                "version": str(s.version),
                "revision": getattr(ref, "revision", None),
                "source": getattr(s, "source", None),
                "questions": len(s.questions),
                "digest": _questions_digest(s),
                **_judge_of(s),
            }
            for s, ref in zip(suites, refs)
        ],
        "seeds": list(plan.seeds),
        "samples": plan.samples,
    }


def _judge_of(suite) -> dict[str, Any]:
    """``{"judge": ...}`` for a suite graded by a judge model (its identity, template hash and pass
    score: qualgate.judge), else nothing (so the fingerprints of other runs are unchanged)."""
    describe = getattr(getattr(getattr(suite, "_spec", None), "grader", None), "describe", None)
    return {"judge": describe()} if callable(describe) else {}


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
    from qualgate.formatting import to_json, write_atomic

    write_atomic(path, to_json(data) + "\n")


def read_manifest(out: str | Path) -> dict[str, Any]:
    """The manifest of a run directory (:class:`DataError` when missing or invalid)."""
    from qualgate.records.strict import load_json

    path = Path(out) / "manifest.json"
    if not os.path.lexists(path):
        raise DataError("not a qualgate run directory (no manifest.json)", file=str(out))
    data = load_json(path, follow_links=False)
    if not isinstance(data, dict) or data.get("manifest_version") != MANIFEST_VERSION:
        raise DataError(
            f"unsupported manifest (this qualgate reads version {MANIFEST_VERSION})",
            file=str(path),
            field="manifest_version",
            value=data.get("manifest_version") if isinstance(data, dict) else None,
        )
    return data


def _git_revision(where: Path) -> dict[str, Any] | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        if rev.returncode:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return {"commit": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def _host() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "argv": sys.argv[1:],
    }


class RunLock:
    """An exclusive lock on a run directory: ``flock`` on ``OUT/.qualgate.flock``.

    The kernel releases the lock when the holder's process ends, even by SIGKILL, so a dead
    holder never blocks a new run. :meth:`announce` writes the holder's pid, host and start
    time to ``OUT/.qualgate.lock`` for the refusal message of a second run (that file is
    only information: it may be stale, the lock never is).
    """

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.info = self.out / LOCK_NAME
        self._fd: int | None = None
        self.created = False  #: whether this acquisition created the lock file

    def acquire(self) -> RunLock:
        while True:
            fd = self._acquire_once()
            try:  # the file may have been discarded (:meth:`discard`) between our open and our flock
                same = os.path.samestat(os.fstat(fd), os.stat(self.out / FLOCK_NAME, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return self
            os.close(fd)

    def discard(self) -> None:
        """Remove the lock file this acquisition created, while still holding it (a run refused
        before writing anything leaves the directory as it found it). A run that opened the
        file before it was removed finds it gone once it holds the lock, and takes the new one."""
        if self.created and self._fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.out / FLOCK_NAME)

    def _acquire_once(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        self.created = not os.path.lexists(self.out / FLOCK_NAME)
        try:
            fd = os.open(self.out / FLOCK_NAME, flags, 0o644)
        except OSError as exc:
            raise DataError(
                f"cannot open the run directory's lock file {FLOCK_NAME} for writing ({exc.strerror})",
                file=str(self.out),
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataError(
                    f"cannot lock the run directory ({exc.strerror}); run on a file system with flock",
                    file=str(self.out),
                ) from None
            raise DataError(self._refusal(), file=str(self.out)) from None
        return fd

    def announce(self) -> None:
        """Write who holds the lock to ``OUT/.qualgate.lock``."""
        write_json_atomic(self.info, {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()})

    def _refusal(self) -> str:
        try:
            fd = os.open(self.info, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as fh:  # never through a link, never more than a line's worth
                holder = json.loads(fh.read(4096))
            pid, host, since = int(holder["pid"]), str(holder["host"]), str(holder.get("since"))
        except (OSError, ValueError, KeyError, TypeError):
            return "another qualgate run holds this run directory (it has not said which yet)"
        said = f"another qualgate run holds this run directory: pid {pid} on host {host!r}, since {since}"
        if host == socket.gethostname() and not _alive(pid):
            said += (
                "; that pid has ended but a process it started (an engine worker?) still "
                "holds the lock: stop that process"
            )
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


def _provenance(plan, out) -> dict[str, Any]:
    """What a run's gate report says about the baseline config and the plan (for ``check``)."""
    from qualgate.verdict.pairing import sha256_file

    base = plan.configs[plan.baseline]
    try:
        manifest = read_manifest(out)
    except DataError:  # records gated outside a run directory
        manifest = {}
    fingerprint = json.dumps(manifest.get("fingerprint"), sort_keys=True, separators=(",", ":"))
    return {
        "baseline_config": describe_decoding(base),
        "candidate_configs": tuple(describe_decoding(plan.configs[c]) for c in plan.candidates),
        "plan": {
            "name": plan.name,
            "path": plan.path,
            "sha256": sha256_file(plan.path) if plan.path and Path(plan.path).is_file() else None,
            "run_id": manifest.get("run_id"),
            "fingerprint_sha256": hashlib.sha256(fingerprint.encode()).hexdigest(),
            # the qualgate code that wrote the records (qualgate.run.code; None outside a run directory
            # or for a run written before qualgate recorded it)
            "code": {k: v for k, v in manifest["code"].items() if k != "files"} if manifest.get("code") else None,
        },
    }


def describe_decoding(config) -> dict[str, Any]:
    """What a plan's decoding config serves, as a gate report records it
    (:func:`qualgate.evidence.binding.describe_side`: model, resolved speculative config,
    numerics, sampling, engine and its options)."""
    from qualgate.config.decoding import IDENTITY_OPTIONS
    from qualgate.evidence.binding import describe_side

    return describe_side(
        config.model,
        config.speculative,
        {k: config.engine_options.get(k) for k in IDENTITY_OPTIONS},
        sampling=config.sampling,
        engine=config.engine,
        engine_options=config.engine_options,
    )
