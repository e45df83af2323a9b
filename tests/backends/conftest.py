"""Doubles for the two boundaries that cannot run here: the ``vllm.LLM`` class (no GPU, no
vLLM) and a vLLM server (a real HTTP server on 127.0.0.1 that speaks the protocol).

Their behaviour follows vLLM 0.33.0's source, through the rows of the conformance table
:data:`qualgate.vllm033.rules.TABLE` they apply (``per-request-metrics``, ``llm-data-parallel``,
``lookahead``, ``budget-too-small``, ``override-line``, ``fly-warning``,
``validation-error``; see also the docstrings of ``qualgate.backends.vllm`` and
``qualgate.backends.vllm_server``), so the double refuses what vLLM refuses: the shape of
``RequestSpecDecodeMetrics.to_dict()``, the logger names and messages of the FLy and
scheduler warnings, the ``dictConfig`` that ``LLM.__init__`` applies to the ``vllm`` logger,
the OpenAI response with ``metrics.speculative_decoding``, ``/v1/models``,
``/server_info`` and the Prometheus counter names.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import logging.config
import os
import socket
import ssl
import struct
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from qualgate.ci import method_charge
from qualgate.demo.task import solve
from qualgate.vllm033.rules import rule
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


# --------------------------------------------------------------------------- offline


def accepted_per_step(seed: int, k: int, steps: int = 4) -> list[int]:
    """Deterministic accepted-draft counts per verify step for a request seed."""
    return [(seed >> (3 * j)) % (k + 1) for j in range(steps)]


class SpecMetrics:
    """The shape of vLLM 0.33's ``RequestSpecDecodeMetrics`` (vllm/v1/metrics/stats.py)."""

    def __init__(self, k: int, per_step: list[int]):
        self.num_spec_tokens = k
        self.histogram = [0] * (k + 1)
        for a in per_step:
            self.histogram[a] += 1
        self.num_draft_tokens = k * len(per_step)

    def to_dict(self):
        steps = sum(self.histogram)
        acc = sum(j * c for j, c in enumerate(self.histogram))
        return {
            "mean_acceptance_length": 1.0 + acc / steps if steps else 1.0,
            "draft_acceptance_rate": acc / self.num_draft_tokens if self.num_draft_tokens else 0.0,
            "acceptance_histogram": list(self.histogram),
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": acc,
            "num_draft_tokens": self.num_draft_tokens,
            "num_spec_tokens": self.num_spec_tokens,
        }


class VLLMError(Exception):
    """Mirrors ``vllm.exceptions.VLLMError`` (rule ``validation-error``: not a ValueError)."""


class VLLMClientError(VLLMError):
    """Mirrors ``vllm.exceptions.VLLMClientError``."""


class VLLMValidationError(VLLMClientError):
    """Mirrors ``vllm.exceptions.VLLMValidationError``."""


class RecordingSamplingParams:
    """Stands in for ``vllm.SamplingParams`` only when vLLM is not installed; refuses the
    values vLLM refuses (rule ``sampling-ranges``) with :class:`VLLMValidationError`."""

    def __init__(self, **kwargs):
        for key, (low, high, closed) in rule("sampling-ranges").data["ranges"].items():
            v = kwargs.get(key)
            if v is not None and not ((low <= v if closed else low < v) and v <= high):
                raise VLLMValidationError(f"{key} must be in [{low}, {high}], got {v}.")
        self.kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)


class RecordingLLM:
    """Replaces ``vllm.LLM``: records constructor and ``chat`` arguments, answers
    deterministically, logs what vLLM 0.33 logs while its config is validated."""

    instances: list[RecordingLLM] = []
    fly_logged = False

    #: repository ids the (simulated) hub does not know (rule model-not-found)
    missing_models: set = set()

    def __init__(self, **kwargs):
        spec = kwargs.get("speculative_config") or {}
        for model in (kwargs.get("model"), spec.get("model")):
            if model in self.missing_models:  # rule model-not-found
                raise ValueError(f"{rule('model-not-found').data['prefix']} '{model}'.\nPlease verify ...")
        self.kwargs = kwargs
        self.env_batch_invariant = os.environ.get("VLLM_BATCH_INVARIANT")
        self.chat_calls: list[dict] = []
        self.shutdowns = 0
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        spec = kwargs.get("speculative_config")
        if kwargs.get("per_request_spec_decode_metrics", "none") != "none" and not spec:
            raise ValueError(rule("per-request-metrics").data["message"])
        if (
            kwargs.get("data_parallel_size", 1) > 1
            and kwargs.get("distributed_executor_backend") != "external_launcher"
        ):
            raise ValueError(
                f"LLM(data_parallel_size={kwargs['data_parallel_size']}) is not "
                "supported for single-process usage and may hang."
            )  # llm-data-parallel
        self.k = spec["num_speculative_tokens"] if spec else None
        self.per_pos = [0] * (self.k or 0)
        # LLM.__init__ -> configure_logging_if_needed -> dictConfig on the "vllm" logger
        # (vllm/logger.py), which drops handlers attached to "vllm", then the config is
        # validated and the warnings are logged from vllm.config.* loggers.
        logging.config.dictConfig(
            {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {"vllm": {"class": "logging.NullHandler"}},
                "loggers": {"vllm": {"handlers": ["vllm"], "level": "INFO", "propagate": False}},
            }
        )
        lookahead = method_charge(spec["method"], self.k)[1] if spec else 0  # rule lookahead
        budget = kwargs.get("max_num_batched_tokens", 8192)
        if spec and budget <= lookahead:  # rule budget-too-small
            raise ValueError(
                "VllmConfig does not have enough slots to schedule a token and support the "
                "speculative decoding settings. Got max_num_batched_tokens="
                f"{budget} and num_lookahead_tokens={lookahead}."
            )
        if spec and spec.get("rejection_sample_method") == "fly" and not RecordingLLM.fly_logged:
            # logger.warning_once: once per process (here: per test)
            RecordingLLM.fly_logged = True
            logging.getLogger("vllm.config.speculative").warning(FLY_LOSSY_WARNING)
        seqs = kwargs.get("max_num_seqs", 256)
        if spec and spec.get("method") in ("dflash", "dspark") and budget // lookahead < seqs:
            over = rule("override-line").data  # rule override-line
            logging.getLogger(over["logger"]).warning(
                over["format"], spec["method"], lookahead, budget, seqs, budget // lookahead
            )
        engine = self

        class _Core:
            def shutdown(self):
                engine.shutdowns += 1

        self.llm_engine = types.SimpleNamespace(engine_core=_Core())
        RecordingLLM.instances.append(self)

    def chat(self, messages, sampling_params, *, use_tqdm=True, chat_template_kwargs=None):
        self.chat_calls.append(
            {
                "messages": messages,
                "params": list(sampling_params),
                "use_tqdm": use_tqdm,
                "chat_template_kwargs": chat_template_kwargs,
            }
        )
        if any("REFUSE" in m[-1]["content"] for m in messages):
            raise ValueError("The decoder prompt (length 99999) is longer than the maximum model length of 40960.")
        out = []
        for conv, p in zip(messages, sampling_params):
            metrics = None
            if self.k:
                steps = accepted_per_step(p.seed, self.k)
                metrics = SpecMetrics(self.k, steps)
                self.counters["drafts"] += len(steps)
                self.counters["draft_tokens"] += self.k * len(steps)
                self.counters["accepted"] += sum(steps)
                for a in steps:
                    for pos in range(a):
                        self.per_pos[pos] += 1
            text = f"#### {solve(conv[-1]['content'])}"
            out.append(
                types.SimpleNamespace(
                    outputs=[
                        types.SimpleNamespace(
                            text=text,
                            token_ids=list(range(3 + p.seed % 5)),
                            finish_reason="stop",
                            spec_decode_metrics=metrics,
                        )
                    ],
                    metrics=None,
                )
            )
        return out

    def get_metrics(self):
        c = types.SimpleNamespace
        labels = {"engine": "0", "model_name": self.kwargs["model"]}
        if not self.k:
            return [c(name="vllm:num_requests_running", labels=labels, value=0.0)]
        return [
            c(name="vllm:spec_decode_num_drafts", labels=labels, value=self.counters["drafts"]),
            c(name="vllm:spec_decode_num_draft_tokens", labels=labels, value=self.counters["draft_tokens"]),
            c(name="vllm:spec_decode_num_accepted_tokens", labels=labels, value=self.counters["accepted"]),
            c(name="vllm:spec_decode_num_accepted_tokens_per_pos", labels=labels, values=list(self.per_pos)),
        ]


@pytest.fixture
def fake_llm(monkeypatch):
    """Replace ``vllm.LLM`` by :class:`RecordingLLM` (the real ``SamplingParams`` when vLLM
    is installed; a recording double otherwise). Returns the class."""
    RecordingLLM.instances = []
    RecordingLLM.fly_logged = False
    if HAVE_VLLM:
        import vllm

        from qualgate.vllm033 import installed
        from qualgate.vllm033.rules import rule

        monkeypatch.setattr(vllm, "LLM", RecordingLLM)
        # the double stands for vLLM 0.33 (FLy), not for the installed CPU build (0.32, no FLy):
        # its verifiers are 0.33's (rule spec-method-literal), so a FLy config reaches it
        verifiers = rule("spec-method-literal", "0.33").data["rejection_sample_methods"]
        monkeypatch.setattr(installed, "rejection_methods", lambda: verifiers)
    else:
        mod = types.ModuleType("vllm")
        mod.LLM = RecordingLLM
        mod.SamplingParams = RecordingSamplingParams
        mod.__version__ = "0.33.0"
        exc = types.ModuleType("vllm.exceptions")
        exc.VLLMError, exc.VLLMClientError = VLLMError, VLLMClientError
        exc.VLLMValidationError = VLLMValidationError
        mod.exceptions = exc
        monkeypatch.setitem(sys.modules, "vllm", mod)
        monkeypatch.setitem(sys.modules, "vllm.exceptions", exc)
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    return RecordingLLM


# --------------------------------------------------------------------------- server

TINY_SUITE = """\
name: tinyarith
version: 1
source:
  generator: demo_arithmetic
  params: {n: 6, seed: 0}
id: {field: id}
fields: {question: question}
gold: {field: answer}
prompt:
  user: "{{question}}"
extract:
  strict: {name: after_marker, params: {marker: "####"}}
  lenient: last_number
grader: numeric
decides: strict
generation: {max_tokens: 64}
"""


class FakeVLLMServer:
    """A vLLM-like OpenAI-compatible server on 127.0.0.1.

    ``speculative``: the raw speculative_config it serves (``None``: target-only).
    Completions answer the arithmetic question of the last message; a ``fly`` server
    answers wrong when ``seed % wrong_mod == 0``. Faults, consumed in order:
    ``burst_429`` (first N completion requests get 429 with ``Retry-After: retry_after``),
    ``fail_500`` (seeds whose first attempt gets 500), ``always_500`` (seeds that always
    get 500), ``slow`` (seeds whose first attempt sleeps ``slow_s`` before answering);
    ``delay_s`` delays every completion. ``max_in_flight`` is the most completion requests
    it ever held at once; ``auth`` the ``Authorization`` headers it received.

    HTTP is served as ``vllm serve`` (uvicorn) serves it: HTTP/1.1 with keep-alive
    (``connections`` counts the TCP connections accepted). ``hostile`` maps a route
    (``"completion"``, ``"/v1/models"``, ``"/version"``, ``"/metrics"``, ``"/server_info"``)
    to ``fn(handler, server, body)`` that may answer in its own (broken) way and return
    True; :meth:`kill` dies as a killed process does, and ``die_after=N`` calls it on the
    completion request that arrives after N answers. ``tls=(certfile, keyfile)`` serves
    HTTPS; ``port`` and ``version`` (of ``/version``) can be chosen.
    """

    def __init__(
        self,
        *,
        model="Qwen/Qwen3-8B",
        served=None,
        speculative=None,
        per_request_metrics=True,
        server_info=False,
        wrong_mod=3,
        burst_429=0,
        fail_500=(),
        always_500=(),
        slow=(),
        slow_s=1.0,
        metrics_k=None,
        retry_after="0",
        delay_s=0.0,
        hostile=None,
        die_after=None,
        port=0,
        version="0.33.0",
        tls=None,
    ):
        self.model = model
        self.served = served or model
        self.speculative = speculative
        self.k = speculative["num_speculative_tokens"] if speculative else None
        self.metrics_k = metrics_k or self.k  # positions exposed on /metrics
        self.per_request_metrics = per_request_metrics
        self.server_info = server_info
        self.wrong_mod = wrong_mod
        self.burst_429 = burst_429
        self.fail_500 = set(fail_500)
        self.always_500 = set(always_500)
        self.slow = set(slow)
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.in_flight = self.max_in_flight = 0
        # HTTP serving (as uvicorn under `vllm serve`: HTTP/1.1, keep-alive)
        self.hostile = dict(hostile or {})  # route -> fn(handler, server, body) -> handled?
        self.die_after = die_after  # kill() on the completion request after this many answers
        self.connections = 0  # TCP connections accepted
        self.socks: set[socket.socket] = set()
        self.dead = False
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        self.bodies: list[dict] = []  # completion requests answered with 200
        self.statuses: list[int] = []  # every completion attempt's status (0: too slow)
        self.counters = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.per_pos = [0] * (self.metrics_k or 0)
        self.version = version
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # a client gone: not news
        scheme = "http"
        if tls is not None:  # (certfile, keyfile): HTTPS
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        return False

    def kill(self):
        """Die as a killed process does: stop listening, reset every open connection."""
        with self.lock:
            self.dead = True
            socks = list(self.socks)
        self.httpd.shutdown()
        self.httpd.server_close()
        for sock in socks:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # the protocol ----------------------------------------------------------------

    def completion(self, body: dict) -> dict:
        seed = body["seed"]
        answer = solve(body["messages"][-1]["content"])
        fly = (self.speculative or {}).get("rejection_sample_method") == "fly"
        if fly and seed % self.wrong_mod == 0:
            answer += 1
        resp = {
            "id": f"chatcmpl-{seed}",
            "object": "chat.completion",
            "model": self.served,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"#### {answer}", "reasoning": None},
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 3 + seed % 5, "total_tokens": 23 + seed % 5},
        }
        if self.k:
            steps = accepted_per_step(seed, self.k)
            with self.lock:
                self.counters["drafts"] += len(steps)
                self.counters["draft_tokens"] += self.k * len(steps)
                self.counters["accepted"] += sum(steps)
                for a in steps:
                    for pos in range(a):
                        self.per_pos[pos] += 1
            if self.per_request_metrics:
                resp["metrics"] = {"speculative_decoding": SpecMetrics(self.k, steps).to_dict()}
        return resp

    def prometheus(self) -> str:
        lab = f'engine="0",model_name="{self.served}"'
        lines = ["# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} 0.0"]
        if self.metrics_k:
            for name, key in (
                ("num_drafts", "drafts"),
                ("num_draft_tokens", "draft_tokens"),
                ("num_accepted_tokens", "accepted"),
            ):
                lines += [
                    f"# TYPE vllm:spec_decode_{name} counter",
                    f"vllm:spec_decode_{name}_total{{{lab}}} {float(self.counters[key])}",
                ]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            lines += [
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {float(v)}'
                for i, v in enumerate(self.per_pos)
            ]
        return "\n".join(lines) + "\n"

    def vllm_config(self) -> dict:
        spec = None
        if self.speculative:
            # the JSON dump carries every SpeculativeConfig field, FLy's unused ones included
            spec = {
                "fly_window_size": None,
                "fly_entropy_threshold": 0.3,
                "fly_entropy_top_k": 3,
                "draft_sample_method": "greedy",
                "rejection_sample_method": "standard",
                "prompt_lookup_max": None,
                **self.speculative,
            }
        return {"model_config": {"model": self.model}, "speculative_config": spec}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # headers and body go out in two writes: without this, Nagle's algorithm and
                # the client's delayed ACK hold the body back 40 ms on a kept-alive connection
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server.lock:
                    server.connections += 1
                    server.socks.add(self.connection)

            def finish(self):
                with server.lock:
                    server.socks.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _hostile(self, route, body=None):
                fn = server.hostile.get(route)
                if fn is not None and fn(self, server, body):
                    self.close_connection = True
                    return True
                return False

            def log_message(self, *args):
                pass

            def _send(self, status, payload, ctype="application/json", headers=()):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client went away, or kill()
                    self.close_connection = True

            def do_GET(self):
                if self._hostile(self.path.split("?")[0]):
                    return
                if self.path == "/v1/models":
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {
                                    "id": server.served,
                                    "object": "model",
                                    "owned_by": "vllm",
                                    "root": server.model,
                                    "max_model_len": 40960,
                                }
                            ],
                        },
                    )
                elif self.path == "/version":
                    self._send(200, {"version": server.version})
                elif self.path == "/metrics":
                    self._send(200, server.prometheus().encode(), "text/plain; version=0.0.4")
                elif self.path.startswith("/server_info") and server.server_info:
                    self._send(200, {"vllm_config": server.vllm_config(), "vllm_env": {}})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"detail": "Not Found"})
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.auth.append(self.headers.get("Authorization"))
                try:
                    with server.lock:
                        dying = server.die_after is not None and len(server.bodies) >= server.die_after
                    if dying:
                        return server.kill()
                    if not self._hostile("completion", body):
                        self._complete(body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _complete(self, body):
                time.sleep(server.delay_s)
                if body.get("max_completion_tokens", 0) > 40960:  # rule output-over-model-len
                    with server.lock:
                        server.statuses.append(400)
                    asked = body["max_completion_tokens"]
                    message = (
                        f"max_completion_tokens={asked} cannot be greater than max_model_len=40960. "
                        f"{rule('output-over-model-len').data['message']} "
                        f"(parameter=max_completion_tokens, value={asked})"
                    )
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": message,
                                "type": "BadRequestError",
                                "param": "max_completion_tokens",
                                "code": 400,
                            }
                        },
                    )
                seed = body["seed"]
                with server.lock:
                    if server.burst_429 > 0:
                        server.burst_429 -= 1
                        server.statuses.append(429)
                        fault = 429
                    elif seed in server.always_500:
                        fault = 500
                    elif seed in server.fail_500:
                        server.fail_500.discard(seed)
                        fault = 500
                    elif seed in server.slow:
                        server.slow.discard(seed)
                        fault = "slow"
                    else:
                        fault = None
                    if fault in (500, "slow"):
                        server.statuses.append(0 if fault == "slow" else 500)
                if fault == 429:
                    return self._send(
                        429, {"error": {"message": "rate limited"}}, headers=[("Retry-After", server.retry_after)]
                    )
                if fault == 500:
                    return self._send(500, {"error": {"message": "engine hiccup"}})
                if fault == "slow":
                    time.sleep(server.slow_s)
                    return self._send(200, server.completion(body))
                resp = server.completion(body)
                with server.lock:
                    if server.dead:  # killed while this request was in flight
                        return
                    server.bodies.append(body)
                    server.statuses.append(200)
                self._send(200, resp)

        return Handler


@pytest.fixture
def fake_server():
    """Start :class:`FakeVLLMServer` instances; all are stopped at teardown."""
    started = []

    def start(**kwargs):
        s = FakeVLLMServer(**kwargs).__enter__()
        started.append(s)
        return s

    yield start
    for s in started:
        s.__exit__(None, None, None)


def write_server_plan(
    tmp_path: Path, configs: dict[str, dict], *, seeds=(0, 1, 2), baseline="target", margin=0.3
) -> Path:
    """A plan over the tiny arithmetic suite with one vllm-server config per entry of
    ``configs`` (name -> {"urls": [...], "speculative": {...} or None, "options": {...}})."""
    (tmp_path / "tiny.yaml").write_text(TINY_SUITE)
    names = {}
    for name, c in configs.items():
        opts = {
            "base_urls": c["urls"],
            "concurrency": 4,
            "timeout_s": 0.5,
            "max_retries": 3,
            "retry_backoff_s": 0.01,
            "chat_template_kwargs": {"enable_thinking": False},
            **c.get("options", {}),
        }
        cfg = {
            "name": name,
            "engine": "vllm-server",
            "model": c.get("model", "Qwen/Qwen3-8B"),
            "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_tokens": 256},
            "engine_options": opts,
        }
        if c.get("speculative"):
            cfg["speculative"] = c["speculative"]
        (tmp_path / f"{name}.yaml").write_text(json.dumps(cfg))  # JSON is YAML
        names[name] = f"{name}.yaml"
    plan = {
        "name": "server-test",
        "suites": [{"suite": "tiny.yaml"}],
        "seeds": list(seeds),
        "configs": names,
        "baseline": baseline,
        "gate": {"policy": "noninferiority", "margin": margin, "alpha": 0.05},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(plan))
    return path


@pytest.fixture
def tiny_suite(tmp_path) -> Path:
    """The tiny arithmetic suite (6 generated questions) written to ``tmp_path/tiny.yaml``."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_SUITE)
    return path


@pytest.fixture
def server_plan():
    """:func:`write_server_plan`."""
    return write_server_plan
