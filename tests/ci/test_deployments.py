"""Issue 35: deployment files read as the vLLM command they start, and files that start none.

Real excerpts (their headers name the repository, path and commit) from vllm-project/aibrix,
vllm-project/production-stack and kserve/kserve, with constructed FLy variants; the other
files of ``data/deploy`` are constructed and say so in their headers.
"""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from qualgate.ci import audit_log, lint, read_serving_config
from qualgate.ci import check as _check
from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.vllm033.deployments import NoServeCommand
from qualgate.vllm033.speculative import normalise_speculative, resolve_speculative


def check(*args, **kwargs):
    """:func:`qualgate.ci.check` of a deployment on vLLM 0.33.0, stated as ``--vllm-version``
    would (these configs' files do not state their release)."""
    return _check(*args, vllm_version="0.33.0", **kwargs)


DATA = Path(__file__).parent / "data"
DEPLOY = DATA / "deploy"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def qcheck(name, *opts):
    return run("check", "--vllm-version", "0.33.0", *opts, DEPLOY / name)


# ------------------------------------------------------------------ real files, read as vLLM reads them


def test_a_real_aibrix_deployment_is_read_from_its_container_command():
    cfg = read_serving_config(DEPLOY / "aibrix-model.yaml")
    assert (cfg.format, cfg.model, cfg.speculative) == ("kubernetes", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", None)
    assert cfg.lines["model"] == 33  # the line of the model word in the real file


def test_real_production_stack_values_are_read_in_the_charts_order():
    cfg = read_serving_config(DEPLOY / "production-stack-values-02.yaml")
    assert (cfg.format, cfg.model, cfg.options["dtype"]) == (
        "helm-values",
        "meta-llama/Llama-3.1-8B-Instruct",
        "bfloat16",
    )


def test_the_real_vllmruntime_sample_is_read_as_the_operator_builds_its_args():
    cfg = read_serving_config(DEPLOY / "vllmruntime-sample.yaml")
    assert (cfg.format, cfg.model, cfg.speculative) == ("vllm-runtime", "meta-llama/Llama-3.1-8B-Instruct", None)
    assert cfg.options["tensor_parallel_size"] == 1 and cfg.options["max_num_seqs"] == 32


def test_the_real_kserve_runtime_is_read_as_the_api_server_module():
    cfg = read_serving_config(DEPLOY / "kserve-vllmserver.yaml")
    assert (cfg.model, cfg.speculative) == ("/mnt/models", None)


def test_real_semantic_router_manifests_are_read_from_their_sh_c_scripts():
    # vLlama3.yaml: `--served-model-name llama3-8b meta-llama/...` takes both words (nargs="+")
    cfg = read_serving_config(DEPLOY / "semantic-router-vllama3.yaml")
    assert (cfg.model, cfg.lines["model"], cfg.options) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        48,
        {"max_num_batched_tokens": 1024},
    )
    cfg = read_serving_config(DEPLOY / "semantic-router-llmisvc.yaml")  # a kserve LLMInferenceService
    assert (cfg.model, cfg.speculative, cfg.lines["model"]) == ("/mnt/models", None, 30)


def test_the_real_aibrix_compose_file_is_refused_for_its_interpolated_model():
    # compose fills ${MODEL_NAME:-...} from the host environment: qualgate cannot know it
    r = run("check", "--vllm-version", "0.33.0", DEPLOY / "aibrix-compose.yml")
    assert r.exit_code == 3 and "${MODEL_NAME" in r.stderr


@pytest.mark.parametrize(
    "name, extractor",
    [
        ("production-stack-values-fly.yaml", "extraArgs"),
        ("vllmruntime-fly.yaml", "spec.vllmConfig.extraArgs"),
        ("kserve-vllmserver-fly.yaml", "dotted args"),
        ("aibrix-fly-env.yaml", "$(VAR) from a ConfigMap in the file"),
        ("semantic-router-llmisvc-fly.yaml", "a sh -c script"),
    ],
)
def test_fly_variants_of_real_files_are_resolved_as_lossy(name, extractor):
    r = qcheck(name)
    assert r.exit_code == 1 and "refused (fly, lossy" in r.output, f"{extractor}: {r.output}"


# ------------------------------------------------------------------ item 1: FLy in another file


def test_fly_in_an_env_var_from_a_configmap_not_given_is_refused_naming_it():
    r = qcheck("aibrix-fly-env-elsewhere.yaml")
    assert r.exit_code == 3 and "$(SPEC_CONFIG)" in r.stderr and "vllm-spec" in r.stderr


def test_the_configmap_given_with_manifest_resolves_the_env_var():
    r = qcheck("aibrix-fly-env-elsewhere.yaml", "--manifest", DEPLOY / "spec-configmap.yaml")
    assert r.exit_code == 1 and "refused (fly, lossy" in r.output
    same = qcheck("aibrix-fly-env.yaml")
    assert re.search(r"config id (cfg-\w+)", r.output)[1] == re.search(r"config id (cfg-\w+)", same.output)[1]


def test_a_config_file_from_a_configmap_volume_is_followed_only_when_given():
    r = qcheck("aibrix-config-configmap.yaml")
    assert r.exit_code == 3 and "--config" in r.stderr
    r = qcheck("aibrix-config-configmap.yaml", "--manifest", DEPLOY / "config-configmap.yaml")
    assert r.exit_code == 1 and "refused (fly, lossy" in r.output


def test_dollar_dollar_is_a_literal_dollar_and_an_undefined_reference_stays_as_written(tmp_path):
    from qualgate.vllm033.deployments import _expand

    assert _expand("$$(X)-$(Y)", {"Y": "1"}, {}, None, path="p", field="f") == "$(X)-1"
    assert _expand("$(Z)", {}, {}, None, path="p", field="f") == "$(Z)"
    with pytest.raises(DataError, match="Secret"):
        _expand("$(Z)", {}, {}, "a Secret", path="p", field="f")


def test_a_secret_env_var_in_the_args_is_refused(tmp_path):
    text = (DEPLOY / "aibrix-fly-env.yaml").read_text().split("---")[0]
    text = text.replace("configMapKeyRef:", "secretKeyRef:")
    (tmp_path / "d.yaml").write_text(text)
    r = run("check", "--vllm-version", "0.33.0", tmp_path / "d.yaml")
    assert r.exit_code == 3 and "secretKeyRef" in r.stderr


# ------------------------------------------------------------------ item 2: no serve command


@pytest.mark.parametrize(
    "name",
    [
        "docker-pull.sh",
        "helm-values-generic.yaml",
        "aibrix-entrypoint-only.yaml",
        "spec-configmap.yaml",
        "kserve-isvc.yaml",
    ],
)
def test_a_file_that_shows_no_serve_command_is_exit_3(name):
    r = qcheck(name)
    assert r.exit_code == 3 and f"no vLLM serving command found in {DEPLOY / name}" in r.stderr, r.output
    r = run("lint", DEPLOY / name)
    assert r.exit_code == 3 and "no vLLM serving command found" in r.stderr


def test_an_image_with_only_arguments_needs_its_entrypoint_stated(tmp_path):
    text = (DEPLOY / "aibrix-model.yaml").read_text()
    text = text.replace("image: vllm/vllm-openai:v0.11.0", "image: example.com/vllm-custom:1")
    text = text.replace("        - command:\n            - vllm\n            - serve\n", "        - args:\n")
    (tmp_path / "d.yaml").write_text(text)
    r = run("check", "--vllm-version", "0.33.0", tmp_path / "d.yaml")
    assert r.exit_code == 3 and "--assume-entrypoint" in r.stderr
    r = run("check", "--vllm-version", "0.33.0", "--assume-entrypoint", "serve", tmp_path / "d.yaml")
    assert r.exit_code == 0 and "allowed (target, lossless" in r.output


def test_a_compose_command_on_an_image_of_unknown_entrypoint_needs_it_stated(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "services:\n  vllm:\n    image: lmcache/vllm-openai:latest\n    command: [vllm, serve, Qwen/Qwen3-8B]\n"
    )
    r = run("check", "--vllm-version", "0.33.0", tmp_path / "c.yaml")
    assert r.exit_code == 3 and "--assume-entrypoint" in r.stderr
    r = run("check", "--vllm-version", "0.33.0", "--assume-entrypoint", "none", tmp_path / "c.yaml")
    assert r.exit_code == 0 and "allowed (target, lossless" in r.output


def test_a_serving_config_passed_directly_without_a_model_is_not_lossless():
    from qualgate.vllm033.serving_config import ServingConfig

    with pytest.raises(NoServeCommand):
        check(ServingConfig(path="x.yaml", format="command-line", model=None, speculative=None))


# ------------------------------------------------------------------ item 3: Gemma 4 assistant drafters


def test_a_lossy_config_whose_method_depends_on_the_drafters_config_json_is_refused():
    r = qcheck("gemma4-assistant.sh")
    assert r.exit_code == 3 and "--drafter-model-type" in r.stderr
    assert lint(DEPLOY / "gemma4-assistant.sh").config_id is None


def test_a_gemma4_assistant_drafter_is_identified_as_mtp(tmp_path):
    # vllm/config/speculative.py:1106-1116 (gemma4_assistant -> gemma4_mtp), 1469-1473 (-> mtp)
    got = check(DEPLOY / "gemma4-assistant.sh", drafter_model_type="gemma4_assistant")
    text = (DEPLOY / "gemma4-assistant.sh").read_text()
    for method, name in (("mtp", "mtp.sh"), ("draft_model", "dm.sh")):
        (tmp_path / name).write_text(text.replace('{"model"', f'{{"method": "{method}", "model"'))
    assert got.config_id == check(tmp_path / "mtp.sh").config_id
    assert got.config_id != check(tmp_path / "dm.sh").config_id
    assert (
        check(DEPLOY / "gemma4-assistant.sh", drafter_model_type="qwen3").config_id
        == check(tmp_path / "dm.sh").config_id
    )
    assert lint(DEPLOY / "gemma4-assistant.sh", drafter_model_type="gemma4_assistant").config_id == got.config_id
    # a stated draft_model is switched too (vllm/config/speculative.py:1436-1473 apply to any such method)
    assert check(tmp_path / "dm.sh", drafter_model_type="gemma4_assistant").config_id == got.config_id


def test_normalise_applies_the_drafter_model_type():
    spec = {"model": "google/gemma-4-31b-it-assistant", "num_speculative_tokens": 4}
    assert normalise_speculative(spec)["method"] == "draft_model"
    assert normalise_speculative(spec, drafter_model_type="gemma4_unified_assistant")["method"] == "mtp"
    assert normalise_speculative(spec, drafter_model_type="deepseek_mtp")["method"] == "mtp"
    eagle = {**spec, "method": "eagle3"}  # vLLM keeps eagle/eagle3/dflash/dspark as stated
    assert normalise_speculative(eagle, drafter_model_type="gemma4_assistant")["method"] == "eagle3"


# ------------------------------------------------------------------ item 4: --attention-backend


def test_an_attention_backend_vllm_does_not_know_is_refused():
    r = qcheck("attention-backend.sh")
    assert r.exit_code == 3 and "B12X_MLA_SPARSE" in r.stderr and "AttentionBackendEnum" in r.stderr
    with pytest.raises(ValueError, match="AttentionBackendEnum"):
        normalise_speculative({"method": "ngram", "num_speculative_tokens": 2, "attention_backend": "B12X_MLA_SPARSE"})
    ok = {"method": "ngram", "num_speculative_tokens": 2, "attention_backend": "flash_attn"}
    assert normalise_speculative(ok)["attention_backend"] == "flash_attn"


# ------------------------------------------------------------------ item 5: --config inside a container


def test_a_config_file_inside_a_container_is_read_through_its_mount_not_from_the_host():
    # the host's serve.yaml next to the files is lossless; the container's is configs/fly.yaml
    for name in ("docker-config-mount.sh", "compose-config-mount.yaml"):
        r = qcheck(name)
        assert r.exit_code == 1 and "refused (fly, lossy" in r.output, f"{name}: {r.output}"
    assert read_serving_config(DEPLOY / "serve.yaml").speculative is None


def test_a_relative_config_inside_a_container_without_a_working_directory_is_refused():
    r = qcheck("compose-no-workdir.yaml")
    assert r.exit_code == 3 and "--config" in r.stderr and "working directory" in r.stderr


@pytest.mark.parametrize(
    "mount, why",
    [
        ("-v hf-cache:/app", "mounted from a volume or host path"),  # a named volume
        ("-v /srv/configs:/app", "mounted from a volume or host path"),  # an absolute host path
        ("-v ./configs:/data", "in no mount"),  # mounted elsewhere
    ],
)
def test_a_config_file_in_no_readable_mount_is_refused(tmp_path, mount, why):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "fly.yaml").write_text((DEPLOY / "configs" / "fly.yaml").read_text())
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "serve.yaml").write_text("model: Qwen/Qwen3-8B\n")
    (tmp_path / "s.sh").write_text(f"docker run {mount} vllm/vllm-openai:v0.33.0 --config /app/serve.yaml\n")
    r = run("check", "--vllm-version", "0.33.0", tmp_path / "s.sh")
    assert r.exit_code == 3 and why in r.stderr and "--config" in r.stderr


# ------------------------------------------------------------------ item 6: one reader, one table


@pytest.mark.parametrize("name", ["ngram-lookup-min-above-max.sh", "synthetic-key-standard.yaml"])
def test_check_refuses_what_lint_says_vllm_refuses(name):
    r = run("lint", DEPLOY / name)
    assert r.exit_code == 1 and "[vllm-rejects]" in r.output
    r = qcheck(name)
    assert r.exit_code == 3 and "vLLM 0.33 refuses this config" in r.stderr


def test_prompt_lookup_follows_vllms_defaults():
    base = {"method": "ngram", "num_speculative_tokens": 2}
    assert normalise_speculative({**base, "prompt_lookup_max": 2})["method"] == "ngram"  # min takes max's value
    with pytest.raises(ValueError, match="prompt_lookup_min=5 must be <= prompt_lookup_max=2"):
        resolve_speculative({**base, "prompt_lookup_min": 5, "prompt_lookup_max": 2})


# ------------------------------------------------------------------ item 7: nargs, compose files


def test_a_multi_value_option_is_read_as_vllm_reads_it():
    r = qcheck("served-model-names.sh")
    assert r.exit_code == 0 and "allowed (target, lossless" in r.output


def test_lossless_mtp_in_a_compose_file_is_allowed():
    r = qcheck("compose-mtp.yaml")
    assert r.exit_code == 0 and "allowed (standard, lossless" in r.output, r.output
    assert read_serving_config(DEPLOY / "compose-mtp.yaml").speculative == {
        "method": "mtp",
        "num_speculative_tokens": 1,
    }


def test_a_json_config_file_is_refused_as_vllm_refuses_it_and_the_docs_say_so(tmp_path):
    # vllm/utils/argparse_utils.py:634-638: only .yaml/.yml
    (tmp_path / "c.json").write_text('{"model": "Qwen/Qwen3-8B"}')
    (tmp_path / "s.sh").write_text("vllm serve --config c.json\n")
    r = run("check", "--vllm-version", "0.33.0", tmp_path / "s.sh")
    assert r.exit_code == 3 and ".yaml/.yml" in r.stderr
    doc = (Path(__file__).parents[2] / "docs" / "ci.md").read_text()
    assert not re.search(r"--config[^\n]*(YAML or JSON|JSON or YAML|YAML/JSON)", doc)
    assert "| format |" in doc and "Helm `extraArgs`" in doc  # the format x read x refused table


# ------------------------------------------------------------------ item 8: audit-log


@pytest.mark.parametrize(
    "text", ["", "hello\nworld\n", (DATA / "fly-w2.yaml").read_text()], ids=["empty", "two-lines", "fly-config"]
)
def test_audit_log_refuses_a_file_with_no_vllm_start_up_line(tmp_path, text):
    (tmp_path / "x.log").write_text(text)
    r = run("audit-log", "--forbid-lossy", tmp_path / "x.log")
    assert r.exit_code == 3 and "no vLLM start-up line found" in r.stderr
    r = run("audit-log", "--expect", DATA / "fly-w2.yaml", tmp_path / "x.log")
    assert r.exit_code == 3
    with pytest.raises(DataError):
        audit_log(tmp_path / "x.log")
    # a real start-up is still read
    assert run("audit-log", "--forbid-lossy", DATA / "vllm-fly.log").exit_code == 1
    assert run("audit-log", "--forbid-lossy", DATA / "vllm-standard.log").exit_code == 0


# ------------------------------------------------------------------ the corpus: never lossless unseen

#: what shows a vLLM server start, looked for in the text independently of qualgate's reader
_SERVE_SIGN = re.compile(
    r"\bvllm\b[\"',\s\-]*serve\b|vllm\.entrypoints\.(openai\.api_server|cli\.main)|docker run[^\n]*vllm/vllm-openai"
    r"|image: vllm/vllm-openai[\s\S]*\n\s*(args|command):|servingEngineSpec:[\s\S]*modelURL:|kind: VLLMRuntime"
    r"|^model:|^engine:|^--model"
)
CORPUS = sorted(
    p
    for d in (DATA, DEPLOY, DEPLOY / "configs")
    for p in d.iterdir()
    if p.is_file() and p.suffix in (".yaml", ".yml", ".json", ".sh", ".args")
)


@pytest.mark.slow
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(DATA)))
def test_no_file_of_the_corpus_is_lossless_without_a_serve_command_fully_resolved(path):
    try:
        result = check(path)
    except DataError:
        return  # refused (exit 3): never lossless
    if result.lossy:
        return
    text = path.read_text()
    assert _SERVE_SIGN.search(text) or re.search(r"(?m)^\s*\"?model\"?\s*:", text), f"{path}: lossless, no serve shown"
    assert result.config.model, path
    if result.config.speculative:  # every speculative argument resolved as vLLM reads it
        assert normalise_speculative(result.config.speculative)["method"]
        assert result.method in ("standard", "block")
