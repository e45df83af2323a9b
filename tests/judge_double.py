"""A judge double: an OpenAI-compatible chat-completions server on 127.0.0.1 that replays
stored GPT-4 judgments (the boundary that cannot run here: the OpenAI API).

It answers ``POST /v1/chat/completions`` only for a request it can match *exactly* to a
stored judgment: the body's ``messages`` must be ``[system, user]`` whose texts are, byte for
byte, the judge prompt's system text and the stored ``user_prompt`` of that judgment; the
``model`` must be the served one and ``temperature`` 0. Anything else is an HTTP error with an
OpenAI-shaped error body (404 for a prompt it holds no judgment for, 400 for a malformed
request), so a test whose prompt differs from the one GPT-4 saw fails. The response has the
shape of OpenAI's (and vLLM's) ``ChatCompletion``: ``id``, ``object``, ``created``, ``model``,
``choices[0].message.{role, content}``, ``finish_reason``, ``usage``. ``GET /v1/models`` lists
the served model (as OpenAI and ``vllm serve`` do); ``/version``, ``/metrics`` and
``/server_info`` are 404, as on the OpenAI API.

Faults for the error tests: ``reply`` (a function ``(system, user) -> str | None`` whose string
replaces the stored text, e.g. garbage or a refusal), ``status`` (a fixed HTTP status for
every completion), ``delay_s`` (sleep before answering: a judge that times out).

The stored judgments are read from ``../shared/data/open_ended`` (FastChat's files):
:func:`fastchat_judgments` builds the exact-match table from ``judge_prompts.jsonl`` and the
``model_judgment`` files. :func:`fastchat_template` turns FastChat's judge prompts into a
qualgate template file (so qualgate renders the very prompts GPT-4 was sent).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from support import SHARED, require_shared

OPEN_ENDED = SHARED / "data" / "open_ended"


def _jsonl(path: Path) -> list[dict]:
    if Path(path).is_relative_to(SHARED):
        require_shared()  # every reader of ../shared: the test using it skips without it
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def judge_prompts() -> dict[str, dict]:
    return {p["name"]: p for p in _jsonl(OPEN_ENDED / "judge_prompts.jsonl")}


def fastchat_judgments(*files: Path, model: str | None = None) -> dict[tuple[str, str], str]:
    """``(system, user) -> judgment text`` of FastChat judgment files (single or pair format).

    ``model``: only the single grades of that arm. Arms whose answers are equal show GPT-4 the
    same prompt, and GPT-4 did not always grade it the same: one table per arm replays each
    arm's own grades."""
    prompts = judge_prompts()
    table: dict[tuple[str, str], str] = {}
    for f in files:
        for row in _jsonl(f):
            if model is not None and row.get("model") != model:
                continue
            system = prompts[row["judge"][1]]["system_prompt"]
            if "user_prompt" in row:
                table[(system, row["user_prompt"])] = row["judgment"]
            else:
                for g in ("g1", "g2"):
                    table[(system, row[f"{g}_user_prompt"])] = row[f"{g}_judgment"]
    return table


_RENAME = {"ref_answer_1": "reference_1", "ref_answer_2": "reference_2"}


def fastchat_template(path: Path, kind: str) -> Path:
    """Write FastChat's judge prompts (read from the shared data) as a qualgate template file."""
    p = judge_prompts()
    names = {
        "pointwise": {
            "single": "single-v1",
            "single_reference": "single-math-v1",
            "multi": "single-v1-multi-turn",
            "multi_reference": "single-math-v1-multi-turn",
        },
        "pairwise": {"single": "pair-v2", "single_reference": "pair-math-v1"},
    }[kind]

    def convert(text, variant):
        def one(m):
            name = m.group(1)
            if variant.startswith("single") and name == "ref_answer_1":
                return "{{reference}}"
            return "{{" + _RENAME.get(name, name) + "}}"

        return re.sub(r"\{([a-z_0-9]+)\}", one, text)

    doc = {
        "name": f"fastchat-{kind}",
        "kind": kind,
        "prompts": {
            v: {"system": p[n]["system_prompt"], "user": convert(p[n]["prompt_template"], v)} for v, n in names.items()
        },
    }
    if kind == "pointwise":
        doc["rating"] = {"low": 1, "high": 10}
    path.write_text(json.dumps(doc, ensure_ascii=False))  # JSON is YAML
    return path


class JudgeDouble:
    """The loopback judge server (see the module docstring)."""

    def __init__(self, judgments: dict[tuple[str, str], str], *, model="gpt-4", reply=None, status=None, delay_s=0.0):
        self.judgments, self.model = judgments, model
        self.reply, self.status, self.delay_s = reply, status, delay_s
        self.lock = threading.Lock()
        self.requests = 0  # completion requests received
        self.answered: list[tuple[str, str]] = []  # (system, user) answered with 200
        self.refused: list[tuple[int, str]] = []  # (status, message)
        self.in_flight = self.max_in_flight = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        return False

    def config(self, path: Path, **options) -> Path:
        """A vllm-server decoding config for this judge, written to ``path``."""
        opts = {
            "base_urls": [self.url],
            "concurrency": 8,
            "timeout_s": 5,
            "max_retries": 1,
            "retry_backoff_s": 0.01,
            **options,
        }
        path.write_text(
            json.dumps(
                {
                    "name": path.stem,
                    "engine": "vllm-server",
                    "model": self.model,
                    "sampling": {"max_tokens": 2048},
                    "engine_options": opts,
                }
            )
        )
        return path

    def answer(self, body) -> tuple[int, dict]:
        def error(status, message, kind="invalid_request_error"):
            with self.lock:
                self.refused.append((status, message))
            return status, {"error": {"message": message, "type": kind, "param": None, "code": None}}

        if not isinstance(body, dict) or body.get("model") != self.model:
            return error(404, f"The model `{body.get('model') if isinstance(body, dict) else None}` does not exist")
        msgs = body.get("messages")
        if not (
            isinstance(msgs, list)
            and len(msgs) == 2
            and [m.get("role") for m in msgs] == ["system", "user"]
            and all(isinstance(m.get("content"), str) and set(m) == {"role", "content"} for m in msgs)
        ):
            return error(400, "the double holds judgments of [system, user] prompts only")
        if body.get("temperature") != 0:
            return error(400, f"the stored judgments were made at temperature 0, not {body.get('temperature')!r}")
        key = (msgs[0]["content"], msgs[1]["content"])
        text = self.judgments.get(key)
        if self.reply is not None:
            text = self.reply(*key)
        if text is None:
            return error(404, "no stored judgment matches this prompt exactly")
        if self.status is not None:
            return error(self.status, "the judge double was told to fail", "server_error")
        with self.lock:
            self.answered.append(key)
            n = len(self.answered)
        return 200, {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": len(key[1]) // 4,
                "completion_tokens": len(text) // 4,
                "total_tokens": (len(key[1]) + len(text)) // 4,
            },
        }

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):
                pass

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": server.model, "object": "model", "created": 0, "owned_by": "openai"}],
                        },
                    )
                else:
                    self._send(
                        404,
                        {
                            "error": {
                                "message": f"Invalid URL (GET {self.path})",
                                "type": "invalid_request_error",
                                "param": None,
                                "code": None,
                            }
                        },
                    )

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(n)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"Invalid URL (POST {self.path})"}})
                with server.lock:
                    server.requests += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        return self._send(400, {"error": {"message": "We could not parse the JSON body"}})
                    self._send(*server.answer(body))
                finally:
                    with server.lock:
                        server.in_flight -= 1

        return Handler


def judge_args(
    base, cand, judge, out, *, questions=None, prompt=None, suite=None, fmt: str | None = "json", sensitivity=0
) -> list[str]:
    """The command line of ``qualgate judge BASE CAND --judge JUDGE --out OUT`` with the
    options given (``fmt=None``: the text output). ``sensitivity`` 0 by default: a double that
    replays stored verdicts holds none for planted pairs (``None``: qualgate's default)."""
    args = ["judge", str(base), str(cand), "--judge", str(judge), "--out", str(out)]
    options = (
        ("--questions", questions),
        ("--prompt", prompt),
        ("--suite", suite),
        ("--format", fmt),
        ("--sensitivity", sensitivity),
    )
    for option, value in options:
        if value is not None:
            args += [option, str(value)]
    return args
