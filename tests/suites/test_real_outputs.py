"""Grading real model outputs: agreement with third-party labels, per suite and source.

../shared/data/real_outputs holds about 4,700 outputs of GPT-3, Qwen2.5/Qwen3, gemma-2,
Llama-3.1, GPT-4o and Claude 3.5 on GSM8K, MATH-500, AIME 2024 and GPQA-Diamond, each labelled
correct or incorrect by someone else's grader (its README names them). Every row is graded with
the built-in suite under the `either` policy, which also gives the strict outcome. The
disagreements found must equal the committed list in real_outputs_disagreements.yaml, each with
its reason, so that any change in grading shows up as a difference there. The agreement rates
the issue asks for (issue 15, "Done when") are checked per suite.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml

from qualgate.suites import Question, Suite, suite_path
from qualgate.suites._spec import read_spec

from support import SHARED, require_shared

DATA = SHARED / "data" / "real_outputs"
ACCEPTED = Path(__file__).with_name("real_outputs_disagreements.yaml")
SUITES = ("gsm8k", "math500", "aime25", "gpqa_diamond")
#: Issue 15, "Done when": agreement on the outputs that hold the requested format (strict) ...
MIN_STRICT = {"gsm8k": 0.995, "math500": 0.99, "aime25": 0.995}
#: ... and on every output with the `either` decision (strict if found, else lenient); issue 29
#: (a hedge, a list or a refusal is no answer) kept GPQA at its 747 of 792.
MIN_EITHER = {"gsm8k": 0.99, "gpqa_diamond": 747 / 792}

pytestmark = pytest.mark.slow


def _rows(suite: str) -> list[dict]:
    path = DATA / f"{suite}.jsonl"
    require_shared()
    if not path.is_file():
        pytest.fail(f"real outputs not found at {path}")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _sources() -> list[tuple[str, str]]:
    try:
        return [(s, src) for s in SUITES for src in sorted({r["source"] for r in _rows(s)})]
    except (pytest.fail.Exception, pytest.skip.Exception):
        return [(s, "(data missing)") for s in SUITES]


def _short(source: str) -> str:
    repo, _, path = source.partition(":")
    return f"{repo.split('@')[0].split('/')[-1]}:{Path(path).stem}"


@functools.cache
def graded(suite: str) -> tuple[tuple[dict, object], ...]:
    """Every row of ``suite`` with its Grade under the suite's extractors and `either`."""
    spec = read_spec(suite_path(suite))
    either = Suite(suite, spec.version, (), {}, "either", _spec=spec)
    out = []
    for i, row in enumerate(_rows(suite)):
        q = Question(str(i), ({"role": "user", "content": row["question"]},), row["gold"], "-")
        out.append((row, either.grade(q, row["output"])))
    return tuple(out)


def _agrees(outcome: str, label: str) -> bool:
    return (outcome == "correct") == (label == "correct")


def disagreements(suite: str, source: str | None = None) -> set[tuple[str, str, str, str]]:
    """(policy, model, question_id, qualgate's outcome) of every disagreement."""
    found = set()
    for row, g in graded(suite):
        if source is not None and row["source"] != source:
            continue
        if g.strict is not None and not _agrees(g.strict_outcome, row["label"]):
            found.add(("strict", row["model"], row["question_id"], g.strict_outcome))
        if not _agrees(g.outcome, row["label"]):
            found.add(("either", row["model"], row["question_id"], g.outcome))
    return found


@functools.cache
def accepted() -> dict:
    with open(ACCEPTED, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _accepted_for(suite: str, source: str) -> set[tuple[str, str, str, str]]:
    models = {r["model"] for r in _rows(suite) if r["source"] == source}
    return {tuple(e[:4]) for e in accepted()["disagreements"][suite] if e[1] in models}


@pytest.mark.parametrize(("suite", "source"), _sources(), ids=lambda v: v if v in SUITES else _short(v))
def test_disagreements_with_the_labels_are_exactly_the_accepted_ones(suite, source):
    found = disagreements(suite, source)
    expected = _accepted_for(suite, source)
    assert found - expected == set(), "new disagreements (grading changed?)"
    assert expected - found == set(), "accepted disagreements that no longer occur: update the list"


def test_every_accepted_disagreement_has_a_reason_that_is_a_label_error_or_an_ambiguous_output():
    reasons = accepted()["reasons"]
    for text in reasons.values():
        assert text.startswith(("label error", "ambiguous output")), text
    for suite, entries in accepted()["disagreements"].items():
        assert suite in SUITES
        for entry in entries:
            assert len(entry) == 5 and entry[0] in ("strict", "either"), entry
            assert entry[3] in ("correct", "incorrect", "no_answer") and entry[4] in reasons, entry


@pytest.mark.parametrize("suite", sorted(MIN_STRICT))
def test_strict_agreement_on_outputs_with_the_requested_format_meets_the_target(suite):
    rows = [(r, g) for r, g in graded(suite) if g.strict is not None]
    agree = sum(_agrees(g.strict_outcome, r["label"]) for r, g in rows)
    assert rows and agree / len(rows) >= MIN_STRICT[suite], (agree, len(rows))


@pytest.mark.parametrize("suite", sorted(MIN_EITHER))
def test_either_agreement_on_every_output_meets_the_target(suite):
    rows = graded(suite)
    agree = sum(_agrees(g.outcome, r["label"]) for r, g in rows)
    assert agree / len(rows) >= MIN_EITHER[suite], (agree, len(rows))


def test_a_qwen3_output_is_graded_on_the_text_after_its_think_block():
    """The Qwen3 rows end "</think>\\n#### N" (the template opened the block in the prompt)."""
    rows = [(r, g) for r, g in graded("gsm8k") if "</think>" in r["output"]]
    assert len(rows) > 400
    for row, g in rows:
        after = row["output"].rsplit("</think>", 1)[1]
        if "####" in after:
            assert g.decided_by == "strict:after_marker", row["question_id"]
        else:
            assert g.strict is None, row["question_id"]


def test_gpqa_answers_are_mostly_found_by_final_choice_not_by_the_last_letter():
    decided = [g.decided_by for _, g in graded("gpqa_diamond")]
    share = {k: decided.count(k) / len(decided) for k in set(decided)}
    assert share["lenient:final_choice"] > 0.8, share
    assert share.get("lenient:last_letter", 0) < 0.1, share
