"""Helpers for the records, pairing, gate and calibrate tests: write synthetic record files."""

from __future__ import annotations

import pytest

from qualgate.records import Record, RecordWriter


def make_records(outcomes, *, config="cfg-base", seeds=1, suite="gsm8k", mode=None, prompt="p", run_id="run-1"):
    """Records for ``outcomes`` (strings): question i // seeds, seed i % seeds, sample 0."""
    return [
        Record(1, run_id, config, suite, "1", f"q{i // seeds}", i % seeds, 0, o, f"{prompt}{i // seeds}", mode=mode)
        for i, o in enumerate(outcomes)
    ]


def table_outcomes(both_correct, lost, gained, both_wrong):
    """Baseline and candidate outcome lists for a paired table, question by question."""
    b = ["correct"] * (both_correct + lost) + ["incorrect"] * (gained + both_wrong)
    c = ["correct"] * both_correct + ["incorrect"] * lost + ["correct"] * gained + ["incorrect"] * both_wrong
    return b, c


@pytest.fixture
def write(tmp_path):
    """write(name, records or outcomes, **make_records options) -> path of a new .jsonl file."""

    def _write(name, items, **options):
        path = tmp_path / name
        records = items if items and isinstance(items[0], Record) else make_records(items, **options)
        with RecordWriter(path) as writer:
            writer.write_batch(records)
        return path

    return _write


@pytest.fixture
def records_of():
    """make_records, as a fixture (test modules cannot import conftest)."""
    return make_records


@pytest.fixture
def table():
    """table_outcomes, as a fixture."""
    return table_outcomes
