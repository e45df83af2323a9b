"""vLLM 0.33's command-line reading, mirrored: ``vllm serve`` (and the api_server module's)
arguments become the model, the speculative config and the serving options exactly as
vLLM's ``FlexibleArgumentParser`` and ``EngineArgs.create_speculative_config`` read them.

Each step names the row of :data:`qualgate.vllm033.rules.TABLE` it applies. A spelling that can
touch speculative decoding and that qualgate cannot resolve exactly (an abbreviated option,
an option vLLM does not register, a shell variable, speculative settings inside another
option's value) raises :class:`DataError`: fail closed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.records.strict import compose_yaml, loads_yaml, read_text
from qualgate.vllm033.arguments import ARGUMENTS, dest_of
from qualgate.vllm033.rules import cite, rule
from qualgate.vllm033.serving_config import _NUMERIC_KEYS, SERVING_OPTIONS, Loc, ServingConfig, _key_lines


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


_ENTRY_SERVE, _ENTRY_API, _ENTRY_EITHER = "vllm serve", "api_server", "serve or api_server"
_RUNNERS = ("docker", "podman", "nerdctl")


@dataclasses.dataclass(frozen=True)
class Container:
    """What a command shows about the container vLLM runs in (rule ``container-config-path``):
    ``mounts`` maps a container path to a host path (relative to the script) or to the text
    of a file (a Kubernetes ConfigMap); ``unmounted`` lists container paths mounted from
    somewhere qualgate cannot read (a named volume, a PVC, an absolute host path)."""

    workdir: str | None = None
    mounts: tuple[tuple[str, str | Mapping[str, str]], ...] = ()  #: a host path, or ConfigMap files
    unmounted: tuple[str, ...] = ()
    #: no container: a script run on the host, ``workdir`` relative to the script's directory
    #: (``None``: unknown, ``why`` says why)
    host: bool = False
    why: str = ""
    env: tuple[tuple[str, str | None], ...] = ()  #: ``-e NAME=VALUE`` (``None``: not shown)
    image: str | None = None


def _docker_mounts(words: list[str]) -> Container:
    """``-v/--volume``, ``--mount type=bind`` and ``-w/--workdir`` of ``docker run`` words."""
    workdir, mounts, unmounted, env = None, [], [], []
    i = 0
    while i < len(words):
        w = words[i]
        name, eq, value = w.partition("=")
        if name in ("-e", "--env"):
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
            k, has, v = value.partition("=")
            env.append((k, (None if "$" in v else v) if has else None))
        elif name == "--env-file":
            env.append(("--env-file", None))
            i += 0 if eq else 1
        elif name in ("-v", "--volume", "--mount", "-w", "--workdir"):
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
            if name in ("-w", "--workdir"):
                workdir = value
            elif name == "--mount":
                kv = dict(p.partition("=")[::2] for p in value.split(","))
                src = kv.get("source") or kv.get("src")
                dst = kv.get("target") or kv.get("destination") or kv.get("dst")
                if dst and kv.get("type") == "bind" and _host_relative(src):
                    mounts.append((dst, src))
                elif dst:
                    unmounted.append(dst)
            else:
                parts = value.split(":")
                if len(parts) >= 2:
                    if _host_relative(parts[0]):
                        mounts.append((parts[1], parts[0]))
                    else:
                        unmounted.append(parts[1])
        i += 1
    return Container(workdir, tuple(mounts), tuple(unmounted), env=tuple(env))


def _host_relative(src: str | None) -> bool:
    """A bind source that names a path relative to the file (``./x``, ``../x``), not a named
    volume, an absolute host path or one with a variable."""
    return bool(src) and src.startswith(".") and "$" not in src


def _serve_args(words: list[tuple[str, int]]):
    """``(entry, arguments, container)`` of a vLLM start in one shell command, or ``None``
    (``container``: what ``docker run`` shows of the container, else ``None``)."""
    names = [w for w, _ in words]
    runner = next(
        (j for j, w in enumerate(names[:-1]) if os.path.basename(w) in _RUNNERS and names[j + 1] in ("run", "create")),
        None,
    )
    for j, w in enumerate(names):
        if w == "serve" and j > 0 and os.path.basename(names[j - 1]) == "vllm":
            box = _docker_mounts(names[runner + 2 : j]) if runner is not None and runner < j else None
            return _ENTRY_SERVE, words[j + 1 :], box
        if w.startswith("vllm/vllm-openai") and runner is not None and runner < j:  # docker run ... IMAGE ARGS
            if any(n.partition("=")[0] == "--entrypoint" for n in names[runner + 2 : j]):
                return None
            box = dataclasses.replace(_docker_mounts(names[runner + 2 : j]), image=w)
            return _ENTRY_EITHER, words[j + 1 :], box
        if w == "-m" and j + 1 < len(names):
            mod = names[j + 1]
            box = _docker_mounts(names[runner + 2 : j]) if runner is not None and runner < j else None
            if mod in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.launchers.api_server.entry"):
                return _ENTRY_API, words[j + 2 :], box
            if mod == "vllm.entrypoints.cli.main" and names[j + 2 : j + 3] == ["serve"]:
                return _ENTRY_SERVE, words[j + 3 :], box
    return None


#: deepest JSON value read in an argument, and most levels of a dotted option
#: (``--speculative-config.a.b``); vLLM's configs nest 3 levels
MAX_JSON_DEPTH = 64
MAX_DOTTED_LEVELS = 16


def _json_loads(text: str):
    """``json.loads`` bounded: nesting deeper than :data:`MAX_JSON_DEPTH` is a ``ValueError``
    naming the limit, never a RecursionError."""
    depth = top = 0
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        in_str = esc = False
        for c in text:
            if in_str:
                esc, in_str = (False, True) if esc else (c == "\\", c != '"')
            elif c == '"':
                in_str = True
            elif c in "[{":
                depth += 1
                top = max(top, depth)
                if top > MAX_JSON_DEPTH:
                    raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels (the limit qualgate reads)")
            elif c in "]}":
                depth -= 1
    return json.loads(text)


def _scalar(text: str):
    try:
        return _json_loads(text)
    except ValueError:  # not JSON, or a number over Python's 4,300 digits: kept as written
        return text


def _dotted_value(text: str):
    """A dotted option's value as vLLM reads it (rule ``cli-dotted``)."""
    try:
        return _json_loads(text)
    except ValueError:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
        if m:
            n, suf = m.groups()
            if suf in "kmgt":
                return int(float(n) * 10 ** (3 * "kmgt".index(suf) + 3))
            if "." not in n:
                return int(n) * 2 ** (10 * "KMGT".index(suf) + 10)
        try:
            return int(text.strip())
        except ValueError:  # not a number, or one over 4,300 digits
            return text


#: options whose names mention speculative decoding and that do not change what is decoded
_HARMLESS = ("--per-request-spec-decode-metrics", "--specialize-active-lora")
#: an option name or a value that mentions speculative decoding
_SPECULATIVE_WORD = re.compile(r"(?i)spec|draft|fly|rejection|eagle|dflash|dspark|ngram|medusa|mtp")
_SPECULATIVE_VALUE = re.compile(
    r"(?i)speculative|rejection.sample|fly.window|fly.entropy|spec.method|spec.tokens|spec.model"
)
_FLAG_PREFIXES = ("--no-", "--enable-", "--disable-")
_FLAGS = {"--trust-remote-code", "--enforce-eager", "--headless", "--async-scheduling", "--grpc"}
_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _scan_other_commands(commands, serve_words, *, path: str) -> None:
    """Refuse a script that mentions speculative decoding outside its vLLM command (a
    variable or a file that the command reads at run time)."""
    used = {id(w) for w in serve_words}
    for c in commands:
        for w in c:
            if id(w) not in used and _SPECULATIVE_VALUE.search(w[0]):
                raise DataError(
                    f"{w[0][:60]!r} mentions speculative decoding outside the vllm "
                    "command (a shell variable or file read at run time); qualgate "
                    "cannot resolve it exactly as vLLM 0.33 would, so it refuses "
                    "it",
                    file=path,
                    line=w[1],
                    field=w[0][:60],
                )


def _refuse(msg, *, path, line, token, rule_id) -> DataError:
    return DataError(
        f"{msg} ({cite(rule_id)}); qualgate cannot resolve it exactly as vLLM 0.33 would, so it refuses it",
        file=path,
        line=line,
        field=token,
    )


def _open_config(value: str, line: int, *, path: str, container: Container | None) -> tuple[str, str]:
    """``(text, name)`` of the file vLLM opens for ``--config VALUE``: next to ``path`` on the
    host, or inside a container only through a mount the files show (rules
    ``cli-config-file``, ``container-config-path``)."""

    def refuse(why):
        return _refuse(
            f"--config {value}: {why}", path=path, line=line, token="--config", rule_id="container-config-path"
        )

    if value.startswith("~"):
        raise refuse("`~` is the home directory of whoever runs the command, which the files do not show")
    if container is None or container.host:
        base = Path(path).parent
        if container is not None and not posixpath.isabs(value):
            if container.workdir is None:
                raise refuse(f"a relative path is opened from the working directory, and {container.why}")
            base = base / container.workdir
        elif container is not None:
            raise refuse("an absolute path of the machine that runs the command, which qualgate cannot read")
        cfg = base / value
        return read_text(cfg, kind="yaml", bom="strip"), str(cfg)
    if not posixpath.isabs(value):
        if not container.workdir:
            raise refuse(
                "a relative path inside the container is opened from its working directory, which the "
                "file does not show (the image's default cannot be read)"
            )
        value_abs = posixpath.join(container.workdir, value)
    else:
        value_abs = value
    target = posixpath.normpath(value_abs)
    for dst in container.unmounted:
        d = posixpath.normpath(dst)
        if target == d or target.startswith(d.rstrip("/") + "/"):
            raise refuse(f"{dst} is mounted from a volume or host path that qualgate cannot read")
    best = None
    for dst, src in container.mounts:
        d = posixpath.normpath(dst)
        if (target == d or target.startswith(d.rstrip("/") + "/")) and (best is None or len(d) > len(best[0])):
            best = (d, src)
    if best is None:
        raise refuse(f"{target} is in no mount the file shows, so it is the image's own file or absent")
    d, src = best
    rest = target[len(d) :].lstrip("/")
    if isinstance(src, Mapping):  # a ConfigMap: its keys are the files of the directory
        if rest not in src:
            raise refuse(f"the ConfigMap mounted at {d} has no file {rest or '(the mount itself)'}")
        return src[rest], f"{path}: ConfigMap file {target}"
    host = Path(path).parent / src / rest if rest else Path(path).parent / src
    return read_text(host, kind="yaml", bom="strip"), str(host)


def _config_file_args(value: str, line: int, *, path: str, container: Container | None):
    """``--config FILE``: the file's options as words (rule ``cli-config-file``), each line a
    :class:`~qualgate.vllm033.serving_config.Loc` of the file, and the lines of the
    ``speculative-config`` keys inside it (``--speculative-config.KEY``)."""
    if value.split(".")[-1] not in ("yaml", "yml"):
        raise _refuse(
            f"vLLM reads only .yaml/.yml files with --config, got {value!r}",
            path=path,
            line=line,
            token="--config",
            rule_id="cli-config-file",
        )
    try:  # strict: a regular file, no aliases, no duplicate keys
        text, name = _open_config(value, line, path=path, container=container)
        data = loads_yaml(text, file=name)
        lines = _key_lines(compose_yaml(text, file=name))
    except DataError as exc:
        if exc.field == "--config" and exc.file == path:
            raise
        raise DataError(
            f"the file given to --config cannot be read: {exc}", file=path, line=line, field="--config", value=value
        ) from exc
    if not isinstance(data, Mapping):
        raise DataError(
            "the file given to --config is not a mapping of options",
            file=path,
            line=line,
            field="--config",
            value=value,
        )
    lines = {k: Loc(v, name) for k, v in lines.items()}
    return _mapping_args(data, lines, default_line=line), {
        "--speculative-config" + k[len("speculative_config") :]: v
        for k, v in lines.items()
        if k.startswith("speculative_config.")
    }


def _mapping_args(data: Mapping, lines: dict[str, int], *, default_line: int | None = None) -> list[tuple[str, int]]:
    """A vLLM ``--config`` mapping as command-line words, as vLLM builds them."""
    out: list[tuple[str, int]] = []
    for key, value in data.items():
        at = lines.get(str(key).replace("-", "_"), default_line) or 0
        opt = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append((opt, at))
            else:
                out.append((f"--no-{key}", at))  # only where vLLM registers it; else dropped
        elif isinstance(value, list):
            if value:
                out += [(opt, at)] + [(str(v), at) for v in value]
        elif isinstance(value, Mapping):
            out += [(opt, at), (json.dumps(value), at)]
        else:
            out += [(opt, at), (str(value), at)]
    return out


def _flexible(args: list[tuple[str, int]], *, path: str, serve: bool, container: Container | None = None):
    """vLLM's FlexibleArgumentParser.parse_args rewriting of the words, before argparse."""
    names = [w for w, _ in args]
    if serve:  # --model M becomes the positional model (rule serve-model)
        at = next((i for i, w in enumerate(names) if re.match(r"^--model(=.+|$)", w)), None)
        if at is not None:
            if names[at] == "--model":
                if at + 1 >= len(args):
                    raise DataError("--model needs a value", file=path, line=args[at][1])
                tag, rest = (args[at + 1][0], args[at][1]), at + 2
            else:
                tag, rest = (names[at].removeprefix("--model="), args[at][1]), at + 1
            args = [tag, *args[:at], *args[rest:]]
            names = [w for w, _ in args]
    file_lines: dict[str, int] = {}
    if names.count("--config") > 1:
        raise DataError("more than one --config (vLLM asserts one)", file=path)
    if "--config" in names:  # rule cli-config-file
        i = names.index("--config")
        if i + 1 >= len(args):
            raise DataError("--config needs a file", file=path, line=args[i][1])
        extra, file_lines = _config_file_args(args[i + 1][0], args[i][1], path=path, container=container)
        model_first = serve and args and not args[0][0].startswith("-")
        head = args[:1] if model_first else []
        args = head + extra + args[len(head) : i] + args[i + 2 :]
    out: list[tuple[str, int]] = []
    for word, line in args:  # rule cli-underscores
        if word.startswith("--"):
            key, eq, value = word.partition("=")
            head, dot, tail = key[2:].partition(".")
            word = "--" + head.replace("_", "-") + dot + tail + eq + value
        out.append((word, line))
    dotted: dict[str, dict] = {}
    dotted_line: dict[str, int] = dict(file_lines)
    keep: list[tuple[str, int]] = []
    skip = set()
    for i, (word, line) in enumerate(out):  # rule cli-dotted
        if i in skip:
            continue
        if not (word.startswith("-") and "." in word):
            keep.append((word, line))
            continue
        name, eq, value = word.partition("=")
        if eq and "." not in name:
            keep.append((word, line))
            continue
        if not eq:
            if i + 1 >= len(out):
                raise DataError(f"{word} needs a value", file=path, line=line, field=word)
            value = out[i + 1][0]
            skip.add(i + 1)
        append = name.endswith("+")
        name = name.removesuffix("+")
        opt, *keys = name.split(".", MAX_DOTTED_LEVELS + 1)
        if len(keys) > MAX_DOTTED_LEVELS:
            raise DataError(
                f"a dotted option of more than {MAX_DOTTED_LEVELS} levels (the limit qualgate reads)",
                file=path,
                line=line,
                field=name[:80],
            )
        val = json.dumps(value.split(",")) if append else value
        node = dotted.setdefault(opt, {})
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        leaf = _dotted_value(val)
        if isinstance(leaf, list) and isinstance(node.get(keys[-1]), list):
            node[keys[-1]] += leaf
        else:
            node[keys[-1]] = leaf
        dotted_line.setdefault(opt, line)
        dotted_line[f"{opt}.{keys[0]}"] = line
    for opt, value in dotted.items():
        keep += [(opt, dotted_line[opt]), (json.dumps(value), dotted_line[opt])]
    return keep, dotted_line


def parse_command_line(
    args: list[tuple[str, int]], *, path: str, fmt: str, entry: str = _ENTRY_EITHER, container: Container | None = None
):
    """Build a :class:`ServingConfig` from vLLM arguments ``(word, line)``, as vLLM 0.33's
    argument parser and ``EngineArgs.create_speculative_config`` read them (each step a
    function named for the rule of :mod:`qualgate.vllm033.rules` it applies). ``container``:
    the container vLLM runs in, where a ``--config`` file is opened (``None``: the host,
    next to ``path``)."""

    if entry == _ENTRY_EITHER:  # the docker image's entrypoint is not in the wheel
        return _api_server_model(args, path=path, fmt=fmt, container=container)
    serve = entry == _ENTRY_SERVE
    words, dotted_lines = _flexible(list(args), path=path, serve=serve, container=container)
    r = _Reading(words, path, dotted_lines)
    while r.i < len(words):
        _read_option(r)
    _serve_model(r, serve)
    spec = _cli_spec_flags_merge(r)
    return ServingConfig(
        path=path,
        format=fmt,
        model=r.model,
        speculative=spec,
        options=r.options,
        lines=r.lines,
        notes=tuple(r.notes),
        arguments=r.arguments,
    )


def _api_server_model(args, *, path: str, fmt: str, container: Container | None = None):
    """Arguments for either entrypoint must mean the same under both (rule ``api-server-model``)."""
    a = parse_command_line(args, path=path, fmt=fmt, entry=_ENTRY_SERVE, container=container)
    b = parse_command_line(args, path=path, fmt=fmt, entry=_ENTRY_API, container=container)
    if (a.model, a.speculative) != (b.model, b.speculative):
        raise _refuse(
            f"these arguments mean model {a.model!r} under `vllm serve` and "
            f"{b.model!r} under the api_server module, and the image's "
            "entrypoint cannot be read from the wheel; pass --model only",
            path=path,
            line=args[0][1] if args else None,
            token="model",
            rule_id="api-server-model",
        )
    return dataclasses.replace(
        a, notes=(*a.notes, "read as `vllm serve` arguments; the same under the api_server entrypoint")
    )


@dataclasses.dataclass
class _Reading:
    """The arguments read so far by :func:`parse_command_line` (``i``: the next word)."""

    words: list[tuple[str, int]]
    path: str
    dotted_lines: dict[str, int]
    i: int = 0
    spec_value: Any = None  #: the last -sc / --speculative-config value (rule cli-last-wins)
    spec_line: int | None = None
    flag_values: dict[str, tuple[Any, int]] = dataclasses.field(default_factory=dict)
    model: str | None = None
    model_line: int | None = None
    positional: tuple[str, int] | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    lines: dict[str, int] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.sc_opts = rule("cli-sc-alias").data["options"]
        self.spec_flags = rule("cli-spec-flags").data["flags"]
        self.parallel = {o: k for k, opts in rule("cli-parallel").data["options"].items() for o in opts}
        self.long_names = (*self.sc_opts, *self.spec_flags)

    def known(self, name: str) -> bool:
        return name in self.long_names or name in self.parallel or name in ("--model", "--config")

    def next_is_option(self) -> bool:
        """No word follows, or the next is an option (not a negative number)."""
        if self.i + 1 >= len(self.words):
            return True
        nxt = self.words[self.i + 1][0]
        return nxt.startswith("-") and not _NEG_NUMBER.match(nxt)


def _read_option(r: _Reading) -> None:
    """Read the word at ``r.i`` (with its value) and move past it."""

    word, line = r.words[r.i]
    if "$" in word or "`" in word:
        raise _refuse(
            f"{word!r} is expanded by the shell at run time", path=r.path, line=line, token=word, rule_id="cli-sc-alias"
        )
    if not word.startswith("-") or word == "-" or _NEG_NUMBER.match(word):
        _positional(r, word, line)
        return
    name, eq, value = word.partition("=")
    known = r.known(name)
    _cli_abbrev(r, name, known, line)
    _cli_spec_flags_registered(r, name, known, line)
    value, value_line = _option_value(r, name, eq, value, known, line)
    key = name.lstrip("-").replace("-", "_")
    if name in r.sc_opts:
        _cli_sc_alias(r, name, value, line, value_line)
    elif name in r.spec_flags:
        _cli_spec_flags(r, name, value, line)
    elif name == "--model":
        r.model, r.model_line = value, line
    elif name == "--config":
        _cli_config_equals(r, word, line)
    elif name in r.parallel:
        _cli_parallel(r, name, value, line)
    elif name == "-q" or key in _NUMERIC_KEYS:
        _numeric_option(r, name, key, value, line)
    elif name == "--attention-backend":
        _cli_attention_backend(r, value, line)
    elif value is not None and _SPECULATIVE_VALUE.search(value):
        raise _refuse(
            f"the value of {name} mentions speculative decoding",
            path=r.path,
            line=line,
            token=name,
            rule_id="cli-spec-flags",
        )
    else:
        _other_argument(r, name, value, line)


def _positional(r: _Reading, word: str, line: int) -> None:
    if r.positional is not None:
        raise DataError(
            f"an unexpected positional argument {word!r} (vLLM's parser refuses it)", file=r.path, line=line, field=word
        )
    r.positional = (word, line)
    r.i += 1


def _cli_abbrev(r: _Reading, name: str, known: bool, line: int) -> None:
    """Rule ``cli-abbrev``: argparse takes a prefix of a long option for the option."""
    if (
        not known
        and name.startswith("--")
        and any(o.startswith(name) and o != name for o in r.long_names if o.startswith("--"))
    ):
        raise _refuse(
            f"{name} is a prefix of a speculative option, which argparse accepts as an abbreviation",
            path=r.path,
            line=line,
            token=name,
            rule_id="cli-abbrev",
        )


def _cli_spec_flags_registered(r: _Reading, name: str, known: bool, line: int) -> None:
    """Rule ``cli-spec-flags``: an option that mentions speculative decoding must be one vLLM
    registers for it."""
    if not known and name not in _HARMLESS and _SPECULATIVE_WORD.search(name.lstrip("-")):
        raise _refuse(
            f"{name} mentions speculative decoding but is not an option vLLM "
            "0.33 registers for it (-sc, --speculative-config, --spec-method, "
            "--spec-model, --spec-tokens)",
            path=r.path,
            line=line,
            token=name,
            rule_id="cli-spec-flags",
        )


def _option_value(r: _Reading, name: str, eq: str, value: str, known: bool, line: int):
    """``(value, its line)`` of the option at ``r.i`` (``None`` for a flag), moving past both."""
    if eq:
        r.i += 1
        return value, line
    takes_value = known or not (name in _FLAGS or name.startswith(_FLAG_PREFIXES) or r.next_is_option())
    if takes_value and r.next_is_option():
        raise DataError(
            f"{name} expects a value (vLLM's parser refuses it without)", file=r.path, line=line, field=name
        )
    value, value_line = r.words[r.i + 1] if takes_value else (None, line)
    _expanded(r, value, value_line)
    r.i += 2 if takes_value else 1
    if takes_value and name in rule("cli-nargs").data["options"]:  # nargs="+": up to the next option
        while r.i < len(r.words) and not (r.words[r.i][0].startswith("-") and not _NEG_NUMBER.match(r.words[r.i][0])):
            _expanded(r, *r.words[r.i])
            value = f"{value} {r.words[r.i][0]}"
            r.i += 1
    return value, value_line


def _expanded(r: _Reading, value: str | None, line: int) -> None:
    """An option's value that a shell or docker compose fills in at run time is refused, as
    the option word itself is: unquoted, its words are split (``--api-key $KEY`` with
    ``KEY="x --speculative-config {...}"`` adds options), and a word that continues a list
    option (``--served-model-name m "$EXTRA"``) can be an option."""
    if value is not None and ("$" in value or "`" in value):
        raise _refuse(
            f"{value!r} is expanded at run time (a shell or docker compose variable)",
            path=r.path,
            line=line,
            token=value,
            rule_id="cli-sc-alias",
        )


def _cli_sc_alias(r: _Reading, name: str, value, line: int, value_line) -> None:
    """-sc / --speculative-config JSON (rules cli-sc-alias, cli-last-wins, cli-json-none)."""
    if value in rule("cli-json-none").data["none"]:
        r.spec_value, r.spec_line = None, line
        return
    try:
        r.spec_value = _json_loads(value)
    except ValueError as exc:
        why = f"{exc.msg} (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise DataError(f"not valid JSON: {why}", file=r.path, line=line, field=name, value=value) from exc
    r.spec_line = line
    if not isinstance(r.spec_value, dict):
        raise DataError(
            "must be a JSON object of speculative_config keys", file=r.path, line=line, field=name, value=r.spec_value
        )
    for sub in r.spec_value:  # the line of each key inside a multi-line JSON value
        at = value.find(f'"{sub}"')
        where = f"speculative_config.{str(sub).replace('-', '_')}"
        if at >= 0 and value_line is not None:
            r.lines[where] = value_line + value.count("\n", 0, at)
        if f"{name}.{sub}" in r.dotted_lines:
            r.lines[where] = r.dotted_lines[f"{name}.{sub}"]


def _cli_spec_flags(r: _Reading, name: str, value, line: int) -> None:
    """Rule ``cli-spec-flags``: --spec-method, --spec-model, --spec-tokens."""
    raw = value
    if r.spec_flags[name] == "num_speculative_tokens":
        try:
            raw = int(value)
        except ValueError as exc:
            raise DataError(
                "must be an integer (vLLM parses it with int)", file=r.path, line=line, field=name, value=value
            ) from exc
    r.flag_values[name] = (raw, line)


def _cli_config_equals(r: _Reading, word: str, line: int) -> None:
    """Rule ``cli-config-equals``: ``--config=FILE`` is never read."""
    r.notes.append(
        f"{word}: vLLM reads a --config file only when `--config` and the "
        f"file are separate words; this one is never read "
        f"({cite('cli-config-equals')})"
    )
    r.lines["--config="] = line


def _cli_attention_backend(r: _Reading, value, line: int) -> None:
    """Rule ``cli-attention-backend``: a member of AttentionBackendEnum, or ``auto``."""
    if str(value).lower() != "auto" and str(value).upper() not in rule("cli-attention-backend").data["members"]:
        raise DataError(
            f"--attention-backend {value}: not a member of vLLM 0.33's AttentionBackendEnum, so vLLM does "
            f"not start ({cite('cli-attention-backend')})",
            file=r.path,
            line=line,
            field="--attention-backend",
            value=value,
        )


def _cli_parallel(r: _Reading, name: str, value, line: int) -> None:
    """Rule ``cli-parallel``: the parallelism options and their short forms."""
    r.options[r.parallel[name]] = _scalar(value)
    r.lines[r.parallel[name]] = line


def _numeric_option(r: _Reading, name: str, key: str, value, line: int) -> None:
    """The options that change numerics (in the config id) and the serving options."""

    key = "quantization" if name == "-q" else key
    r.options[key] = _scalar(value) if key in SERVING_OPTIONS else value
    if key in SERVING_OPTIONS and isinstance(value, str) and value.strip().isdigit() and r.options[key] == value:
        raise DataError(
            f"{len(value.strip())} digits: over the 4,300 that Python's int() (and so vLLM's parser) reads",
            file=r.path,
            line=line,
            field=name,
            value=value,
        )
    r.lines[key] = line


def _other_argument(r: _Reading, name: str, value, line: int) -> None:
    """Any other option, by its destination (:mod:`qualgate.vllm033.arguments`): a flag is
    ``True`` (``--no-X``: ``False``); one vLLM 0.33 does not register keeps its name."""
    dest = dest_of(name)
    if value is None:
        value = not (name.startswith("--no-") and dest is not None and "--" + name[5:] in ARGUMENTS[dest].options)
    key = dest if dest is not None else name
    r.arguments[key] = value
    r.lines[key] = line


def _serve_model(r: _Reading, serve: bool) -> None:
    """The model (rules serve-model, api-server-model)."""
    if serve and r.positional is not None:
        r.model, r.model_line = r.positional
    elif not serve and r.positional is not None:
        r.notes.append(
            f"the positional {r.positional[0]!r} is ignored by the api_server module ({cite('api-server-model')})"
        )
    if r.model_line is not None:
        r.lines["model"] = r.model_line


def _cli_spec_flags_merge(r: _Reading) -> dict[str, Any] | None:
    """create_speculative_config: the flags merged into the JSON (rules cli-spec-flags-merge,
    spec-key-hyphens)."""
    spec = dict(r.spec_value) if r.spec_value is not None else None
    for flag, (value, line) in r.flag_values.items():
        k = r.spec_flags[flag]
        spec = {} if spec is None else spec
        if k in spec:
            raise _refuse(
                f"{flag} and --speculative-config['{k}'] are mutually exclusive: vLLM refuses this command",
                path=r.path,
                line=line,
                token=flag,
                rule_id="cli-spec-flags-merge",
            )
        spec[k] = value
        r.lines[f"speculative_config.{k}"] = line
    if spec is not None:
        spec = {str(k).replace("-", "_"): v for k, v in spec.items()}
        r.lines["speculative_config"] = r.spec_line or min(
            v for k, v in r.lines.items() if k.startswith("speculative_config.")
        )
    return spec


# --------------------------------------------------------------------------- what runs it

#: ``VLLM_*`` variables that change nothing vLLM computes (an API key, logs, ports, caches):
#: one whose value the files do not show is not refused
_ENV_NO_OUTPUT = frozenset(
    {
        "VLLM_API_KEY",
        "VLLM_LOGGING_LEVEL",
        "VLLM_CONFIGURE_LOGGING",
        "VLLM_LOGGING_CONFIG_PATH",
        "VLLM_NO_USAGE_STATS",
        "VLLM_DO_NOT_TRACK",
        "VLLM_USAGE_SOURCE",
        "VLLM_PORT",
        "VLLM_HOST_IP",
        "VLLM_CACHE_ROOT",
        "VLLM_RPC_TIMEOUT",
        "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
        "VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "VLLM_LOG_STATS_INTERVAL",
    }
)
_IMAGE_RELEASE = re.compile(r"v?([0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:(?:rc|\.post|\.dev)[0-9]+)?)")


def vllm_environment(pairs, *, path: str, line: int | None, where: str = "") -> dict[str, str]:
    """The ``VLLM_*`` variables of ``pairs`` (``(name, value)``, the last one winning; a value
    ``None`` is one the files do not show), refusing one that can change what vLLM computes
    and whose value cannot be read."""
    env: dict[str, str | None] = {}
    for k, v in pairs:
        if k == "--env-file":
            env["--env-file"] = None
        elif str(k).startswith("VLLM_"):
            env[str(k)] = v
    if "--env-file" in env:
        raise DataError(
            f"{where}--env-file: the variables it sets (VLLM_* among them) cannot be read from the command; "
            "qualgate cannot tell what vLLM runs, so it refuses it (set them with -e NAME=VALUE)",
            file=path,
            line=line,
            field="--env-file",
        )
    for k, v in env.items():
        if v is None and k not in _ENV_NO_OUTPUT:
            raise DataError(
                f"{where}{k} is set for the server from a value the files do not show (a variable, a Secret, "
                "a file); it can change what vLLM computes, so qualgate refuses it (write the value out)",
                file=path,
                line=line,
                field=k,
            )
    return {k: v for k, v in env.items() if v is not None}


def image_version(image: str | None, where: str) -> tuple[str | None, str | None]:
    """``(version, source)`` of a ``vllm/vllm-openai`` image reference (``:v0.34.0`` ->
    ``0.34.0``); ``(None, why)`` for ``latest``, no tag, a digest alone, another image."""
    if not image:
        return None, None
    ref = image.split("@", 1)[0]
    repo, colon, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    if not repo.endswith("vllm/vllm-openai") and not repo.endswith("vllm/vllm-openai-cpu"):
        return None, f"{where}: image {image} is not vllm/vllm-openai, so its tag names no vLLM release"
    m = _IMAGE_RELEASE.fullmatch(tag)
    if m:
        return m.group(1), f"{where}: image {image}"
    why = "has no tag (docker takes latest)" if not colon else f"tag {tag!r} names no vLLM release"
    return None, f"{where}: image {image} {why}, so the vLLM version it runs can change"


def _from_start(script, start, *, path: str, container: Container | None = None, env=()) -> ServingConfig:
    """The :class:`ServingConfig` of the vLLM start of a shell script (:mod:`.shell`);
    ``container``: the container the script runs in (``None``: the host), ``env``: the
    environment it is given."""
    from qualgate.vllm033.shell import vllm_pin

    commands = [list(c.words) for c in script.commands] + [list(script.assigned)]
    entry, args, box = _serve_args(list(start.words))
    _scan_other_commands(commands, list(start.words), path=path)
    if box is None and container is not None:
        box = dataclasses.replace(container, workdir=start.cwd)
    elif box is None:
        box = Container(workdir=start.cwd, host=True, why=start.cwd_why)
    names = [w for w, _ in start.words]
    first = next((i for i, w in enumerate(names) if "vllm" in w or w in _RUNNERS or w == "-m"), len(names))
    env_words = [tuple(w.partition("=")[::2]) for w in names[:first] if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    env = vllm_environment([*env, *start.env, *env_words, *box.env], path=path, line=start.line)
    cfg = parse_command_line(args, path=path, fmt="command-line", entry=entry, container=box)
    version, source = vllm_pin(script, path=path)
    if box.image and source is None:
        version, source = image_version(box.image, f"{path}:{start.line}")
    return dataclasses.replace(cfg, environment=env, vllm_version=version, vllm_version_source=source)
