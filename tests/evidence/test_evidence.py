"""The gate report file (qualgate.evidence.gate_report): one writer, one reader, and what binds it."""

import dataclasses
import hashlib
import hmac
import json
import os

import pytest

from qualgate.errors import DataError, ExitCode
from qualgate.evidence.gate_report import Evidence, decide_exit, describe_config
from qualgate.verdict.fixed import run_gate
from qualgate.verdict.sequential import run_sequential_gate


@pytest.fixture
def files(write, table):
    b, c = table(280, 4, 3, 113)
    return write("target.jsonl", b, mode="target"), write("fly.jsonl", c, config="cfg-fly", mode="fly")


@pytest.mark.slow
@pytest.mark.parametrize("design", ["fixed", "sequential"])
def test_what_the_writer_writes_the_reader_reads_back_unchanged(files, design):
    run = run_gate if design == "fixed" else run_sequential_gate
    doc = run(*files, margin=0.05).to_dict()
    assert doc["design"] == design
    assert Evidence.from_dict(json.loads(json.dumps(doc))).to_dict() == doc


@pytest.mark.slow
def test_the_report_carries_the_digest_of_every_record_file_and_the_settings(files):
    doc = run_gate(*files, margin=0.05, max_errors=2).to_dict()
    (f,) = doc["baseline"]["files"]
    assert f == {"path": str(files[0]), "sha256": hashlib.sha256(files[0].read_bytes()).hexdigest()}
    assert doc["settings"] == {
        "policy": "noninferiority",
        "margin": 0.05,
        "alpha": 0.05,
        "weighting": "pooled",
        "inconclusive": "inconclusive",
        "missing": "worst-case",
        "on_missing": "error",
        "max_errors": 2,
        "drop_truncated": False,
        "allow_unknown": False,
        "suite_policy": None,
    }


def test_the_signature_is_an_hmac_of_the_canonical_json(files):
    ev = run_gate(*files, margin=0.05).evidence().signed("k")
    doc = ev.to_dict()
    body = {k: v for k, v in doc.items() if k != "signature"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    assert doc["signature"] == {"algorithm": "hmac-sha256", "value": hmac.new(b"k", blob, hashlib.sha256).hexdigest()}
    assert ev.signature_problem("k") == ""
    assert "does not match" in ev.signature_problem("other")
    assert dataclasses.replace(ev, signature=None).signature_problem("k") == "the report is not signed"
    with pytest.raises(DataError, match="set but empty"):  # an empty key is not "no key" (issue 34)
        ev.signed("")


def test_the_writer_signs_with_the_key_in_the_environment(files, tmp_path, monkeypatch):
    monkeypatch.setenv("QUALGATE_EVIDENCE_KEY", "secret")
    path = run_gate(*files, margin=0.05).evidence().write(tmp_path / "r.json")
    assert Evidence.read(path).signature_problem("secret") == ""


def test_a_baseline_config_must_have_the_baseline_records_id(files):
    desc = describe_config("Qwen/Qwen3-8B", None, {"dtype": "bfloat16"})
    with pytest.raises(DataError, match=f"has config id {desc['config_id']}, but the baseline records carry cfg-base"):
        run_gate(*files, margin=0.05, baseline_config=desc)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"kind": "qualgate.gate_report", "kind": "x"}', "duplicate key 'kind'"),
        ('{"margin": NaN}', "NaN is not a JSON number"),
        ('{"margin": Infinity}', "Infinity is not a JSON number"),
        ("[" * 100000 + "]" * 100000, "nest"),
        ("[1, 2]", "a gate report is a JSON object"),
    ],
)
def test_the_reader_refuses_what_json_loads_would_take(tmp_path, text, message):
    # not a JSON file qualgate's strict reader accepts: invalid data (exit 3), naming the file
    p = tmp_path / "r.json"
    p.write_text(text)
    with pytest.raises(DataError, match=message) as exc:
        Evidence.read(p)
    assert "r.json" in str(exc.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="not a regular file"):
        Evidence.read(fifo)


@pytest.mark.parametrize(
    "verdicts, mapping, expected",
    [
        (["PASS", "PASS"], "inconclusive", ("PASS", ExitCode.OK)),
        (["PASS", "FAIL", "INCONCLUSIVE"], "pass", ("FAIL", ExitCode.FAIL)),
        (["INCONCLUSIVE", "PASS"], "inconclusive", ("INCONCLUSIVE", ExitCode.INCONCLUSIVE)),
        (["INCONCLUSIVE"], "fail", ("INCONCLUSIVE", ExitCode.FAIL)),
        (["INCONCLUSIVE"], "pass", ("INCONCLUSIVE", ExitCode.OK)),
    ],
)
def test_one_function_maps_verdicts_to_the_exit_code(verdicts, mapping, expected):
    assert decide_exit(verdicts, mapping) == expected


def test_decide_exit_refuses_a_verdict_it_does_not_know():
    with pytest.raises(ValueError, match="verdicts must be"):
        decide_exit(["pass"])
