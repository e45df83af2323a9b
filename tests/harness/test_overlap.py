"""The runner decodes the next batches while it grades and stores the previous one."""

from __future__ import annotations

import concurrent.futures
import json
import random
import threading
import time

import pytest

from qualgate.backends import BACKENDS, Backend, Generation, register_backend
from qualgate.backends._devices import comparable_records
from qualgate.backends.reference import ReferenceBackend
from qualgate.harness import run_plan
from qualgate.config import load_plan


class Recording(Backend):
    """A real backend (echoes the seed) that records which thread ran each call, and when."""

    engine = "reference"
    overlap = True
    calls: list = []

    def generate(self, requests):
        Recording.calls.append(("start", threading.current_thread().name, len(Recording.calls)))
        running = sum(1 if c[0] == "start" else -1 for c in Recording.calls)
        out = [Generation(text=f"The answer is {r.sampling['seed'] % 7}") for r in requests]
        Recording.calls.append(("end", running, None))
        return out

    def info(self):
        return {"engine": "recording"}

    def close(self):
        Recording.calls.append(("close", sum(1 if c[0] == "start" else -1 for c in Recording.calls if c[0] != "close"), None))


@pytest.fixture
def recording(monkeypatch):
    monkeypatch.setitem(BACKENDS, "reference", BACKENDS["reference"])
    register_backend("reference", Recording)
    Recording.calls = []
    return Recording


def test_an_overlapping_backend_decodes_in_a_helper_thread_one_call_at_a_time(recording, plan_factory, tmp_path):
    plan = plan_factory(configs=("target",), questions=5, seeds=(0, 1), batch_size=2)
    run_plan(load_plan(plan), tmp_path / "out")
    starts = [c for c in recording.calls if c[0] == "start"]
    assert len(starts) == 5  # 10 requests in batches of 2
    assert all(name.startswith("qualgate-generate") for _, name, _ in starts)
    assert max(c[1] for c in recording.calls if c[0] == "end") == 1  # never two calls at once
    assert [c[0] for c in recording.calls][-1] == "close" and recording.calls[-1][1] == 0


@pytest.mark.slow
def test_overlapped_and_serial_runs_write_the_same_records(plan_factory, tmp_path, monkeypatch):
    """The reference engine on CPU, three configs, several batches each: overlap on and off
    (the engine-per-GPU backend overlaps; the in-process one does not by default)."""
    plan = plan_factory(questions=4, seeds=(0, 1, 2), batch_size=3)
    run_plan(load_plan(plan), tmp_path / "serial")
    monkeypatch.setattr(ReferenceBackend, "overlap", True)
    run_plan(load_plan(plan), tmp_path / "overlapped")
    overlapped, serial = comparable_records(tmp_path / "overlapped"), comparable_records(tmp_path / "serial")
    assert len(serial) == 3 * 4 * 3 and overlapped == serial


class Queued(Backend):
    """A backend that queues work itself (``in_flight`` 3): its calls complete out of order."""

    engine = "reference"
    in_flight = 3
    outstanding = peak = 0

    def __init__(self, config):
        super().__init__(config)
        self.lock = threading.Lock()
        self.rng = random.Random(0)

    def submit(self, requests):
        with self.lock:
            Queued.outstanding += 1
            Queued.peak = max(Queued.peak, Queued.outstanding)
        fut = concurrent.futures.Future()

        def later(delay):
            time.sleep(delay)
            with self.lock:
                Queued.outstanding -= 1
            fut.set_result(self.generate(requests))

        threading.Thread(target=later, args=(self.rng.uniform(0, 0.05),)).start()
        return fut

    def generate(self, requests):
        return [Generation(text=f"The answer is {r.sampling['seed'] % 7}") for r in requests]

    def info(self):
        return {"engine": "queued"}

    def close(self):
        assert Queued.outstanding == 0  # the runner waited for every call it submitted


def test_a_queueing_backend_keeps_its_calls_in_flight_and_the_records_keep_their_order(plan_factory, tmp_path, monkeypatch):
    plan = plan_factory(configs=("target",), questions=6, seeds=(0, 1, 2), batch_size=2)  # 9 calls
    monkeypatch.setitem(BACKENDS, "reference", Queued)
    Queued.peak = 0
    run_plan(load_plan(plan), tmp_path / "queued")
    assert Queued.peak == 3
    monkeypatch.setattr(Queued, "in_flight", 1)  # one call at a time, through generate()
    run_plan(load_plan(plan), tmp_path / "serial")
    lines = [(tmp_path / d / "records" / "target.jsonl").read_text().splitlines() for d in ("queued", "serial")]
    keys = [[(r["question_id"], r["seed"]) for r in map(json.loads, ls)] for ls in lines]
    assert keys[0] == keys[1] and len(keys[0]) == 18
    assert comparable_records(tmp_path / "queued") == comparable_records(tmp_path / "serial")
