"""Fixtures shared by every test module."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from support import (
    REPO,
    make_records,
    require_shared,
    save_demo_tokenizer_pair,
    table_outcomes,
    write_plan,
    write_records,
)
from toy_engine import register as register_toy_engine
from vllm_server import vllm_target_server  # noqa: F401 - the real vLLM server fixture, for every test directory

# no periodic progress lines in tests: on a loaded machine a slow step would add them to outputs
# that tests parse; tests/run/test_progress.py turns them on
os.environ.setdefault("QUALGATE_PROGRESS_EVERY_S", "3600")

# engine: toy (tests/toy_engine.py) in config files, for the tests of the harness
register_toy_engine()

# One Hypothesis profile for every property test: no per-example deadline (the examples' time
# varies with the load of shared CI cores; a slow example is found by the slow-test report
# below, not by a flaky deadline), and derandomised on CI so that a run is reproducible.
settings.register_profile("qualgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("qualgate"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "qualgate")

#: A test over this many CPU seconds (its process and its children, setup included) must be
#: marked ``slow`` (``python -m pytest -m "not slow"`` is the quick subset).
SLOW_CPU_S = 0.5
_unmarked_slow: list[tuple[str, float]] = []


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, wall = _cpu_s(), time.perf_counter()
    try:
        return (yield)
    finally:
        spent = _cpu_s() - start
        if spent > SLOW_CPU_S and item.get_closest_marker("slow") is None:
            _unmarked_slow.append((item.nodeid, spent, time.perf_counter() - wall))


def pytest_terminal_summary(terminalreporter):
    if _unmarked_slow:
        terminalreporter.section(f"tests over {SLOW_CPU_S} CPU-s not marked slow")
        for nodeid, cpu, wall in sorted(_unmarked_slow, key=lambda x: -x[1]):
            terminalreporter.write_line(f"{cpu:6.2f} CPU-s {wall:6.2f} s  {nodeid}")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; a test using it skips without it (:func:`support.require_shared`)."""
    return require_shared()


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO


# --- records (the gate, pairing, evidence and records tests) --------------------------------


@pytest.fixture
def write(tmp_path):
    """write(name, records or outcomes, **make_records options) -> path of a new .jsonl file."""
    return lambda name, items, **options: write_records(tmp_path / name, items, **options)


@pytest.fixture
def records_of():
    """:func:`support.make_records`, as a fixture."""
    return make_records


@pytest.fixture
def table():
    """:func:`support.table_outcomes`, as a fixture."""
    return table_outcomes


# --- tiny models and plans (the run, report and backend tests) --------------------------------


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Path:
    """``DIR/target`` (2 layers) and ``DIR/drafter`` (1 layer sharing the target's embeddings,
    first layer and head, so that it agrees with the target often, not always); torch decodes
    on one thread in the tests that use them."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    torch.set_num_threads(1)
    return save_demo_tokenizer_pair(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def plan_writer():
    """:func:`support.write_plan` itself (for module-scoped fixtures)."""
    return write_plan


@pytest.fixture
def plan_factory(tmp_path, request):
    """``plan_factory(**options) -> plan path`` (see :func:`support.write_plan`), in ``tmp_path/plan``:
    the toy engine by default; ``engine="reference"`` decodes with the :func:`models`."""

    def factory(**kw):
        models = request.getfixturevalue("models") if kw.get("engine") == "reference" else None
        return write_plan(tmp_path / "plan", models, **kw)

    return factory
