"""The gate report's typed parts (qualgate.evidence.contract): built by the writer, read by every reader."""

import dataclasses
import json
from pathlib import Path

import pytest

from qualgate.evidence.contract import (
    Baseline,
    FixedCandidate,
    FixedMissingness,
    FixedSettings,
    Missingness,
    RecordFile,
    SequentialCandidate,
    SequentialSettings,
    Verdict,
)
from qualgate.evidence.gate_report import _SETTINGS, Evidence, decide_exit
from qualgate.formatting import to_json
from qualgate.verdict.fixed import GateReport
from qualgate.verdict.result import GateResult
from qualgate.verdict.scope import decide
from qualgate.verdict.sequential import SequentialReport

DATA = Path(__file__).parent / "data"
KEY = "qualgate-fixture-key"


def earlier(name):
    return json.loads((DATA / name).read_text())


def test_a_read_report_is_made_of_the_typed_parts():
    ev = Evidence.read(DATA / "fixed-v2.json")
    assert isinstance(ev.settings, FixedSettings) and ev.settings.margin == 0.05 and ev.settings.max_errors == 1
    assert isinstance(ev.baseline, Baseline) and ev.baseline.config["method"] == "target"
    assert ev.baseline.files[0] == RecordFile(path="fixed-target.jsonl", sha256=ev.baseline.files[0].sha256)
    first, second = ev.candidates
    assert isinstance(first, FixedCandidate) and isinstance(first.missing, FixedMissingness)
    assert (first.verdict, second.verdict, ev.verdict) == (Verdict.PASS, Verdict.FAIL, Verdict.FAIL)
    assert first.missing.imputed_as_lost == 1 and first.missing.decisive("worst-case") is Verdict.PASS
    assert [s["scope"] for s in first.suites] == ["gsm8k", "math"]
    seq = Evidence.read(DATA / "sequential-v2.json")
    assert isinstance(seq.settings, SequentialSettings) and seq.settings.order == "seeded"
    (c,) = seq.candidates
    assert isinstance(c, SequentialCandidate) and type(c.missing) is Missingness and c.questions_used == 76


def test_the_parts_are_frozen():
    ev = Evidence.read(DATA / "fixed-v2.json")
    for part, field in (
        (ev, "verdict"),
        (ev.settings, "margin"),
        (ev.candidates[0], "verdict"),
        (ev.candidates[0].missing, "verdict_dropped"),
        (ev.baseline, "config_id"),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, field, None)


def test_a_key_an_earlier_writer_did_not_write_reads_as_its_default_and_is_not_written_back():
    doc = earlier("fixed-v2.json")
    for c in doc["candidates"]:  # reports written before flips were recorded
        del c["flips"]
    del doc["baseline"]["decided_by"]
    ev = Evidence.from_dict(doc)
    assert ev.candidates[0].flips is None and dict(ev.baseline.decided_by) == {}
    assert to_json(ev.to_dict()) == to_json(doc)


def test_an_earlier_signed_report_lacking_a_key_still_verifies_its_signature():
    doc = earlier("sequential-v2.json")
    del doc["candidates"][0]["reason"], doc["candidates"][0]["missing"]["incomplete"]
    signed = Evidence.from_dict(doc).signed(KEY).to_dict()  # as an earlier writer would have signed it
    read = Evidence.from_dict(json.loads(json.dumps(signed)))
    assert read.candidates[0].reason is None and read.signature_problem(KEY) == ""
    assert read.to_dict() == signed


def test_keys_a_part_does_not_name_are_kept_as_they_were():
    doc = earlier("fixed-v2.json")
    doc["candidates"][0]["reviewed_by"] = {"who": "someone"}
    doc["candidates"][0]["side"]["host"] = "gpu-3"
    ev = Evidence.from_dict(doc)
    assert ev.candidates[0].extra == {"reviewed_by": {"who": "someone"}}
    assert ev.to_dict() == doc


def test_a_verdict_is_written_and_compared_as_its_name():
    assert (
        Verdict.PASS == "PASS"
        and f"{Verdict.FAIL}" == "FAIL"
        and json.dumps([Verdict.INCONCLUSIVE]) == '["INCONCLUSIVE"]'
    )
    assert Verdict("PASS") is Verdict.PASS
    doc = Evidence.read(DATA / "fixed-v2.json").to_dict()
    assert type(doc["verdict"]) is str and type(doc["candidates"][0]["missing"]["verdict_worst_case"]) is str
    assert type(doc["candidates"][0]["pooled"]["verdict"]) is str


def test_the_decision_rule_and_the_exit_mapping_give_verdicts():
    assert decide("noninferiority", pvalue_noninferiority=0.01, pvalue_loss=0.5, alpha=0.05) is Verdict.PASS
    assert decide_exit(["PASS", "FAIL"])[0] is Verdict.FAIL
    with pytest.raises(ValueError, match="non-empty list"):
        decide_exit(["pass"])


def test_both_gates_reports_share_one_base_and_write_the_settings_the_reader_requires():
    assert issubclass(GateReport, GateResult) and issubclass(SequentialReport, GateResult)
    assert FixedSettings.keys() == tuple(earlier("fixed-v2.json")["settings"]) == _SETTINGS["fixed"]
    # final (issue 47) is written only when false: the earlier reports, always final, have none
    assert SequentialSettings.keys() == (*earlier("sequential-v2.json")["settings"], "final") == _SETTINGS["sequential"]


def test_a_report_built_from_mappings_reads_them_into_the_parts():
    doc = earlier("sequential-v2.json")
    ev = Evidence(
        doc["created_at"],
        "sequential",
        doc["settings"],
        doc["baseline"],
        tuple(doc["candidates"]),
        doc["verdict"],
        doc["exit_code"],
        doc["plan"],
        doc["qualgate_version"],
        doc["signature"],
    )
    assert isinstance(ev.candidates[0], SequentialCandidate) and ev.verdict is Verdict.PASS
    assert ev.to_dict() == doc
