"""A config's engines on GPUs: one engine per device, each in its own worker process.

:func:`open_on_devices` is the harness's backend factory. For ``engine: reference`` on CUDA
it opens a :class:`DeviceParallelBackend`: ``engine_options.device`` unset or ``cuda`` (no
index) gives one worker process per visible GPU, ``cuda:N`` one worker on that GPU; each
worker holds its own engine (models loaded in parallel). Each call's requests are cut into
one contiguous part per device, of equal sizes (:meth:`DeviceParallelBackend.partition`: the
requests come in the plan's order, a function of their keys, so the split is deterministic),
and queued on the devices' workers; the harness keeps
:attr:`DeviceParallelBackend.in_flight` calls submitted, so a device that finishes its part
early starts on its part of the next call instead of waiting for the others, and the
harness grades and stores each call's results, in order, while the devices decode. A
request's tokens do not depend on the other requests in its batch (docs/engine.md), so the
records equal those of an in-process engine apart from the timing fields. On one GPU the
worker is what makes decoding overlap the harness's own work (an in-process engine would
share the GIL with it). The worker processes are started once and serve every config of the
run, several at once when the run keeps several open. Anything else (CPU, other engines) is
opened in this process by :func:`qualgate.backends.open_backend`.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import itertools
import json
import multiprocessing
import queue
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from . import Backend, Generation, Request, open_backend

__all__ = [
    "TIMING_FIELDS",
    "DeviceParallelBackend",
    "comparable_records",
    "open_on_devices",
    "visible_cuda_devices",
    "worker_devices",
]

#: record fields that measure time rather than what was decoded
TIMING_FIELDS = ("run_id", "latency_s")


def comparable_records(out) -> dict:
    """A run's records by (config, suite, question, seed, sample), timing fields left out.

    Two runs of one plan, on one GPU or spread over several, must give equal values. The
    tokens are exact; ``top2_margins`` are left out too: they are floats of the batch's
    numerics (a request's row shares its matrix products with other rows, so the 6th decimal
    moves with the batch), and no rounding makes floats that close compare equal. Their
    values are tested against a full forward pass in ``tests/engines``.
    """
    rows = {}
    for path in sorted((Path(out) / "records").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            key = (path.stem, rec["suite"], rec["question_id"], rec["seed"], rec["sample_index"])
            rows[key] = {k: v for k, v in rec.items() if k not in TIMING_FIELDS and k != "top2_margins"}
    return rows


def visible_cuda_devices() -> list[str]:
    """``cuda:0 .. cuda:N-1`` for the N visible CUDA devices (none without torch or CUDA)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the reference extra is not installed
        return []
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"cuda:{i}" for i in range(n)]


def open_on_devices(config, *, threads: int | None = None) -> Backend:
    """The backend for ``config``: a reference engine on CUDA in worker processes (one per GPU).

    ``threads``: torch CPU threads of each worker process (``qualgate run --threads``);
    default: an equal share of torch's own default (see :class:`DeviceParallelBackend`).
    """
    devices = worker_devices(config)
    if devices:
        return DeviceParallelBackend(config, devices, threads=threads)
    return open_backend(config)


def worker_devices(config) -> list[str]:
    """The CUDA devices whose workers :func:`open_on_devices` opens ``config`` on (one worker
    each): every visible GPU for a reference engine whose ``device`` is unset or ``cuda``,
    the one named by ``cuda:N``; none (open it in this process) otherwise, or when no CUDA
    device is visible (the engine then names what is missing)."""
    device = config.engine_options.get("device")
    if config.engine != "reference" or not (device is None or isinstance(device, str) and device.startswith("cuda")):
        return []
    visible = visible_cuda_devices()
    return visible if device in (None, "cuda") else [device] if visible else []


def _local_cpus(device: str) -> set[int]:
    """The CPUs on the NUMA node of CUDA ``device`` (from sysfs), or an empty set."""
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    try:
        return cpu_list(Path(f"/sys/bus/pci/devices/{bus}/local_cpulist").read_text())
    except OSError:
        return set()


def cpu_list(text: str) -> set[int]:
    """The CPUs of a Linux CPU list (``"0-3,8-11,16"``, as sysfs writes it)."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


_DEFAULTS: dict = {}  # this worker's torch threads and CPUs before any change


def _settle(device: str, threads: int | None, share: int, pin: bool) -> dict:
    """Make ``device`` this worker's current CUDA device, set its torch threads (``threads``,
    else torch's default // ``share``) and, with ``pin``, bind it to the CPUs local to its GPU
    where that restricts it. Returns what was set, for the backend's info."""
    import os

    import torch

    if device.startswith("cuda"):
        # what names no device (torch.cuda.graph's synchronize, empty_cache) then means this
        # worker's GPU, not GPU 0, where it would open a second context beside GPU 0's worker
        torch.cuda.set_device(torch.device(device))
    affinity = hasattr(os, "sched_setaffinity")
    if not _DEFAULTS:
        _DEFAULTS.update(threads=torch.get_num_threads(), cpus=os.sched_getaffinity(0) if affinity else None)
    pinned = None
    if affinity:
        near = _local_cpus(device) & _DEFAULTS["cpus"] if pin and device.startswith("cuda") else set()
        near = near if near != _DEFAULTS["cpus"] else set()  # (one NUMA node: nothing to bind)
        os.sched_setaffinity(0, near or _DEFAULTS["cpus"])
        pinned = len(near) if near else None
    torch.set_num_threads(threads or max(1, _DEFAULTS["threads"] // share))
    return {"threads": torch.get_num_threads(), "pinned_cpus": pinned}


def _worker(conn) -> None:  # pragma: no cover - runs in a child process
    """Serve ``("open", handle, config, settle)``, ``("generate", handle, requests)``,
    ``("report", handle)`` and ``("close", handle)`` until None (``settle``: the arguments of
    :func:`_settle` after the device).

    Messages are served one at a time, in the order they arrive, with one reply each. Each
    open engine is kept under the handle its backend chose, so that several configs can be
    open at once (a sequential run's rounds, interleaved speed rounds) and each call reaches
    its own config's engine. The process outlives one config, so that a plan's configs do not
    each pay for starting a process and importing torch.
    """
    from qualgate.formatting import show_engine_warnings

    show_engine_warnings()  # (a spawned process: no handler of the parent's)
    engines: dict[int, list] = {}  # handle -> [backend, seconds decoding since the open]
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            kind, handle = msg[0], msg[1]
            if kind == "open":
                settled = _settle(msg[2].engine_options["device"], *msg[3])
                backend = open_backend(msg[2])
                engines[handle] = [backend, 0.0]
                conn.send(("ok", (backend.batch_size, {**backend.info(), **settled})))
            elif kind == "generate":
                entry = engines[handle]
                t0 = time.perf_counter()
                gens = entry[0].generate(msg[2])
                entry[1] += time.perf_counter() - t0
                conn.send(("ok", gens))
            else:  # report, or close: the seconds spent decoding since the open, and the engine's timing
                backend, busy = engines.pop(handle, (None, 0.0)) if kind == "close" else engines[handle]
                # (a ReferenceBackend: the only engine served here)
                timing = None if backend is None else backend.engine_.timing()
                if kind == "close" and backend is not None:
                    backend.close()
                conn.send(("ok", (busy, timing)))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
            conn.send(("error", type(exc).__name__, f"{exc}\n{traceback.format_exc()}"))


class _Worker:
    """One worker process and its queue: :meth:`call` sends a message and returns a future.

    Messages queue in the pipe, so the worker starts the next one as soon as it has replied
    to the last: each GPU is kept busy without waiting for the others. A sending and a
    receiving thread move the messages; the replies come back in the order the messages
    were sent, and each resolves its message's future (with the raw reply; :func:`_unwrap`
    reads it). If the process dies, every future still waiting fails.
    """

    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting: collections.deque[Future] = collections.deque()
        self._lock = threading.Lock()
        self._broken: BaseException | None = None
        for loop in (self._send_loop, self._receive_loop):
            threading.Thread(target=loop, name=f"qualgate-worker-{self.proc.pid}", daemon=True).start()

    def is_alive(self) -> bool:
        return self.proc.is_alive() and self._broken is None

    def call(self, msg) -> Future:
        """Queue ``msg``; a message that cannot be pickled raises here, and is not sent."""
        return self.call_pickled(ForkingPickler.dumps(msg))  # what Connection.send would send

    def call_pickled(self, data) -> Future:
        fut: Future = Future()
        with self._lock:  # the waiting order is the sending order
            if self._broken is not None:
                fut.set_exception(self._broken)
                return fut
            self._waiting.append(fut)
            self._outbox.put(data)
        return fut

    def stop(self) -> None:
        self._outbox.put(None)

    def _send_loop(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                self.conn.send_bytes(data)
            except (OSError, ValueError) as exc:
                self._fail(self._gone(exc))
                return
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass

    def _receive_loop(self) -> None:
        while True:
            try:
                reply = self.conn.recv()
            except (EOFError, OSError) as exc:
                self._fail(self._gone(exc))
                return
            except Exception as exc:  # noqa: BLE001 - a reply that cannot be read: the pipe is lost
                self.proc.kill()  # (a new pool replaces the worker)
                self._fail(RuntimeError(f"engine worker {self.proc.pid} sent a reply that cannot be read: {exc!r}"))
                return
            with self._lock:
                fut = self._waiting.popleft()
            fut.set_result(reply)

    def _gone(self, exc: BaseException) -> RuntimeError:
        self.proc.join(timeout=5)
        return RuntimeError(f"engine worker {self.proc.pid} exited (exit code {self.proc.exitcode}); its pipe: {exc!r}")

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            self._broken = exc
            waiting, self._waiting = list(self._waiting), collections.deque()
        for fut in waiting:
            fut.set_exception(exc)


_POOLS: dict[tuple[str, ...], list[_Worker]] = {}
_HANDLES = itertools.count()


def _pool(devices: tuple[str, ...]) -> list[_Worker]:
    """One live worker per device, started once per process."""
    workers = _POOLS.get(devices)
    if workers is None or not all(w.is_alive() for w in workers):
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        workers = [_Worker(ctx) for _ in devices]
        if not _POOLS:
            atexit.register(_stop_pools)
        _POOLS[devices] = workers
    return workers


def _stop_pools() -> None:
    for workers in _POOLS.values():
        for w in workers:
            w.stop()
        for w in workers:
            w.proc.join(timeout=30)
            if w.proc.is_alive():
                w.proc.kill()
    _POOLS.clear()


def _unwrap(reply, device):
    """A worker's reply: the value, or the worker's exception raised here."""
    status, *rest = reply
    if status == "ok":
        return rest[0]
    kind, message = rest
    if kind in ("ValueError", "DataError"):  # the engine refused the config (exit code 3)
        raise ValueError(f"{device}: {message.splitlines()[0]}")
    raise RuntimeError(f"engine on {device} failed: {kind}: {message}")


def _gather(n: int, parts: list[tuple[str, list[int], Future]]) -> Future:
    """One future for ``n`` results from per-device parts ``(device, indices, future)``.

    It resolves when every part has replied; the first error (after all replies) is raised.
    """
    out: Future = Future()
    left = [len(parts)]
    lock = threading.Lock()

    def finish(_=None):
        with lock:
            left[0] -= 1
            if left[0] > 0:
                return
        results: list[Generation | None] = [None] * n
        errors = []
        for device, idx, fut in parts:
            try:
                gens = _unwrap(fut.result(), device)
            except (RuntimeError, ValueError) as exc:
                errors.append(exc)
                continue
            for i, g in zip(idx, gens):
                results[i] = g
        if errors:
            out.set_exception(errors[0])
        else:
            out.set_result(results)

    if not parts:  # no requests
        out.set_result([])
    for _, _, fut in parts:
        fut.add_done_callback(finish)
    return out


class DeviceParallelBackend(Backend):
    """``config``'s backend opened once per device, each in a worker process.

    Parameters
    ----------
    config : qualgate.config.decoding.DecodingConfig
    devices : sequence of str
        One worker per entry (``"cuda:0"``, ...; ``"cpu"`` entries work too, for tests).
    threads : int, optional
        torch CPU threads of each worker; default: torch's own default divided by the
        number of devices, so that the workers together use the cores one process would.
    pin : bool
        Bind each CUDA device's worker to the CPUs of that GPU's NUMA node, where that
        restricts it (a host with several nodes) and leaves it some CPUs.
    """

    engine = "reference"
    #: calls the harness keeps submitted: each device has its share of the next calls queued
    #: and starts on them when it is done, whether or not the other devices are
    in_flight = 4

    def __init__(self, config, devices: Sequence[str], *, threads: int | None = None, pin: bool = True):
        super().__init__(config)
        if not devices:
            raise ValueError("DeviceParallelBackend needs at least one device")
        self.devices = list(devices)
        #: each device's seconds decoding and :meth:`ReferenceEngine.timing
        #: <qualgate.engines.reference.ReferenceEngine.timing>`, as of the last :meth:`info` or the close
        self.busy_s = [0.0] * len(self.devices)
        self.timing: list[dict | None] = [None] * len(self.devices)
        self._workers = _pool(tuple(self.devices))
        self._handle = next(_HANDLES)  # this backend's engine in each worker
        settle = (threads, len(self.devices), pin)
        opened = [
            w.call(
                (
                    "open",
                    self._handle,
                    dataclasses.replace(config, engine_options={**config.engine_options, "device": dev}),
                    settle,
                )
            )
            for w, dev in zip(self._workers, self.devices)
        ]
        replies, errors = [], []
        for fut, dev in zip(opened, self.devices):
            try:
                replies.append(_unwrap(fut.result(), dev))
            except (RuntimeError, ValueError) as exc:
                errors.append(exc)
        if errors:
            self.close()
            raise errors[0]
        self._per_device = min(int(size) for size, _ in replies)
        self._infos = [info for _, info in replies]

    @property
    def batch_size(self) -> int:
        """Requests per harness batch: the devices' batch size times the number of devices."""
        return self._per_device * len(self.devices)

    def partition(self, requests: Sequence[Request]) -> list[list[int]]:
        """Indices of the requests each device decodes: the call cut, in request order, into
        one contiguous part per device, of equal sizes (the first parts one larger where the
        count does not divide).

        A device's part of a call of ``devices x b`` requests is then exactly the call of
        ``b`` requests one device would have been sent, so each engine decodes the batches
        (and steps) of a one-device run. The plan sends each question's seeds one after
        another, and a batch's steps are those of its longest answer, so batches mixing more
        questions take more steps: dealing the requests out by seed cost 4 % more steps per
        GPU on two H200s, and splitting by ``seed % devices`` 11-16 % (parts a few requests
        over a device's batch size, decoded as one more batch).
        """
        n, size = len(self.devices), len(requests)
        step, extra = divmod(size, n)
        bounds = [d * step + min(d, extra) for d in range(n + 1)]
        return [list(range(bounds[d], bounds[d + 1])) for d in range(n)]

    def submit(self, requests: Sequence[Request]) -> Future:
        """Queue each device's part of ``requests``; the future gives all results, in order."""
        parts = [
            (w, dev, idx, ForkingPickler.dumps(("generate", self._handle, [requests[i] for i in idx])))
            for w, dev, idx in zip(self._workers, self.devices, self.partition(requests))
            if idx
        ]
        # (every part pickled before any is queued: a request that cannot be, queues nothing)
        return _gather(len(requests), [(dev, idx, w.call_pickled(data)) for w, dev, idx, data in parts])

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        return self.submit(requests).result()

    def info(self) -> dict[str, Any]:
        """The first worker's backend info, with per-device lists: ``threads``, ``pinned_cpus``,
        and, as of now, ``busy_s`` and ``engine_timing`` (each worker's)."""
        if self._workers:
            self._report("report")
        info = dict(self._infos[0])
        info["devices"] = self.devices
        info["device"] = ",".join(self.devices)
        info["threads"] = [i["threads"] for i in self._infos]
        info["pinned_cpus"] = [i["pinned_cpus"] for i in self._infos]
        info["busy_s"] = list(self.busy_s)
        info["engine_timing"] = list(self.timing)
        return info

    def close(self) -> None:
        """Close each device's engine (the worker processes stay for the next config).

        A close queues behind the calls already submitted, so it is answered after them.
        """
        self._report("close")
        self._workers = []

    def _report(self, kind: str) -> None:
        """Send ``kind`` (``report`` or ``close``) to each worker; keep its seconds decoding
        and its engine's timing (a worker that failed keeps the last ones)."""
        replies = [(w.call((kind, self._handle)), dev) for w, dev in zip(self._workers, self.devices)]
        for i, (fut, dev) in enumerate(replies):
            try:
                self.busy_s[i], self.timing[i] = _unwrap(fut.result(), dev)
            except (RuntimeError, ValueError):
                pass
