"""Policy files: per-suite margins, absolute or relative drops, tiers; validated with clear errors."""

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.stats import holm
from qualgate.verdict.fixed import run_gate
from qualgate.verdict.policy import read_policy


def _suite_records(records_of, table, *, config, side, suites):
    """Records of several suites: ``suites`` maps name -> (both_correct, lost, gained, both_wrong)."""
    out = []
    for name, counts in suites.items():
        b, c = table(*counts)
        out += records_of(b if side == "b" else c, config=config, suite=name)
    return out


@pytest.fixture
def two_suites(write, records_of, table):
    """gsm8k: no loss (PASS at 2 points); math500: a 4-point loss on 1000 questions (FAIL at 2 points)."""
    suites = {"gsm8k": (800, 5, 5, 190), "math500": (500, 45, 5, 450)}
    base = write("base.jsonl", _suite_records(records_of, table, config="cfg-b", side="b", suites=suites))
    cand = write("cand.jsonl", _suite_records(records_of, table, config="cfg-c", side="c", suites=suites))
    return base, cand


def _policy(tmp_path, text, name="policy.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.slow
def test_a_blocking_suite_that_fails_fails_the_gate(tmp_path, two_suites):
    policy = _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n  math500: {margin: 0.02}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy)])
    assert r.exit_code == 1, r.output
    assert "blocking suite math500 (2.00-point margin) decides" in r.output
    header = next(line for line in r.output.splitlines() if line.startswith("candidate"))
    assert header.split()[:4] == ["candidate", "suite", "tier", "margin"]
    rows = [line.split() for line in r.output.splitlines() if line.startswith("cand ")]
    assert [(row[1], row[2], row[-1]) for row in rows] == [
        ("gsm8k", "blocking", "PASS"),
        ("math500", "blocking", "FAIL"),
        ("pooled", "(info)", "fail"),
    ]


@pytest.mark.slow
def test_the_same_loss_on_a_warning_suite_is_a_warning_not_a_failure(tmp_path, two_suites):
    policy = _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n  math500: {margin: 0.02, tier: warning}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy), "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    (c,) = report["candidates"]
    assert c["verdict"] == "PASS"
    assert [(s["scope"], s["tier"], s["verdict_decisive"]) for s in c["suites"]] == [
        ("gsm8k", "blocking", "PASS"),
        ("math500", "warning", "FAIL"),
    ]
    assert any(n.startswith("warning: suite math500 is FAIL (tier warning") for n in c["notes"])
    assert report["settings"]["suite_policy"]["suites"]["math500"] == {
        "margin": 0.02,
        "drop": "absolute",
        "tier": "warning",
    }


@pytest.mark.slow
def test_a_relative_drop_is_a_fraction_of_the_baseline_accuracy(tmp_path, two_suites):
    # math500 baseline accuracy (500 + 45) / 1000 = 54.5%: a 10% relative drop is 5.45 points
    policy = read_policy(
        _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n  math500: {margin: 0.1, drop: relative}\n")
    )
    report = run_gate(*two_suites, suite_policy=policy)
    gsm8k, math500 = report.comparisons[0].suites
    assert math500.margin == pytest.approx(0.1 * 0.545, abs=1e-12) and gsm8k.margin == 0.02
    # the same decision as an absolute gate at that margin on math500 alone (Holm over 2 decisions aside)
    alone = run_gate(*two_suites, margin=0.1 * 0.545)
    assert alone.comparisons[0].suites[1].pvalue_noninferiority == pytest.approx(math500.pvalue_noninferiority)
    # Holm's adjustment runs over both blocking decisions
    c = report.comparisons[0]
    adjusted = holm([gsm8k.pvalue_noninferiority, math500.pvalue_noninferiority])
    assert c.pvalue_holm in adjusted
    # the report's margin is the loosest blocking margin used (what `qualgate check --max-margin` reads)
    assert report.margin == pytest.approx(0.0545)


@pytest.mark.slow
def test_a_blocking_suite_without_records_fails_closed(tmp_path, two_suites):
    policy = _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n  math500: {margin: 0.02}\n  aime25: {margin: 0.1}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy)])
    assert r.exit_code == 3 and "blocking suites of the policy have no records: aime25" in r.output


@pytest.mark.slow
def test_a_suite_the_policy_does_not_cover_is_refused_unless_a_default_covers_it(tmp_path, two_suites):
    policy = _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy)])
    assert r.exit_code == 3 and "suite 'math500' is in the records but not in the policy file" in r.output
    policy = _policy(tmp_path, "default: {margin: 0.05, tier: advisory}\nsuites:\n  gsm8k: {margin: 0.02}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy)])
    assert r.exit_code == 0 and " advisory " in r.output


def test_margin_and_policy_file_are_exclusive(tmp_path, two_suites):
    policy = _policy(tmp_path, "suites:\n  gsm8k: {margin: 0.02}\n")
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites), "--policy-file", str(policy), "--margin", "0.02"])
    assert r.exit_code == 2 and "--margin or --policy-file" in r.output
    r = CliRunner().invoke(cli, ["gate", *map(str, two_suites)])
    assert r.exit_code == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("suites:\n  gsm8k: {margin: 2}\n", r"field 'suites.gsm8k.margin' = 2: margin must be a number in \(0, 1\)"),
        (
            "suites:\n  gsm8k: {margin: 0.02, tier: strict}\n",
            r"field 'suites.gsm8k.tier' = 'strict': must be one of blocking, warning, advisory",
        ),
        (
            "suites:\n  gsm8k: {margin: 0.02, drop: percent}\n",
            r"field 'suites.gsm8k.drop' = 'percent': must be one of absolute, relative",
        ),
        ("suites:\n  gsm8k: {margin: 0.02, margn: 0.1}\n", r"field 'suites.gsm8k.margn' = 0.1: unknown key"),
        ("suites:\n  gsm8k: {tier: warning}\n", r"field 'suites.gsm8k.margin': margin must be a number"),
        ("suite:\n  gsm8k: {margin: 0.02}\n", r"field 'suite': unknown key \(valid: version, default, suites\)"),
        ("suites: {}\n", r"field 'suites' = \{\}: must be a non-empty mapping"),
        ("version: 2\nsuites:\n  gsm8k: {margin: 0.02}\n", r"field 'version' = 2: unsupported policy version"),
        ("suites:\n  gsm8k: {margin: 0.02\n", r"policy.yaml:3: not valid YAML"),
    ],
)
def test_invalid_policy_files_are_refused_naming_the_key_and_value(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        read_policy(_policy(tmp_path, text))
