"""The suite grader ``judge``: a judge model rates each output; errors in its suite entry name
the file and the field."""

from __future__ import annotations

import json

import pytest

from qualgate.errors import DataError
from qualgate.suites import load_suite


def traffic_suite(tmp_path, grader: str, gold: bool = False):
    lines = [
        {"messages": [{"role": "user", "content": f"Summarise ticket {i}."}], "reference": f"Ticket {i}."}
        for i in range(3)
    ]
    (tmp_path / "traffic.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    path = tmp_path / "suite.yaml"
    source = "{traffic: traffic.jsonl}" if gold else "{traffic: traffic.jsonl, ignore_fields: [reference]}"
    path.write_text(
        f"name: tickets\nversion: 1\nsource: {source}\n{'gold: {field: reference}' if gold else ''}\n"
        f"grader: {grader}\ngeneration: {{max_tokens: 64}}\n"
    )
    return path


def by_content(system, user):
    """Rates 9 when the prompt shows a reference, 3 when not; garbage for ticket 2."""
    if "ticket 2" in user:
        return "a fine summary"
    return "Good. Rating: [[9]]" if "<reference>" in user else "Meh. Rating: [[3]]"


@pytest.mark.parametrize(
    "gold, outcomes",
    [(False, ["incorrect", "incorrect", "judge_error"]), (True, ["correct", "correct", "judge_error"])],
)
def test_a_traffic_suite_graded_by_a_judge_rates_each_output(tmp_path, judge_double, gold, outcomes):
    double = judge_double({}, reply=by_content)
    double.config(tmp_path / "judge.yaml")
    suite = load_suite(traffic_suite(tmp_path, "{name: judge, params: {config: judge.yaml, pass_score: 7}}", gold))
    qs = sorted(suite.questions, key=lambda q: q.prompt[-1]["content"])
    grades = suite.grade_many([(q, "It is about a ticket.") for q in qs])
    suite.close()
    assert [g.outcome for g in grades] == outcomes
    assert grades[0].strict == ("9" if gold else "3") and grades[0].decided_by.startswith("judge:judge@judge-")
    assert "no [[rating]]" in grades[2].error
    assert double.requests == 3


@pytest.mark.parametrize(
    "params, field, says",
    [
        ("{config: judge.yaml}", "grader.params.pass_score", "required"),
        ("{config: judge.yaml, pass_score: 7, rubric: x}", "grader.params.rubric", "unknown"),
        ("{config: nowhere.yaml, pass_score: 7}", None, "no such judge config file"),
        ("{config: judge.yaml, pass_score: 11}", "pass_score", "on the template's scale"),
        ("{config: judge.yaml, pass_score: 7, prompt: pairwise}", "kind", "needs a pointwise template"),
        ("{config: judge.yaml, pass_score: 7, reference: 'yes'}", "grader.params.reference", "true or false"),
    ],
)
def test_a_bad_judge_grader_entry_names_the_field(tmp_path, judge_double, params, field, says):
    judge_double({}).config(tmp_path / "judge.yaml")
    with pytest.raises(DataError, match=says) as exc:
        load_suite(traffic_suite(tmp_path, f"{{name: judge, params: {params}}}"))
    assert exc.value.field == field
