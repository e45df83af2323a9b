"""`qualgate audit-log`: lossy warnings, scheduler overrides and config echoes, with lines."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.ci import audit_log, audit_text, read_serving_config
from qualgate.cli import cli
from qualgate.config.decoding import config_id
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING

DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(cli, ["audit-log", *map(str, args)])


def test_the_fly_warning_and_the_lossy_echo_are_found_with_their_lines():
    rep = audit_log(DATA / "vllm-fly.log")
    assert [e.line for e in rep.of("lossy_warning")] == [10]
    assert rep.lossy_lines == (7, 10)
    (w,) = rep.of("lossy_warning")
    assert (w.data["level"], w.data["file"]) == ("WARNING", "speculative.py")


def test_the_args_echo_gives_the_config_id_of_the_served_config():
    rep = audit_log(DATA / "vllm-fly.log")
    args = [e for e in rep.of("speculative_config") if e.data["source"] == "args"]
    assert [e.line for e in args] == [7]
    assert args[0].data["config_id"] == read_serving_config(DATA / "fly-w2.yaml").config_id()


def test_the_engine_echo_is_parsed():
    rep = audit_log(DATA / "vllm-standard.log")
    (engine,) = [e for e in rep.of("speculative_config") if e.data["source"] == "engine"]
    assert engine.line == 3
    assert engine.data["speculative_config"] == {
        "method": "eagle3",
        "model": "RedHatAI/Qwen3-8B-speculator.eagle3",
        "num_speculative_tokens": 3,
    }


def test_the_scheduler_override_is_reported_with_both_numbers():
    rep = audit_log(DATA / "vllm-dflash-override.log")
    (e,) = rep.of("scheduler_override")
    assert (e.line, e.data["from"], e.data["to"]) == (3, 128, 32)
    # a WARNING of vllm.config.vllm, from vllm/config/vllm.py:2386
    assert (e.data["level"], e.data["file"]) == ("WARNING", "vllm.py")


def test_an_args_echo_with_objects_that_are_not_literals_still_yields_the_config():
    # the dflash log's args hold LoRAModulePath(...), which ast.literal_eval refuses
    rep = audit_log(DATA / "vllm-dflash-override.log")
    (args,) = [e for e in rep.of("speculative_config") if e.data["source"] == "args"]
    assert args.data["config_id"] == config_id(
        "Qwen/Qwen3-8B", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15}
    )


def test_a_restart_with_another_config_is_drift():
    expected = read_serving_config(DATA / "fly-w2.yaml").config_id()
    rep = audit_log(DATA / "vllm-restarts.log", expected_id=expected)
    assert len(rep.config_ids) == 2
    assert rep.drift_lines == (20,)
    # each start: the logo's version line and the engine's "(vX)"
    assert [e.data["vllm_version"] for e in rep.of("version")] == ["0.33.0"] * 2 + ["0.33.1"] * 2


def test_the_version_and_model_come_from_the_logo_or_the_plain_line():
    # vllm/entrypoints/common/startup.py:16-38: a logo by default, the plain line with
    # VLLM_DISABLE_LOG_LOGO=1; never "vLLM API server version"
    (logo,) = audit_log(DATA / "vllm-fly.log").of("version")[:1]
    assert (logo.line, logo.data) == (3, {"vllm_version": "0.33.0", "model": "Qwen/Qwen3-8B"})
    (plain, engine) = audit_log(DATA / "vllm-standard.log").of("version")
    assert plain.data == {"vllm_version": "0.33.0", "model": "Qwen/Qwen3-8B"}
    assert engine.data == {"vllm_version": "0.33.0"}


def test_hyphenated_keys_and_spec_flags_in_the_args_echo_are_read_as_vllm_reads_them():
    line = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [startup.py:96] non-default args: "
        "{'model_tag': 'm', 'model': 'm', 'speculative_config': {'rejection-sample-method': "
        "'fly', 'num_speculative_tokens': 8}, 'spec_model': 'd'}\n"
    )
    (e,) = audit_text(line).of("speculative_config")
    assert e.data["lossy"] and e.data["speculative_config"]["model"] == "d"
    assert e.data["config_id"] == config_id(
        "m", {"model": "d", "num_speculative_tokens": 8, "rejection_sample_method": "fly"}
    )


def test_an_unknown_verifier_in_the_args_echo_counts_as_lossy():
    line = "non-default args: {'model': 'm', 'speculative_config': {'rejection_sample_method': 'x'}}"
    assert audit_text(line).lossy_lines == (1,)


def test_a_lossless_log_has_no_lossy_lines():
    assert audit_log(DATA / "vllm-standard.log").lossy_lines == ()


def test_the_warning_is_found_in_any_log_prefix():
    rep = audit_text(f"WARNING 01-01 00:00:00 [x.py:1] {FLY_LOSSY_WARNING}\n")
    assert rep.lossy_lines == (1,)


# ------------------------------------------------------------------ CLI and exit codes


def test_a_lossy_log_exits_0_without_forbid_lossy():
    r = run(DATA / "vllm-fly.log")
    assert r.exit_code == 0
    assert f"{DATA / 'vllm-fly.log'}:10: lossy verifier:" in r.stdout
    assert r.stdout.splitlines()[-1].startswith(f"{DATA / 'vllm-fly.log'}: lossy verifier in use (lines 7, 10)")


def test_forbid_lossy_exits_1_on_a_lossy_log():
    assert run("--forbid-lossy", DATA / "vllm-fly.log").exit_code == 1


def test_forbid_lossy_exits_0_on_a_lossless_log():
    r = run("--forbid-lossy", DATA / "vllm-dflash-override.log")
    assert r.exit_code == 0
    assert "scheduler override: max_num_active_seqs 128 -> 32" in r.stdout


def test_expect_exits_1_on_drift_and_0_on_a_match():
    assert run("--expect", DATA / "fly-w2.yaml", DATA / "vllm-restarts.log").exit_code == 1
    r = run("--expect", DATA / "fly-w2.yaml", DATA / "vllm-fly.log")
    assert r.exit_code == 0 and "matches" in r.stdout


def test_json_output_lists_events_with_lines():
    r = run("--format", "json", DATA / "vllm-dflash-override.log")
    out = json.loads(r.stdout)
    assert out["kind"] == "qualgate.audit_report" and out["lossy"] is False
    assert [(e["line"], e["kind"]) for e in out["events"]] == [
        (1, "version"),
        (2, "speculative_config"),
        (3, "scheduler_override"),
        (4, "version"),
        (4, "speculative_config"),
    ]


def test_a_missing_log_exits_3(tmp_path):
    r = run(tmp_path / "absent.log")
    assert r.exit_code == 3 and "cannot read" in r.stderr


@pytest.mark.parametrize("config", ["broken.yaml", "fly-k1.serve.sh"])
def test_an_unreadable_or_invalid_expected_config_exits_3(config):
    assert run("--expect", DATA / config, DATA / "vllm-fly.log").exit_code == 3
