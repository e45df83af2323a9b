"""The wire format of ``engine: vllm-server``: the request body, the strict reading of each
response, ``/metrics`` and ``Retry-After``.

Nothing a server sends is trusted: every response is read on its own, and whatever is wrong
with it (not JSON, the wrong shape or types, counts out of range, another model) raises
:class:`BadResponse` or :class:`WrongIdentity` with a short message, which the backend turns
into that request's ``error`` record. Field shapes follow vLLM 0.33.0's
``ChatCompletionResponse`` (``vllm/entrypoints/openai/chat_completion/protocol.py``): ``model``
is the served model name, ``choices[0].message.content`` is a string, or ``null`` when a
reasoning parser put the whole output (a thinking cut off by ``max_tokens``) into
``message.reasoning``; ``usage.completion_tokens`` and ``metrics.speculative_decoding``
(``SpeculativeDecodingMetrics``) are counts.

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

import json
import math
import time
from email.utils import parsedate_to_datetime
from typing import Any

from qualgate.vllm033.speculative import SPECULATIVE_KEYS, resolve_speculative

from . import Generation, Request
from .vllm import SPEC_COUNTERS, SPEC_PER_POS

__all__ = [
    "BadResponse",
    "WrongIdentity",
    "parse_completion",
    "parse_spec_metrics",
    "request_body",
    "retry_after",
    "same_model",
    "spec_mismatch",
    "strict_json",
]

SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "stop_token_ids",
    "seed",
)
#: the most draft positions a ``/metrics`` page may label (vLLM drafts far fewer)
MAX_POSITIONS = 1024
#: the largest counter value accepted from ``/metrics`` (exact in a float)
MAX_COUNTER = 2**53
#: the largest count accepted in a response (tokens, steps)
MAX_COUNT = 2**31


class BadResponse(ValueError):
    """A response that cannot be read as a chat completion."""


class WrongIdentity(BadResponse):
    """A response from another deployment than the one checked (model, K)."""


def request_body(model: str, request: Request, chat_template_kwargs=None) -> dict[str, Any]:
    """The JSON body of ``/v1/chat/completions`` for one request."""
    s = dict(request.sampling)
    for key in ("max_tokens", "seed"):
        if s.get(key) is None:
            raise ValueError(f"request sampling needs {key!r}, got {request.sampling!r}")
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in request.messages]}
    body.update({k: s[k] for k in SAMPLING_FIELDS if s.get(k) is not None})
    body["max_completion_tokens"] = int(s["max_tokens"])
    unknown = sorted(set(s) - set(SAMPLING_FIELDS) - {"max_tokens"})
    if unknown:
        raise ValueError(f"sampling keys {unknown} cannot be sent to an OpenAI-compatible server")
    if chat_template_kwargs:
        body["chat_template_kwargs"] = dict(chat_template_kwargs)
    return body


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unique(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def strict_json(data: bytes) -> Any:
    """JSON without duplicate keys, ``NaN``/``Infinity`` or unbounded nesting (ValueError)."""
    try:
        return json.loads(data, object_pairs_hook=_unique, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _count(obj: dict, key: str, where: str, limit: int = MAX_COUNT) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limit:
        raise BadResponse(f"{where}.{key} = {_short(v)} is not a count from 0 to {limit}")
    return v


def _object(obj: dict, key: str, where: str) -> dict:
    v = obj.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadResponse(f"{where} is {type(v).__name__}, not an object")
    return v


def parse_completion(data: bytes, *, model: str, k: int | None, max_tokens: int, latency: float) -> Generation:
    """A :class:`Generation` from one ``/v1/chat/completions`` body, or an exception."""
    try:
        resp = strict_json(data)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise BadResponse(f"not JSON ({exc}): {data[:80]!r}") from None
    if not isinstance(resp, dict):
        raise BadResponse(f"the body is a JSON {type(resp).__name__}, not an object")
    if resp.get("model") != model:
        raise WrongIdentity(f"answered for model {_short(resp.get('model'))}, not {model!r}")
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadResponse(f"choices = {_short(choices)} has no choice object")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise BadResponse(f"choices[0].message = {_short(message)} is not an object")
    if "content" not in message:
        raise BadResponse("choices[0].message has no content")
    text = message["content"]
    if text is None:
        reasoning = message.get("reasoning", message.get("reasoning_content"))
        if not isinstance(reasoning, str):
            raise BadResponse("choices[0].message.content is null and there is no reasoning")
        text = ""  # all of the output was thinking: graded as no answer
    elif not isinstance(text, str):
        raise BadResponse(f"choices[0].message.content is {type(text).__name__}, not a string")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise BadResponse(f"choices[0].finish_reason = {_short(finish)} is not a string")
    tokens = _count(_object(resp, "usage", "usage"), "completion_tokens", "usage", max_tokens)
    spec = _object(_object(resp, "metrics", "metrics"), "speculative_decoding", "metrics.speculative_decoding")
    steps = drafted = accepted = None
    if spec:
        where = "metrics.speculative_decoding"
        k_resp = _count(spec, "num_spec_tokens", where)
        if k is None or k_resp != k:
            what = "target-only" if k is None else f"num_speculative_tokens {k}"
            raise WrongIdentity(f"decoded with {k_resp} speculative tokens, but the config is {what}")
        steps = _count(spec, "num_spec_steps", where)
        drafted = _count(spec, "num_draft_tokens", where)
        accepted = _count(spec, "num_accepted_draft_tokens", where)
        if None in (steps, drafted, accepted):
            raise BadResponse(f"{where} lacks num_spec_steps, num_draft_tokens or num_accepted_draft_tokens")
        if accepted > drafted or drafted > k * steps:
            raise BadResponse(
                f"{where}: {accepted} accepted of {drafted} drafted tokens in {steps} steps of {k} is impossible"
            )
    return Generation(
        text=text,
        output_tokens=tokens,
        finish_reason=finish,
        spec_steps=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        latency_s=latency,
    )


def parse_spec_metrics(text: str, model: str | None = None) -> dict[str, Any]:
    """Speculative-decoding counters from Prometheus text (``/metrics``), summed over label sets.

    When some samples carry ``model_name=model``, only those are counted. Returns the
    counters of :data:`qualgate.backends.vllm.SPEC_COUNTERS`, the per-position vector, and
    ``present`` (whether any ``vllm:spec_decode_*`` counter was exposed) and ``vllm``
    (whether any ``vllm:`` metric was). Raises :class:`ValueError` for text that is not
    Prometheus, a counter that is not a finite count up to 2**53, or a ``position`` label
    that is not an integer below :data:`MAX_POSITIONS`.
    """
    from prometheus_client.parser import text_string_to_metric_families

    try:
        samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ValueError(f"not Prometheus text ({type(exc).__name__}: {exc})") from None
    if model is not None and any(s.labels.get("model_name") == model for s in samples):
        samples = [s for s in samples if s.labels.get("model_name", model) == model]
    out: dict[str, Any] = {v: 0 for v in SPEC_COUNTERS.values()}
    per_pos: dict[int, int] = {}
    present = False
    for s in samples:
        name = s.name.removesuffix("_total")
        if name not in SPEC_COUNTERS and name != SPEC_PER_POS:
            continue
        v = s.value
        if not (math.isfinite(v) and 0 <= v <= MAX_COUNTER):
            raise ValueError(f"{s.name} = {v!r} is not a count")
        present = True
        if name in SPEC_COUNTERS:
            out[SPEC_COUNTERS[name]] += int(v)
        elif "position" in s.labels:
            p = s.labels["position"]
            if not (p.isascii() and p.isdigit() and int(p) < MAX_POSITIONS):
                raise ValueError(f"{s.name} has position={_short(p)} (not 0..{MAX_POSITIONS - 1})")
            per_pos[int(p)] = per_pos.get(int(p), 0) + int(v)
    n = max(per_pos) + 1 if per_pos else 0
    out["num_accepted_tokens_per_pos"] = [per_pos.get(i, 0) for i in range(n)]
    out["present"] = present
    out["vllm"] = any(s.name.startswith("vllm:") for s in samples)
    return out


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); ``None`` if
    unreadable. Not capped here: the backend caps the wait (``max_wait_s``)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    return None if math.isnan(seconds) else max(0.0, seconds)


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two model names are the same model (equal, or one a path ending in the other)."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def spec_mismatch(vllm_config: dict[str, Any], model: str, mine: dict | None):
    """``(message, field, value)`` when a ``/server_info`` ``vllm_config`` is not the
    config's model and resolved speculative config; ``None`` when it is."""
    model_cfg = vllm_config.get("model_config")
    served = model_cfg.get("model") if isinstance(model_cfg, dict) else None
    if served is not None and not same_model(served, model):
        return f"runs {served!r}, but the config's model is {model!r}", "model", model
    raw = vllm_config.get("speculative_config")
    if raw and isinstance(raw, dict):
        raw = {k: raw[k] for k in SPECULATIVE_KEYS if raw.get(k) is not None}
    try:
        theirs = resolve_speculative(raw or None)
    except (ValueError, TypeError) as exc:
        return (f"reports a speculative_config qualgate cannot read ({exc})", "speculative", raw)
    if (theirs is None) != (mine is None):
        return (f"serves speculative_config {theirs}, but the config has {mine}", "speculative", mine)
    if mine is None:
        return None
    diffs = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if key == "model" and (a is None or b is None or same_model(a, b)):
            continue
        if a != b:
            diffs.append(f"{key}: config {a!r}, server {b!r}")
    if diffs:
        return "serves a different speculative_config: " + "; ".join(diffs), "speculative", mine
    return None
