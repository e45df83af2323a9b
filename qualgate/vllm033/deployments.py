"""Deployment files read as the vLLM command they start: docker-compose services, Kubernetes
manifests (any workload's containers, kserve ServingRuntimes), production-stack Helm values
and the production-stack ``VLLMRuntime`` resource.

Each format becomes the words vLLM's parser sees, with the container a ``--config`` file is
opened in (:class:`~qualgate.vllm033.cli_args.Container`); :func:`~qualgate.vllm033.cli_args.parse_command_line`
then reads them as it reads a command line.

- docker-compose: ``entrypoint:`` + ``command:`` (a string is split into words; compose's own
  ``${VAR}`` interpolation is not done, so a variable is refused), ``volumes:`` binds of a
  path relative to the file (``./x``), ``working_dir:``; of each service as the project
  defines it, the override file ``docker compose`` finds beside the file and ``extends``
  merged (:mod:`qualgate.vllm033.compose`, which refuses what it cannot merge exactly).
- Kubernetes: ``command:`` + ``args:`` with ``$(VAR)`` expanded from the container's
  ``env`` (``value``, ``configMapKeyRef``) and ``envFrom`` ``configMapRef`` (``$$`` is a
  literal ``$``), ``sh -c`` scripts, ``configMap`` volume mounts (``items``, ``subPath``),
  ``workingDir``. ConfigMaps are those of the same file and of ``manifests``, found in the
  workload's namespace (one whose namespace cannot be told, or one name given twice with
  different data, is refused). Workloads: every kind with a pod template, ``LeaderWorkerSet``,
  KubeRay ``RayCluster``/``RayService``/``RayJob`` (head and worker groups; KubeRay wraps the
  Ray container's command in its own ``ray start`` unless ``ray.io/overwrite-container-cmd``
  is ``"true"``, so a vLLM start there is refused, and a Ray Serve LLM application or a job
  entrypoint naming vLLM is refused), kserve ``ServingRuntime``s, an ``InferenceService``
  component with ``containers:`` (one with ``model:`` is assembled by KServe from a runtime:
  refused, whatever else the file holds) and ``LLMInferenceService`` templates (one that
  shows no vLLM command is refused).
- production-stack Helm values (``servingEngineSpec.modelSpec``): ``vllm serve MODEL`` and the
  chart's options in the order of ``helm/templates/deployment-vllm-multi.yaml`` (at a6c01db),
  ``vllmConfig.extraArgs`` last.
- ``VLLMRuntime``: the operator's order (``operator/internal/controller/vllmruntime_controller.go``
  at a6c01db), ``spec.vllmConfig.extraArgs`` after the typed fields.

Fail closed: a file that shows no vLLM serving command (an image started by its entrypoint
with no visible arguments, a chart, a ``docker pull``) is "no vLLM serving command found";
a ``$(VAR)`` from a Secret, a field reference or a ConfigMap not given, a ``--config`` file
in no visible mount, several vLLM containers, or a speculative setting the command does not
carry are refused, naming the field.

One module over 500 lines: each reader turns its format into the same words and container
(:class:`~qualgate.vllm033.cli_args.Container`) through the shared helpers here (``_words``,
``_launch``, ``_one``, ``_check_mentions``); the compose merge, which needs none of them, is
its own module.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from qualgate.errors import DataError
from qualgate.records.strict import read_text, yaml_documents
from qualgate.vllm033.cli_args import (
    _ENTRY_API,
    _ENTRY_EITHER,
    _ENTRY_SERVE,
    _SPECULATIVE_VALUE,
    Container,
    _from_start,
    _serve_args,
    _shell_words,
    image_version,
    parse_command_line,
    vllm_environment,
)
from qualgate.vllm033.compose import _child, compose_services
from qualgate.vllm033.serving_config import Loc, ServingConfig
from qualgate.vllm033.shell import Command, Script, read_script, vllm_start

__all__ = ["ENTRYPOINTS", "NoServeCommand", "read_deployment"]

#: what ``--assume-entrypoint`` may state about an image that shows only its arguments
ENTRYPOINTS = {"serve": _ENTRY_SERVE, "api_server": _ENTRY_API, "none": None}
_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod", "LeaderWorkerSet")
_RUNTIMES = ("ServingRuntime", "ClusterServingRuntime")
#: longest value a Kubernetes ``$(VAR)`` expansion may produce (each variable can double it)
MAX_EXPANDED = 64 * 1024
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class NoServeCommand(DataError):
    """The file shows no command that starts a vLLM server (exit 3)."""


def _no_serve(path: str, why: str) -> NoServeCommand:
    return NoServeCommand(
        f"no vLLM serving command found in {path}: {why}; qualgate cannot see what runs, so it "
        "cannot say the config is lossless (show the serve command, or pass --assume-entrypoint "
        "where only the image's arguments are shown)",
        file=path,
    )


def _line(node) -> int:
    """1-based; a :class:`Loc` naming the file for a node of another file (a compose override
    or ``extends`` file, :mod:`qualgate.vllm033.compose`)."""
    name = node.start_mark.name
    return node.start_mark.line + 1 if name.startswith("<") else Loc(node.start_mark.line + 1, name)


def _words(value, node, *, path: str, field: str) -> list[tuple[str, int]]:
    """A list (each item a word) or a string (split as a shell would, nothing expanded)."""
    if value is None:
        return []
    if isinstance(value, str):
        at = _line(node) + (node.style in ("|", ">")) if node is not None else 0
        literal = node is not None and node.style == "|"
        return [(w, at + (line - 1 if literal else 0)) for c in _shell_words(value, path=path) for w, line in c]
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            if isinstance(v, (dict, list)) or v is None:
                raise DataError("must be a list of strings", file=path, line=_line(node), field=field, value=v)
            item = node.value[i] if isinstance(node, yaml.SequenceNode) else None
            out.append((str(v) if not isinstance(v, bool) else str(v).lower(), _line(item) if item else 0))
        return out
    raise DataError("must be a string or a list of strings", file=path, field=field, value=value)


def _as_list(value) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


# --------------------------------------------------------------------------- the launch


def _script_at(names: list[str]) -> int | None:
    """Where the script of ``sh -c SCRIPT`` (``bash -lc -- SCRIPT``, as KubeRay writes it) is,
    or ``None`` when the words run no shell script."""
    if not names or os.path.basename(names[0]) not in ("sh", "bash"):
        return None
    i, script = 1, False
    while i < len(names) and names[i][:1] in ("-", "+") and names[i] not in ("-", "+"):
        if names[i] == "--":
            i += 1
            break
        if names[i] in ("-o", "+o", "-O", "+O"):  # an option with its argument
            i += 2
            continue
        script |= names[i][:1] == "-" and names[i][1:2] != "-" and "c" in names[i][1:]
        i += 1
    return i if script else None


def _start(words, *, path, container: Container, what: str, env=()):
    """The ServingConfig of a command that runs as written (``sh -c SCRIPT`` included), or
    ``None`` when it starts no vLLM server; ``env``: the container's ``(name, value)``."""
    names = [w for w, _ in words]
    is_start = lambda ws: _serve_args(list(ws)) is not None  # noqa: E731
    at = _script_at(names)
    if at is not None:
        if at >= len(words):
            raise DataError(f"{what}: `sh -c` without a script", file=path)
        text, line = words[at]
        why = "the image's working directory is not shown"
        script = read_script(text, path=path, line=line, cwd=container.workdir, cwd_why=why, in_container=True)
    else:
        script = Script(
            (Command(tuple(words), words[0][1] if words else 0, (), container.workdir, "", None, None),), {}, (), {}
        )
    start = vllm_start(script, is_start, path=path)
    if start is None:
        return None
    return _from_start(script, start, path=path, container=container, env=env)


def _launch(
    words, image: str | None, *, path, container: Container, assume, what: str, has_command: bool, env=(), line=None
):
    """The ServingConfig of one container, or ``None`` when it is not vLLM. ``has_command``:
    ``words`` replace the image's entrypoint (a Kubernetes ``command:``, a compose
    ``entrypoint:``); otherwise they are the entrypoint's arguments. ``env``: the container's
    environment, ``(name, value)`` (``None``: a value the files do not show); ``line``: where
    the container is, for the version's source."""
    repo = (image or "").split("@", 1)[0]
    repo = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
    if has_command or assume == "none":
        cfg = _start(words, path=path, container=container, what=what, env=env)
        # a vLLM image whose command qualgate cannot follow (`bash /scripts/start.sh`) can serve
        # beside the container qualgate reads; a LeaderWorkerSet's workers join the leader's Ray
        # cluster (vLLM's examples/online_serving/multi-node-serving.sh worker) and serve nothing
        if cfg is None and "vllm" in repo and not what.split(" container ")[0].endswith("workerTemplate"):
            raise _no_serve(
                path,
                f"{what} runs image {image!r} with a command that starts no vLLM server qualgate can read "
                f"({' '.join(w for w, _ in words)[:80]!r}), so it cannot tell what that container serves",
            )
    elif assume is not None:
        cfg = parse_command_line(words, path=path, fmt="command-line", entry=ENTRYPOINTS[assume], container=container)
    elif repo.endswith("vllm/vllm-openai") and words:  # its entrypoint is `vllm serve` or the api_server module
        cfg = parse_command_line(words, path=path, fmt="command-line", entry=_ENTRY_EITHER, container=container)
    elif "vllm" in repo or _start(words, path=path, container=container, what=what) is not None:
        raise _no_serve(
            path,
            f"{what} runs image {image!r} through its own entrypoint"
            + (" with no arguments" if not words else ", which qualgate cannot read")
            + " (pass --assume-entrypoint serve, api_server or none)",
        )
    else:
        return None
    if cfg is None:
        return None
    environment = {**vllm_environment(env, path=path, line=line, where=f"{what}: "), **cfg.environment}
    version, source = cfg.vllm_version, cfg.vllm_version_source
    if source is None:
        version, source = image_version(image, f"{path}:{line or '?'} ({what})")
    return dataclasses.replace(cfg, environment=environment, vllm_version=version, vllm_version_source=source)


def _one(found: list[tuple[str, ServingConfig]], path: str, *, mentions_vllm: bool, fmt: str) -> ServingConfig:
    if len(found) > 1:
        raise DataError(f"{len(found)} vLLM servers ({', '.join(w for w, _ in found)}); give one per file", file=path)
    if not found:
        raise _no_serve(
            path, "no container or service runs `vllm serve`" + (" (vLLM is only named)" if mentions_vllm else "")
        )
    what, cfg = found[0]
    if not cfg.model:
        raise _no_serve(path, f"{what} names no model")
    return dataclasses.replace(cfg, format=fmt, notes=(*cfg.notes, f"read from {what}"))


def _check_mentions(docs, read: list, path: str) -> None:
    """A speculative setting in the file outside what qualgate read as the vLLM command is
    refused: qualgate cannot tell whether vLLM sees it. ``read``: the nodes that make up the
    command (and the containers' ``env``, whose values reach vLLM only through ``$(VAR)``;
    vLLM 0.33 has no environment variable for speculative decoding, ``vllm/envs.py``);
    ConfigMaps are read only where referenced, and reference fields (``name``, ``key``,
    ``path``) name things rather than set them."""
    skip = {id(n) for n in read if n is not None}
    nodes = [n for n, d in docs if not (isinstance(d, Mapping) and d.get("kind") == "ConfigMap")]
    while nodes:
        n = nodes.pop()
        if id(n) in skip:
            continue
        if isinstance(n, yaml.ScalarNode):
            if _SPECULATIVE_VALUE.search(str(n.value)):
                v = str(n.value)
                raise DataError(
                    f"{v[:60]!r} mentions speculative decoding outside the vLLM command that qualgate "
                    "reads from this file; qualgate cannot tell whether vLLM sees it, so it refuses it",
                    file=getattr(_line(n), "file", path),
                    line=_line(n),
                    field=v[:60],
                )
        elif isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if not (isinstance(k, yaml.ScalarNode) and k.value in ("name", "key", "path", "subPath", "mountPath")):
                    nodes += [k, v]
        elif isinstance(n, yaml.SequenceNode):
            nodes += n.value


# --------------------------------------------------------------------------- docker-compose


def _compose(docs, path: str, assume) -> ServingConfig:
    services, other_files = compose_services(docs, path)  # the override file and extends merged
    found, used = [], []
    for name, service in services.items():
        svc, n, nodes = service.data, service.node, service.nodes
        where = f"service {name}"
        entry = _words(svc.get("entrypoint"), nodes.get("entrypoint"), path=path, field=f"services.{name}.entrypoint")
        cmd = _words(svc.get("command"), nodes.get("command"), path=path, field=f"services.{name}.command")
        mounts, unmounted = [], []
        for v in svc.get("volumes") or []:
            if isinstance(v, str):  # SRC:DST[:MODE]; a SRC not starting with "." is a named volume
                src, _, rest = v.partition(":")
                src, dst, bind = src, rest.split(":")[0] if rest else src, bool(rest)
            elif isinstance(v, Mapping) and v.get("target"):
                src, dst, bind = str(v.get("source") or ""), str(v["target"]), v.get("type") == "bind"
            else:
                continue
            if bind and src.startswith(".") and "$" not in src:
                mounts.append((dst, src))
            else:
                unmounted.append(dst)
        box = Container(svc.get("working_dir"), tuple(mounts), tuple(unmounted))
        words = entry + cmd
        raw_env = svc.get("environment") or {}
        if isinstance(raw_env, list):
            raw_env = dict(str(e).partition("=")[::2] if "=" in str(e) else (str(e), None) for e in raw_env)
        env = [(str(k), None if v is None or "$" in str(v) else str(v)) for k, v in dict(raw_env).items()]
        cfg = _launch(
            words,
            svc.get("image"),
            path=path,
            container=box,
            assume=assume,
            what=where,
            has_command=bool(entry),
            env=env,
            line=_line(n) if n is not None else None,
        )
        if cfg is not None:
            found.append((where, cfg))
            used += [nodes.get("entrypoint"), nodes.get("command")]
    text_mentions = any("vllm" in str(s.data.get("image", "")) for s in services.values())
    cfg = _one(found, path, mentions_vllm=text_mentions, fmt="docker-compose")
    _check_mentions([*docs, *((n, {}) for n in other_files)], used, path)
    return cfg


# --------------------------------------------------------------------------- Kubernetes


def _namespace(doc) -> str | None:
    meta = doc.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return None if ns is None else str(ns)


class _ConfigMaps:
    """The ConfigMaps given (the file's and ``--manifest``'s), found by namespace and name: a
    workload reads those of its own namespace. One without ``metadata.namespace`` is in the
    namespace it is applied to, which the files do not show: it answers only a workload without
    one either, and a lookup that could reach ConfigMaps of two namespaces is refused, as is one
    name given twice in one namespace with different data."""

    def __init__(self):
        self.by_name: dict[str, list[tuple[str | None, dict[str, str], str]]] = {}

    def add(self, docs, file: str) -> None:
        for _, d in docs:
            if isinstance(d, Mapping) and d.get("kind") == "ConfigMap" and isinstance(d.get("metadata"), Mapping):
                data = {str(k): str(v) for k, v in (d.get("data") or {}).items()}
                self.by_name.setdefault(str(d["metadata"].get("name")), []).append((_namespace(d), data, file))

    def get(self, namespace: str | None, name: str, *, path: str, where: str) -> dict[str, str] | None:
        found = self.by_name.get(name, [])
        same = [(ns, data, f) for ns, data, f in found if ns == namespace]
        unsure = [(ns, f) for ns, _, f in found if ns != namespace and (ns is None or namespace is None)]
        if unsure:
            them = ", ".join(f"{'no namespace' if ns is None else 'namespace ' + ns} ({f})" for ns, f in unsure)
            raise DataError(
                f"{where} (in {'no namespace' if namespace is None else 'namespace ' + namespace}) reads ConfigMap "
                f"{name}, and one of that name has {them}: the namespace a manifest without one is applied to is "
                "not in the files, so qualgate cannot tell which one it reads; state metadata.namespace on both",
                file=path,
                field=name,
            )
        if len({tuple(sorted(data.items())) for _, data, _ in same}) > 1:
            files = ", ".join(f for _, _, f in same)
            raise DataError(
                f"ConfigMap {name} is given twice in {'no namespace' if namespace is None else 'namespace ' + namespace} "
                f"with different data ({files}): the one applied last wins, which the files do not show",
                file=path,
                field=name,
            )
        return same[0][1] if same else None


#: a Ray application or job that starts vLLM (Ray Serve LLM, or vLLM named)
_RAY_VLLM = re.compile(r"(?i)vllm|ray\.serve\.llm|llm_configs|engine_kwargs")
_ISVC_MODELS = (
    "model",
    "huggingface",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "pmml",
    "lightgbm",
    "paddle",
)


def _ray_specs(doc, node, kind, name, path):
    """KubeRay: the head and worker groups' pod specs (``RayService``'s ``rayClusterConfig``,
    ``RayJob``'s ``rayClusterSpec``); a Ray Serve application or job entrypoint that starts vLLM
    is refused (qualgate reads vLLM from container commands only)."""
    spec, snode = doc["spec"], _child(node, "spec")
    for key in ("serveConfigV2", "serveConfig", "entrypoint", "runtimeEnvYAML"):
        text = spec.get(key)
        m = _RAY_VLLM.search(str(text)) if text is not None else None
        if m:
            raise DataError(
                f"{kind} {name} {key}: a Ray application that starts vLLM ({m.group(0)!r}); qualgate reads vLLM "
                "from a container's command, not from a Ray Serve or Ray job config, so it cannot say what runs "
                "(check the vllm serve command or --config file that application runs instead)",
                file=path,
                line=_line(_child(snode, key)),
                field=key,
            )
    cluster, cnode = spec, snode
    if kind != "RayCluster":
        key = "rayClusterConfig" if kind == "RayService" else "rayClusterSpec"
        cluster, cnode = spec.get(key), _child(snode, key)
    if not isinstance(cluster, Mapping):
        return []
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    # KubeRay reads the annotation on the RayCluster (RayJob and RayService pass theirs on)
    wrapped = str(annotations.get("ray.io/overwrite-container-cmd", "")).lower() != "true"
    groups = [("headGroupSpec", cluster.get("headGroupSpec"), _child(cnode, "headGroupSpec"))]
    workers, wnodes = cluster.get("workerGroupSpecs"), _child(cnode, "workerGroupSpecs")
    if isinstance(workers, list):
        wn = wnodes.value if isinstance(wnodes, yaml.SequenceNode) else [None] * len(workers)
        groups += [(f"workerGroupSpecs[{i}]", g, n) for i, (g, n) in enumerate(zip(workers, wn))]
    out = []
    for where, g, gnode in groups:
        tmpl = g.get("template") if isinstance(g, Mapping) else None
        if isinstance(tmpl, Mapping) and isinstance(tmpl.get("spec"), Mapping):
            pnode = _child(_child(gnode, "template"), "spec")
            out.append((tmpl["spec"], pnode, f"{kind} {name} {where}", "ray" if wrapped else None))
    return out


def _pod_specs(doc, node, path):
    """``(pod spec, its node, where, special)`` of a manifest; ``special``: ``"ray"`` (KubeRay
    builds the first container's command), ``"vllm"`` (a pod that runs vLLM for sure: one whose
    containers show no vLLM start is refused) or ``None``."""
    kind = doc.get("kind")
    spec, snode = doc.get("spec"), _child(node, "spec")
    name = (doc.get("metadata") or {}).get("name", "?") if isinstance(doc.get("metadata"), Mapping) else "?"
    if not isinstance(spec, Mapping):
        return []
    if kind in ("Pod", *_RUNTIMES):
        return [(spec, snode, f"{kind} {name}", None)]
    if kind in ("RayCluster", "RayService", "RayJob"):
        return _ray_specs(doc, node, kind, name, path)
    if kind == "InferenceService":  # kserve: a component is a pod spec (custom containers) or a model
        out = []
        for comp in ("predictor", "transformer", "explainer"):
            c, cn = spec.get(comp), _child(snode, comp)
            if not isinstance(c, Mapping):
                continue
            model = next((k for k in _ISVC_MODELS if k in c), None)
            if model is not None:
                raise _no_serve(
                    path,
                    f"InferenceService {name} {comp}.{model} runs a server KServe assembles from a ServingRuntime "
                    "(named by `runtime:` or chosen by the model format) with these fields merged and their args "
                    "appended, which qualgate does not do; check the ServingRuntime's file, with the arguments "
                    f"written there, or give the {comp} its own `containers:`",
                )
            if "containers" in c:
                out.append((c, cn, f"InferenceService {name} {comp}", None))
        return out
    if kind == "LLMInferenceService":  # kserve: vLLM pods from templates merged into the controller's preset
        out = []
        for where, t, tn in (
            ("template", spec.get("template"), _child(snode, "template")),
            ("worker", spec.get("worker"), _child(snode, "worker")),
            (
                "prefill.template",
                (spec.get("prefill") or {}).get("template"),
                _child(_child(snode, "prefill"), "template"),
            ),
            ("prefill.worker", (spec.get("prefill") or {}).get("worker"), _child(_child(snode, "prefill"), "worker")),
        ):
            if isinstance(t, Mapping):
                out.append((t, tn, f"{kind} {name} {where}", "vllm"))
        if not out:
            raise _no_serve(
                path,
                f"LLMInferenceService {name} has no `template`: KServe starts vLLM with the command of its "
                "LLMInferenceServiceConfig preset, which qualgate does not read (write the command in spec.template)",
            )
        return out
    if kind == "CronJob":
        spec, snode = (spec.get("jobTemplate") or {}).get("spec") or {}, _child(_child(snode, "jobTemplate"), "spec")
    if kind == "LeaderWorkerSet":
        lwt, ln = spec.get("leaderWorkerTemplate") or {}, _child(snode, "leaderWorkerTemplate")
        return [
            ((lwt.get(t) or {}).get("spec") or {}, _child(_child(ln, t), "spec"), f"{kind} {name} {t}", None)
            for t in ("leaderTemplate", "workerTemplate")
            if isinstance(lwt.get(t), Mapping)
        ]
    tmpl = spec.get("template") if isinstance(spec, Mapping) else None
    if isinstance(tmpl, Mapping) and isinstance(tmpl.get("spec"), Mapping):
        return [(tmpl["spec"], _child(_child(snode, "template"), "spec"), f"{kind} {name}", None)]
    return []


def _env(container: Mapping, config_map, path: str, where: str):
    """``(values, unresolved)``: the container's environment as Kubernetes builds it;
    ``config_map(name)``: the data of the ConfigMap of that name in the workload's namespace."""
    values: dict[str, str] = {}
    unresolved: dict[str, str] = {}
    open_ended = None  # an envFrom source whose keys cannot be listed
    for src in container.get("envFrom") or []:
        prefix = str(src.get("prefix") or "")
        ref = src.get("configMapRef")
        data = config_map(str(ref.get("name"))) if isinstance(ref, Mapping) else None
        if data is not None:
            values.update({prefix + k: v for k, v in data.items()})
        else:
            open_ended = (
                "a Secret" if src.get("secretRef") else f"ConfigMap {ref.get('name') if ref else '?'!r} (not given)"
            )
    for e in container.get("env") or []:
        name = str(e.get("name"))
        if "value" in e:
            values[name] = _expand(str(e["value"]), values, unresolved, None, path=path, field=f"{where} env {name}")
            unresolved.pop(name, None)
            continue
        ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
        data = config_map(str(ref.get("name"))) if isinstance(ref, Mapping) else None
        if data is not None and str(ref.get("key")) in data:
            values[name] = data[str(ref["key"])]
            unresolved.pop(name, None)
        else:
            values.pop(name, None)
            src = next(iter(e.get("valueFrom") or {"value": None}), "?")
            unresolved[name] = f"{src} {ref.get('name')!r} not given" if isinstance(ref, Mapping) else str(src)
    return values, unresolved, open_ended


def _expand(word: str, values, unresolved, open_ended, *, path: str, field: str, line: int | None = None) -> str:
    """Kubernetes' ``$(VAR)`` expansion of a command or args word."""

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name in values:
            return values[name]
        if name in unresolved or open_ended:
            why = unresolved.get(name) or f"envFrom {open_ended}"
            raise DataError(
                f"$({name}) takes its value from {why}, which qualgate cannot read; pass the ConfigMap "
                "with --manifest, or write the value out",
                file=path,
                line=line,
                field=field,
                value=word[:80],
            )
        return m.group(0)  # Kubernetes leaves an undefined reference as written

    out = _VAR.sub(sub, word)
    if len(out) > MAX_EXPANDED:
        raise DataError(
            f"$(VAR) expansion longer than {MAX_EXPANDED:,} characters (the limit qualgate expands)",
            file=path,
            line=line,
            field=field,
        )
    return out


def _kubernetes(docs, path: str, manifests, assume) -> ServingConfig:
    maps = _ConfigMaps()
    maps.add(docs, path)
    for m in manifests:
        maps.add(yaml_documents(read_text(Path(m), kind="yaml", bom="strip"), file=str(m)), str(m))
    found, used, vllm_named = [], [], False
    for node, doc in docs:
        if not isinstance(doc, Mapping):
            continue
        namespace = _namespace(doc)
        for pod, pnode, where, special in _pod_specs(doc, node, path):
            runs = len(found)
            volumes = {str(v.get("name")): v for v in pod.get("volumes") or [] if isinstance(v, Mapping)}
            every = [  # init containers (sidecars with restartPolicy Always run beside) and ephemeral ones too
                (c, cn)
                for lst in ("initContainers", "containers", "ephemeralContainers")
                if isinstance(pod.get(lst), list)
                for c, cn in zip(
                    pod[lst],
                    _child(pnode, lst).value
                    if isinstance(_child(pnode, lst), yaml.SequenceNode)
                    else [None] * len(pod[lst]),
                )
            ]
            for i, (c, cn) in enumerate(every):
                if not isinstance(c, Mapping):
                    continue
                what = f"{where} container {c.get('name', i)}"
                vllm_named |= "vllm" in str(c.get("image", ""))
                if special == "ray" and c is (pod.get("containers") or [None])[0]:
                    shown = " ".join(str(w) for k in ("command", "args") for w in _as_list(c.get(k)))
                    if "vllm" in shown.lower():
                        raise DataError(
                            f"{what}: KubeRay runs the Ray container's command and args inside the `ulimit ...; "
                            "ray start ...` command it generates, which qualgate does not assemble; annotate the "
                            'resource with ray.io/overwrite-container-cmd: "true" (its command then runs as written) '
                            "or start vLLM in another container",
                            file=path,
                            line=_line(cn) if cn is not None else None,
                            field="ray.io/overwrite-container-cmd",
                        )
                    continue  # a Ray node: KubeRay starts `ray start` in it
                config_map = functools.partial(maps.get, namespace, path=path, where=what)
                values, unresolved, open_ended = _env(c, config_map, path, what)
                words = []
                for key in ("command", "args"):
                    for w, line in _words(c.get(key), _child(cn, key), path=path, field=f"{what} {key}"):
                        words.append(
                            (_expand(w, values, unresolved, open_ended, path=path, field=key, line=line), line)
                        )
                mounts, unmounted = [], []
                for vm in c.get("volumeMounts") or []:
                    vol = volumes.get(str(vm.get("name")), {})
                    cm = vol.get("configMap")
                    dst = str(vm.get("mountPath"))
                    files = config_map(str(cm.get("name"))) if isinstance(cm, Mapping) else None
                    if files is not None:
                        if cm.get("items"):
                            files = {
                                str(it["path"]): files[str(it["key"])]
                                for it in cm["items"]
                                if str(it.get("key")) in files
                            }
                        sub = str(vm.get("subPath") or "")
                        if not sub:
                            mounts.append((dst, files))
                        elif sub in files:
                            mounts.append((dst, {"": files[sub]}))
                        else:
                            unmounted.append(dst)
                    else:
                        unmounted.append(dst)
                box = Container(c.get("workingDir"), tuple(mounts), tuple(unmounted))
                cfg = _launch(
                    words,
                    c.get("image"),
                    path=path,
                    container=box,
                    assume=assume,
                    what=what,
                    has_command="command" in c,
                    env=[*values.items(), *((k, None) for k in unresolved)],
                    line=_line(cn) if cn is not None else None,
                )
                if cfg is not None:
                    found.append((what, cfg))
                    used += [_child(cn, "command"), _child(cn, "args"), _child(cn, "env")]
            if special == "vllm" and len(found) == runs:
                raise _no_serve(
                    path,
                    f"{where} runs vLLM, and no container of it shows the command (KServe merges it with the "
                    "command of its LLMInferenceServiceConfig preset, which qualgate does not read)",
                )
    cfg = _one(found, path, mentions_vllm=vllm_named, fmt="kubernetes")
    _check_mentions(docs, used, path)
    if any(isinstance(d, Mapping) and d.get("kind") in _RUNTIMES for _, d in docs):
        note = (
            "a kserve serving runtime: the controller appends an InferenceService's predictor args "
            "to these, and an InferenceService file alone shows no serving command (exit 3)"
        )
        cfg = dataclasses.replace(cfg, notes=(*cfg.notes, note))
    return cfg


# --------------------------------------------------------------------------- production-stack


def _flag(on, name):
    return [f"--{name}"] if on else [f"--no-{name}"]


def _helm_values(docs, path: str) -> ServingConfig:
    node, data = docs[0]
    specs = (data.get("servingEngineSpec") or {}).get("modelSpec") or []
    if not isinstance(specs, list) or len(specs) != 1:
        raise DataError(
            f"servingEngineSpec.modelSpec has {len(specs) if isinstance(specs, list) else 'no'} entries: the chart "
            "starts one vLLM server per entry; give one per file",
            file=path,
            field="servingEngineSpec.modelSpec",
        )
    m = specs[0]
    mnode = _child(_child(node, "servingEngineSpec"), "modelSpec")
    mnode = mnode.value[0] if isinstance(mnode, yaml.SequenceNode) else None
    at = _line(mnode) if mnode is not None else 0
    if not m.get("modelURL"):
        raise _no_serve(path, "the modelSpec names no modelURL")
    args = [str(m["modelURL"]), "--host", "0.0.0.0", "--port", "8000"]
    args += ["--enable-lora"] if m.get("enableLoRA") else []
    args += ["--enable-auto-tool-choice"] if m.get("enableTool") else []
    args += ["--tool-call-parser", str(m["toolCallParser"])] if m.get("toolCallParser") else []
    v = m.get("vllmConfig") or {}
    if "enableChunkedPrefill" in v:
        args += _flag(v["enableChunkedPrefill"], "enable-chunked-prefill")
    args += _flag(v.get("enablePrefixCaching"), "enable-prefix-caching")
    for key, opt in (
        ("maxModelLen", "--max-model-len"),
        ("dtype", "--dtype"),
        ("tensorParallelSize", "--tensor-parallel-size"),
        ("maxNumSeqs", "--max-num-seqs"),
        ("gpuMemoryUtilization", "--gpu_memory_utilization"),
        ("maxLoras", "--max_loras"),
        ("runner", "--runner"),
        ("convert", "--convert"),
    ):
        if key in v:
            args += [opt, str(v[key])]
    extra_node = _child(_child(mnode, "vllmConfig"), "extraArgs")
    extra = _words(v.get("extraArgs"), extra_node, path=path, field="vllmConfig.extraArgs")
    words = [(w, at) for w in args] + extra
    if m.get("modelRevision"):
        words += [("--revision", at), (str(m["modelRevision"]), at)]
    cfg = parse_command_line(words, path=path, fmt="helm-values", entry=_ENTRY_SERVE, container=Container())
    _check_mentions(docs, [extra_node], path)
    return cfg


def _vllm_runtime(docs, path: str) -> ServingConfig:
    node, data = docs[0]
    spec = data.get("spec") or {}
    model, v = spec.get("model") or {}, spec.get("vllmConfig") or {}
    if not model.get("modelURL"):
        raise _no_serve(path, "spec.model names no modelURL")
    at = _line(_child(_child(_child(node, "spec"), "model"), "modelURL"))
    args = [str(model["modelURL"]), "--host", "0.0.0.0", "--port", str(v.get("port", 0))]
    args += ["--enable-lora"] if model.get("enableLoRA") else []
    args += ["--enable-auto-tool-choice"] if model.get("enableTool") else []
    args += ["--tool-call-parser", str(model["toolCallParser"])] if model.get("toolCallParser") else []
    args += _flag(v.get("enableChunkedPrefill"), "enable-chunked-prefill")
    args += _flag(v.get("enablePrefixCaching"), "enable-prefix-caching")
    args += ["--max-model-len", str(model["maxModelLen"])] if (model.get("maxModelLen") or 0) > 0 else []
    args += ["--dtype", str(model["dtype"])] if model.get("dtype") else []
    args += ["--tensor-parallel-size", str(v["tensorParallelSize"])] if (v.get("tensorParallelSize") or 0) > 0 else []
    args += ["--max-num-seqs", str(model["maxNumSeqs"])] if (model.get("maxNumSeqs") or 0) > 0 else []
    args += ["--gpu_memory_utilization", str(v["gpuMemoryUtilization"])] if v.get("gpuMemoryUtilization") else []
    args += ["--max_loras", str(v["maxLoras"])] if (v.get("maxLoras") or 0) > 0 else []
    words = [(w, at) for w in args]
    extra_node = _child(_child(_child(node, "spec"), "vllmConfig"), "extraArgs")
    words += _words(
        v.get("extraArgs"),
        extra_node,
        path=path,
        field="spec.vllmConfig.extraArgs",
    )
    if model.get("chatTemplate"):
        words += [("--chat-template", at), ("/etc/chat-template.json", at)]
    cfg = parse_command_line(words, path=path, fmt="vllm-runtime", entry=_ENTRY_SERVE, container=Container())
    _check_mentions(docs, [extra_node], path)
    return cfg


# --------------------------------------------------------------------------- entry point


def read_deployment(
    text: str, *, path: str, manifests=(), assume_entrypoint: str | None = None
) -> ServingConfig | None:
    """The vLLM server a deployment file starts, or ``None`` when ``text`` is none of the
    formats of this module (see the module docstring)."""
    if assume_entrypoint is not None and assume_entrypoint not in ENTRYPOINTS:
        raise ValueError(f"assume_entrypoint must be one of {sorted(ENTRYPOINTS)}, got {assume_entrypoint!r}")
    try:
        docs = yaml_documents(text, file=path)
    except DataError as exc:
        if "alias" not in exc.message and "anchor" not in exc.message:
            return None
        try:  # docker-compose files use anchors and << merges
            docs = yaml_documents(text, file=path, aliases=True)
        except DataError as bound:
            if (
                "limit qualgate" in bound.message
                or "recursive alias" in bound.message
                or "nested deeper" in bound.message
            ):
                raise
            return None
        if not (docs and isinstance(docs[0][1], Mapping) and isinstance(docs[0][1].get("services"), Mapping)):
            raise
    docs = [(n, d) for n, d in docs if d is not None]
    if not docs or not all(isinstance(d, Mapping) for _, d in docs):
        return None
    first = docs[0][1]
    if len(docs) == 1 and isinstance(first.get("services"), Mapping) and "kind" not in first:
        return _compose(docs, path, assume_entrypoint)
    if len(docs) == 1 and isinstance(first.get("servingEngineSpec"), Mapping):
        return _helm_values(docs, path)
    if len(docs) == 1 and first.get("kind") == "VLLMRuntime":
        return _vllm_runtime(docs, path)
    if all("kind" in d and "apiVersion" in d for _, d in docs):
        return _kubernetes(docs, path, manifests, assume_entrypoint)
    return None
