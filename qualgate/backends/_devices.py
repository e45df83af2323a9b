"""One config over several GPUs: one engine per device, each in its own process.

:func:`open_on_devices` is the harness's backend factory. For ``engine: reference`` with
``engine_options.device`` unset or ``cuda`` (no index) on a machine that shows two or more
CUDA devices, it opens a
:class:`DeviceParallelBackend`: one worker process per visible GPU, each holding its own
engine (models loaded in parallel). Every :meth:`~DeviceParallelBackend.generate` call
splits its requests by ``seed % devices`` (the harness sets each request's seed to
:func:`qualgate.harness.request_seed` of its record key, so a request's device is a
function of its key), runs the parts at once and returns the results in request order.
A request's tokens do not depend on the other requests in its batch (docs/engine.md), so the
records equal those of a one-GPU run apart from the timing fields. The worker processes are
started once and serve every config of the run. Anything else is opened by
:func:`qualgate.backends.open_backend` as before.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import multiprocessing
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import Backend, Generation, Request, open_backend

__all__ = ["TIMING_FIELDS", "DeviceParallelBackend", "comparable_records", "open_on_devices", "visible_cuda_devices"]

#: record fields that measure time rather than what was decoded
TIMING_FIELDS = ("run_id", "latency_s")


def comparable_records(out) -> dict:
    """A run's records by (config, suite, question, seed, sample), timing fields left out.

    Two runs of one plan, on one GPU or spread over several, must give equal values.
    """
    rows = {}
    for path in sorted((Path(out) / "records").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            key = (path.stem, rec["suite"], rec["question_id"], rec["seed"], rec["sample_index"])
            rows[key] = {k: v for k, v in rec.items() if k not in TIMING_FIELDS}
    return rows


def visible_cuda_devices() -> list[str]:
    """``cuda:0 .. cuda:N-1`` for the N visible CUDA devices (none without torch or CUDA)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the reference extra is not installed
        return []
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"cuda:{i}" for i in range(n)]


def open_on_devices(config) -> Backend:
    """The backend for ``config``: spread over every visible GPU where that applies."""
    if config.engine == "reference" and config.engine_options.get("device") in (None, "cuda"):
        devices = visible_cuda_devices()
        if len(devices) > 1:
            return DeviceParallelBackend(config, devices)
    return open_backend(config)


def _worker(conn) -> None:  # pragma: no cover - runs in a child process
    """Serve ``("open", config)``, ``("generate", requests)`` and ``("close",)`` until None.

    The process outlives one config, so that a plan's configs do not each pay for starting
    a process and importing torch.
    """
    backend = None
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            if msg[0] == "open":
                backend = open_backend(msg[1])
                conn.send(("ok", (backend.batch_size, backend.info())))
            elif msg[0] == "generate":
                conn.send(("ok", backend.generate(msg[1])))
            else:  # close
                info = backend.info() if backend is not None else {}
                if backend is not None:
                    backend.close()
                backend = None
                conn.send(("ok", info))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
            conn.send(("error", type(exc).__name__, f"{exc}\n{traceback.format_exc()}"))


_POOLS: dict[tuple[str, ...], list] = {}


def _pool(devices: tuple[str, ...]) -> list:
    """One live worker (connection, process) per device, started once per process."""
    workers = _POOLS.get(devices)
    if workers is None or not all(p.is_alive() for _, p in workers):
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        workers = []
        for _ in devices:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child,), daemon=True)
            proc.start()
            workers.append((parent, proc))
        if not _POOLS:
            atexit.register(_stop_pools)
        _POOLS[devices] = workers
    return workers


def _stop_pools() -> None:
    for workers in _POOLS.values():
        for conn, proc in workers:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    _POOLS.clear()


def _reply(conn, device):
    status, *rest = conn.recv()
    if status == "ok":
        return rest[0]
    kind, message = rest
    if kind in ("ValueError", "DataError"):  # the engine refused the config (exit code 3)
        raise ValueError(f"{device}: {message.splitlines()[0]}")
    raise RuntimeError(f"engine on {device} failed: {kind}: {message}")


class DeviceParallelBackend(Backend):
    """``config``'s backend opened once per device, each in a worker process.

    Parameters
    ----------
    config : qualgate.config.DecodingConfig
    devices : sequence of str
        One worker per entry (``"cuda:0"``, ...; ``"cpu"`` entries work too, for tests).
    """

    engine = "reference"
    overlap = True  # generate() waits on the workers' pipes

    def __init__(self, config, devices: Sequence[str]):
        super().__init__(config)
        if not devices:
            raise ValueError("DeviceParallelBackend needs at least one device")
        self.devices = list(devices)
        self._conns = [conn for conn, _ in _pool(tuple(self.devices))]
        for conn, dev in zip(self._conns, self.devices):
            conn.send(("open", dataclasses.replace(config, engine_options={**config.engine_options, "device": dev})))
        replies, errors = [], []
        for conn, dev in zip(self._conns, self.devices):
            try:
                replies.append(_reply(conn, dev))
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
        """Indices of the requests each device decodes: ``seed % devices`` (index if unseeded)."""
        parts: list[list[int]] = [[] for _ in self.devices]
        for i, r in enumerate(requests):
            seed = r.sampling.get("seed")
            parts[(i if seed is None else int(seed)) % len(self.devices)].append(i)
        return parts

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        parts = self.partition(requests)
        busy = []
        for conn, idx in zip(self._conns, parts):
            if idx:
                conn.send(("generate", [requests[i] for i in idx]))
                busy.append((conn, idx))
        out: list[Generation | None] = [None] * len(requests)
        errors = []
        for (conn, idx), dev in zip(busy, [d for d, p in zip(self.devices, parts) if p]):
            try:
                gens = _reply(conn, dev)
            except (RuntimeError, ValueError) as exc:  # collect every reply before raising
                errors.append(exc)
                continue
            for i, g in zip(idx, gens):
                out[i] = g
        if errors:
            raise errors[0]
        return out

    def info(self) -> dict[str, Any]:
        info = dict(self._infos[0])
        info["devices"] = self.devices
        info["device"] = ",".join(self.devices)
        return info

    def close(self) -> None:
        """Close each device's engine (the worker processes stay for the next config)."""
        for conn, dev in zip(self._conns, self.devices):
            try:
                conn.send(("close",))
                _reply(conn, dev)
            except (EOFError, OSError, RuntimeError, ValueError):
                pass
        self._conns = []
