"""A Hub suite on a machine that cannot reach the Hub: one clear error at once, not the Hub
client's retries (about 25 s before its own message)."""

from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner

from qualgate.cli import cli


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_hub_is_a_clear_exit_3_within_seconds(monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    import datasets

    def forbidden(*a, **k):
        raise AssertionError("datasets.load_dataset was called with the Hub unreachable")

    monkeypatch.setattr(datasets, "load_dataset", forbidden)
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    t0 = time.perf_counter()
    r = CliRunner().invoke(cli, ["suites", "show", "gsm8k"])
    assert time.perf_counter() - t0 < 5
    assert r.exit_code == 3, r.output
    assert "cannot reach the Hugging Face Hub" in r.stderr and endpoint in r.stderr
    assert "HF_HUB_OFFLINE=1" in r.stderr and "--data-file" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_mode_goes_to_the_local_cache_without_probing_the_hub(monkeypatch, var):
    from qualgate.suites import _load

    monkeypatch.setenv(var, "1")
    monkeypatch.setattr(_load, "_hub_unreachable", lambda: pytest.fail("probed the Hub in offline mode"))
    r = CliRunner().invoke(cli, ["suites", "show", "gsm8k"])
    # datasets reads its (here empty) cache and fails at once with its own reason
    assert r.exit_code == 3 and "cannot load from the Hugging Face Hub" in r.stderr, r.output
