"""``qualgate check`` hashes only the record files a report names, each within the size
limit (issue 34, item 9): it hashed every file under ``--records`` and any file a report
named, a 64 GiB sparse file included (minutes of work for a file never read)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import qualgate.verdict.pairing as pairing
from qualgate.ci import read_serving_config
from qualgate.cli import cli
from qualgate.config.decoding import load_config
from qualgate.records.strict import LIMITS

import support

DATA = Path(__file__).parent / "data"
TARGET = DATA / "target.decoding.yaml"
SPARSE = 64 << 30


def write_records(path, config_id, mode, correct):
    path.parent.mkdir(parents=True, exist_ok=True)
    outcomes = ["correct" if ok else "incorrect" for ok in correct]
    return support.write_records(path, outcomes, config=config_id, mode=mode, run_id="ci-test")


@pytest.fixture
def hashed(monkeypatch):
    """The paths hashed; hashing a file over the records limit fails the test at once."""
    seen = []
    real = pairing.sha256_file

    def spy(path, **kwargs):
        size = os.stat(path).st_size
        if size > LIMITS["records"]:  # refused unread, or the test fails
            assert kwargs.get("limit") is not None, f"hashed {path} ({size} bytes)"
            return real(path, **kwargs)
        seen.append(os.path.basename(path))
        return real(path, **kwargs)

    monkeypatch.setattr(pairing, "sha256_file", spy)
    return seen


@pytest.fixture
def report(tmp_path):
    target = load_config(DATA / "target.decoding.yaml").config_id
    w2 = read_serving_config(DATA / "fly-w2.yaml").config_id()
    base = [k % 10 != 0 for k in range(1500)]
    d = tmp_path / "records"
    b = write_records(d / "target.jsonl", target, "target", base)
    c = write_records(d / "fly-w2.jsonl", w2, "fly", base)
    out = tmp_path / "report.json"
    r = CliRunner().invoke(
        cli,
        [
            "gate",
            str(b),
            str(c),
            "--margin",
            "0.02",
            "--baseline-config",
            str(TARGET),
            "--candidate-config",
            str(DATA / "fly-w2.decoding.yaml"),
            "--output",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    return out, d


def _sparse(path):
    with open(path, "wb") as fh:
        fh.truncate(SPARSE)
    return path


@pytest.mark.slow
def test_check_with_records_hashes_only_the_files_the_report_names(report, hashed, tmp_path):
    out, d = report
    _sparse(d / "unrelated.jsonl")
    (d / "notes.csv").write_text("not,a,record\n")
    r = CliRunner().invoke(
        cli,
        ["check", "--vllm-version", "0.33.0", str(DATA / "fly-w2.yaml"), "--evidence", str(out), "--records", str(d)],
    )
    assert r.exit_code == 0, r.output
    assert "verified by: records" in r.output
    # the recomputation reads them through numbered links ("00000-target.jsonl": shard files
    # may share a name), which are hashed as the files they name
    assert {re.sub(r"^\d{5}-", "", name) for name in hashed} == {"target.jsonl", "fly-w2.jsonl"}


@pytest.mark.slow
def test_a_named_record_file_replaced_by_a_64_gib_sparse_file_is_refused_unhashed(report, hashed):
    out, d = report
    (d / "fly-w2.jsonl").unlink()
    _sparse(d / "fly-w2.jsonl")
    r = CliRunner().invoke(
        cli,
        ["check", "--vllm-version", "0.33.0", str(DATA / "fly-w2.yaml"), "--evidence", str(out), "--records", str(d)],
    )
    assert r.exit_code == 1 and not isinstance(r.exception, AssertionError), r.output
    assert f"over {LIMITS['records']:,} bytes" in r.output
    assert "fly-w2.jsonl" not in hashed


def test_gate_refuses_a_64_gib_sparse_record_file_before_hashing_it(tmp_path, hashed):
    big = _sparse(tmp_path / "big.jsonl")
    r = CliRunner().invoke(cli, ["gate", str(big), str(big), "--margin", "0.05"])
    assert r.exit_code == 3, r.output
    assert "byte limit" in r.output
