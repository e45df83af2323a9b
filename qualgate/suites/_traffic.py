"""Traffic suites: the user's own chat requests, read from JSON Lines, as a suite's questions.

A suite whose ``source`` has ``traffic`` reads one or more JSON Lines files of chat requests
instead of a dataset. Each non-blank line is one of:

- an OpenAI **chat-completion request body**: ``{"model": ..., "messages": [...], ...}``;
- a line of an OpenAI **Batch API input file**: ``{"custom_id": ..., "method": "POST",
  "url": "/v1/chat/completions", "body": {<a request body>}}``;
- a plain ``{"messages": [...]}`` line (a request body without ``model``).

A line may also carry the suite's gold and ``meta`` columns (dotted paths from the line's
root, e.g. ``reference`` or ``body.metadata.reference``) and, outside the Batch form, a
``custom_id``. Anything else is refused with a :class:`~qualgate.errors.DataError` naming the
file, the line and the field (``messages[2].content[0].type``; ``body.`` first in a Batch
line). Nothing is sent anywhere by reading: the requests go only to the plan's engines.

What a request becomes
----------------------
- **Messages** are checked against OpenAI's chat-completions request shape: roles
  ``system``, ``developer``, ``user``, ``assistant`` and ``tool`` (the deprecated
  ``function`` role is refused); content a string or an array of content parts. Only text is
  taken: ``text`` parts (and ``refusal`` parts of assistant messages) are joined with a
  newline into one string, as vLLM does for chat templates that take string content; an
  ``image_url``, ``input_audio`` or ``file`` part is refused. An assistant message may carry
  ``tool_calls`` of type ``function`` (``custom`` tool calls are refused, as vLLM's chat
  endpoint refuses them) and then null content (read as ``""``, as vLLM does); a ``tool``
  message needs its ``tool_call_id``. Each message keeps what vLLM's chat parsing passes to
  the chat template: ``role``, ``content``, ``name``, ``tool_calls``, ``tool_call_id``.
- **Ids**: the line's ``custom_id``; else ``sha256:`` and the first 16 hex digits of the
  SHA-256 of the request's canonical JSON (the messages, or under ``sampling: request`` the
  list ``[messages, sampling]``; sorted keys, no spaces, UTF-8), which for ``sampling:
  config`` is the first 16 digits of the question's prompt hash.
- **Duplicates**: two lines with the same content (messages, the sampling fields taken, gold
  and meta values) are one question: the first line is kept, the others are removed and
  counted (``source.duplicates``). The same ``custom_id`` on two lines whose content differs
  is an error naming both lines.
- **Sampling fields** (``temperature``, ``top_p``, ``top_k``, ``min_p``, ``max_tokens`` or
  ``max_completion_tokens``, ``stop``, ``stop_token_ids``, ``presence_penalty``,
  ``frequency_penalty``, ``repetition_penalty``) are always checked against OpenAI's types
  and vLLM 0.33's ranges. Which values decode the request is the suite's choice,
  ``source.sampling``:

  - ``config`` (the default): **the decoding config wins**. Every request is decoded with
    the config's ``sampling`` block, as the questions of every other suite are; the
    request's own values are ignored. The manifest's sampling then says exactly what ran.
  - ``request``: **the request wins** for each field it sets; the config's block supplies the
    rest (``max_tokens`` included, when a request sets neither of its two names). Baseline
    and candidate get the same values per request, so pairing holds. The per-request values
    are held in ``Question.sampling``, and their digest is in the suite's ``source``, so a
    changed value changes the run's fingerprint.

  A request's ``seed`` is never used: every request is seeded by qualgate's request seed
  (:func:`qualgate.run.runner.request_seed`), which is what pairs the two arms and keeps a
  plan's seeds distinct.
- Fields that do not change the text a model writes, or that the plan decides, are dropped:
  :data:`IGNORED`. Fields that change the output but cannot be sent by qualgate's backends
  are refused, each with its reason: :data:`REFUSED` (tool definitions, ``response_format``
  other than text, ``logit_bias``, ...). ``source.ignore_fields`` names fields to drop
  knowingly, in the request or at a Batch line's top level (the decoded prompt then lacks
  what they did); any other field is refused.
- **Sample**: ``source.sample: {n: N, seed: S}`` keeps N of the distinct requests: those
  whose ``sha256("S\\x1fID")`` hex digests are the N smallest, kept in file order. The choice
  of a request depends only on its id and the seed (not on line order), and N must not
  exceed the number of distinct requests.

Lines are at most :data:`MAX_LINE_BYTES` bytes; files are read with
:mod:`qualgate.records.strict` (regular UTF-8 files; no duplicate keys, NaN or Infinity).

The module is over the ~450 lines the package aims at: it is one schema, OpenAI's request
shape checked field by field so that every refusal names its field.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.records.prompts import prompt_hash
from qualgate.records.strict import DuplicateKey, decode_text, parse_json, read_bytes
from qualgate.records.yaml_schema import AnyOf, Bool, Choice, Field, Int, ListOf, Mapping, Str, Where
from qualgate.vllm033.rules import sampling_ranges

__all__ = ["IGNORED", "MAX_LINE_BYTES", "REFUSED", "ROLES", "SAMPLING_FIELDS", "SAMPLING_MODES"]

#: The longest line read, in bytes (a 1M-token context is about 4 MiB of text).
MAX_LINE_BYTES = 8 << 20
#: The most refused lines one error names (every line is still checked; the rest are counted).
MAX_ERRORS_SHOWN = 50
SOURCE_KEYS = {"traffic", "sample", "sampling", "ignore_fields"}
SAMPLING_MODES = ("config", "request")
ROLES = ("system", "developer", "user", "assistant", "tool")
BATCH_URL = "/v1/chat/completions"
#: Request fields taken as per-request sampling (``max_completion_tokens`` becomes ``max_tokens``).
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "stop_token_ids",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)
#: Request fields dropped: they do not change the text generated, or the plan decides them
#: (``n``: the plan's ``samples``; ``seed``: qualgate's request seed).
IGNORED = (
    "model",
    "seed",
    "n",
    "stream",
    "stream_options",
    "user",
    "metadata",
    "store",
    "service_tier",
    "logprobs",
    "top_logprobs",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "parallel_tool_calls",
)
_TOOLS = "qualgate's backends send messages and sampling only, not tool definitions"
#: Request fields that change the output but cannot be sent by qualgate's backends.
REFUSED = {
    "tools": _TOOLS,
    "tool_choice": _TOOLS,
    "functions": _TOOLS + " (and functions is deprecated)",
    "function_call": _TOOLS + " (and function_call is deprecated)",
    "response_format": "structured output is not supported; only {type: text} is accepted",
    "logit_bias": "logit biases cannot be sent by qualgate's backends",
    "audio": "audio output is not supported: traffic suites are text only",
    "modalities": "only [text] is supported: traffic suites are text only",
    "prediction": "predicted outputs cannot be sent by qualgate's backends",
    "reasoning_effort": "reasoning effort cannot be sent by qualgate's backends",
    "verbosity": "verbosity cannot be sent by qualgate's backends",
    "web_search_options": "web search is not part of a model's decoding",
    "moderation": "moderation is not part of a model's decoding",
}
_MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "refusal", "tool_calls", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}
_PART_TYPES = {  # role -> content part types OpenAI allows there
    "system": ("text",),
    "developer": ("text",),
    "tool": ("text",),
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
}
_NOT_TEXT = ("image_url", "input_audio", "file")
_REQUEST_FIELDS = {"messages", *SAMPLING_FIELDS, *IGNORED, *REFUSED}
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")
_RESERVED_ROOTS = ("messages", "custom_id", "method", "url")


# --------------------------------------------------------------------------- the suite file


_STRINGS = ListOf(Str(), empty=False, message="must be a non-empty list of strings")
_SOURCE = Mapping(
    {
        "traffic": Field(required=True),
        "sample": Field(Mapping({"n": Field(Int(min=1), required=True), "seed": Field(Int(min=0))}), null=True),
        "sampling": Field(
            Choice(
                SAMPLING_MODES,
                message=f"must be one of {list(SAMPLING_MODES)} (which wins: the decoding config's "
                "sampling or the request's own fields)",
            )
        ),
        "ignore_fields": Field(),
    },
    unknown=f"unknown key; valid keys: {sorted(SOURCE_KEYS)}",
)


def check_source(where: Where, source: dict) -> None:
    """Validate a traffic ``source`` block (``where``: its place in the suite file)."""
    _SOURCE.check(source, where)
    paths = source["traffic"]
    (_STRINGS if isinstance(paths, list) else Str()).check(paths, where.at("traffic"))
    ignore = source.get("ignore_fields", [])
    for i, name in enumerate(_STRINGS.check(ignore, where.at("ignore_fields")) if ignore else ()):
        if name == "messages" or name in SAMPLING_FIELDS:
            where.at("ignore_fields").at(i).fail(
                "cannot be ignored (for the sampling fields, use sampling: config)", name
            )


def check_column(where: Where, path) -> None:
    """A gold or meta column of a traffic suite: a dotted path from the line's root."""
    Str().check(path, where)
    if not _PATH.fullmatch(path) or path.split(".")[0] in _RESERVED_ROOTS:
        where.fail(
            f"must be a dotted path of names from the line's root (e.g. reference, "
            f"body.metadata.reference), not under {list(_RESERVED_ROOTS)}",
            path,
        )


def grades_without_gold(grader) -> bool:
    """Whether a grader function (or a partial of one) grades outputs without a gold answer:
    it says so with the attribute ``grades_without_gold = True``."""
    return bool(getattr(getattr(grader, "func", grader), "grades_without_gold", False))


# --------------------------------------------------------------------------- reading lines


@dataclass(frozen=True)
class _Line:
    file: str
    number: int
    custom_id: str | None
    messages: list
    sampling: dict
    gold: Any
    meta: dict
    form: str


class TrafficError(DataError):
    """A :class:`DataError` of a traffic file: the offending value is shown as JSON, the
    file's own notation (``"image_url"``, ``null``, ``true``), not as a Python repr."""

    @classmethod
    def show_value(cls, value) -> str:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return super().show_value(value)
        return text if len(text) <= 200 else f"{text[:160]}... ({len(text)} characters)"

    @classmethod
    def of(cls, exc: DataError) -> TrafficError:
        """``exc`` (raised by a shared checker) as a TrafficError: the same place, value as JSON."""
        if isinstance(exc, cls):
            return exc
        return cls(exc.message, file=exc.file, line=exc.line, field=exc.field, value=exc.value)


def _refuse(errors: list, refused: int) -> None:
    """Raise one TrafficError for the ``refused`` lines, of which ``errors`` holds the first
    :data:`MAX_ERRORS_SHOWN` (named; the rest are counted); its file, line, field and value are
    the first error's."""
    if not errors:
        return
    first, rest = errors[0], errors[1:]
    message = first.message
    if refused > 1:
        message += "".join(f"\n{e}" for e in rest)
        if refused > len(errors):
            message += f"\nand {refused - len(errors)} more"
        message += f"\n({refused} lines refused)"
    raise TrafficError(message, file=first.file, line=first.line, field=first.field, value=first.value)


class _Where:
    """Raises the DataError of one line, its fields named from the line's root."""

    def __init__(self, file: str, number: int, prefix: str = ""):
        self.file, self.number, self.prefix = file, number, prefix

    def fail(self, message: str, field: str | None = None, value=None):
        name = None if field is None else self.prefix + field
        raise TrafficError(message, file=self.file, line=self.number, field=name, value=value)

    def schema(self) -> Where:
        """This line as a :class:`~qualgate.records.yaml_schema.Where` (its fields, its number)."""
        return Where(self.file, self.prefix.rstrip("."), lambda _: self.number)


def _lines(path: str, data: bytes):
    """(line number, parsed object or the line's :class:`TrafficError`) of each non-blank line of
    one traffic file."""
    text = decode_text(data, file=path)
    if not text.strip():
        raise TrafficError("no requests: the traffic file is empty", file=path)
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.endswith("\r"):
            raw = raw[:-1]
        if not raw.strip():
            continue
        size = len(raw.encode("utf-8"))
        if size > MAX_LINE_BYTES:
            yield (
                number,
                TrafficError(
                    f"a line of {size} bytes, over the {MAX_LINE_BYTES} byte limit for one request",
                    file=path,
                    line=number,
                ),
            )
            continue
        try:
            obj = parse_json(raw)
        except DuplicateKey as exc:
            obj = TrafficError(str(exc), file=path, line=number, field=str(exc.key))
        except json.JSONDecodeError as exc:
            obj = TrafficError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=number)
        except ValueError as exc:
            obj = TrafficError(f"not valid JSON: {exc}", file=path, line=number)
        yield number, obj


def _get(obj: dict, path: str, where: _Where, key: str):
    value = obj
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            where.fail(f"missing (the suite's {key} column)", path)
        value = value[part]
    if value is None:
        where.fail(f"null (the suite's {key} column)", path)
    return value


def _read_line(obj, where: _Where, gold: str | None, meta: tuple, ignore: frozenset) -> _Line:
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")
        where.fail(f"not a chat request: {kind}, not a JSON object")
    columns = ([gold] if gold else []) + list(meta)
    roots = {p.split(".")[0] for p in columns} - _REQUEST_FIELDS  # a request field stays one
    if "body" in obj or "method" in obj or "url" in obj:
        form, top = "batch", {"custom_id", "method", "url", "body"}
    else:
        form, top = ("request" if "model" in obj else "plain"), set()
    if form == "batch":
        for key in sorted(set(obj) - top - roots - ignore):
            where.fail("not a field of an OpenAI Batch API input line (custom_id, method, url, body)", key, obj[key])
        for key in ("custom_id", "method", "url", "body"):
            if key not in obj:
                where.fail("required in a Batch API input line", key)
        if obj["method"] != "POST":
            where.fail("must be POST (the only method of the Batch API)", "method", obj["method"])
        if obj["url"] != BATCH_URL:
            where.fail(f"not a chat request: only {BATCH_URL} lines are read", "url", obj["url"])
        if not isinstance(obj["body"], dict):
            where.fail("must be an object: the chat-completion request body", "body", obj["body"])
        body_roots = {p.split(".")[1] for p in columns if p.startswith("body.")} - _REQUEST_FIELDS
        request = {k: v for k, v in obj["body"].items() if k not in body_roots}
        req_where = _Where(where.file, where.number, "body.")
    else:
        request = {k: v for k, v in obj.items() if k not in roots and k != "custom_id"}
        req_where = where
    custom_id = obj.get("custom_id")
    if "custom_id" in obj and (not isinstance(custom_id, str) or not custom_id.strip()):
        where.fail("must be a non-empty string", "custom_id", custom_id)
    messages, sampling = _read_request(request, req_where, ignore)
    value = _get(obj, gold, where, "gold") if gold else None
    values = {path: _get(obj, path, where, "meta") for path in meta}
    return _Line(where.file, where.number, custom_id, messages, sampling, value, values, form)


def _read_request(request: dict, where: _Where, ignore: frozenset) -> tuple[list, dict]:
    if "messages" not in request:
        where.fail("not a chat request: it has no messages", "messages")
    for key in sorted(request):
        if key == "messages" or key in SAMPLING_FIELDS or key in IGNORED or key in ignore:
            continue
        value = request[key]
        if key == "response_format" and value == {"type": "text"}:
            continue
        if key == "modalities" and value == ["text"]:
            continue
        if key in REFUSED:
            where.fail(
                f"not supported: {REFUSED[key]} (list it in source.ignore_fields to drop "
                "it; the prompt then lacks what it did)",
                key,
                value,
            )
        where.fail(
            "not a field of an OpenAI chat-completion request (list it in source.ignore_fields to drop it)", key, value
        )
    _IGNORED_TYPES.check(request, where.schema())
    return _messages(request["messages"], where), _sampling(request, where)


_NON_EMPTY = Str(empty=True, pattern="(?s).+")
#: The request fields that qualgate drops but whose type is still checked (null: unset).
_IGNORED_TYPES = Mapping(
    {
        "model": Field(Str(empty=True), null=True),
        "n": Field(Int(min=1), null=True),
        "stream": Field(Bool(), null=True),
        "seed": Field(Int(), null=True),
    },
    other=True,
)
#: A request's sampling fields: OpenAI's types and vLLM 0.33's ranges.
_REQUEST_SAMPLING = Mapping(
    {
        **{key: Field(spec) for key, spec in sampling_ranges().items()},
        "top_k": Field(Int(min=-1, message="must be an integer >= -1 (0 or -1: off)")),
        "max_tokens": Field(Int(min=1)),
        "max_completion_tokens": Field(Int(min=1)),
        "stop": Field(AnyOf((_NON_EMPTY, ListOf(_NON_EMPTY)), message="must be a non-empty string or a list of them")),
        "stop_token_ids": Field(AnyOf((ListOf(Int(min=0)),), message="must be a list of token ids (integers >= 0)")),
    },
    other=True,
)


def _sampling(request: dict, where: _Where) -> dict:
    """The request's sampling fields, checked, under vLLM's names (null means unset)."""
    out = {k: request[k] for k in SAMPLING_FIELDS if request.get(k) is not None}
    _REQUEST_SAMPLING.check(out, where.schema())
    if "max_completion_tokens" in out:
        mct = out.pop("max_completion_tokens")
        if out.get("max_tokens", mct) != mct:
            where.fail(
                f"differs from max_tokens = {out['max_tokens']} (give one, or equal values)",
                "max_completion_tokens",
                mct,
            )
        out["max_tokens"] = mct
    return out


def _messages(messages, where: _Where) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        where.fail("must be a non-empty array of chat messages", "messages", messages)
    return [_message(m, f"messages[{i}]", where) for i, m in enumerate(messages)]


def _message(m, at: str, where: _Where) -> dict:
    if not isinstance(m, dict):
        where.fail("must be a message object with a role and content", at, m)
    role = m.get("role")
    if "role" not in m:
        where.fail("required", f"{at}.role")
    if role == "function":
        where.fail("the deprecated function role is not supported (use tool messages)", f"{at}.role", role)
    if not isinstance(role, str) or role not in ROLES:
        where.fail(f"not a chat role; valid roles: {list(ROLES)}", f"{at}.role", role)
    for key in sorted(set(m) - _MESSAGE_KEYS[role]):
        where.fail(f"not a field of a {role} message; valid: {sorted(_MESSAGE_KEYS[role])}", f"{at}.{key}", m[key])
    out: dict[str, Any] = {"role": role}
    tool_calls = None
    if role == "assistant":
        for key, why in (
            ("audio", "audio is not supported: traffic suites are text only"),
            ("function_call", "deprecated: use tool_calls"),
        ):
            if m.get(key) is not None:
                where.fail(f"not supported: {why}", f"{at}.{key}", m[key])
        if m.get("refusal") is not None and not isinstance(m["refusal"], str):
            where.fail("must be a string", f"{at}.refusal", m["refusal"])
        tool_calls = _tool_calls(m.get("tool_calls"), f"{at}.tool_calls", where)
    content = m.get("content")
    if content is None and not (role == "assistant" and tool_calls):
        where.fail(
            "required: a string or an array of content parts"
            + (" (it may be null only with tool_calls)" if role == "assistant" else ""),
            f"{at}.content",
            content,
        )
    out["content"] = "" if content is None else _content(content, role, f"{at}.content", where)
    if "name" in m:
        if not isinstance(m["name"], str) or not m["name"]:
            where.fail("must be a non-empty string", f"{at}.name", m["name"])
        out["name"] = m["name"]
    if tool_calls:
        out["tool_calls"] = tool_calls
    if role == "tool":
        tcid = m.get("tool_call_id")
        if not isinstance(tcid, str) or not tcid:
            where.fail("required in a tool message: a non-empty string", f"{at}.tool_call_id", tcid)
        out["tool_call_id"] = tcid
    return out


def _content(content, role: str, at: str, where: _Where) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        where.fail("must be a string or an array of content parts", at, content)
    texts = []
    for j, part in enumerate(content):
        p = f"{at}[{j}]"
        if not isinstance(part, dict):
            where.fail("must be a content part object ({type: text, text: ...})", p, part)
        kind = part.get("type")
        if kind in _NOT_TEXT and kind in _PART_TYPES[role]:
            where.fail(
                f"not supported: an {kind} part (traffic suites are text only; only text parts are read)",
                f"{p}.type",
                kind,
            )
        if kind not in _PART_TYPES[role]:
            where.fail(
                f"not a content part type of a {role} message; valid: {list(_PART_TYPES[role])}", f"{p}.type", kind
            )
        key = "refusal" if kind == "refusal" else "text"
        allowed = {"type", key} | ({"prompt_cache_breakpoint"} if kind == "text" else set())
        for extra in sorted(set(part) - allowed):
            where.fail(f"not a field of a {kind} part", f"{p}.{extra}", part[extra])
        if not isinstance(part.get(key), str):
            where.fail("required: a string", f"{p}.{key}", part.get(key))
        texts.append(part[key])
    return "\n".join(texts)


def _tool_calls(calls, at: str, where: _Where) -> list | None:
    if calls is None:
        return None
    if not isinstance(calls, list):
        where.fail("must be an array of tool calls", at, calls)
    out = []
    for j, call in enumerate(calls):
        c = f"{at}[{j}]"
        if not isinstance(call, dict):
            where.fail("must be a tool call object", c, call)
        if call.get("type") == "custom":
            where.fail(
                "not supported: custom tool calls (vLLM's chat endpoint takes function tool calls only)",
                f"{c}.type",
                "custom",
            )
        if call.get("type") != "function":
            where.fail("must be function", f"{c}.type", call.get("type"))
        for extra in sorted(set(call) - {"id", "type", "function"}):
            where.fail("not a field of a tool call", f"{c}.{extra}", call[extra])
        if not isinstance(call.get("id"), str) or not call["id"]:
            where.fail("required: a non-empty string", f"{c}.id", call.get("id"))
        fn = call.get("function")
        if not isinstance(fn, dict):
            where.fail("required: an object with name and arguments", f"{c}.function", fn)
        for extra in sorted(set(fn) - {"name", "arguments"}):
            where.fail("not a field of a function call", f"{c}.function.{extra}", fn[extra])
        for key in ("name", "arguments"):
            if not isinstance(fn.get(key), str) or (key == "name" and not fn[key]):
                where.fail("required: a string", f"{c}.function.{key}", fn.get(key))
        out.append(
            {"id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": fn["arguments"]}}
        )
    return out


# --------------------------------------------------------------------------- questions


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def traffic_files(spec, data_files=None) -> list[str]:
    """The traffic files to read: ``data_files`` as given, else the suite file's
    ``source.traffic`` (paths relative to the suite file's folder), resolved: relative to the
    working directory when under it (``data/x.jsonl``, not ``suites/../data/x.jsonl``), else
    absolute."""
    if data_files is not None:
        files = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
        if not files:
            raise ValueError("data_files: give at least one file")
        return [os.fspath(f) for f in files]
    paths = spec.source["traffic"]
    base, here = Path(spec.path).parent, Path.cwd().resolve()
    resolved = [(base / p).resolve() for p in (paths if isinstance(paths, list) else [paths])]
    return [str(r.relative_to(here)) if r.is_relative_to(here) else str(r) for r in resolved]


def traffic_questions(spec, data_files, question_cls) -> tuple[list, dict]:
    """The questions of a traffic suite and its resolved ``source`` (files, their sha256,
    line counts, duplicates removed, the sample, the sampling rule)."""
    src = spec.source
    mode = src.get("sampling", "config")
    ignore = frozenset(src.get("ignore_fields") or ())
    gold_path = None if spec.gold is None else spec.gold["field"]
    files = traffic_files(spec, data_files)
    kept: dict[str, tuple[_Line, bytes, str]] = {}  # id -> (line, digest of its content, prompt hash)
    by_content: set[bytes] = set()
    lines = duplicates = 0
    forms = {"request": 0, "batch": 0, "plain": 0}
    digests, gold = {}, {}
    errors: list[TrafficError] = []  # every line is checked; the first refused ones are named together
    refused = 0
    for path in files:
        data = read_bytes(path, kind="records")
        digests[path] = hashlib.sha256(data).hexdigest()
        for number, obj in _lines(path, data):
            try:
                if isinstance(obj, TrafficError):
                    raise obj
                line = _read_line(obj, _Where(path, number), gold_path, spec.meta, ignore)
                if spec.gold is not None:  # every line's gold is checked, sampled or not
                    try:
                        gold[(path, number)] = spec.gold_parse(line.gold)
                    except ValueError as exc:
                        raise TrafficError(str(exc), file=path, line=number, field=gold_path, value=line.gold) from None
            except DataError as exc:
                refused += 1
                if len(errors) < MAX_ERRORS_SHOWN:
                    errors.append(TrafficError.of(exc))
                continue
            lines += 1
            forms[line.form] += 1
            sampling = line.sampling if mode == "request" else {}
            ph = prompt_hash(line.messages)  # the SHA-256 of the messages' canonical JSON
            content = hashlib.sha256((ph + _canonical([sampling, line.gold, line.meta])).encode()).digest()
            hashed = (
                ph if mode == "config" else hashlib.sha256(_canonical([line.messages, sampling]).encode()).hexdigest()
            )
            qid = line.custom_id or "sha256:" + hashed[:16]
            if qid in kept:
                first = kept[qid][0]
                if kept[qid][1] != content:
                    what = "custom_id" if line.custom_id else "messages"
                    refused += 1
                    errors.append(
                        TrafficError(
                            f"the same id {json.dumps(qid, ensure_ascii=False)} as line {first.number} of "
                            f"{first.file} with different content (messages, sampling, gold or meta)",
                            file=path,
                            line=number,
                            field=("body." if line.form == "batch" and what == "messages" else "") + what,
                            value=line.custom_id,
                        )
                    )
                    del errors[MAX_ERRORS_SHOWN:]
                    continue
                duplicates += 1
                continue
            if content in by_content:
                duplicates += 1
                continue
            by_content.add(content)
            kept[qid] = (line, content, ph)
    _refuse(errors, refused)
    order = list(kept)
    sample = src.get("sample")
    if sample is not None:
        n, seed = sample["n"], sample.get("seed", 0)
        if n > len(order):
            raise DataError(
                f"a sample of {n} from {len(order)} distinct requests ({lines} lines, {duplicates} duplicates removed)",
                file=spec.path,
                field="source.sample.n",
                value=n,
            )
        rank = {q: hashlib.sha256(f"{seed}\x1f{q}".encode()).hexdigest() for q in order}
        chosen = set(sorted(order, key=rank.__getitem__)[:n])
        order = [q for q in order if q in chosen]
    questions = []
    for qid in order:
        line, _, ph = kept[qid]
        meta = dict(line.meta, traffic_line=f"{line.file}:{line.number}")
        questions.append(
            question_cls(
                id=qid,
                prompt=tuple(line.messages),
                gold=gold.get((line.file, line.number)),
                prompt_hash=ph,
                meta=meta,
                sampling=dict(line.sampling) if mode == "request" else {},
            )
        )
    source = {
        "traffic": files,
        "sha256": digests,
        "lines": lines,
        "forms": forms,
        "distinct": len(kept),
        "duplicates": duplicates,
        "sample": None if sample is None else {"n": sample["n"], "seed": sample.get("seed", 0)},
        "sampling": mode,
        "ignore_fields": sorted(ignore),
    }
    if mode == "request":
        blob = _canonical([[q.id, q.sampling] for q in questions])
        source["request_sampling_sha256"] = hashlib.sha256(blob.encode()).hexdigest()
    return questions, source
