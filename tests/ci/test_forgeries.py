"""Evidence forgeries (tests/ci/forgeries.py) against `qualgate check`: none is accepted.

Issue 16 listed 27 forgery scenarios of which 18 passed CI; every one of them is here, with
more, in each verification mode CI can be set up in. Honest evidence is accepted in the
same modes (the controls), so a check that refused everything would fail these tests.
"""

import json

import pytest

from .forgeries import KEY, KEY_ENV, MODES, SCENARIOS, W2, Ctx, hide_records, honest, in_process_invoke, run_mode

pytestmark = pytest.mark.slow
invoke = in_process_invoke()  # a traceback raises


@pytest.mark.parametrize("mode", MODES)
def test_no_forgery_is_accepted(tmp_path, mode):
    results = run_mode(tmp_path, invoke, mode)
    assert len(results) >= 25
    accepted = [s.name for s, code, _ in results if code == 0]
    assert accepted == []
    # refused (1) or unreadable as evidence (3); never a crash (click would give another code)
    assert {code for _, code, _ in results} <= {1, 3}


def test_the_issues_scenarios_are_all_here():
    names = {s.name for s in SCENARIOS}
    assert {
        "verdict-fail-to-pass",
        "config-id-replaced",
        "seven-key-json",
        "re-dated",
        "margin-edited",
        "margin-nan",
        "margin-negative",
        "lower-case-verdict",
        "pass-copy-first",
        "records-rewritten",
        "relabelled-baseline",
        "any-age-by-default",
        "any-margin-by-default",
        "losses-as-errors",
        "losses-dropped",
        "duplicate-verdict-key",
    } <= names
    assert len(SCENARIOS) >= 27


@pytest.mark.parametrize(
    "mode, args, allowed, how",
    [
        ("records", [], True, "verified by: records"),
        ("signed", [], True, "verified by: signature"),
        ("unsigned", [], False, "cannot be verified"),
        ("unsigned", ["--trust-unsigned"], True, "verified by: trusted-unsigned"),
    ],
)
def test_honest_evidence_is_accepted_where_it_can_be_verified(tmp_path, mode, args, allowed, how):
    ctx = Ctx(tmp_path, invoke, True, KEY if mode == "signed" else None)
    honest(ctx)
    if mode != "records":
        hide_records(tmp_path)
    env = {KEY_ENV: KEY} if mode == "signed" else {}
    code, out = invoke(["check", "--vllm-version", "0.33.0", W2, "--evidence", tmp_path / "pass.json", *args], env)
    assert (code == 0) == allowed and how in out, out


def test_with_trust_unsigned_only_edits_that_keep_the_report_consistent_pass(tmp_path):
    # --trust-unsigned accepts the file as it is: a forger who edits every number consistently
    # wins, by design; every rule of the reader and of check still holds
    results = {s.name: code for s, code, _ in run_mode(tmp_path, invoke, "trust-unsigned")}
    accepted = sorted(n for n, code in results.items() if code == 0)
    # since issue 46 a report records what each side serves: a config id replaced or swapped without
    # its description, or a baseline description without the sampling, is refused (exit 3)
    assert accepted == [
        "full-shape-by-hand",
        "margin-edited",
        "missingness-relabelled",
        "re-dated",
        "verdict-and-statistics",
    ]  # sequential-verdict is refused since issue 34: its report took the questions in record order


def test_a_signed_report_is_refused_without_its_signature(tmp_path):
    ctx = Ctx(tmp_path, invoke, True, KEY)
    honest(ctx)
    hide_records(tmp_path)
    doc = json.loads((tmp_path / "pass.json").read_text())
    doc["signature"] = None
    (tmp_path / "stripped.json").write_text(json.dumps(doc))
    code, out = invoke(
        ["check", "--vllm-version", "0.33.0", W2, "--evidence", tmp_path / "stripped.json"], {KEY_ENV: KEY}
    )
    assert code == 1 and "the report is not signed" in out
