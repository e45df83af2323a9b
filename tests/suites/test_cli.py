"""``qualgate suites list`` and ``qualgate suites show``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli

from support import SHARED, needs_shared

AIME = str(SHARED / "data" / "aime2025" / "test.jsonl")


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.slow
def test_list_shows_each_suite_with_version_and_pinned_source():
    r = invoke("suites", "list")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "DECIDES", "SOURCE"]
    gsm = next(line for line in lines if line.startswith("gsm8k "))
    assert gsm.split()[:3] == ["gsm8k", "3", "strict"]
    assert "openai/gsm8k [main/test] @ cc7b047b6e5bb11b4f1af84efc572db110a51b3c" in gsm


def test_list_json_is_one_list():
    r = invoke("suites", "list", "--format", "json")
    assert r.exit_code == 0
    names = [s["name"] for s in json.loads(r.stdout)]
    assert {"gsm8k", "math500", "aime25", "gpqa_diamond"} <= set(names)


@needs_shared
def test_show_renders_prompts_and_gold_answers_from_a_local_file():
    r = invoke("suites", "show", "aime25", "--limit", "2", "--data-file", AIME)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.count("=== ") == 2 and "gold: 70" in out and "gold: 588" in out
    assert "Find the sum of all integer bases $b>9$" in out
    assert "put your final answer within \\boxed{}" in out


@needs_shared
def test_show_json_carries_ids_prompts_hashes_and_golds():
    r = invoke("suites", "show", "aime25", "--limit", "3", "--data-file", AIME, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["name"] == "aime25" and doc["n_questions"] == 3
    assert [q["id"] for q in doc["questions"]] == ["0", "1", "2"]
    assert all(len(q["prompt_hash"]) == 64 and q["prompt"][0]["role"] == "user" for q in doc["questions"])


def test_show_missing_data_file_exits_3_with_the_path(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    r = invoke("suites", "show", "gsm8k", "--data-file", missing)
    assert r.exit_code == 3
    assert missing in r.stderr and "not found" in r.stderr


def test_show_unknown_suite_exits_2():
    r = invoke("suites", "show", "gsm9k")
    assert r.exit_code == 2
    assert "gsm9k" in r.stderr


def test_show_offline_hub_load_exits_3_suggesting_data_file():
    r = invoke("suites", "show", "aime25")
    assert r.exit_code == 3
    assert "--data-file" in r.stderr
