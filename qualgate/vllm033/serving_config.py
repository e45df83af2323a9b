"""A serving configuration as written in a file, before resolution (:class:`ServingConfig`),
and what both of its readers (:mod:`.cli_args`, :mod:`.serving`) share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from qualgate.config.decoding import IDENTITY_OPTIONS, config_id
from qualgate.errors import DataError

__all__ = ["SERVING_OPTIONS", "Loc", "ServingConfig"]

#: Serving options kept besides the identity: they matter to lint and admission, not to the id.
SERVING_OPTIONS = ("max_num_seqs", "max_num_batched_tokens", "max_num_active_seqs")
_NUMERIC_KEYS = (*IDENTITY_OPTIONS, *SERVING_OPTIONS)


class Loc(int):
    """A 1-based line number that names its file too: a setting read from another file than the
    one given (a ``--config`` YAML, a compose override or ``extends`` file). It is an ``int``
    everywhere else, so the readers carry it as they carry a line."""

    file: str

    def __new__(cls, line: int, file: str):
        obj = super().__new__(cls, line)
        obj.file = file
        return obj

    def __add__(self, other):  # a line further down the same file
        return Loc(int(self) + int(other), self.file) if isinstance(other, int) else NotImplemented

    __radd__ = __add__


@dataclass(frozen=True)
class ServingConfig:
    """One serving configuration as written in a file, before resolution.

    ``speculative`` is the raw ``speculative_config`` (``None``: target-only); ``lines`` maps
    keys (``model``, ``speculative_config``, ``speculative_config.fly_window_size``, ...) to
    1-based lines of ``path``.
    """

    path: str
    format: str  #: decoding-config | serving-config | command-line | args-file
    model: str | None
    speculative: dict[str, Any] | None
    options: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] | None = None
    lines: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  #: how a spelling was read (e.g. a --config=FILE vLLM ignores)
    #: every other argument given, by destination (:mod:`qualgate.vllm033.arguments`; an option
    #: vLLM 0.33 does not register is kept under its name, ``--like-this``)
    arguments: dict[str, Any] = field(default_factory=dict)
    #: the vLLM version the deployment runs (``0.34.0``) where its files state it exactly (an
    #: image tag, a pinned pip/uv requirement, a version field); ``None``: not stated
    vllm_version: str | None = None
    #: where that version was read, for messages (``compose.yaml:4: image vllm/vllm-openai:v0.34.0``)
    vllm_version_source: str | None = None
    #: environment variables set for the server process that change what vLLM runs
    #: (``VLLM_USE_V2_MODEL_RUNNER``, ``VLLM_BATCH_INVARIANT``, ...), by name
    environment: dict[str, str] = field(default_factory=dict)

    def _at(self, key: str | None):
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0]
        return None

    def line_of(self, key: str | None) -> int | None:
        """The line of ``key``, or of its nearest parent that has one."""
        at = self._at(key)
        return None if at is None else int(at)

    def file_of(self, key: str | None) -> str:
        """The file where ``key`` (or its nearest parent with a line) is set: ``path``, or the
        file it was read from (a ``--config`` YAML, a compose override)."""
        return getattr(self._at(key), "file", self.path)

    @property
    def numerics(self) -> dict[str, Any]:
        """What enters the config id besides the model and the speculative config: the
        identity options and every output-changing argument given."""
        from qualgate.vllm033.arguments import identity_arguments

        ident = identity_arguments(self.arguments)
        ident.update({k: self.options[k] for k in IDENTITY_OPTIONS if self.options.get(k) is not None})
        return ident

    def arguments_by_class(self) -> dict[str, list[str]]:
        """The arguments given, by class (``output``, ``transport``, ``unknown``; an option
        vLLM 0.33 does not register is ``unknown``)."""
        from qualgate.vllm033.arguments import ARGUMENTS

        out: dict[str, list[str]] = {"output": [], "transport": [], "unknown": []}
        for k in sorted(self.arguments):
            out[ARGUMENTS[k].klass if k in ARGUMENTS else "unknown"].append(k)
        return out

    def config_id(self, *, drop: tuple[str, ...] = ()) -> str:
        """:func:`qualgate.config.decoding.config_id` of this config; ``drop``: speculative keys left out.

        Raises :class:`DataError` when the config names no model or its speculative config
        cannot be resolved (:func:`~qualgate.vllm033.speculative.resolve_speculative`'s message).
        """
        if not self.model:
            raise DataError("names no target model, so its config id cannot be computed", file=self.path, field="model")
        spec = self.speculative
        if spec and drop:
            spec = {k: v for k, v in spec.items() if k not in drop}
        try:
            return config_id(self.model, spec, **self.numerics)
        except ValueError as exc:
            raise DataError(
                f"invalid speculative_config: {exc}",
                file=self.path,
                line=self.line_of("speculative_config"),
                field="speculative_config",
            ) from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "model": self.model,
            "speculative_config": self.speculative,
            "options": self.options,
            "arguments": self.arguments,
            "notes": list(self.notes),
            "vllm_version": self.vllm_version,
            "vllm_version_source": self.vllm_version_source,
            "environment": self.environment,
        }


def _key_lines(node, prefix="") -> dict[str, int]:
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            name = str(k.value).replace("-", "_") if not prefix else str(k.value)
            dotted = f"{prefix}.{name}" if prefix else name
            out[dotted] = k.start_mark.line + 1
            if isinstance(v, yaml.MappingNode) and dotted.count(".") < 2:
                out.update(_key_lines(v, dotted))
    return out
