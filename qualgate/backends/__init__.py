"""Backends: the one interface between the harness and an inference engine.

A backend is opened for one decoding config (:class:`qualgate.config.decoding.DecodingConfig`),
generates batches of chat prompts, and is closed before the next config starts (so that a
GPU engine frees its memory)::

    with open_backend(config) as backend:
        results = backend.generate([Request(messages, {"seed": 7, **config.sampling})])
        backend.info()      # engine, package versions, device, for the run manifest

:meth:`Backend.generate` returns one :class:`Generation` per request, in order. A failure
of one request (an engine exception for that request, a server error after retries) is
returned as a :class:`Generation` whose ``error`` holds the message, never raised, so that
the harness records it as outcome ``error`` rather than ``incorrect``. An exception from
``generate`` means the engine itself is broken: the run stops, and ``--resume`` continues it.

Backends are found by the config's ``engine`` name in :data:`BACKENDS` (``"module:Class"``),
imported only when opened. The class is constructed as ``Class(config)``. An engine whose
package is not installed gives a :class:`qualgate.errors.DataError` (exit 3) naming the
extra to install.
"""

from __future__ import annotations

import abc
import importlib
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from qualgate.config.engines import BACKENDS, register_backend

from ..errors import DataError

__all__ = [
    "BACKENDS",
    "Backend",
    "DeviceParallelBackend",
    "Generation",
    "Request",
    "open_backend",
    "open_on_devices",
    "package_versions",
    "register_backend",
    "resolve_model_path",
]

#: the extra that installs each engine's packages
_EXTRAS = {"reference": "reference", "vllm": "vllm"}  # vllm-server: stdlib only


@dataclass(frozen=True)
class Request:
    """One generation request.

    Parameters
    ----------
    messages : sequence of mapping
        Chat messages (``{"role": ..., "content": ...}``), rendered by the engine's chat
        template.
    sampling : mapping
        vLLM ``SamplingParams`` fields for this request: ``temperature``, ``top_p``,
        ``top_k``, ``max_tokens`` (always set), ``seed`` (always set by the harness), ...
    """

    messages: Sequence[Mapping[str, str]]
    sampling: Mapping[str, Any]


@dataclass(frozen=True)
class Generation:
    """What a backend returns for one request.

    ``output_tokens`` counts generated tokens. Speculative metrics are ``None`` for
    target-only decoding: ``spec_steps`` (drafting steps, i.e. target passes that verified
    a draft), ``draft_tokens`` (proposed), ``accepted_tokens`` (accepted, deferred FLy
    tokens included, as vLLM counts them), ``deferred_tokens`` (FLy only). ``latency_s`` is
    the request's wall time inside the engine. ``token_ids`` are the emitted tokens and
    ``top2_margins`` the target's top-1 minus top-2 probability at each of them, where the
    engine has them (the reference engine). ``error`` is set (and ``text`` is ``None``)
    when this request failed.
    """

    text: str | None
    output_tokens: int | None = None
    finish_reason: str | None = None
    spec_steps: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    deferred_tokens: int | None = None
    latency_s: float | None = None
    token_ids: list[int] | None = None
    top2_margins: list[float] | None = None
    error: str | None = None

    @classmethod
    def failed(cls, error: str | BaseException) -> Generation:
        """A failed request, with the message (and the exception's type) kept."""
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        return cls(text=None, error=str(error) or "unknown error")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(abc.ABC):
    """An engine opened for one decoding config (see the module docstring)."""

    #: the config ``engine`` name this class serves
    engine: str = ""
    #: whether the engine must hold the accelerator alone (then a sequential run closes it
    #: after each round instead of keeping several configs loaded)
    exclusive: bool = False
    #: how many calls the harness keeps outstanding. A backend that queues work itself sets
    #: more than 1 and defines ``submit(requests)``, which returns a
    #: ``concurrent.futures.Future`` of what :meth:`generate` would; the harness takes the
    #: results in order
    in_flight: int = 1

    def __init__(self, config):
        self.config = config

    @property
    def batch_size(self) -> int:
        """How many requests the harness passes to one :meth:`generate` call.

        Records are flushed after each call, so this is also the granularity of ``--resume``.
        ``engine_options.batch_size`` overrides the backend's default.
        """
        return int(self.config.engine_options.get("batch_size", 64))

    @abc.abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """One :class:`Generation` per request, in order; per-request failures as ``error``."""

    @abc.abstractmethod
    def info(self) -> dict[str, Any]:
        """For the manifest: ``engine``, ``versions`` (package -> version), ``device``, ..."""

    def close(self) -> None:  # noqa: B027 (a default that does nothing, not an abstract method)
        """Release the engine (GPU memory, connections). Called once, before the next config."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _load(engine: str):
    target = BACKENDS.get(engine)
    if target is None:
        raise DataError(f"no backend for this engine; known engines: {sorted(BACKENDS)}", field="engine", value=engine)
    if not isinstance(target, str):
        return target
    module, attr = target.split(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr)


def _missing(engine: str, exc: ModuleNotFoundError) -> DataError:
    extra = _EXTRAS.get(engine)
    hint = f"; install it with: pip install 'qualgate[{extra}]'" if extra else ""
    return DataError(
        f"engine {engine!r} needs the package {exc.name!r}, which is not installed{hint}",
        field="engine",
        value=engine,
    )


def open_backend(config) -> Backend:
    """Construct the backend for ``config.engine`` (a :class:`~qualgate.config.decoding.DecodingConfig`).

    Raises
    ------
    DataError
        The engine is unknown, or its package (torch, transformers, vllm, ...) is missing.
    """
    engine = config.engine
    try:
        cls = _load(engine)
        return cls(config)
    except ModuleNotFoundError as exc:
        name = (exc.name or "").split(".")[0]
        if name == "qualgate":
            raise DataError(
                f"engine {engine!r} is not available in this qualgate installation ({exc.name} is missing)",
                field="engine",
                value=engine,
            ) from exc
        raise _missing(engine, exc) from exc


def resolve_model_path(model: str, config_path: str | None) -> str:
    """A config's model (or drafter): a path relative to the config file if one exists there,
    otherwise the string as written (a hub id or an absolute path)."""
    p = Path(model).expanduser()
    if p.is_absolute():
        return str(p)
    if config_path is not None:
        local = Path(config_path).parent / p
        if local.exists():
            return str(local.resolve())
    return model


def package_versions(*names: str) -> dict[str, str | None]:
    """Installed versions of ``qualgate``, Python and ``names`` (``None`` when missing)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("qualgate", *names):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def __getattr__(name):
    # DeviceParallelBackend (one engine per device, :mod:`._devices`) imports this module
    if name == "DeviceParallelBackend":
        from ._devices import DeviceParallelBackend

        return DeviceParallelBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_on_devices(config, *, threads: int | None = None) -> Backend:
    """The backend for ``config`` with one engine per GPU it names (``engine_options.devices``),
    or :func:`open_backend` itself: see :func:`qualgate.backends._devices.open_on_devices`."""
    from ._devices import open_on_devices as open_devices

    return open_devices(config, threads=threads)
