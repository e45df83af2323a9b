"""Deployments read whole or refused, within bounds (issue 46 items 2, 4, 5)."""

from __future__ import annotations

import resource
import time

import pytest
from click.testing import CliRunner

from qualgate.ci import lint, read_serving_config
from qualgate.cli import cli
from qualgate.errors import DataError

FLY = '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}'


def write(tmp_path, name, text):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def refused(path, match):
    with pytest.raises(DataError, match=match):
        read_serving_config(path)


# --------------------------------------------------------------------------- shell


def test_a_pipe_to_tee_is_not_an_argument(tmp_path):
    p = write(tmp_path, "s.sh", "vllm serve Qwen/Qwen3-8B --port 8000 2>&1 | tee vllm.log\n")
    cfg = read_serving_config(p)
    assert cfg.model == "Qwen/Qwen3-8B" and cfg.speculative is None


def test_cd_before_the_start_resolves_the_config_from_that_directory(tmp_path):
    write(tmp_path, "srv/serve.yaml", f"speculative-config: {FLY}\n")
    write(tmp_path, "serve.yaml", "max-num-seqs: 4\n")  # the decoy beside the script
    p = write(tmp_path, "s.sh", "cd srv && vllm serve Qwen/Qwen3-8B --config serve.yaml\n")
    assert read_serving_config(p).speculative["rejection_sample_method"] == "fly"


def test_cd_to_an_absolute_directory_is_refused_for_a_relative_config(tmp_path):
    write(tmp_path, "serve.yaml", "max-num-seqs: 4\n")
    p = write(tmp_path, "s.sh", "cd /srv/vllm && vllm serve Qwen/Qwen3-8B --config serve.yaml\n")
    refused(p, "absolute directory")


def test_a_home_relative_config_is_refused(tmp_path):
    p = write(tmp_path, "s.sh", "vllm serve Qwen/Qwen3-8B --config ~/spec.yaml\n")
    refused(p, "home directory")


def test_a_shell_function_that_is_called_is_refused(tmp_path):
    text = 'vllm() { command vllm "$@" --config fly.yaml; }\nvllm serve Qwen/Qwen3-8B\n'
    refused(write(tmp_path, "s.sh", text), "shell function vllm")


def test_a_start_inside_if_false_beside_a_computed_start_is_refused(tmp_path):
    text = 'if false; then vllm serve Qwen/Qwen3-8B; fi\n"$VLLM_BIN" serve Qwen/Qwen3-8B -sc "$SPEC"\n'
    refused(write(tmp_path, "s.sh", text), "computed at run time")


def test_a_decoy_after_exec_is_refused(tmp_path):
    text = 'exec "$VLLM_BIN" serve Qwen/Qwen3-8B\nvllm serve Qwen/Qwen3-8B\n'
    refused(write(tmp_path, "s.sh", text), "computed at run time")
    text = f"exec vllm serve Qwen/Qwen3-8B -sc '{FLY}'\nvllm serve Qwen/Qwen3-8B\n"
    refused(write(tmp_path, "t.sh", text), "after `exec`")


def test_a_start_inside_control_flow_is_refused(tmp_path):
    refused(write(tmp_path, "s.sh", "if [ -n x ]; then vllm serve Qwen/Qwen3-8B; fi\n"), "inside `if`")
    refused(write(tmp_path, "t.sh", "false || vllm serve Qwen/Qwen3-8B\n"), "after `||`")


def test_an_alias_is_refused(tmp_path):
    text = "shopt -s expand_aliases\nalias vllm='vllm --config fly.yaml'\nvllm serve Qwen/Qwen3-8B\n"
    refused(write(tmp_path, "s.sh", text), "expand_aliases|alias")


def test_quotes_inside_a_word_are_removed_as_the_shell_removes_them(tmp_path):
    p = write(tmp_path, "s.sh", f"vllm serve Qwen/Qwen3-8B --speculative-config='{FLY}'\n")
    assert read_serving_config(p).speculative["fly_window_size"] == 2


def test_a_config_the_script_writes_is_refused(tmp_path):
    write(tmp_path, "spec.yaml", "max-num-seqs: 4\n")
    text = f"cat > spec.yaml <<EOF\nspeculative-config: {FLY}\nEOF\nvllm serve Qwen/Qwen3-8B --config spec.yaml\n"
    refused(write(tmp_path, "s.sh", text), "script writes this file")


# --------------------------------------------------------------------------- version and environment


def test_the_version_and_environment_of_a_script(tmp_path):
    text = (
        "pip install vllm==0.34.0\nexport VLLM_BATCH_INVARIANT=1\nVLLM_USE_V2_MODEL_RUNNER=1 vllm serve Qwen/Qwen3-8B\n"
    )
    cfg = read_serving_config(write(tmp_path, "s.sh", text))
    assert cfg.vllm_version == "0.34.0" and "pip install vllm==0.34.0" in cfg.vllm_version_source
    assert cfg.environment == {"VLLM_BATCH_INVARIANT": "1", "VLLM_USE_V2_MODEL_RUNNER": "1"}


def test_uv_run_with_a_pin(tmp_path):
    cfg = read_serving_config(write(tmp_path, "s.sh", "uv run --with vllm==0.34.0 vllm serve Qwen/Qwen3-8B\n"))
    assert cfg.vllm_version == "0.34.0"


@pytest.mark.parametrize(
    ("image", "version", "why"),
    [
        ("vllm/vllm-openai:v0.34.0", "0.34.0", "vllm/vllm-openai:v0.34.0"),
        ("vllm/vllm-openai:latest", None, "names no vLLM release"),
        ("vllm/vllm-openai", None, "has no tag"),
    ],
)
def test_the_version_of_a_compose_image(tmp_path, image, version, why):
    text = f"services:\n  vllm:\n    image: {image}\n    command: [--model, Qwen/Qwen3-8B]\n    environment:\n      - VLLM_BATCH_INVARIANT=1\n"
    cfg = read_serving_config(write(tmp_path, "compose.yaml", text))
    assert cfg.vllm_version == version and why in cfg.vllm_version_source
    assert cfg.environment == {"VLLM_BATCH_INVARIANT": "1"}


def test_the_version_and_env_of_a_kubernetes_container(tmp_path):
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: v\n        image: vllm/vllm-openai:v0.34.0\n"
        "        args: [--model, Qwen/Qwen3-8B]\n        env:\n        - {name: VLLM_USE_V2_MODEL_RUNNER, value: '1'}\n"
    )
    cfg = read_serving_config(write(tmp_path, "k.yaml", text))
    assert cfg.vllm_version == "0.34.0" and cfg.environment == {"VLLM_USE_V2_MODEL_RUNNER": "1"}


# --------------------------------------------------------------------------- annotations


def test_a_setting_in_a_config_yaml_is_annotated_at_that_file_and_line(tmp_path):
    write(
        tmp_path,
        "vllm-config.yaml",
        "model: Qwen/Qwen3-8B\nport: 8000\nspeculative-config:\n  method: draft_model\n  model: Qwen/Qwen3-0.6B\n"
        "  rejection_sample_method: fly\n  num_speculative_tokens: 8\n",
    )
    p = write(tmp_path, "serve-config.sh", "#!/bin/sh\nvllm serve --config vllm-config.yaml\n")
    f = next(f for f in lint(p).findings if f.rule == "lossy-verification")
    assert (f.file, f.line) == (str(tmp_path / "vllm-config.yaml"), 6)
    out = CliRunner().invoke(cli, ["lint", "--format", "github", str(p)]).stdout
    assert f"file={tmp_path / 'vllm-config.yaml'},line=6,title=qualgate lossy-verification" in out


# --------------------------------------------------------------------------- bounds


def bounded(path, match):
    """Exit 3 naming the limit, within 5 s and 1 GB."""
    t = time.process_time()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = CliRunner().invoke(cli, ["lint", str(path)])
    assert r.exit_code == 3, r.output
    assert match in r.stderr
    assert time.process_time() - t < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # KiB


@pytest.mark.slow
def test_sc_with_100000_nested_arrays_exits_3(tmp_path):
    p = write(tmp_path, "s.sh", "vllm serve Qwen/Qwen3-8B -sc '" + "[" * 100_000 + "]" * 100_000 + "'\n")
    bounded(p, "nested deeper than 64 levels")


@pytest.mark.slow
def test_a_dotted_key_of_50000_levels_exits_3(tmp_path):
    p = write(tmp_path, "s.sh", "vllm serve Qwen/Qwen3-8B --speculative-config" + ".a" * 50_000 + " 1\n")
    bounded(p, "more than 16 levels")


def test_kubernetes_env_doubling_33_deep_exits_3(tmp_path):
    env = "        - {name: V0, value: x}\n" + "".join(
        f"        - {{name: V{i}, value: '$(V{i - 1})$(V{i - 1})'}}\n" for i in range(1, 34)
    )
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n      containers:\n      - name: v\n"
        "        image: vllm/vllm-openai:v0.34.0\n        args: [--model, Qwen/Qwen3-8B, --served-model-name, $(V33)]\n"
        "        env:\n" + env
    )
    bounded(write(tmp_path, "k.yaml", text), "longer than 65,536 characters")


def test_compose_with_nine_levels_of_aliases_exits_3(tmp_path):
    lines = ["x-a0: &a0 [vllm, vllm, vllm, vllm, vllm, vllm, vllm, vllm, vllm, vllm]"]
    lines += [f"x-a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    lines += [
        "services:",
        "  vllm:",
        "    image: vllm/vllm-openai:v0.34.0",
        "    command: [--model, Qwen/Qwen3-8B]",
        "    labels: *a8",
    ]
    bounded(write(tmp_path, "compose.yaml", "\n".join(lines) + "\n"), "once its aliases are expanded")


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("k", ["8.", "８"])
def test_a_number_vllm_refuses_is_refused(tmp_path, k):
    spec = FLY.replace('"num_speculative_tokens": 8', f'"num_speculative_tokens": "{k}"')
    p = write(tmp_path, "s.sh", f"vllm serve Qwen/Qwen3-8B -sc '{spec}'\n")
    assert any(f.rule == "vllm-rejects" for f in lint(p).findings)


def test_the_integer_spellings_match_pydantic():
    pydantic = pytest.importorskip("pydantic")  # the reference: vLLM's SpeculativeConfig is a pydantic dataclass
    from qualgate.vllm033.speculative import _lax

    for text in ["8", "8.", "８", "8.0", " 8 ", "8_0", "_8", "8_", "8__0", "1_0.0", "-8", "8e0", "+8", "0x8", "٨"]:
        try:
            want = pydantic.TypeAdapter(int).validate_python(text)
        except pydantic.ValidationError:
            want = None
        try:
            got = _lax("k", "int", text)
        except ValueError:
            got = None
        assert got == want, text


# --------------------------------------------------------------------------- Kubernetes, charts, stdin


def test_a_server_in_a_sidecar_init_container_is_read(tmp_path):
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n  - name: side\n"
        "    restartPolicy: Always\n    image: vllm/vllm-openai:v0.34.0\n"
        f"    args: [--model, Qwen/Qwen3-8B, --speculative-config, '{FLY}']\n"
        "  containers:\n  - name: app\n    image: busybox\n    command: [sleep, infinity]\n"
    )
    assert read_serving_config(write(tmp_path, "p.yaml", text)).speculative["rejection_sample_method"] == "fly"


def test_a_kustomize_base_is_refused_with_render_it_first(tmp_path):
    write(tmp_path, "base/kustomization.yaml", "resources: [deployment.yaml]\n")
    p = write(tmp_path, "base/deployment.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n")
    refused(p, "kubectl kustomize DIR \\| qualgate check -")
    r = CliRunner().invoke(cli, ["lint", str(tmp_path / "base")])
    assert r.exit_code == 3 and "render it first" in r.stderr


def test_a_helm_chart_is_refused_with_render_it_first(tmp_path):
    write(tmp_path, "chart/Chart.yaml", "name: c\n")
    p = write(tmp_path, "chart/templates/d.yaml", "kind: Deployment\n")
    refused(p, "helm template")


def test_stdin_is_read_by_lint_and_check(tmp_path):
    r = CliRunner().invoke(cli, ["lint", "-"], input=f"vllm serve Qwen/Qwen3-8B -sc '{FLY}'\n")
    assert r.exit_code == 1 and "lossy-verification" in r.stdout
    r = CliRunner().invoke(cli, ["check", "-", "--vllm-version", "0.33.0"], input="vllm serve Qwen/Qwen3-8B\n")
    assert r.exit_code == 0, r.output


def test_sc_with_escaped_keys_is_read_as_json_reads_it(tmp_path):
    spec = FLY.replace('"rejection_sample_method"', '"\\u0072ejection_sample_method"')
    p = write(tmp_path, "s.sh", f"vllm serve Qwen/Qwen3-8B -sc '{spec}'\n")
    assert read_serving_config(p).speculative["rejection_sample_method"] == "fly"
