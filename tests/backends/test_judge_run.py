"""A plan whose suite is graded by a judge behind the OpenAI API (``engine: vllm-server``):
the judge's failures are ``judge_error`` records, the gate refuses them, and ``--resume``
grades them again."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.demo.task import solve
from qualgate.records import read_records

from judge_double import JudgeDouble


def rate_by_answer(system, user):
    """Rates 9 an answer that is right, 2 one that is wrong (the fake server's FLy config errs on
    every third seed), reading question and answer from the shipped pointwise template."""
    question = re.search(r"<question>\n(.*)\n</question>", user, re.S).group(1)
    answer = re.search(r"<answer>\n#### (-?\d+)\n</answer>", user).group(1)
    return "Rating: [[9]]" if int(answer) == solve(question) else "Rating: [[2]]"


@pytest.mark.slow
def test_a_judge_that_fails_gives_judge_errors_that_resume_grades_again(tmp_path, fake_server, server_plan):
    target, fly = (
        fake_server(),
        fake_server(
            speculative={
                "method": "draft_model",
                "model": "Qwen/Qwen3-0.6B",
                "num_speculative_tokens": 4,
                "rejection_sample_method": "fly",
            }
        ),
    )
    plan = server_plan(
        tmp_path,
        {"target": {"urls": [target.url]}, "fly": {"urls": [fly.url], "speculative": fly.speculative}},
        seeds=(0,),
    )
    suite = tmp_path / "tiny.yaml"
    text = suite.read_text()
    grader = next(line for line in text.splitlines() if line.startswith("grader:"))
    suite.write_text(text.replace(grader, "grader: {name: judge, params: {config: judge.yaml, pass_score: 7}}"))
    with JudgeDouble({}, reply=rate_by_answer, status=503) as judge:
        judge.config(tmp_path / "judge.yaml", max_retries=0)
        out = tmp_path / "run"
        first = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out)])
        assert first.exit_code == 3, first.output  # every pair a judge_error: refused
        records = list(read_records(out / "records" / "fly.jsonl"))
        assert {r.outcome for r in records} == {"judge_error"} and all("HTTP 503" in r.error for r in records)
        judge.status = None  # the judge is back
        second = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--resume"])
        assert second.exit_code in (0, 1, 4), second.output
        records = list(read_records(out / "records" / "fly.jsonl"))
        assert len(records) == 6 and all(r.decided_by.startswith("judge:judge@judge-") for r in records)
        # the judge's ratings follow the answers' correctness, as the suite's numeric grader would
        assert [r.outcome for r in records] == [
            "correct" if r.output.split()[-1] == r.gold else "incorrect" for r in records
        ]
        assert {r.outcome for r in records} == {"correct", "incorrect"}
        assert json.loads((out / "manifest.json").read_text())["gate"]["status"] == "ok"
