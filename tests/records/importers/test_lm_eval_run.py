"""A real lm-evaluation-harness run of the shipped demo model, paired with a qualgate run.

lm-eval (``--model hf``, greedy, ``--apply_chat_template``, ``--log_samples``) runs the demo
target on a local task over the first demo questions; ``qualgate run`` runs the same model
greedily on the same questions. Paired by question id, every question has the same outcome
and the same output; the prompt hashes differ (lm-eval records the chat-template-rendered
text, qualgate the chat messages) and that difference is reported, not ignored.
"""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.demo import model_path
from qualgate.demo.task import SYSTEM_PROMPT, generate
from qualgate.records import read_records
from qualgate.records.importers import ImportOptions, load_records
from qualgate.verdict.fixed import run_gate

pytest.importorskip("lm_eval")
pytestmark = pytest.mark.slow

N = 12
TASK = """\
task: demo_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs: {{until: [], do_sample: false, max_gen_toks: 160}}
filter_list:
  - name: strict
    filter:
      - {{function: regex, regex_pattern: "The answer is (\\\\-?[0-9]+)"}}
      - {{function: take_first}}
metric_list:
  - metric: exact_match
metadata:
  version: 1.0
"""
CONFIG = """\
name: {name}
engine: reference
model: {model}
sampling: {{temperature: 0.0, max_tokens: 160}}
engine_options: {{batch_size: 16, device: cpu}}
"""
PLAN = """\
name: lm-eval-pairing
suites:
  - {{suite: demo_arithmetic, limit: {n}}}
seeds: [0]
configs: {{target: target.yaml, drafter: drafter.yaml}}
baseline: target
gate: {{policy: noninferiority, margin: 0.05}}
"""
IMPORT = dict(suite="demo_arithmetic", suite_version="1", id_field="id")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(qualgate records of the target, lm-eval output folder of the target)."""
    tmp = tmp_path_factory.mktemp("lm_eval_pairing")
    with open(tmp / "demo.jsonl", "w") as fh:
        for row in generate(n=2000, seed=0, split="test")[:N]:
            fh.write(json.dumps(row) + "\n")
    (tmp / "tasks").mkdir()
    (tmp / "tasks" / "demo_arith.yaml").write_text(TASK.format(data=tmp / "demo.jsonl"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    lm_out = tmp / "lm-eval"
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_path('target')},dtype=float32",
        "--tasks",
        "demo_arith",
        "--include_path",
        str(tmp / "tasks"),
        "--apply_chat_template",
        "--system_instruction",
        SYSTEM_PROMPT,
        "--log_samples",
        "--output_path",
        str(lm_out),
        "--device",
        "cpu",
        "--batch_size",
        "16",
    ]
    done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    for name in ("target", "drafter"):
        (tmp / f"{name}.yaml").write_text(CONFIG.format(name=f"{name}-greedy", model=model_path(name)))
    (tmp / "plan.yaml").write_text(PLAN.format(n=N))
    import torch

    torch.set_num_threads(2)
    r = CliRunner().invoke(cli, ["run", str(tmp / "plan.yaml"), "--out", str(tmp / "qg"), "--threads", "1", "-q"])
    assert r.exit_code == 4, r.output
    assert torch.get_num_threads() == 1  # qualgate run --threads
    return tmp / "qg" / "records" / "target.jsonl", lm_out


def test_the_demo_prompt_is_what_lm_eval_sent(runs):
    _, lm_out = runs
    (samples,) = lm_out.rglob("samples_demo_arith_*.jsonl")
    first = json.loads(samples.read_text().splitlines()[0])
    question = generate(n=1, seed=0, split="test")[0]["question"]
    # the demo chat template: <|role|>content, then the generation prompt
    assert first["arguments"]["gen_args_0"]["arg_0"] == f"<|system|>{SYSTEM_PROMPT}<|user|>{question}<|assistant|>"


def test_qualgate_and_lm_eval_runs_pair_question_by_question_with_identical_outcomes(runs):
    qualgate_target, lm_out = runs
    base = read_records(qualgate_target)
    cand = load_records(lm_out, options=ImportOptions(**IMPORT))
    assert len(base) == len(cand) == N
    by_key = {r.key: r for r in cand}
    assert set(by_key) == {r.key for r in base}
    assert [by_key[r.key].outcome for r in base] == [r.outcome for r in base]
    assert [by_key[r.key].output for r in base] == [r.output for r in base]
    assert [by_key[r.key].answer_strict for r in base] == [r.answer_strict for r in base]

    report = run_gate(
        qualgate_target, [lm_out], margin=0.05, import_options=ImportOptions(**IMPORT), on_prompt_mismatch="report"
    )
    (c,) = report.comparisons
    assert (c.pooled.lost, c.pooled.gained, c.pooled.pairs) == (0, 0, N)
    assert c.flips.flips == ()
    assert any(f"{N} of {N} pairs differ in prompt_hash" in n for n in c.notes)


def test_without_the_report_mode_the_prompt_difference_is_refused(runs):
    qualgate_target, lm_out = runs
    args = [
        "gate",
        str(qualgate_target),
        str(lm_out),
        "--margin",
        "0.05",
        "--suite",
        "demo_arithmetic",
        "--suite-version",
        "1",
        "--id-field",
        "id",
    ]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 3 and f"{N} pairs differ in prompt_hash" in r.output
    r = CliRunner().invoke(cli, [*args, "--prompt-mismatch", "report"])
    assert r.exit_code == 4 and f"{N} of {N} pairs differ in prompt_hash" in r.output
