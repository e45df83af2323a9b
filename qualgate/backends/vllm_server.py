"""``engine: vllm-server``: OpenAI-compatible servers (a vLLM fleet) behind the backend interface.

Needs no vLLM locally: the standard library's ``http.client`` (keep-alive, proxies, deadlines
and body caps in :mod:`qualgate.backends._http`), a bounded thread pool, and
``prometheus_client``'s text parser (a core dependency) for ``/metrics``. What is read from
a response, and how strictly, is in :mod:`qualgate.backends._openai`.

Config mapping (``engine_options``):

- ``base_urls``: one URL or a list of *replicas of one deployment* (``http://host:8000``; a
  trailing ``/v1`` is accepted). Each request goes to the replica with the fewest requests
  in flight (ties: the fewest sent so far).
- ``served_model_name``: the ``model`` sent in requests (default: the config's ``model``).
- ``api_key_env``: the environment variable holding a bearer token (never the token).
- ``concurrency``: requests in flight over the whole fleet (default 16 per URL).
- ``timeout_s``: the deadline of one attempt, connect to last byte (default 3600; a
  non-streaming completion sends nothing until it is done).
- ``max_retries`` (default 5), ``retry_backoff_s`` (default 1.0) and ``max_wait_s`` (default
  300): HTTP 429, 5xx, timeouts and connection errors are retried after
  ``backoff * 2**attempt`` seconds times a uniform jitter in [0.5, 1], at least the server's
  ``Retry-After``; a request waits at most ``max_wait_s`` in all, so a request takes at most
  ``(max_retries + 1) * timeout_s + max_wait_s``. A connection error takes its replica out
  of the rotation and the request moves to another one at once. Other HTTP errors (400: a
  prompt too long) are not retried.
- ``max_response_bytes`` (default 4 MiB): the largest body read from any endpoint.
- ``recheck_s`` (default 30): how long a replica that failed is left out before its
  identity is checked again and, if it passes, it takes requests again.
- ``chat_template_kwargs`` are sent with every request; ``batch_size`` (requests per
  harness batch, default ``max(256, 4 * concurrency)``).

A request that still fails, or whose response cannot be read, is returned as
``Generation.failed`` (outcome ``error``, message starting with the server URL): one bad
response never stops the run or discards the rest of its batch.

Checks when the backend opens, on every URL (:class:`~qualgate.errors.DataError`, exit 3):

- ``GET /v1/models`` must list the served model name; when the card's ``root`` (the model
  the server loaded) is given it must be the config's ``model`` (equal, or one a path
  ending in ``/`` + the other);
- ``GET /version``: replicas that report a version must all report the same one;
- ``GET /server_info?config_format=json`` (only with ``VLLM_SERVER_DEV_MODE=1``): the
  served ``speculative_config``, resolved like the config's, must equal it;
- ``GET /metrics``: a target-only config must not meet ``vllm:spec_decode_*`` counters, and
  the ``position`` labels of ``vllm:spec_decode_num_accepted_tokens_per_pos`` must number K.

A replica that cannot be reached at open starts out of the rotation (rechecked later); if
none can be reached, the backend does not open. During the run, a response for another
``model``, or whose ``metrics.speculative_decoding.num_spec_tokens`` is not K, is that
request's error; while another replica is up, its replica is taken out for good and the
request retried elsewhere (:mod:`qualgate.backends._replicas`). What could not be checked
is listed in ``info()["checks"]``; each replica's state in ``info()["replicas"]``.

Acceptance: per request from ``metrics.speculative_decoding`` when the server returns it
(``vllm serve --per-request-spec-decode-metrics summary``); in any case ``/metrics`` is
scraped when the backend opens and after every batch, and the counter deltas are the
config's aggregate in ``info()["spec_decode"]`` (exact only if no other client uses those
servers meanwhile; a replica whose counters go back, i.e. restarted, counts from zero).

The vLLM 0.33.0 facts relied on are listed in :mod:`qualgate.backends._openai`.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import DataError
from . import Backend, Generation, Request, package_versions
from ._http import Client, TransportError, proxy_for
from ._openai import (
    BadResponse,
    WrongIdentity,
    parse_completion,
    parse_spec_metrics,
    request_body,
    retry_after,
)
from ._replicas import ReplicaPool, accumulate, add_vectors
from ._server_identity import ServerIdentity
from .vllm import SPEC_COUNTERS, spec_summary

__all__ = ["VLLMServerBackend", "parse_spec_metrics", "request_body"]

_MAX_BACKOFF_S = 60.0


class VLLMServerBackend(ServerIdentity, Backend):
    """OpenAI-compatible ``/v1/chat/completions`` on one or several replicas."""

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
        if len(set(self.base_urls)) != len(self.base_urls):
            raise self._bad("base_urls", raw, "lists a URL twice")
        self.served_model = str(opts.get("served_model_name") or config.model)
        self.concurrency = self._positive("concurrency", 16 * len(self.base_urls), int)
        self.timeout_s = self._positive("timeout_s", 3600.0, float)
        self.max_retries = self._positive("max_retries", 5, int, minimum=0)
        self.backoff_s = self._positive("retry_backoff_s", 1.0, float, minimum=0)
        self.max_wait_s = self._positive("max_wait_s", 300.0, float, minimum=0)
        self.max_bytes = self._positive("max_response_bytes", 4 << 20, int)
        self.recheck_s = self._positive("recheck_s", 30.0, float, minimum=0)
        self.chat_template_kwargs = opts.get("chat_template_kwargs")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key_env = opts.get("api_key_env")
        if key_env:
            token = os.environ.get(str(key_env))
            if not token:
                raise self._bad("api_key_env", key_env, "this environment variable is not set")
            headers["Authorization"] = f"Bearer {token}"
        proxies = {}
        for url in self.base_urls:
            try:
                p = proxy_for(url)
            except ValueError as exc:
                raise self._bad("base_urls", url, str(exc)) from None
            proxies[url] = f"{p.scheme}://{p.hostname}:{p.port or 80}" if p else None
        spec = config.speculative
        self._k = spec["num_speculative_tokens"] if spec else None
        self._client = Client(headers, pool_size=self.concurrency)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._rng = random.Random()
        self._counts = {
            "requests": 0,
            "attempts": 0,
            "retried_429": 0,
            "retried_5xx": 0,
            "retried_timeout": 0,
            "retried_connection": 0,
            "retried_identity": 0,
            "failed": 0,
            "with_spec_metrics": 0,
        }
        self.pool = ReplicaPool(self.base_urls, self.recheck_s, self._check_server, self._note)
        self.replicas = self.pool.replicas
        self._info: dict[str, Any] = {
            "engine": self.engine,
            "versions": package_versions(),
            "base_urls": self.base_urls,
            "proxies": proxies,
            "served_model": self.served_model,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "retry_backoff_s": self.backoff_s,
            "max_wait_s": self.max_wait_s,
            "max_response_bytes": self.max_bytes,
            "chat_template_kwargs": self.chat_template_kwargs,
            "servers": self.pool.servers,
            "replicas": {},
            "checks": [],
            "requests": self._counts,
        }
        try:
            self._open_replicas()
        except BaseException:
            self._client.close()
            raise
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="qualgate-http")
        self._update_metrics()
        # what every record names (issue 45): vLLM at the version its replicas report on /version
        # (they must agree: _open_replicas); None when none reports one
        reported = {s.get("version") for s in self.pool.servers.values()} - {None}
        self._info["identity"] = {"engine": "vllm", "version": reported.pop() if len(reported) == 1 else None}

    # -- harness interface -------------------------------------------------------------

    @property
    def batch_size(self) -> int:
        opts = self.config.engine_options
        if opts.get("batch_size"):
            return int(opts["batch_size"])
        return max(256, 4 * self.concurrency)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        futures = [self._pool.submit(self._request, r) for r in requests]
        out = [f.result() for f in futures]
        self._update_metrics()
        return out

    def info(self) -> dict[str, Any]:
        """The manifest entry; the same dict is updated in place after every batch."""
        with self._lock:
            self._info["replicas"] = {r.url: r.summary() for r in self.replicas}
            self._info["connections_opened"] = self._client.connections_opened
        return self._info

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            self._closed.set()  # queued requests and backoff sleeps end now
            pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._update_metrics()
            self._client.close()

    # -- option checks (the server identity: ServerIdentity) -------------------------------

    def _bad(self, key, value, message) -> DataError:
        return DataError(message, file=self.config.path, field=f"engine_options.{key}", value=value)

    def _positive(self, key, default, kind, minimum=None):
        value = self.config.engine_options.get(key, default)
        ok = not isinstance(value, bool) and isinstance(value, (int, float))
        if ok:
            value = kind(value)
            ok = value >= minimum if minimum is not None else value > 0
        if not ok:
            raise self._bad(
                key,
                self.config.engine_options.get(key),
                "must be a positive number" if minimum is None else f"must be a number >= {minimum}",
            )
        return value

    def _note(self, message: str) -> None:
        with self._lock:
            if message not in self._info["checks"]:
                self._info["checks"].append(message)

    # -- metrics -----------------------------------------------------------------------

    def _scrape(self, url: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            status, data = self._get(url, "/metrics")
            if status != 200:
                return None, f"HTTP {status}"
            return parse_spec_metrics(data.decode("utf-8", "replace"), self.served_model), None
        except (TransportError, ValueError) as exc:
            return None, str(exc)

    def _update_metrics(self) -> None:
        self.info()  # replica states into the manifest entry
        for r in self.replicas:
            if r.metrics_last is None or r.state != "up":
                continue
            now, why = self._scrape(r.url)
            if now is None:
                self._note(f"{r.url}: /metrics unreadable during the run ({why})")
                continue
            r.metrics_delta = accumulate(r.metrics_delta, r.metrics_last, now)
            r.metrics_last = now
        if self.config.speculative is None:
            self._info["spec_decode"] = None
            return
        total = {v: 0 for v in SPEC_COUNTERS.values()}
        per_pos: list[int] = []
        per_url = {}
        for r in self.replicas:
            d = r.metrics_delta if r.metrics_last is not None else None
            if d is None and r.metrics_last is not None:
                d = {**total, "num_accepted_tokens_per_pos": []}
            per_url[r.url] = d
            if d is None:
                continue
            for k in total:
                total[k] += d[k]
            per_pos = add_vectors(per_pos, d["num_accepted_tokens_per_pos"])
        scraped = any(v is not None for v in per_url.values())
        total["num_accepted_tokens_per_pos"] = per_pos
        self._info["spec_decode"] = {
            "source": "/metrics delta while this config ran" if scraped else None,
            **(spec_summary(total) if scraped else {}),
            "per_server": per_url,
        }

    # -- requests ----------------------------------------------------------------------

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _fail(self, message: str) -> Generation:
        self._count("failed")
        return Generation.failed(message)

    def _request(self, request: Request) -> Generation:
        self._count("requests")
        try:
            body = json.dumps(request_body(self.served_model, request, self.chat_template_kwargs)).encode()
        except (ValueError, TypeError) as exc:
            return self._fail(f"{type(exc).__name__}: {exc}")
        max_tokens = int(request.sampling["max_tokens"])
        last, tried, waited, avoid = "no attempt", 0, 0.0, None
        for attempt in range(self.max_retries + 1):
            if self._closed.is_set():
                last = f"the backend was closed first; last error: {last}"
                break
            replica = self.pool.acquire(avoid)
            retry_wait, now_elsewhere = None, False
            if replica is None:
                last = f"no server is in the rotation: {self.pool.states()}"
                key = "retried_connection"
            else:
                url = replica.url
                tried += 1
                self._count("attempts")
                t0 = time.perf_counter()
                try:
                    resp = self._client.request(
                        "POST", url, "/v1/chat/completions", body, timeout=self.timeout_s, max_bytes=self.max_bytes
                    )
                except TransportError as exc:
                    self.pool.release(replica)
                    if exc.kind == "too_large":
                        return self._fail(f"{url}: {exc}")
                    if exc.kind == "timeout":
                        last, key = f"{url}: timed out: {exc}", "retried_timeout"
                    else:
                        last, key = f"{url}: {exc}", "retried_connection"
                        self.pool.take_out(replica, str(exc))
                        now_elsewhere = True
                else:
                    self.pool.release(replica)
                    if resp.status == 200:
                        try:
                            gen = parse_completion(
                                resp.body,
                                model=self.served_model,
                                k=self._k,
                                max_tokens=max_tokens,
                                latency=time.perf_counter() - t0,
                            )
                        except WrongIdentity as exc:
                            last, key = f"{url}: {exc}", "retried_identity"
                            self.pool.take_out(replica, str(exc), for_good=True)
                            now_elsewhere = True
                        except BadResponse as exc:
                            return self._fail(f"{url}: unreadable completion: {exc}")
                        else:
                            if gen.spec_steps is not None:
                                self._count("with_spec_metrics")
                            return gen
                    else:
                        detail = resp.body[:300].decode("utf-8", "replace")
                        last = f"{url}: HTTP {resp.status}: {detail}"
                        if resp.status != 429 and resp.status < 500:
                            return self._fail(last)
                        key = "retried_429" if resp.status == 429 else "retried_5xx"
                        retry_wait = retry_after(resp.headers.get("retry-after"))
                avoid = replica
            if attempt == self.max_retries:
                break
            self._count(key)
            if now_elsewhere and self.pool.alternative(replica):
                continue  # another replica takes it at once
            delay = min(_MAX_BACKOFF_S, self.backoff_s * 2**attempt)
            with self._lock:
                delay *= self._rng.uniform(0.5, 1.0)
            if retry_wait is not None:
                delay = max(delay, retry_wait)
            if waited + delay > self.max_wait_s:
                last += f"; the next wait ({delay:.3g} s) would pass engine_options.max_wait_s = {self.max_wait_s:g} s"
                break
            waited += delay
            self._closed.wait(delay)
        return self._fail(f"{last} (gave up after {tried} attempts)")
