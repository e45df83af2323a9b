"""``qualgate audit-log``: what a vLLM server actually ran, read from its log.

A deployment can drift from its reviewed config without anyone editing the config file (a
changed image default, an override in a launcher script). The server log says what ran:

vLLM 0.33 writes ``(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [FILE:LINE] message`` (rule
``log-format`` of :mod:`qualgate.vllm033.rules`; a multi-line message repeats the prefix on every
line). qualgate reads:

- the one-time FLy warning (:data:`~qualgate.vllm033.speculative.FLY_LOSSY_WARNING`, a WARNING from
  ``speculative.py``; rule ``fly-warning``);
- the scheduler override "... Overriding max_num_active_seqs from A to B." (a WARNING from
  ``vllm.py``; dflash/dspark drafters cap running requests at ``max_num_batched_tokens //
  num_lookahead_tokens``; rule ``override-line``);
- speculative-config echoes: ``non-default args: {...}`` (rule ``log-non-default-args``:
  ``vllm serve``'s parsed arguments, including the ``speculative_config`` dict and any
  ``spec_method``/``spec_model``/``spec_tokens``, from which the config id is computed when
  the model is named too) and ``speculative_config=SpeculativeConfig(method=..., model=...,
  num_spec_tokens=...)`` in the engine's "Initializing a V1 LLM engine" line (rule
  ``log-engine-config``);
- the vLLM version and model: "vLLM server version X, serving model M" or the logo's
  "version X" / "model M" lines (rule ``log-version``), or the engine line's ``(vX)``.

Every event carries its 1-based line number, and the level and source file of its prefix
when the line has vLLM's prefix. A log may hold several server starts.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualgate.config.decoding import IDENTITY_OPTIONS, config_id
from qualgate.errors import DataError
from qualgate.records.strict import read_bytes
from qualgate.vllm033.arguments import identity_arguments
from qualgate.vllm033.rules import rule
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING, LOSSLESS_METHODS, normalise_speculative

__all__ = ["AuditEvent", "AuditReport", "audit_log", "audit_text"]

_OVERRIDE = re.compile(r"Overriding max_num_active_seqs from (\d+) to (\d+)")
_ARGS = re.compile(r"non-default args: (\{.*\})\s*$")
_ENGINE_SPEC = re.compile(
    r"speculative_config=SpeculativeConfig\(method=('[^']*'|None), model=('[^']*'|None), "
    r"num_spec_tokens=(\d+|None)\)"
)
_VERSION = re.compile(
    r"vLLM server version (\S+), serving model (\S+)|█\s+version (\S+)\s*$"
    r"|LLM engine \(v([^)\s]+)\)"
)
_LOGO_MODEL = re.compile(r"█\s+model\s+(\S+)\s*$")
_PREFIX = re.compile(rule("log-format").data["pattern"])


@dataclass(frozen=True)
class AuditEvent:
    """One thing found in the log."""

    line: int
    kind: str  #: lossy_warning | scheduler_override | speculative_config | version
    text: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "kind": self.kind, "text": self.text, **self.data}


@dataclass(frozen=True)
class AuditReport:
    """The events of one log, in order, and what they add up to."""

    path: str
    events: tuple[AuditEvent, ...]
    expected_id: str | None = None
    #: lines that only a starting vLLM server writes (version, logo, non-default args, engine config)
    startup_lines: tuple[int, ...] = ()

    def of(self, kind: str) -> tuple[AuditEvent, ...]:
        return tuple(e for e in self.events if e.kind == kind)

    @property
    def lossy_lines(self) -> tuple[int, ...]:
        """Lines showing a lossy verifier: the FLy warning, or an echo with a lossy method."""
        return tuple(
            e.line
            for e in self.events
            if e.kind == "lossy_warning" or (e.kind == "speculative_config" and e.data.get("lossy"))
        )

    @property
    def config_ids(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(e.data["config_id"] for e in self.of("speculative_config") if e.data.get("config_id"))
        )

    @property
    def drift_lines(self) -> tuple[int, ...]:
        """Echoes whose config id differs from ``expected_id`` (when one was given)."""
        if self.expected_id is None:
            return ()
        return tuple(
            e.line
            for e in self.of("speculative_config")
            if e.data.get("config_id") and e.data["config_id"] != self.expected_id
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "qualgate.audit_report",
            "version": 1,
            "path": self.path,
            "lossy": bool(self.lossy_lines),
            "lossy_lines": list(self.lossy_lines),
            "config_ids": list(self.config_ids),
            "expected_config_id": self.expected_id,
            "drift_lines": list(self.drift_lines),
            "events": [e.to_dict() for e in self.events],
        }


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _top_level_entries(text: str) -> list[str]:
    """The ``key: value`` entries of a dict repr, split at its top-level commas."""
    entries, depth, quote, skip, start = [], 0, None, False, 1
    for i, c in enumerate(text):
        if skip:
            skip = False
        elif quote:
            skip = c == "\\"
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                entries.append(text[start:i])
        elif c == "," and depth == 1:
            entries.append(text[start:i])
            start = i + 1
    return entries


def _args_echo(dict_text: str) -> dict[str, Any]:
    """The serving args echoed as a Python dict repr; values that are not literals are skipped
    (e.g. ``LoRAModulePath(...)``)."""
    args = _literal(dict_text)
    if isinstance(args, dict):
        return args
    out: dict[str, Any] = {}
    for entry in _top_level_entries(dict_text):
        key, sep, value = entry.partition(":")
        key, value = _literal(key.strip()), _literal(value.strip())
        if sep and isinstance(key, str) and value is not None:
            out[key] = value
    return out


def audit_text(text: str, *, path: str = "<log>", expected_id: str | None = None) -> AuditReport:
    """Scan the text of a vLLM server log (see the module docstring)."""
    events: list[AuditEvent] = []
    startup: list[int] = []
    spec_flags = rule("cli-spec-flags").data["flags"]
    n = 0
    try:
        for n, line in enumerate(text.splitlines(), start=1):
            if _VERSION.search(line) or _ARGS.search(line) or _ENGINE_SPEC.search(line):
                startup.append(n)
            stripped = line.strip()
            pm = _PREFIX.match(stripped)
            where = {"level": pm.group("level"), "file": pm.group("file")} if pm else {}
            if FLY_LOSSY_WARNING in line:
                events.append(AuditEvent(n, "lossy_warning", stripped, {"method": "fly", **where}))
            m = _OVERRIDE.search(line)
            if m:
                a, b = int(m.group(1)), int(m.group(2))
                events.append(AuditEvent(n, "scheduler_override", stripped, {"from": a, "to": b, **where}))
            m = _VERSION.search(line)
            if m:
                data = {"vllm_version": m.group(1) or m.group(3) or m.group(4)}
                if m.group(2):
                    data["model"] = m.group(2)
                events.append(AuditEvent(n, "version", stripped, data))
            m = _LOGO_MODEL.search(line)
            if m and events and events[-1].kind == "version" and events[-1].line == n - 1:
                events[-1].data["model"] = m.group(1)
            m = _ARGS.search(line)
            if m:
                args = _args_echo(m.group(1))
                spec = args.get("speculative_config")
                flags = {
                    spec_flags[f]: args[f.lstrip("-").replace("-", "_")]
                    for f in spec_flags
                    if args.get(f.lstrip("-").replace("-", "_")) is not None
                }
                if isinstance(spec, dict) or flags:  # rule cli-spec-flags-merge
                    spec = {**(spec if isinstance(spec, dict) else {}), **flags}
                    data: dict[str, Any] = {"source": "args", "speculative_config": spec, "model": args.get("model")}
                    try:
                        rsm = normalise_speculative(spec).get("rejection_sample_method", "standard")
                    except ValueError as exc:  # vLLM would refuse it; read the verifier anyway
                        data["config_id_error"] = str(exc)
                        raw = {str(k).replace("-", "_"): v for k, v in spec.items()}
                        rsm = raw.get("rejection_sample_method", "standard")
                    data["rejection_sample_method"] = rsm
                    data["lossy"] = rsm not in LOSSLESS_METHODS
                    if isinstance(args.get("model"), str) and "config_id_error" not in data:
                        numerics = identity_arguments(args)  # every output-changing argument echoed
                        numerics.update({k: args[k] for k in IDENTITY_OPTIONS if args.get(k) is not None})
                        try:
                            data["config_id"] = config_id(args["model"], spec, **numerics)
                        except ValueError as exc:
                            data["config_id_error"] = str(exc)
                    events.append(AuditEvent(n, "speculative_config", stripped, data))
            m = _ENGINE_SPEC.search(line)
            if m:
                method, model, k = (_literal(g) if g != "None" else None for g in m.groups())
                events.append(
                    AuditEvent(
                        n,
                        "speculative_config",
                        m.group(0),
                        {
                            "source": "engine",
                            "speculative_config": {"method": method, "model": model, "num_speculative_tokens": k},
                        },
                    )
                )
    except DataError:
        raise
    except ValueError as exc:  # a 5,000-digit number in a log line, ...
        raise DataError(f"this line cannot be read: {exc}", file=path, line=n) from exc
    return AuditReport(path, tuple(events), expected_id, tuple(startup))


def audit_log(path: str | Path, *, expected_id: str | None = None) -> AuditReport:
    """Read a vLLM server log file and scan it (see :func:`audit_text`).

    Raises :class:`DataError` (exit 3) when no line of the file is one a starting vLLM
    server writes (rules ``log-version``, ``log-non-default-args``, ``log-engine-config``):
    an empty file, a config file or another tool's log says nothing about what ran, so it
    is never "no lossy verifier seen".
    """
    p = Path(path)
    text = read_bytes(p).decode("utf-8", "replace")  # a regular file (a log may hold any bytes)
    report = audit_text(text, path=str(p), expected_id=expected_id)
    if not report.startup_lines:
        raise DataError(
            f"no vLLM start-up line found in {p}: no 'vLLM server version ...', logo, 'non-default "
            "args: ...' or 'Initializing a V1 LLM engine ...' line, so it is not the log of a vLLM "
            "server start and says nothing about the verifier",
            file=str(p),
        )
    return report
