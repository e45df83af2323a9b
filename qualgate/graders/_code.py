"""Code answers: the program in a model's text, and grading it by running unit tests.

``code_block`` and ``code`` are extractors (:data:`qualgate.graders.EXTRACTORS`),
``unit_tests`` is a grader (:data:`~qualgate.graders.GRADERS`) and a gold parser
(:data:`~qualgate.graders.GOLD_PARSERS`). The gold of a code question is a JSON object
(:func:`unit_tests_gold`) with the program's ``prefix`` (HumanEval's prompt: imports, the
signature and docstring), the ``test`` code and the ``entry_point``.

A completion passes when this program, run by :func:`qualgate.graders._sandbox.run_python`,
ends normally after the tests ran::

    prefix + "\\n" + completion       # as one module; when that is a SyntaxError, the completion
                                     # is taken as the function's body: prefix + "\\n    " + ...
    test                             # in the same namespace
    check(entry_point)               # when the gold names an entry point

That is HumanEval's rule (``prompt + completion + "\\n" + test + "\\n" + check(entry_point)``),
read so that a whole function (what chat models answer), a whole program that repeats the
prompt, and a bare body all work; extractors strip the answer, so a body's first line has
lost its indentation, which the second reading restores. After the tests the program prints
a marker with a random nonce; exit code 0 without it (``sys.exit(0)``, ``os._exit(0)`` in the
completion, an ``atexit`` hook) is ``incorrect``. This cannot stop a completion written to
defeat the grader (it runs in the same interpreter before the tests, and can find the nonce
in its caller's frame); it stops the ordinary ways a program ends early.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
from collections.abc import Mapping
from dataclasses import dataclass

from ._sandbox import Limits, Run, run_python

__all__ = ["Verdict", "code", "code_block", "unit_tests", "unit_tests_gold", "verdict"]

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


# The driver is the program the sandbox runs; _QG_SPEC and _QG_MARKER are prepended.
_DRIVER = r"""
def _qualgate_main(spec, marker):
    import builtins, linecache, os, sys
    def compiled(text, name):
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        return compile(text, name, "exec")
    whole = spec["prefix"] + "\n" + spec["completion"]
    try:
        program = compiled(whole, "<completion>")
    except SyntaxError as exc:
        try:
            program = compiled(spec["prefix"] + "\n    " + spec["completion"], "<completion>")
        except SyntaxError:
            linecache.cache["<completion>"] = (len(whole), None, whole.splitlines(True), "<completion>")
            raise exc from None
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    exec(program, namespace)
    exec(compiled(spec["test"], "<tests>"), namespace)
    entry = spec["entry_point"]
    if entry:
        if entry not in namespace:
            raise NameError(f"the entry point {entry!r} is not defined")
        namespace["check"](namespace[entry])
    sys.stdout.flush()
    os.write(1, ("\n" + marker + "\n").encode())
try:
    _qualgate_main(_QG_SPEC, _QG_MARKER)
except Exception:  # printed by traceback, which reads the source lines from linecache
    import sys, traceback
    traceback.print_exc()
    sys.exit(1)
"""


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
    """Run the completion ``pred`` with the tests of ``gold`` (:func:`unit_tests_gold`) in the
    sandbox, with these limits (:class:`~qualgate.graders._sandbox.Limits`; the CPU-time
    limit equals ``timeout_s``). Never raises for what the completion does.
    """
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb, output_kb=output_kb, disk_mb=disk_mb, nproc=nproc)
    try:
        spec = json.loads(gold)
        spec = {k: spec[k] for k in ("prefix", "test", "entry_point")}
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"unit_tests: gold is not a unit_tests_gold document ({exc})") from None
    spec["completion"] = pred
    marker = "qualgate-tests-passed-" + secrets.token_hex(16)
    source = f"_QG_SPEC = {ascii(spec)}\n_QG_MARKER = {marker!r}\n{_DRIVER}"
    return verdict(run_python(source, limits), limits, marker)


def verdict(run: Run, limits: Limits, marker: str) -> Verdict:
    """Read a sandbox :class:`~qualgate.graders._sandbox.Run` of the test driver."""
    if run.status == "sandbox_error":
        return Verdict("error", _short(f"sandbox error: {run.error}"))
    if run.status == "timeout":
        return Verdict("incorrect", f"timeout: still running after {limits.timeout_s:g} s wall clock")
    if run.status == "output_limit":
        return Verdict("incorrect", f"output limit: more than {limits.output_kb} KiB of output")
    code = run.exit_code
    if code == 0:
        if marker in run.stdout:
            return Verdict("correct", "passed")
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
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    if "[Errno 27]" in last:  # EFBIG: Python ignores SIGXFSZ, so the write fails
        return Verdict("incorrect", f"file size limit: {limits.disk_mb} MiB")
    if "[Errno 28]" in last:  # ENOSPC: the sandbox's tmpfs is full
        return Verdict("incorrect", f"disk limit: no space left in {limits.disk_mb} MiB")
    if last.startswith("MemoryError"):
        return Verdict("incorrect", f"memory limit: MemoryError ({limits.memory_mb} MiB address space)")
    if last.startswith("AssertionError"):
        where = ""
        source = [line.strip() for line in lines[:-1] if line.strip().strip("^~")]  # no carets
        if source and not source[-1].startswith("File "):
            where = ": " + source[-1]
        message = last[len("AssertionError") :].lstrip(": ")
        return Verdict("incorrect", _short(f"failed assertion{where}" + (f" ({message})" if message else "")))
    if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b", last):
        return Verdict("incorrect", _short(f"exception: {last}"))
    return Verdict("incorrect", f"exit code {code}")


def _short(text: str) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= _DETAIL else text[: _DETAIL - 3] + "..."
