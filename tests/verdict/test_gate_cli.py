"""``qualgate gate`` and ``qualgate calibrate`` through click's CliRunner: every exit code."""

import dataclasses
import hashlib
import json

import pytest
from click.testing import CliRunner
from scipy.stats import binomtest

from qualgate.cli import cli
from qualgate.verdict.fixed import run_gate


def run(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env or {"GITHUB_STEP_SUMMARY": ""})


@pytest.fixture
def fly_lossy(write, table):
    """Baseline and a candidate with 25 lost and 2 gained of 428 questions."""
    b, c = table(275, 25, 2, 126)
    return write("target.jsonl", b, mode="target"), write("fly.jsonl", c, config="cfg-fly", mode="fly")


@pytest.mark.slow
def test_identical_files_pass_when_n_is_large_enough_for_the_margin(write):
    # no discordance: the exact test's p-value is (1 - m)^n (the chance of no discordant pair
    # when the loss is m), so its bound is 1 - 0.05^(1/428) = 0.70 points
    outcomes = ["correct"] * 300 + ["incorrect"] * 128
    base = write("b.jsonl", outcomes)
    r = run("gate", base, write("c.jsonl", outcomes, config="cfg-c"), "--margin", 0.02)
    assert r.exit_code == 0, r.output
    assert "PASS: the loss is at most 0.70 points (95% upper bound), below the 2.00-point margin" in r.output
    assert "[exact unconditional score test (Hsueh et al. 2001)]" in r.output


def test_identical_files_are_inconclusive_when_n_is_too_small(write):
    outcomes = ["correct"] * 70 + ["incorrect"] * 30
    base, cand = write("b.jsonl", outcomes), write("c.jsonl", outcomes, config="cfg-c")
    r = run("gate", base, cand, "--margin", 0.02)
    assert r.exit_code == 4, r.output
    assert "INCONCLUSIVE" in r.output and "about 33 more questions would be needed" in r.output


@pytest.mark.parametrize("mapping, code", [("fail", 1), ("pass", 0), ("inconclusive", 4)])
def test_inconclusive_exit_code_can_be_mapped(write, mapping, code):
    outcomes = ["correct"] * 70 + ["incorrect"] * 30
    base, cand = write("b.jsonl", outcomes), write("c.jsonl", outcomes, config="cfg-c")
    r = run("gate", base, cand, "--margin", 0.02, "--inconclusive", mapping, "--format", "json")
    assert r.exit_code == code
    report = json.loads(r.stdout)
    assert report["verdict"] == "INCONCLUSIVE" and report["exit_code"] == code


@pytest.mark.slow
def test_25_lost_2_gained_of_428_fails(fly_lossy):
    r = run("gate", *fly_lossy, "--margin", 0.02)
    assert r.exit_code == 1, r.output
    assert "fly: FAIL: the candidate loses 5.37 points, significantly (p = 2.82e-06)" in r.output
    assert "verdict: FAIL (exit 1)" in r.output


@pytest.mark.slow
def test_mcnemar_policy_fails_the_lossy_candidate(fly_lossy):
    r = run("gate", *fly_lossy, "--margin", 0.02, "--policy", "mcnemar")
    assert r.exit_code == 1
    assert "exact test finds the loss significant (p = 2.82e-06 <= 0.05)" in r.output


def test_mcnemar_policy_warns_when_the_sample_is_too_small(write, table):
    b, c = table(40, 2, 1, 7)
    r = run("gate", write("b.jsonl", b), write("c.jsonl", c, config="cfg-c"), "--margin", 0.02, "--policy", "mcnemar")
    assert r.exit_code == 0
    assert "PASS: no significant loss" in r.output and "note: the sample is too small: power" in r.output


def test_duplicated_keys_are_a_data_error(write, records_of):
    recs = records_of(["correct"] * 10)
    r = run("gate", write("b.jsonl", recs + recs[:2]), write("c.jsonl", ["correct"] * 10, config="c"), "--margin", 0.02)
    assert r.exit_code == 3
    assert "baseline: 2 duplicated keys" in r.output and "b.jsonl:1 and" in r.output


@pytest.mark.slow
def test_a_missing_question_is_a_data_error_unless_dropped(write):
    base, cand = write("b.jsonl", ["correct"] * 200), write("c.jsonl", ["correct"] * 199, config="c")
    r = run("gate", base, cand, "--margin", 0.02)
    assert r.exit_code == 3 and "1 keys only in the baseline (e.g. gsm8k/q199 seed 0 sample 0)" in r.output
    # the missing candidate answer, on a question the baseline got right, counts as lost...
    r = run("gate", base, cand, "--margin", 0.02, "--on-missing", "drop")
    assert r.exit_code == 4 and "note: incomplete: 1 keys only in the baseline" in r.output
    assert (
        "1 pairs whose candidate side is missing or an error on a question the baseline answered correctly count as lost"
        in r.output
    )
    # ...unless --missing drop says otherwise, and the report says the verdict depends on it
    r = run("gate", base, cand, "--margin", 0.02, "--on-missing", "drop", "--missing", "drop")
    assert r.exit_code == 0 and "the verdict depends on incomplete pairs: INCONCLUSIVE with the 1" in r.output


def test_a_truncated_last_line_is_a_data_error_unless_dropped(write):
    base, cand = write("b.jsonl", ["correct"] * 200), write("c.jsonl", ["correct"] * 201, config="c")
    data = cand.read_bytes()
    cand.write_bytes(data[: len(data) - 40])  # the writer died inside the last record
    r = run("gate", base, cand, "--margin", 0.02)
    assert r.exit_code == 3 and "c.jsonl:201: field" not in r.output and "incomplete last line" in r.output
    r = run("gate", base, cand, "--margin", 0.02, "--drop-truncated")
    assert r.exit_code == 0 and "note: dropped" in r.output and "c.jsonl:201: incomplete last line" in r.output


@pytest.mark.slow
def test_an_error_outcome_is_a_data_error_unless_allowed(write):
    base = write("b.jsonl", ["correct"] * 200)
    cand = write("c.jsonl", ["correct"] * 199 + ["error"], config="c")
    r = run("gate", base, cand, "--margin", 0.02)
    assert r.exit_code == 3 and "1 pairs have an 'error' outcome (an engine failure, not a wrong answer)" in r.output
    r = run("gate", base, cand, "--margin", 0.02, "--max-errors", 1)
    assert r.exit_code == 4 and "note: incomplete: 1 pairs have an 'error' outcome" in r.output
    r = run("gate", base, cand, "--margin", 0.02, "--max-errors", 1, "--missing", "drop")
    assert r.exit_code == 0, r.output


def test_mismatched_prompt_hashes_are_a_data_error(write):
    base = write("b.jsonl", ["correct"] * 50)
    cand = write("c.jsonl", ["correct"] * 50, config="c", prompt="other-template-")
    r = run("gate", base, cand, "--margin", 0.02)
    assert r.exit_code == 3 and "50 pairs differ in prompt_hash" in r.output


def test_invalid_record_is_a_data_error_naming_the_line(write, tmp_path):
    base = write("b.jsonl", ["correct"] * 5)
    bad = tmp_path / "c.jsonl"
    lines = base.read_text().splitlines()
    lines[3] = lines[3].replace('"correct"', '"right"')
    bad.write_text("\n".join(lines) + "\n")
    r = run("gate", base, bad, "--margin", 0.02)
    assert r.exit_code == 3 and f"{bad}:4: field 'outcome' = 'right'" in r.output


@pytest.mark.parametrize(
    "args",
    [
        [],  # no --margin
        ["--margin", "2"],
        ["--margin", "0.02", "--policy", "bayes"],
        ["--margin", "0.02", "--alpha", "0.7"],
        ["--margin", "0.02", "--max-errors", "-1"],
    ],
)
def test_usage_errors_exit_2(fly_lossy, args):
    assert run("gate", *fly_lossy, *args).exit_code == 2


def test_a_missing_file_is_a_usage_error(fly_lossy, tmp_path):
    assert run("gate", fly_lossy[0], tmp_path / "absent.jsonl", "--margin", 0.02).exit_code == 2


@pytest.mark.slow
def test_json_report_is_the_evidence_for_check(fly_lossy, tmp_path):
    out = tmp_path / "evidence" / "REPORT.json"
    r = run("gate", *fly_lossy, "--margin", 0.02, "--format", "json", "--output", out)
    report = json.loads(r.stdout)
    assert json.loads(out.read_text()) == report
    s = report["settings"]
    assert (report["kind"], report["version"], report["design"], s["policy"], s["margin"], s["alpha"]) == (
        "qualgate.gate_report",
        2,
        "fixed",
        "noninferiority",
        0.02,
        0.05,
    )
    assert (s["missing"], s["on_missing"], s["max_errors"]) == ("worst-case", "error", 0)
    assert report["qualgate_version"] and report["signature"] is None  # no QUALGATE_EVIDENCE_KEY here
    assert [f["path"] for f in report["baseline"]["files"]] == [str(fly_lossy[0])]
    assert report["baseline"]["files"][0]["sha256"] == hashlib.sha256(fly_lossy[0].read_bytes()).hexdigest()
    assert report["created_at"].endswith("Z")
    assert (report["baseline"]["config_id"], report["baseline"]["mode"]) == ("cfg-base", "target")
    (cand,) = report["candidates"]
    assert (cand["name"], cand["config_id"], cand["mode"], cand["verdict"]) == ("fly", "cfg-fly", "fly", "FAIL")
    pooled = cand["pooled"]
    assert (pooled["questions"], pooled["lost"], pooled["gained"], pooled["net"]) == (428, 25, 2, -23)
    assert pooled["accuracy_baseline"] == pytest.approx(300 / 428)
    assert pooled["loss_upper_bound"] > 0.02 and pooled["ci_difference"][1] < 0
    assert report["verdict"] == "FAIL" and report["exit_code"] == 1


@pytest.mark.slow
def test_markdown_file_and_github_step_summary(fly_lossy, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    md = tmp_path / "gate.md"
    r = run("gate", *fly_lossy, "--margin", 0.02, "--markdown", md, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.exit_code == 1
    assert md.read_text().startswith("### qualgate gate: FAIL")
    assert summary.read_text() == "earlier step\n" + md.read_text() + "\n"


def test_several_seeds_make_the_question_the_unit(write, records_of):
    # 200 questions x 3 seeds; 12 questions lost on all three seeds, 6 gained on all three
    b = ["correct"] * (12 * 3) + ["incorrect"] * (6 * 3) + ["correct"] * (182 * 3)
    c = ["incorrect"] * (12 * 3) + ["correct"] * (6 * 3) + ["correct"] * (182 * 3)
    base, cand = write("b.jsonl", b, seeds=3), write("c.jsonl", c, seeds=3, config="c")
    report = json.loads(run("gate", base, cand, "--margin", 0.05, "--format", "json").stdout)
    pooled = report["candidates"][0]["pooled"]
    assert pooled["clustered"] and pooled["questions"] == 200 and pooled["pairs"] == 600
    assert pooled["design_effect"] == pytest.approx(3, rel=0.05)
    assert pooled["methods"]["loss_test"] == "sign-flip-exact"
    # the sign-flip test counts 12 vs 6 questions, not 36 vs 18 pairs: exact McNemar on 12 vs 6
    assert pooled["pvalue_two_sided"] == pytest.approx(0.2378, abs=1e-4)  # 2*P(Bin(18,1/2) <= 6)


@pytest.mark.slow
def test_suites_are_reported_and_pooled(write, records_of, table):
    b1, c1 = table(150, 8, 2, 40)
    b2, c2 = table(60, 1, 3, 36)
    base = write("b.jsonl", records_of(b1) + records_of(b2, suite="math500"))
    cand = write("c.jsonl", records_of(c1, config="c") + records_of(c2, suite="math500", config="c"))
    report = json.loads(run("gate", base, cand, "--margin", 0.03, "--format", "json").stdout)
    (c,) = report["candidates"]
    assert [s["scope"] for s in c["suites"]] == ["gsm8k", "math500"]
    assert (c["pooled"]["scope"], c["pooled"]["lost"], c["pooled"]["gained"], c["pooled"]["pairs"]) == (
        "pooled",
        9,
        5,
        300,
    )
    equal = json.loads(run("gate", base, cand, "--margin", 0.03, "--format", "json", "--weighting", "equal").stdout)
    pooled = equal["candidates"][0]["pooled"]
    assert pooled["difference"] == pytest.approx(((2 - 8) / 200 + (3 - 1) / 100) / 2)
    assert pooled["methods"]["noninferiority"] == "score-stratified"


def test_holm_adjustment_across_candidates_can_withhold_a_pass(write):
    # with no discordance in 161 questions each candidate alone has exact p = 0.98^161 = 0.0387 < 0.05 ...
    outcomes = ["correct"] * 120 + ["incorrect"] * 41
    base = write("b.jsonl", outcomes)
    c1, c2 = write("c1.jsonl", outcomes, config="c1"), write("c2.jsonl", outcomes, config="c2")
    alone = json.loads(run("gate", base, c1, "--margin", 0.02, "--format", "json").stdout)
    assert alone["verdict"] == "PASS" and alone["candidates"][0]["pooled"]["pvalue_noninferiority"] == pytest.approx(
        0.98**161, rel=1e-6
    )
    # ... but Holm over two candidates needs 2 x 0.0387 < 0.05
    both = run("gate", base, c1, c2, "--margin", 0.02)
    assert both.exit_code == 4 and "after Holm's adjustment across 2 candidates" in both.output


@pytest.mark.slow
def test_directories_are_record_sets(write, tmp_path):
    (tmp_path / "runs" / "base").mkdir(parents=True)
    (tmp_path / "runs" / "cand").mkdir()
    for part in range(2):
        outcomes = ["correct"] * 250
        write(f"runs/base/part{part}.jsonl", outcomes, suite=f"s{part}")
        write(f"runs/cand/part{part}.jsonl", outcomes, suite=f"s{part}", config="c")
    r = run("gate", tmp_path / "runs" / "base", tmp_path / "runs" / "cand", "--margin", 0.02, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["candidates"][0]["pooled"]["pairs"] == 500


@pytest.mark.slow
def test_the_library_call_is_what_the_command_prints(fly_lossy):
    report = run_gate(fly_lossy[0], [fly_lossy[1]], margin=0.02)
    printed = json.loads(run("gate", *fly_lossy, "--margin", 0.02, "--format", "json").stdout)
    ours = json.loads(json.dumps(report.to_dict()))
    assert {k: v for k, v in ours.items() if k != "created_at"} == {
        k: v for k, v in printed.items() if k != "created_at"
    }


# ---------------------------------------------------------------------------- calibrate


def test_calibrate_reports_discordance_and_sample_sizes(write, table):
    b, c = table(700, 30, 28, 242)  # an A/A pair: 5.8% discordant, net -2
    r = run("calibrate", write("a.jsonl", b), write("b.jsonl", c, config="c"), "--format", "json")
    assert r.exit_code == 0, r.output
    cal = json.loads(r.stdout)
    assert cal["kind"] == "qualgate.calibration_report" and cal["consistent"]
    assert cal["discordant"] == pytest.approx(58 / 1000)
    # Clopper-Pearson 95% for 58/1000, from scipy's own implementation (binomtest)
    ref = binomtest(58, 1000).proportion_ci(confidence_level=0.95, method="exact")
    assert cal["discordant_ci"] == pytest.approx([ref.low, ref.high], abs=1e-9)
    assert cal["pvalue"] == pytest.approx(0.8957, abs=1e-4)  # exact McNemar 30 vs 28, two-sided
    sizes = {(s["loss"], s["at"]): s for s in cal["sample_sizes"]}
    assert set(sizes) == {(x, at) for x in (0.01, 0.02, 0.03) for at in ("observed", "upper")}
    assert sizes[(0.02, "observed")]["noninferiority"] < sizes[(0.02, "upper")]["noninferiority"]
    assert sizes[(0.01, "observed")]["mcnemar"] > sizes[(0.02, "observed")]["mcnemar"]


def test_calibrate_flags_runs_that_differ(write, table):
    b, c = table(700, 45, 10, 245)
    r = run("calibrate", write("a.jsonl", b), write("b.jsonl", c, config="c"))
    assert r.exit_code == 1
    assert "NOT consistent" in r.output and "harness or engine bug" in r.output


def test_calibrate_text_table(write, table):
    b, c = table(700, 30, 28, 242)
    r = run("calibrate", write("a.jsonl", b), write("b.jsonl", c, config="c"), "--loss", "0.02")
    assert r.exit_code == 0
    assert "discordant 5.80% (95% CI 4.43% to 7.43%)" in r.output
    assert "questions (non-inferiority)" in r.output and "0.01" not in r.output.split("questions (McNemar)")[1]


def test_calibrate_with_a_loss_too_small_to_detect_reports_no_size(write, table):
    # issue 34 item 11: --loss 1e-300 raised OverflowError (its square underflows to 0)
    b, c = table(700, 30, 28, 242)
    r = run("calibrate", write("a.jsonl", b), write("b.jsonl", c, config="c"), "--loss", "0.02,1e-300")
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and "—" in r.output


def test_calibrate_with_seeds_uses_the_question_as_unit(write):
    base = ["correct"] * 600
    cand = ["incorrect"] * 6 + ["correct"] * 594  # 2 questions lost on all 3 seeds
    r = run(
        "calibrate", write("a.jsonl", base, seeds=3), write("b.jsonl", cand, seeds=3, config="c"), "--format", "json"
    )
    cal = json.loads(r.stdout)
    assert cal["clustered"] and cal["questions"] == 200 and cal["test_method"] == "sign-flip-exact"
    assert cal["pvalue"] == pytest.approx(0.5)  # two questions, both one way: 2 * 1/4


def test_calibrate_usage_error_for_a_bad_loss_list(write):
    a = write("a.jsonl", ["correct"] * 10)
    assert run("calibrate", a, a, "--loss", "2,3").exit_code == 2


def test_records_mode_labels_are_reported(write, records_of):
    recs = [dataclasses.replace(r, mode=None) for r in records_of(["correct"] * 200)]
    base = write("b.jsonl", recs)
    report = json.loads(
        run(
            "gate",
            base,
            write("c.jsonl", ["correct"] * 200, config="c", mode="fly"),
            "--margin",
            0.05,
            "--format",
            "json",
        ).stdout
    )
    assert report["baseline"]["mode"] is None and report["candidates"][0]["mode"] == "fly"


@pytest.mark.parametrize("how", ["error", "missing"])
@pytest.mark.slow
def test_losses_hidden_as_errors_or_gaps_do_not_pass(write, table, records_of, how):
    # issue 16: a lossy candidate's lost answers recorded as `error` (--max-errors 30) or left
    # out (--on-missing drop) turned FAIL into PASS; 26 of its 60 lost pairs are hidden here
    b, c = table(700, 60, 10, 230)
    base = write("target.jsonl", b, mode="target")
    records = records_of(c, config="cfg-fly", mode="fly")
    hidden = range(700, 726)  # lost pairs: baseline correct, candidate wrong
    if how == "error":
        records = [
            dataclasses.replace(r, outcome="error", error="timeout") if i in hidden else r
            for i, r in enumerate(records)
        ]
    else:
        records = [r for i, r in enumerate(records) if i not in hidden]
    cand = write("fly.jsonl", records)
    allow = ["--max-errors", 30] if how == "error" else ["--on-missing", "drop"]
    r = run("gate", base, cand, "--margin", 0.05, *allow, "--format", "json")
    (c,) = json.loads(r.stdout)["candidates"]
    assert r.exit_code == 1 and c["verdict"] == "FAIL"
    m = c["missing"]
    assert (m["verdict_worst_case"], m["verdict_dropped"], m["imputed_as_lost"]) == ("FAIL", "PASS", 26)
    assert m["incomplete"]["by_side"]["candidate_" + how] == 26 and m["incomplete"]["pairs"] == 26
    assert m["incomplete"]["by_baseline_outcome"] == {
        "correct": 26,
        "incorrect": 0,
        "no_answer": 0,
        "error": 0,
        "missing": 0,
    }
    assert c["pooled"]["lost"] == 60 and c["pooled"]["pairs"] == 1000
    # the text report says it too
    text = run("gate", base, cand, "--margin", 0.05, *allow).output
    assert (
        "26 incomplete pairs (by side: candidate " + how + " 26; by the baseline's outcome: correct 26); "
        "verdict with the 26 candidate-side ones on baseline-correct questions counted as lost: FAIL, "
        "with all of them dropped: PASS"
    ) in text
    # dropping them is an explicit choice, which the report records (and check refuses)
    r = run("gate", base, cand, "--margin", 0.05, *allow, "--missing", "drop", "--format", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["settings"]["missing"] == "drop"
    assert doc["candidates"][0]["missing"]["verdict_worst_case"] == "FAIL"


def test_the_share_decided_by_each_extractor_is_printed_beside_the_no_answer_rates(write, records_of):
    def decided(records, labels):
        return [dataclasses.replace(r, decided_by=lab) for r, lab in zip(records, labels)]

    outcomes = ["correct"] * 150 + ["incorrect"] * 40 + ["no_answer"] * 10
    base = decided(records_of(outcomes), ["strict:after_marker"] * 180 + ["lenient:last_number"] * 10 + [None] * 10)
    cand = decided(records_of(outcomes, config="c"), ["strict:after_marker"] * 190 + ["think:unfinished"] * 10)
    r = run("gate", write("b.jsonl", base), write("c.jsonl", cand), "--margin", 0.05)
    assert (
        "decided by, baseline (200 records): strict:after_marker 90.0%, lenient:last_number 5.0%, none 5.0%" in r.output
    )
    assert "decided by, c (200 records): strict:after_marker 95.0%, think:unfinished 5.0%" in r.output
    report = json.loads(
        run("gate", write("b2.jsonl", base), write("c2.jsonl", cand), "--margin", 0.05, "--format", "json").stdout
    )
    assert report["baseline"]["decided_by"] == {"strict:after_marker": 180, "lenient:last_number": 10}


@pytest.mark.slow
def test_records_without_decided_by_print_no_such_line(fly_lossy):
    assert "decided by" not in run("gate", *fly_lossy, "--margin", 0.02).output
