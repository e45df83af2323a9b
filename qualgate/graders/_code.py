"""Code answers: the program in a model's text, and grading it by running unit tests.

``code_block`` and ``code`` are extractors (:data:`qualgate.graders.EXTRACTORS`),
``unit_tests`` is a grader (:data:`~qualgate.graders.GRADERS`) and a gold parser
(:data:`~qualgate.graders.GOLD_PARSERS`). The gold of a code question is a JSON object
(:func:`unit_tests_gold`) with the program's ``prefix`` (HumanEval's prompt: imports, the
signature and docstring), the ``test`` code and the ``entry_point``.

A completion is graded by two programs, each in a sandbox of its own
(:func:`qualgate.graders._sandbox.run_python`), joined by two pipes:

- **the completion's program** compiles ``prefix + "\\n" + completion`` as one module (when
  that is a SyntaxError, the completion is taken as the function's body: ``prefix + "\\n    "
  + completion``; a chat model answers a whole function, extractors strip a body's first
  indentation), runs it, and then serves its functions: it reads a call (the function's name,
  its arguments) as one JSON line and writes back one JSON line, the value returned or the
  exception raised (type name and message);
- **the tests' program** runs the question's ``prefix`` (trusted: the gold's, so a helper the
  tests use, such as HumanEval's ``poly`` or ``encode_cyclic``, is the question's and not the
  completion's redefinition), binds the entry point and every other function the completion
  defined to a proxy that sends the call down the pipe, then runs ``test`` and
  ``check(entry_point)`` (HumanEval's rule: ``prompt + completion + test + check(entry_point)``).
  Its verdict goes on a third pipe that only it holds.

The pipes carry **plain data only**: ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, of exactly those types (never
a subclass); the tests decode each reply into fresh objects of their own. So a returned object
cannot fake equality (an ``__eq__`` that is always true is not plain data: the call raises
``TypeError`` in the tests), nothing of the tests (their code, a marker, a frame, an object)
is in the completion's process for it to patch or read, and its exit code, output, threads,
signal handlers and ``atexit`` hooks decide nothing: **a completion influences its grade only
through what its functions return.** It passes when the tests' program reports that the tests
ran to their end. Arguments are copies: a function that mutates its argument in place is not
seen by the tests (HumanEval's functions return their results).

A completion that ends before the tests finished (``os._exit(0)``, a crash, a limit) is
``incorrect``, and the detail says why from the sandbox's report. The detail (at most 200
characters) carries the failing line of the tests and the exception's type and message; a
message (or type name) is shown only when each of its words is a word of the program, the
tests or Python's own messages, so text the completion read from the host (a file's content)
never reaches the records.

One module: extraction, the gold, both programs and the reading of their reports share the
protocol (the codec is the text both programs run); split, each part would import the others.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ._sandbox import Limits, Run, reserve_memory, run_python

__all__ = ["Verdict", "code", "code_block", "unit_tests", "unit_tests_gold"]

_PYTHON = {"python", "python3", "py", "py3"}
_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.#-]*)[^\n]*$")
_DETAIL = 200
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def code_block(text: str) -> str | None:
    """The content of the first fenced code block tagged Python (```` ```python ````, ``py``),
    else of the first untagged one; blocks in other languages are skipped. An unclosed last
    fence (output cut at ``max_tokens``) runs to the end of the text. ``None`` when no block.

    >>> code_block("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1'
    """
    lines = text.split("\n")
    blocks: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        body, i = [], i + 1
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith(fence[0] * len(fence)) and not s.strip(fence[0]):
                break
            body.append(lines[i])
            i += 1
        i += 1
        blocks.append((lang, "\n".join(body)))
    for wanted in (lambda lang: lang in _PYTHON, lambda lang: lang == ""):
        for lang, body in blocks:
            if wanted(lang) and body.strip():
                return body
    return None


def code(text: str) -> str | None:
    """:func:`code_block` when the text has a Python or untagged block, else the whole text.

    >>> code("def f():\\n    return 1\\n")
    'def f():\\n    return 1\\n'
    """
    found = code_block(text)
    if found is not None:
        return found
    return text if text.strip() else None


def unit_tests_gold(value: Mapping, **_) -> str:
    """The gold of a code question: canonical JSON of ``prefix`` (optional), ``test`` and
    ``entry_point`` (optional: without it the test is a script of its own, such as a list of
    ``assert`` lines). Raises ``ValueError`` on a malformed value.

    >>> unit_tests_gold({"test": "def check(c):\\n    assert c() == 1", "entry_point": "f"})
    '{"entry_point":"f","prefix":"","test":"def check(c):\\\\n    assert c() == 1"}'
    """
    if not isinstance(value, Mapping):
        raise ValueError(f"unit_tests gold needs columns prefix, test, entry_point; got {value!r}")
    unknown = sorted(set(value) - {"prefix", "test", "entry_point"})
    if unknown:
        raise ValueError(f"unknown unit_tests gold parts {unknown}; valid: entry_point, prefix, test")
    out = {}
    for key in ("entry_point", "prefix", "test"):
        v = value.get(key, "")
        if not isinstance(v, str):
            raise ValueError(f"{key} must be a string, got {v!r}")
        out[key] = v
    if not out["test"].strip():
        raise ValueError("the test code is empty")
    if out["entry_point"] and not _IDENTIFIER.fullmatch(out["entry_point"]):
        raise ValueError(f"entry_point must be a Python identifier, got {out['entry_point']!r}")
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class Verdict:
    """What a grader decided, and why (``detail``, one short line).

    ``outcome`` is ``correct``, ``incorrect``, or ``error`` (the grader could not decide:
    the sandbox itself failed). Truthy only when correct.
    """

    outcome: str
    detail: str

    def __bool__(self) -> bool:
        return self.outcome == "correct"


# Both programs share this codec: plain data as JSON, exact types only (never a subclass).
_CODEC = r"""
import json, os, sys
sys.set_int_max_str_digits(0)
def _qg_enc(v, depth=0):
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if depth > 200:
        raise ValueError("nested more than 200 levels")
    if t is list:
        return [_qg_enc(x, depth + 1) for x in v]
    if t is tuple or t is set or t is frozenset:
        return {{tuple: "t", set: "s", frozenset: "f"}[t]: [_qg_enc(x, depth + 1) for x in v]}
    if t is dict:
        return {"d": [[_qg_enc(k, depth + 1), _qg_enc(x, depth + 1)] for k, x in v.items()]}
    if t is bytes:
        return {"b": v.hex()}
    raise TypeError(t.__name__)
def _qg_dec(v, depth=0):
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if depth > 200:
        raise ValueError("nested more than 200 levels")
    if t is list:
        return [_qg_dec(x, depth + 1) for x in v]
    if t is dict and len(v) == 1:
        (tag, x), = v.items()
        if tag == "b" and type(x) is str:
            return bytes.fromhex(x)
        if type(x) is list:
            items = [_qg_dec(y, depth + 1) for y in x]
            if tag == "t":
                return tuple(items)
            if tag == "s":
                return set(items)
            if tag == "f":
                return frozenset(items)
            if tag == "d" and all(type(y) is list and len(y) == 2 for y in items):
                return {k: y for k, y in items}
    raise ValueError("not plain data")
"""

# The completion's program: the completion defines its functions, then answers calls on a
# pipe (one JSON line each way) until the pipe ends. Nothing of the tests is in it.
_SERVER = r"""
def _qualgate_serve(spec, req_fd, rep_fd):
    import builtins, linecache
    rep = os.fdopen(rep_fd, "w", encoding="ascii")
    req = os.fdopen(req_fd, "r", encoding="ascii")
    def send(obj):
        rep.write(json.dumps(obj) + "\n")
        rep.flush()
    def failure(exc):
        return {"type": type(exc).__name__[:80], "message": str(exc)[:500]}
    whole = spec["prefix"] + "\n" + spec["completion"]
    try:
        program = compile(whole, "<completion>", "exec")
    except SyntaxError as exc:
        try:
            program = compile(spec["prefix"] + "\n    " + spec["completion"], "<completion>", "exec")
        except SyntaxError:
            send({"load": "error"} | failure(exc))
            return
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(program, namespace)
    except BaseException as exc:
        send({"load": "error"} | failure(exc))
        return
    entry = spec["entry_point"]
    if entry and entry not in namespace:
        send({"load": "error", "type": "NameError", "message": f"the entry point {entry!r} is not defined"})
        return
    names = [n for n, v in namespace.items() if not n.startswith("__") and callable(v)]
    send({"load": "ok", "names": names})
    for line in req:
        msg = json.loads(line)
        try:
            result = namespace[msg["call"]](*_qg_dec(msg["args"]), **_qg_dec(msg["kwargs"]))
        except BaseException as exc:
            send({"raise": failure(exc)})
            continue
        try:
            send({"return": _qg_enc(result)})
        except (TypeError, ValueError) as exc:
            send({"unplain": str(exc)[:80]})
_qualgate_serve(_QG_SPEC, *_QG_FDS)
"""

# The tests' program: the prefix (trusted: the question's), proxies for the completion's
# functions, the tests; its verdict goes on a pipe only it holds.
_DRIVER = r"""
class _QGGone(Exception):
    pass
class _QGHarness(Exception):
    pass
def _qualgate_drive(spec, req_fd, rep_fd, verdict_fd):
    import builtins, linecache, traceback
    verdict = os.fdopen(verdict_fd, "w", encoding="utf-8")
    req = os.fdopen(req_fd, "w", encoding="ascii")
    rep = os.fdopen(rep_fd, "rb")
    def report(obj):
        verdict.write(json.dumps(obj) + "\n")
        verdict.flush()
    def receive():
        line = rep.readline(_QG_REPLY_BYTES + 1)
        if not line.endswith(b"\n"):
            raise _QGGone("too large" if len(line) > _QG_REPLY_BYTES else "")
        msg = json.loads(line)
        if type(msg) is not dict:
            raise ValueError("not an object")
        return msg
    def compiled(text, name):
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        return compile(text, name, "exec")
    try:
        hello = receive()
    except _QGGone as exc:
        return report({"failed": "gone", "why": str(exc)})
    except ValueError:
        return report({"failed": "garbled"})
    if hello.get("load") != "ok":
        return report({"failed": "load", "type": str(hello.get("type")), "message": str(hello.get("message"))})
    names = hello.get("names")
    if type(names) is not list or not all(type(n) is str and n.isidentifier() for n in names):
        return report({"failed": "garbled"})
    remote = {}
    def proxy(name):
        def call(*args, **kwargs):
            try:
                line = json.dumps({"call": name, "args": _qg_enc(list(args)), "kwargs": _qg_enc(kwargs)})
            except (TypeError, ValueError) as exc:
                raise _QGHarness(f"the tests pass {name} a value that is not plain data ({exc})") from None
            try:
                req.write(line + "\n")
                req.flush()
            except OSError:
                raise _QGGone("") from None
            try:
                msg = receive()
                if "return" in msg:
                    return _qg_dec(msg["return"])
            except ValueError:
                raise _QGGone("garbled") from None
            if type(msg.get("raise")) is dict:
                kind = str(msg["raise"].get("type"))
                cls = getattr(builtins, kind, None)
                if not (isinstance(cls, type) and issubclass(cls, Exception)) or cls is StopIteration:
                    cls = RuntimeError
                exc = cls(str(msg["raise"].get("message")))
                remote[id(exc)] = (kind, str(msg["raise"].get("message")))
                raise exc
            if "unplain" in msg:
                exc = TypeError("returned a value that is not plain data")
                remote[id(exc)] = ("not plain data", str(msg["unplain"]))
                raise exc
            raise _QGGone("garbled")
        call.__name__ = call.__qualname__ = name
        return call
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for text in (spec["prefix"], spec["prefix"] + "\n    pass\n"):
        try:
            prefix = compiled(text, "<prefix>")
        except SyntaxError:
            continue
        exec(prefix, namespace)
        break
    own = set(namespace)
    entry = spec["entry_point"]
    for name in names:
        if name not in own or name == entry:
            namespace[name] = proxy(name)
    try:
        exec(compiled(spec["test"], "<tests>"), namespace)
        if entry:
            namespace["check"](namespace[entry])
    except _QGGone as exc:
        return report({"failed": "gone", "why": str(exc)})
    except _QGHarness as exc:
        return report({"failed": "harness", "message": str(exc)})
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<tests>"]
        line = (frames[-1].line or "").strip() if frames else ""
        kind, message = remote.get(id(exc), (type(exc).__name__, str(exc)))
        return report({"failed": "test", "type": kind, "message": message[:500], "line": line[:500],
                       "remote": id(exc) in remote})
    report({"passed": True})
_qualgate_drive(_QG_SPEC, *_QG_FDS)
"""
#: the largest reply the tests read from the completion's function (bytes of one JSON line)
REPLY_BYTES = 16 << 20


def unit_tests(
    pred: str,
    gold: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    output_kb: int = 1024,
    disk_mb: int = 64,
    nproc: int = 16,
) -> Verdict:
    """Run the completion ``pred`` with the tests of ``gold`` (:func:`unit_tests_gold`): the
    completion in one sandbox, the tests in another, calling its functions through pipes that
    carry plain data (module docstring); each sandbox with these limits
    (:class:`~qualgate.graders._sandbox.Limits`; the CPU-time limit equals ``timeout_s``).
    Never raises for what the completion does.
    """
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb, output_kb=output_kb, disk_mb=disk_mb, nproc=nproc)
    try:
        spec = json.loads(gold)
        spec = {k: spec[k] for k in ("prefix", "test", "entry_point")}
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"unit_tests: gold is not a unit_tests_gold document ({exc})") from None
    known = "\n".join((pred, spec["prefix"], spec["test"], spec["entry_point"]))
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    ver_r, ver_w = os.pipe()
    stop_r, stop_w = os.pipe()
    server_src = f"_QG_SPEC = {ascii(dict(spec, completion=pred))}\n_QG_FDS = ({req_r}, {rep_w})\n" + _CODEC + _SERVER
    driver_src = (
        f"_QG_SPEC = {ascii(spec)}\n_QG_FDS = ({req_w}, {rep_r}, {ver_w})\n_QG_REPLY_BYTES = {REPLY_BYTES}\n"
        + _CODEC
        + _DRIVER
    )
    runs: dict = {}

    def serve():
        runs["server"] = run_python(server_src, limits, pass_fds=(req_r, rep_w), stop_fd=stop_r, budget=False)

    try:
        with reserve_memory(2 * memory_mb):
            server = threading.Thread(target=serve, daemon=True)
            server.start()
            try:
                driver = run_python(driver_src, limits, pass_fds=(req_w, rep_r, ver_w), budget=False)
            finally:
                os.close(stop_w)
                stop_w = None
                server.join()
        report = _read_verdict(ver_r)
    finally:
        for fd in (ver_r, stop_r, stop_w):
            if fd is not None:
                os.close(fd)
    return _decide(report, driver, runs["server"], limits, known)


def _read_verdict(fd: int) -> dict | None:
    """The tests' verdict line (the driver and all its processes have ended: EOF is near)."""
    import selectors

    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while len(buf) <= 65536 and sel.select(timeout=1.0):
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
    try:
        msg = json.loads(buf.split(b"\n")[0])
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _decide(report: dict | None, driver: Run, server: Run, limits: Limits, known: str) -> Verdict:
    """The grade from the tests' report, the completion's run telling why it ended early."""
    for run in (driver, server):
        if run.status == "sandbox_error":
            return Verdict("error", _short(f"sandbox error: {run.error}"))
    if report is not None and report.get("passed") is True and driver.status == "exited" and driver.exit_code == 0:
        return Verdict("correct", "passed")
    failed = (report or {}).get("failed")
    if failed == "harness":
        return Verdict("error", _short(f"the tests cannot run: {_clean(str(report.get('message')), known)}"))
    limit = _limit(report, limits)
    if limit:
        return Verdict("incorrect", limit)
    if failed == "test":
        kind, message, line = (str(report.get(k)) for k in ("type", "message", "line"))
        if kind == "AssertionError" and not report.get("remote"):
            where = f": {line}" if line else ""
            shown = f" ({message})" if message and message in known else ""
            return Verdict("incorrect", _short(f"failed assertion{where}{shown}"))
        return Verdict(
            "incorrect", _short(f"exception: {_exception(kind, message, known)}" + (f" at: {line}" if line else ""))
        )
    if failed == "load":
        return Verdict(
            "incorrect", _short(f"exception: {_exception(str(report.get('type')), str(report.get('message')), known)}")
        )
    if failed == "garbled":
        return Verdict("incorrect", "the completion's process sent something other than its function's answer")
    if driver.status == "timeout" or server.status == "timeout":
        return Verdict("incorrect", f"timeout: still running after {limits.timeout_s:g} s wall clock")
    if failed == "gone" or server.status != "stopped":
        why = (report or {}).get("why")
        if why == "too large":
            return Verdict("incorrect", f"the function's answer is larger than {REPLY_BYTES >> 20} MiB")
        return _ended(server, limits, known)
    return Verdict(
        "incorrect", _short(f"the tests ended without a verdict ({driver.status}, exit code {driver.exit_code})")
    )


def _ended(run: Run, limits: Limits, known: str) -> Verdict:
    """Why the completion's process ended before the tests finished."""
    if run.status == "memory_limit":
        return Verdict("incorrect", f"memory limit: its processes together passed {limits.memory_mb} MiB")
    if run.status == "output_limit":
        return Verdict("incorrect", f"output limit: more than {limits.output_kb} KiB of output")
    code = run.exit_code
    if run.status != "exited" or code is None:
        return Verdict("incorrect", "the completion's process ended before the tests finished")
    if code == 0:
        return Verdict("incorrect", "exit code 0 before the tests finished")
    if code < 0:
        sig = -code
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and (run.cpu_s or 0) >= limits.cpu - 0.05):
            return Verdict("incorrect", f"CPU time limit: {limits.cpu} s")
        if sig == signal.SIGXFSZ:
            return Verdict("incorrect", f"file size limit: {limits.disk_mb} MiB")
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return Verdict("incorrect", f"killed by {name}")
    return Verdict("incorrect", f"exit code {code} before the tests finished")


def _limit(report: dict | None, limits: Limits) -> str | None:
    """The limit an exception of the completion's says it met, else None."""
    if not report or report.get("failed") not in ("test", "load") or report.get("type") == "AssertionError":
        return None
    kind, message = str(report.get("type")), str(report.get("message"))
    if "[Errno 27]" in message:  # EFBIG: Python ignores SIGXFSZ, so the write fails
        return f"file size limit: {limits.disk_mb} MiB"
    if "[Errno 28]" in message:  # ENOSPC: the sandbox's tmpfs is full
        return f"disk limit: no space left in {limits.disk_mb} MiB"
    if kind == "MemoryError":
        return f"memory limit: MemoryError ({limits.memory_mb} MiB address space)"
    return None


def _exception(kind: str, message: str, known: str) -> str:
    """``Type: message``, each part only when it holds nothing but words of the program, its
    tests or Python's own messages (text the completion read from the host is withheld)."""
    shown = _clean(kind, known)
    text = _clean(message, known)
    return f"{shown}: {text}" if text else shown


#: words of Python's own error messages (besides those of the program and its tests)
_PYTHON_WORDS = frozenset(
    """name not defined object has attribute index out range invalid syntax division zero unsupported
    operand type types for and int str list tuple dict float NoneType bool bytes set expected argument
    arguments positional takes but were given was missing required keyword unexpected got can only
    concatenate must real number literal with base subscriptable iterable callable support item
    assignment key too many values unpack enough module named math maximum recursion depth exceeded
    comparison while calling line indent unindent does match any outer indentation level block after
    function definition never closed unterminated string perhaps you forgot comma did mean empty
    sequence arg the Errno Read only file system directory such Permission denied Operation permitted
    space left device large Network unreachable Bad address Resource temporarily unavailable can't
    start new thread convert from into has no non are instance instances returned value that plain
    data entry point this the tests finished identifier character completion prefix program decimal
    triple quoted unexpected unmatched opening parenthesis bracket cannot assign expression statement
    EOF scanning parsing print Missing parentheses call""".split()
) | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _clean(text: str, known: str) -> str:
    """``text`` when each of its words (3 or more letters or digits) is one of the program's,
    its tests' or Python's messages', or a number of at most 3 digits (an errno); else a note
    that it was withheld."""
    words = set(re.findall(r"[A-Za-z0-9_]{3,}", text))
    vocabulary = _PYTHON_WORDS | set(re.findall(r"[A-Za-z0-9_]{3,}", known))
    if any(w not in vocabulary and w.lower() not in vocabulary and not (w.isdigit() and len(w) <= 3) for w in words):
        return "(message withheld: it holds text that is not in the program or its tests)"
    return text


def _short(text: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= _DETAIL else text[: _DETAIL - 3] + "..."
