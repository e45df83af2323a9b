"""The replicas behind one ``engine: vllm-server`` config: least-loaded dispatch, failover,
and each replica's ``/metrics`` counters.

A replica is ``up`` (takes requests), ``down`` (a connection to it failed; its identity is
checked again ``recheck_s`` later, by the next request that finds the recheck due, and it
is ``up`` again if the check passes), ``checking``, or ``excluded`` (it answered as another
deployment: out for the rest of the config). The last replica that is up is never taken
out: with one server, every request is retried on it (with backoff) as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import DataError
from .vllm import SPEC_COUNTERS

__all__ = ["Replica", "ReplicaPool", "accumulate", "add_vectors"]


class Unreachable(Exception):
    """A server that could not be asked (connection, timeout, 5xx)."""


class Replica:
    def __init__(self, index: int, url: str):
        self.index, self.url = index, url
        self.state = "up"  # up | down | checking | excluded
        self.in_flight = self.sent = 0
        self.recheck_at = 0.0
        self.last_error: str | None = None
        self.metrics_last: dict[str, Any] | None = None  # the last /metrics read
        self.metrics_delta: dict[str, Any] | None = None  # the growth since the config began

    def summary(self) -> dict[str, Any]:
        return {"state": self.state, "sent": self.sent, "last_error": self.last_error}


class ReplicaPool:
    """Thread-safe dispatch over ``urls``.

    ``check(url)`` returns ``(server_info, metrics)`` or raises :class:`Unreachable` or
    :class:`~qualgate.errors.DataError` (a mismatch); ``note(message)`` records an event.
    """

    def __init__(self, urls, recheck_s: float, check: Callable, note: Callable[[str], None]):
        self.replicas = [Replica(i, u) for i, u in enumerate(urls)]
        self.recheck_s = recheck_s
        self.check, self.note = check, note
        self.lock = threading.Lock()
        self.servers: dict[str, Any] = {}

    def open(self) -> list[Replica]:
        """Check every replica; those that cannot be reached start ``down``."""
        reachable = []
        for r in self.replicas:
            try:
                self.servers[r.url], r.metrics_last = self.check(r.url)
                reachable.append(r)
            except Unreachable as exc:
                self._down(r, str(exc))
                self.note(f"{exc}; left out until it answers")
        return reachable

    def acquire(self, avoid: Replica | None = None) -> Replica | None:
        """The ``up`` replica with the fewest requests in flight (ties: fewest sent), other
        than ``avoid`` when there is a choice; ``None`` when none is up."""
        now = time.monotonic()
        with self.lock:
            due = [r for r in self.replicas if r.state == "down" and r.recheck_at <= now]
            for r in due:
                r.state = "checking"
        for r in due:
            self._recheck(r)
        with self.lock:
            up = [r for r in self.replicas if r.state == "up"]
            if avoid is not None and len(up) > 1:
                up = [r for r in up if r is not avoid]
            if not up:
                return None
            r = min(up, key=lambda r: (r.in_flight, r.sent, r.index))
            r.in_flight += 1
            r.sent += 1
            return r

    def release(self, r: Replica) -> None:
        with self.lock:
            r.in_flight -= 1

    def take_out(self, r: Replica, why: str, *, for_good: bool = False) -> None:
        """Take ``r`` out of the rotation, unless no other replica is up: the last one stays,
        and its requests are retried on it after a backoff."""
        with self.lock:
            r.last_error = why
            others = any(x.state == "up" and x is not r for x in self.replicas)
            if r.state != "up" or not others:
                return
            if for_good:
                r.state = "excluded"
            else:
                self._down(r, why)
        self.note(f"{r.url} taken out of the rotation{' for good' if for_good else ''}: {why}")

    def alternative(self, r: Replica) -> bool:
        """Whether another replica than ``r`` is up."""
        with self.lock:
            return any(x.state == "up" and x is not r for x in self.replicas)

    def states(self) -> dict[str, str | None]:
        with self.lock:
            return {r.url: f"{r.state}: {r.last_error}" for r in self.replicas}

    def _down(self, r: Replica, why: str) -> None:
        r.state, r.last_error = "down", why
        r.recheck_at = time.monotonic() + self.recheck_s

    def _recheck(self, r: Replica) -> None:
        try:
            server, metrics = self.check(r.url)
        except Unreachable as exc:
            with self.lock:
                self._down(r, str(exc))
            return
        except DataError as exc:
            with self.lock:
                r.state, r.last_error = "excluded", str(exc)
            self.note(f"{r.url} taken out for good: {exc}")
            return
        with self.lock:
            self.servers[r.url] = server
            if r.metrics_last is not None and metrics is not None:
                r.metrics_delta = accumulate(r.metrics_delta, r.metrics_last, metrics)
                r.metrics_last = metrics
            r.state = "up"
        self.note(f"{r.url} back in the rotation after its identity was checked again")


def add_vectors(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def accumulate(acc, last, now) -> dict[str, Any]:
    """``acc`` plus the counters' growth from ``last`` to ``now`` (all of ``now`` when any
    counter went back: the server restarted from zero)."""
    keys = list(SPEC_COUNTERS.values())
    pos_now, pos_last = now["num_accepted_tokens_per_pos"], last["num_accepted_tokens_per_pos"]
    restarted = (
        any(now[k] < last[k] for k in keys)
        or len(pos_now) < len(pos_last)
        or any(x < y for x, y in zip(pos_now, pos_last))
    )
    step = {k: now[k] - (0 if restarted else last[k]) for k in keys}
    step["num_accepted_tokens_per_pos"] = (
        pos_now if restarted else [x - y for x, y in zip(pos_now, pos_last + [0] * (len(pos_now) - len(pos_last)))]
    )
    if acc is None:
        return step
    out = {k: acc[k] + step[k] for k in keys}
    out["num_accepted_tokens_per_pos"] = add_vectors(
        acc["num_accepted_tokens_per_pos"], step["num_accepted_tokens_per_pos"]
    )
    return out
