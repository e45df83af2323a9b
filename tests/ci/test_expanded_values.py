"""Issue 46 (corpus of real deployment files): a variable in an option's *value* of the vLLM
command was read as a literal, so a deployment whose environment supplies FLy was allowed.

Unquoted, a shell (or docker compose, which interpolates before it splits a string command)
splits the value into words: ``--api-key $KEY`` with ``KEY="x --speculative-config {...}"``
adds options. Quoted, a word that continues a list option (``--served-model-name m "$EXTRA"``)
can itself be an option. Synthetic reproductions of forms the corpus showed
(``benchmarks/deployment_corpus.py``: ``--port "$PORT"``, ``$TP_NUM`` in compose commands).
"""

import pytest
from click.testing import CliRunner

from qualgate.cli import cli

SERVE = "vllm serve Qwen/Qwen3-8B"
K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
      - name: v
        image: vllm/vllm-openai:v0.33.0
        command: ["sh", "-c", "%s"]
"""
COMPOSE = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    command: %s\n"


def check(path):
    return CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(path)])


@pytest.mark.parametrize(
    "name, text, token, line",
    [
        ("unquoted.sh", f"{SERVE} --api-key $KEY\n", "$KEY", 1),
        ("braces.sh", f"{SERVE} --served-model-name q ${{EXTRA}}\n", "${EXTRA}", 1),
        ("quoted-list.sh", f'{SERVE} --served-model-name q "$EXTRA"\n', "$EXTRA", 1),
        ("backquote.sh", f"{SERVE} --api-key `cat key`\n", "`cat key`", 1),
        ("sh-c.yaml", K8S % f"{SERVE} --served-model-name q $EXTRA", "$EXTRA", 10),
        ("string.yaml", COMPOSE % "--model Qwen/Qwen3-8B --api-key ${KEY}", "${KEY}", 4),
        ("list.yaml", COMPOSE % '["--model", "Qwen/Qwen3-8B", "--served-model-name", "q", "$EXTRA"]', "$EXTRA", 4),
    ],
)
def test_a_variable_in_an_option_value_is_refused_not_read_as_a_literal(tmp_path, name, text, token, line):
    (tmp_path / name).write_text(text)
    r = check(tmp_path / name)
    assert r.exit_code == 3, r.output
    assert f"{name}:{line}: field {token!r}: {token!r} is expanded at run time" in r.stderr, r.stderr


def test_the_same_values_written_out_are_allowed(tmp_path):
    (tmp_path / "serve.sh").write_text(f"{SERVE} --api-key k --served-model-name q r\n")
    r = check(tmp_path / "serve.sh")
    assert r.exit_code == 0 and "allowed (target, lossless" in r.output
