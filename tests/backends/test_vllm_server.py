"""``engine: vllm-server``: ``qualgate run`` against real HTTP servers on 127.0.0.1.

The servers (``conftest.FakeVLLMServer``) speak vLLM 0.33's OpenAI-compatible protocol:
``/v1/models``, ``/v1/chat/completions`` with ``metrics.speculative_decoding``, ``/metrics``
and, when asked, ``/server_info``.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from click.testing import CliRunner

from qualgate.backends import Request, open_backend
from qualgate.backends._openai import retry_after
from qualgate.backends.vllm_server import (
    VLLMServerBackend,
    parse_spec_metrics,
    request_body,
)
from qualgate.cli import cli
from qualgate.config.decoding import parse_config
from qualgate.errors import DataError
from qualgate.run.runner import request_seed

FLY = {
    "method": "draft_model",
    "model": "Qwen/Qwen3-0.6B",
    "num_speculative_tokens": 8,
    "rejection_sample_method": "fly",
    "fly_window_size": 2,
}
QIDS = [f"test-0-{i}" for i in range(6)]  # the tiny suite's question ids
SEEDS = (0, 1, 2)


def rseed(qid, seed):
    return request_seed("tinyarith", qid, seed, 0)


def per_step(seed, k=8):  # conftest.accepted_per_step
    return [(seed >> (3 * j)) % (k + 1) for j in range(4)]


def run(plan, out, *extra):
    return CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "-q", *extra])


def records(out, name):
    return [json.loads(x) for x in (out / "records" / f"{name}.jsonl").read_text().splitlines()]


def server_config(urls, speculative=None, **options):
    opts = {"base_urls": urls, "timeout_s": 2.0, "max_retries": 3, "retry_backoff_s": 0.01, **options}
    return parse_config(
        {
            "name": "c",
            "engine": "vllm-server",
            "model": "Qwen/Qwen3-8B",
            "speculative": speculative,
            "sampling": {"temperature": 0.6, "max_tokens": 32},
            "engine_options": opts,
        }
    )


def some_requests(n, start=0):
    return [
        Request(
            ({"role": "user", "content": f"What is {i} + 1?"},),
            {"temperature": 0.6, "max_tokens": 32, "seed": start + i},
        )
        for i in range(n)
    ]


# ----------------------------------------------------------------------------- full runs


@pytest.mark.slow
def test_full_run_survives_a_429_burst_a_500_and_a_timeout(fake_server, server_plan, tmp_path):
    s500, slow = rseed(QIDS[1], 0), rseed(QIDS[2], 1)
    target = fake_server(burst_429=5, fail_500=[s500], slow=[slow], slow_s=1.0)
    fleet = [fake_server(speculative=FLY, server_info=True) for _ in range(2)]
    plan = server_plan(
        tmp_path,
        {
            "target": {"urls": [target.url]},
            "fly": {"urls": [s.url for s in fleet], "speculative": FLY},
        },
    )
    out = tmp_path / "out"
    r = run(plan, out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gate"]["status"] == "ok", r.output
    assert r.exit_code == manifest["gate"]["exit_code"]

    # every fault was met, and every request still succeeded
    assert target.statuses.count(429) == 5 and target.statuses.count(500) == 1
    assert target.statuses.count(0) == 1  # the slow attempt, abandoned after timeout_s
    t_info = manifest["configs"]["target"]["info"]
    assert t_info["requests"] == {
        "requests": 18,
        "attempts": 25,
        "retried_429": 5,
        "retried_5xx": 1,
        "retried_timeout": 1,
        "retried_connection": 0,
        "retried_identity": 0,
        "failed": 0,
        "with_spec_metrics": 0,
    }
    base, cand = records(out, "target"), records(out, "fly")
    assert len(base) == len(cand) == len(QIDS) * len(SEEDS)
    assert all(x["outcome"] == "correct" for x in base)

    # per-request seeds and the config's sampling reached the servers
    bodies = target.bodies + fleet[0].bodies + fleet[1].bodies
    assert sorted(b["seed"] for b in bodies) == sorted(
        rseed(q, s) for q in QIDS for s in SEEDS for _ in ("target", "fly")
    )
    for b in bodies:
        assert b["model"] == "Qwen/Qwen3-8B" and b["max_completion_tokens"] == 256
        assert (b["temperature"], b["top_p"], b["top_k"]) == (0.6, 0.95, 20)
        assert b["chat_template_kwargs"] == {"enable_thinking": False}
    assert fleet[0].bodies and fleet[1].bodies  # the fleet shared the work

    # the candidate's answers and acceptance, request by request
    for x in cand:
        s = rseed(x["question_id"], x["seed"])
        assert x["outcome"] == ("incorrect" if s % 3 == 0 else "correct")
        assert (x["spec_steps"], x["draft_tokens"], x["accepted_tokens"]) == (4, 32, sum(per_step(s)))
    f_info = manifest["configs"]["fly"]["info"]
    sd = f_info["spec_decode"]
    assert sd["num_accepted_tokens"] == sum(x["accepted_tokens"] for x in cand)
    assert sd["num_drafts"] == 4 * len(cand)
    assert f_info["requests"]["with_spec_metrics"] == len(cand)
    for s in fleet:
        assert f_info["servers"][s.url]["speculative_config"] == "matches (/server_info)"
        assert f_info["servers"][s.url]["version"] == "0.33.0"


def test_a_request_that_keeps_failing_is_recorded_as_an_error(fake_server, server_plan, tmp_path):
    bad = rseed(QIDS[3], 2)
    target = fake_server(always_500=[bad])
    fly = fake_server(speculative=FLY)
    plan = server_plan(tmp_path, {"target": {"urls": [target.url]}, "fly": {"urls": [fly.url], "speculative": FLY}})
    out = tmp_path / "out"
    r = run(plan, out, "--max-errors", "1")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gate"]["status"] == "ok", r.output
    assert r.exit_code == manifest["gate"]["exit_code"]
    (err,) = [x for x in records(out, "target") if x["outcome"] == "error"]
    assert (err["question_id"], err["seed"]) == (QIDS[3], 2)
    assert "HTTP 500" in err["error"] and "gave up after 4 attempts" in err["error"]
    assert len(records(out, "target")) == 18
    assert manifest["configs"]["target"]["info"]["requests"]["failed"] == 1


def test_a_model_mismatch_exits_3_before_any_request(fake_server, server_plan, tmp_path):
    wrong = fake_server(model="Qwen/Qwen3-32B")
    plan = server_plan(tmp_path, {"target": {"urls": [wrong.url]}, "fly": {"urls": [wrong.url], "speculative": FLY}})
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3
    assert f"the server at {wrong.url} serves ['Qwen/Qwen3-32B'], not 'Qwen/Qwen3-8B'" in r.stderr
    assert wrong.statuses == []


def test_a_served_name_over_another_model_exits_3(fake_server, server_plan, tmp_path):
    srv = fake_server(model="/models/Qwen3-32B", served="qwen")
    plan = server_plan(
        tmp_path,
        {
            "target": {"urls": [srv.url], "options": {"served_model_name": "qwen"}},
            "fly": {"urls": [srv.url], "speculative": FLY},
        },
    )
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3
    assert "loaded '/models/Qwen3-32B' as 'qwen'" in r.stderr


def test_a_different_served_speculative_config_exits_3(fake_server, server_plan, tmp_path):
    target = fake_server()
    w6 = fake_server(speculative={**FLY, "fly_window_size": 6}, server_info=True)
    plan = server_plan(tmp_path, {"target": {"urls": [target.url]}, "fly": {"urls": [w6.url], "speculative": FLY}})
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3
    assert "serves a different speculative_config: fly_window_size: config 2, server 6" in r.stderr
    assert w6.statuses == []


def test_a_target_only_config_on_a_speculative_server_exits_3(fake_server, server_plan, tmp_path):
    spec = fake_server(speculative=FLY)  # no /server_info: /metrics gives it away
    plan = server_plan(tmp_path, {"target": {"urls": [spec.url]}, "fly": {"urls": [spec.url], "speculative": FLY}})
    r = run(plan, tmp_path / "out")
    assert r.exit_code == 3
    assert "runs speculative decoding" in r.stderr and "target-only" in r.stderr


def test_a_different_k_on_the_server_metrics_exits_3(fake_server):
    k4 = fake_server(speculative={**FLY, "num_speculative_tokens": 4})
    with pytest.raises(DataError, match="drafts 4 tokens .* num_speculative_tokens is 8"):
        VLLMServerBackend(server_config([k4.url], FLY))


def test_a_different_k_in_a_response_is_that_requests_error(fake_server):
    k4 = fake_server(speculative={**FLY, "num_speculative_tokens": 4}, metrics_k=8)
    with open_backend(server_config([k4.url], FLY)) as backend:
        gens = backend.generate(some_requests(3))
    for g in gens:
        assert g.error.startswith(
            f"{k4.url}: decoded with 4 speculative tokens, but the config is num_speculative_tokens 8"
        )


def test_acceptance_comes_from_metrics_deltas_without_per_request_metrics(fake_server, server_plan, tmp_path):
    target = fake_server()
    fly = fake_server(speculative=FLY, per_request_metrics=False)
    fly.counters["drafts"] = 1000  # traffic before this config: not attributed to it
    plan = server_plan(tmp_path, {"target": {"urls": [target.url]}, "fly": {"urls": [fly.url], "speculative": FLY}})
    out = tmp_path / "out"
    run(plan, out)
    cand = records(out, "fly")
    assert all("spec_steps" not in x for x in cand)
    sd = json.loads((out / "manifest.json").read_text())["configs"]["fly"]["info"]["spec_decode"]
    accepted = sum(sum(per_step(rseed(x["question_id"], x["seed"]))) for x in cand)
    assert sd["source"] == "/metrics delta while this config ran"
    assert (sd["num_drafts"], sd["num_draft_tokens"]) == (4 * 18, 32 * 18)
    assert sd["num_accepted_tokens"] == accepted == sum(sd["num_accepted_tokens_per_pos"])
    assert sd["mean_acceptance_length"] == pytest.approx(1 + accepted / 72)


# ----------------------------------------------------------------------------- the client


def test_concurrency_is_bounded(fake_server):
    srv = fake_server(delay_s=0.05)
    with open_backend(server_config([srv.url], concurrency=3)) as backend:
        gens = backend.generate(some_requests(12))
    assert all(g.error is None for g in gens)
    assert srv.max_in_flight == 3


def test_generations_come_back_in_request_order(fake_server):
    fleet = [fake_server(delay_s=0.01), fake_server()]
    with open_backend(server_config([s.url for s in fleet], concurrency=6)) as backend:
        gens = backend.generate(some_requests(10))
    assert [g.text for g in gens] == [f"#### {i + 1}" for i in range(10)]
    assert len(fleet[0].bodies) + len(fleet[1].bodies) == 10


def test_requests_go_to_the_least_loaded_replica(fake_server):
    slow, fast = fake_server(delay_s=0.3), fake_server()
    with open_backend(server_config([slow.url, fast.url], concurrency=2)) as backend:
        gens = backend.generate(some_requests(12))
    assert all(g.error is None for g in gens)
    # the slow replica holds one request while the fast one answers the rest
    assert len(slow.bodies) <= 2 and len(fast.bodies) >= 10


def test_connections_are_kept_alive_and_reused(fake_server):
    srv = fake_server()
    with open_backend(server_config([srv.url], concurrency=1)) as backend:
        for _ in range(3):
            backend.generate(some_requests(10))
        assert backend.info()["connections_opened"] == 1
    # /v1/models, /version, /server_info, /metrics, 30 completions, /metrics after each batch
    assert srv.connections == 1


def test_retry_after_is_honoured(fake_server):
    srv = fake_server(burst_429=1, retry_after="0.4")
    with open_backend(server_config([srv.url], retry_backoff_s=0.001)) as backend:
        t0 = time.perf_counter()
        (g,) = backend.generate(some_requests(1))
        elapsed = time.perf_counter() - t0
    assert g.error is None and elapsed >= 0.4


@pytest.mark.slow
def test_backoff_grows_exponentially(fake_server):
    srv = fake_server(burst_429=3)  # Retry-After: 0
    with open_backend(server_config([srv.url], retry_backoff_s=0.1)) as backend:
        t0 = time.perf_counter()
        (g,) = backend.generate(some_requests(1))
        elapsed = time.perf_counter() - t0
    # sleeps of 0.1 * 2**a * U(0.5, 1) for a = 0, 1, 2: at least 0.05 + 0.1 + 0.2
    assert g.error is None and elapsed >= 0.35


def test_a_client_error_is_not_retried(fake_server):
    srv = fake_server()
    with open_backend(server_config([srv.url])) as backend:
        (g,) = backend.generate(
            [Request(({"role": "user", "content": "What is 1 + 1?"},), {"max_tokens": 50000, "seed": 1})]
        )
    assert g.error.startswith(f"{srv.url}: HTTP 400: ") and "cannot be greater than max_model_len" in g.error
    assert srv.statuses == [400]


def test_sampling_keys_the_protocol_lacks_fail_the_request_before_sending(fake_server):
    srv = fake_server()
    with open_backend(server_config([srv.url])) as backend:
        (g,) = backend.generate(
            [Request(({"role": "user", "content": "x"},), {"max_tokens": 1, "seed": 1, "logprobs": 3})]
        )
    assert "cannot be sent" in g.error and srv.statuses == []


def test_close_ends_requests_waiting_to_retry(fake_server):
    srv = fake_server(always_500=[0])
    backend = open_backend(server_config([srv.url], retry_backoff_s=30.0))
    result = []
    worker = threading.Thread(target=lambda: result.extend(backend.generate(some_requests(1))))
    worker.start()
    deadline = time.monotonic() + 10
    while not srv.statuses:  # the first attempt got its 500; the backoff sleep began
        assert time.monotonic() < deadline, "the first attempt never reached the server"
        time.sleep(0.01)
    t0 = time.perf_counter()
    backend.close()
    worker.join(5)
    assert time.perf_counter() - t0 < 2
    (g,) = result
    assert "closed first" in g.error and "HTTP 500" in g.error


def test_the_api_key_comes_from_the_named_environment_variable(fake_server, monkeypatch):
    srv = fake_server()
    monkeypatch.setenv("QG_TEST_KEY", "s3cret")
    with open_backend(server_config([srv.url], api_key_env="QG_TEST_KEY")) as backend:
        backend.generate(some_requests(1))
        assert "s3cret" not in json.dumps(backend.info())
    assert srv.auth == ["Bearer s3cret"]
    monkeypatch.delenv("QG_TEST_KEY")
    with pytest.raises(DataError, match="engine_options.api_key_env"):
        open_backend(server_config([srv.url], api_key_env="QG_TEST_KEY"))


def test_an_unreachable_server_is_a_data_error(fake_server):
    srv = fake_server()
    url = srv.url
    srv.__exit__(None, None, None)
    with pytest.raises(DataError, match=f"cannot reach {url}/v1/models"):
        VLLMServerBackend(server_config([url]))


def test_request_body_maps_max_tokens_and_keeps_the_seed():
    r = Request(
        ({"role": "user", "content": "hi"},), {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 9, "seed": 5}
    )
    assert request_body("m", r, {"enable_thinking": False}) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "seed": 5,
        "max_completion_tokens": 9,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    with pytest.raises(ValueError, match="max_tokens"):
        request_body("m", Request(r.messages, {"seed": 5}))


def test_parse_spec_metrics_sums_the_served_model_and_reads_positions():
    text = (
        "\n".join(
            [
                "# TYPE vllm:spec_decode_num_drafts counter",
                'vllm:spec_decode_num_drafts_total{engine="0",model_name="a"} 10.0',
                'vllm:spec_decode_num_drafts_total{engine="1",model_name="a"} 5.0',
                'vllm:spec_decode_num_drafts_total{engine="0",model_name="b"} 99.0',
                'vllm:spec_decode_num_drafts_created{engine="0",model_name="a"} 1.7e9',
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
                'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="a",position="1"} 3.0',
                'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="a",position="0"} 7.0',
            ]
        )
        + "\n"
    )
    m = parse_spec_metrics(text, "a")
    assert (m["num_drafts"], m["num_accepted_tokens_per_pos"]) == (15, [7, 3])
    assert m["present"] and m["vllm"]
    assert not parse_spec_metrics("# TYPE up gauge\nup 1.0\n")["vllm"]


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("2.5") == 2.5
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after(later) <= 30
    assert retry_after(None) is None and retry_after("soon") is None
