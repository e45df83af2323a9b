"""The path of a plan whose judge is a reference-engine config, end to end on CPU: the demo
target model judges (its replies hold no verdict, so every record is a ``judge_error``, and the
gate refuses them), pointwise inside ``qualgate run`` and pairwise with ``qualgate judge``."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import read_records

pytest.importorskip("torch")
pytest.importorskip("transformers")

from judge_double import judge_args  # noqa: E402
from support import REPO  # noqa: E402

WEIGHTS = REPO / "qualgate" / "demo" / "weights"


@pytest.fixture
def plan(tmp_path):
    for name in ("suite.yaml", "pointwise.yaml", "pairwise.yaml"):
        shutil.copy(REPO / "configs" / "demo-judge" / name, tmp_path / name)
    cpu = "engine_options: {device: cpu, batch_size: 8, cuda_graphs: false}\n"
    (tmp_path / "judge.yaml").write_text(
        f"name: demo-judge\nengine: reference\nmodel: {WEIGHTS}/target\nsampling: {{max_tokens: 6}}\n{cpu}"
    )
    for name, spec in (
        ("target", ""),
        ("standard", f"speculative: {{model: {WEIGHTS}/drafter, num_speculative_tokens: 3}}\n"),
    ):
        (tmp_path / f"{name}.yaml").write_text(
            f"engine: reference\nmodel: {WEIGHTS}/target\nsampling: {{temperature: 1.0, max_tokens: 24}}\n{cpu}{spec}"
        )
    (tmp_path / "plan.yaml").write_text(
        "name: judged\nsuites: [{suite: suite.yaml, limit: 3}]\nseeds: [0]\n"
        "configs: {target: target.yaml, standard: standard.yaml}\nbaseline: target\n"
        "gate: {margin: 0.05}\n"
    )
    return tmp_path


@pytest.mark.slow
def test_a_plan_graded_by_a_reference_engine_judge_runs_and_its_gate_refuses_judge_errors(plan):
    out = plan / "run"
    result = CliRunner().invoke(cli, ["run", str(plan / "plan.yaml"), "--out", str(out)])
    assert result.exit_code == 3, result.output  # the gate refused the judge_error pairs
    records = list(read_records(out / "records" / "standard.jsonl"))
    assert len(records) == 3 and {r.outcome for r in records} == {"judge_error"}
    assert all(r.decided_by.startswith("judge:demo-judge@judge-") and "no [[rating]]" in r.error for r in records)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gate"]["status"] == "refused" and "judge_error" in manifest["gate"]["message"]
    (suite,) = manifest["fingerprint"]["suites"]  # the judge is part of what a resume must not change
    assert suite["judge"]["judge"]["engine"] == "reference" and suite["judge"]["pass_score"] == 5
    assert records[0].decided_by.endswith(suite["judge"]["judge"]["judge_id"])

    judged = plan / "pairwise"
    base, cand = out / "records" / "target.jsonl", out / "records" / "standard.jsonl"
    args = judge_args(base, cand, plan / "judge.yaml", judged, prompt=plan / "pairwise.yaml", suite=plan / "suite.yaml")
    refused = CliRunner().invoke(cli, args)  # the demo model cannot judge: every pair a judge error
    assert refused.exit_code == 3 and "judged pairs are judge errors" in refused.output, refused.output
    result = CliRunner().invoke(cli, [*args, "--max-judge-errors", "1"])  # the records, read again
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    asked = summary["pairs"] - summary["identical"]
    assert summary["calls"] == 2 * asked and summary["judge_error"] == asked
    doc = json.loads((judged / "judge.json").read_text())
    assert doc["judge"]["engine"] == "reference" and doc["judge"]["sampling"]["temperature"] == 0.0
    assert doc["judge_backend"]["engine"] == "reference"
