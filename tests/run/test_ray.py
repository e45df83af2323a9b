"""``qualgate run --ray``: a plan's batches on Ray actors (a local Ray instance of CPU actors,
started and stopped here) write the records of the in-process run; a killed actor loses and
duplicates nothing; Ray stays optional."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from qualgate.backends import open_backend
from qualgate.backends._devices import comparable_records
from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.records import read_records
from qualgate.run.ray_backend import RayCluster
from qualgate.run.runner import run_plan


def test_the_core_imports_and_says_what_to_install_without_ray(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["ray"] = None  # as if the ray extra were not installed
        import qualgate.run.runner, qualgate.run.shards, qualgate.cli.run
        from qualgate.errors import DataError
        from qualgate.run.ray_backend import RayCluster
        try:
            RayCluster().__enter__()
        except DataError as exc:
            print(exc)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'qualgate[ray]'" in out.stdout


@pytest.mark.slow
def test_ray_actors_without_ray_is_a_usage_error(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: x\n")
    result = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "o"), "--ray-actors", "2"])
    assert result.exit_code == 2 and "--ray-actors needs --ray" in result.output


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance with two CPUs for the tests of this module, stopped after them
    (the tests that need it skip when the ray extra is not installed)."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'qualgate[ray]')")
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def plan_and_reference(tmp_path_factory, models, plan_writer):
    root = tmp_path_factory.mktemp("ray")
    plan = load_plan(
        plan_writer(
            root / "plan",
            models,
            questions=6,
            seeds=(0, 1),
            batch_size=2,
            configs=("target", "standard"),
            engine="reference",  # (Ray's actor processes know only qualgate's own engines)
        )
    )
    run_plan(plan, root / "in-process", backend_factory=open_backend)
    return plan, root / "in-process"


@pytest.mark.slow
def test_a_run_on_ray_actors_writes_the_records_of_the_in_process_run(local_ray, plan_and_reference, tmp_path):
    plan, reference = plan_and_reference
    with RayCluster(actors=2, threads=1) as cluster:
        result = run_plan(plan, tmp_path / "ray", backend_factory=cluster.open)
    assert local_ray.is_initialized()  # (the test's instance: the cluster only stops one it started)
    assert comparable_records(tmp_path / "ray") == comparable_records(reference)
    assert len(comparable_records(reference)) == 2 * 6 * 2
    manifest = result.manifest
    cluster_info = manifest["cluster"]
    assert cluster_info["ray_version"] == local_ray.__version__ and cluster_info["cpus"] == 2
    assert len(cluster_info["nodes"]) == 1 and cluster_info["gpus"] == 0
    info = manifest["configs"]["standard"]["info"]["ray"]
    assert len(info["actors"]) == 2 and info["num_gpus"] == 0 and info["lost_actors"] == []
    # every config ran on the same two actors (started once), each of which decoded some batches
    assert info["actors"] == manifest["configs"]["target"]["info"]["ray"]["actors"]
    assert len(info["busy_s"]) == 2 and all(b > 0 for b in info["busy_s"])


@pytest.mark.slow
def test_qualgate_run_with_ray_gates_as_the_in_process_run(local_ray, plan_and_reference, tmp_path):
    plan, reference = plan_and_reference
    result = CliRunner().invoke(cli, ["run", plan.path, "--ray", "--ray-actors", "1", "--out", str(tmp_path / "ray")])
    in_process = json.loads((reference / "manifest.json").read_text())["gate"]
    assert result.exit_code == in_process["exit_code"], result.output
    assert comparable_records(tmp_path / "ray") == comparable_records(reference)
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["gate"]["verdicts"] == in_process["verdicts"]
    assert [len(c["info"]["ray"]["actors"]) for c in manifest["configs"].values()] == [1, 1]


@pytest.mark.slow
def test_killing_an_actor_mid_run_loses_and_duplicates_no_record(local_ray, plan_and_reference, tmp_path):
    plan, reference = plan_and_reference
    opened, killed = [], []

    class KillOnFirstBatch:
        def __init__(self, label):
            self.label = label

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            if self.label == "target" and not killed:
                pid = opened[-1].actors[0]["pid"]
                os.kill(pid, signal.SIGKILL)  # the actor's process dies with batches queued on it
                killed.append(pid)

    with RayCluster(actors=2, threads=1) as cluster:

        def factory(config):
            opened.append(cluster.open(config))
            return opened[-1]

        run_plan(plan, tmp_path / "ray", backend_factory=factory, progress=lambda label, total: KillOnFirstBatch(label))
    assert killed
    for name in ("target", "standard"):
        keys = [r.key for r in read_records(tmp_path / "ray" / "records" / f"{name}.jsonl")]
        assert len(keys) == len(set(keys)) == 12  # none lost, none twice
    assert comparable_records(tmp_path / "ray") == comparable_records(reference)
    configs = json.loads((tmp_path / "ray" / "manifest.json").read_text())["configs"]
    info = configs["target"]["info"]["ray"]
    assert [a["pid"] for a in info["lost_actors"]] == killed
    assert info["retried_batches"] >= 1
    assert info["busy_s"][0] is None and info["busy_s"][1] > 0  # (the lost actor's time is lost with it)
    # the next config opened on the surviving actor and a new one in place of the lost one
    pids = [a["pid"] for a in configs["standard"]["info"]["ray"]["actors"]]
    assert len(pids) == 2 and killed[0] not in pids and info["actors"][1]["pid"] in pids


@pytest.mark.slow
def test_a_run_whose_every_actor_is_lost_stops_and_resumes_to_the_same_records(local_ray, plan_and_reference, tmp_path):
    plan, reference = plan_and_reference
    opened, killed = [], []

    class KillAfterFirstBatch:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            if not killed:  # the only actor dies
                killed.append(opened[0].actors[0]["pid"])
                os.kill(killed[0], signal.SIGKILL)

    with RayCluster(actors=1, threads=1) as cluster:

        def factory(config):
            opened.append(cluster.open(config))
            return opened[-1]

        with pytest.raises(RuntimeError, match="every Ray actor of config 'target' was lost"):
            run_plan(
                plan, tmp_path / "ray", backend_factory=factory, progress=lambda label, total: KillAfterFirstBatch()
            )
    written = read_records(tmp_path / "ray" / "records" / "target.jsonl")
    assert 1 <= len(written) < 12  # the batches written before the loss are kept
    with RayCluster(actors=1, threads=1) as cluster:
        run_plan(plan, tmp_path / "ray", resume=True, backend_factory=cluster.open)
    assert comparable_records(tmp_path / "ray") == comparable_records(reference)


@pytest.mark.slow
def test_an_actor_killed_while_idle_is_dropped_and_the_run_completes(local_ray, plan_and_reference, tmp_path):
    plan, reference = plan_and_reference
    opened, killed = [], []
    with RayCluster(actors=2, threads=1) as cluster:

        def factory(config):
            if opened:  # between two configs: no batch is queued on any actor
                pid = opened[0].actors[0]["pid"]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                _wait_dead(pid)
            opened.append(cluster.open(config))
            return opened[-1]

        result = run_plan(plan, tmp_path / "ray", backend_factory=factory)
    assert killed and result.exit_code in (0, 1, 4)
    assert comparable_records(tmp_path / "ray") == comparable_records(reference)
    info = result.manifest["configs"]["standard"]["info"]["ray"]
    assert [a["pid"] for a in info["lost_actors"]] == killed
    assert info["retried_batches"] == 0  # nothing was queued on it
    assert info["busy_s"][0] is None and info["busy_s"][1] > 0  # the survivor decoded every batch


def _wait_dead(pid: int, timeout: float = 30.0) -> None:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
