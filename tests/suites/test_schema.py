"""Suite files: schema validation, built-in resolution, loading errors, prompt hashes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from qualgate.errors import DataError
from qualgate.suites import GENERATORS, list_suites, load_suite, suite_path
from qualgate.suites._spec import read_spec

from support import REPO, SHARED, needs_shared

AIME = SHARED / "data" / "aime2025" / "test.jsonl"

MINIMAL = {
    "name": "tiny",
    "version": 1,
    "source": {"generator": "rows_for_test", "params": {"n": 3}},
    "id": {"field": "qid"},
    "fields": {"question": "q"},
    "gold": {"field": "a"},
    "prompt": {"user": 'Q: {{question}}\nEnd with "#### N".'},
    "extract": {"strict": {"name": "after_marker", "params": {"marker": "####"}}, "lenient": "last_number"},
    "grader": "numeric",
    "decides": "strict",
    "generation": {"max_tokens": 16},
}


@pytest.fixture
def generator(tmp_path, monkeypatch):
    """Register a generator ``rows_for_test(n, dup=False, missing=None)`` for this test."""
    (tmp_path / "gen_for_test.py").write_text(
        textwrap.dedent("""
        def rows(n, dup=False, missing=None):
            out = [{"qid": f"q{i}", "q": f"{i} + {i}?", "a": 2 * i} for i in range(n)]
            if dup:
                out[-1]["qid"] = "q0"
            for row in out:
                row.pop(missing, None)
            return out
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(GENERATORS, "rows_for_test", "gen_for_test:rows")


def write(tmp_path, doc, name="tiny.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def with_(**changes):
    doc = json.loads(json.dumps(MINIMAL))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = doc
        for p in parents:
            node = node[p]
        node[last] = value
    return doc


# --- built-in suites --------------------------------------------------------------------------


def test_the_four_benchmark_suites_are_built_in():
    assert {"gsm8k", "math500", "aime25", "gpqa_diamond"} <= set(list_suites())


@pytest.mark.parametrize("name", ["gsm8k", "math500", "aime25", "gpqa_diamond"])
def test_builtin_suite_is_valid_pinned_and_named_after_its_file(name):
    spec = read_spec(suite_path(name))
    assert spec.name == name == suite_path(name).stem
    assert len(spec.source["revision"]) == 40
    assert spec.generation["max_tokens"] >= 1024


def test_builtin_suites_resolve_to_the_checkout_folder_in_a_dev_install():
    assert suite_path("gsm8k").resolve() == (REPO / "suites" / "gsm8k.yaml").resolve()


def test_generator_registry_names_the_demo_task():
    assert GENERATORS["demo_arithmetic"] == "qualgate.demo.task:generate"


def test_unknown_suite_name_lists_the_valid_names():
    with pytest.raises(ValueError, match=r"no built-in suite 'gsm9k'.*'gsm8k'"):
        load_suite("gsm9k")


# --- schema errors name file, key and value ---------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "key", "value"),
    [
        ({"shuffle": True}, "shuffle", True),
        ({"source__splt": "test"}, "source.splt", "test"),
        ({"prompt__assistant": "hi"}, "prompt.assistant", "hi"),
        ({"generation__max_new_tokens": 5}, "generation.max_new_tokens", 5),
        ({"grader": "numerik"}, "grader", "numerik"),
        ({"extract__lenient": ["last_number", "last_word"]}, "extract.lenient[1]", "last_word"),
        ({"grader": {"name": "numeric", "params": {"tol": 1}}}, "grader.params", {"tol": 1}),
        ({"prompt__user": "{{questoin}}"}, "prompt.user", "questoin"),
        ({"version": 0}, "version", 0),
        ({"decides": "both"}, "decides", "both"),
        ({"think": "hide"}, "think", "hide"),
        (
            {"extract__lenient": [{"name": "last_number", "label": "x"}, {"name": "boxed", "label": "x"}]},
            "extract.lenient[1]",
            {"name": "boxed", "label": "x"},
        ),
        ({"extract__strict": {"name": "boxed", "labl": "b"}}, "extract.strict.labl", "b"),
        ({"id__rule": "uuid"}, "id", None),
    ],
)
def test_invalid_suite_file_is_a_data_error_naming_file_key_and_value(tmp_path, generator, changes, key, value):
    path = write(tmp_path, with_(**changes))
    with pytest.raises(DataError) as info:
        read_spec(path)
    err = info.value
    assert err.file == str(path) and err.field == key
    if value is not None:
        assert err.value == value and repr(value) in str(err)


def test_think_defaults_to_strip_and_labels_name_the_extractors(tmp_path, generator):
    spec = read_spec(
        write(
            tmp_path,
            with_(
                decides="either",
                extract__lenient=[
                    {"name": "boxed", "params": {"take": "number"}},
                    {"name": "after_marker", "label": "final", "params": {}},
                ],
            ),
        )
    )
    assert (spec.think, spec.decides) == ("strip", "either")
    assert [label for label, _ in spec.strict] == ["after_marker"]
    assert [label for label, _ in spec.lenient] == ["boxed", "final"]


def test_missing_required_key_is_named(tmp_path, generator):
    doc = with_()
    del doc["generation"]
    with pytest.raises(DataError, match="generation.*required"):
        read_spec(write(tmp_path, doc))


def test_dataset_source_must_pin_a_full_revision(tmp_path):
    doc = with_(source={"dataset": "openai/gsm8k", "split": "test", "revision": "main"})
    with pytest.raises(DataError, match="pinned 40-hex") as info:
        read_spec(write(tmp_path, doc))
    assert info.value.field == "source.revision"


def test_gold_and_choices_are_exclusive(tmp_path, generator):
    doc = with_(choices={"correct": "a", "incorrect": ["b"]})
    with pytest.raises(DataError, match="exactly one of 'gold' and 'choices'"):
        read_spec(write(tmp_path, doc))


def test_single_braces_in_a_template_are_literal_text(tmp_path, generator):
    path = write(tmp_path, with_(prompt__user=r"{{question}} Put it in \boxed{} {x}"))
    q = load_suite(path).questions[1]
    assert q.prompt == ({"role": "user", "content": r"1 + 1? Put it in \boxed{} {x}"},)


# --- loading from a generator, and its errors ------------------------------------------------


def test_generator_suite_builds_questions_from_rows(tmp_path, generator):
    suite = load_suite(write(tmp_path, MINIMAL))
    assert [q.id for q in suite.questions] == ["q0", "q1", "q2"]
    assert [q.gold for q in suite.questions] == ["0", "2", "4"]
    assert suite.source == {"generator": "rows_for_test", "params": {"n": 3}}
    assert suite.grade(suite.questions[2], "2 + 2 = 4\n#### 4").outcome == "correct"


def test_limit_keeps_the_first_questions(tmp_path, generator):
    suite = load_suite(write(tmp_path, with_(source__params={"n": 10})), limit=4)
    assert [q.id for q in suite.questions] == ["q0", "q1", "q2", "q3"]


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_invalid_limit_is_a_value_error(limit):
    with pytest.raises(ValueError, match="limit"):
        load_suite("aime25", data_files=AIME, limit=limit)


def test_duplicate_ids_are_a_data_error_naming_them(tmp_path, generator):
    path = write(tmp_path, with_(source__params={"n": 3, "dup": True}))
    with pytest.raises(DataError, match=r"duplicate question ids: 'q0' \(rows 0 and 2\)"):
        load_suite(path)


def test_missing_column_is_a_data_error_naming_it(tmp_path, generator):
    path = write(tmp_path, with_(source__params={"n": 3, "missing": "a"}))
    with pytest.raises(DataError, match="row 0: missing column 'a'") as info:
        load_suite(path)
    assert info.value.field == "gold.field"


def test_empty_data_is_a_data_error(tmp_path, generator):
    with pytest.raises(DataError, match="no rows"):
        load_suite(write(tmp_path, with_(source__params={"n": 0})))


# --- loading local files through datasets ----------------------------------------------------


def test_local_jsonl_missing_a_field_is_a_data_error(tmp_path):
    rows = tmp_path / "aime.jsonl"
    rows.write_text('{"problem": "p", "id": "0"}\n')
    with pytest.raises(DataError, match="missing column 'answer'"):
        load_suite("aime25", data_files=rows)


def test_local_empty_file_is_a_data_error(tmp_path):
    rows = tmp_path / "empty.jsonl"
    rows.write_text("")
    with pytest.raises(DataError, match="no rows: the data file is empty"):
        load_suite("aime25", data_files=rows)


def test_missing_data_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_suite("aime25", data_files=tmp_path / "nope.jsonl")


def test_out_of_range_aime_answer_is_a_data_error(tmp_path):
    rows = tmp_path / "aime.jsonl"
    rows.write_text('{"problem": "p", "id": "0", "answer": 1000}\n')
    with pytest.raises(DataError, match=r"outside \[0, 999\]"):
        load_suite("aime25", data_files=rows)


@needs_shared
def test_parquet_copy_loads_like_the_jsonl(tmp_path):
    import pandas as pd

    parquet = tmp_path / "aime.parquet"
    pd.read_json(AIME, lines=True, dtype={"id": str}).to_parquet(parquet)
    assert load_suite("aime25", data_files=parquet).questions == load_suite("aime25", data_files=AIME).questions


def test_revision_with_data_files_is_a_value_error():
    with pytest.raises(ValueError, match="revision"):
        load_suite("aime25", data_files=AIME, revision="0" * 40)


def test_hub_load_failure_is_a_data_error_suggesting_data_files():
    with pytest.raises(DataError, match="data_files"):
        load_suite("aime25")


# --- prompt hashes ----------------------------------------------------------------------------


@needs_shared
def test_prompt_hash_is_sha256_of_the_canonical_json_of_the_messages():
    q = load_suite("aime25", data_files=AIME).questions[0]
    canonical = json.dumps(list(q.prompt), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert q.prompt_hash == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.slow
@needs_shared
def test_prompt_hashes_are_identical_in_another_process(hf_cache):
    code = (
        "import json, sys; from qualgate.suites import load_suite; "
        "s = load_suite('aime25', data_files=sys.argv[1], cache_dir=sys.argv[2]); "
        "print(json.dumps([q.prompt_hash for q in s.questions]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(AIME), str(hf_cache)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    here = [q.prompt_hash for q in load_suite("aime25", data_files=AIME).questions]
    assert json.loads(out.stdout) == here


def test_a_changed_prompt_changes_the_hash(tmp_path, generator):
    a = load_suite(write(tmp_path, MINIMAL, "a.yaml")).questions[0]
    b = load_suite(write(tmp_path, with_(prompt__user="Q:  {{question}}"), "b.yaml")).questions[0]
    assert a.id == b.id and a.prompt_hash != b.prompt_hash
