"""Errors and the exit codes of the command line, decided in one place.

Library code raises :class:`DataError` for invalid data or configuration (a records file,
a suite or config YAML, a published table) and plain :class:`ValueError` for invalid
arguments. The CLI maps them to exit codes in :mod:`qualgate.cli`.
"""

from __future__ import annotations

import enum
import reprlib

__all__ = ["DataError", "ExitCode"]


class ExitCode(enum.IntEnum):
    """Exit codes of every ``qualgate`` command."""

    OK = 0  #: success, gate PASS, nothing found
    FAIL = 1  #: gate FAIL, findings at or above the threshold, evidence refused
    USAGE = 2  #: bad command line or argument value
    DATA = 3  #: invalid data or configuration (file, line, field, value named)
    INCONCLUSIVE = 4  #: the gate could not decide with the evidence given
    INTERRUPTED = 130  #: stopped by Ctrl-C (SIGINT), 128 + 2 as shells report it; what was written is kept


class DataError(ValueError):
    """Invalid data or configuration.

    The message names where the problem is: ``file``, ``line`` and ``field`` when known, and
    the offending ``value``.
    """

    def __init__(self, message: str, *, file=None, line=None, field=None, value=None):
        self.file, self.line, self.field, self.value = file, line, field, value
        self.message = message
        where = ""
        if file is not None:
            where = f"{file}"
            if line is not None:
                where += f":{line}"
            where += ": "
        what = ""
        if field is not None:
            what = f"field {field!r}"
            if value is not None:
                what += f" = {self.show_value(value)}"
            what += ": "
        super().__init__(f"{where}{what}{message}")

    @classmethod
    def show_value(cls, value) -> str:
        """How the message shows the offending value: its repr, cut when long (a subclass for
        JSON input shows it as JSON)."""
        return _preview(value)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 80, 80, 40


def _preview(value) -> str:
    """The repr of an offending value, cut when long (a 100 MB string, a 5,000-level list)."""
    if isinstance(value, (str, bytes)) and len(value) > 200:
        return _REPR.repr(value)
    try:
        text = repr(value)
    except RecursionError:
        return _REPR.repr(value)
    return text if len(text) <= 200 else _REPR.repr(value)
