"""The record schema and its JSON Lines / Parquet / CSV storage."""

import dataclasses
import json
import re

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from qualgate.errors import DataError
from qualgate.records import (
    FIELDS,
    REQUIRED,
    SCHEMA,
    Record,
    RecordWriter,
    existing_keys,
    read_records,
    repair_truncated,
)
from qualgate.records.schema import _rows_valid

from strategies import near_valid_record_rows
from support import REPO

VALID = {
    "schema_version": 1,
    "run_id": "r",
    "config_id": "c",
    "suite": "gsm8k",
    "suite_version": "1",
    "question_id": "q1",
    "seed": 0,
    "sample_index": 0,
    "outcome": "correct",
    "prompt_hash": "h",
}

text = st.text(min_size=1, max_size=20)
records = st.builds(
    Record,
    schema_version=st.just(1),
    run_id=text,
    config_id=text,
    suite=text,
    suite_version=text,
    question_id=text,
    seed=st.integers(-(2**40), 2**40),
    sample_index=st.integers(0, 100),
    outcome=st.sampled_from(["correct", "incorrect", "no_answer", "error"]),
    prompt_hash=text,
    mode=st.none() | text,
    answer_strict=st.none() | st.text(max_size=10),
    output=st.none() | st.text(),
    output_tokens=st.none() | st.integers(0, 10**6),
    latency_s=st.none() | st.floats(0, 1e4),
    deferred_tokens=st.none() | st.integers(0, 100),
    error=st.none() | st.text(max_size=30),
)


def lines(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_schema_lists_the_required_fields_of_issue_3_first():
    assert REQUIRED == (
        "schema_version",
        "run_id",
        "config_id",
        "suite",
        "suite_version",
        "question_id",
        "seed",
        "sample_index",
        "outcome",
        "prompt_hash",
    )
    assert set(FIELDS) - set(REQUIRED) == {
        "mode",
        "answer_strict",
        "answer_lenient",
        "decided_by",
        "gold",
        "output",
        "output_tokens",
        "spec_steps",
        "draft_tokens",
        "accepted_tokens",
        "deferred_tokens",
        "latency_s",
        "token_ids",
        "top2_margins",
        "error",
        "engine",
        "engine_version",
    }


def test_record_class_declares_the_schema_fields_in_order():
    declared = [
        (f.name, f.kind.parse.__name__ + ("" if f.required else " | None"), dataclasses.MISSING if f.required else None)
        for f in SCHEMA
    ]
    assert [(f.name, f.type, f.default) for f in dataclasses.fields(Record)] == declared


def test_readme_record_table_gives_each_declared_field_its_required_flag_and_type():
    section = (REPO / "README.md").read_text().split("## Records")[1].split("\n## ")[0]
    readme = {}
    for names, required, kind in re.findall(r"^\| (`.+?`) \| :?(yes|no):? \| (.+?) \|", section, re.MULTILINE):
        for name in re.findall(r"`(\w+)`", names):
            readme[name] = (required == "yes", kind)
    assert readme == {f.name: (f.required, f.kind.label) for f in SCHEMA}


def accepted_one_by_one(row):
    try:
        Record.from_dict(row)
    except DataError:
        return False
    return True


@pytest.mark.slow
@settings(max_examples=300)
@given(st.lists(near_valid_record_rows(), min_size=1, max_size=4))
@example([VALID | {"seed": True}])
@example([VALID | {"schema_version": True}])
@example([VALID | {"sample_index": 2**63}])
@example([VALID | {"latency_s": float("nan")}])
@example([VALID | {"latency_s": 2**63}])
@example([VALID | {"output_tokens": 1.0}])
@example([VALID | {"run_id": ""}])
@example([VALID | {"mode": ""}, VALID | {"seed": 1, "mode": None}])
@example([VALID | {"outcome": "Correct"}])
@example([VALID, {k: v for k, v in VALID.items() if k != "seed"}])
@example([VALID | {"temperature": 0.6}])
@example([VALID, [VALID]])
def test_row_and_column_validators_accept_exactly_the_same_rows(rows):
    assert _rows_valid(rows) == all(map(accepted_one_by_one, rows))


@settings(max_examples=60)
@given(st.lists(records, max_size=20, unique_by=lambda r: r.key))
@pytest.mark.slow
def test_written_records_read_back_equal(tmp_path_factory, recs):
    path = tmp_path_factory.mktemp("rt") / "r.jsonl"
    with RecordWriter(path) as w:
        w.write_batch(recs)
    assert list(read_records(path)) == recs


def test_writer_appends_and_never_rewrites_existing_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    first = Record.from_dict(VALID)
    with RecordWriter(path) as w:
        w.write_batch([first])
    before = path.read_bytes()
    with RecordWriter(path) as w:
        w.write_batch([Record.from_dict(VALID | {"seed": 1})])
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 2


def test_key_is_suite_question_seed_sample():
    assert Record.from_dict(VALID | {"seed": 3, "sample_index": 2}).key == ("gsm8k", "q1", 3, 2)


def test_optional_fields_left_unset_are_not_written():
    assert Record.from_dict(VALID).to_dict() == VALID


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("seed", "3", "must be an integer"),
        ("seed", True, "must be an integer"),
        ("question_id", 7, "must be a string"),
        ("outcome", "wrong", "must be one of correct, incorrect, no_answer, error"),
        ("schema_version", 2, "unsupported schema version"),
        ("sample_index", -1, "must be an integer >= 0"),
        ("latency_s", float("nan"), "finite number >= 0"),
        ("run_id", "", "must not be empty"),
        ("output_tokens", -5, "integer >= 0"),
    ],
)
def test_invalid_value_names_file_line_field_and_value(tmp_path, field, value, says):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1, field: value}) + "\n")
    with pytest.raises(DataError) as exc:
        read_records(path)
    e = exc.value
    assert (e.file, e.line, e.field, e.value) == (str(path), 2, field, value) or (
        value != value and e.field == field and e.line == 2
    )
    assert says in str(e) and f"{path}:2" in str(e)


def test_missing_required_field_is_named(tmp_path):
    path = lines(tmp_path / "r.jsonl", [{k: v for k, v in VALID.items() if k != "prompt_hash"}])
    with pytest.raises(DataError, match="required field is missing") as exc:
        read_records(path)
    assert (exc.value.line, exc.value.field) == (1, "prompt_hash")


def test_unknown_field_is_an_error_unless_allowed(tmp_path):
    path = lines(tmp_path / "r.jsonl", [VALID | {"temperature": 0.6}])
    with pytest.raises(DataError, match="unknown field") as exc:
        read_records(path)
    assert (exc.value.field, exc.value.value) == ("temperature", 0.6)
    assert list(read_records(path, allow_unknown=True)) == [Record.from_dict(VALID)]


def test_a_line_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n{not json}\n")
    with pytest.raises(DataError, match="not a JSON object") as exc:
        read_records(path)
    assert exc.value.line == 2


def test_two_objects_on_one_line_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + " " + json.dumps(VALID | {"seed": 1}) + "\n")
    with pytest.raises(DataError, match="line|JSON") as exc:
        read_records(path)
    assert exc.value.line == 1


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n\n" + json.dumps(VALID | {"seed": "x"}) + "\n")
    with pytest.raises(DataError) as exc:
        read_records(path)
    assert exc.value.line == 3


def test_truncated_last_line_is_refused_not_parsed(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1})[:25])
    with pytest.raises(DataError, match="incomplete last line") as exc:
        read_records(path)
    assert exc.value.line == 2


def test_truncated_last_line_is_dropped_and_reported_with_the_flag(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1})[:25])
    rs = read_records(path, drop_truncated=True)
    assert len(rs) == 1 and len(rs.dropped) == 1
    assert rs.dropped[0].line == 2 and rs.dropped[0].nbytes == 25


def test_complete_last_object_without_newline_is_read(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1}))
    assert len(read_records(path)) == 2


def test_repair_removes_only_the_incomplete_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    good = json.dumps(VALID) + "\n"
    path.write_text(good + json.dumps(VALID | {"seed": 1})[:30])
    cut = repair_truncated(path)
    assert cut is not None and cut.line == 2 and cut.nbytes == 30
    assert path.read_text() == good
    assert repair_truncated(path) is None and path.read_text() == good


def test_repair_keeps_a_complete_last_object_without_newline(tmp_path):
    path = tmp_path / "r.jsonl"
    content = json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1})
    path.write_text(content)
    assert repair_truncated(path) is None and path.read_text() == content


def test_writer_refuses_to_append_after_an_incomplete_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID)[:20])
    with pytest.raises(DataError, match="repair_truncated"):
        RecordWriter(path)


def test_writer_terminates_a_complete_last_line_before_appending(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(VALID))
    with RecordWriter(path) as w:
        w.write_batch([VALID | {"seed": 1}])
    assert [r.seed for r in read_records(path)] == [0, 1]


def test_writer_validates_before_writing(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w, pytest.raises(DataError, match="outcome"):
        w.write_batch([VALID, VALID | {"outcome": "maybe"}])
    assert path.read_bytes() == b""


def test_existing_keys_for_resume(tmp_path):
    path = lines(tmp_path / "r.jsonl", [VALID, VALID | {"seed": 4}])
    assert existing_keys(path) == {("gsm8k", "q1", 0, 0), ("gsm8k", "q1", 4, 0)}
    assert existing_keys(tmp_path / "absent.jsonl") == set()


def test_directory_reads_every_record_file_in_name_order(tmp_path):
    lines(tmp_path / "b.jsonl", [VALID | {"seed": 2}])
    lines(tmp_path / "a.jsonl", [VALID | {"seed": 1}])
    (tmp_path / "notes.txt").write_text("ignored")
    rs = read_records(tmp_path)
    assert [r.seed for r in rs] == [1, 2]
    assert rs.origin(1) == f"{tmp_path / 'b.jsonl'}:1"


def test_empty_directory_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no record files"):
        read_records(tmp_path)


def test_parquet_export_reads_the_same_records(tmp_path):
    rows = [VALID | {"output_tokens": 12}, VALID | {"seed": 1}]  # the second lacks output_tokens: NaN
    pd.DataFrame(rows).to_parquet(tmp_path / "r.parquet")
    assert list(read_records(tmp_path / "r.parquet")) == [Record.from_dict(r) for r in rows]


def test_csv_export_reads_the_same_records_and_names_the_line(tmp_path):
    rows = [VALID | {"latency_s": 0.5}, VALID | {"seed": 1}]
    pd.DataFrame(rows).to_csv(tmp_path / "r.csv", index=False)
    assert list(read_records(tmp_path / "r.csv")) == [Record.from_dict(r) for r in rows]
    pd.DataFrame([VALID, VALID | {"seed": "x"}]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError) as exc:
        read_records(tmp_path / "bad.csv")
    assert (exc.value.line, exc.value.field, exc.value.value) == (3, "seed", "x")


def test_repair_reads_back_past_a_long_incomplete_line(tmp_path):
    # the incomplete line (150 kB of output) is longer than the 64 kB blocks read from the end
    path = tmp_path / "r.jsonl"
    good = json.dumps(VALID) + "\n" + json.dumps(VALID | {"seed": 1}) + "\n"
    path.write_text(good + json.dumps(VALID | {"seed": 2, "output": "x" * 150_000})[:-2])
    cut = repair_truncated(path)
    assert (cut.line, path.read_text()) == (3, good)


def test_a_later_record_of_a_key_supersedes_its_error_record(tmp_path):
    err = {**VALID, "outcome": "error", "error": "timeout"}
    path = lines(tmp_path / "r.jsonl", [err, {**VALID, "question_id": "q2"}, {**VALID, "outcome": "incorrect"}])
    recs = read_records(path)
    assert [(r.question_id, r.outcome) for r in recs] == [("q2", "correct"), ("q1", "incorrect")]
    assert recs.superseded == (f"{path}:1",) and recs.origin(1) == f"{path}:3"


def test_a_key_repeated_after_a_non_error_record_stays_a_duplicate(tmp_path):
    from qualgate.verdict.pairing import pair_records

    path = lines(tmp_path / "r.jsonl", [VALID, {**VALID, "outcome": "error", "error": "x"}])
    assert len(read_records(path)) == 2 and read_records(path).superseded == ()
    with pytest.raises(DataError, match="duplicated keys"):
        pair_records(read_records(path), read_records(path))


TOKENS = {"token_ids": [5, 0, 17], "top2_margins": [0.25, 0.0, 1.0]}


def test_token_ids_and_top2_margins_round_trip_through_jsonl_parquet_and_csv(tmp_path):
    rows = [VALID | TOKENS, VALID | {"seed": 1}]
    lines(tmp_path / "r.jsonl", rows)
    pd.DataFrame(rows).to_parquet(tmp_path / "r.parquet")
    pd.DataFrame(rows).to_csv(tmp_path / "r.csv", index=False)
    expected = [Record.from_dict(r) for r in rows]
    assert expected[0].token_ids == [5, 0, 17] and expected[0].top2_margins == [0.25, 0.0, 1.0]
    for name in ("r.jsonl", "r.parquet", "r.csv"):
        assert list(read_records(tmp_path / name)) == expected
    assert Record.from_dict(rows[0]).to_dict() == rows[0]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("token_ids", [1, -1], "a list of integers >= 0"),
        ("token_ids", [1, 2.0], "a list of integers >= 0"),
        ("token_ids", "1 2", "a list of integers >= 0"),
        ("token_ids", [True], "a list of integers >= 0"),
        ("top2_margins", [0.5, 1.5], r"a list of numbers in \[0, 1\]"),
        ("top2_margins", [float("nan")], r"a list of numbers in \[0, 1\]"),
        ("top2_margins", ["0.5"], r"a list of numbers in \[0, 1\]"),
        ("top2_margins", 0.5, r"a list of numbers in \[0, 1\]"),
    ],
)
def test_invalid_token_ids_or_top2_margins_are_refused_naming_the_field(tmp_path, field, value, says):
    with pytest.raises(DataError, match=says) as exc:
        Record.from_dict(VALID | {field: value})
    assert exc.value.field == field
    assert not _rows_valid([VALID | {field: value}])
    assert _rows_valid([VALID | TOKENS])
