"""Strict reading of every input file: one helper for records, JSON, YAML and text.

Every reader of a file the user gives goes through :func:`read_bytes`, and parses JSON and
YAML with :func:`loads_json` / :func:`loads_yaml`, so that every input is held to the same
rules, each refused with a :class:`~qualgate.errors.DataError` naming the file, the line and,
where one is known, the field:

- only **regular files** are read (a FIFO, a device such as ``/dev/zero``, a socket or a
  directory is refused before a byte is read: nothing hangs or fills memory), and a file
  larger than :data:`LIMITS` for its kind is refused unread;
- text is **UTF-8**; gzip, zip, Parquet, UTF-16/32 (with or without a byte-order mark) and
  other binary data are diagnosed as what they are; a UTF-8 byte-order mark is refused in
  JSON (``bom="strip"`` accepts it for YAML, whose specification allows it);
- JSON refuses **duplicate keys** (``json.loads`` keeps the last one silently), the
  ``NaN``/``Infinity`` tokens, lone surrogate escapes, and nesting beyond the interpreter's
  recursion limit;
- YAML refuses **anchors and aliases** (alias bombs expand exponentially), duplicate keys,
  ``.nan``/``.inf``, integers of more than :data:`MAX_INT_DIGITS` digits, nesting deeper
  than :data:`MAX_DEPTH`, and every tag but the plain JSON-like ones; timestamps stay strings.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import stat
from typing import Any

import yaml

from qualgate.errors import DataError

__all__ = [
    "LIMITS",
    "MAX_DEPTH",
    "compose_yaml",
    "decode_text",
    "load_json",
    "load_yaml",
    "loads_json",
    "open_regular",
    "loads_yaml",
    "read_bytes",
    "read_text",
    "sniff",
]

_MiB = 1 << 20
#: Largest file read, in bytes, per kind of input (refused unread above).
LIMITS = {
    "records": 4096 * _MiB,  # a record file (JSON Lines, CSV, Parquet)
    "json": 512 * _MiB,  # a JSON document (manifest, gate report, policy)
    "yaml": 4 * _MiB,  # a plan, a decoding config, a suite, a serving config
    "text": 1024 * _MiB,  # other text (logs, tables, command lines)
}
#: Deepest YAML nesting accepted (plans and configs need 4).
MAX_DEPTH = 64
#: Longest YAML integer, in digits (int64 has 19).
MAX_INT_DIGITS = 40
#: Most YAML nodes (keys, values, items) in one document: the parser costs about 50 us of
#: CPU a node, so a 4 MiB file of short keys took over 60 s; the largest shipped file has
#: under 500 nodes.
MAX_NODES = 100_000

_KIND_OF_MODE = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path, *, kind: str = "text", follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most ``LIMITS[kind]`` bytes; never blocks.

    The file is opened without blocking (``O_NONBLOCK``: opening a FIFO does not wait for a
    writer) and checked with ``fstat`` before anything is read. ``follow_links=False``
    refuses a symbolic link (``O_NOFOLLOW``: a run directory's own files).
    """
    limit = LIMITS[kind]
    name = os.fspath(path)
    fd, st = open_regular(path, kind=kind, follow_links=follow_links)
    # A buffer of the file's size (plus one byte, to see it grow), never of the limit: a
    # buffer of LIMITS["records"] failed under a 4 GiB address-space limit (ulimit -v).
    with os.fdopen(fd, "rb", buffering=0) as fh:
        try:
            data = fh.read(st.st_size + 1) or b""
            if len(data) > st.st_size:  # it grew while being read: the rest, in blocks
                parts = [data]
                while (block := fh.read(1 << 20)) and (size := sum(map(len, parts)) + len(block)) <= limit:
                    parts.append(block)
                if block and size > limit:
                    raise DataError(f"over the {limit} byte limit for a {kind} file", file=name)
                data = b"".join(parts)
        except OSError as exc:
            raise DataError(f"cannot read: {exc.strerror}", file=name) from None
    return data


def open_regular(path, *, kind: str = "text", follow_links: bool = True) -> tuple[int, os.stat_result]:
    """A file descriptor of a regular file of at most ``LIMITS[kind]`` bytes, and its ``fstat``.

    The file is opened without blocking (``O_NONBLOCK``: opening a FIFO does not wait for a
    writer) and checked with ``fstat`` before anything is read; the caller closes the
    descriptor. ``follow_links=False`` refuses a symbolic link (``O_NOFOLLOW``).
    """
    limit = LIMITS[kind]
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        if not follow_links and os.path.islink(name):
            raise DataError(
                "a symbolic link: refused (a run directory's files are never read through a link)", file=name
            ) from None
        raise DataError(f"cannot read: {exc.strerror}", file=name) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = next((w for test, w in _KIND_OF_MODE if test(st.st_mode)), "not a regular file")
            raise DataError(f"{what}, not a regular file: refused (give a file)", file=name)
        if st.st_size > limit:
            raise DataError(f"{st.st_size} bytes, over the {limit} byte limit for a {kind} file", file=name)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


# (test, what the file is) of formats mistaken for text
_MAGIC = (
    (lambda d: d.startswith(b"\x1f\x8b"), "gzip-compressed: decompress it first (gunzip)"),
    (lambda d: d.startswith(b"PK\x03\x04"), "a zip archive: extract it first"),
    (lambda d: d.startswith(b"PAR1") and d.endswith(b"PAR1"), "a Parquet file: give it the .parquet suffix"),
    (lambda d: d.startswith(b"\xfd7zXZ\x00"), "xz-compressed: decompress it first (unxz)"),
    (lambda d: d[:3] == b"BZh" and d[4:10] == b"1AY&SY", "bzip2-compressed: decompress it first (bunzip2)"),
    (lambda d: d.startswith(b"\x28\xb5\x2f\xfd"), "zstd-compressed: decompress it first (unzstd)"),
    (lambda d: d.startswith(codecs.BOM_UTF32_LE), "UTF-32 text (byte-order mark FF FE 00 00): save it as UTF-8"),
    (lambda d: d.startswith(codecs.BOM_UTF32_BE), "UTF-32 text (byte-order mark 00 00 FE FF): save it as UTF-8"),
    (lambda d: d.startswith(codecs.BOM_UTF16_LE), "UTF-16 text (byte-order mark FF FE): save it as UTF-8"),
    (lambda d: d.startswith(codecs.BOM_UTF16_BE), "UTF-16 text (byte-order mark FE FF): save it as UTF-8"),
)


def decode_text(data: bytes, *, file, bom: str = "refuse") -> str:
    """Decode UTF-8 strictly, naming what the bytes are when they are not UTF-8 text.

    ``bom``: ``"refuse"`` a UTF-8 byte-order mark, or ``"strip"`` it.
    """
    data = sniff(data, file=file, bom=bom)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"not valid UTF-8: byte {data[exc.start]:#04x} at offset {exc.start} ({exc.reason})", file=file, line=line
        ) from None


def sniff(data: bytes, *, file, bom: str = "refuse") -> bytes:
    """Refuse bytes that are not UTF-8 text (compressed, UTF-16/32, binary), naming what they
    are; return them without a UTF-8 byte-order mark when ``bom="strip"``."""
    for test, what in _MAGIC:
        if test(data):
            raise DataError(f"not UTF-8 text: {what}", file=file, line=1)
    if data.startswith(codecs.BOM_UTF8):
        if bom != "strip":
            raise DataError(
                "starts with a UTF-8 byte-order mark (EF BB BF): save it as UTF-8 without one", file=file, line=1
            )
        data = data[3:]
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        head = data[:64]
        if head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4:
            raise DataError(
                "not UTF-8 text: UTF-16 without a byte-order mark (every other byte is 0): save it as UTF-8",
                file=file,
                line=line,
            )
        raise DataError(f"not text: a NUL byte at offset {nul}", file=file, line=line)
    return data


def read_text(path, *, kind: str = "text", bom: str = "refuse", follow_links: bool = True) -> str:
    """:func:`read_bytes` then :func:`decode_text`."""
    return decode_text(read_bytes(path, kind=kind, follow_links=follow_links), file=os.fspath(path), bom=bom)


# --------------------------------------------------------------------------- JSON


class DuplicateKey(ValueError):
    """A JSON object with a key twice (raised while parsing)."""

    def __init__(self, key):
        self.key = key
        super().__init__(f"duplicate key {key!r} (the last one would win silently)")


class NonFinite(ValueError):
    """A ``NaN``, ``Infinity`` or ``-Infinity`` token (not JSON)."""

    def __init__(self, token):
        self.token = token
        super().__init__(f"{token} is not a JSON number")


def _no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKey(k)
            seen.add(k)
    return d


def _non_finite(token):
    raise NonFinite(token)


_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")


def parse_json(text: str) -> Any:
    """``json.loads`` refusing duplicate keys and NaN/Infinity; raises ValueError (a
    :class:`json.JSONDecodeError`, :class:`DuplicateKey`, :class:`NonFinite`, or one about
    nesting or surrogates). For callers that locate the error themselves."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_non_finite)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def _check_strings(value) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"a lone surrogate escape in the string {v[:40]!r}") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def loads_json(text: str, *, file=None, line: int | None = None) -> Any:
    """Parse one JSON document strictly (see the module docstring); :class:`DataError` names
    the file, the line (``line`` offsets a document that starts inside a file) and the key."""
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        at = exc.lineno + (line - 1 if line else 0)
        raise DataError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=file, line=at) from None
    except DuplicateKey as exc:
        raise DataError(str(exc), file=file, line=line, field=str(exc.key)) from None
    except ValueError as exc:
        raise DataError(f"not valid JSON: {exc}", file=file, line=line) from None


def load_json(path, *, kind: str = "json", follow_links: bool = True) -> Any:
    """Read and parse a JSON file strictly."""
    return loads_json(read_text(path, kind=kind, follow_links=follow_links), file=os.fspath(path))


# --------------------------------------------------------------------------- YAML

_BINARY, _SET, _OMAP, _PAIRS, _TIMESTAMP, _FLOAT, _INT = (
    f"tag:yaml.org,2002:{t}" for t in ("binary", "set", "omap", "pairs", "timestamp", "float", "int")
)


class _StrictConstructor(yaml.constructor.SafeConstructor):
    yaml_constructors = {
        tag: fn
        for tag, fn in yaml.constructor.SafeConstructor.yaml_constructors.items()
        if tag not in (_BINARY, _SET, _OMAP, _PAIRS)
    }


# a date is kept as written (a label, not a datetime that JSON cannot hold)
_StrictConstructor.yaml_constructors[_TIMESTAMP] = yaml.constructor.SafeConstructor.construct_yaml_str


class _StrictComposer(yaml.composer.Composer):
    _depth = 0
    _nodes = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None,
                None,
                f"an alias (*{event.anchor}): anchors and aliases are not allowed (write the value out)",
                event.start_mark,
            )
        if getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"an anchor (&{event.anchor}): anchors and aliases are not allowed (write the value out)",
                event.start_mark,
            )
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_NODES:,} nodes (keys, values and items) in one document", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _StrictLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    _StrictComposer,
    _StrictConstructor,
    yaml.resolver.Resolver,
):
    def __init__(self, stream):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _StrictComposer.__init__(self)
        _StrictConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def _yaml_error(exc: Exception, file) -> DataError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return DataError(f"invalid YAML: {problem}", file=file, line=mark.line + 1 if mark is not None else None)


def _check_nodes(root, loader, file) -> None:
    """Refuse duplicate keys, non-finite floats and over-long integers, naming the key path."""
    stack = [(root, "")]
    while stack:
        node, path = stack.pop()
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node) if isinstance(key_node, yaml.ScalarNode) else None
                name = f"{path}.{key}" if path else str(key)
                try:
                    repeated = key is not None and key in seen
                except TypeError:  # an unhashable key: the constructor refuses it
                    repeated = False
                if repeated:
                    raise DataError(
                        f"invalid YAML: duplicate key (first at line {seen[key]}; the last one would win silently)",
                        file=file,
                        line=key_node.start_mark.line + 1,
                        field=name,
                    )
                if key is not None and not repeated:
                    try:
                        seen[key] = key_node.start_mark.line + 1
                    except TypeError:
                        pass
                stack.append((value_node, name))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node.value))
        elif node.tag == _FLOAT:
            if not math.isfinite(loader.construct_yaml_float(node)):
                raise DataError(
                    f"invalid YAML: {node.value!r} is not a finite number", file=file, line=line, field=path or None
                )
        elif node.tag == _INT and len(node.value) > MAX_INT_DIGITS:
            raise DataError(
                f"invalid YAML: an integer of {len(node.value)} digits (at most {MAX_INT_DIGITS})",
                file=file,
                line=line,
                field=path or None,
            )


def _run_loader(text: str, file, construct: bool):
    try:
        loader = _StrictLoader(text)
    except yaml.YAMLError as exc:  # a character YAML does not allow
        raise _yaml_error(exc, file) from None
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node, loader, file)
        if not construct or node is None:
            return node
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops nesting first
        raise DataError("invalid YAML: nested too deeply", file=file) from None
    finally:
        loader.dispose()


def loads_yaml(text: str, *, file=None) -> Any:
    """Parse one YAML document strictly (see the module docstring)."""
    return _run_loader(text, file, True)


def compose_yaml(text: str, *, file=None) -> yaml.Node | None:
    """The node tree of one YAML document (for line numbers), with the same rules."""
    return _run_loader(text, file, False)


def load_yaml(path) -> Any:
    """Read and parse a YAML file strictly (a UTF-8 byte-order mark is allowed)."""
    return loads_yaml(read_text(path, kind="yaml", bom="strip"), file=os.fspath(path))


def is_regular_file(path) -> bool:
    """Whether ``path`` is a regular file (following links); False when it does not exist."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _expanded_size(root, file) -> int:
    """The nodes of a document with its aliases expanded (each counted where it is used),
    refused above :data:`MAX_NODES` or deeper than :data:`MAX_DEPTH`: an alias bomb is
    small as written and exponential once walked."""
    size: dict[int, int] = {}
    busy: set[int] = set()
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise DataError(f"invalid YAML: nested deeper than {MAX_DEPTH} levels", file=file)
        kids = (
            [c for kv in node.value for c in kv]
            if isinstance(node, yaml.MappingNode)
            else node.value
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if id(node) in size:
            continue
        if not done:
            if id(node) in busy:
                raise DataError("invalid YAML: a recursive alias (a node that contains itself)", file=file)
            busy.add(id(node))
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in kids if id(k) not in size)
            continue
        total = 1 + sum(size.get(id(k), 1) for k in kids)
        if total > MAX_NODES:
            raise DataError(
                f"invalid YAML: more than {MAX_NODES:,} nodes once its aliases are expanded (the limit qualgate reads)",
                file=file,
                line=node.start_mark.line + 1,
            )
        size[id(node)] = total
    return size[id(root)]


def yaml_documents(text: str, *, file=None, aliases: bool = False) -> list[tuple[yaml.Node, Any]]:
    """``(node, value)`` of each document of a YAML stream, with the rules of
    :func:`loads_yaml` (``aliases``: allow anchors, aliases and ``<<`` merge keys, as
    docker-compose files use them)."""
    loader = yaml.SafeLoader(text) if aliases else _StrictLoader(text)
    out = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if not aliases:
                _check_nodes(node, loader, file)
            else:
                _expanded_size(node, file)
            out.append((node, loader.construct_document(node)))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file) from None
    finally:
        loader.dispose()
    return out
