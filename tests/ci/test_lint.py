"""`qualgate lint`: one test per rule on a real config file, and every exit code."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.ci import RULES, lint, max_topk_entropy
from qualgate.cli import cli

DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(cli, ["lint", *map(str, args)])


def rules_of(name):
    return {(f.rule, f.severity) for f in lint(DATA / name).findings}


def finding(name, rule):
    (f,) = [f for f in lint(DATA / name).findings if f.rule == rule]
    return f


# ------------------------------------------------------------------ one test per rule


def test_fly_is_a_lossy_verifier_warning():
    f = finding("fly-w2.yaml", "lossy-verification")
    assert (f.severity, f.key, f.line) == ("warning", "speculative_config.rejection_sample_method", 9)


def test_synthetic_is_a_lossy_verifier_error():
    assert ("lossy-verification", "error") in rules_of("synthetic.json")


def test_block_is_reported_as_standard_on_v1_and_for_greedy_requests():
    f = finding("block-greedy.decoding.yaml", "block-acts-as-standard")
    assert f.severity == "info"
    assert "V1 runner" in f.message and "greedy" in f.message
    # the decoding config samples at temperature 0, which the finding says
    assert "block verification never applies" in f.message


def test_fly_without_a_window_names_the_default_and_the_deferrable_positions():
    f = finding("fly-default-window.yaml", "fly-implicit-window")
    assert f.severity == "warning"
    assert "min(6, K - 1) = 6 for K = 8" in f.message
    assert "W = 2" in f.message and "only draft positions 0-1" in f.message


def test_fly_without_a_window_and_small_k_can_defer_only_position_0():
    f = finding("fly-k4-default-window.json", "fly-implicit-window")
    assert "min(6, K - 1) = 3 for K = 4" in f.message
    assert "only the first draft position (0)" in f.message
    assert f.line == 7


def test_an_explicit_window_of_k_minus_1_defers_only_position_0():
    f = finding("fly-window-k-minus-1.yaml", "fly-first-position-only")
    assert (f.severity, f.line) == ("info", 7)


def test_the_benchmarked_window_raises_no_window_finding():
    assert {r for r, _ in rules_of("fly-w2.yaml")} == {"lossy-verification"}


def test_an_unreachable_entropy_threshold_means_fly_never_defers():
    f = finding("fly-threshold-unreachable.yaml", "fly-threshold-unreachable")
    assert "1.0986" in f.message and f.line == 8


@pytest.mark.parametrize("k, expected", [(1, 0.36787944), (2, 0.73575888), (3, 1.09861229), (10, 2.30258509)])
def test_max_topk_entropy_is_attained_by_equal_probabilities(k, expected):
    # brute force over equal probabilities p = s / k, s in (0, 1]: k * (-p ln p)
    import numpy as np

    s = np.linspace(1e-6, 1, 200001)
    brute = float(np.max(-s * np.log(s / k)))
    assert max_topk_entropy(k) == pytest.approx(expected, abs=1e-8)
    assert max_topk_entropy(k) == pytest.approx(brute, abs=1e-8)


def test_k_below_2_for_fly_is_rejected_as_vllm_says():
    f = finding("fly-k1.serve.sh", "vllm-rejects")
    assert f.message.startswith("FLy requires num_speculative_tokens to be at least 2.")
    assert (f.severity, f.line) == ("error", 5)


def test_a_window_not_smaller_than_k_is_rejected():
    f = finding("fly-window-too-big.args", "vllm-rejects")
    assert f.message.startswith(
        "FLy requires fly_window_size to be smaller than num_speculative_tokens. (fly_window_size = 4,"
    )


def test_synthetic_without_rates_is_rejected_with_vllms_message():
    f = finding("synthetic-missing-rates.yaml", "vllm-rejects")
    assert f.message == (
        "rejection_sample_method='synthetic' requires exactly one of "
        "synthetic_acceptance_rates or synthetic_acceptance_length."
    )


def test_tensor_parallel_size_inside_speculative_config_is_rejected_with_vllms_message():
    f = finding("tp-in-spec.serve.sh", "vllm-rejects")
    assert "Please pass 'draft_tensor_parallel_size' instead." in f.message and f.line == 2


def test_token_level_intersection_outside_draft_model_is_rejected_with_vllms_message():
    f = finding("hetero-vocab.yaml", "vllm-rejects")
    assert f.message == "use_heterogeneous_vocab only works with method='draft_model'"


def test_an_implicit_k_is_flagged_with_vllms_rule_but_not_as_a_rejection():
    # vLLM takes K from an MTP head's n_predict; qualgate cannot resolve the id without it
    f = finding("mtp-implicit-k.serve.sh", "not-modelled")
    assert f.severity == "warning" and "n_predict" in f.message
    assert "vllm-rejects" not in {r for r, _ in rules_of("mtp-implicit-k.serve.sh")}


def test_an_unknown_verifier_is_rejected():
    f = finding("bad-verifier.yaml", "vllm-rejects")
    assert "'lossless'" in f.message and "['standard', 'synthetic', 'block', 'fly']" in f.message
    assert f.key == "speculative_config.rejection_sample_method"


def test_fly_keys_without_fly_have_no_effect():
    f = finding("standard-stray-fly-keys.yaml", "no-effect")
    assert (f.key, f.line) == ("speculative_config.fly_window_size", 8)


def test_a_key_outside_the_config_id_is_flagged_for_a_lossy_config():
    f = finding("fly-draft-tp.yaml", "not-modelled")
    assert f.severity == "warning" and "--allow-key draft_tensor_parallel_size" in f.message


def test_medusa_is_refused_as_vllm_0_33_refuses_it():
    # not in SpeculativeConfig's method Literal (vllm/config/speculative.py:38-84)
    f = finding("medusa.yaml", "vllm-rejects")
    assert f.severity == "error" and "'medusa'" in f.message and f.line == 3


def test_every_rule_is_exercised_by_a_data_file():
    seen = {
        f.rule
        for p in DATA.iterdir()
        if p.suffix in (".yaml", ".json", ".sh", ".args")
        and p.name not in ("broken.yaml", "bad-json.serve.sh", "plan.yaml")
        for f in lint(p).findings
    }
    assert seen == set(RULES)


# ------------------------------------------------------------------ CLI and exit codes


def test_a_clean_config_exits_0_and_prints_its_id():
    r = run("--vllm-version", "0.33.0", DATA / "target-only.yaml")
    assert r.exit_code == 0, r.output
    assert r.output == f"{DATA / 'target-only.yaml'}: serving-config, config id cfg-bf685ed90b3c89fd: clean\n"


def test_a_lossless_speculative_command_line_is_clean():
    assert run(DATA / "eagle3-standard.serve.sh").exit_code == 0


def test_a_warning_fails_by_default_and_passes_with_fail_on_error():
    assert run(DATA / "fly-w2.yaml").exit_code == 1
    assert run("--fail-on", "error", DATA / "fly-w2.yaml").exit_code == 0


def test_info_findings_fail_only_with_fail_on_info():
    assert run(DATA / "block-greedy.decoding.yaml").exit_code == 0
    assert run("--fail-on", "info", DATA / "block-greedy.decoding.yaml").exit_code == 1


def test_an_error_fails_with_fail_on_error():
    r = run("--fail-on", "error", DATA / "fly-k1.serve.sh")
    assert r.exit_code == 1
    assert f"{DATA / 'fly-k1.serve.sh'}:5: error: FLy requires num_speculative_tokens" in r.output


def test_an_unknown_severity_is_a_usage_error():
    assert run("--fail-on", "fatal", DATA / "fly-w2.yaml").exit_code == 2


def test_no_config_is_a_usage_error():
    assert run().exit_code == 2


def test_an_unreadable_config_exits_3_and_the_others_are_still_linted():
    r = CliRunner().invoke(cli, ["lint", str(DATA / "broken.yaml"), str(DATA / "fly-w2.yaml")])
    assert r.exit_code == 3
    assert "broken.yaml:4" in r.stderr
    assert "fly-w2.yaml: serving-config" in r.stdout


def test_a_file_that_is_not_a_serving_config_exits_3_naming_what_was_not_understood():
    r = run(DATA / "plan.yaml")
    assert r.exit_code == 3 and "not understood as a serving config" in r.stderr


def test_invalid_json_on_a_command_line_exits_3():
    assert run(DATA / "bad-json.serve.sh").exit_code == 3


def test_json_output_is_a_list_of_reports():
    r = run("--format", "json", DATA / "fly-default-window.yaml", DATA / "target-only.yaml")
    reports = json.loads(r.stdout)
    assert [rep["kind"] for rep in reports] == ["qualgate.lint_report"] * 2
    assert reports[0]["lossy"] is True and reports[1]["lossy"] is False
    assert reports[0]["resolved_speculative_config"]["fly_window_size"] == 6
    assert {f["rule"] for f in reports[0]["findings"]} == {"lossy-verification", "fly-implicit-window"}


def test_github_format_writes_workflow_annotations():
    r = run("--format", "github", DATA / "fly-k1.serve.sh")
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"::error file={DATA / 'fly-k1.serve.sh'},line=5,title=qualgate vllm-rejects::FLy requires")
