"""Work is bounded by what it costs, not only by bytes (issue 34, item 9): a plan's seeds x
samples, the nodes of a YAML document, and the rows of a Parquet file (from its metadata,
before a row is decoded)."""

from __future__ import annotations

import time

import pytest

from qualgate.config.decoding import load_plan
from qualgate.errors import DataError
from qualgate.records import files, read_records, strict

from support import write_plan


def test_a_plan_whose_seeds_times_samples_exceed_the_bound_is_refused(tmp_path):
    plan = write_plan(tmp_path, seeds=range(100), samples=101)
    with pytest.raises(DataError, match=r"100 seeds x 101 samples = 10,100 requests per question") as exc:
        load_plan(plan)
    assert exc.value.field == "samples"
    assert len(load_plan(write_plan(tmp_path / "ok", seeds=range(100), samples=100)).seeds) == 100


def test_a_yaml_document_over_the_node_bound_is_refused_naming_its_line(monkeypatch):
    monkeypatch.setattr(strict, "MAX_NODES", 1_000, raising=False)
    text = "".join(f"k{i}: {i}\n" for i in range(600))  # 1,201 nodes
    with pytest.raises(DataError, match="more than 1,000 nodes") as exc:
        strict.loads_yaml(text, file="big.yaml")
    assert exc.value.line == 500  # node 1,001 is the value of k499, on line 500
    assert len(strict.loads_yaml("".join(f"k{i}: {i}\n" for i in range(499)))) == 499


@pytest.mark.slow
def test_the_worst_yaml_within_the_size_limit_is_refused_within_seconds():
    text = "".join(f"k{i}: 1\n" for i in range(600_000))[: strict.LIMITS["yaml"]]  # ~4 MiB of short keys
    t0 = time.process_time()
    with pytest.raises(DataError, match="nodes"):
        strict.loads_yaml(text)
    assert time.process_time() - t0 < 15  # it took over 60 s; 100,000 nodes take about 5 s


@pytest.mark.slow
def test_a_parquet_file_of_more_rows_than_the_bound_is_refused_from_its_metadata(tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    row = {
        "schema_version": 1,
        "run_id": "r",
        "config_id": "c",
        "suite": "s",
        "suite_version": "1",
        "question_id": "q",
        "seed": 0,
        "sample_index": 0,
        "outcome": "correct",
        "prompt_hash": "p",
    }
    n = 3_000
    table = pa.table({k: [v] * n for k, v in row.items()})
    path = tmp_path / "many.parquet"
    pq.write_table(table, path)
    monkeypatch.setattr(files, "MAX_PARQUET_ROWS", 2_000, raising=False)
    decoded = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: decoded.append(1) or real(*a, **k))
    with pytest.raises(DataError, match="3,000 rows, over the bound of 2,000 rows"):
        read_records(path)
    assert not decoded  # refused from the footer, before any row was decoded
