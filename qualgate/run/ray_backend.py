"""A plan's batches on Ray actors, with this process the single writer of the records.

``qualgate run PLAN --ray [ADDRESS]`` opens a :class:`RayCluster`: it connects to the Ray
cluster at ``ADDRESS`` (or the one ``RAY_ADDRESS`` names, or starts a local instance) and
serves as the run's backend factory (:meth:`RayCluster.open`). A config's actors each hold
one engine (:func:`qualgate.backends.open_backend` inside the actor: the reference engine,
offline vLLM, ...), with ``num_gpus`` per actor from the config (:func:`actor_resources`: 1
for a reference engine on CUDA, ``tensor_parallel_size`` for vLLM, 0 on CPU) and, unless
``actors`` says otherwise, as many actors as the cluster has GPUs for (CPUs for a CPU
config). Actors are started once per shape of resources and serve every config of the run
(each config's engine under its own handle), so a plan's configs do not each pay for
starting processes; they are killed when the cluster is left.

Each harness batch goes whole to one actor (the one with the fewest calls queued), so every
engine decodes exactly the batches a one-GPU run decodes, and the records are that run's
apart from the timing fields. :attr:`RayBackend.in_flight` batches are kept submitted (two per
actor); the harness (:class:`qualgate.run.runner._ConfigRunner`) takes the results in order
and appends and fsyncs each batch itself, so ``--resume`` works as for any run. An actor that
is lost (its process or node died: :class:`ray.exceptions.RayActorError`) is dropped, and each
of its batches is decoded again by another actor; nothing was written for them, so nothing
is lost or duplicated. An actor that died while idle (between two configs) is found when the
next config opens on the pool: it is dropped there, and the config runs on the others. Lost
actors are replaced when no config has an engine open on the pool. When every actor of a
config is lost the run stops (exit 3) and ``--resume`` continues it.

Every actor reports the qualgate code it runs (:func:`qualgate.run.code.code_identity`): an actor
whose code differs from the driver's (a node with another image tag or commit) is refused
before any batch goes to it (exit 3).

Ray is optional (``pip install 'qualgate[ray]'``): it is imported only here, and only when a
cluster is opened.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from qualgate.backends import Backend, Generation, Request
from qualgate.errors import DataError
from qualgate.run.code import code_identity, compare

__all__ = ["RayBackend", "RayCluster", "actor_resources", "import_ray"]

_HANDLES = itertools.count()


def import_ray():
    """The ``ray`` module, or a :class:`DataError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise DataError(
            "--ray needs the package 'ray', which is not installed; install it with: pip install 'qualgate[ray]'",
            field="ray",
            value=str(exc),
        ) from None
    return ray


def actor_resources(config, cluster_gpus: float) -> dict[str, float]:
    """``num_gpus`` and ``num_cpus`` of one actor serving ``config``.

    vLLM: ``tensor_parallel_size`` GPUs (default 1). The reference engine: one GPU when its
    ``device`` is CUDA, or unset on a cluster that has GPUs; none on ``cpu``. Other engines
    (``vllm-server``: an HTTP client) need no GPU.

    >>> from types import SimpleNamespace as C
    >>> actor_resources(C(engine="vllm", engine_options={"tensor_parallel_size": 2}), 8)
    {'num_gpus': 2, 'num_cpus': 1}
    >>> actor_resources(C(engine="reference", engine_options={"device": "cpu"}), 8)
    {'num_gpus': 0, 'num_cpus': 1}
    """
    options = config.engine_options
    if config.engine == "vllm":
        gpus = int(options.get("tensor_parallel_size") or 1)
    elif config.engine == "reference":
        device = options.get("device")
        gpus = 1 if (isinstance(device, str) and device.startswith("cuda")) or (device is None and cluster_gpus) else 0
    else:
        gpus = 0
    return {"num_gpus": gpus, "num_cpus": 1}


def _actor_config(config, gpus: float):
    """The config as an actor opens it: a reference engine on the actor's own device (Ray
    gives a GPU actor its GPU as ``cuda``; a CPU actor gets ``cpu``)."""
    if config.engine != "reference":
        return config
    return dataclasses.replace(config, engine_options={**config.engine_options, "device": "cuda" if gpus else "cpu"})


class _EngineActor:  # pragma: no cover - runs in a Ray worker process
    """One Ray actor: engines by handle, as :func:`qualgate.backends._devices._worker` serves them."""

    def __init__(self, threads: int | None):
        self.engines: dict[int, list] = {}
        if threads:
            import torch

            torch.set_num_threads(threads)

    def where(self) -> dict[str, Any]:
        import ray

        from qualgate.run.code import code_identity

        ctx = ray.get_runtime_context()
        return {
            "code": code_identity(files=False),
            "pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "host": os.uname().nodename,
            "gpu_ids": [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def open(self, handle: int, config) -> tuple[int, dict]:
        from qualgate.backends import open_backend

        backend = open_backend(config)
        self.engines[handle] = [backend, 0.0]
        return backend.batch_size, backend.info()

    def generate(self, handle: int, requests: Sequence[Request]) -> list[Generation]:
        entry = self.engines[handle]
        t0 = time.perf_counter()
        gens = entry[0].generate(requests)
        entry[1] += time.perf_counter() - t0
        return gens

    def busy(self, handle: int) -> float:
        """Seconds this actor spent decoding for ``handle`` since it was opened."""
        return self.engines[handle][1] if handle in self.engines else 0.0

    def close(self, handle: int) -> float:
        backend, busy = self.engines.pop(handle, (None, 0.0))
        if backend is not None:
            backend.close()
        return busy


@dataclasses.dataclass
class _Actor:
    handle: Any  #: the Ray actor handle
    where: dict[str, Any]
    queued: int = 0
    lost: str | None = None


class RayCluster:
    """The run's Ray cluster: connect (or start a local instance), open configs on actors,
    describe the cluster for the manifest; leaving it kills the actors (and stops a local
    instance it started).

    Parameters
    ----------
    address : str, optional
        A Ray address (``auto``, ``HOST:PORT``, ``ray://HOST:10001``); default: ``RAY_ADDRESS``
        or a new local instance. Ignored when Ray is already initialised in this process.
    actors : int, optional
        Actors per config (default: as many as the cluster has GPUs for, or CPUs for a CPU
        config).
    threads : int, optional
        torch CPU threads of each actor (``qualgate run --threads``).
    log : callable, optional
        Receives one-line diagnostics (a lost actor, a retried batch).
    init : dict, optional
        More keyword arguments of ``ray.init`` (tests: ``num_cpus``).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int | None = None,
        threads: int | None = None,
        log: Callable[[str], None] | None = None,
        init: dict | None = None,
    ):
        if actors is not None and actors < 1:
            raise ValueError(f"actors must be at least 1, got {actors!r}")
        self.address, self.actors, self.threads = address, actors, threads
        self.log = log or (lambda msg: None)
        self.init_options = dict(init or {})
        self.ray = None
        self._started = False
        self._pools: dict[tuple, list[_Actor]] = {}
        self._open: collections.Counter = collections.Counter()  # pool key -> backends open on it

    def __enter__(self) -> RayCluster:
        ray = self.ray = import_ray()
        if not ray.is_initialized():
            if not (self.address or os.environ.get("RAY_ADDRESS")):  # (a local instance: no dashboard)
                self.init_options.setdefault("include_dashboard", False)
            ray.init(address=self.address or None, log_to_driver=False, **self.init_options)
            self._started = True
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Kill every actor, and stop Ray when this object started it."""
        for key in list(self._pools):
            self._kill(key)
        if self._started and self.ray is not None:
            self.ray.shutdown()
            self._started = False

    def describe(self) -> dict[str, Any]:
        """The cluster for the manifest: Ray version, address, nodes, CPUs and GPUs."""
        ray = self.ray
        nodes = [
            {
                "node_id": n["NodeID"],
                "host": n.get("NodeManagerHostname"),
                "address": n.get("NodeManagerAddress"),
                "cpus": n.get("Resources", {}).get("CPU", 0),
                "gpus": n.get("Resources", {}).get("GPU", 0),
            }
            for n in ray.nodes()
            if n.get("Alive")
        ]
        return {
            "ray_version": ray.__version__,
            "address": self.address or os.environ.get("RAY_ADDRESS"),
            "nodes": nodes,
            "cpus": sum(n["cpus"] for n in nodes),
            "gpus": sum(n["gpus"] for n in nodes),
        }

    def open(self, config) -> RayBackend:
        """The run's backend factory: ``config`` on this cluster's actors."""
        if self.ray is None:
            raise RuntimeError("open the RayCluster (with ...) before opening configs on it")
        described = self.describe()
        shape = actor_resources(config, described["gpus"])
        if shape["num_gpus"] and not described["gpus"]:
            raise DataError(
                f"config {config.name!r} asks for {shape['num_gpus']} GPU(s) per actor, and the Ray cluster has none",
                file=config.path,
                field="engine_options.device",
                value=config.engine_options.get("device"),
            )
        count = self.actors or (
            int(described["gpus"] // shape["num_gpus"])
            if shape["num_gpus"]
            else max(1, int(described["cpus"] // shape["num_cpus"]))
        )
        if count < 1:
            raise DataError(
                f"config {config.name!r} needs {shape['num_gpus']} GPUs per actor; the Ray cluster "
                f"has {described['gpus']:g}",
                file=config.path,
                field="engine_options",
            )
        key = (shape["num_gpus"], shape["num_cpus"], count)
        return RayBackend(self, config, key, described)

    def _pool(self, key: tuple) -> list[_Actor]:
        """The live actors of shape ``key``, started (or the lost ones replaced) when no config
        has an engine open on them."""
        pool = self._pools.get(key, [])
        lost = [a for a in pool if a.lost is not None]
        if pool and (not lost or self._open[key]):
            return pool
        for other in [k for k in self._pools if k != key and not self._open[k]]:  # free their resources first
            self._kill(other)
        gpus, cpus, count = key
        remote = self.ray.remote(_EngineActor).options(num_gpus=gpus, num_cpus=cpus, max_restarts=0, max_task_retries=0)
        handles = [remote.remote(self.threads) for _ in range(count - len(pool) + len(lost))]
        try:
            wheres = self.ray.get([h.where.remote() for h in handles], timeout=600)
        except self.ray.exceptions.GetTimeoutError:
            for h in handles:
                self.ray.kill(h)
            raise DataError(
                f"the Ray cluster did not place {count} actors of {gpus} GPU(s) and {cpus} CPU(s) "
                "within 600 s: pass fewer with --ray-actors",
                field="ray",
            ) from None
        mine = code_identity(files=False)
        for w in wheres:
            differs = compare(mine, w.get("code"))
            if differs:
                for h in handles:
                    self.ray.kill(h)
                raise DataError(
                    f"a Ray actor on host {w.get('host')!r} (pid {w.get('pid')}) runs other qualgate code than this "
                    f"driver ({differs}): install the same qualgate on every node (one image tag, one commit)",
                    field="ray",
                )
        pool = self._pools[key] = [a for a in pool if a.lost is None] + [_Actor(h, w) for h, w in zip(handles, wheres)]
        return pool

    def _kill(self, key: tuple) -> None:
        for a in self._pools.pop(key, []):
            try:
                self.ray.kill(a.handle)
            except Exception:  # noqa: BLE001 - already gone
                pass


class RayBackend(Backend):
    """One config's engine on every actor of a :class:`RayCluster` pool (see the module
    docstring): whole batches, each on one actor, a lost actor's batches retried on another."""

    def __init__(self, cluster: RayCluster, config, key: tuple, described: dict):
        super().__init__(config)
        self.engine = config.engine
        self.cluster, self.key, self.described = cluster, key, described
        self._closed = False
        self.ray = cluster.ray
        self.pool = cluster._pool(key)
        self.handle = next(_HANDLES)
        self.lost: list[dict] = []
        self.retried = 0
        self.busy_s: list[float] = []
        self._lock = threading.Lock()
        cfg = _actor_config(config, key[0])
        cluster._open[key] += 1
        replies = []
        opening = [(a, a.handle.open.remote(self.handle, cfg)) for a in self._live()]
        for actor, ref in opening:  # one at a time: an actor that died while idle is dropped
            try:
                replies.append(self.ray.get(ref))
            except self.ray.exceptions.RayActorError as exc:
                self._lose(actor, exc)
                self.cluster.log(
                    f"{config.name}: Ray actor pid {actor.where['pid']} on {actor.where['host']} was lost "
                    f"before this config opened on it; the run goes on with the {len(self._live())} other(s)"
                )
            except self.ray.exceptions.RayTaskError as exc:
                self.close()
                cause = exc.as_instanceof_cause()
                if isinstance(cause, ValueError):  # the engine refused the config (exit 3)
                    raise ValueError(str(cause).splitlines()[0]) from None
                raise RuntimeError(f"a Ray actor could not open config {config.name!r}: {exc}") from None
        if not replies:
            self.close()
            raise RuntimeError(f"every Ray actor was lost before config {config.name!r} opened ({len(self.lost)} lost)")
        self._per_actor = min(int(size) for size, _ in replies)
        self._info = replies[0][1]

    @property
    def in_flight(self) -> int:  # type: ignore[override]
        return max(2, 2 * len(self._live()))

    @property
    def batch_size(self) -> int:
        """Requests per harness batch: the engine's batch size (each batch goes to one actor)."""
        return self._per_actor

    @property
    def actors(self) -> list[dict[str, Any]]:
        """Where each actor of the pool runs: ``pid``, ``node_id``, ``host``, ``gpu_ids``."""
        return [a.where for a in self.pool]

    def _live(self) -> list[_Actor]:
        return [a for a in self.pool if a.lost is None]

    def submit(self, requests: Sequence[Request]) -> Future:
        """Queue ``requests`` on the least busy live actor; the future gives their generations."""
        out: Future = Future()
        self._dispatch(list(requests), out)
        return out

    def _dispatch(self, requests: list, out: Future) -> None:
        with self._lock:
            live = self._live()
            if not live:
                out.set_exception(
                    RuntimeError(f"every Ray actor of config {self.config.name!r} was lost ({len(self.lost)} actor(s))")
                )
                return
            actor = min(live, key=lambda a: a.queued)
            actor.queued += 1
        fut = actor.handle.generate.remote(self.handle, requests).future()
        fut.add_done_callback(lambda f: self._done(f, actor, requests, out))

    def _done(self, fut: Future, actor: _Actor, requests: list, out: Future) -> None:
        with self._lock:
            actor.queued -= 1
        try:
            gens = fut.result()
        except self.ray.exceptions.RayActorError as exc:
            self._lose(actor, exc)
            with self._lock:
                self.retried += 1
                again = bool(self._live())
            self.cluster.log(
                f"{self.config.name}: Ray actor pid {actor.where['pid']} on {actor.where['host']} was "
                f"lost; its batch of {len(requests)} requests "
                + ("is decoded again on another actor" if again else "has no live actor left to go to")
            )
            self._dispatch(requests, out)
            return
        except BaseException as exc:  # noqa: BLE001 - the engine failed: the run stops
            out.set_exception(RuntimeError(f"engine on Ray actor pid {actor.where['pid']} failed: {exc}"))
            return
        out.set_result(gens)

    def _lose(self, actor: _Actor, exc: BaseException) -> None:
        """Mark ``actor`` lost (once) and record it in :attr:`lost`."""
        with self._lock:
            if actor.lost is None:
                actor.lost = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                self.lost.append({**actor.where, "error": actor.lost})

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        return self.submit(requests).result()

    def info(self) -> dict[str, Any]:
        """The first actor's engine info, the actors (pid, node, GPUs), each one's seconds
        decoding for this config (``busy_s``, as of now; ``None`` for a lost actor), the lost
        ones, the batches retried, and the cluster."""
        if not self._closed:
            self.busy_s = self._ask("busy")
        return {
            **self._info,
            "device": self._info.get("device"),
            "ray": {
                "actors": [a.where for a in self.pool],
                "num_gpus": self.key[0],
                "num_cpus": self.key[1],
                "lost_actors": list(self.lost),
                "retried_batches": self.retried,
                "busy_s": list(self.busy_s),
            },
            "cluster": self.described,
        }

    def close(self) -> None:
        """Close this config's engine on every live actor (the actors stay for the next config)."""
        if self._closed:
            return
        self._closed = True
        self.busy_s = self._ask("close")
        self.cluster._open[self.key] -= 1

    def _ask(self, method: str) -> list[float | None]:
        """``method(handle)`` of every actor of the pool (``None`` from a lost one)."""
        refs = [None if a.lost else getattr(a.handle, method).remote(self.handle) for a in self.pool]
        out = []
        for ref in refs:
            try:
                out.append(None if ref is None else self.ray.get(ref))
            except self.ray.exceptions.RayError:
                out.append(None)
        return out
