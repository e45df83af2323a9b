"""Run the bad-input corpus in this process, one case after another, under limits.

    python tests/inputs/run_corpus.py WORKDIR [FIRST]

(:func:`drive` starts it, and starts it again after a case it had to kill.)

For each case (from index FIRST) it prints one JSON line ``{"start": id}`` before running it
and one result line after, so that a parent that had to kill this process for a hang knows
which case hung and can start again after it. Each case runs with click's CliRunner under
``signal.alarm`` (:data:`TIME_LIMIT_S`); the whole process runs under ``RLIMIT_AS``
(:data:`MEMORY_LIMIT`), so reading ``/dev/zero`` or expanding an alias bomb ends in a
MemoryError instead of exhausting the machine. The qualgate imported is the one on
``PYTHONPATH`` (so the same corpus measures another checkout).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DEV_ZERO, DIRECTORY, FIFO, cases  # noqa: E402

TIME_LIMIT_S = 20
MEMORY_LIMIT = 6 << 30  # address space: the heap plus the libraries' mappings


class Hang(BaseException):  # not an Exception: CliRunner must not swallow it
    pass


def _alarm(signum, frame):
    raise Hang()


def materialize(case, where: Path) -> None:
    where.mkdir(parents=True)
    for name, content in case.files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == FIFO:
            os.mkfifo(path)
        elif content == DEV_ZERO:
            path.symlink_to("/dev/zero")
        elif content == DIRECTORY:
            path.mkdir()
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())


def run_one(case, where: Path) -> dict:
    from click.testing import CliRunner

    from qualgate.cli import cli

    materialize(case, where)
    argv = [a.replace("{d}", str(where)) for a in case.argv]
    saved = None
    if case.limits:
        try:
            from qualgate.records import strict as _strict
        except ImportError:  # a qualgate without size limits: the case runs without them
            pass
        else:
            saved = dict(_strict.LIMITS)
            _strict.LIMITS.update(case.limits)
    t0 = time.monotonic()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    outcome = {}
    try:
        result = CliRunner().invoke(cli, argv, catch_exceptions=True)
        signal.alarm(0)
        exc = result.exception if not isinstance(result.exception, SystemExit) else None
        output = result.stdout + result.stderr
        outcome = {
            "exit_code": result.exit_code,
            "exception": None if exc is None else f"{type(exc).__name__}: {str(exc)[:200]}",
            "traceback": exc is not None or "Traceback (most recent call last)" in output,
            "output": output[-2000:],
        }
    except Hang:
        outcome = {"exit_code": None, "hang": True, "traceback": False, "output": ""}
    except BaseException as exc:  # noqa: BLE001 - recorded, not raised
        signal.alarm(0)
        outcome = {
            "exit_code": None,
            "exception": f"{type(exc).__name__}: {str(exc)[:200]}",
            "traceback": True,
            "output": traceback.format_exc()[-2000:],
        }
    finally:
        signal.alarm(0)
        if saved is not None:
            from qualgate.records import strict as _strict

            _strict.LIMITS.clear()
            _strict.LIMITS.update(saved)
    outcome["seconds"] = round(time.monotonic() - t0, 3)
    return outcome


def main(workdir: str, first: int = 0) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.environ.pop("GITHUB_STEP_SUMMARY", None)
    all_cases = cases()
    root = Path(workdir)
    for i in range(first, len(all_cases)):
        case = all_cases[i]
        print(json.dumps({"start": case.id, "index": i}), flush=True)
        where = root / f"case{i}"
        try:
            outcome = run_one(case, where)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        print(json.dumps({"id": case.id, "index": i, **outcome}), flush=True)


def drive(workdir, *, pythonpath: str, watchdog_s: float = TIME_LIMIT_S + 40) -> dict[str, dict | None]:
    """Run every case in worker processes; return ``{case id: outcome}`` (``None``: the case
    did not end within ``watchdog_s`` even after the alarm, and its worker was killed)."""
    import selectors

    results: dict[str, dict | None] = {}
    total, first = len(cases()), 0
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    while first < total:
        proc = subprocess.Popen(
            [sys.executable, __file__, str(workdir), str(first)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current, deadline = None, time.monotonic() + watchdog_s
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                proc.kill()  # a case the alarm could not stop
                break
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if "start" in msg:
                current, deadline = msg["index"], time.monotonic() + watchdog_s
            else:
                results[msg["id"]] = msg
                first = msg["index"] + 1
                current = None
        proc.wait()
        sel.close()
        proc.stdout.close()
        if current is not None:  # killed, or died (out of memory) inside a case
            results[cases()[current].id] = None
            first = current + 1
        elif first < total and proc.returncode is not None and not results:
            raise RuntimeError(f"the corpus worker failed to start (exit {proc.returncode})")
    return results


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
