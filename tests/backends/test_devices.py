"""One config spread over several devices (one engine per device) writes the one-device records."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from qualgate.backends import (
    Request,
    _devices,
    open_backend,
)
from qualgate.backends._devices import DeviceParallelBackend, cpu_list
from qualgate.backends._devices import comparable_records as records
from qualgate.config.decoding import (
    load_config,
    load_plan,
)
from qualgate.run.runner import run_plan
from qualgate.run.sequential import SequentialSettings


def _spread(devices):
    backend = DeviceParallelBackend.__new__(DeviceParallelBackend)  # (no workers: partition only)
    backend.devices = devices
    return backend


def test_each_device_decodes_what_one_device_would_be_sent_as_one_call():
    # the harness sends two devices calls of twice one device's batch size: each half is one
    # of the calls a one-device run sends, so each engine decodes the same batches
    reqs = [Request([], {"seed": s}) for s in range(4096)]
    assert _spread(["cuda:0", "cuda:1"]).partition(reqs) == [list(range(2048)), list(range(2048, 4096))]
    assert _spread(["cuda:0", "cuda:1", "cuda:2"]).partition(reqs[:5]) == [[0, 1], [2, 3], [4]]


def test_no_device_gets_more_than_its_share_of_a_batch():
    # a part over the per-device batch size costs its engine a whole extra batch of steps
    for n_dev in (1, 2, 3, 4):
        backend = _spread([f"cuda:{i}" for i in range(n_dev)])
        for n in (0, 1, 5, 2048, 4096, 4097):
            parts = backend.partition([Request([], {}) for _ in range(n)])
            assert [i for p in parts for i in p] == list(range(n))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize(
    "device, visible, expected",
    [
        (None, ["cuda:0", "cuda:1"], ["cuda:0", "cuda:1"]),  # unset: every visible GPU
        ("cuda", ["cuda:0"], ["cuda:0"]),  # one GPU: one worker too
        ("cuda:1", ["cuda:0", "cuda:1"], ["cuda:1"]),
        ("cpu", ["cuda:0"], []),  # in this process
        (None, [], []),
        ("cuda:0", [], []),  # no CUDA: the engine, opened here, says so
    ],
)
def test_a_reference_engine_on_cuda_runs_in_one_worker_per_gpu(monkeypatch, device, visible, expected):
    monkeypatch.setattr(_devices, "visible_cuda_devices", lambda: visible)  # (no GPU here)
    options = {} if device is None else {"device": device}
    config = SimpleNamespace(engine="reference", engine_options=options)
    assert _devices.worker_devices(config) == expected
    assert _devices.worker_devices(SimpleNamespace(engine="vllm", engine_options=options)) == []


def test_a_cpu_list_from_sysfs_names_every_cpu_of_its_ranges():
    assert cpu_list("0-3,8-9,16\n") == {0, 1, 2, 3, 8, 9, 16}
    assert cpu_list("5") == {5}
    assert cpu_list("\n") == set()


@pytest.mark.slow
def test_two_worker_engines_write_the_records_of_one_engine(plan_writer, models, tmp_path):
    plan_path = plan_writer(
        tmp_path / "plan",
        models,
        questions=4,
        seeds=(0, 1, 2),
        batch_size=5,
        configs=("target", "standard"),
        engine="reference",
    )
    plan = load_plan(plan_path)

    def two_cpus(config):  # (time: two worker processes for the speculative config only)
        return DeviceParallelBackend(config, ["cpu", "cpu"]) if config.name == "standard" else open_backend(config)

    one = run_plan(plan, tmp_path / "one")
    two = run_plan(plan, tmp_path / "two", backend_factory=two_cpus)
    assert records(tmp_path / "two") == records(tmp_path / "one")
    assert len(records(tmp_path / "one")) == 2 * 4 * 3
    assert one.exit_code == two.exit_code
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    info = manifest["configs"]["standard"]["info"]
    assert info["devices"] == ["cpu", "cpu"]
    # each worker's engine timing and seconds decoding, as of the config's close
    assert sum(t["rows"] for t in info["engine_timing"]) == 4 * 3
    assert all(s > 0 for s in info["busy_s"])


@pytest.mark.slow
def test_configs_open_at_once_on_the_same_workers_each_decode_with_their_own_engine(plan_writer, models, tmp_path):
    # A sequential run keeps the baseline and the candidates open between rounds. When the
    # workers held one engine each, the baseline's later rounds were decoded by the lossy
    # candidate's engine: the gate compared FLy with itself.
    plan = load_plan(
        plan_writer(tmp_path / "plan", models, questions=6, seeds=(0,), configs=("target", "fly"), engine="reference")
    )
    rounds = SequentialSettings(batch_questions=3, max_questions=6)
    run_plan(plan, tmp_path / "one", sequential=rounds, backend_factory=open_backend)
    run_plan(
        plan,
        tmp_path / "two",
        sequential=rounds,
        backend_factory=lambda config: DeviceParallelBackend(config, ["cpu", "cpu"]),
    )
    one = records(tmp_path / "one")
    assert len(one) == 2 * 6
    assert records(tmp_path / "two") == one
    assert any(one[k]["output"] != one[("fly", *k[1:])]["output"] for k in one if k[0] == "target")  # (they differ)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_run_on_every_gpu_writes_the_records_of_a_one_gpu_run(plan_writer, models, tmp_path):
    plan_path = plan_writer(
        tmp_path / "plan", models, questions=20, seeds=(0, 1, 2), batch_size=16, max_tokens=24, engine="reference"
    )
    for cfg in plan_path.parent.glob("*.yaml"):  # no device: the default spreads over every GPU
        cfg.write_text(cfg.read_text().replace("device: cpu, ", ""))
    plan = load_plan(plan_path)
    pinned = load_plan(plan_path)
    for c in pinned.configs.values():
        c.engine_options["device"] = "cuda:0"
    run_plan(pinned, tmp_path / "one")
    run_plan(plan, tmp_path / "all")
    assert records(tmp_path / "all") == records(tmp_path / "one")
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text())
    info = manifest["configs"]["target"]["info"]
    assert info["devices"] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    assert len(set(info["threads"])) == 1  # an equal share each


def _requests(n, offset=0):
    return [
        Request(
            [{"role": "user", "content": f"{i} + {i} = ?"}], {"seed": offset + i, "temperature": 1.0, "max_tokens": 8}
        )
        for i in range(n)
    ]


@pytest.mark.slow
def test_queued_calls_on_two_workers_return_what_one_engine_returns_in_submission_order(plan_writer, models, tmp_path):
    plan = plan_writer(tmp_path / "plan", models, configs=("target", "standard"), engine="reference")
    config = load_config(plan.parent / "standard.yaml")
    calls = [_requests(5, 100 * c) for c in range(4)]  # 4 calls queued at once, parts of 2-3
    backend = DeviceParallelBackend(config, ["cpu", "cpu"])
    try:
        futures = [backend.submit(reqs) for reqs in calls]
        spread = [[g.text for g in f.result(timeout=120)] for f in futures]
        unpicklable = Request([{"role": "user", "content": "1 + 1 = ?"}], {"seed": 1, "max_tokens": lambda: 8})
        with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
            backend.submit([unpicklable, *calls[0]])  # refused before anything is queued
        assert [g.text for g in backend.generate(calls[1])] == spread[1]  # replies still in order
    finally:
        backend.close()
    assert sum(t["rows"] for t in backend.timing) == 4 * 5 + 5  # each worker's engine timing, at the close
    with open_backend(config) as one:
        assert spread == [[g.text for g in one.generate(reqs)] for reqs in calls]


@pytest.mark.slow
def test_workers_share_torchs_default_threads_unless_a_count_is_given(plan_writer, models, tmp_path):
    fresh = int(
        subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )  # a new process's default
    plan = plan_writer(tmp_path / "plan", models, configs=("target",), engine="reference")
    config = load_config(plan.parent / "target.yaml")
    for threads, expected in ((None, max(1, fresh // 2)), (3, 3), (None, max(1, fresh // 2))):
        backend = DeviceParallelBackend(config, ["cpu", "cpu"], threads=threads)  # (the same two workers)
        try:
            assert backend.info()["threads"] == [expected, expected]
            assert backend.info()["pinned_cpus"] == [None, None]  # only a GPU's worker is bound
        finally:
            backend.close()


@pytest.mark.slow
def test_a_worker_that_dies_fails_its_waiting_calls_instead_of_hanging(plan_writer, models, tmp_path):
    plan = plan_writer(tmp_path / "plan", models, configs=("target",), engine="reference")
    config = load_config(plan.parent / "target.yaml")
    backend = DeviceParallelBackend(config, ["cpu", "cpu"])
    victim = backend._workers[1].proc
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(timeout=30)
    future = backend.submit(_requests(4))
    with pytest.raises(RuntimeError, match="exited"):
        future.result(timeout=60)
    backend.close()  # the live worker's close is answered; the dead one's is refused
    again = DeviceParallelBackend(config, ["cpu", "cpu"])  # a new pool replaces the dead worker
    try:
        assert all(g.text is not None for g in again.generate(_requests(4)))
    finally:
        again.close()
