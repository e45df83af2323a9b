"""A judge: a decoding config and a prompt template, asked through the ordinary backends.

The judge model is named by a decoding config file like any other
(:func:`qualgate.config.decoding.load_config`: ``engine: vllm-server`` with ``base_urls``,
offline ``vllm``, or ``reference``), so its requests go through the same backend, retries,
replica pool and identity checks as a decoded config's. A judge config that sets no
``temperature`` is asked at temperature 0 (greedy: the verdict should not be a draw).

:attr:`Judge.identity` is what a verdict depends on: the config id (model, resolved
speculative config, numerics), the engine, the model, the sampling settings and the template's
name and SHA-256; :attr:`Judge.judge_id` (``judge-`` and 16 hex digits) hashes it. Every
verdict is cached and recorded under it, and records name the judge as
``decided_by: judge:<name>@<judge_id>``.

:meth:`Judge.ask` sends a list of rendered requests as one batch through the backend (whose own
concurrency keeps them in flight together) and returns one :class:`Reply` per request: the
judge's text, or the transport error (a timeout, a refusal, HTTP errors after the retries).
Nothing is parsed here; :meth:`qualgate.judge._prompts.Template.parse` reads the verdict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.backends import Request
from qualgate.config.decoding import DecodingConfig, load_config
from qualgate.errors import DataError

from ._prompts import Template, load_template

__all__ = ["Judge", "Reply", "load_judge"]


@dataclass(frozen=True)
class Reply:
    """One judge request's answer: ``text``, or ``error`` when the request failed."""

    text: str | None
    error: str | None = None
    latency_s: float | None = None


def _seed(messages) -> int:
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return int(hashlib.sha256(blob.encode()).hexdigest()[:8], 16) % 2**31


class Judge:
    """A judge config and template (see the module docstring).

    ``backend_factory(config)`` opens the backend (default
    :func:`qualgate.backends.open_backend`); it is opened on the first :meth:`ask` and closed by
    :meth:`close`. ``calls`` counts the requests sent.
    """

    def __init__(self, config: DecodingConfig, template: Template, *, backend_factory: Callable | None = None):
        sampling = dict(config.sampling)
        if config.path is None or "temperature" not in _raw_sampling(config.path):
            sampling["temperature"] = 0.0
        self.config = dataclasses.replace(config, sampling=sampling)
        self.template = template
        self._factory = backend_factory
        self._backend = None
        self.calls = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "name": c.name,
            "config_id": c.config_id,
            "engine": c.engine,
            "model": c.model,
            "speculative": c.speculative,
            "sampling": c.sampling,
            "template": {"name": self.template.name, "kind": self.template.kind, "sha256": self.template.sha256},
        }

    @property
    def judge_id(self) -> str:
        ident = {k: v for k, v in self.identity.items() if k != "name"}
        blob = json.dumps(ident, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return "judge-" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def decided_by(self) -> str:
        return f"judge:{self.name}@{self.judge_id}"

    def info(self) -> dict[str, Any] | None:
        return self._backend.info() if self._backend is not None else None

    def ask(self, requests: Sequence[Sequence[dict]]) -> list[Reply]:
        """One :class:`Reply` per request (a list of chat messages), in order."""
        if not requests:
            return []
        if self._backend is None:
            from qualgate.backends import open_backend

            factory = self._factory or open_backend
            try:
                self._backend = factory(self.config)
            except ValueError as exc:
                if isinstance(exc, DataError):
                    raise
                raise DataError(f"the judge's engine refused its config: {exc}", file=self.config.path) from exc
        batch = [Request(list(m), {**self.config.sampling, "seed": _seed(m)}) for m in requests]
        out: list[Reply] = []
        size = max(1, int(self._backend.batch_size))
        for start in range(0, len(batch), size):
            gens = self._backend.generate(batch[start : start + size])
            if len(gens) != len(batch[start : start + size]):
                raise RuntimeError(
                    f"the judge's backend returned {len(gens)} results for {len(batch[start : start + size])} requests"
                )
            self.calls += len(gens)
            out += [
                Reply(None, g.error, g.latency_s)
                if g.error is not None
                else Reply(g.text if g.text is not None else "", None, g.latency_s)
                for g in gens
            ]
        return out

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _raw_sampling(path) -> dict:
    from qualgate.config.decoding import load_yaml

    data = load_yaml(path)
    return dict(data.get("sampling") or {}) if isinstance(data, dict) else {}


def load_judge(
    config_path: str | Path,
    template: str | Path,
    *,
    kind: str,
    base: str | Path | None = None,
    backend_factory: Callable | None = None,
) -> Judge:
    """A :class:`Judge` from a decoding config file and a template (built-in name or path)."""
    config_path = Path(config_path)
    if base is not None and not config_path.is_absolute():
        config_path = Path(base) / config_path
    if not config_path.is_file():
        raise DataError("no such judge config file (a decoding config YAML)", file=str(config_path))
    return Judge(
        load_config(config_path), load_template(template, kind=kind, base=base), backend_factory=backend_factory
    )
