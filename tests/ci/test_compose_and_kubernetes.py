"""Issue 46: docker compose read as ``docker compose`` merges it (override files, ``extends``),
Kubernetes workloads that run vLLM through an operator (KubeRay, KServe) and ConfigMaps by
namespace. Each test writes a small real-world shaped file set in ``tmp_path``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from qualgate.ci import read_serving_config
from qualgate.cli import cli
from qualgate.errors import DataError

FLY = '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}'
IMAGE = "vllm/vllm-openai:v0.33.0"
BASE = f"services:\n  vllm:\n    image: {IMAGE}\n    ports: ['8000:8000']\n    command: [--model, Qwen/Qwen3-8B]\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def refused(path, match, **kw):
    with pytest.raises(DataError, match=match):
        read_serving_config(path, **kw)


def fly(cfg) -> bool:
    return (cfg.speculative or {}).get("rejection_sample_method") == "fly"


# --------------------------------------------------------------------------- compose override files


@pytest.mark.parametrize(
    ("base", "override"),
    [
        ("compose.yaml", "compose.override.yaml"),
        ("compose.yml", "compose.override.yml"),
        ("docker-compose.yml", "docker-compose.override.yml"),
        ("docker-compose.yaml", "docker-compose.override.yaml"),
    ],
)
def test_fly_added_in_the_override_file_is_read_as_docker_compose_merges_it(tmp_path, base, override):
    p = write(tmp_path, base, BASE)
    o = write(tmp_path, override, f"services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n")
    cfg = read_serving_config(p)
    assert fly(cfg)
    assert cfg.file_of("speculative_config") == str(o)  # annotated in the override, at its line
    assert cfg.line_of("speculative_config") == 3
    r = CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(p)])
    assert r.exit_code == 1 and "refused (fly, lossy" in r.output, r.output


def test_the_override_merges_environment_by_name_and_volumes_by_target(tmp_path):
    write(tmp_path, "lossless/serve.yaml", "max-num-seqs: 4\n")
    write(tmp_path, "fly/serve.yaml", f"speculative-config: {FLY}\n")
    p = write(
        tmp_path,
        "compose.yaml",
        f"services:\n  vllm:\n    image: {IMAGE}\n    command: [--model, Qwen/Qwen3-8B, --config, /cfg/serve.yaml]\n"
        "    volumes: [./lossless:/cfg, ./cache:/root/.cache]\n"
        "    environment: [VLLM_BATCH_INVARIANT=1]\n",
    )
    write(
        tmp_path,
        "compose.override.yaml",
        "services:\n  vllm:\n    volumes: [./fly:/cfg]\n    environment:\n      VLLM_USE_V2_MODEL_RUNNER: '1'\n",
    )
    cfg = read_serving_config(p)
    assert fly(cfg)
    assert cfg.environment == {"VLLM_BATCH_INVARIANT": "1", "VLLM_USE_V2_MODEL_RUNNER": "1"}


def test_the_first_override_name_docker_compose_looks_for_is_the_one_merged(tmp_path):
    p = write(tmp_path, "compose.yaml", BASE)
    write(
        tmp_path, "compose.override.yml", f"services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n"
    )
    write(tmp_path, "compose.override.yaml", "services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B]\n")
    assert fly(read_serving_config(p))  # compose-go DefaultOverrideFileNames: .yml before .yaml


def test_a_second_vllm_service_in_the_override_is_two_servers(tmp_path):
    p = write(tmp_path, "compose.yaml", BASE)
    write(
        tmp_path,
        "compose.override.yaml",
        f"services:\n  fly:\n    image: {IMAGE}\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n",
    )
    refused(p, "2 vLLM servers")


def test_a_file_not_found_by_default_is_read_without_the_override(tmp_path):
    # `docker compose -f compose.prod.yaml` reads no override file (compose-go cli/options.go)
    p = write(tmp_path, "compose.prod.yaml", BASE)
    write(
        tmp_path, "compose.override.yaml", f"services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n"
    )
    assert read_serving_config(p).speculative is None
    # compose.yaml beside docker-compose.yml wins the default lookup: docker-compose.yml is `-f` only
    q = write(tmp_path, "docker-compose.yml", BASE)
    write(tmp_path, "compose.yaml", BASE)
    assert read_serving_config(q).speculative is None
    assert fly(read_serving_config(tmp_path / "compose.yaml"))


def test_an_override_file_given_alone_is_refused(tmp_path):
    write(tmp_path, "compose.yaml", BASE)
    o = write(tmp_path, "compose.override.yaml", "services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B]\n")
    refused(o, "override file")


def test_reset_and_override_tags_in_an_override_are_refused(tmp_path):
    p = write(tmp_path, "compose.yaml", BASE)
    write(tmp_path, "compose.override.yaml", "services:\n  vllm:\n    ports: !reset []\n")
    refused(p, r"!reset.*docker compose config \| qualgate check -")


def test_compose_file_set_by_dot_env_is_refused(tmp_path):
    p = write(tmp_path, "compose.yaml", BASE)
    write(tmp_path, ".env", "COMPOSE_FILE=compose.yaml:compose.fly.yaml\n")
    refused(p, "COMPOSE_FILE")


def test_include_is_refused_with_the_way_forward(tmp_path):
    p = write(tmp_path, "compose.yaml", "include: [fly.yaml]\n" + BASE)
    refused(p, r"include.*docker compose config \| qualgate check -")


# --------------------------------------------------------------------------- compose extends


def test_fly_in_the_entrypoint_of_an_extended_service_in_another_file_is_read(tmp_path):
    write(
        tmp_path,
        "common.yaml",
        f"services:\n  vllm-base:\n    entrypoint: [vllm, serve, -sc, '{FLY}']\n    ipc: host\n",
    )
    p = write(
        tmp_path,
        "compose.yaml",
        f"services:\n  vllm:\n    extends:\n      file: common.yaml\n      service: vllm-base\n"
        f"    image: {IMAGE}\n    command: [--model, Qwen/Qwen3-8B]\n",
    )
    cfg = read_serving_config(p)
    assert fly(cfg) and cfg.model == "Qwen/Qwen3-8B"
    assert cfg.file_of("speculative_config") == str(tmp_path / "common.yaml")


def test_extends_within_the_file_merges_volumes(tmp_path):
    write(tmp_path, "fly/serve.yaml", f"speculative-config: {FLY}\n")
    p = write(
        tmp_path,
        "compose.yaml",
        "services:\n  common:\n    volumes: [./fly:/cfg]\n    environment: {HF_HOME: /cache}\n"
        f"  vllm:\n    extends: common\n    image: {IMAGE}\n"
        "    command: [--model, Qwen/Qwen3-8B, --config, /cfg/serve.yaml]\n",
    )
    assert fly(read_serving_config(p))


def test_extends_from_another_directory_resolves_its_binds_from_there(tmp_path):
    write(tmp_path, "base/fly/serve.yaml", f"speculative-config: {FLY}\n")
    write(tmp_path, "app/fly/serve.yaml", "max-num-seqs: 4\n")  # the decoy beside the main file
    write(tmp_path, "base/common.yaml", "services:\n  common:\n    volumes: [./fly:/cfg]\n")
    p = write(
        tmp_path,
        "app/compose.yaml",
        f"services:\n  vllm:\n    extends: {{file: ../base/common.yaml, service: common}}\n    image: {IMAGE}\n"
        "    command: [--model, Qwen/Qwen3-8B, --config, /cfg/serve.yaml]\n",
    )
    assert fly(read_serving_config(p))


@pytest.mark.parametrize(
    ("extends", "match"),
    [
        ("{file: missing.yaml, service: common}", "missing.yaml"),
        ("{file: /etc/compose/common.yaml, service: common}", "absolute"),
        ("{file: '${BASE}/common.yaml', service: common}", r"\$\{BASE\}"),
        ("{service: nowhere}", "no service nowhere"),
        ("vllm", "cycle"),
    ],
)
def test_an_extends_qualgate_cannot_resolve_is_refused(tmp_path, extends, match):
    p = write(tmp_path, "compose.yaml", BASE.replace("    ports:", f"    extends: {extends}\n    ports:"))
    refused(p, match)


def test_an_extends_chain_longer_than_the_limit_is_refused(tmp_path):
    services = "".join(f"  s{i}:\n    extends: s{i + 1}\n" for i in range(80)) + "  s80:\n    ipc: host\n"
    p = write(tmp_path, "compose.yaml", BASE + services)
    refused(p, "more than 64")


# --------------------------------------------------------------------------- Kubernetes: KubeRay and KServe


DEPLOYMENT = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen, namespace: serving}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: {IMAGE}
        args: [--model, Qwen/Qwen3-8B]
"""


def ray(kind, container, annotation=True):
    meta = "  annotations: {ray.io/overwrite-container-cmd: 'true'}\n" if annotation else ""
    cluster = (
        "  headGroupSpec:\n    rayStartParams: {dashboard-host: 0.0.0.0}\n    template:\n      spec:\n"
        "        containers:\n" + container
    )
    spec = {
        "RayCluster": cluster,
        "RayService": "  rayClusterConfig:\n" + "".join("  " + line + "\n" for line in cluster.splitlines()),
        "RayJob": "  entrypoint: python train.py\n  rayClusterSpec:\n"
        + "".join("  " + line + "\n" for line in cluster.splitlines()),
    }[kind]
    return f"apiVersion: ray.io/v1\nkind: {kind}\nmetadata:\n  name: llm\n{meta}spec:\n{spec}"


RAY_VLLM = (
    f"        - name: ray-head\n          image: {IMAGE}\n          command: [/bin/bash, -lc, --]\n"
    f"          args:\n          - |\n            ray start --head && vllm serve Qwen/Qwen3-8B -sc '{FLY}'\n"
)


@pytest.mark.parametrize("kind", ["RayCluster", "RayService", "RayJob"])
def test_a_vllm_start_in_a_ray_head_is_read(tmp_path, kind):
    assert fly(read_serving_config(write(tmp_path, "ray.yaml", ray(kind, RAY_VLLM))))


def test_a_ray_head_beside_a_lossless_deployment_is_two_servers(tmp_path):
    head = RAY_VLLM.replace(f" -sc '{FLY}'", "")  # a lossless second server: no speculative word in the file
    refused(write(tmp_path, "k.yaml", DEPLOYMENT + "---\n" + ray("RayCluster", head)), "2 vLLM servers")


def test_a_ray_container_whose_command_kuberay_builds_is_refused(tmp_path):
    p = write(tmp_path, "k.yaml", DEPLOYMENT + "---\n" + ray("RayCluster", RAY_VLLM, annotation=False))
    refused(p, "overwrite-container-cmd")


def test_a_ray_serve_llm_application_is_refused(tmp_path):
    serve = (
        "  serveConfigV2: |\n    applications:\n    - name: llm\n      import_path: ray.serve.llm:build_openai_app\n"
        "      args:\n        llm_configs:\n        - model_loading_config: {model_id: Qwen/Qwen3-8B}\n"
        "          engine_kwargs: {tensor_parallel_size: 1}\n"
    )
    text = ray("RayService", "        - name: ray-head\n          image: rayproject/ray-llm:2.46.0\n")
    text = text.replace("spec:\n  rayClusterConfig", "spec:\n" + serve + "  rayClusterConfig", 1)
    refused(write(tmp_path, "k.yaml", DEPLOYMENT + "---\n" + text), "serveConfigV2")


def test_an_inference_service_beside_a_lossless_deployment_is_refused(tmp_path):
    isvc = (
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: qwen-fly}\nspec:\n"
        "  predictor:\n    model:\n      modelFormat: {name: huggingface}\n      runtime: vllm-fly\n"
        "      storageUri: hf://Qwen/Qwen3-8B\n"
    )
    p = write(tmp_path, "k.yaml", DEPLOYMENT + "---\n" + isvc)
    refused(p, "InferenceService qwen-fly")
    r = CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(p)])
    assert r.exit_code == 3, r.output


def test_a_custom_predictor_container_of_an_inference_service_is_read(tmp_path):
    isvc = (
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: qwen}\nspec:\n"
        "  predictor:\n    containers:\n    - name: kserve-container\n"
        f"      image: {IMAGE}\n      args: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n"
    )
    assert fly(read_serving_config(write(tmp_path, "k.yaml", isvc)))


# --------------------------------------------------------------------------- ConfigMaps by namespace


def configmap(name, namespace, text):
    ns = f", namespace: {namespace}" if namespace else ""
    body = "".join("      " + line + "\n" for line in text.splitlines())
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}{ns}}}\ndata:\n  serve.yaml: |\n{body}"


def mounted(namespace):
    ns = f", namespace: {namespace}" if namespace else ""
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen{ns}}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: {IMAGE}
        args: [--model, Qwen/Qwen3-8B, --config, /cfg/serve.yaml]
        volumeMounts: [{{name: cfg, mountPath: /cfg}}]
      volumes:
      - {{name: cfg, configMap: {{name: serve}}}}
"""


def test_a_configmap_is_read_from_the_workloads_namespace(tmp_path):
    text = "---\n".join(
        [
            mounted("a"),
            configmap("serve", "a", f"speculative-config: {FLY}"),
            configmap("serve", "b", "max-num-seqs: 4"),
        ]
    )
    assert fly(read_serving_config(write(tmp_path, "k.yaml", text)))


def test_a_configmap_from_manifest_in_another_namespace_does_not_answer(tmp_path):
    m = write(tmp_path, "other.yaml", configmap("serve", "b", "max-num-seqs: 4"))
    p = write(tmp_path, "k.yaml", mounted("a") + "---\n" + configmap("serve", "a", f"speculative-config: {FLY}"))
    assert fly(read_serving_config(p, manifests=(m,)))
    q = write(tmp_path, "q.yaml", mounted("a"))
    refused(q, "/cfg is mounted from a volume", manifests=(m,))  # namespace a's is not given


@pytest.mark.parametrize(("workload", "cm"), [("a", None), (None, "a")])
def test_a_configmap_whose_namespace_cannot_be_told_is_refused(tmp_path, workload, cm):
    text = mounted(workload) + "---\n" + configmap("serve", cm, "max-num-seqs: 4")
    refused(write(tmp_path, "k.yaml", text), "namespace")


def test_two_configmaps_of_one_name_and_namespace_are_refused(tmp_path):
    m = write(tmp_path, "other.yaml", configmap("serve", None, f"speculative-config: {FLY}"))
    p = write(tmp_path, "k.yaml", mounted(None) + "---\n" + configmap("serve", None, "max-num-seqs: 4"))
    refused(p, "ConfigMap serve.*twice", manifests=(m,))
    assert read_serving_config(p).speculative is None  # without the second one: read


def test_docker_compose_config_output_on_stdin_is_read_as_merged(tmp_path, monkeypatch):
    # `docker compose config | qualgate check -`: compose merged it already; no override is looked up
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path, "compose.override.yaml", f"services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n"
    )
    merged = "name: demo\n" + BASE
    r = CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", "-"], input=merged)
    assert r.exit_code == 0 and "allowed (target, lossless" in r.output, r.output


def test_lint_annotates_fly_at_the_override_files_line(tmp_path):
    p = write(tmp_path, "compose.yaml", BASE)
    o = write(
        tmp_path, "compose.override.yaml", f"services:\n  vllm:\n    command: [--model, Qwen/Qwen3-8B, -sc, '{FLY}']\n"
    )
    out = CliRunner().invoke(cli, ["lint", "--format", "github", str(p)]).stdout
    assert f"file={o},line=3,title=qualgate lossy-verification" in out, out
