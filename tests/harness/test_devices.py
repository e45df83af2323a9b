"""One config spread over several devices (one engine per device) writes the one-device records."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from qualgate.backends import Request, open_backend  # noqa: E402
from qualgate.backends._devices import DeviceParallelBackend, comparable_records as records  # noqa: E402
from qualgate.config import load_plan  # noqa: E402
from qualgate.harness import run_plan  # noqa: E402


def test_requests_are_partitioned_by_the_seed_of_their_key():
    backend = DeviceParallelBackend.__new__(DeviceParallelBackend)
    backend.devices = ["cuda:0", "cuda:1", "cuda:2"]
    reqs = [Request([], {"seed": s}) for s in (7, 3, 8, 6, 4)]
    assert backend.partition(reqs) == [[1, 3], [0, 4], [2]]
    shuffled = [reqs[i] for i in (4, 2, 0, 3, 1)]  # a device's requests follow their seeds
    parts = backend.partition(shuffled)
    assert [sorted(shuffled[i].sampling["seed"] for i in p) for p in parts] == [[3, 6], [4, 7], [8]]


@pytest.mark.slow
def test_two_worker_engines_write_the_records_of_one_engine(plan_writer, models, tmp_path):
    plan_path = plan_writer(tmp_path / "plan", models, questions=4, seeds=(0, 1, 2), batch_size=5,
                            configs=("target", "standard"))
    plan = load_plan(plan_path)

    def two_cpus(config):  # (time: two worker processes for the speculative config only)
        return DeviceParallelBackend(config, ["cpu", "cpu"]) if config.name == "standard" else open_backend(config)

    one = run_plan(plan, tmp_path / "one")
    two = run_plan(plan, tmp_path / "two", backend_factory=two_cpus)
    assert records(tmp_path / "two") == records(tmp_path / "one")
    assert len(records(tmp_path / "one")) == 2 * 4 * 3
    assert one.exit_code == two.exit_code
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert manifest["configs"]["standard"]["info"]["devices"] == ["cpu", "cpu"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_run_on_every_gpu_writes_the_records_of_a_one_gpu_run(plan_writer, models, tmp_path):
    plan_path = plan_writer(tmp_path / "plan", models, questions=20, seeds=(0, 1, 2), batch_size=16,
                            max_tokens=24)
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
    assert manifest["configs"]["target"]["info"]["devices"] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
