"""A traffic suite through ``qualgate run`` (issue 30, item 1): the requests' messages are
decoded by the plan's engines (the toy engine, which refuses sampling fields as the reference
engine does), their ids and prompt hashes are the records' keys, and with ``sampling:
request`` a request's own ``max_tokens`` bounds its output under every config; a field the
engine does not implement (the reference engine, and so the toy, has no presence penalty)
makes that request an ``error`` record, which the gate refuses."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import read_records
from qualgate.records.prompts import prompt_hash

REQUESTS = [
    {
        "custom_id": "short",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "1 + 2 ="}], "max_completion_tokens": 2},
        "reference": "3",
    },
    {
        "model": "m",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Add."}]},
            {"role": "user", "content": "3 + 4 ="},
        ],
        "temperature": 1.0,
        "reference": "7",
    },
    {
        "messages": [
            {"role": "user", "content": "2 + 2 ="},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "and 5 + 5 ="},
        ],
        "max_tokens": 3,
        "reference": "10",
    },
    {"messages": [{"role": "user", "content": "6 + 6 ="}], "presence_penalty": 0.5, "reference": "12"},
]
SUITE = """\
name: my_traffic
version: 1
source: {traffic: traffic.jsonl, sampling: request}
gold: {field: reference}
extract: {strict: last_number, lenient: last_number}
grader: numeric
decides: lenient
generation: {max_tokens: 12}
"""


@pytest.mark.slow
def test_a_traffic_suite_runs_under_every_config_with_its_own_sampling(plan_factory, tmp_path):
    plan = plan_factory(configs=("target", "fly"), seeds=(0,), max_tokens=12)
    (plan.parent / "suite.yaml").write_text(SUITE)
    (plan.parent / "traffic.jsonl").write_text("".join(json.dumps(r) + "\n" for r in REQUESTS))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--quiet"])
    # the gate refuses the one request the engine cannot decode
    assert result.exit_code == 3 and "1 pairs have an 'error' outcome" in result.output, result.output
    assert "unknown sampling field(s) ['presence_penalty']" in result.output
    ids = [r.get("custom_id") or _hash_id(r) for r in REQUESTS]
    hashes = {qid: prompt_hash(_messages(r)) for qid, r in zip(ids, REQUESTS)}
    budget = {ids[0]: 2, ids[2]: 3}
    for config in ("target", "fly"):
        records = list(read_records(out / "records" / f"{config}.jsonl"))
        assert {r.question_id: r.prompt_hash for r in records} == hashes
        for r in records:  # no presence penalty (as the reference engine): that request fails
            assert (r.outcome == "error") == (r.question_id == ids[3]), r
            assert r.outcome == "error" or r.output_tokens <= budget.get(r.question_id, 12)
        assert max(r.output_tokens or 0 for r in records if r.question_id not in budget) > 3


def _hash_id(request: dict) -> str:
    """A line without custom_id under ``sampling: request``: the hash of [messages, sampling]."""
    sampling = {k: v for k, v in request.items() if k in ("temperature", "max_tokens", "presence_penalty")}
    blob = json.dumps([_messages(request), sampling], sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def _messages(request: dict) -> list[dict]:
    messages = request["body"]["messages"] if "body" in request else request["messages"]
    return [
        {**m, "content": m["content"] if isinstance(m["content"], str) else "\n".join(p["text"] for p in m["content"])}
        for m in messages
    ]
