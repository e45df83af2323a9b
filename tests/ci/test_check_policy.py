"""`qualgate check --policy-file`: the evidence must meet the policy's blocking suites."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_config
from qualgate.records import Record, RecordWriter

DATA = Path(__file__).parent / "data"
SUITES = {"gsm8k": 0, "math500": 12}  # candidate losses (of 300 questions, baseline 90% correct)


def _write(path, config_id, mode, lose):
    records = []
    for suite, n_lost in SUITES.items():
        lost = 0
        for i in range(300):
            ok = i % 10 != 0
            if ok and lose and lost < n_lost:
                ok, lost = False, lost + 1
            records.append(
                Record(1, "ci", config_id, suite, "1", f"q{i}", 0, 0, "correct" if ok else "incorrect", "h", mode=mode)
            )
    with RecordWriter(path) as w:
        w.write_batch(records)
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("check_policy")
    base = _write(d / "target.jsonl", load_config(DATA / "target.decoding.yaml").config_id, "target", False)
    cand = _write(d / "fly.jsonl", load_config(DATA / "fly-w2.decoding.yaml").config_id, "fly", True)
    (d / "strict.yaml").write_text("suites:\n  gsm8k: {margin: 0.05}\n  math500: {margin: 0.05}\n")
    (d / "lenient.yaml").write_text("suites:\n  gsm8k: {margin: 0.05}\n  math500: {margin: 0.05, tier: advisory}\n")
    for name, code in (("strict", 1), ("lenient", 0)):
        r = CliRunner().invoke(
            cli,
            [
                "gate",
                str(base),
                str(cand),
                "--policy-file",
                str(d / f"{name}.yaml"),
                "--baseline-config",
                str(DATA / "target.decoding.yaml"),
                "--candidate-config",
                str(DATA / "fly-w2.decoding.yaml"),
                "--output",
                str(d / f"{name}.json"),
            ],
        )
        assert r.exit_code == code, r.output
    r = CliRunner().invoke(
        cli,
        [
            "gate",
            str(base),
            str(cand),
            "--margin",
            "0.05",
            "--output",
            str(d / "plain.json"),
            "--baseline-config",
            str(DATA / "target.decoding.yaml"),
            "--candidate-config",
            str(DATA / "fly-w2.decoding.yaml"),
        ],
    )
    return d


def _check(d, evidence, policy):
    # the policy's margins are 5 points: --max-margin (default 2 points) is raised to match
    return CliRunner().invoke(
        cli,
        [
            "check",
            "--vllm-version",
            "0.33.0",
            str(DATA / "fly-w2.yaml"),
            "--evidence",
            str(d / evidence),
            "--policy-file",
            str(d / policy),
            "--max-margin",
            "0.05",
        ],
    )


@pytest.mark.slow
def test_evidence_gated_under_the_policy_with_blocking_suites_passing_is_allowed(setup):
    r = _check(setup, "lenient.json", "lenient.yaml")
    assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_a_suite_the_check_policy_makes_blocking_must_have_passed_as_blocking(setup):
    r = _check(setup, "lenient.json", "strict.yaml")
    assert r.exit_code == 1
    assert "suite math500 was gated at tier 'advisory'; the policy makes it blocking" in r.output


@pytest.mark.slow
def test_evidence_without_a_policy_file_is_refused(setup):
    r = _check(setup, "plain.json", "lenient.yaml")
    assert r.exit_code == 1 and "gated without a policy file" in r.output
