"""``engine: vllm-server``: OpenAI-compatible servers (a vLLM fleet) behind the backend interface.

Needs no vLLM locally: the standard library's ``http.client`` and a bounded thread pool,
plus ``prometheus_client``'s text parser (a core dependency) for ``/metrics``.

Config mapping (``engine_options``):

- ``base_urls``: one URL or a list (``http://host:8000``; a trailing ``/v1`` is accepted).
  Request *i* of a batch goes to URL ``i mod n``; a retry moves to the next URL.
- ``served_model_name``: the ``model`` sent in requests (default: the config's ``model``).
- ``api_key_env``: the environment variable holding a bearer token (never the token).
- ``concurrency``: requests in flight over the whole fleet (default 16 per URL).
- ``timeout_s``: per-request timeout, as the socket timeout of each attempt (default 3600;
  a non-streaming completion sends nothing until it is done, so this bounds its wall time).
- ``max_retries`` (default 5) and ``retry_backoff_s`` (default 1.0): HTTP 429, 5xx,
  timeouts and connection errors are retried after ``backoff * 2**attempt`` seconds times
  a uniform jitter in [0.5, 1], at least the server's ``Retry-After`` (capped at 600 s).
  Other HTTP errors (400: e.g. a prompt too long) are not retried. A request that still
  fails is returned as ``Generation.failed``, never raised.
- ``chat_template_kwargs`` are sent with every request; ``batch_size`` (requests per
  harness batch, default ``max(256, 4 * concurrency)``).

Each request carries the config's sampling fields, ``max_completion_tokens`` (from
``max_tokens``) and the harness's per-request ``seed``. The graded text is
``choices[0].message.content`` (a server started with a reasoning parser returns the
reasoning apart, in ``message.reasoning``, which is not graded).

Checks when the backend opens, on every URL (:class:`~qualgate.errors.DataError`, exit 3):

- ``GET /v1/models`` must list the served model name; when the card's ``root`` (the model
  the server loaded) is given it must be the config's ``model`` (equal, or one a path
  ending in ``/`` + the other);
- ``GET /server_info?config_format=json`` (only with ``VLLM_SERVER_DEV_MODE=1``): the
  served ``speculative_config``, resolved like the config's, must equal it;
- ``GET /metrics``: a target-only config must not meet ``vllm:spec_decode_*`` counters, and
  the ``position`` labels of ``vllm:spec_decode_num_accepted_tokens_per_pos`` must number K;
- during the run, a response's ``metrics.speculative_decoding.num_spec_tokens`` must be K
  (and absent for a target-only config).
What could not be checked is listed in ``info()["checks"]``.

Acceptance: per request from ``metrics.speculative_decoding`` when the server returns it
(``vllm serve --per-request-spec-decode-metrics summary``); in any case ``/metrics`` is
scraped when the backend opens and after every batch, and the counter deltas are the
config's aggregate in ``info()["spec_decode"]`` (exact only if no other client uses those
servers meanwhile).

vLLM 0.33.0 facts relied on (read from the ``vllm-0.33.0`` wheel)
------------------------------------------------------------------
- ``vllm/entrypoints/openai/chat_completion/protocol.py``, ``ChatCompletionRequest``:
  ``seed``, ``top_k``, ``min_p``, ``repetition_penalty``, ``stop_token_ids``,
  ``chat_template_kwargs``; ``max_tokens`` is deprecated in favour of
  ``max_completion_tokens``; ``ChatMessage.reasoning``.
- ``vllm/entrypoints/openai/chat_completion/serving.py``: the response's ``metrics`` is a
  ``PerRequestMetrics`` whose ``speculative_decoding`` (``SpeculativeDecodingMetrics`` in
  ``vllm/entrypoints/generate/base/protocol.py``: ``mean_acceptance_length``,
  ``draft_acceptance_rate``, ``acceptance_histogram``, ``num_spec_steps``,
  ``num_accepted_draft_tokens``, ``num_draft_tokens``, ``num_spec_tokens``) is set for
  ``n == 1`` when the server runs with ``--per-request-spec-decode-metrics``
  (``vllm/config/observability.py``).
- ``vllm/entrypoints/serve/engine/protocol.py``: ``ModelCard`` has ``id`` and ``root``;
  ``vllm/entrypoints/serve/dev/server_info/api_router.py``: ``/server_info`` with
  ``config_format=json`` dumps ``vllm_config`` (dev mode only).
- ``vllm/v1/spec_decode/metrics.py``: Prometheus counters ``vllm:spec_decode_num_drafts``,
  ``vllm:spec_decode_num_draft_tokens``, ``vllm:spec_decode_num_accepted_tokens`` (exposed
  with ``_total``) and ``vllm:spec_decode_num_accepted_tokens_per_pos`` labelled
  ``position`` 0..K-1, created (at zero) when the engine starts with speculative decoding.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import DataError
from ..speculative import resolve_speculative
from . import Backend, Generation, Request, package_versions
from .vllm import SPEC_COUNTERS, SPEC_PER_POS, spec_summary

__all__ = ["VLLMServerBackend", "parse_spec_metrics", "request_body"]

_SAMPLING_FIELDS = (
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
    "frequency_penalty", "stop", "stop_token_ids", "seed",
)
_MAX_RETRY_AFTER_S = 600.0
_MAX_BACKOFF_S = 60.0


def request_body(model: str, request: Request, chat_template_kwargs=None) -> dict[str, Any]:
    """The JSON body of ``/v1/chat/completions`` for one request."""
    s = dict(request.sampling)
    for key in ("max_tokens", "seed"):
        if s.get(key) is None:
            raise ValueError(f"request sampling needs {key!r}, got {request.sampling!r}")
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in request.messages]}
    body.update({k: s[k] for k in _SAMPLING_FIELDS if s.get(k) is not None})
    body["max_completion_tokens"] = int(s["max_tokens"])
    unknown = sorted(set(s) - set(_SAMPLING_FIELDS) - {"max_tokens"})
    if unknown:
        raise ValueError(f"sampling keys {unknown} cannot be sent to an OpenAI-compatible server")
    if chat_template_kwargs:
        body["chat_template_kwargs"] = dict(chat_template_kwargs)
    return body


def parse_spec_metrics(text: str, model: str | None = None) -> dict[str, Any]:
    """Speculative-decoding counters from Prometheus text (``/metrics``), summed over label sets.

    When some samples carry ``model_name=model``, only those are counted. Returns the
    counters of :data:`qualgate.backends.vllm.SPEC_COUNTERS`, the per-position vector, and
    ``present`` (whether any ``vllm:spec_decode_*`` counter was exposed) and ``vllm``
    (whether any ``vllm:`` metric was).
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    if model is not None and any(s.labels.get("model_name") == model for s in samples):
        samples = [s for s in samples if s.labels.get("model_name", model) == model]
    out: dict[str, Any] = {v: 0 for v in SPEC_COUNTERS.values()}
    per_pos: dict[int, int] = {}
    present = False
    for s in samples:
        name = s.name.removesuffix("_total")
        if name in SPEC_COUNTERS:
            out[SPEC_COUNTERS[name]] += int(s.value)
            present = True
        elif name == SPEC_PER_POS and "position" in s.labels:
            pos = int(s.labels["position"])
            per_pos[pos] = per_pos.get(pos, 0) + int(s.value)
            present = True
    n = max(per_pos) + 1 if per_pos else 0
    out["num_accepted_tokens_per_pos"] = [per_pos.get(i, 0) for i in range(n)]
    out["present"] = present
    out["vllm"] = any(s.name.startswith("vllm:") for s in samples)
    return out


def _same_model(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class VLLMServerBackend(Backend):
    """OpenAI-compatible ``/v1/chat/completions`` on one or several servers."""

    engine = "vllm-server"

    def __init__(self, config):
        super().__init__(config)
        opts = config.engine_options
        raw = opts.get("base_urls")
        urls = [raw] if isinstance(raw, str) else list(raw or [])
        if not urls or not all(isinstance(u, str) for u in urls):
            raise self._bad("base_urls", raw, "one URL or a list of URLs is required")
        self.base_urls = []
        for u in urls:
            parts = urllib.parse.urlsplit(u.rstrip("/"))
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise self._bad("base_urls", u, "must be an http:// or https:// URL")
            path = parts.path.removesuffix("/v1")
            self.base_urls.append(f"{parts.scheme}://{parts.netloc}{path}")
        self.served_model = str(opts.get("served_model_name") or config.model)
        self.concurrency = self._positive("concurrency", 16 * len(self.base_urls), int)
        self.timeout_s = self._positive("timeout_s", 3600.0, float)
        self.max_retries = self._positive("max_retries", 5, int, minimum=0)
        self.backoff_s = self._positive("retry_backoff_s", 1.0, float, minimum=0)
        self.chat_template_kwargs = opts.get("chat_template_kwargs")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key_env = opts.get("api_key_env")
        if key_env:
            token = os.environ.get(str(key_env))
            if not token:
                raise self._bad("api_key_env", key_env, "this environment variable is not set")
            self._headers["Authorization"] = f"Bearer {token}"
        spec = config.speculative
        self._k = spec["num_speculative_tokens"] if spec else None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._rng = random.Random()
        self._counts = {"requests": 0, "attempts": 0, "retried_429": 0, "retried_5xx": 0,
                        "retried_timeout": 0, "retried_connection": 0, "failed": 0,
                        "with_spec_metrics": 0}
        self._info: dict[str, Any] = {
            "engine": self.engine,
            "versions": package_versions(),
            "base_urls": self.base_urls,
            "served_model": self.served_model,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "retry_backoff_s": self.backoff_s,
            "chat_template_kwargs": self.chat_template_kwargs,
            "servers": {},
            "checks": [],
            "requests": self._counts,
        }
        self._before: dict[str, dict[str, Any] | None] = {}
        for url in self.base_urls:
            self._check_server(url)
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="qualgate-http")
        self._update_metrics()

    # -- harness interface -------------------------------------------------------------

    @property
    def batch_size(self) -> int:
        opts = self.config.engine_options
        if opts.get("batch_size"):
            return int(opts["batch_size"])
        return max(256, 4 * self.concurrency)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        futures = [self._pool.submit(self._request, i, r) for i, r in enumerate(requests)]
        out = [f.result() for f in futures]
        self._update_metrics()
        return out

    def info(self) -> dict[str, Any]:
        """The manifest entry; the same dict is updated in place after every batch."""
        return self._info

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            self._closed.set()  # queued requests and backoff sleeps end now
            pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._update_metrics()

    # -- checks ------------------------------------------------------------------------

    def _bad(self, key, value, message) -> DataError:
        return DataError(message, file=self.config.path, field=f"engine_options.{key}",
                         value=value)

    def _positive(self, key, default, kind, minimum=None):
        value = self.config.engine_options.get(key, default)
        ok = not isinstance(value, bool) and isinstance(value, (int, float))
        if ok:
            value = kind(value)
            ok = value >= minimum if minimum is not None else value > 0
        if not ok:
            raise self._bad(key, self.config.engine_options.get(key),
                            "must be a positive number" if minimum is None
                            else f"must be a number >= {minimum}")
        return value

    def _mismatch(self, url, message, field="model", value=None) -> DataError:
        return DataError(f"the server at {url} {message}", file=self.config.path, field=field,
                         value=value)

    def _get(self, url: str, path: str, timeout: float) -> tuple[int, bytes]:
        status, _, data = self._http("GET", url, path, None, timeout)
        return status, data

    def _check_server(self, url: str) -> None:
        cfg = self.config
        timeout = min(self.timeout_s, 60.0)
        server: dict[str, Any] = {}
        self._info["servers"][url] = server
        try:
            status, data = self._get(url, "/v1/models", timeout)
        except (OSError, http.client.HTTPException) as exc:
            raise DataError(f"cannot reach {url}/v1/models ({type(exc).__name__}: {exc})",
                            file=cfg.path, field="engine_options.base_urls", value=url) from exc
        if status != 200:
            raise DataError(f"{url}/v1/models answered HTTP {status}: {data[:200]!r}",
                            file=cfg.path, field="engine_options.base_urls", value=url)
        try:
            cards = json.loads(data)["data"]
            ids = [c["id"] for c in cards]
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{url}/v1/models is not an OpenAI model list",
                            file=cfg.path, field="engine_options.base_urls", value=url) from exc
        if self.served_model not in ids:
            field = "engine_options.served_model_name" if cfg.engine_options.get(
                "served_model_name") else "model"
            raise self._mismatch(url, f"serves {ids}, not {self.served_model!r}", field,
                                 self.served_model)
        card = cards[ids.index(self.served_model)]
        server["model"] = {"id": card.get("id"), "root": card.get("root"),
                           "max_model_len": card.get("max_model_len")}
        root = card.get("root")
        if root is not None and not _same_model(root, cfg.model):
            raise self._mismatch(url, f"loaded {root!r} as {self.served_model!r}, but the "
                                 f"config's model is {cfg.model!r}", "model", cfg.model)

        try:
            status, data = self._get(url, "/version", timeout)
            server["version"] = json.loads(data).get("version") if status == 200 else None
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            server["version"] = None

        # the served speculative_config, where the server reports it (dev mode)
        reported = None
        try:
            status, data = self._get(url, "/server_info?config_format=json", timeout)
            if status == 200:
                vc = json.loads(data).get("vllm_config")
                if isinstance(vc, dict) and "speculative_config" in vc:
                    reported = vc
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            reported = None
        if reported is None:
            self._info["checks"].append(
                f"{url}: speculative_config not reported (/server_info needs "
                "VLLM_SERVER_DEV_MODE=1); checked through /metrics and responses only")
        else:
            self._compare_spec(url, reported)
            server["speculative_config"] = "matches (/server_info)"

        before = self._scrape(url)
        self._before[url] = before
        if before is None:
            self._info["checks"].append(f"{url}: /metrics unavailable")
        elif before["vllm"]:
            if cfg.speculative is None and before["present"]:
                raise self._mismatch(url, "runs speculative decoding (its /metrics has "
                                     "vllm:spec_decode_* counters), but the config is "
                                     "target-only", "speculative", None)
            k_server = len(before["num_accepted_tokens_per_pos"])
            if cfg.speculative is not None and k_server and k_server != self._k:
                raise self._mismatch(url, f"drafts {k_server} tokens (its /metrics), but the "
                                     f"config's num_speculative_tokens is {self._k}",
                                     "speculative.num_speculative_tokens", self._k)
            if cfg.speculative is not None and not before["present"]:
                self._info["checks"].append(f"{url}: /metrics shows no vllm:spec_decode_* "
                                            "counters; speculative decoding not confirmed")

    def _compare_spec(self, url: str, vllm_config: dict[str, Any]) -> None:
        cfg = self.config
        model_cfg = vllm_config.get("model_config")
        served = model_cfg.get("model") if isinstance(model_cfg, dict) else None
        if served is not None and not _same_model(served, cfg.model):
            raise self._mismatch(url, f"runs {served!r}, but the config's model is "
                                 f"{cfg.model!r}", "model", cfg.model)
        raw = vllm_config.get("speculative_config")
        if raw and isinstance(raw, dict):
            from ..speculative import SPECULATIVE_KEYS

            raw = {k: raw[k] for k in SPECULATIVE_KEYS if raw.get(k) is not None}
        try:
            theirs = resolve_speculative(raw or None)
        except ValueError as exc:
            raise self._mismatch(url, f"reports a speculative_config qualgate cannot read "
                                 f"({exc})", "speculative", raw) from exc
        mine = cfg.speculative
        if (theirs is None) != (mine is None):
            raise self._mismatch(url, f"serves speculative_config {theirs}, but the config "
                                 f"has {mine}", "speculative", mine)
        if mine is None:
            return
        diffs = []
        for key in sorted(set(mine) | set(theirs)):
            a, b = mine.get(key), theirs.get(key)
            if key == "model" and (a is None or b is None or _same_model(a, b)):
                continue
            if a != b:
                diffs.append(f"{key}: config {a!r}, server {b!r}")
        if diffs:
            raise self._mismatch(url, "serves a different speculative_config: "
                                 + "; ".join(diffs), "speculative", mine)

    # -- metrics -----------------------------------------------------------------------

    def _scrape(self, url: str) -> dict[str, Any] | None:
        try:
            status, data = self._get(url, "/metrics", min(self.timeout_s, 60.0))
            if status != 200:
                return None
            return parse_spec_metrics(data.decode("utf-8", "replace"), self.served_model)
        except (OSError, http.client.HTTPException, ValueError):
            return None

    def _update_metrics(self) -> None:
        total = {v: 0 for v in SPEC_COUNTERS.values()}
        per_pos: list[int] = []
        per_url = {}
        for url in self.base_urls:
            before = self._before.get(url)
            now = self._scrape(url) if before is not None else None
            if before is None or now is None:
                per_url[url] = None
                continue
            d = {k: now[k] - before[k] for k in total}
            a, b = now["num_accepted_tokens_per_pos"], before["num_accepted_tokens_per_pos"]
            b = b + [0] * (len(a) - len(b))
            d["num_accepted_tokens_per_pos"] = [x - y for x, y in zip(a, b)]
            per_url[url] = d
            for k in total:
                total[k] += d[k]
            per_pos += [0] * (len(d["num_accepted_tokens_per_pos"]) - len(per_pos))
            for i, v in enumerate(d["num_accepted_tokens_per_pos"]):
                per_pos[i] += v
        scraped = any(v is not None for v in per_url.values())
        total["num_accepted_tokens_per_pos"] = per_pos
        self._info["spec_decode"] = {
            "source": "/metrics delta while this config ran" if scraped else None,
            **(spec_summary(total) if scraped else {}),
            "per_server": per_url,
        } if self.config.speculative is not None else None

    # -- requests ----------------------------------------------------------------------

    def _http(self, method, url, path, body, timeout):
        parts = urllib.parse.urlsplit(url)
        conn_cls = (http.client.HTTPSConnection if parts.scheme == "https"
                    else http.client.HTTPConnection)
        conn = conn_cls(parts.netloc, timeout=timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, parts.path + path, body=payload, headers=self._headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _request(self, index: int, request: Request) -> Generation:
        self._count("requests")
        try:
            body = request_body(self.served_model, request, self.chat_template_kwargs)
        except ValueError as exc:
            self._count("failed")
            return Generation.failed(exc)
        n = len(self.base_urls)
        last, tried = "no attempt", 0
        for attempt in range(self.max_retries + 1):
            if self._closed.is_set():
                last = f"the backend was closed first; last error: {last}"
                break
            tried += 1
            url = self.base_urls[(index + attempt) % n]
            self._count("attempts")
            retry_after = None
            t0 = time.perf_counter()
            try:
                status, headers, data = self._http("POST", url, "/v1/chat/completions", body,
                                                   self.timeout_s)
            except (TimeoutError, socket.timeout):
                last, key = f"{url}: timed out after {self.timeout_s:g} s", "retried_timeout"
            except (OSError, http.client.HTTPException) as exc:
                last, key = f"{url}: {type(exc).__name__}: {exc}", "retried_connection"
            else:
                if status == 200:
                    return self._parse(url, data, time.perf_counter() - t0)
                detail = data[:300].decode("utf-8", "replace")
                last = f"{url}: HTTP {status}: {detail}"
                if status != 429 and status < 500:
                    self._count("failed")
                    return Generation.failed(last)
                key = "retried_429" if status == 429 else "retried_5xx"
                retry_after = _retry_after(
                    next((v for k, v in headers.items() if k.lower() == "retry-after"), None))
            if attempt == self.max_retries:
                break
            self._count(key)
            delay = min(_MAX_BACKOFF_S, self.backoff_s * 2**attempt)
            with self._lock:
                delay *= self._rng.uniform(0.5, 1.0)
            if retry_after is not None:
                delay = max(delay, min(retry_after, _MAX_RETRY_AFTER_S))
            self._closed.wait(delay)
        self._count("failed")
        return Generation.failed(f"{last} (gave up after {tried} attempts)")

    def _parse(self, url: str, data: bytes, latency: float) -> Generation:
        try:
            resp = json.loads(data)
            choice = resp["choices"][0]
            text = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            self._count("failed")
            return Generation.failed(f"{url}: unreadable completion ({type(exc).__name__}: "
                                     f"{exc}): {data[:200]!r}")
        usage = resp.get("usage") or {}
        spec = (resp.get("metrics") or {}).get("speculative_decoding")
        steps = drafted = accepted = None
        if spec:
            k = spec.get("num_spec_tokens")
            if self._k is None or (k is not None and k != self._k):
                what = "target-only" if self._k is None else f"num_speculative_tokens {self._k}"
                raise self._mismatch(url, f"decoded with {k} speculative tokens, but the config "
                                     f"is {what}", "speculative", self.config.speculative)
            steps = int(spec["num_spec_steps"])
            drafted = int(spec["num_draft_tokens"])
            accepted = int(spec["num_accepted_draft_tokens"])
            self._count("with_spec_metrics")
        return Generation(
            text=text if text is not None else "",
            output_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            spec_steps=steps,
            draft_tokens=drafted,
            accepted_tokens=accepted,
            latency_s=latency,
        )
