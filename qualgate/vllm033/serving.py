"""Read what a vLLM server is asked to run, from the files a deployment repository holds.

Accepted inputs (the format is detected from the content, not the file name):

- a file for ``vllm serve --config``, YAML or JSON: option names as keys (``model``,
  ``speculative-config``/``speculative_config`` as a mapping or a JSON string, dotted keys,
  ``dtype``, ``max-num-seqs``, ...), turned into arguments as vLLM turns them;
- a qualgate decoding config (``engine``, ``model``, ``speculative``, ``sampling``,
  ``engine_options``), validated as ``qualgate run`` validates it;
- a ``vllm serve MODEL ...`` command line, alone or in a shell script (``\\``
  continuations, quotes, comments, ``VAR=1`` prefixes), ``python -m vllm.entrypoints.cli.main
  serve``, ``python -m vllm.entrypoints.openai.api_server --model MODEL ...`` or ``docker
  run ... vllm/vllm-openai:TAG ARGS``;
- an args file: the arguments alone, shell words over any number of lines;
- a docker-compose file, Kubernetes manifests, production-stack Helm values or a
  ``VLLMRuntime``, read by :mod:`qualgate.vllm033.deployments` as the command they start.

Arguments are read as vLLM 0.33 reads them (:mod:`qualgate.vllm033.cli_args`, rules of
:mod:`qualgate.vllm033.rules`): ``-sc``, ``--spec-method/--spec-model/--spec-tokens``, dotted
options (which replace, not merge), ``_``/``-`` in names and keys, the last occurrence
winning, ``--config FILE`` (but not ``--config=FILE``, which vLLM never reads).

Fail closed: a file that shows no vLLM serving command (``docker pull``, chart values,
an image started without visible arguments, a command with no model) is
:class:`~qualgate.vllm033.deployments.NoServeCommand`; a mapping that names no model, a
structure qualgate does not read (a config nested under another key), a misspelt or abbreviated speculative
option, a shell variable in the command, speculative settings outside the vLLM command or
an unbalanced quote are a :class:`DataError` naming the token and its line (exit 3), never
a target-only, lossless config.

The config id is computed with :func:`qualgate.config.decoding.config_id`, the function the harness
stores with every record, so a served config and the harness config that produced the
evidence have the same id exactly when they ask the engine for the same thing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from qualgate.errors import DataError
from qualgate.records.strict import LIMITS, compose_yaml, decode_text, loads_yaml, read_text
from qualgate.vllm033.arguments import ARGUMENTS
from qualgate.vllm033.cli_args import (
    _ENTRY_SERVE,
    _SPECULATIVE_WORD,
    _from_start,
    _mapping_args,
    _serve_args,
    parse_command_line,
)
from qualgate.vllm033.deployments import NoServeCommand, read_deployment
from qualgate.vllm033.serving_config import _NUMERIC_KEYS, ServingConfig, _key_lines
from qualgate.vllm033.shell import read_script, vllm_start

__all__ = ["ServingConfig", "parse_command_line", "read_serving_config"]

# --------------------------------------------------------------------------- mappings

#: a key vLLM's parser could take as ``--KEY`` (lower case, digits, ``-``/``_``, dotted)
_OPTION_KEY = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")
#: keys of chart values and manifests that are no vLLM option
_NOT_OPTIONS = {"image", "replicas", "resources", "service", "ingress", "env", "kind", "apiVersion", "metadata", "spec"}


def _from_decoding(data: Mapping, *, path: str, lines: dict[str, int]) -> ServingConfig:
    """A qualgate decoding config, validated as the harness validates it."""
    from qualgate.config.decoding import parse_config

    parse_config(data, path=path)  # unknown keys, sampling ranges, ... exit 3 like `run`
    engine_options = {str(k): v for k, v in (data.get("engine_options") or {}).items()}
    options = {k: v for k, v in engine_options.items() if k in _NUMERIC_KEYS}
    # the engine options that are vLLM arguments (not the harness's own: batch_size, ...)
    arguments = {k: v for k, v in engine_options.items() if k in ARGUMENTS and k not in _NUMERIC_KEYS}
    spec = data.get("speculative")
    lines = {
        ("speculative_config" + k[len("speculative") :] if k.split(".")[0] == "speculative" else k): v
        for k, v in lines.items()
    }
    lines.update({k.replace("engine_options.", ""): v for k, v in lines.items() if k.startswith("engine_options.")})
    return ServingConfig(
        path=path,
        format="decoding-config",
        model=data.get("model"),
        speculative=dict(spec) if spec else None,
        options=options,
        sampling=dict(data.get("sampling") or {}),
        lines=lines,
        arguments=arguments,
    )


# --------------------------------------------------------------------------- entry point


def _mentions(node, out: list[tuple[str, int]]) -> None:
    """Scalars of a YAML node that mention speculative decoding, with their lines."""
    if isinstance(node, yaml.ScalarNode):
        if _SPECULATIVE_WORD.search(str(node.value)):
            out.append((str(node.value), node.start_mark.line + 1))
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _mentions(k, out)
            _mentions(v, out)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _mentions(v, out)


def _from_serving_mapping(data: Mapping, node, *, path: str) -> ServingConfig:
    """A ``vllm serve --config`` mapping, read as vLLM turns it into arguments."""
    lines = _key_lines(node)
    norm = {str(k).replace("-", "_") for k in data}
    foreign = sorted(str(k) for k in data if not _OPTION_KEY.match(str(k)) or str(k) in _NOT_OPTIONS)
    if foreign:
        raise NoServeCommand(
            f"no vLLM serving command found in {path}: key(s) {foreign[:5]} cannot be `vllm serve` "
            "options, so this is not a file for `vllm serve --config` (Helm values or a manifest "
            "that qualgate does not read); qualgate cannot see what runs",
            file=path,
            line=lines.get(str(foreign[0]).replace("-", "_")),
            field=foreign[0],
        )
    if "model" not in norm and not norm & {"speculative_config", "sc", "spec_method", "spec_model", "spec_tokens"}:
        found: list[tuple[str, int]] = []
        _mentions(node, found)
        what = (
            f"; it mentions {found[0][0]!r} at line {found[0][1]} in a structure qualgate does not read"
            if found
            else ""
        )
        raise DataError(
            "not understood as a serving config: a mapping needs `model` (and "
            "optionally `speculative-config`) as in a file for `vllm serve "
            f"--config`, or a qualgate decoding config{what}",
            file=path,
            line=found[0][1] if found else None,
            field=found[0][0] if found else None,
        )
    cfg = parse_command_line(_mapping_args(data, lines), path=path, fmt="serving-config", entry=_ENTRY_SERVE)
    spec_lines = {k: v for k, v in lines.items() if k.startswith("speculative_config.")}
    return dataclasses.replace(cfg, lines={**cfg.lines, **spec_lines})


def read_serving_config(
    path: str | Path, *, manifests: tuple = (), assume_entrypoint: str | None = None
) -> ServingConfig:
    """Read a serving config (any accepted format; see the module docstring).

    ``manifests``: more Kubernetes files whose ConfigMaps the file's containers read;
    ``assume_entrypoint``: ``serve``, ``api_server`` or ``none``, what an image started with
    only its arguments runs (:mod:`qualgate.vllm033.deployments`).

    Raises :class:`DataError` when the file cannot be read or parsed, shows no vLLM serving
    command, or holds a spelling that can touch speculative decoding and that qualgate
    cannot resolve exactly as vLLM 0.33 would (fail closed).
    """
    p = Path(path)
    if str(path) == "-":  # `helm template ... | qualgate check -`: stdin, files relative to the working directory
        import sys

        data = sys.stdin.buffer.read(LIMITS["yaml"] + 1)
        if len(data) > LIMITS["yaml"]:
            raise DataError(f"standard input over {LIMITS['yaml']:,} bytes (the limit qualgate reads)", file="-")
        text, spath = decode_text(data, file="<stdin>", bom="strip"), str(Path.cwd() / "<stdin>")
    else:
        _refuse_unrendered(p)
        text = read_text(p, kind="yaml", bom="strip")  # a regular file, UTF-8
        spath = str(p)
    cfg = read_deployment(text, path=spath, manifests=manifests, assume_entrypoint=assume_entrypoint)
    if cfg is None:
        cfg = _read_other(text, spath)
    if cfg.format in ("command-line", "args-file") and not cfg.model:
        raise NoServeCommand(
            f"no vLLM serving command found in {spath}: the vLLM command names no model; qualgate "
            "cannot say what is served, so it cannot say the config is lossless",
            file=spath,
        )
    return cfg


def _refuse_unrendered(p: Path) -> None:
    """A Helm chart or a kustomize folder (or a file inside one) is not what runs: its rendered
    output is. Refused with the way to give that."""
    how = {
        "helm": "helm template RELEASE CHART -f VALUES | qualgate check -",
        "kustomize": "kubectl kustomize DIR | qualgate check -",
    }
    for d in [p] + list(p.resolve().parents)[:3] if p.is_dir() else [p.parent, *list(p.resolve().parents)[:3]]:
        kind = (
            "helm"
            if (d / "Chart.yaml").is_file()
            else "kustomize"
            if any((d / k).is_file() for k in ("kustomization.yaml", "kustomization.yml", "Kustomization"))
            else None
        )
        if kind == "kustomize" and d not in (p, p.parent):
            continue  # a kustomization further up need not list this file
        if kind:
            raise DataError(
                f"{'a Helm chart' if kind == 'helm' else 'a kustomize folder'} ({d}): what runs is its rendered "
                f"output (overlays, patches and values applied), not this file; render it first: {how[kind]}",
                file=str(p),
            )


def _read_other(text: str, spath: str) -> ServingConfig:
    """A command line, an args file, a ``--config`` mapping or a decoding config."""

    script = shell_error = None
    launches = re.search(r"\bvllm\b[^\n]*\bserve\b|vllm\.entrypoints|vllm/vllm-openai", text)
    if "vllm" in text or re.match(r"\s*--?[A-Za-z]", text):
        try:
            script = read_script(text, path=spath)
        except DataError as exc:  # maybe YAML/JSON with quotes a shell would not balance
            if launches:
                raise
            shell_error = exc
    if script is not None and script.commands:
        start = vllm_start(script, lambda words: _serve_args(list(words)) is not None, path=spath)
        if start is not None:
            return _from_start(script, start, path=spath)
        commands = [list(c.words) for c in script.commands]
        if re.match(r"--?[A-Za-z]", commands[0][0][0]):
            return parse_command_line([w for c in commands for w in c], path=spath, fmt="args-file")

    try:  # strict: no aliases, no duplicate keys, no NaN
        node = compose_yaml(text, file=spath)
        data = loads_yaml(text, file=spath)
    except DataError as exc:
        if shell_error is not None:
            raise shell_error from None
        raise DataError(
            f"neither a vllm serve command line nor valid YAML/JSON: {exc.message}",
            file=exc.file,
            line=exc.line,
            field=exc.field,
        ) from exc
    if not isinstance(data, Mapping):
        if shell_error is not None:
            raise shell_error
        if "vllm" in text:
            raise NoServeCommand(
                f"no vLLM serving command found in {spath}: it names vLLM but starts no server "
                "(`vllm serve`, `python -m vllm.entrypoints...`, `docker run ... vllm/vllm-openai`)",
                file=spath,
            )
        raise DataError(
            "expected a serving config mapping (model, speculative_config), a "
            "decoding config, or a vllm serve command line",
            file=spath,
            value=data if not isinstance(data, str) else data[:80],
        )
    if any(str(k) in ("engine", "sampling", "engine_options") for k in data):
        return _from_decoding(data, path=spath, lines=_key_lines(node))
    return _from_serving_mapping(data, node, path=spath)
