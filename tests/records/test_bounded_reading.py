"""Reading allocates what a file holds, not the size limit (issue 34, item 7).

Every record file was read into a buffer of ``LIMITS["records"]`` (4 GiB), so ``gate`` on two
small files failed with ``MemoryError`` under an address-space limit (``ulimit -v``, common in
CI containers)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from qualgate.records import strict

from support import REPO, write_records

AS_LIMIT = 2 << 30  # a 2 GiB address space


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _demo_sized(tmp_path):
    """200 questions x 3 seeds per side, as the demo writes them (-n 200)."""
    base = ["correct" if i % 5 else "incorrect" for i in range(600)]
    cand = ["incorrect" if i % 37 == 0 else o for i, o in enumerate(base)]
    b = write_records(tmp_path / "base.jsonl", base, seeds=3, config="cfg-base", mode="target")
    c = write_records(tmp_path / "cand.jsonl", cand, seeds=3, config="cfg-cand", mode="fly")
    return b, c


def _run_limited(*args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "qualgate", *args], env=env, capture_output=True, text=True, preexec_fn=_limited
    )


@pytest.mark.slow
def test_gate_and_calibrate_work_under_a_2_gib_address_space_limit(tmp_path):
    b, c = _demo_sized(tmp_path)
    gate = _run_limited("gate", str(b), str(c), "--margin", "0.05")
    assert "MemoryError" not in gate.stderr, gate.stderr[-2000:]
    assert gate.returncode in (0, 1, 4), gate.stdout + gate.stderr[-2000:]
    calib = _run_limited("calibrate", str(b), str(b))
    assert "MemoryError" not in calib.stderr, calib.stderr[-2000:]
    assert calib.returncode == 0, calib.stdout + calib.stderr[-2000:]


def test_reading_a_small_file_allocates_its_size_not_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a":1}\n')
    asked = []
    real = os.fdopen

    def spy(*args, **kwargs):
        fh = real(*args, **kwargs)

        class Spy:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

            def read(self, n=-1):
                asked.append(n)
                return fh.read(n)

        return Spy()

    monkeypatch.setattr(strict.os, "fdopen", spy)
    assert strict.read_bytes(path, kind="records") == b'{"a":1}\n'
    assert max(asked) <= 1 << 20, asked


def test_a_file_that_grows_while_read_is_read_whole_up_to_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "r.txt"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def shrunk(fd):  # fstat says 4 bytes: the other 6 "arrived" after it
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 4, *st[7:]))

    monkeypatch.setattr(strict.os, "fstat", shrunk)
    assert strict.read_bytes(path) == b"x" * 10
    monkeypatch.setitem(strict.LIMITS, "text", 8)
    with pytest.raises(strict.DataError, match="over the 8 byte limit"):
        strict.read_bytes(path)
