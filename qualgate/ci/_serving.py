"""Read what a vLLM server is asked to run, from the files a deployment repository holds.

Accepted inputs (the format is detected from the content, not the file name):

- a serving config mapping, YAML or JSON: ``model`` and ``speculative_config`` (or
  ``speculative-config``, as a mapping or a JSON string, as in a file given to
  ``vllm serve --config``), with optional ``dtype``, ``quantization``, ``kv_cache_dtype``,
  ``max_num_seqs``, ``max_num_batched_tokens`` (dashes or underscores);
- a qualgate decoding config (``engine``, ``model``, ``speculative``, ``sampling``,
  ``engine_options``), the harness's own format;
- a ``vllm serve MODEL --speculative-config '{...}' [--dtype ...]`` command line, alone or
  in a shell script (``\\`` continuations, quotes, comments, ``VAR=1`` prefixes), also as
  ``python -m vllm.entrypoints.openai.api_server --model MODEL ...``; dotted options
  (``--speculative-config.num_speculative_tokens 8``) and ``--config FILE`` are applied;
- an args file: the arguments alone, shell words over any number of lines.

The config id is computed with :func:`qualgate.config.config_id`, the function the harness
stores with every record, so a served config and the harness config that produced the
evidence have the same id exactly when they ask the engine for the same thing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .._strict import compose_yaml, loads_yaml, read_text
from ..config import IDENTITY_OPTIONS, config_id
from ..errors import DataError

__all__ = ["ServingConfig", "parse_command_line", "read_serving_config"]

#: Serving options kept besides the identity: they matter to lint and admission, not to the id.
SERVING_OPTIONS = ("max_num_seqs", "max_num_batched_tokens", "max_num_active_seqs")
_NUMERIC_KEYS = (*IDENTITY_OPTIONS, *SERVING_OPTIONS)
_DECODING_KEYS = ("engine", "sampling", "engine_options", "speculative")


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

    def line_of(self, key: str | None) -> int | None:
        """The line of ``key``, or of its nearest parent that has one."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0]
        return None

    @property
    def numerics(self) -> dict[str, Any]:
        return {k: self.options[k] for k in IDENTITY_OPTIONS if self.options.get(k) is not None}

    def config_id(self, *, drop: tuple[str, ...] = ()) -> str:
        """:func:`qualgate.config.config_id` of this config; ``drop``: speculative keys left out.

        Raises :class:`DataError` when the config names no model or its speculative config
        cannot be resolved (:func:`~qualgate.speculative.resolve_speculative`'s message).
        """
        if not self.model:
            raise DataError("names no target model, so its config id cannot be computed",
                            file=self.path, field="model")
        spec = self.speculative
        if spec and drop:
            spec = {k: v for k, v in spec.items() if k not in drop}
        try:
            return config_id(self.model, spec, **self.numerics)
        except ValueError as exc:
            raise DataError(f"invalid speculative_config: {exc}", file=self.path,
                            line=self.line_of("speculative_config"),
                            field="speculative_config") from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "model": self.model,
            "speculative_config": self.speculative,
            "options": self.options,
        }


# --------------------------------------------------------------------------- mappings


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


def _spec_from_value(value, *, path, line, where):
    if value is None or value == {}:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DataError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=path,
                            line=line, field=where, value=value) from exc
    if not isinstance(value, Mapping):
        raise DataError("must be a mapping of speculative_config keys", file=path, line=line,
                        field=where, value=value)
    return dict(value)


def _from_mapping(data: Mapping, *, path: str, lines: dict[str, int], fmt=None) -> ServingConfig:
    norm = {str(k).replace("-", "_"): v for k, v in data.items()}
    decoding = fmt == "decoding-config" or any(k in norm for k in ("engine", "sampling", "engine_options"))
    if decoding:
        spec_key = "speculative"
        options = norm.get("engine_options") or {}
        if not isinstance(options, Mapping):
            raise DataError("must be a mapping", file=path, line=lines.get("engine_options"),
                            field="engine_options", value=options)
        options = {str(k): v for k, v in options.items() if k in _NUMERIC_KEYS}
        sampling = norm.get("sampling") if isinstance(norm.get("sampling"), Mapping) else None
    else:
        spec_key = "speculative_config" if "speculative_config" in norm else "speculative"
        options = {k: norm[k] for k in _NUMERIC_KEYS if k in norm}
        sampling = None
    spec = _spec_from_value(norm.get(spec_key), path=path, line=lines.get(spec_key),
                            where=spec_key)
    # one key name for the speculative block, whatever the file calls it
    lines = {("speculative_config" + k[len(spec_key):] if k.split(".")[0] == spec_key else k): v
             for k, v in lines.items()}
    if decoding:
        lines.update({k.replace("engine_options.", ""): v for k, v in lines.items()
                      if k.startswith("engine_options.")})
    model = norm.get("model")
    if model is not None and not isinstance(model, str):
        raise DataError("must be a hub id or path", file=path, line=lines.get("model"),
                        field="model", value=model)
    return ServingConfig(
        path=path,
        format="decoding-config" if decoding else "serving-config",
        model=model,
        speculative=spec,
        options=options,
        sampling=dict(sampling) if sampling else None,
        lines=lines,
    )


# --------------------------------------------------------------------------- command lines


def _shell_words(text: str, *, path: str) -> list[list[tuple[str, int]]]:
    """Split shell text into commands of ``(word, line)``, as a POSIX shell would.

    Handles single and double quotes, backslash escapes and ``\\``-newline continuations,
    ``#`` comments, and newline, ``;``, ``&&``, ``||``, ``|``, ``&`` as command separators.
    """
    commands: list[list[tuple[str, int]]] = [[]]
    cur: list[str] | None = None
    cur_line = line = 1
    i, n = 0, len(text)

    def flush():
        nonlocal cur
        if cur is not None:
            commands[-1].append(("".join(cur), cur_line))
            cur = None

    def start():
        nonlocal cur, cur_line
        if cur is None:
            cur, cur_line = [], line

    while i < n:
        c = text[i]
        if c == "\\":
            if text.startswith("\n", i + 1):
                line += 1
                i += 2
                continue
            start()
            cur.append(text[i + 1 : i + 2])
            i += 2
        elif c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise DataError("unterminated single quote", file=path, line=line)
            start()
            cur.append(text[i + 1 : j])
            line += text.count("\n", i, j)
            i = j + 1
        elif c == '"':
            start()
            i += 1
            while True:
                if i >= n:
                    raise DataError("unterminated double quote", file=path, line=cur_line)
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
                    if text[i + 1] == "\n":
                        line += 1
                    else:
                        cur.append(text[i + 1])
                    i += 2
                elif text[i] == '"':
                    i += 1
                    break
                else:
                    line += text[i] == "\n"
                    cur.append(text[i])
                    i += 1
        elif c in " \t\r":
            flush()
            i += 1
        elif c in "\n;&|":
            flush()
            if commands[-1]:
                commands.append([])
            line += c == "\n"
            i += 1
        elif c == "#" and cur is None:
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            start()
            cur.append(c)
            i += 1
    flush()
    return [c for c in commands if c]


def _serve_args(words: list[tuple[str, int]]) -> list[tuple[str, int]] | None:
    names = [w for w, _ in words]
    for j, w in enumerate(names):
        if w == "serve" and j > 0 and os.path.basename(names[j - 1]) == "vllm":
            return words[j + 1 :]
        if w.startswith("vllm/vllm-openai"):  # docker run ... vllm/vllm-openai:TAG ARGS
            return words[j + 1 :]
        if w == "-m" and j + 1 < len(names):
            mod = names[j + 1]
            if mod == "vllm.entrypoints.openai.api_server":
                return words[j + 2 :]
            if mod == "vllm.entrypoints.cli.main" and names[j + 2 : j + 3] == ["serve"]:
                return words[j + 3 :]
    return None


def _scalar(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


_SPEC_OPTS = ("--speculative-config", "--speculative_config")
_MODEL_OPTS = ("--model",)
_FLAG_PREFIXES = ("--no-", "--enable-", "--disable-")
_FLAGS = {"--trust-remote-code", "--enforce-eager", "--headless", "--async-scheduling"}


def parse_command_line(args: list[tuple[str, int]], *, path: str, fmt: str) -> ServingConfig:
    """Build a :class:`ServingConfig` from ``vllm serve`` arguments ``(word, line)``."""
    model = model_line = None
    spec: dict[str, Any] | None = None
    options: dict[str, Any] = {}
    lines: dict[str, int] = {}
    base: ServingConfig | None = None
    i = 0
    while i < len(args):
        word, line = args[i]
        if not word.startswith("-") or word == "-":
            if model is None:
                model, model_line = word, line
            i += 1
            continue
        name, eq, value = word.partition("=")
        if not eq:
            takes_value = not (
                name in _FLAGS
                or name.startswith(_FLAG_PREFIXES)
                or i + 1 >= len(args)
                or args[i + 1][0].startswith("--")
            )
            value, value_line = args[i + 1] if takes_value else (None, line)
            i += 2 if takes_value else 1
        else:
            value_line = line
            i += 1
        key = name.lstrip("-").replace("-", "_")
        if name in _MODEL_OPTS:
            model, model_line = value, line
        elif name in _SPEC_OPTS:
            given = _spec_from_value(value, path=path, line=line, where=name) or {}
            spec = {**(spec or {}), **given}
            lines["speculative_config"] = line
            for sub in given:  # the line of each key inside a multi-line JSON value
                at = value.find(f'"{sub}"')
                if at >= 0:
                    lines[f"speculative_config.{sub}"] = value_line + value.count("\n", 0, at)
        elif name.startswith(tuple(o + "." for o in _SPEC_OPTS)):
            sub = name.split(".", 1)[1].replace("-", "_")
            spec = {**(spec or {}), sub: _scalar(value) if value is not None else True}
            lines.setdefault("speculative_config", line)
            lines[f"speculative_config.{sub}"] = line
        elif name == "--config" and value:
            cfg = Path(path).parent / value
            base = read_serving_config(cfg) if cfg.is_file() else None
            if base is None:
                raise DataError("the file given to --config cannot be read", file=path,
                                line=line, field="--config", value=value)
        elif name in ("-q",) or key in _NUMERIC_KEYS:
            key = "quantization" if name == "-q" else key
            options[key] = _scalar(value) if key in SERVING_OPTIONS else value
            lines[key] = line
    if model_line is not None:
        lines["model"] = model_line
    if base is not None:  # --config FILE supplies defaults; the command line overrides them
        model = model or base.model
        if base.speculative and spec is None:
            spec = base.speculative
        options = {**base.options, **options}
    return ServingConfig(path=path, format=fmt, model=model, speculative=spec or None,
                         options=options, lines=lines)


# --------------------------------------------------------------------------- entry point


def read_serving_config(path: str | Path) -> ServingConfig:
    """Read a serving config (any accepted format; see the module docstring).

    Raises :class:`DataError` when the file cannot be read or parsed.
    """
    p = Path(path)
    text = read_text(p, kind="yaml", bom="strip")  # a regular file, UTF-8
    spath = str(p)

    commands = shell_error = None
    if "vllm" in text or re.match(r"\s*--[A-Za-z]", text):
        try:
            commands = _shell_words(text, path=spath)
        except DataError as exc:  # maybe YAML/JSON with quotes a shell would not balance
            shell_error = exc
    if commands:
        serves = [(c, a) for c in commands if (a := _serve_args(c)) is not None]
        if len(serves) > 1:
            at = ", ".join(str(c[0][1]) for c, _ in serves)
            raise DataError(f"{len(serves)} vllm serve commands (lines {at}); give one per file",
                            file=spath)
        if serves:
            return parse_command_line(serves[0][1], path=spath, fmt="command-line")
        if re.match(r"--[A-Za-z]", commands[0][0][0]):
            return parse_command_line([w for c in commands for w in c], path=spath,
                                      fmt="args-file")

    try:  # strict: no aliases, no duplicate keys, no NaN
        node = compose_yaml(text, file=spath)
        data = loads_yaml(text, file=spath)
    except DataError as exc:
        if shell_error is not None:
            raise shell_error from None
        raise DataError(f"neither a vllm serve command line nor valid YAML/JSON: {exc.message}",
                        file=exc.file, line=exc.line, field=exc.field) from exc
    if not isinstance(data, Mapping):
        if shell_error is not None:
            raise shell_error
        raise DataError("expected a serving config mapping (model, speculative_config), a "
                        "decoding config, or a vllm serve command line", file=spath,
                        value=data if not isinstance(data, str) else data[:80])
    return _from_mapping(data, path=spath, lines=_key_lines(node))
