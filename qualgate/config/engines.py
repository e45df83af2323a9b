"""The engine registry: a config's ``engine`` name -> its backend class. A config file may name
any registered engine (:func:`register_backend`); :func:`qualgate.backends.open_backend` builds
it. The registry lives with the configs so that reading a config needs no backend imported."""

from __future__ import annotations

__all__ = ["BACKENDS", "register_backend"]

#: config ``engine`` -> ``"module:Class"`` (imported when opened) or the class itself;
#: ``Class(config)`` must be a :class:`qualgate.backends.Backend`.
BACKENDS: dict[str, str | type] = {
    "reference": "qualgate.backends.reference:ReferenceBackend",
    "vllm": "qualgate.backends.vllm:VLLMBackend",
    "vllm-server": "qualgate.backends.vllm_server:VLLMServerBackend",
}


def register_backend(engine: str, target: str | type) -> None:
    """Register (or replace) the backend class for a config ``engine`` name; config files
    naming it are accepted from then on.

    ``target`` is a :class:`~qualgate.backends.Backend` subclass or a ``"module:Class"`` string.
    """
    if not isinstance(engine, str) or not engine:
        raise ValueError(f"engine must be a non-empty string, got {engine!r}")
    if not isinstance(target, type) and not (isinstance(target, str) and target.count(":") == 1):
        raise ValueError(f"target must be a Backend class or 'module:Class', got {target!r}")
    BACKENDS[engine] = target
