"""A backend that queues work itself decodes the next batches while the runner grades and stores the last."""

from __future__ import annotations

import concurrent.futures
import json
import random
import threading
import time

import pytest

from qualgate.backends import BACKENDS, Backend, Generation
from qualgate.backends._devices import comparable_records
from qualgate.config.decoding import load_plan
from qualgate.run.runner import run_plan


class Queued(Backend):
    """A backend that queues work itself (``in_flight`` 3): its calls complete out of order."""

    engine = "toy"
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


@pytest.mark.slow  # (two runs of a plan: over 0.5 CPU-s, imports included)
def test_a_queueing_backend_keeps_its_calls_in_flight_and_the_records_keep_their_order(
    plan_factory, tmp_path, monkeypatch
):
    plan = plan_factory(configs=("target",), questions=6, seeds=(0, 1, 2), batch_size=2)  # 9 calls
    monkeypatch.setitem(BACKENDS, "toy", Queued)  # (the engine of plan_factory's configs)
    Queued.peak = 0
    run_plan(load_plan(plan), tmp_path / "queued")
    assert Queued.peak == 3
    monkeypatch.setattr(Queued, "in_flight", 1)  # one call at a time, through generate()
    run_plan(load_plan(plan), tmp_path / "serial")
    lines = [(tmp_path / d / "records" / "target.jsonl").read_text().splitlines() for d in ("queued", "serial")]
    keys = [[(r["question_id"], r["seed"]) for r in map(json.loads, ls)] for ls in lines]
    assert keys[0] == keys[1] and len(keys[0]) == 18
    assert comparable_records(tmp_path / "queued") == comparable_records(tmp_path / "serial")
