"""``engine: vllm-server`` against servers that misbehave: every behaviour runs on a real HTTP
server on 127.0.0.1 (``conftest.FakeVLLMServer`` with a ``hostile`` route), under a time
and a memory limit. None may raise out of the backend (no traceback), hang, or grow
memory past the limit; every failure is that request's ``error`` (the rest of the batch
is answered) or, when the backend opens, a :class:`DataError`, and names the server URL.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from click.testing import CliRunner

from qualgate.backends import Request, open_backend
from qualgate.cli import cli
from qualgate.config.decoding import parse_config
from qualgate.errors import DataError

FLY = {
    "method": "draft_model",
    "model": "Qwen/Qwen3-0.6B",
    "num_speculative_tokens": 8,
    "rejection_sample_method": "fly",
    "fly_window_size": 2,
}
BAD = 1  # the seed whose response is hostile; seeds 0 and 2 are answered normally
TIME_LIMIT_S = 8.0
MEMORY_LIMIT = 64 << 20  # peak bytes allocated by Python while the case runs


def config(url, **options):
    opts = {
        "base_urls": [url],
        "timeout_s": 1.0,
        "max_retries": 1,
        "retry_backoff_s": 0.01,
        "max_wait_s": 0.5,
        "concurrency": 3,
        **options,
    }
    return parse_config(
        {
            "name": "c",
            "engine": "vllm-server",
            "model": "Qwen/Qwen3-8B",
            "speculative": FLY,
            "sampling": {"temperature": 0.6, "max_tokens": 32},
            "engine_options": opts,
        }
    )


def requests(n=3):
    return [
        Request(({"role": "user", "content": f"What is {i} + 1?"},), {"temperature": 0.6, "max_tokens": 32, "seed": i})
        for i in range(n)
    ]


# -- raw answers ------------------------------------------------------------------------


def write(h, data: bytes) -> bool:
    try:
        h.wfile.write(data)
        h.wfile.flush()
        return True
    except OSError:
        return False


def answer(h, status, body: bytes, headers=()):
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Content-Type: application/json", *headers]
    write(h, ("\r\n".join(head) + "\r\n\r\n").encode() + body)


def wait(seconds=10.0):
    time.sleep(seconds)  # longer than any case may take; the client must not wait for it


def drip(h, data: bytes, every=0.2):
    for i in range(len(data)):
        if not write(h, data[i : i + 1]):
            return
        time.sleep(every)


def endless_chunks(h, head=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"):
    if not write(h, head):
        return
    chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    for _ in range(100_000):  # 6.5 GB: far past any cap, ended by the client closing
        if not write(h, chunk):
            return


# -- completion behaviours: fn(handler, server, resp) answers for seed BAD ----------------


def mutated(change):
    """The normal completion of seed BAD, changed by ``change(resp)``, sent as JSON."""

    def fn(h, server, resp):
        change(resp)
        answer(h, 200, json.dumps(resp).encode())

    return fn


def setitem(path, value):
    def change(resp):
        obj = resp
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value

    return mutated(change)


def delitem(path):
    def change(resp):
        obj = resp
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]

    return mutated(change)


SPEC = ("metrics", "speculative_decoding")
COMPLETION = {
    # size
    "endless chunked body": (lambda h, s, r: endless_chunks(h), "over the limit"),
    "Content-Length of 100 GB": (
        lambda h, s, r: write(h, b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{") and wait(),
        "response of 100000000000 bytes",
    ),
    "a 5 MB completion": (setitem(("choices", 0, "message", "content"), "9" * (5 << 20)), "over the limit"),
    "endless body without length, read to close": (
        lambda h, s, r: endless_chunks(h, b"HTTP/1.0 200 OK\r\n\r\n"),
        "over the limit",
    ),
    # time
    "a body dripped at 5 bytes/s": (
        lambda h, s, r: drip(h, b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + b"{" * 500),
        "timed out",
    ),
    "headers dripped at 5 bytes/s": (lambda h, s, r: drip(h, b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 500), "timed out"),
    "no answer at all": (lambda h, s, r: wait(), "timed out"),
    # transport
    "connection closed without an answer": (lambda h, s, r: True, "RemoteDisconnected"),
    "garbage status line": (lambda h, s, r: write(h, b"HELLO THERE\r\n\r\n"), "BadStatusLine"),
    "200 headers": (
        lambda h, s, r: write(h, b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n"),
        "more than 100 headers",
    ),
    "a 100 kB header line": (
        lambda h, s, r: write(h, b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 100_000 + b"\r\n\r\n"),
        "LineTooLong",
    ),
    "a body cut short": (
        lambda h, s, r: write(h, b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"model"'),
        "IncompleteRead",
    ),
    "an invalid chunk size": (
        lambda h, s, r: write(h, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"),
        "Incomplete",
    ),
    "a redirect": (lambda h, s, r: answer(h, 302, b"", ["Location: http://example.com/"]), "HTTP 302"),
    "a second, unasked-for answer on a kept-alive connection": (
        lambda h, s, r: answer(h, 200, b"{}") or answer(h, 200, json.dumps(r).encode()),
        "answered for model None",
    ),
    "503 on every attempt": (lambda h, s, r: answer(h, 503, b'{"error": "busy"}'), "HTTP 503"),
    # Retry-After
    "429 with Retry-After: inf": (lambda h, s, r: answer(h, 429, b"{}", ["Retry-After: inf"]), "max_wait_s"),
    "429 with Retry-After: 1e9": (lambda h, s, r: answer(h, 429, b"{}", ["Retry-After: 1e9"]), "max_wait_s"),
    "429 with Retry-After in the year 2999": (
        lambda h, s, r: answer(h, 429, b"{}", ["Retry-After: Fri, 01 Jan 2999 00:00:00 GMT"]),
        "max_wait_s",
    ),
    "429 with Retry-After: NaN": (lambda h, s, r: answer(h, 429, b"{}", ["Retry-After: NaN"]), "HTTP 429"),
    "429 with Retry-After: -5": (lambda h, s, r: answer(h, 429, b"{}", ["Retry-After: -5"]), "HTTP 429"),
    # not a completion
    "HTML": (lambda h, s, r: answer(h, 200, b"<html>oops</html>"), "not JSON"),
    "invalid UTF-8": (lambda h, s, r: answer(h, 200, b'{"model": "\xff\xfe"}'), "not JSON"),
    "a JSON array": (lambda h, s, r: answer(h, 200, b"[]"), "not an object"),
    "nesting 100,000 deep": (lambda h, s, r: answer(h, 200, b"[" * 100_000), "not JSON"),
    "a NaN token": (
        lambda h, s, r: answer(h, 200, json.dumps({**r, "x": float("nan")}).encode()),
        "NaN is not a JSON number",
    ),
    "a duplicated key": (
        lambda h, s, r: answer(h, 200, json.dumps(r)[:-1].encode() + b', "model": "other"}'),
        "duplicate key",
    ),
    "a 10,000-digit number": (lambda h, s, r: answer(h, 200, b'{"x": ' + b"9" * 10_000 + b"}"), "not JSON"),
    # the wrong shape or the wrong deployment
    "another model": (setitem(("model",), "Qwen/Qwen3-32B"), "answered for model"),
    "no model": (delitem(("model",)), "answered for model"),
    "no choices": (setitem(("choices",), []), "no choice object"),
    "a message that is a string": (setitem(("choices", 0, "message"), "hi"), "not an object"),
    "a message without content": (delitem(("choices", 0, "message", "content")), "no content"),
    "null content without reasoning": (setitem(("choices", 0, "message", "content"), None), "content is null"),
    "content that is a number": (setitem(("choices", 0, "message", "content"), 42), "not a string"),
    "finish_reason that is a list": (setitem(("choices", 0, "finish_reason"), ["stop"]), "finish_reason"),
    "usage that is a string": (setitem(("usage",), "many"), "usage is str"),
    "completion_tokens that is a string": (setitem(("usage", "completion_tokens"), "3"), "usage.completion_tokens"),
    "completion_tokens < 0": (setitem(("usage", "completion_tokens"), -1), "usage.completion_tokens"),
    "completion_tokens 10**30": (setitem(("usage", "completion_tokens"), 10**30), "usage.completion_tokens"),
    "more completion_tokens than max_tokens": (setitem(("usage", "completion_tokens"), 33), "from 0 to 32"),
    "metrics that is a list": (setitem(("metrics",), [1]), "metrics is list"),
    "speculative_decoding that is a string": (setitem(SPEC, "x"), "not an object"),
    "num_spec_steps that is a string": (setitem((*SPEC, "num_spec_steps"), "4"), "num_spec_steps"),
    "num_spec_steps that is true": (setitem((*SPEC, "num_spec_steps"), True), "num_spec_steps"),
    "more accepted than drafted tokens": (setitem((*SPEC, "num_accepted_draft_tokens"), 999), "impossible"),
    "another K": (setitem((*SPEC, "num_spec_tokens"), 4), "decoded with 4 speculative tokens"),
    "num_spec_tokens missing": (delitem((*SPEC, "num_spec_tokens")), "decoded with None"),
}


@pytest.fixture
def measured():
    """Run a case under the time and memory limits."""

    def run(fn):
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            elapsed = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert elapsed < TIME_LIMIT_S, f"took {elapsed:.1f} s"
            assert peak < MEMORY_LIMIT, f"peak {peak / 2**20:.0f} MiB"

    return run


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(COMPLETION))
@pytest.mark.slow
def test_a_hostile_completion_is_that_requests_error_and_the_batch_survives(name, fake_server, measured):
    behaviour, message = COMPLETION[name]

    def hostile(h, server, body):
        if body["seed"] != BAD:
            return False
        behaviour(h, server, server.completion(body))
        return True

    srv = fake_server(speculative=FLY, hostile={"completion": hostile})

    def case():
        with open_backend(config(srv.url)) as backend:
            return backend.generate(requests())

    gens = measured(case)
    assert [g.error is None for g in gens] == [True, False, True], gens
    assert (gens[0].text, gens[2].text) == ("#### 2", "#### 3")  # their own (FLy: 0 is wrong)
    assert gens[1].error.startswith(f"{srv.url}: ") and message in gens[1].error, gens[1].error
    assert gens[1].text is None


def test_null_content_with_reasoning_is_a_truncated_thinking_graded_as_no_answer(fake_server):
    def hostile(h, server, body):
        resp = server.completion(body)
        resp["choices"][0]["message"].update(content=None, reasoning="Let me think")
        answer(h, 200, json.dumps(resp).encode())
        return True

    srv = fake_server(speculative=FLY, hostile={"completion": hostile})
    with open_backend(config(srv.url)) as backend:
        (g,) = backend.generate(requests(1))
    assert g.error is None and g.text == ""


# -- when the backend opens: /v1/models, /version, /server_info, /metrics -----------------

MODELS = {
    "/v1/models endless": (lambda h, s, b: endless_chunks(h), "over the limit"),
    "/v1/models dripped": (
        lambda h, s, b: drip(h, b"HTTP/1.1 200 OK\r\n" + b"X" * 100),
        "no complete response within 0.5 s",
    ),
    "/v1/models not JSON": (lambda h, s, b: answer(h, 200, b"<html/>"), "not an OpenAI model"),
    "/v1/models data is a string": (lambda h, s, b: answer(h, 200, b'{"data": "x"}'), "not an OpenAI model"),
    "/v1/models ids are numbers": (lambda h, s, b: answer(h, 200, b'{"data": [{"id": 5}]}'), "serves [5]"),
    "/v1/models nested 100,000 deep": (lambda h, s, b: answer(h, 200, b"[" * 100_000), "not an OpenAI model"),
    "/v1/models root is a number": (
        lambda h, s, b: answer(h, 200, json.dumps({"data": [{"id": s.served, "root": 7}]}).encode()),
        "loaded 7",
    ),
    "/v1/models 401": (lambda h, s, b: answer(h, 401, b'{"error": "no key"}'), "HTTP 401"),
    "/server_info with a list as speculative_config": (
        lambda h, s, b: answer(h, 200, b'{"vllm_config": {"speculative_config": [1, 2]}}'),
        "speculative_config",
    ),
}
NOTES = {  # the backend opens; what it could not read is noted, naming the URL
    "/metrics endless": ("/metrics", lambda h, s, b: endless_chunks(h), "over the limit"),
    "/metrics position 10**9": (
        "/metrics",
        lambda h, s, b: answer(
            h, 200, b'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1000000000"} 1\n'
        ),
        "position='1000000000'",
    ),
    "/metrics +Inf counter": (
        "/metrics",
        lambda h, s, b: answer(h, 200, b"vllm:spec_decode_num_drafts_total +Inf\n"),
        "inf is not a count",
    ),
    "/metrics NaN counter": (
        "/metrics",
        lambda h, s, b: answer(h, 200, b"vllm:spec_decode_num_drafts_total NaN\n"),
        "nan is not a count",
    ),
    "/metrics negative counter": (
        "/metrics",
        lambda h, s, b: answer(h, 200, b"vllm:spec_decode_num_drafts_total -3\n"),
        "total = -3",
    ),
    "/metrics 1e300 counter": (
        "/metrics",
        lambda h, s, b: answer(h, 200, b"vllm:spec_decode_num_drafts_total 1e300\n"),
        "is not a count",
    ),
    "/metrics garbage": ("/metrics", lambda h, s, b: answer(h, 200, b"{{{ not prometheus\n"), "not Prometheus"),
    "/metrics dripped": (
        "/metrics",
        lambda h, s, b: drip(h, b"HTTP/1.1 200 OK\r\n" + b"X" * 99),
        "no complete response within 0.5 s",
    ),
    "/version endless": ("/version", lambda h, s, b: endless_chunks(h), None),
    "/version is a list": ("/version", lambda h, s, b: answer(h, 200, b"[1]"), None),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(MODELS))
def test_a_hostile_server_at_open_is_a_data_error_naming_it(name, fake_server, measured):
    behaviour, message = MODELS[name]
    route = "/server_info" if name.startswith("/server_info") else "/v1/models"
    srv = fake_server(speculative=FLY, server_info=True, hostile={route: lambda h, s, b: behaviour(h, s, b) or True})

    def case():
        with pytest.raises(DataError) as info:
            open_backend(config(srv.url, timeout_s=0.5))
        return str(info.value)

    error = measured(case)
    assert srv.url in error and message in error, error


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(NOTES))
def test_an_unreadable_side_endpoint_is_noted_and_the_run_goes_on(name, fake_server, measured):
    route, behaviour, message = NOTES[name]
    srv = fake_server(speculative=FLY, hostile={route: lambda h, s, b: behaviour(h, s, b) or True})

    def case():
        with open_backend(config(srv.url, timeout_s=0.5)) as backend:
            return backend.generate(requests(2)), backend.info()

    gens, info = measured(case)
    assert all(g.error is None for g in gens)
    if message is None:
        assert info["servers"][srv.url]["version"] is None
    else:
        notes = [c for c in info["checks"] if c.startswith(srv.url) and message in c]
        assert notes, info["checks"]


# -- through the command line -----------------------------------------------------------


def test_a_run_writes_the_whole_batch_around_malformed_responses(fake_server, server_plan, tmp_path):
    def hostile(h, server, body):
        if body["seed"] % 4:
            return False
        answer(h, 200, b'{"model": "Qwen/Qwen3-8B", "choices": "nope"}')
        return True

    target = fake_server()
    fly = fake_server(speculative=FLY, hostile={"completion": hostile})
    plan = server_plan(tmp_path, {"target": {"urls": [target.url]}, "fly": {"urls": [fly.url], "speculative": FLY}})
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "-q"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    recs = [json.loads(x) for x in (out / "records" / "fly.jsonl").read_text().splitlines()]
    errors = [x for x in recs if x["outcome"] == "error"]
    assert len(recs) == 18 and errors  # one batch, all written
    assert all(x["error"].startswith(f"{fly.url}: unreadable completion") for x in errors)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["configs"]["fly"]["status"] == "complete"
    assert r.exit_code == 3 and "error" in r.stderr  # the gate refuses errors by default
