"""Version-2 gate reports written by an earlier qualgate (tests/evidence/data/README.md) still
verify with `qualgate check`, and the writer still writes them byte for byte.

They verify (records, signature) but no longer allow a config: they do not record the sampling
of either side, so nothing binds their baseline to the config checked (issue 46), and check
refuses them with that one reason (exit 3, a configuration error)."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.evidence.gate_report import Evidence
from qualgate.formatting import to_json
from qualgate.verdict.fixed import run_gate
from qualgate.verdict.sequential import run_sequential_gate

DATA = Path(__file__).parent / "data"
KEY = "qualgate-fixture-key"  #: the key sequential-v2.json was signed with
#: the files as the earlier qualgate wrote them (README.md: never regenerated)
WRITTEN = {
    "fixed-v2.json": "c61159e984e297f10aabd0ea98fdf67a6614f63b5e2d668308fc5d12ee96270d",
    "sequential-v2.json": "394a8c0f768daf30edf25591e0ecac28a7b558c4e33082902f00e8720d5cb16c",
}
LIMITS = ["--max-margin", "0.05", "--max-age", "100000d", "--format", "json"]


def check(*args, key=None):
    env = {"QUALGATE_EVIDENCE_KEY": key}  # None: unset
    r = CliRunner().invoke(
        cli, ["check", "--vllm-version", "0.33.0", str(DATA / "fly-w2.yaml"), *map(str, args), *LIMITS], env=env
    )
    return r.exit_code, json.loads(r.stdout)


#: the one reason an earlier report is refused: it records no sampling, so the binding of its
#: baseline to the config checked cannot be shown
UNBOUND = "the baseline's binding to this config cannot be checked: sampling: not recorded"


def only_unbound(code, out):
    return code == 3 and len(out["reasons"]) == 1 and out["reasons"][0].startswith(UNBOUND)


def test_the_kept_reports_are_the_bytes_the_earlier_writer_wrote():
    assert {name: hashlib.sha256((DATA / name).read_bytes()).hexdigest() for name in WRITTEN} == WRITTEN


@pytest.mark.parametrize("records", [True, False], ids=["records-dir", "paths-in-report"])
def test_a_fixed_report_of_the_earlier_writer_verifies_from_its_records(records):
    code, out = check("--evidence", DATA / "fixed-v2.json", *(["--records", DATA] if records else []))
    assert only_unbound(code, out) and out["evidence"]["verified"] == ["records"], out["reasons"]
    assert out["evidence"]["candidate"]["name"] == "fixed-fly-w2"
    assert out["evidence"]["candidate"]["missing"]["imputed_as_lost"] == 1


def test_a_signed_sequential_report_of_the_earlier_writer_verifies_by_records_and_signature():
    code, out = check("--evidence", DATA / "sequential-v2.json", key=KEY)
    assert only_unbound(code, out) and out["evidence"]["verified"] == ["records", "signature"], out["reasons"]
    assert out["evidence"]["design"] == "sequential"


def test_the_earlier_signature_is_refused_under_another_key():
    code, out = check("--evidence", DATA / "sequential-v2.json", key="another-key")
    assert code == 3 and out["evidence"]["verified"] == ["records"]
    assert any("signature does not match" in r for r in out["reasons"])


def test_an_earlier_report_without_its_records_verifies_only_with_trust_unsigned(tmp_path):
    alone = shutil.copy(DATA / "fixed-v2.json", tmp_path / "fixed-v2.json")
    code, out = check("--evidence", alone)
    assert code == 3 and any("cannot be verified" in r for r in out["reasons"])
    code, out = check("--evidence", alone, "--trust-unsigned")
    assert only_unbound(code, out) and out["evidence"]["verified"] == ["trusted-unsigned"], out["reasons"]


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_the_reader_gives_back_an_earlier_report_unchanged(name):
    text = (DATA / name).read_text()
    evidence = Evidence.read(DATA / name)
    assert to_json(evidence.to_dict()) + "\n" == text
    if evidence.signature is not None:
        assert evidence.signature_problem(KEY) == ""


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_the_writer_writes_the_earlier_report_again_from_the_same_records(name, monkeypatch):
    """Gated again with the same settings, only the time and the version differ (key order included),
    and the notes, sentences for people that may be worded better since."""
    monkeypatch.chdir(DATA)
    earlier = json.loads((DATA / name).read_text())
    if earlier["design"] == "fixed":
        again = run_gate(
            "fixed-target.jsonl",
            ["fixed-fly-w2.jsonl", "fixed-fly-aggressive.jsonl"],
            margin=0.05,
            max_errors=1,
            baseline_config=earlier["baseline"]["config"],
        )
    else:
        again = run_sequential_gate(
            "sequential-target.jsonl",
            ["sequential-fly-w2.jsonl"],
            margin=0.05,
            baseline_config=earlier["baseline"]["config"],
        )
    evidence = again.evidence().signed(KEY) if earlier["signature"] else again.evidence()
    doc = evidence.to_dict() | {k: earlier[k] for k in ("created_at", "qualgate_version")}
    doc.pop("warnings", None)  # (kept since issue 46; the earlier writer had none to sign)
    if earlier["signature"]:
        doc = Evidence.from_dict(doc).signed(KEY).to_dict()
    for c in doc["candidates"]:
        assert isinstance(c.get("notes", []), list)
    assert to_json(_without_notes(doc)) == to_json(_without_notes(earlier))


def _without_notes(doc):
    """Without the sentences for people: each candidate's notes, and the report's warnings (kept
    since issue 46: here, that the binding cannot be checked, the earlier reports recording no
    sampling)."""
    doc = {k: v for k, v in doc.items() if k != "warnings"}
    return doc | {"candidates": [{k: v for k, v in c.items() if k != "notes"} for c in doc["candidates"]]}
