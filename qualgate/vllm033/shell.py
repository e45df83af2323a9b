"""A shell script read through a shell grammar (``bashlex``), whole or refused.

:func:`read_script` parses the script as bash does and lists its simple commands in the order
they appear, each with what the shell would give it: its words (quotes removed, assignments
and redirections left out: ``2>&1 | tee vllm.log`` is no argument), the variables exported to
it, the working directory ``cd`` left it in, and whether it runs unconditionally.
:func:`vllm_start` then finds the one command that starts vLLM, refusing what it cannot
resolve:

- a start inside control flow (``if``, ``case``, loops, after ``||``), in a function, in a
  command substitution, or after an ``exec`` (which never returns);
- a command whose name is computed at run time (``"$VLLM_BIN" serve``, ``$(which vllm)``):
  it can be vLLM;
- a shell function that the script calls (``vllm() { command vllm "$@" --config x; }``),
  ``alias``, ``eval``, and ``source``/``.`` of anything but a virtual environment's
  ``bin/activate``: each can change what a later command runs;
- a ``--config`` file that the script itself writes (a heredoc) or one opened from a
  directory the script does not show (``cd "$DIR"``, ``cd ~``, an absolute path on the
  machine that runs it).

Bounds: a script over :data:`MAX_SCRIPT` bytes, and nesting deeper than the parser's
recursion allows, are refused (exit 3) naming the limit.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re

from qualgate.errors import DataError

__all__ = ["MAX_SCRIPT", "Command", "Script", "read_script", "vllm_start", "vllm_pin"]

#: Longest shell script read, in bytes (the largest deployment script seen is under 20 KiB;
#: the parser costs about 1 ms a line).
MAX_SCRIPT = 256 * 1024

#: variables of the environment kept with a start (vLLM reads ``VLLM_*``; see ``vllm/envs.py``)
ENV_PREFIX = "VLLM_"


@dataclasses.dataclass(frozen=True)
class Command:
    """One simple command of a script."""

    words: tuple[tuple[str, int], ...]  #: ``(word, line)``: quotes removed, no assignment or redirection
    line: int
    env: tuple[tuple[str, str | None], ...]  #: exported variables and prefixes (``None``: computed)
    cwd: str | None  #: the directory ``cd`` left, relative to the script's ("": unchanged); None: unknown
    cwd_why: str  #: why ``cwd`` is unknown
    guard: str | None  #: why the command may not run, or run more than once (None: it runs)
    computed: str | None  #: the command's name when it is computed at run time


@dataclasses.dataclass(frozen=True)
class Script:
    commands: tuple[Command, ...]
    functions: dict[str, int]  #: shell functions defined, by name, with their lines
    blockers: tuple[tuple[str, int], ...]  #: ``alias``, ``eval``, ``source`` ..., with lines
    written: dict[str, int]  #: files the script writes (``>``, ``>>``), by path relative to the script
    assigned: tuple[tuple[str, int], ...] = ()  #: values of variable assignments, with lines


def _unquote(raw: str) -> tuple[str, bool]:
    """POSIX quote removal of one word's source text (``bashlex``'s own drops quotes inside
    quotes: ``x'{"a": 1}'``), and whether the shell would expand something in it (a ``$`` or a
    backquote outside single quotes, ``$'...'``)."""
    out, expands, i, n = [], False, 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if raw.startswith("\n", i + 1):
                i += 2
                continue
            out.append(raw[i + 1 : i + 2])
            i += 2
        elif c == "'":
            j = raw.find("'", i + 1)
            j = n if j < 0 else j
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '"\\$`\n':
                    if raw[i + 1] != "\n":
                        out.append(raw[i + 1])
                    i += 2
                    continue
                expands |= raw[i] in "$`"
                out.append(raw[i])
                i += 1
            i += 1
        else:
            expands |= c in "$`"
            out.append(c)
            i += 1
    return "".join(out), expands


def _parse(text: str, *, path: str):
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCRIPT:
        raise DataError(f"a shell script over {MAX_SCRIPT:,} bytes (the limit qualgate reads)", file=path)
    import bashlex

    try:
        return bashlex.parse(text)
    except RecursionError:
        raise DataError("the shell script nests deeper than the parser's recursion limit", file=path) from None
    except bashlex.errors.ParsingError as exc:
        line = text.count("\n", 0, max(0, min(exc.position, len(text)))) + 1
        what = ""
        if "looking for matching" in exc.message:
            what = (
                f"an unterminated {'single' if exc.message.endswith(chr(34) + chr(39) + chr(34)) else 'double'} quote: "
            )
        raise DataError(
            f"not a shell script the bash grammar reads: {what}{exc.message}", file=path, line=line
        ) from None
    except NotImplementedError as exc:  # case, arithmetic: refused rather than guessed
        raise DataError(
            f"a shell construct qualgate's shell parser does not read ({exc}); qualgate cannot tell what "
            "the script runs, so it refuses it (write the vLLM command out in a plain script)",
            file=path,
        ) from None


class _Walk:
    """The state a shell has while running the script top to bottom."""

    def __init__(self, text: str, line0: int, cwd: str | None, cwd_why: str, in_container: bool):
        self.text, self.line0, self.in_container = text, line0, in_container
        self.commands: list[Command] = []
        self.functions: dict[str, int] = {}
        self.blockers: list[tuple[str, int]] = []
        self.written: dict[str, int] = {}
        self.env: dict[str, str | None] = {}
        self.vars: dict[str, str | None] = {}
        self.allexport = False
        self.cwd, self.cwd_why = cwd, cwd_why
        self.exec_line: int | None = None
        self.assigned: list[tuple[str, int]] = []

    def word(self, w) -> tuple[str, bool]:
        return _unquote(self.text[w.pos[0] : w.pos[1]])

    def line(self, pos: int) -> int:
        return self.line0 + self.text.count("\n", 0, pos)

    def node(self, n, guard: str | None) -> None:
        kind = n.kind
        if kind == "command":
            self.command(n, guard)
        elif kind == "list":
            prev = None
            for p in n.parts:
                if p.kind == "operator":
                    prev = p.op
                    continue
                self.node(p, guard or (f"after `||` (line {self.line(p.pos[0])})" if prev == "||" else None))
        elif kind == "pipeline":
            for p in n.parts:
                if p.kind != "pipe":
                    self.node(p, guard)
        elif kind == "compound":
            keep = (self.cwd, self.cwd_why)
            subshell = any(p.kind == "reservedword" and p.word == "(" for p in n.list)
            for p in n.list:
                if p.kind != "reservedword":
                    self.node(p, guard)
            for r in getattr(n, "redirects", None) or ():
                self.redirect(r)
            if subshell:
                self.cwd, self.cwd_why = keep
        elif kind in ("if", "for", "while", "until"):
            why = guard or f"inside `{kind}` (line {self.line(n.pos[0])})"
            for p in n.parts:
                if p.kind not in ("reservedword", "word", "operator"):
                    self.node(p, why)
        elif kind == "function":
            name = n.name.word
            self.functions[name] = self.line(n.pos[0])
            self.node(n.body, f"in the shell function {name} (line {self.line(n.pos[0])})")
        elif kind == "commandsubstitution" or kind == "processsubstitution":
            self.node(n.command, guard or f"in a command substitution (line {self.line(n.pos[0])})")

    def redirect(self, r) -> None:
        if r.type in (">", ">>", ">|", "&>", "&>>") and getattr(r.output, "kind", None) == "word":
            target = self.word(r.output)[0]
            where = posixpath.normpath(posixpath.join(self.cwd, target)) if self.cwd is not None else target
            self.written[where] = self.line(r.pos[0])

    def substitutions(self, w, guard) -> bool:
        """Walk the command substitutions of a word; whether it expands anything."""
        expands = False
        for p in getattr(w, "parts", None) or ():
            if p.kind in ("commandsubstitution", "processsubstitution"):
                self.node(p, guard)
                expands = True
            elif p.kind == "parameter":
                expands = True
        return expands or "`" in w.word

    def command(self, n, guard: str | None) -> None:
        words, prefix, expanding = [], {}, []
        computed = None
        for p in n.parts:
            if p.kind == "assignment" and not words:
                text, expands = self.word(p)
                name, _, value = text.partition("=")
                prefix[name] = None if self.substitutions(p, guard) or expands else value
                self.assigned.append((value, self.line(p.pos[0])))
            elif p.kind == "word":
                text, expands = self.word(p)
                expands |= self.substitutions(p, guard)
                expanding.append(expands)
                words.append((text, self.line(p.pos[0])))
            elif p.kind == "redirect":
                self.redirect(p)
        at = self.line(n.pos[0])
        if guard is None and self.exec_line is not None:
            guard = f"after `exec` at line {self.exec_line}, which never returns"
        if not words:
            for k, v in prefix.items():
                self.vars[k] = v
                if self.allexport or k in self.env:
                    self.env[k] = v
            return
        if words[0][0] == "exec" and len(words) > 1:
            skip = 1
            while skip < len(words) and words[skip][0] in ("-c", "-l", "-a"):
                skip += 2 if words[skip][0] == "-a" else 1
            words, expanding = words[skip:], expanding[skip:]
            if guard is None:
                self.exec_line = at
        if words and expanding[0]:
            computed = words[0][0]
        name = words[0][0] if words else ""
        self.builtin(name, words, at, guard)
        self.commands.append(
            Command(
                tuple(words),
                at,
                tuple({**self.env, **prefix}.items()),
                self.cwd,
                self.cwd_why,
                guard,
                computed,
            )
        )

    def builtin(self, name: str, words, at: int, guard) -> None:
        args = [w for w, _ in words[1:]]
        if name in ("export", "declare", "typeset", "readonly"):
            exported = name == "export" or any(a.startswith("-") and "x" in a for a in args)
            for a in args:
                if a.startswith("-"):
                    continue
                k, eq, v = a.partition("=")
                value = (None if "$" in v or "`" in v else v) if eq else self.vars.get(k)
                self.vars[k] = value
                if exported:
                    self.env[k] = value
        elif name == "unset":
            for a in args:
                self.env.pop(a, None)
                self.vars.pop(a, None)
        elif name == "set" and any(a in ("-a", "allexport") or (a.startswith("-") and "a" in a) for a in args):
            self.allexport = True
        elif name in ("cd", "pushd", "popd"):
            target = args[-1] if args and name != "popd" else None
            if guard is not None:
                self.cwd, self.cwd_why = None, f"`{name}` {guard}"
            elif target is None or target.startswith("~") or target == "-":
                self.cwd, self.cwd_why = None, f"`{name}` at line {at} goes to a home or previous directory"
            elif "$" in target or "`" in target:
                self.cwd, self.cwd_why = None, f"`{name} {target}` at line {at} is computed at run time"
            elif posixpath.isabs(target) and self.in_container:
                self.cwd = posixpath.normpath(target)
            elif posixpath.isabs(target):
                self.cwd, self.cwd_why = (
                    None,
                    (f"`{name} {target}` at line {at}: an absolute directory of the machine that runs the script"),
                )
            elif self.cwd is not None:
                self.cwd = posixpath.normpath(posixpath.join(self.cwd, target))
        elif name in ("alias", "eval"):
            self.blockers.append((f"`{name}`", at))
        elif name == "shopt" and "expand_aliases" in args:
            self.blockers.append(("`shopt -s expand_aliases`", at))
        elif name in ("source", "."):
            if not (args and re.search(r"(^|/)bin/activate$", args[0])):
                self.blockers.append((f"`{name} {args[0] if args else ''}`", at))


def read_script(
    text: str, *, path: str, line: int = 1, cwd: str | None = "", cwd_why: str = "", in_container: bool = False
) -> Script:
    """The commands of a shell script (see the module docstring); ``line``: the line of the
    file where the script starts (a ``sh -c`` script inside a manifest); ``cwd``: the directory
    it starts in (``""``: the script's own; ``None``: unknown, ``cwd_why`` says why);
    ``in_container``: absolute directories are the container's, which the files describe."""
    trees = _parse(text, path=path)
    walk = _Walk(text, line, cwd, cwd_why, in_container)
    try:
        for t in trees:
            walk.node(t, None)
    except RecursionError:
        raise DataError("the shell script nests deeper than the parser's recursion limit", file=path) from None
    return Script(tuple(walk.commands), walk.functions, tuple(walk.blockers), walk.written, tuple(walk.assigned))


def _refuse(msg: str, *, path: str, line: int | None, field: str | None = None) -> DataError:
    return DataError(
        f"{msg}; qualgate cannot resolve what the script starts, so it refuses it (write the vLLM "
        "command out, unconditionally, in a plain script)",
        file=path,
        line=line,
        field=field,
    )


def vllm_start(script: Script, is_start, *, path: str) -> Command | None:
    """The command of ``script`` that starts vLLM (``is_start(words)`` says whether a
    command's words do), or ``None``; raises :class:`DataError` for what cannot be resolved."""
    starts = [c for c in script.commands if is_start(c.words)]
    for c in script.commands:
        if c.computed is not None:
            raise _refuse(
                f"the command name {c.computed!r} is computed at run time and can start vLLM",
                path=path,
                line=c.line,
                field=c.computed[:60],
            )
    called = {c.words[0][0] for c in script.commands if c.words}
    called |= {w for c in starts for w, _ in c.words[:3]}
    for name, at in script.functions.items():
        if name in called:
            raise _refuse(
                f"the shell function {name} (line {at}) is called, and qualgate does not follow functions",
                path=path,
                line=at,
                field=name,
            )
    if not starts:
        return None
    for what, at in script.blockers:
        raise _refuse(f"{what} can change what a later command runs", path=path, line=at, field=what)
    for c in starts:
        if c.guard is not None:
            raise _refuse(f"the vLLM start at line {c.line} is {c.guard}", path=path, line=c.line)
    if len(starts) > 1:
        at = ", ".join(str(c.line) for c in starts)
        raise DataError(f"{len(starts)} vllm serve commands (lines {at}); give one per file", file=path)
    start = starts[0]
    names = [w for w, _ in start.words]
    if "--config" in names and names.index("--config") + 1 < len(names):
        value = names[names.index("--config") + 1]
        if start.cwd is not None and not posixpath.isabs(value):
            target = posixpath.normpath(posixpath.join(start.cwd, value))
            if target in script.written:
                raise _refuse(
                    f"--config {value}: the script writes this file (line {script.written[target]}) before vLLM "
                    "reads it",
                    path=path,
                    line=start.line,
                    field="--config",
                )
    return start


_PIN = re.compile(r"^vllm(?:\[[^\]]*\])?\s*(==|===|>=|<=|~=|!=|>|<)?\s*(.*)$")


def vllm_pin(script: Script, *, path: str) -> tuple[str | None, str | None]:
    """``(version, source)`` of the vLLM a script installs or runs (``pip install
    vllm==X``, ``uv pip install``, ``uv run --with vllm==X``, ``uvx --from vllm==X``);
    ``(None, None)`` when it installs none, ``(None, why)`` when it names vLLM without
    pinning one version."""
    found: list[tuple[str | None, str]] = []
    for c in script.commands:
        names = [w for w, _ in c.words]
        installs = "install" in names and any(posixpath.basename(n) in ("pip", "pip3", "uv") for n in names[:3])
        runs = names[:2] in (["uv", "run"], ["uvx", "--from"]) or names[:1] == ["uvx"]
        if not (installs or runs):
            continue
        for i, w in enumerate(names):
            m = _PIN.match(w)
            if not m or (runs and not installs and i and names[i - 1] not in ("--with", "--from")):
                continue
            op, version = m.groups()
            where = f"{path}:{c.line}: {' '.join(names)[:120]}"
            if op in ("==", "===") and re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version or ""):
                found.append((version, where))
            else:
                found.append((None, f"{where} (vllm {op or ''}{version or ''} pins no single release)"))
    if not found:
        return None, None
    versions = {v for v, _ in found}
    if len(versions) > 1:
        return None, "; ".join(s for _, s in found) + " (different vLLM releases installed)"
    return found[-1]
