"""The vLLM release is part of what is gated (issue 45): `lint` and `check` apply the rules of
the release a deployment runs, found from an image tag, a pinned requirement, a version field
or --vllm-version; `check` refuses a deployment whose release it cannot tell and evidence
decoded by another minor release. Each release's keys are those of its source
(tests/vllm033/test_rules.py checks the lists against the sources)."""

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from qualgate.ci import check, deployment_release, lint_config, read_serving_config
from qualgate.cli import cli
from qualgate.config.decoding import load_config
from qualgate.errors import DataError
from qualgate.records import read_records
from qualgate.vllm033.serving_config import ServingConfig

import support

DATA = Path(__file__).parent / "data"
TARGET = DATA / "target.decoding.yaml"
FLY = '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2%s}'


def run(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def serve(tmp_path, extra="", *, start="vllm serve Qwen/Qwen3-8B", name="serve.sh"):
    """A `vllm serve` script of FLy W = 2, with ``extra`` speculative keys."""
    path = tmp_path / name
    path.write_text(f"{start} --speculative-config '{FLY % extra}'\n")
    return path


def rules_hit(result, rule="vllm-rejects"):
    """The messages of the findings of ``rule`` (without the path: pytest's tmp_path names the test)."""
    return [line.split(": ", 1)[1] for line in result.output.splitlines() if line.endswith(f"[{rule}]")]


# ------------------------------------------------------------ a key per release


@pytest.mark.parametrize("release", ["0.32.0", "0.33.0", "0.34.0"])
def test_fly_is_refused_only_by_the_cpu_build_032(tmp_path, release):
    r = run("lint", "--vllm-version", release, serve(tmp_path))
    refused = rules_hit(r)
    assert bool(refused) == (release == "0.32.0"), r.output
    if refused:
        assert (
            "fly_window_size" in refused[0]
            and "vllm 0.32.0 vllm/config/utils.py:70-76; vllm/config/speculative.py:390-608" in refused[0]
        )


@pytest.mark.parametrize("release", ["0.32.0", "0.33.0", "0.34.0"])
def test_use_heterogeneous_vocab_is_a_key_034_removed(tmp_path, release):
    r = run("lint", "--vllm-version", release, serve(tmp_path, ', "use_heterogeneous_vocab": false'))
    refused = rules_hit(r)
    if release == "0.34.0":
        assert (
            "use_heterogeneous_vocab" in refused[0]
            and "vllm 0.34.0 vllm/config/utils.py:71-77; vllm/config/speculative.py:452-711" in refused[0]
        )
    else:  # 0.32 refuses the FLy keys, not this one
        assert not any("use_heterogeneous_vocab" in f for f in refused), r.output


@pytest.mark.parametrize("release", ["0.32.0", "0.33.0", "0.34.0"])
def test_speculator_options_is_a_key_only_034_accepts(tmp_path, release):
    path = serve(tmp_path, ', "speculator_options": {}', start="vllm serve Qwen/Qwen3-8B")
    r = run("lint", "--vllm-version", release, path)
    refused = [f for f in rules_hit(r) if "speculator_options" in f]
    assert bool(refused) == (release != "0.34.0"), r.output
    if release == "0.34.0":  # accepted by vLLM, outside qualgate's config id: check cannot bind it
        assert any("speculator_options" in line for line in rules_hit(r, "not-modelled"))


def test_check_refuses_on_033_what_only_034_accepts_and_the_reverse(tmp_path):
    new_key = serve(tmp_path, ', "custom_method": null', name="new.sh")
    old_key = serve(tmp_path, ', "disable_padded_drafter_batch": true', name="old.sh")
    r33, r34 = run("check", "--vllm-version", "0.33.0", new_key), run("check", "--vllm-version", "0.34.0", new_key)
    assert r33.exit_code == 3 and "vLLM 0.33 refuses" in r33.output and "custom_method" in r33.output
    # 0.34 accepts it; it is outside qualgate's config id, so a lossy config with it is refused as such
    assert r34.exit_code == 1 and "['custom_method'] that qualgate's config id does not model" in r34.output
    r33, r34 = run("check", "--vllm-version", "0.33.0", old_key), run("check", "--vllm-version", "0.34.0", old_key)
    assert r34.exit_code == 3 and "disable_padded_drafter_batch" in r34.output
    assert r33.exit_code == 1  # a key 0.33 accepts, outside the config id: refused as such, not as invalid
    assert "disable_padded_drafter_batch" in r33.output and "vLLM 0.33 refuses" not in r33.output


def test_a_suffix_config_without_k_reads_24_on_033_and_8_on_034():
    cfg = ServingConfig("s.sh", "command-line", "Qwen/Qwen3-8B", {"method": "suffix"})
    assert lint_config(cfg, release="0.33").resolved["num_speculative_tokens"] == 24
    assert lint_config(cfg, release="0.34").resolved["num_speculative_tokens"] == 8


def test_a_drafter_without_method_is_detected_from_its_checkpoint_on_034(tmp_path):
    spec = {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}
    cfg = ServingConfig("s.sh", "command-line", "meta-llama/Llama-3.1-8B-Instruct", spec)
    assert lint_config(cfg, release="0.33").resolved["method"] == "eagle3"  # by the drafter's name
    on_034 = lint_config(cfg, release="0.34")  # the draft checkpoint's declared speculator decides first
    assert on_034.config_id is None and "detects it from the draft checkpoint" in on_034.findings[0].message


# ------------------------------------------------------------ the runner variable


def test_v1_runner_on_033_is_named_and_on_034_is_refused(tmp_path):
    start = "VLLM_USE_V2_MODEL_RUNNER=0 vllm serve Qwen/Qwen3-8B"
    r33 = run("lint", "--vllm-version", "0.33.0", serve(tmp_path, start=start))
    (v1,) = rules_hit(r33, "runner")
    assert "selects ModelRunner V1" in v1 and "v1/spec_decode/fly.py" in v1 and "vllm/config/vllm.py:748-767" in v1
    r34 = run("check", "--vllm-version", "0.34.0", serve(tmp_path, start=start))
    assert r34.exit_code == 3 and "Model Runner V1 has been removed" in r34.output
    assert "vllm/platforms/interface.py:1476-1490" in r34.output


def test_v2_runner_on_034_has_no_effect(tmp_path):
    r = run("lint", "--vllm-version", "0.34.0", serve(tmp_path, start="VLLM_USE_V2_MODEL_RUNNER=1 vllm serve M"))
    assert any("redundant" in line for line in rules_hit(r, "no-effect")), r.output


def test_a_runner_value_vllm_cannot_read_is_refused_on_033(tmp_path):
    r = run("lint", "--vllm-version", "0.33.0", serve(tmp_path, start="VLLM_USE_V2_MODEL_RUNNER=true vllm serve M"))
    assert any("int()" in line for line in rules_hit(r)), r.output


# ------------------------------------------------------------ ways of stating the release


@pytest.mark.parametrize(
    "start, version, source",
    [
        ("docker run --gpus all vllm/vllm-openai:v0.34.0 --model Qwen/Qwen3-8B", "0.34.0", "image"),
        ("uv run --with vllm==0.34.0 vllm serve Qwen/Qwen3-8B", "0.34.0", "requirement"),
        ("uvx --from 'vllm==0.32.0' vllm serve Qwen/Qwen3-8B", "0.32.0", "requirement"),
    ],
)
def test_an_image_tag_or_a_pinned_requirement_states_the_release(tmp_path, start, version, source):
    path = serve(tmp_path, start=start)
    release = deployment_release(read_serving_config(path))
    assert (release.version, release.minor) == (version, version[:4])
    pinned = next(w for w in start.replace("'", "").split() if version in w)
    assert release.source.startswith(f"{path}:1: ") and pinned in release.source, release.source
    assert (": image " in release.source) == (source == "image")
    r = run("check", path)
    if version == "0.32.0":  # the CPU build has no FLy
        assert r.exit_code == 3 and "vLLM 0.32 refuses" in r.output
    else:
        assert r.exit_code == 1 and "needs evidence" in r.output


def test_a_version_field_states_the_release():
    cfg = ServingConfig(
        "c.yaml", "serving-config", "Qwen/Qwen3-8B", None, vllm_version="0.34.0", vllm_version_source="c.yaml:2"
    )
    result = check(cfg)
    assert result.allowed and result.release.version == "0.34.0" and result.release.source == "c.yaml:2"
    assert result.to_dict()["vllm"] == {"version": "0.34.0", "minor": "0.34", "source": "c.yaml:2"}


def test_the_option_states_the_release_and_must_agree_with_the_files(tmp_path):
    plain = serve(tmp_path, name="plain.sh")
    assert run("check", "--vllm-version", "0.33.0", plain).exit_code == 1  # read: FLy needs evidence
    pinned = serve(tmp_path, start="uv run --with vllm==0.34.0 vllm serve M", name="pinned.sh")
    r = run("check", "--vllm-version", "0.33.0", pinned)
    assert r.exit_code == 3 and "--vllm-version 0.33.0, but the deployment states vLLM 0.34.0" in r.output


# ------------------------------------------------------------ refusals


def test_no_stated_release_is_refused_and_lint_says_which_rules_it_used(tmp_path):
    r = run("check", serve(tmp_path))
    assert r.exit_code == 3 and "cannot tell which vLLM release" in r.output and "--vllm-version" in r.output
    lossless = tmp_path / "target.sh"
    lossless.write_text("vllm serve Qwen/Qwen3-8B\n")
    assert run("check", lossless).exit_code == 3  # lossless or not: the release decides what the config means
    r = run("lint", serve(tmp_path))
    assert "no vLLM version stated" in r.output and "0.33.0's rules" in r.output


@pytest.mark.parametrize(
    "start", ["docker run vllm/vllm-openai:latest --model M", "docker run vllm/vllm-openai --model M"]
)
def test_latest_is_refused(tmp_path, start):
    for command in ("check", "lint"):
        r = run(command, serve(tmp_path, start=start))
        assert r.exit_code == 3 and "latest" in r.output and "cannot tell which rules apply" in r.output


def test_a_release_without_rules_is_refused_naming_the_diff_script(tmp_path):
    r = run("check", "--vllm-version", "0.35.0", serve(tmp_path))
    assert r.exit_code == 3 and "rules for vLLM 0.32, 0.33, 0.34 only" in r.output
    assert "benchmarks/vllm_release_diff.py" in r.output


# ------------------------------------------------------------ evidence from another minor release


def _engine_records(path, config_id, mode, outcomes, version, engine="vllm"):
    records = support.make_records(outcomes, config=config_id, mode=mode, run_id="r")
    records = [dataclasses.replace(r, engine=engine, engine_version=version) for r in records]
    return support.write_records(path, records)


@pytest.fixture(scope="module")
def decoded_on_033(tmp_path_factory):
    """A passing gate report whose records were decoded by vLLM 0.33.1, and the served config
    it is evidence for."""
    d = tmp_path_factory.mktemp("releases")
    served = serve(d, start="vllm serve Qwen/Qwen3-8B --dtype bfloat16 --max-num-seqs 128")
    base = ["correct" if k % 10 else "incorrect" for k in range(600)]
    b = _engine_records(d / "target.jsonl", load_config(TARGET).config_id, "target", base, "0.33.1")
    # the candidate's decoding config (the target's sampling, FLy W = 2: the served config's id), so
    # that the report binds its baseline to what the script serves (issue 46)
    fly = yaml.safe_load(TARGET.read_text()) | {"name": "fly", "speculative": json.loads(FLY % "")}
    (d / "fly.decoding.yaml").write_text(json.dumps(fly))
    assert load_config(d / "fly.decoding.yaml").config_id == read_serving_config(served).config_id()
    c = _engine_records(d / "fly.jsonl", read_serving_config(served).config_id(), "fly", base, "0.33.1")
    r = run(
        "gate",
        b,
        c,
        "--margin",
        0.02,
        "--baseline-config",
        TARGET,
        "--candidate-config",
        d / "fly.decoding.yaml",
        "--output",
        d / "gate.json",
    )
    assert r.exit_code == 0, r.output
    return served, d / "gate.json"


@pytest.mark.slow
def test_the_gate_report_names_each_sides_engine_and_version(decoded_on_033):
    report = json.loads(decoded_on_033[1].read_text())
    for side in (report["baseline"], report["candidates"][0]["side"]):
        assert (side["engine"], side["engine_version"]) == ("vllm", "0.33.1")


@pytest.mark.slow
def test_evidence_from_the_same_minor_release_binds(decoded_on_033):
    served, report = decoded_on_033
    r = run("check", "--vllm-version", "0.33.0", served, "--evidence", report, "--trust-unsigned")
    assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_evidence_from_another_minor_release_is_refused(decoded_on_033):
    served, report = decoded_on_033
    r = run("check", "--vllm-version", "0.34.0", served, "--evidence", report, "--trust-unsigned")
    assert r.exit_code == 3
    assert "decoded by vLLM 0.33.1, but the deployment runs vLLM 0.34.0 (--vllm-version)" in r.output


@pytest.mark.slow
def test_records_of_two_versions_on_one_side_are_refused(tmp_path):
    cid = load_config(TARGET).config_id
    outcomes = ["correct", "incorrect"] * 20
    a = _engine_records(tmp_path / "a.jsonl", cid, "target", outcomes, "0.33.0")
    records = [*read_records(a)[:20], *(dataclasses.replace(r, engine_version="0.34.0") for r in read_records(a)[20:])]
    mixed = support.write_records(tmp_path / "mixed.jsonl", records)
    c = _engine_records(tmp_path / "c.jsonl", "cfg-c", "fly", outcomes, "0.33.0")
    r = run("gate", mixed, c, "--margin", 0.02)
    assert r.exit_code == 3 and "more than one engine or version" in r.output


def test_records_without_engine_still_load_and_with_it_round_trip(tmp_path):
    old = support.write_records(tmp_path / "old.jsonl", ["correct"], config="c")
    assert read_records(old)[0].engine is None and "engine" not in old.read_text()
    new = _engine_records(tmp_path / "new.jsonl", "c", None, ["correct"], "0.34.0")
    (rec,) = read_records(new)
    assert (rec.engine, rec.engine_version) == ("vllm", "0.34.0")
    with pytest.raises(DataError, match="engine_version"):
        type(rec).from_dict({**rec.to_dict(), "engine_version": ""})
