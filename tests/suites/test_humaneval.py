"""The ``humaneval`` suite, loaded from ../shared/data/humaneval, and its ``unit_tests`` grading:
canonical solutions pass, empty answers do not, and the 820 labelled completions agree with
their labels except for the accepted disagreements of humaneval_disagreements.yaml."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.graders import code, code_block
from qualgate.graders._sandbox import cpu_count, run_parallel
from qualgate.suites import Suite, load_suite, suite_path
from qualgate.suites._load import _question
from qualgate.suites._spec import read_spec

from support import SHARED, needs_shared, require_shared

DATA = SHARED / "data" / "humaneval"
PROBLEMS = DATA / "HumanEval.jsonl.gz"
LDB = DATA / "completions" / "ldb"
FILES = (
    "codellama/seed.jsonl",
    "gpt-3.5-turbo-0613/seed.jsonl",
    "gpt-4-1106-preview/seed.jsonl",
    "gpt-4-1106-preview/seed.4cc3655.jsonl",
    "starcoder/seed.jsonl",
)
ACCEPTED = Path(__file__).with_name("humaneval_disagreements.yaml")
HANDFUL = ("HumanEval/0", "HumanEval/38", "HumanEval/163")


@pytest.fixture(scope="module")
def suite(hf_cache):
    require_shared()
    return load_suite("humaneval", data_files=PROBLEMS, cache_dir=hf_cache)


@pytest.fixture(scope="module")
def problems():
    require_shared()
    with gzip.open(PROBLEMS, "rt", encoding="utf-8") as f:
        return {r["task_id"]: r for r in map(json.loads, f)}


@pytest.fixture(scope="module")
def handful(problems):
    """The suite with a handful of its questions, built from the rows without ``datasets``
    (whose first load takes seconds): the suite file's spec, the loader's own question."""
    spec = read_spec(suite_path("humaneval"))
    rows = [problems[i] for i in HANDFUL]
    questions = tuple(_question(spec, row, i, str(PROBLEMS)) for i, row in enumerate(rows))
    return Suite(spec.name, spec.version, questions, spec.generation, spec.decides, _spec=spec)


def _grade_all(suite, pairs):
    return run_parallel(lambda qt: suite.grade(*qt), pairs, workers=cpu_count())


@pytest.mark.slow
def test_the_suite_has_the_164_problems_with_their_tests_as_gold(suite, problems):
    assert [q.id for q in suite.questions] == [f"HumanEval/{i}" for i in range(164)]
    q = suite.questions[0]
    assert problems[q.id]["prompt"].strip() in q.prompt[0]["content"]
    assert "```python" in q.prompt[0]["content"]
    gold = json.loads(q.gold)
    assert gold == {
        k: problems[q.id][c] for k, c in (("prefix", "prompt"), ("test", "test"), ("entry_point", "entry_point"))
    }
    assert q.meta == {"entry_point": "has_close_elements"}


@pytest.mark.slow  # four sandboxed processes
def test_a_handful_of_canonical_solutions_pass_as_a_whole_function_and_as_a_body(handful, problems):
    suite, (q0, q38, q163) = handful, handful.questions
    whole = [
        (q, f"Here it is:\n```python\n{problems[q.id]['prompt']}{problems[q.id]['canonical_solution']}```")
        for q in (q0, q163)
    ]
    grades = _grade_all(suite, [*whole, (q38, problems[q38.id]["canonical_solution"])])
    assert [(g.outcome, g.detail) for g in grades] == [("correct", "passed")] * len(grades)
    assert {g.decided_by for g in grades} == {"strict:code_block", "lenient:code"}


def test_a_wrong_answer_fails_with_the_failed_assertion_in_its_detail(handful):
    suite, q = handful, handful.questions[0]
    g = suite.grade(q, "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```")
    assert g.outcome == "incorrect"
    assert g.detail == "failed assertion: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"


def test_an_empty_answer_is_no_answer_without_running_anything(handful):
    suite = handful
    grades = [suite.grade(q, text) for q in suite.questions for text in ("", "  \n")]
    assert {g.outcome for g in grades} == {"no_answer"}


def test_code_block_prefers_python_blocks_and_skips_other_languages():
    text = "```bash\npip install x\n```\n```\nuntagged()\n```\n```python\nchosen()\n```\n```py\nlater()\n```"
    assert code_block(text) == "chosen()"
    assert code_block("```\nuntagged()\n```") == "untagged()"
    assert code_block("```python\ndef f():\n    return 1") == "def f():\n    return 1"  # cut off
    assert code_block("```text\nprose\n```") is None and code_block("no fence") is None
    assert code("```text\nprose\n```") == "```text\nprose\n```" and code(" \n") is None


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.slow  # the first read of a data file through datasets
def test_a_malformed_entry_point_is_a_data_error_naming_the_row_and_field(tmp_path, hf_cache):
    bad = _write(
        tmp_path / "bad.jsonl",
        [
            {
                "task_id": "t/0",
                "prompt": "def f():\n",
                "test": "def check(c): pass",
                "entry_point": "f()",
                "canonical_solution": "",
            }
        ],
    )
    with pytest.raises(DataError, match=r"row 0: entry_point must be a Python identifier") as e:
        load_suite("humaneval", data_files=bad, cache_dir=hf_cache)
    assert e.value.field == "gold.fields"


@pytest.mark.slow  # a read through datasets
def test_a_missing_test_column_is_a_data_error_naming_the_column(tmp_path, hf_cache):
    bad = _write(tmp_path / "bad.jsonl", [{"task_id": "t/0", "prompt": "def f():\n", "entry_point": "f"}])
    with pytest.raises(DataError, match="missing column 'test'") as e:
        load_suite("humaneval", data_files=bad, cache_dir=hf_cache)
    assert e.value.field == "gold.fields.test"


def test_gold_with_both_field_and_fields_is_refused(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "suites" / "humaneval.yaml").read_text()
    path = tmp_path / "two_golds.yaml"
    path.write_text(text.replace("  parse: unit_tests", "  field: test\n  parse: unit_tests"))
    with pytest.raises(DataError, match="exactly one of 'field'") as e:
        load_suite(path, data_files=PROBLEMS)
    assert e.value.file == str(path) and e.value.field == "gold"


def test_the_unit_tests_grader_without_its_tests_as_gold_is_refused(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "suites" / "humaneval.yaml").read_text()
    path = tmp_path / "no_tests.yaml"
    path.write_text(
        text.replace(
            "  fields: {prefix: prompt, test: test, entry_point: entry_point}\n  parse: unit_tests", "  field: test"
        )
    )
    with pytest.raises(DataError, match="the unit_tests grader needs its tests as the gold") as e:
        load_suite(path, data_files=PROBLEMS)
    assert e.value.file == str(path) and e.value.field == "gold"


def test_invalid_sandbox_limits_in_the_suite_file_are_refused_when_it_is_read(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "suites" / "humaneval.yaml").read_text()
    path = tmp_path / "bad_limits.yaml"
    path.write_text(text.replace("timeout_s: 10,", "timeout_s: -1,"))
    with pytest.raises(DataError, match=r"timeout_s must be a number of seconds") as e:
        read_spec(path)
    assert e.value.field == "grader.params"


@needs_shared
def test_suites_show_renders_humaneval_from_the_gzipped_file():
    r = CliRunner().invoke(cli, ["suites", "show", "humaneval", "--limit", "1", "--data-file", str(PROBLEMS)])
    assert r.exit_code == 0, r.output
    assert "humaneval (version 1)" in r.stdout and "=== HumanEval/0" in r.stdout
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in r.stdout
    assert "meta: entry_point=has_close_elements" in r.stdout


def test_suites_list_names_the_pinned_hub_source():
    r = CliRunner().invoke(cli, ["suites", "list"])
    line = next(x for x in r.stdout.splitlines() if x.startswith("humaneval "))
    assert "openai/openai_humaneval [openai_humaneval/test] @ 7dce6050a7d6d172f3cc5c32aa97f52fa1a2e544" in line


@pytest.mark.slow
def test_all_164_canonical_solutions_pass(suite, problems):
    start = time.perf_counter()
    grades = _grade_all(
        suite, [(q, problems[q.id]["prompt"] + problems[q.id]["canonical_solution"]) for q in suite.questions]
    )
    seconds = time.perf_counter() - start
    assert [q.id for q, g in zip(suite.questions, grades) if g.outcome != "correct"] == []
    print(f"164 canonical solutions graded in {seconds:.1f} s with {cpu_count()} workers")


@pytest.mark.slow
def test_the_prompt_alone_fails_every_problem(suite, problems):
    # An empty completion by HumanEval's rule: the prompt's function returns None.
    gold_runs = [(q, "pass") for q in suite.questions]
    grades = _grade_all(suite, gold_runs)
    assert sum(g.outcome == "correct" for g in grades) == 0
    assert {g.outcome for g in grades} == {"incorrect"}


def _accepted() -> set[tuple[str, str, str, str]]:
    doc = yaml.safe_load(ACCEPTED.read_text(encoding="utf-8"))
    entries = {tuple(e) for e in doc["disagreements"]}
    assert {e[3] for e in entries} <= set(doc["reasons"]), "every entry names a listed reason"
    return entries


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_labelled_completions_agree_with_their_labels_but_for_the_accepted_ones(suite, name):
    by_id = {q.id: q for q in suite.questions}
    with open(LDB / name, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 164
    grades = _grade_all(suite, [(by_id[r["task_id"]], r["solution"]) for r in rows])
    found = {
        (name, r["task_id"], g.outcome)
        for r, g in zip(rows, grades)
        if (g.outcome == "correct") != bool(r["is_solved"])
    }
    assert {g.outcome for g in grades} <= {"correct", "incorrect"}  # no sandbox errors
    assert found == {e[:3] for e in _accepted() if e[0] == name}
