"""``qualgate check --server URL``: what a running vLLM says about itself, against the evidence.

The server reports its model (``/v1/models``: id, root, max_model_len), its version
(``/version``), its KV-cache settings (``/metrics``: ``vllm:cache_config_info``) and whether it
drafts (``vllm:spec_decode_*`` metrics exist only with a speculative config). What it runs
beyond that (the speculative config, dtype, ...) is only in its startup log's
``non-default args: {...}`` line (``--server-log FILE``). :func:`server_config` builds the
served config from that line, after checking that the log is this server's (model, port,
context length, KV-cache dtype, drafting all agree); anything it cannot tell is a
:class:`~qualgate.errors.DataError` (exit 3).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError

__all__ = ["ServerFacts", "read_server", "server_config"]

_MAX_BYTES = 8 << 20  #: per response and for the log line
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_INFO = re.compile(r"^(vllm:[a-z_]+_info)\{(.*)\}\s+\S+\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ServerFacts:
    url: str
    models: tuple[dict[str, Any], ...]
    version: str | None
    info: dict[str, dict[str, str]] = field(default_factory=dict)  #: ``vllm:*_info`` labels
    drafts: bool = False  #: spec-decode metrics are present


def _get(url: str, path: str, timeout: float) -> bytes:
    full = url.rstrip("/") + path
    if urllib.parse.urlsplit(full).scheme not in ("http", "https"):
        raise DataError("--server must be an http(s) URL", value=url)
    try:
        with urllib.request.urlopen(full, timeout=timeout) as r:  # noqa: S310 (scheme checked)
            body = r.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise DataError(f"cannot read {full}: {exc}", field="--server", value=url) from exc
    if len(body) > _MAX_BYTES:
        raise DataError(f"{full} answered more than {_MAX_BYTES:,} bytes", field="--server")
    return body


def read_server(url: str, timeout: float = 10.0) -> ServerFacts:
    """What the server at ``url`` reports about itself."""
    try:
        models = json.loads(_get(url, "/v1/models", timeout))["data"]
        version = json.loads(_get(url, "/version", timeout)).get("version")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataError(f"{url} does not answer as a vLLM server (/v1/models, /version): {exc}") from exc
    info, drafts = {}, False
    for line in _get(url, "/metrics", timeout).decode("utf-8", "replace").splitlines():
        drafts = drafts or line.startswith("vllm:spec_decode_")
        m = _INFO.match(line)
        if m:
            info[m.group(1)] = dict(_LABEL.findall(m.group(2)))
    if not isinstance(models, list) or len(models) != 1:
        raise DataError(f"{url} serves {len(models) if isinstance(models, list) else 0} models; check expects one")
    return ServerFacts(url, tuple(models), version, info, drafts)


def _non_default_args(log: Path) -> dict[str, Any]:
    """The last ``non-default args: {...}`` of a vLLM startup log (the server's latest start)."""
    found = None
    with open(log, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if len(line) > _MAX_BYTES:
                continue
            m = _NON_DEFAULT.search(line)
            if m:
                found = m.group(1)
    if found is None:
        raise DataError("no 'non-default args: {...}' line: not a vLLM startup log", file=str(log))
    try:
        args = ast.literal_eval(found)
    except (ValueError, SyntaxError, RecursionError, MemoryError) as exc:
        raise DataError(f"the non-default args line cannot be read as literals: {exc}", file=str(log)) from exc
    if not isinstance(args, dict):
        raise DataError("the non-default args are not a mapping", file=str(log))
    return args


def server_config(facts: ServerFacts, log: str | Path | None):
    """``(ServingConfig, notes)``: what the server runs, from its log, checked against what it
    reports; a :class:`DataError` (exit 3) when it cannot tell or the two differ."""
    from qualgate.vllm033.serving import read_serving_config

    model = facts.models[0]
    if log is None:
        if facts.drafts:
            raise DataError(
                f"{facts.url} runs speculative decoding (its /metrics has spec_decode counters), but what it "
                "reports does not say which speculative config or verifier: pass --server-log with its startup log"
            )
        raise DataError(
            f"{facts.url} reports its model and context length but not its dtype, quantization or other "
            "arguments: pass --server-log with its startup log (its 'non-default args' line)"
        )
    args = _non_default_args(Path(log))
    args.pop("model_tag", None)
    differ = []
    root = model.get("root") or model.get("id")
    if args.get("model", "Qwen/Qwen3-0.6B") != root:  # (vLLM's default model when none is given)
        differ.append(f"model: the log {args.get('model')!r}, the server {root!r}")
    port = urllib.parse.urlsplit(facts.url).port
    if "port" in args and port is not None and args["port"] != port:
        differ.append(f"port: the log {args['port']}, the server's URL {port}")
    if "max_model_len" in args and args["max_model_len"] != model.get("max_model_len"):
        differ.append(f"max_model_len: the log {args['max_model_len']}, the server {model.get('max_model_len')}")
    cache = facts.info.get("vllm:cache_config_info", {})
    if "cache_dtype" in cache and str(args.get("kv_cache_dtype", "auto")) != cache["cache_dtype"]:
        differ.append(
            f"kv_cache_dtype: the log {args.get('kv_cache_dtype', 'auto')!r}, the server {cache['cache_dtype']!r}"
        )
    if bool(args.get("speculative_config")) != facts.drafts:
        differ.append(
            f"speculative decoding: the log {'sets' if args.get('speculative_config') else 'sets no'} "
            f"speculative_config, the server {'drafts' if facts.drafts else 'does not draft'}"
        )
    if differ:
        raise DataError(f"the log {log} is not of the server at {facts.url}: " + "; ".join(differ), file=str(log))
    with tempfile.TemporaryDirectory(prefix="qualgate-server-") as tmp:
        path = Path(tmp) / "server-non-default-args.yaml"
        path.write_text(json.dumps(args, default=str))
        cfg = read_serving_config(path)
    if facts.version:  # the release the server itself reports: the rules that apply (issue 45)
        cfg = dataclasses.replace(cfg, vllm_version=facts.version, vllm_version_source=f"{facts.url}/version")
    notes = [
        f"the server at {facts.url} runs vLLM {facts.version} serving {root} "
        f"(max_model_len {model.get('max_model_len')}); its arguments read from {log}"
    ]
    return cfg, notes
