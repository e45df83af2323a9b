"""One run per --out (a lock naming its holder), a resume fingerprint that covers every
engine option, plain config names, and --resume retrying error records (issue 16)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.errors import DataError
from qualgate.records import read_records
from qualgate.run.manifest import LOCK_NAME, RunLock, plan_fingerprint
from qualgate.run.runner import load_suites, run_plan

HOLD = """
import os, sys, time
from qualgate.run.manifest import RunLock
lock = RunLock(sys.argv[1]).acquire()
lock.announce()
if sys.argv[2] == "fork-and-exit" and os.fork():
    os._exit(0)  # the parent ends; its child still holds the locked descriptor
print("held", os.getpid(), flush=True)
time.sleep(120)
"""


def hold(out, how="hold"):
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out), how], stdout=subprocess.PIPE, text=True)
    said, pid = proc.stdout.readline().split()
    assert said == "held"
    return proc, int(pid)


def run(*args):
    return CliRunner().invoke(cli, ["run", *map(str, args), "--quiet"])


@pytest.mark.slow  # (the holder is a Python process of its own)
def test_a_second_run_on_a_locked_out_is_refused_naming_pid_and_host(plan_factory, tmp_path):
    out = tmp_path / "out"
    holder, _ = hold(out)
    try:
        result = run(plan_factory(configs=("target",)), "--out", out, "--resume")
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 3
    assert f"pid {holder.pid} on host {socket.gethostname()!r}" in result.stderr
    assert not (out / "manifest.json").exists()  # refused before writing anything


def test_a_lock_whose_holder_was_killed_is_taken_over(tmp_path):
    holder, _ = hold(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with RunLock(tmp_path) as lock:  # the kernel released the dead holder's lock
        lock.announce()
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_dead_holder_whose_child_keeps_the_lock_is_named_not_stolen(tmp_path):
    holder, child = hold(tmp_path, "fork-and-exit")  # the child answers; its parent exits
    holder.wait()
    try:
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == holder.pid != child
        with pytest.raises(DataError) as exc:
            RunLock(tmp_path).acquire()
        assert "that pid has ended but a process it started" in str(exc.value)
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_refused_run_leaves_no_lock_file_in_a_non_empty_directory(plan_factory, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert run(plan_factory(configs=("target",)), "--out", out).exit_code == 3
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def _with_options(plan, name, **options):
    cfg = plan.configs[name]
    cfg = dataclasses.replace(cfg, engine_options={**cfg.engine_options, **options})
    return dataclasses.replace(plan, configs={**plan.configs, name: cfg})


def test_the_resume_fingerprint_covers_every_engine_option_but_transport(plan_factory):
    plan = load_plan(plan_factory(configs=("target", "standard")))
    suites = load_suites(plan)
    base = plan_fingerprint(plan, suites)
    for option in (
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"max_num_seqs": 7},
        {"seed": 3},
        {"dtype": "float16"},
        {"batch_size": 1},
    ):
        assert plan_fingerprint(_with_options(plan, "standard", **option), suites) != base, option
    for option in ({"timeout_s": 5}, {"max_retries": 9}, {"base_urls": ["http://elsewhere:8000"]}):
        assert plan_fingerprint(_with_options(plan, "standard", **option), suites) == base, option


@pytest.mark.slow
def test_resume_refuses_changed_chat_template_kwargs(plan_factory, tmp_path):
    path = plan_factory(configs=("target",), questions=2, seeds=(0,))
    out = tmp_path / "out"
    assert run(path, "--out", out).exit_code == 0
    cfg = path.parent / "target.yaml"
    cfg.write_text(cfg.read_text().replace("batch_size: 4}", "batch_size: 4, chat_template_kwargs: {x: 1}}"))
    result = run(path, "--out", out, "--resume")
    assert result.exit_code == 3 and "chat_template_kwargs" in result.stderr


@pytest.mark.slow
def test_a_manifest_from_an_older_fingerprint_is_not_resumed(plan_factory, tmp_path):
    path = plan_factory(configs=("target",), questions=2, seeds=(0,))
    out = tmp_path / "out"
    assert run(path, "--out", out).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["fingerprint"]["fingerprint_version"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = run(path, "--out", out, "--resume")
    assert result.exit_code == 3 and "start a new run" in result.stderr


def test_a_config_name_that_is_not_a_plain_name_writes_nothing(plan_factory, tmp_path):
    plan = load_plan(plan_factory(configs=("target",)))
    escaped = dataclasses.replace(
        plan, configs={"../../escaped": plan.configs["target"]}, baseline="../../escaped", candidates=()
    )
    with pytest.raises(DataError, match="plain name"):
        run_plan(escaped, tmp_path / "a" / "out")
    assert not (tmp_path / "a").exists() and not (tmp_path / "escaped.jsonl").exists()


def _error_out(path, key):
    """Replace the record of ``key`` by an error record, as an engine outage would have left it."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if (rec["suite"], rec["question_id"], rec["seed"], rec["sample_index"]) == key:
            for name in ("output", "answer_strict", "answer_lenient", "output_tokens", "latency_s"):
                rec.pop(name, None)
            lines[i] = json.dumps({**rec, "outcome": "error", "error": "ConnectionError: server went away"})
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_resume_retries_error_records_and_the_retry_supersedes_the_error(plan_factory, tmp_path):
    path = plan_factory(configs=("target", "standard"), questions=3, seeds=(0,))
    out = tmp_path / "out"
    assert run(path, "--out", out).exit_code == 4
    records = out / "records" / "standard.jsonl"
    fresh = {r.key: r for r in read_records(records)}
    key = next(iter(fresh))
    _error_out(records, key)
    assert run(path, "--out", out, "--resume", "--keep-errors").exit_code == 3  # the gate refuses the error
    assert read_records(records).superseded == ()

    result = run(path, "--out", out, "--resume")
    assert result.exit_code == 4, result.stderr
    again = read_records(records)
    assert again.superseded == (f"{records}:1",)  # the error (line 1) gave way to line 4
    retried = {r.key: r for r in again}
    assert retried.keys() == fresh.keys() and retried[key].outcome != "error"
    assert retried[key].output == fresh[key].output  # the same seeded request, decoded again
    side = read_records(out / "retried_errors" / "standard.jsonl")
    assert [r.key for r in side] == [key] and side[0].error.startswith("ConnectionError")
    assert records.read_text().count('"outcome":"error"') + records.read_text().count('"outcome": "error"') == 1
    assert json.loads((out / "manifest.json").read_text())["configs"]["standard"]["retried_errors"] == 1
