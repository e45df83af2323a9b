"""A docker compose project as ``docker compose`` assembles it from the file given: the override
file it merges on its own and each service's ``extends``, or refused.

Which files (compose-go ``cli/options.go``, at e70e961): run with no ``-f`` in a directory,
``docker compose`` takes the first of ``compose.yaml``, ``compose.yml``, ``docker-compose.yml``,
``docker-compose.yaml`` there and merges the first of ``compose.override.yml``,
``compose.override.yaml``, ``docker-compose.override.yml``, ``docker-compose.override.yaml``
beside it. So the override is merged into the file given when that file is the one this lookup
finds; any other file (``compose.prod.yaml``) is used only with ``-f``, which merges no
override. An override file given alone, a ``COMPOSE_FILE`` set in the ``.env`` beside the file
(it replaces the lookup), a top-level ``include:`` and compose's ``!reset``/``!override`` tags
are refused (exit 3) with the way forward: ``docker compose config | qualgate check -``
(what compose itself assembled, read from stdin).

How (the Compose Specification, compose-spec ``13-merge.md`` and ``05-services.md#extends`` at
170098b; compose-go ``override/merge.go``, ``override/uncity.go``, ``loader/extends.go``):

- ``command``, ``entrypoint`` and every scalar (``image``, ``working_dir``): the later file,
  or the extending service, wins whole;
- ``environment``: merged by variable name (a list ``NAME=VALUE`` and a mapping alike), the later
  value winning; ``volumes``: merged by container target, a later mount of the same target
  replacing the earlier one in place;
- other mappings merged key by key, other sequences appended.

``extends: NAME`` or ``{service: NAME}`` takes a service of the same file, ``{file: F, service:
NAME}`` one of ``F`` relative to the file that names it (its relative bind sources relative to
``F``'s directory); chains are followed to :data:`~qualgate.records.strict.MAX_DEPTH` services
and the override file's ``extends`` are resolved within the override file, as compose-go does.
A missing file or service, a cycle, an absolute, ``~`` or ``${VAR}`` path are refused.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from qualgate.errors import DataError
from qualgate.records.strict import MAX_DEPTH, MAX_NODES, read_text, yaml_documents

__all__ = ["DEFAULT_FILES", "OVERRIDE_FILES", "Service", "compose_services"]

#: compose-go ``DefaultFileNames`` and ``DefaultOverrideFileNames``, in their order
DEFAULT_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
OVERRIDE_FILES = (
    "compose.override.yml",
    "compose.override.yaml",
    "docker-compose.override.yml",
    "docker-compose.override.yaml",
)
_INCLUDE = "`include:` adds the services of other compose projects, which qualgate does not read"
_HOW = "to check what docker compose runs, give its own merge: docker compose config | qualgate check -"


@dataclass
class Service:
    """A service as the project defines it: ``data`` merged, ``nodes`` the YAML node each of
    its keys was taken from (lines of another file carry that file's name), ``node`` where it is
    defined."""

    data: dict
    nodes: dict = field(default_factory=dict)
    node: yaml.Node | None = None


def _refuse(why: str, file, **kw) -> DataError:
    return DataError(f"{why}; {_HOW}", file=str(file), **kw)


def _child(node, key):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _services(node, data, file) -> dict[str, Service]:
    raw = data.get("services") if isinstance(data, Mapping) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise DataError("`services` must be a mapping", file=str(file), field="services")
    snode = _child(node, "services")
    keyed = (
        {k.value: v for k, v in snode.value if isinstance(k, yaml.ScalarNode)}
        if isinstance(snode, yaml.MappingNode)
        else {}
    )
    out = {}
    for name, svc in raw.items():
        n = keyed.get(str(name))
        nodes = (
            {k.value: v for k, v in n.value if isinstance(k, yaml.ScalarNode)}
            if isinstance(n, yaml.MappingNode)
            else {}
        )
        out[str(name)] = Service(dict(svc) if isinstance(svc, Mapping) else {}, nodes, n)
    return out


def _load(p: Path, why: str, budget: list[int]):
    """The one document of another compose file, its nodes marked with its name (for lines).
    ``budget``: the nodes the project's other files may still hold (:data:`MAX_NODES` in all)."""
    try:
        text = read_text(p, kind="yaml", bom="strip")
        try:  # strict first: the node limit holds while the file is parsed
            docs = yaml_documents(text, file=str(p))
        except DataError as exc:
            if "alias" not in exc.message and "anchor" not in exc.message:
                raise
            docs = yaml_documents(text, file=str(p), aliases=True)  # anchors: counted expanded
    except DataError as exc:
        raise DataError(f"{exc.message} ({why}); {_HOW}", file=exc.file, line=exc.line, field=exc.field) from exc
    docs = [(n, d) for n, d in docs if d is not None]
    if len(docs) > 1 or (docs and not isinstance(docs[0][1], Mapping)):
        raise _refuse(f"{why}: not one YAML mapping", p)
    stack = [docs[0][0]] if docs else []
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        n.start_mark.name = str(p)
        if isinstance(n, yaml.MappingNode):
            stack += [c for kv in n.value for c in kv]
        elif isinstance(n, yaml.SequenceNode):
            stack += n.value
    budget[0] -= len(seen)
    if budget[0] < 0:
        raise _refuse(
            f"the compose files together hold more than {MAX_NODES:,} YAML nodes (the limit qualgate reads)", p
        )
    return docs[0] if docs else (None, {})


def _target(volume) -> str | None:
    if isinstance(volume, Mapping):
        return str(volume.get("target")) if volume.get("target") is not None else None
    src, _, rest = str(volume).partition(":")
    return rest.split(":")[0] if rest else src


def _environment(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    out = {}
    for e in value or []:
        k, eq, v = str(e).partition("=")
        out[k] = v if eq else None
    return out


def _merge(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` (a service definition), as compose merges files and extends."""
    out = dict(base)
    for k, v in over.items():
        if k not in out or k in ("command", "entrypoint"):
            out[k] = v
        elif v is None:  # compose-go MergeYaml: a null leaves the earlier value
            continue
        elif k == "environment":
            out[k] = {**_environment(out[k]), **_environment(v)}
        elif k == "volumes" and isinstance(out[k], list) and isinstance(v, list):
            merged = list(out[k])
            for vol in v:
                at = next((i for i, m in enumerate(merged) if _target(m) == _target(vol)), None)
                if at is None:
                    merged.append(vol)
                else:
                    merged[at] = vol
            out[k] = merged
        else:
            out[k] = _merge_value(out[k], v)
    return out


def _merge_value(base, over):
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        return {**base, **{k: _merge_value(base[k], v) if k in base else v for k, v in over.items()}}
    if isinstance(base, list) and isinstance(over, list):
        return base + over
    return over


def _rebase(svc: Service, src_dir: Path, main_dir: Path) -> Service:
    """Relative bind sources of a file in another directory, made relative to the main file's."""
    if src_dir == main_dir or not isinstance(svc.data.get("volumes"), list):
        return svc
    vols = []
    for v in svc.data["volumes"]:
        src = v.get("source") if isinstance(v, Mapping) else str(v).partition(":")[0]
        if isinstance(src, str) and src.startswith(".") and (isinstance(v, Mapping) or ":" in str(v)):
            new = os.path.relpath(src_dir / src, main_dir)
            new = new if new.startswith(".") else "./" + new
            v = {**v, "source": new} if isinstance(v, Mapping) else new + str(v)[len(src) :]
        vols.append(v)
    return Service({**svc.data, "volumes": vols}, svc.nodes, svc.node)


class _Project:
    def __init__(self, main: Path):
        self.main_dir = main.parent
        self.files: dict[Path, dict[str, Service]] = {}
        self.checked: list = []  # nodes of other files' services that were used
        self.done: dict[tuple[str, str], Service] = {}  # each service resolved once
        self.budget = [MAX_NODES]  # YAML nodes of the other files, together

    def extends(self, services: dict[str, Service], file: Path) -> dict[str, Service]:
        done: dict[str, Service] = {}
        for name in services:
            done[name] = self._resolve(name, services, file, ())
        return done

    def _resolve(self, name, services, file: Path, chain: tuple) -> Service:
        svc = services[name]
        ext = svc.data.get("extends")
        if ext is None:
            return svc
        if (str(file), name) not in self.done:
            self.done[(str(file), name)] = self._extend(name, svc, ext, services, file, chain)
        return self.done[(str(file), name)]

    def _extend(self, name, svc: Service, ext, services, file: Path, chain: tuple) -> Service:
        where = f"services.{name}.extends"
        line = svc.nodes["extends"].start_mark.line + 1 if "extends" in svc.nodes else None
        if (str(file), name) in chain:
            loop = " -> ".join(f"{Path(f).name}:{s}" for f, s in (*chain, (str(file), name)))
            raise _refuse(f"an extends cycle ({loop})", file, line=line, field=where)
        if len(chain) >= MAX_DEPTH:
            raise _refuse(
                f"extends chain of more than {MAX_DEPTH} services (the limit qualgate resolves)", file, field=where
            )
        ref, target = (
            (ext, None)
            if isinstance(ext, str)
            else (ext.get("service"), ext.get("file"))
            if isinstance(ext, Mapping)
            else (None, None)
        )
        if not isinstance(ref, str) or (target is not None and not isinstance(target, str)):
            raise DataError(
                "extends must be a service name or {service: NAME, file: FILE}", file=str(file), line=line, field=where
            )
        if target is None:
            pool, at = services, file
        else:
            if "$" in target:
                raise _refuse(
                    f"extends file {target!r}: compose fills ${{VAR}} from the environment, which the files do not show",
                    file,
                    line=line,
                    field=where,
                )
            if target.startswith("~") or os.path.isabs(target):
                raise _refuse(
                    f"extends file {target!r}: an absolute path of the machine that runs compose, which qualgate does not read",
                    file,
                    line=line,
                    field=where,
                )
            at = Path(os.path.normpath(file.parent / target))
            if at not in self.files:
                if len(self.files) >= MAX_DEPTH:
                    raise _refuse(
                        f"extends reads more than {MAX_DEPTH} files (the limit qualgate resolves)", file, field=where
                    )
                if not at.is_file():
                    raise _refuse(f"extends file {target!r} ({at}) does not exist", file, line=line, field=where)
                node, data = _load(at, f"extended by {file.name} service {name}", self.budget)
                self.files[at] = {k: _rebase(s, at.parent, self.main_dir) for k, s in _services(node, data, at).items()}
            pool = self.files[at]
        if ref not in pool:
            raise _refuse(f"extends: no service {ref} in {at}", file, line=line, field=where)
        base = self._resolve(ref, pool, at, (*chain, (str(file), name)))
        if at != file and base.node is not None:
            self.checked.append(base.node)
        own = {k: v for k, v in svc.data.items() if k != "extends"}
        nodes = {**base.nodes, **{k: v for k, v in svc.nodes.items() if k != "extends"}}
        return Service(_merge(copy.deepcopy(base.data), own), nodes, svc.node)


def _override(p: Path) -> Path | None:
    """The override file ``docker compose`` run in ``p``'s directory merges into ``p``, if any."""
    d = p.parent
    if p.name in OVERRIDE_FILES:
        raise _refuse(
            f"{p.name} is an override file: docker compose merges it into the compose file beside it, never "
            "runs it alone; give that file (qualgate merges this one into it)",
            p,
        )
    env = d / ".env"
    if env.is_file() and re.search(r"(?m)^\s*(export\s+)?COMPOSE_FILE\s*=", read_text(env, kind="yaml")):
        raise _refuse(f"{env} sets COMPOSE_FILE, which chooses the files docker compose merges", p)
    first = next((d / n for n in DEFAULT_FILES if (d / n).is_file()), None)
    if first is None or first.name != p.name:
        return None  # used only with `docker compose -f`, which merges no override file
    return next((d / n for n in OVERRIDE_FILES if (d / n).is_file()), None)


def compose_services(docs, path: str) -> tuple[dict[str, Service], list]:
    """The services of the project ``docker compose`` runs from the compose file ``path`` (its
    one document in ``docs``), and the YAML nodes of the other files that went into them (for
    the check that no speculative setting lies outside the command)."""
    node, data = docs[0]
    main = Path(path)
    if "include" in data:
        raise _refuse(_INCLUDE, main, field="include")
    project = _Project(main)
    services = project.extends(_services(node, data, main), main)
    checked = []
    over = None if main.name.startswith("<") else _override(main)
    if over is not None:
        onode, odata = _load(over, f"the override file docker compose merges into {main.name}", project.budget)
        if "include" in odata:
            raise _refuse(_INCLUDE, over, field="include")
        checked.append(onode)
        for name, svc in project.extends(_services(onode, odata, over), over).items():
            if name in services:
                base = services[name]
                services[name] = Service(_merge(base.data, svc.data), {**base.nodes, **svc.nodes}, base.node)
            else:
                services[name] = svc
    return services, [n for n in checked + project.checked if n is not None]
