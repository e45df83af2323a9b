"""Decoding configs and plans: validation errors name file, line, field and value; ids are stable."""

import textwrap

import pytest

from qualgate.config.decoding import config_id, load_config, load_plan
from qualgate.errors import DataError

FLY = """\
engine: vllm
model: Qwen/Qwen3-8B
speculative:
  method: draft_model
  model: Qwen/Qwen3-0.6B
  num_speculative_tokens: 8
  rejection_sample_method: fly
sampling:
  temperature: 0.6
  max_tokens: 4096
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_config_id_is_the_same_for_an_explicit_default_window(tmp_path):
    implicit = load_config(write(tmp_path, "a.yaml", FLY))
    explicit = load_config(write(tmp_path, "b.yaml", FLY.replace("fly\n", "fly\n  fly_window_size: 6\n")))
    assert implicit.speculative["fly_window_size"] == 6
    assert implicit.config_id == explicit.config_id


def test_config_id_changes_with_the_window(tmp_path):
    w6 = load_config(write(tmp_path, "a.yaml", FLY))
    w2 = load_config(write(tmp_path, "b.yaml", FLY.replace("fly\n", "fly\n  fly_window_size: 2\n")))
    assert w6.config_id != w2.config_id


def test_config_id_ignores_sampling_and_is_a_pure_function_of_the_serving_identity(tmp_path):
    cfg = load_config(write(tmp_path, "a.yaml", FLY.replace("temperature: 0.6", "temperature: 1.0")))
    assert cfg.config_id == config_id(
        "Qwen/Qwen3-8B",
        {"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly"},
    )
    assert cfg.config_id.startswith("cfg-") and len(cfg.config_id) == 20


def test_fly_keys_without_fly_do_not_change_the_id():
    plain = {"model": "d", "num_speculative_tokens": 4}
    stray = {**plain, "fly_window_size": 2}
    assert config_id("t", plain) == config_id("t", stray)


def test_missing_max_tokens_names_file_line_and_field(tmp_path):
    p = write(tmp_path, "c.yaml", FLY.replace("  max_tokens: 4096\n", ""))
    with pytest.raises(DataError) as e:
        load_config(p)
    assert e.value.field == "sampling.max_tokens"
    assert e.value.line == 8  # the line of `sampling:` (its nearest parent)
    assert str(p) in str(e.value)


def test_window_not_below_k_is_rejected_with_the_line(tmp_path):
    p = write(tmp_path, "c.yaml", FLY.replace("fly\n", "fly\n  fly_window_size: 8\n"))
    with pytest.raises(DataError, match="fly_window_size must be smaller") as e:
        load_config(p)
    assert e.value.line == 3


def test_unknown_key_is_an_error(tmp_path):
    p = write(tmp_path, "c.yaml", FLY + "sampling_typo: 1\n")
    with pytest.raises(DataError, match="unknown key") as e:
        load_config(p)
    assert e.value.line == 11


def test_invalid_yaml_reports_the_line(tmp_path):
    p = write(tmp_path, "c.yaml", "engine: vllm\nmodel: [unclosed\n")
    with pytest.raises(DataError, match="invalid YAML") as e:
        load_config(p)
    assert e.value.line is not None


def test_plan_resolves_config_paths_relative_to_the_plan(tmp_path):
    (tmp_path / "cfg").mkdir()
    write(tmp_path / "cfg", "target.yaml", FLY.split("speculative:")[0] + "sampling:\n  max_tokens: 64\n")
    write(tmp_path / "cfg", "fly.yaml", FLY)
    (tmp_path / "plans").mkdir()
    plan = load_plan(
        write(
            tmp_path / "plans",
            "p.yaml",
            """\
            suites: [gsm8k, {suite: aime25, limit: 10}]
            seeds: 3
            configs: {target: ../cfg/target.yaml, fly-w6: ../cfg/fly.yaml}
            baseline: target
            gate: {margin: 0.03}
            """,
        )
    )
    assert plan.seeds == (0, 1, 2)
    assert plan.candidates == ("fly-w6",)
    assert plan.configs["fly-w6"].name == "fly-w6"
    assert plan.configs["fly-w6"].lossy and not plan.configs["target"].lossy
    assert plan.suites[1].limit == 10 and plan.margin == 0.03


def test_plan_baseline_must_be_a_config(tmp_path):
    write(tmp_path, "t.yaml", FLY)
    p = write(tmp_path, "p.yaml", "suites: [gsm8k]\nconfigs: {t: t.yaml}\nbaseline: nope\n")
    with pytest.raises(DataError, match="baseline") as e:
        load_plan(p)
    assert e.value.line == 3


@pytest.mark.parametrize(
    "candidates, refused",
    [
        ("[fly, fly-coupled]", "fly-coupled"),  # two candidates serving one configuration
        ("[target-coupled]", "target-coupled"),  # a candidate serving the baseline's
    ],
)
def test_a_plan_gating_two_configs_that_serve_one_configuration_is_refused_at_load(tmp_path, candidates, refused):
    # `coupled` changes how the reference engine draws noise, not what a server runs: the gate
    # report names each candidate by its config id and refuses a repeat, so the plan is refused
    # before anything is decoded rather than after
    target = FLY.split("speculative:")[0] + "sampling:\n  max_tokens: 64\n"
    write(tmp_path, "target.yaml", target.replace("engine: vllm", "engine: reference"))
    write(
        tmp_path,
        "target-coupled.yaml",
        target.replace("engine: vllm", "engine: reference") + "engine_options: {coupled: true}\n",
    )
    write(tmp_path, "fly.yaml", FLY.replace("engine: vllm", "engine: reference"))
    write(
        tmp_path,
        "fly-coupled.yaml",
        FLY.replace("engine: vllm", "engine: reference") + "engine_options: {coupled: true}\n",
    )
    configs = "{target: target.yaml, target-coupled: target-coupled.yaml, fly: fly.yaml, fly-coupled: fly-coupled.yaml}"
    p = write(tmp_path, "p.yaml", f"suites: [gsm8k]\nconfigs: {configs}\nbaseline: target\ncandidates: {candidates}\n")
    with pytest.raises(DataError, match="serve one configuration") as e:
        load_plan(p)
    assert (e.value.field, e.value.value, e.value.line) == ("candidates", refused, 4)
    # the same configs, one of each pair gated, load (the other is decoded, not gated)
    write(tmp_path, "p.yaml", f"suites: [gsm8k]\nconfigs: {configs}\nbaseline: target\ncandidates: [fly]\n")
    assert load_plan(p).candidates == ("fly",)
