"""`qualgate check`: evidence from the real `qualgate gate`, bound to the served config's id."""

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.ci import check as _check
from qualgate.ci import parse_age, read_serving_config
from qualgate.cli import cli
from qualgate.config.decoding import load_config, load_plan

import support


def check(*args, **kwargs):
    """:func:`qualgate.ci.check` of a deployment on vLLM 0.33.0, stated as ``--vllm-version``
    would (these configs' files do not state their release)."""
    return _check(*args, vllm_version="0.33.0", **kwargs)


DATA = Path(__file__).parent / "data"
N = 600
TARGET = DATA / "target.decoding.yaml"
W2, DEFAULT = DATA / "fly-w2.decoding.yaml", DATA / "fly-default.decoding.yaml"


def ids():
    return {
        "target": load_config(DATA / "target.decoding.yaml").config_id,
        "fly-w2": load_config(DATA / "fly-w2.decoding.yaml").config_id,
        "fly-default": read_serving_config(DEFAULT).config_id(),
    }


def write_records(path, config_id, mode, correct):
    """One record per question (``correct``: booleans), written as the harness writes them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    outcomes = ["correct" if ok else "incorrect" for ok in correct]
    return support.write_records(path, outcomes, config=config_id, mode=mode, run_id="ci-test")


def flip(outcomes, lose, gain):
    """Lose the first ``lose`` correct answers and gain the first ``gain`` wrong ones."""
    out = list(outcomes)
    right = [i for i, ok in enumerate(out) if ok][:lose]
    wrong = [i for i, ok in enumerate(out) if not ok][:gain]
    for i in right:
        out[i] = False
    for i in wrong:
        out[i] = True
    return out


def gate(*args, exit_code=None):
    r = CliRunner().invoke(cli, ["gate", *map(str, args)])
    assert exit_code is None or r.exit_code == exit_code, r.output
    return r


# every test reads the module's evidence: a run of the gate over real record files (2.4 CPU-s)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    """Gate reports written by the real `qualgate gate` on generated record files."""
    d = tmp_path_factory.mktemp("evidence")
    i = ids()
    base = [k % 10 != 0 for k in range(N)]  # 90% correct
    b = write_records(d / "target.jsonl", i["target"], "target", base)
    w2 = write_records(d / "fly-w2.jsonl", i["fly-w2"], "fly", flip(base, 2, 2))
    fd = write_records(d / "fly-default.jsonl", i["fly-default"], "fly", flip(base, 40, 0))
    out = {}
    configs = ("--baseline-config", TARGET, "--candidate-config", W2)
    gate(b, w2, fd, "--margin", 0.02, *configs, "--candidate-config", DEFAULT, "--output", d / "report.json")
    out["report"] = d / "report.json"
    gate(b, w2, "--margin", 0.02, "--policy", "mcnemar", *configs, "--output", d / "mcnemar.json")
    out["mcnemar"] = d / "mcnemar.json"
    gate(b, w2, "--margin", 0.05, *configs, "--output", d / "margin5.json")
    out["margin5"] = d / "margin5.json"
    small = write_records(d / "small" / "target.jsonl", i["target"], "target", base[:30])
    small_w2 = write_records(d / "small" / "fly-w2.jsonl", i["fly-w2"], "fly", base[:30])
    gate(small, small_w2, "--margin", 0.02, *configs, "--output", d / "inconclusive.json")
    out["inconclusive"] = d / "inconclusive.json"
    lossy_base = write_records(d / "lossy-base.jsonl", i["fly-default"], "fly", base)
    gate(
        lossy_base,
        w2,
        "--margin",
        0.02,
        "--baseline-config",
        DEFAULT,
        "--output",
        d / "lossy-baseline.json",
    )
    out["lossy-baseline"] = d / "lossy-baseline.json"
    gate(b, w2, "--margin", 0.02, "--output", d / "no-baseline-config.json")
    out["no-baseline-config"] = d / "no-baseline-config.json"
    # OUT/gate.json of a harness run (qualgate run), from the harness's own evaluation
    from qualgate.run.runner import evaluate_gate

    run_dir = d / "run"
    write_records(run_dir / "records" / "target.jsonl", i["target"], "target", base)
    write_records(run_dir / "records" / "fly-w2.jsonl", i["fly-w2"], "fly", flip(base, 1, 1))
    report, _ = evaluate_gate(load_plan(DATA / "plan.yaml"), run_dir)
    report.evidence().write(run_dir / "gate.json")
    out["run"] = run_dir / "gate.json"
    return out


def run(*args, env=None):
    return CliRunner(env=env).invoke(cli, ["check", "--vllm-version", "0.33.0", *map(str, args)])


# ------------------------------------------------------------------ the binding


def test_the_served_config_and_the_harness_config_have_one_id():
    assert read_serving_config(DATA / "fly-w2.yaml").config_id() == ids()["fly-w2"]


@pytest.mark.slow
def test_a_lossy_config_with_passing_evidence_for_its_id_is_allowed(evidence):
    r = run(DATA / "fly-w2.yaml", "--evidence", evidence["report"])
    assert r.exit_code == 0, r.output
    assert "verified by: records" in r.stdout
    assert r.stdout.startswith(f"{DATA / 'fly-w2.yaml'}: allowed (fly, lossy; config id {ids()['fly-w2']})")


@pytest.mark.parametrize(
    "name", ["fly-w2.docker.sh", "fly-w2.api_server.sh", "with-config-file.serve.sh", "fly-w2.decoding.yaml"]
)
@pytest.mark.slow
def test_the_same_deployment_in_any_format_is_allowed(evidence, name):
    assert run(DATA / name, "--evidence", evidence["report"]).exit_code == 0


@pytest.mark.slow
def test_the_gate_json_of_a_harness_run_is_evidence(evidence):
    assert run(DATA / "fly-w2.yaml", "--evidence", evidence["run"]).exit_code == 0


def test_a_lossless_config_passes_without_evidence():
    r = run(DATA / "eagle3-standard.serve.sh")
    assert r.exit_code == 0
    assert "note: lossless (standard verification): no evidence needed" in r.stdout


def test_a_target_only_config_passes_without_evidence():
    assert check(DATA / "target-only.yaml").allowed


# ------------------------------------------------------------------ every refusal


def test_a_lossy_config_without_evidence_is_refused_naming_the_id_needed():
    r = run(DATA / "fly-w2.yaml")
    assert r.exit_code == 1
    assert (
        f"refused: lossy verification (rejection_sample_method='fly') needs evidence: pass "
        f"--evidence REPORT.json, a qualgate gate report with verdict PASS for a candidate "
        f"with config id {ids()['fly-w2']}"
    ) in r.stdout


@pytest.mark.slow
def test_evidence_for_another_window_is_refused_showing_the_resolved_window(evidence):
    # fly-default-window.yaml leaves the window unset: W = 6, not the W = 2 that was gated
    # (its own candidate failed in this report; here we ask for a config with no candidate)
    res = check(DATA / "fly-k4-default-window.json", evidence["report"])
    (reason,) = res.reasons
    assert f"no candidate in {evidence['report']} has this config's id {res.config_id}" in reason
    assert ids()["fly-w2"] in reason and '"fly_window_size": 3' in reason


@pytest.mark.slow
def test_a_fail_verdict_is_refused_with_the_gates_reason(evidence):
    res = check(DEFAULT, evidence["report"])
    (reason,) = res.reasons
    assert reason.startswith(
        f"the gate's verdict for candidate fly-default ({ids()['fly-default']}) is FAIL, not PASS: "
    )


def test_an_inconclusive_verdict_is_refused(evidence):
    (reason,) = check(DATA / "fly-w2.yaml", evidence["inconclusive"]).reasons
    assert "is INCONCLUSIVE, not PASS" in reason


@pytest.mark.slow
def test_a_margin_looser_than_max_margin_is_refused_by_default(evidence):
    (reason,) = check(DATA / "fly-w2.yaml", evidence["margin5"]).reasons
    assert reason == "the gate's non-inferiority margin 0.05 is looser than --max-margin 0.02"
    assert check(DATA / "fly-w2.yaml", evidence["margin5"], max_margin=0.05).allowed
    assert run(DATA / "fly-w2.yaml", "--evidence", evidence["margin5"], "--max-margin", 0.05).exit_code == 0


def test_max_margin_needs_a_noninferiority_gate(evidence):
    (reason,) = check(DATA / "fly-w2.yaml", evidence["mcnemar"]).reasons
    assert reason.startswith("--max-margin 0.02 needs a non-inferiority gate; the report's policy is 'mcnemar'")


@pytest.mark.slow
def test_evidence_older_than_max_age_is_refused(evidence):
    created = json.loads(evidence["report"].read_text())["created_at"]
    later = dt.datetime.fromisoformat(created.replace("Z", "+00:00")) + dt.timedelta(days=31)
    (reason,) = check(DATA / "fly-w2.yaml", evidence["report"], now=later).reasons  # default 30d
    assert reason == (f"the report was created {created} (31.0 days ago), older than --max-age 30.0 days")
    assert check(DATA / "fly-w2.yaml", evidence["report"], max_age="32d", now=later).allowed


@pytest.mark.slow
def test_evidence_from_the_future_is_refused(evidence):
    created = json.loads(evidence["report"].read_text())["created_at"]
    earlier = dt.datetime.fromisoformat(created.replace("Z", "+00:00")) - dt.timedelta(hours=1)
    (reason,) = check(DATA / "fly-w2.yaml", evidence["report"], now=earlier).reasons
    assert "is in the future" in reason


def test_a_lossy_baseline_is_refused(evidence):
    (reason,) = check(DATA / "fly-w2.yaml", evidence["lossy-baseline"]).reasons
    assert "is itself lossy (its resolved config uses 'fly' verification" in reason


def test_a_baseline_whose_config_is_not_stated_is_refused(evidence):
    (reason,) = check(DATA / "fly-w2.yaml", evidence["no-baseline-config"]).reasons
    assert reason.startswith("the report does not say what the baseline serves")


def test_a_baseline_config_with_another_id_than_the_records_is_a_data_error(evidence, tmp_path):
    i = ids()
    base = write_records(tmp_path / "b.jsonl", i["fly-default"], "target", [True] * 50)  # relabelled
    cand = write_records(tmp_path / "c.jsonl", i["fly-w2"], "fly", [True] * 50)
    r = CliRunner().invoke(cli, ["gate", str(base), str(cand), "--margin", "0.02", "--baseline-config", str(TARGET)])
    assert r.exit_code == 3 and f"but the baseline records carry {i['fly-default']}" in r.stderr


def test_a_config_that_is_the_baseline_is_refused(evidence):
    reasons = check(DEFAULT, evidence["lossy-baseline"]).reasons
    assert any("this config is the baseline, not a candidate" in r for r in reasons)


def test_every_unmet_condition_is_listed(evidence):
    r = run(DEFAULT, "--evidence", evidence["margin5"])
    assert r.exit_code == 1
    assert r.stdout.count("  refused: ") == 2  # no candidate with its id; the margin


@pytest.mark.slow
def test_a_key_outside_the_id_is_refused_unless_allowed(evidence):
    (reason,) = check(DATA / "fly-draft-tp.yaml", evidence["report"]).reasons
    assert "['draft_tensor_parallel_size']" in reason
    assert "--allow-key draft_tensor_parallel_size" in reason
    res = check(DATA / "fly-draft-tp.yaml", evidence["report"], allow_keys=("draft_tensor_parallel_size",))
    # without the allowed key, the config is fly-w2.yaml, which the report passed
    assert res.allowed and res.config_id == ids()["fly-w2"]
    assert res.notes[0] == "left out of the config id by --allow-key: draft_tensor_parallel_size"
    assert res.notes[1].startswith("not verifiable without QUALGATE_EVIDENCE_KEY")


@pytest.mark.slow
def test_allow_key_on_the_command_line(evidence):
    args = (DATA / "fly-draft-tp.yaml", "--evidence", evidence["report"])
    assert run(*args).exit_code == 1
    r = run(*args, "--allow-key", "draft_tensor_parallel_size")
    assert r.exit_code == 0
    assert "note: left out of the config id by --allow-key: draft_tensor_parallel_size" in r.stdout


def test_a_json_file_that_is_not_a_gate_report_is_refused(tmp_path):
    p = tmp_path / "other.json"
    p.write_text('{"kind": "qualgate.calibration_report", "version": 1}')
    (reason,) = check(DATA / "fly-w2.yaml", p).reasons
    assert "field 'kind' = 'qualgate.calibration_report': not a qualgate gate report" in reason


def test_an_unsupported_report_version_is_refused(evidence, tmp_path):
    doc = json.loads(evidence["report"].read_text())
    doc["version"] = 1
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(doc))
    (reason,) = check(DATA / "fly-w2.yaml", p).reasons
    assert "gate report version 1; this qualgate reads version 2" in reason


# ------------------------------------------------------------------ exit codes and output


def test_unreadable_evidence_exits_3(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    r = run(DATA / "fly-w2.yaml", "--evidence", p)
    assert r.exit_code == 3 and "not valid JSON" in r.stderr


def test_missing_evidence_file_exits_3(tmp_path):
    assert run(DATA / "fly-w2.yaml", "--evidence", tmp_path / "absent.json").exit_code == 3


def test_an_unreadable_config_exits_3():
    assert run(DATA / "broken.yaml").exit_code == 3


def test_an_invalid_lossy_config_exits_3():
    r = run(DATA / "fly-k1.serve.sh")
    assert r.exit_code == 3 and "vLLM 0.33 refuses this config" in r.stderr and "num_speculative_tokens" in r.stderr


def test_an_unknown_verifier_is_not_taken_for_lossless():
    r = run(DATA / "bad-verifier.yaml")
    assert r.exit_code == 3 and "'lossless'" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--max-age", "soon"],
        ["--max-margin", 1.5],
        ["--max-margin", "nan"],
        ["--max-margin", -1],
        ["--max-alpha", 0.7],
        ["--format", "yaml"],
    ],
)
def test_bad_options_exit_2(args):
    assert run(DATA / "fly-w2.yaml", *args).exit_code == 2


@pytest.mark.slow
def test_json_output_has_the_decision_and_the_candidate(evidence):
    r = run(DATA / "fly-w2.yaml", "--evidence", evidence["report"], "--format", "json")
    out = json.loads(r.stdout)
    assert (out["kind"], out["decision"], out["lossy"]) == ("qualgate.check_result", "allowed", True)
    assert out["evidence"]["candidate"]["verdict"] == "PASS"
    assert out["evidence"]["candidate"]["config_id"] == out["config_id"] == ids()["fly-w2"]


@pytest.mark.slow
def test_the_github_step_summary_is_appended(evidence, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    r = run(DEFAULT, "--evidence", evidence["report"], env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### qualgate check: refused\n")
    assert "is FAIL, not PASS" in text and f"`{ids()['fly-default']}`" in text


@pytest.mark.parametrize(
    "text, seconds",
    [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("3600s", 3600), ("2w", 1209600), ("1.5", 129600)],
)
def test_parse_age_units(text, seconds):
    assert parse_age(text).total_seconds() == seconds
