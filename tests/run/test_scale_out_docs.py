"""The Slurm and Kubernetes examples of docs/scale-out.md, run as written: the array body (the
container's command) once per index on a small plan, then the merge step, whose records must be
a one-machine run's.

Each index is a ``qualgate`` process, as a scheduler starts it; so that a process costs a second,
not the import of torch, the plan's configs are served by the vLLM server double of
``tests/backends`` (the reference engine's shards are checked in ``test_shards.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from backends.conftest import FakeVLLMServer, write_server_plan
from backends.test_vllm_server import FLY

from qualgate.backends import open_backend
from qualgate.backends._devices import comparable_records
from qualgate.config.decoding import load_plan
from qualgate.run.runner import run_plan

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    with FakeVLLMServer() as target, FakeVLLMServer(speculative=FLY) as fly:
        plan = write_server_plan(
            root, {"target": {"urls": [target.url]}, "fly": {"urls": [fly.url], "speculative": FLY}}, seeds=(0, 1, 2)
        )
        result = run_plan(load_plan(plan), root / "one", backend_factory=open_backend)
        yield plan, root / "one", result.exit_code


def sh(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # the qualgate of this interpreter first on PATH, one torch thread per process
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full = {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(["bash", "-c", script], env=full, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_doc_has_the_slurm_scripts_and_both_jobs():
    scripts = [b for b in blocks("bash") if "#SBATCH" in b]
    assert len(scripts) == 2 and "$SLURM_ARRAY_TASK_ID" in scripts[0] and "qualgate merge" in scripts[1]
    jobs = [yaml.safe_load(b) for b in blocks("yaml")]
    assert [j["kind"] for j in jobs] == ["Job", "Job"]
    assert jobs[0]["spec"]["completionMode"] == "Indexed"
    env = {e["name"]: e["value"] for e in jobs[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert int(env["SHARDS"]) == jobs[0]["spec"]["completions"]  # (the doc says they must be equal)


@pytest.mark.slow
def test_the_slurm_array_and_its_merge_step_give_the_one_machine_records(one_machine, tmp_path):
    plan, one, one_exit = one_machine
    array, merge = [b for b in blocks("bash") if "#SBATCH" in b]
    first, last = map(int, re.search(r"^#SBATCH --array=(\d+)-(\d+)$", array, flags=re.M).groups())
    env = {"PLAN": str(plan), "RUNS": str(tmp_path / "runs")}
    for task in range(first, last + 1):
        done = sh(
            array, {**env, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(last - first + 1)}, tmp_path
        )
        assert done.returncode == 0, done.stderr
    merged = sh(merge, env, tmp_path)
    assert merged.returncode == one_exit, merged.stderr
    assert comparable_records(tmp_path / "runs" / "merged") == comparable_records(one)
    assert len(list((tmp_path / "runs").glob("shard-*"))) == last - first + 1
    assert len(comparable_records(one)) == 2 * 6 * 3


@pytest.mark.slow
def test_rerunning_one_index_of_the_slurm_array_reruns_that_shard_of_the_whole_count(one_machine, tmp_path):
    plan, one, one_exit = one_machine
    array, merge = [b for b in blocks("bash") if "#SBATCH" in b]
    first, last = map(int, re.search(r"^#SBATCH --array=(\d+)-(\d+)$", array, flags=re.M).groups())
    env = {"PLAN": str(plan), "RUNS": str(tmp_path / "runs")}
    for task in range(first, last + 1):
        count = {"SLURM_ARRAY_TASK_COUNT": str(last - first + 1), "SLURM_ARRAY_TASK_MIN": str(first)}
        assert sh(array, {**env, "SLURM_ARRAY_TASK_ID": str(task), **count}, tmp_path).returncode == 0
    # shard 2 is lost (its node's scratch, say) and rerun alone: sbatch --array=2 makes an array of one task
    import shutil

    shutil.rmtree(tmp_path / "runs" / "shard-2")
    alone = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "2"}
    rerun = sh(array, {**env, **alone}, tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    import json

    shard = json.loads((tmp_path / "runs" / "shard-2" / "manifest.json").read_text())["shard"]
    assert (shard["index"], shard["count"]) == (2, last - first + 1)  # not 2/1, a usage error
    merged = sh(merge, env, tmp_path)
    assert merged.returncode == one_exit, merged.stderr
    assert comparable_records(tmp_path / "runs" / "merged") == comparable_records(one)


@pytest.mark.slow
def test_the_indexed_job_and_its_merge_job_give_the_one_machine_records(one_machine, tmp_path):
    plan, one, one_exit = one_machine
    shards, merge = [yaml.safe_load(b) for b in blocks("yaml")]

    def command(job):
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["bash", "-c"]
        env = {e["name"]: e["value"] for e in container["env"]}
        env.update(PLAN=str(plan), RUNS=str(tmp_path / "runs"))  # the volume and the image's plan, here
        return container["args"][0], env

    script, env = command(shards)
    for index in range(shards["spec"]["completions"]):
        done = sh(script, {**env, "JOB_COMPLETION_INDEX": str(index)}, tmp_path)
        assert done.returncode == 0, done.stderr
    script, env = command(merge)
    merged = sh(script, env, tmp_path)
    assert merged.returncode == one_exit, merged.stderr
    assert comparable_records(tmp_path / "runs" / "merged") == comparable_records(one)
