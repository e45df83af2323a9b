"""Issue 46 (corpus of real deployment files): a container whose vLLM start qualgate did not
see was left out, so a lossless container beside it was allowed while it served FLy.
production-stack's ``decode-deploy.yaml`` starts vLLM through ``/bin/bash -exc SCRIPT``,
which was not read as ``bash -c``. Synthetic reproductions, the FLy in a mounted ConfigMap.
"""

import pytest
from click.testing import CliRunner

from qualgate.cli import cli

POD = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
      - name: a
        image: vllm/vllm-openai:v0.33.0
        command: ["vllm", "serve", "Qwen/Qwen3-8B"]
      - name: b
        image: vllm/vllm-openai:v0.33.0
        command: %s
        volumeMounts:
        - {name: cfg, mountPath: /etc/vllm}
      volumes:
      - name: cfg
        configMap: {name: vllm-cfg}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-cfg}
data:
  serve.yaml: |
    speculative-config:
      method: draft_model
      model: Qwen/Qwen3-0.6B
      num_speculative_tokens: 8
      rejection_sample_method: fly
"""


def check(path):
    return CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(path)])


@pytest.mark.parametrize("flags", ["-ec", "-exc", "-xc"])
def test_a_script_after_clustered_shell_options_is_read_as_bash_c(tmp_path, flags):
    command = f'["/bin/bash", "{flags}", "vllm serve Qwen/Qwen3-8B --port 8001 --config /etc/vllm/serve.yaml"]'
    (tmp_path / "d.yaml").write_text(POD % command)
    r = check(tmp_path / "d.yaml")
    assert r.exit_code == 3 and "2 vLLM servers" in r.stderr, r.output


def test_a_vllm_image_running_a_command_qualgate_cannot_read_is_refused_beside_a_read_one(tmp_path):
    (tmp_path / "d.yaml").write_text(POD % '["/bin/bash", "/etc/vllm/start.sh"]')
    r = check(tmp_path / "d.yaml")
    assert r.exit_code == 3, r.output
    assert "container b runs image 'vllm/vllm-openai:v0.33.0' with a command that starts no vLLM server" in r.stderr
