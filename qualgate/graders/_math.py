r"""Mathematical equivalence with ``math-verify``, under a time limit that works in any thread.

``math-verify`` guards its own parsing and comparison with ``signal.alarm``, which works only
in the main thread (elsewhere it raises). Its own limits are switched off here and replaced by
:func:`run_limited`:

- in the main thread (POSIX), a ``SIGALRM`` interval timer (``setitimer``, so sub-second
  limits work) raises an exception derived from ``BaseException`` (so that library code that
  catches ``Exception`` cannot swallow it), re-firing every 50 ms until the call has unwound.
  Any timer set by someone else (e.g. pytest-timeout) is restored afterwards. CPython checks
  signals inside long integer arithmetic as well, so ``10^{10^{10}}`` is interrupted too;
- in any other thread, the comparison runs in a helper process (one per thread, started on
  first use, about half a second to import ``math-verify``), which is killed and replaced
  when it runs past the limit. Per comparison this costs a round trip through a pipe.

A timeout or a parse failure makes the comparison ``False`` (an extracted but unverifiable
answer is incorrect, never an exception and never a hang).

Before math-verify sees an answer, what it cannot read is rewritten (:func:`plain_answer`):
ordinals (``12^{\mathrm{th}} \text{ grade}`` is 12) and numbers in words (``\text{three
boxes}`` is 3). With ``canonical=True`` and the problem's text, equivalence is not enough
where the problem demands a form (:func:`canonical_ok`).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from functools import lru_cache
from pathlib import Path

__all__ = ["canonical_ok", "math_verify", "plain_answer", "run_limited"]

log = logging.getLogger("qualgate.graders")

#: Answers longer than this are compared as text only (no legitimate final answer is this long,
#: and the regular expressions of the parser are not linear on every input).
MAX_ANSWER_CHARS = 2000
_MODES = ("auto", "signal", "process")
#: Seconds a helper process may take to start (import math-verify) before grading fails.
STARTUP_TIMEOUT_S = 120.0


class _Expired(BaseException):
    """Raised by the SIGALRM handler inside the limited call."""


# A number written in a base, e.g. 52_8 or 4210_{5}: math-verify drops the subscript.
_IN_BASE = re.compile(r"\s*([0-9A-Za-z]+)\s*_\s*\{?\s*(\d+)\s*\}?\s*")


def _squash(s: str) -> str:
    return "".join(s.split())


# 12^{\mathrm{th}}, 12^{th}, 12^\text{nd}, 12th: the ordinal suffix goes.
_ORDINAL = re.compile(
    r"(\d)\s*(?:\^\s*\{?\s*(?:\\(?:mathrm|text|textrm|rm)\s*\{\s*)?(?:st|nd|rd|th)\s*\}?\s*\}?"
    r"|(?:st|nd|rd|th)\b)"
)
_TEXT_ONLY = re.compile(r"\s*(?:\\(?:text|mbox|mathrm|textrm)\s*\{([^{}]*)\}\s*)+")


def plain_answer(text: str) -> str:
    r"""``text`` with what math-verify cannot read made readable; otherwise unchanged.

    An ordinal suffix after a number goes (``12^{\mathrm{th}} \text{ grade}`` becomes
    ``12 \text{ grade}``, which math-verify reads as 12, dropping the text unit); an answer
    that is only text and starts with a number in words becomes that number (``\text{three
    boxes}`` becomes ``3``).

    >>> plain_answer(r"12^{\mathrm{th}} \text{ grade}"), plain_answer(r"\text{Three}")
    ('12 \\text{ grade}', '3')
    """
    from ._numbers import words_to_number

    out = _ORDINAL.sub(r"\1", text) if any(c.isdigit() for c in text) else text
    if not any(c.isdigit() for c in out):
        inner = " ".join(_TEXT_ONLY.fullmatch(out).groups("")) if _TEXT_ONLY.fullmatch(out) else out
        if inner.replace(" ", "").isalpha() or "-" in inner:
            n = words_to_number(inner)
            if n is not None:
                return str(n)
    return out


# --- the canonical form a problem demands --------------------------------------------------

_SIMPLIFY = re.compile(r"\bsimplif(?:y|ied|ication)\b", re.IGNORECASE)
_GCD = re.compile(r"\\gcd|\bgcd\b|greatest common divisor", re.IGNORECASE)
_IGNORED = {"left", "right", "displaystyle", "text", "mathrm", "mbox", "textbf"}
_TOKEN = re.compile(r"\\([A-Za-z]+)|\d+(?:\.\d+)?|[A-Za-z]|[-+*/^=<>]")
_TERM = re.compile(r"([-+]?)\s*(\d*)\s*(?:\\cdot\s*)?([a-z]?)")


def _size(latex: str) -> int:
    """Tokens of a LaTeX answer: commands (not \\left, \\text...), numbers, letters, operators."""
    n = 0
    for m in _TOKEN.finditer(latex):
        n += m.group(1) not in _IGNORED if m.group(1) else 1
    return n


def _linear(equation: str) -> dict[str, int] | None:
    """Integer coefficients of ``lhs - rhs`` of a linear equation (``2x - y + 3z + 8 = 0``)."""
    sides = _squash(equation).replace("\\cdot", "").split("=")
    if len(sides) != 2 or not all(sides):
        return None
    coefficients: dict[str, int] = {}
    for sign_of_side, side in zip((1, -1), sides):
        at = 0
        while at < len(side):
            m = _TERM.match(side, at)
            if m is None or m.end() == at or (not m.group(2) and not m.group(3)):
                return None
            value = int(m.group(2)) if m.group(2) else 1
            value *= -1 if m.group(1) == "-" else 1
            coefficients[m.group(3)] = coefficients.get(m.group(3), 0) + sign_of_side * value
            at = m.end()
    return {k: v for k, v in coefficients.items() if v}


def _same_number(pred: str, gold: str) -> bool | None:
    """Two plain numbers, compared exactly without math-verify; ``None`` if not both plain.

    Equal values are equal; two different integers are not (math-verify compares numbers
    after rounding, which cannot make different integers equal). A decimal that differs from
    a fraction is left to math-verify. Texts with commas (lists, intervals) are not numbers
    here.
    """
    if "," in pred or "," in gold:
        return None
    from ._numbers import to_number

    a, b = to_number(pred, whole=True), to_number(gold, whole=True)
    if a is None or b is None:
        return None
    if a == b:
        return True
    if a.denominator == b.denominator == 1 and "." not in pred + gold:
        return False
    return None


def canonical_ok(pred: str, gold: str, problem: str) -> bool:
    r"""Whether ``pred`` has the form ``problem`` demands, judged against ``gold``'s form.

    Two demands are recognised, from the problem's words:

    - "gcd" / "greatest common divisor" with a linear equation as gold (MATH's "Enter your
      answer in the form Ax + By + Cz + D = 0, where ... A > 0 and gcd(|A|,|B|,|C|,|D|) = 1"):
      ``pred`` must be a linear equation with the same integer coefficients as the gold, on
      either side (a multiple such as ``4x + 2y = 6`` for ``2x + y - 3 = 0`` is not);
    - "simplify": ``pred`` may not be longer than the gold, counted in LaTeX tokens
      (commands, numbers, letters, operators), so ``\frac{\cos x}{\sin x}`` for ``\cot x``
      and an unexpanded product are refused.

    Limits: the length test is a proxy. It accepts an equally long unsimplified form
    (``\sqrt{8}`` for ``2\sqrt{2}``, ``\frac{1}{\sqrt{3}}`` for ``\frac{\sqrt{3}}{3}``) and
    refuses a longer but simplified way of writing the gold; other demands ("rationalize the
    denominator", "in lowest terms", "in base 7") are not checked here. Every other problem is
    ``True``.
    """
    if _GCD.search(problem) and "=" in gold:
        want = _linear(gold)
        if want is not None:
            return _linear(pred) == want
    if _SIMPLIFY.search(problem):
        return _size(pred) <= _size(gold)
    return True


def math_verify(
    pred: str,
    gold: str,
    *,
    timeout_s: float = 5.0,
    mode: str = "auto",
    canonical: bool = False,
    problem: str | None = None,
) -> bool:
    r"""Whether ``pred`` and ``gold`` are mathematically equivalent, per ``math-verify``.

    Both are read as the content of a ``\boxed{}`` (LaTeX first, then a plain expression);
    identical strings (ignoring whitespace) are equal without parsing. Two numbers written
    in a base (``52_8``) are equal only if digits and base agree (math-verify drops the
    subscript). Inherited from math-verify: numbers are compared after rounding to 6
    decimals, and text units (``\mbox{ cm}``) are dropped. The parse of both and
    the comparison together get ``timeout_s`` seconds; ``mode`` picks the limit mechanism
    (``'auto'``: a signal timer in the main thread, a helper process elsewhere). ``pred`` is
    first made readable by :func:`plain_answer`. With ``canonical`` and the ``problem`` text
    (given by the suite), an equivalent answer must also pass :func:`canonical_ok`.

    >>> math_verify(r"\frac{1}{2}", "0.5"), math_verify("x^2+2x+1", "(x+1)^2")
    (True, True)
    """
    if not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if canonical and problem and not canonical_ok(pred, gold, problem):
        return False
    pred = plain_answer(pred)
    if _squash(pred) == _squash(gold):
        return bool(_squash(pred))
    same = _same_number(pred, gold)
    if same is not None:
        return same
    if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return False
    in_base = _IN_BASE.fullmatch(pred), _IN_BASE.fullmatch(gold)
    if all(in_base):  # digits and base must both agree (math-verify ignores the base)
        return in_base[0].group(1).upper() == in_base[1].group(1).upper() and int(in_base[0].group(2)) == int(
            in_base[1].group(2)
        )
    result = run_limited(pred, gold, timeout_s, mode=mode)
    if result is None:
        log.warning("math-verify comparison ran past %.3g s; graded as not equal", timeout_s)
        return False
    return result


def run_limited(pred: str, gold: str, timeout_s: float, *, mode: str = "auto") -> bool | None:
    """``_equivalent(pred, gold)`` under a time limit; ``None`` when the limit was reached."""
    if mode == "auto":
        in_main = threading.current_thread() is threading.main_thread()
        mode = "signal" if in_main and hasattr(signal, "setitimer") else "process"
    if mode == "signal":
        return _run_with_alarm(pred, gold, timeout_s)
    return _worker().call(pred, gold, timeout_s)


# --- the comparison itself (runs in-process or in the helper process) -----------------------


@lru_cache(maxsize=1)
def _mv():
    import math_verify.grader
    import math_verify.parser

    # Their own signal timers are off (we limit the call ourselves); silence the one-time
    # warning that says so.
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    config = (
        math_verify.LatexExtractionConfig(boxed_match_priority=0),
        math_verify.ExprExtractionConfig(),
    )
    return math_verify, config


def _parse(text: str):
    mv, config = _mv()
    return mv.parse("\\boxed{" + text + "}", extraction_config=config, parsing_timeout=None)


@lru_cache(maxsize=4096)
def _parse_gold(text: str):
    """Gold answers repeat (every sample of a question): parse each once per process."""
    return _parse(text)


def _equivalent(pred: str, gold: str) -> bool:
    mv, _ = _mv()
    g = _parse_gold(gold)
    p = _parse(pred)
    if not g or not p:
        return False
    return bool(mv.verify(g, p, timeout_seconds=None))


# --- main thread: SIGALRM ------------------------------------------------------------------

_alarm = threading.local()


def _on_alarm(signum, frame):
    if getattr(_alarm, "armed", False):
        raise _Expired


def _disarm() -> None:
    while True:  # the handler may fire once more while we disarm; keep going until it is off
        try:
            _alarm.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        except _Expired:
            continue


def _run_with_alarm(pred: str, gold: str, timeout_s: float) -> bool | None:
    _mv()  # importing math-verify (seconds on a loaded machine) is not part of the limit
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    started = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        try:
            _alarm.armed = True
            signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.05)
            try:
                return _equivalent(pred, gold)
            finally:
                _disarm()
        except _Expired:
            _disarm()
            return None
        except Exception:  # a parser failure is "not equal", never an exception
            log.debug("math-verify failed", exc_info=True)
            return False
    finally:
        _disarm()
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:
            remaining = max(old_delay - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, old_interval)


# --- other threads: a helper process per thread ---------------------------------------------

_workers: weakref.WeakSet = weakref.WeakSet()
_local = threading.local()


class _Worker:
    """A child ``python -m qualgate.graders._math`` answering one JSON line per request."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "qualgate.graders._math"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        _workers.add(self)
        # Importing math-verify is not part of any comparison's time limit.
        if self._read_line(STARTUP_TIMEOUT_S) != b"ready\n":
            self.close()
            raise RuntimeError("the math-verify helper process did not start")

    def _read_line(self, timeout_s: float) -> bytes | None:
        """One line from the child; None on timeout or if the child died."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        buf = b""
        while not buf.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            buf += chunk
        return buf

    def call(self, pred: str, gold: str, timeout_s: float) -> bool | None:
        try:
            self.proc.stdin.write(json.dumps([pred, gold]).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            self.close()
            return False
        line = self._read_line(timeout_s)
        if line is None:  # past the limit, or the child died (e.g. out of memory)
            died = self.proc.poll() is not None
            self.close()
            return False if died else None
        return line == b"true\n"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if getattr(_local, "worker", None) is self:
            _local.worker = None

    def __del__(self):
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.kill()


def _worker() -> _Worker:
    worker = getattr(_local, "worker", None)
    if worker is None or worker.proc.poll() is not None:
        worker = _local.worker = _Worker()
    return worker


@atexit.register
def _close_workers() -> None:
    for worker in list(_workers):
        worker.close()


def _serve() -> None:
    """Child side: read ``[pred, gold]`` lines, answer ``true``/``false`` lines."""
    out = sys.stdout.buffer
    _mv()
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        pred, gold = json.loads(line)
        try:
            equal = _equivalent(pred, gold)
        except Exception:
            equal = False
        out.write(b"true\n" if equal else b"false\n")
        out.flush()


if __name__ == "__main__":
    _serve()
