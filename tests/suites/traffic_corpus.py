"""Malformed traffic files (issue 30, item 1): each must be refused with exit 3 by
``qualgate suites show``, naming the file, the line and the field.

The corpus is data, in the style of ``tests/inputs/corpus.py``: :func:`cases` builds every
file from tables, one row per defect. A field-level case is a three-line file whose line 2
is a valid request with one change; a file-level case (not JSON, binary, a huge line) has no
field to name, only the line.
"""

from __future__ import annotations

import codecs
import gzip
import json
from dataclasses import dataclass

#: The suite file every case is read with: a gold column ``reference``.
SUITE = """\
name: traffic_corpus
version: 1
source: {traffic: bad.jsonl}
gold: {field: reference}
extract: {strict: last_number, lenient: last_number}
grader: exact
decides: strict
generation: {max_tokens: 64}
"""
USER = {"role": "user", "content": "What is 2 + 2?"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
TOOL_TURN = [
    USER,
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4"},
]
_DROP = object()


@dataclass(frozen=True)
class Case:
    id: str
    content: bytes  #: the traffic file
    line: int | None  #: the line the message must name (None: the file only)
    field: str | None  #: the field the message must name (None: no field applies)


def _request(**changes) -> dict:
    req = {"model": "m", "messages": [USER], "temperature": 0.0, "max_tokens": 32, "reference": "4"}
    req.update(changes)
    return {k: v for k, v in req.items() if v is not _DROP}


def _batch(custom_id="req-2", **changes) -> dict:
    line = {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [USER], "max_tokens": 32},
        "reference": "4",
    }
    line.update(changes)
    return {k: v for k, v in line.items() if v is not _DROP}


def _file(line2, *, first=None) -> bytes:
    """Three lines: a valid request, ``line2`` (an object, or raw text), a valid request."""
    ok1 = first or _request(messages=[{"role": "user", "content": "first"}])
    ok3 = _request(messages=[{"role": "user", "content": "third"}])
    raw = line2 if isinstance(line2, str) else json.dumps(line2)
    return "\n".join([json.dumps(ok1), raw, json.dumps(ok3)]).encode() + b"\n"


def _msg(i: int, **changes) -> list:
    """The tool conversation with message ``i`` changed (a key set to _DROP is removed)."""
    msgs = [dict(m) for m in TOOL_TURN]
    msgs[i] = {k: v for k, v in {**msgs[i], **changes}.items() if v is not _DROP}
    return msgs


def _part(part, role="user") -> list:
    return [{"role": role, "content": [{"type": "text", "text": "look:"}, part]}]


#: (case id, line 2 of the file, the field named)
FIELD_CASES = [
    ("messages missing", _request(messages=_DROP), "messages"),
    ("messages a string", _request(messages="hello"), "messages"),
    ("messages empty", _request(messages=[]), "messages"),
    ("message a string", _request(messages=["hello"]), "messages[0]"),
    ("role missing", _request(messages=[{"content": "hi"}]), "messages[0].role"),
    ("role unknown", _request(messages=[{"role": "robot", "content": "hi"}]), "messages[0].role"),
    (
        "role function (deprecated)",
        _request(messages=[{"role": "function", "name": "f", "content": "x"}]),
        "messages[0].role",
    ),
    ("role an integer", _request(messages=[{"role": 5, "content": "hi"}]), "messages[0].role"),
    ("role capitalised", _request(messages=[{"role": "User", "content": "hi"}]), "messages[0].role"),
    ("content missing", _request(messages=[{"role": "user"}]), "messages[0].content"),
    ("content null", _request(messages=[{"role": "user", "content": None}]), "messages[0].content"),
    ("content an integer", _request(messages=[{"role": "user", "content": 4}]), "messages[0].content"),
    ("content an object", _request(messages=[{"role": "user", "content": {"text": "hi"}}]), "messages[0].content"),
    ("content part a string", _request(messages=[{"role": "user", "content": ["hi"]}]), "messages[0].content[0]"),
    (
        "image part",
        _request(messages=_part({"type": "image_url", "image_url": {"url": "https://x/y.png"}})),
        "messages[0].content[1].type",
    ),
    (
        "audio part",
        _request(messages=_part({"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}})),
        "messages[0].content[1].type",
    ),
    (
        "file part",
        _request(messages=_part({"type": "file", "file": {"file_id": "file-1"}})),
        "messages[0].content[1].type",
    ),
    ("unknown part type", _request(messages=_part({"type": "video", "video": "v"})), "messages[0].content[1].type"),
    ("text part without text", _request(messages=_part({"type": "text"})), "messages[0].content[1].text"),
    ("text part text an integer", _request(messages=_part({"type": "text", "text": 7})), "messages[0].content[1].text"),
    (
        "refusal part in a user message",
        _request(messages=_part({"type": "refusal", "refusal": "no"})),
        "messages[0].content[1].type",
    ),
    (
        "image part in a system message",
        _request(messages=[{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}, USER]),
        "messages[0].content[0].type",
    ),
    ("unknown message key", _request(messages=[{**USER, "foo": 1}]), "messages[0].foo"),
    ("name an integer", _request(messages=[{**USER, "name": 3}]), "messages[0].name"),
    ("tool message without tool_call_id", _request(messages=_msg(2, tool_call_id=_DROP)), "messages[2].tool_call_id"),
    ("assistant without content or tool_calls", _request(messages=_msg(1, tool_calls=_DROP)), "messages[1].content"),
    ("tool_calls an object", _request(messages=_msg(1, tool_calls=CALL)), "messages[1].tool_calls"),
    (
        "custom tool call",
        _request(messages=_msg(1, tool_calls=[{"id": "c", "type": "custom", "custom": {"name": "f", "input": "x"}}])),
        "messages[1].tool_calls[0].type",
    ),
    (
        "tool call without id",
        _request(messages=_msg(1, tool_calls=[{k: v for k, v in CALL.items() if k != "id"}])),
        "messages[1].tool_calls[0].id",
    ),
    (
        "tool call arguments an object",
        _request(messages=_msg(1, tool_calls=[{**CALL, "function": {"name": "add", "arguments": {"a": 2}}}])),
        "messages[1].tool_calls[0].function.arguments",
    ),
    (
        "assistant function_call",
        _request(messages=_msg(1, function_call={"name": "f", "arguments": "{}"})),
        "messages[1].function_call",
    ),
    ("temperature a string", _request(temperature="0.7"), "temperature"),
    ("temperature above 2", _request(temperature=3), "temperature"),
    ("temperature a boolean", _request(temperature=True), "temperature"),
    ("top_p zero", _request(top_p=0), "top_p"),
    ("top_k below -1", _request(top_k=-2), "top_k"),
    ("max_tokens zero", _request(max_tokens=0), "max_tokens"),
    ("max_tokens a float", _request(max_tokens=1.5), "max_tokens"),
    ("max_completion_tokens differs from max_tokens", _request(max_completion_tokens=64), "max_completion_tokens"),
    ("stop an integer", _request(stop=5), "stop"),
    ("stop a list holding an integer", _request(stop=["\n", 5]), "stop"),
    ("stop_token_ids negative", _request(stop_token_ids=[-1]), "stop_token_ids"),
    ("presence_penalty above 2", _request(presence_penalty=5), "presence_penalty"),
    ("repetition_penalty zero", _request(repetition_penalty=0), "repetition_penalty"),
    ("seed a string", _request(seed="1"), "seed"),
    ("n zero", _request(n=0), "n"),
    ("model an integer", _request(model=4), "model"),
    ("stream a string", _request(stream="yes"), "stream"),
    ("tools", _request(tools=[{"type": "function", "function": {"name": "add"}}]), "tools"),
    ("response_format json", _request(response_format={"type": "json_object"}), "response_format"),
    ("logit_bias", _request(logit_bias={"50256": -100}), "logit_bias"),
    ("unknown request field", _request(foo="bar"), "foo"),
    ("gold column missing", _request(reference=_DROP), "reference"),
    ("gold column null", _request(reference=None), "reference"),
    ("gold column empty", _request(reference=" "), "reference"),
    (
        "same messages, another gold",
        _request(messages=[{"role": "user", "content": "first"}], reference="5"),
        "messages",
    ),
    ("batch method GET", _batch(method="GET"), "method"),
    ("batch url embeddings", _batch(url="/v1/embeddings"), "url"),
    ("batch body a string", _batch(body="{}"), "body"),
    ("batch without custom_id", _batch(custom_id=_DROP), "custom_id"),
    ("batch custom_id an integer", _batch(custom_id=2), "custom_id"),
    ("batch extra key", _batch(priority=1), "priority"),
    (
        "batch body with a bad role",
        _batch(body={"model": "m", "messages": [{"role": "bot", "content": "x"}]}),
        "body.messages[0].role",
    ),
    ("batch body without messages", _batch(body={"model": "m"}), "body.messages"),
    ("batch body temperature a string", _batch(body={"messages": [USER], "temperature": "hot"}), "body.temperature"),
]

#: (case id, raw line 2, the field named) for defects that need the raw text
RAW_FIELD_CASES = [
    (
        "duplicate key in a line",
        '{"messages": [{"role": "user", "content": "a"}], "temperature": 0, "temperature": 1, "reference": "4"}',
        "temperature",
    ),
    (
        "temperature 1e999 (infinite)",
        '{"messages": [{"role": "user", "content": "a"}], "temperature": 1e999, "reference": "4"}',
        "temperature",
    ),
]


def _huge_line() -> str:
    return json.dumps(_request(messages=[{"role": "user", "content": "x" * (9 << 20)}]))


def cases() -> list[Case]:
    out = [Case(f"field/{cid}", _file(line2), 2, field) for cid, line2, field in FIELD_CASES]
    out += [Case(f"field/{cid}", _file(raw), 2, field) for cid, raw, field in RAW_FIELD_CASES]
    first = _batch(custom_id="req-1")
    out.append(
        Case(
            "field/duplicate custom_id, other content",
            _file(_batch(custom_id="req-1", body={"messages": [{"role": "user", "content": "other"}]}), first=first),
            2,
            "custom_id",
        )
    )
    ok = json.dumps(_request()).encode()
    out += [
        Case("file/not JSON (cut line)", _file('{"messages": [{"role": "user", "content": "a"}'), 2, None),
        Case("file/a JSON array line", _file("[1, 2]"), 2, None),
        Case("file/a JSON string line", _file('"just text"'), 2, None),
        Case("file/NaN token", _file('{"messages": [], "temperature": NaN}'), 2, None),
        Case("file/huge line", _file(_huge_line()), 2, None),
        Case("file/invalid UTF-8", ok + b"\n" + b'{"messages": "\xff\xfe"}\n', 2, None),
        Case("file/binary with NUL bytes", ok + b"\n" + bytes(range(256)) + b"\n", 2, None),
        Case("file/gzip-compressed", gzip.compress(ok + b"\n", mtime=0), 1, None),
        Case("file/UTF-16", codecs.BOM_UTF16_LE + (ok.decode() + "\n").encode("utf-16-le"), 1, None),
        Case("file/empty", b"", None, None),
        Case("file/blank lines only", b"\n  \n\n", None, None),
    ]
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    return out
