"""``qualgate run --resume`` after a real ``qualgate run`` process was killed (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import read_records

CONFIGS = ("target", "standard", "fly")
VOLATILE = {"run_id", "latency_s"}  # differ between two runs by design


def lines(path):
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_midway(plan, out, watch, timeout=120):
    """Start ``qualgate run`` in a subprocess; SIGKILL it once ``watch`` holds a record.

    The subprocess registers the toy engine, each of whose batches takes 50 ms there (so that
    the run is still decoding when it is killed)."""
    code = "import sys, toy_engine; toy_engine.register(); from qualgate.cli import main; main(sys.argv[1:])"
    path = os.pathsep.join(p for p in (str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, "QUALGATE_TOY_DELAY_S": "0.05"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(plan), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + timeout
    while lines(watch) < 1:
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()!r}"
        assert time.monotonic() < deadline, "no record appeared in time"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.returncode


def by_key(path):
    recs = read_records(path)
    return [r.key for r in recs], {r.key: {k: v for k, v in r.to_dict().items() if k not in VOLATILE} for r in recs}


@pytest.mark.slow
def test_resume_after_sigkill_equals_an_uninterrupted_run(plan_factory, tmp_path):
    plan = plan_factory(questions=8, seeds=(0, 1), batch_size=2)
    out = tmp_path / "killed"
    assert kill_midway(plan, out, out / "records" / "standard.jsonl") == -signal.SIGKILL
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "running" and not (out / "gate.json").exists()
    partial = {c: lines(out / "records" / f"{c}.jsonl") for c in CONFIGS}
    assert partial["target"] == 16 and 1 <= partial["standard"] < 16 and partial["fly"] == 0
    # a torn write: the last record only half on disk
    with open(out / "records" / "standard.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"run_id":"x","config_id":"cfg-')

    resumed = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--resume"])
    fresh = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "fresh"), "--quiet"])

    assert resumed.exit_code == fresh.exit_code != 3, resumed.output
    assert "removed an incomplete last line" in resumed.stderr
    for c in CONFIGS:
        keys, records = by_key(out / "records" / f"{c}.jsonl")
        fresh_keys, fresh_records = by_key(tmp_path / "fresh" / "records" / f"{c}.jsonl")
        assert len(keys) == len(set(keys)) == 16  # nothing duplicated, nothing lost
        assert set(keys) == set(fresh_keys)
        # batches are whole on disk, so the resumed batches are the fresh run's batches and
        # each seeded request decodes to the same record
        assert records == fresh_records
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "complete" and len(m["resumed_at"]) == 1
    # the request counts are the records' (batches written after the killed run last saved
    # its manifest are counted, as untimed)
    for c in CONFIGS:
        t = m["configs"][c]["throughput"]
        assert t["requests"] == 16 and 0 <= t.get("untimed_requests", 0) < 16, (c, t)
    assert m["run_id"] == manifest["run_id"]
    assert {r.run_id for c in CONFIGS for r in read_records(out / "records" / f"{c}.jsonl")} == {m["run_id"]}


@pytest.mark.slow
def test_ctrl_c_exits_130_and_says_the_records_are_kept_for_resume(plan_factory, tmp_path):
    plan = plan_factory(questions=8, seeds=(0, 1), batch_size=2)
    out = tmp_path / "interrupted"
    code = "import sys, toy_engine; toy_engine.register(); from qualgate.cli import main; main(sys.argv[1:])"
    path = os.pathsep.join(p for p in (str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "QUALGATE_TOY_DELAY_S": "0.05"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(plan), "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + 120
    while lines(out / "records" / "standard.jsonl") < 1:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)  # as Ctrl-C at a terminal
    _, err = proc.communicate(timeout=120)
    written = sum(lines(f) for f in (out / "records").glob("*.jsonl"))
    assert proc.returncode == 130, err
    assert f"interrupted: the {written} records written so far are kept" in err.decode()
    assert "Aborted!" not in err.decode()
    resumed = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--resume", "--quiet"])
    assert resumed.exit_code in (0, 1, 4), resumed.output
