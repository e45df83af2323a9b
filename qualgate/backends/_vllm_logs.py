"""Capturing the warnings vLLM logs while an engine is built and run (:mod:`.vllm`).

vLLM logs the FLy and scheduler warnings that the manifest must record through loggers whose
handlers ``LLM.__init__`` removes (see :func:`_tap`), so they are taken from a log-record
factory instead: :class:`capturing` installs it once per process and collects, for the
duration of a block, the distinct messages of vLLM's warnings into a :class:`Capture`.
"""

from __future__ import annotations

import logging

__all__ = ["Capture", "capturing"]


class Capture:
    """The distinct messages of vLLM's warnings seen while a :class:`capturing` block ran."""

    def __init__(self):
        self.messages: list[str] = []

    def add(self, record) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed log call must not break generation
            msg = str(record.msg)
        if msg not in self.messages:
            self.messages.append(msg)


_ACTIVE: list[Capture] = []


def _tap(factory):
    """A log-record factory that passes vLLM's warnings to the active captures.

    ``LLM.__init__`` re-applies vLLM's logging config with ``dictConfig``, which removes
    the handlers of the ``vllm`` logger *and of all its children*, before the config is
    validated, so no handler attached beforehand sees the FLy or scheduler warning. The
    record factory is not touched by ``dictConfig`` (vLLM wraps it, keeping ours inside
    as ``_factory``).
    """

    def make(*args, **kwargs):
        record = factory(*args, **kwargs)
        if _ACTIVE and record.levelno >= logging.WARNING and record.name.split(".")[0] == "vllm":
            for capture in _ACTIVE:
                capture.add(record)
        return record

    make._qualgate_tap = True
    make._factory = factory
    return make


class capturing:
    """Collect vLLM's warnings into a :class:`Capture` for the duration of a block."""

    def __init__(self, capture: Capture):
        self.capture = capture

    def __enter__(self):
        f = logging.getLogRecordFactory()
        while f is not None and not getattr(f, "_qualgate_tap", False):
            f = getattr(f, "_factory", None)
        if f is None:  # installed once per process; a pass-through when nothing captures
            logging.setLogRecordFactory(_tap(logging.getLogRecordFactory()))
        _ACTIVE.append(self.capture)
        return self.capture

    def __exit__(self, *exc):
        _ACTIVE.remove(self.capture)
        return False
