"""The columnar path (qualgate.records.columns): it accepts only files the strict reader accepts,
with the same values, and the gate gives the same report on both paths."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualgate.errors import DataError
from qualgate.records import Record, read_records
from qualgate.records.columns import KEPT, columns_of, read_columns
from qualgate.verdict.pairing import ColumnarRecordSet, load_side, pair_records


def _row(i: int, **extra) -> dict:
    row = {
        "schema_version": 1,
        "run_id": "run-1",
        "config_id": "cfg",
        "suite": "gsm8k",
        "suite_version": "1",
        "question_id": f"q{i}",
        "seed": 7,
        "sample_index": 0,
        "outcome": ("correct", "incorrect", "no_answer")[i % 3],
        "prompt_hash": f"sha256:{i:064x}",
        "mode": "fly",
        "answer_strict": str(i),
        "output": f"the answer is {i} é",
        "output_tokens": 3 + i,
        "latency_s": 0.25 * i,
        "token_ids": [i, 1, 2],
        "top2_margins": [0.5, 1, 0],
    }
    return row | extra


def _line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _strict(path):
    """The strict reader's records, or None when it refuses the file."""
    try:
        return read_records(path).records
    except DataError:
        return None


def _same_columns(table, records) -> None:
    expected = columns_of(list(records))
    for name in KEPT:
        assert table[name].to_pylist() == expected[name].to_pylist(), name


# Each mutation turns a valid file's text into another text; the strict reader decides
# whether it is valid (most are not), the columnar path may only agree or fall back.
_MUTATIONS = {
    "duplicate key": lambda t: t.replace('"mode":"fly"', '"mode":"fly","mode":"std"', 1),
    "duplicate key, same value": lambda t: t.replace('"seed":7', '"seed":7,"seed":7', 1),
    "NaN": lambda t: t.replace('"latency_s":0.25', '"latency_s":NaN', 1),
    "Infinity": lambda t: t.replace('"latency_s":0.25', '"latency_s":Infinity', 1),
    "1e400": lambda t: t.replace('"latency_s":0.25', '"latency_s":1e400', 1),
    "big int latency": lambda t: t.replace('"latency_s":0.25', '"latency_s":' + "9" * 30, 1),
    "2^63 count": lambda t: t.replace('"output_tokens":4', '"output_tokens":9223372036854775808', 1),
    "lone high surrogate": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":"\\ud800"', 1),
    "lone low surrogate": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":"x\\udc00"', 1),
    "surrogate pair": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":"\\ud83d\\ude00"', 1),
    "raw control character": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":"a\x01"', 1),
    "escaped NUL": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":"a\\u0000"', 1),
    "unknown field": lambda t: t.replace('"mode":"fly"', '"mode":"fly","extra":1', 1),
    "nested object": lambda t: t.replace('"mode":"fly"', '"mode":{"a":1}', 1),
    "object in a list": lambda t: t.replace('"token_ids":[1,1,2]', '"token_ids":[{},1]', 1),
    "two records on a line": lambda t: t.replace("}\n{", "}{", 1),
    "two records on a line, comma": lambda t: t.replace("}\n{", "},{", 1),
    "a record over two lines": lambda t: t.replace(',"mode"', ',\n"mode"', 1),
    "over two lines and two on one": lambda t: t.replace(',"mode"', ',\n"mode"', 1).replace("}\n{", "}{", 1),
    "blank line": lambda t: t.replace("}\n{", "}\n\n{", 1),
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "leading space": lambda t: " " + t,
    "trailing space": lambda t: t.replace("}\n", "} \n", 1),
    "no final newline": lambda t: t[:-1],
    "torn last line": lambda t: t[:-20],
    "null required": lambda t: t.replace('"suite":"gsm8k"', '"suite":null', 1),
    "missing required": lambda t: t.replace('"suite":"gsm8k",', "", 1),
    "null optional": lambda t: t.replace('"mode":"fly"', '"mode":null', 1),
    "empty name": lambda t: t.replace('"run_id":"run-1"', '"run_id":""', 1),
    "empty text": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":""', 1),
    "unknown outcome": lambda t: t.replace('"outcome":"incorrect"', '"outcome":"wrong"', 1),
    "schema version 2": lambda t: t.replace('"schema_version":1', '"schema_version":2', 1),
    "negative count": lambda t: t.replace('"output_tokens":4', '"output_tokens":-4', 1),
    "negative seed": lambda t: t.replace('"seed":7', '"seed":-7', 1),
    "float for int": lambda t: t.replace('"seed":7', '"seed":7.0', 1),
    "exponent for int": lambda t: t.replace('"seed":7', '"seed":7e0', 1),
    "bool for int": lambda t: t.replace('"seed":7', '"seed":true', 1),
    "string for int": lambda t: t.replace('"seed":7', '"seed":"7"', 1),
    "number for string": lambda t: t.replace('"answer_strict":"1"', '"answer_strict":1', 1),
    "negative zero": lambda t: t.replace('"sample_index":0', '"sample_index":-0', 1),
    "negative latency": lambda t: t.replace('"latency_s":0.25', '"latency_s":-0.25', 1),
    "int latency": lambda t: t.replace('"latency_s":0.25', '"latency_s":3', 1),
    "null in a list": lambda t: t.replace('"token_ids":[1,1,2]', '"token_ids":[1,null]', 1),
    "negative token": lambda t: t.replace('"token_ids":[1,1,2]', '"token_ids":[-1]', 1),
    "margin over 1": lambda t: t.replace('"top2_margins":[0.5,1,0]', '"top2_margins":[1.5]', 1),
    "big int margin": lambda t: t.replace('"top2_margins":[0.5,1,0]', '"top2_margins":[' + "9" * 25 + "]", 1),
    "NaN margin": lambda t: t.replace('"top2_margins":[0.5,1,0]', '"top2_margins":[NaN]', 1),
    "empty lists": lambda t: t.replace('"token_ids":[1,1,2]', '"token_ids":[]', 1),
    "a JSON array line": lambda t: "[1,2]\n" + t,
    "escaped key": lambda t: t.replace('"mode":"fly"', '"m\\u006fde":"fly"', 1),
    "repeated key after retry": lambda t: (
        t + t.split("\n")[0].replace('"outcome":"correct"', '"outcome":"error"') + "\n"
    ),
    "an error record, then its retry": lambda t: (
        t.split("\n")[0].replace('"outcome":"correct"', '"outcome":"error"') + "\n" + t
    ),
}


def _valid_text(n: int = 4) -> str:
    return "".join(_line(_row(i)) + "\n" for i in range(n))


@pytest.mark.parametrize("name", sorted(_MUTATIONS))
def test_columnar_path_accepts_a_hostile_line_only_where_the_strict_reader_does(tmp_path, name):
    text = _MUTATIONS[name](_valid_text())
    assert text != _valid_text(), "the mutation changed nothing"
    path = tmp_path / "r.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    got, strict = read_columns(path), _strict(path)
    if got is not None:
        assert strict is not None, f"{name}: accepted on the columnar path, refused by the strict reader"
        _same_columns(got[0], strict)


@pytest.mark.parametrize(
    "raw",
    [
        b"\xef\xbb\xbf",  # a UTF-8 byte-order mark first
        b'{"x":"\xff"}\n',  # invalid UTF-8 (in an unknown field: any one line)
        b"\x00",
        b'{"a":"\xed\xa0\x80"}\n',  # a UTF-8-encoded surrogate
    ],
)
def test_columnar_path_leaves_bytes_that_are_not_utf8_text_to_the_strict_reader(tmp_path, raw):
    path = tmp_path / "r.jsonl"
    path.write_bytes(raw + _valid_text().encode() if raw.startswith(b"\xef") else _valid_text().encode() + raw)
    assert read_columns(path) is None
    assert _strict(path) is None


@pytest.mark.parametrize("surrogate", [b"\xed\xa0\x80", b"\xff"])
def test_invalid_utf8_inside_a_value_is_refused_on_both_paths(tmp_path, surrogate):
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        _valid_text().replace('"answer_strict":"1"', '"answer_strict":"@"').encode().replace(b"@", surrogate)
    )
    assert read_columns(path) is None
    assert _strict(path) is None


_MUTATION_NAMES = sorted(_MUTATIONS)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 12),
    mutations=st.lists(st.sampled_from(_MUTATION_NAMES), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_columnar_path_agrees_with_the_strict_reader_on_random_files(tmp_path_factory, n, mutations, seed):
    rng = random.Random(seed)
    rows = [_row(rng.randrange(1000)) for _ in range(n)]
    for row in rows:  # optional fields left out at random
        for name in ("mode", "answer_strict", "output", "output_tokens", "latency_s", "token_ids", "top2_margins"):
            if rng.random() < 0.3:
                del row[name]
    text = "".join(_line(r) + "\n" for r in rows)
    for name in mutations:
        text = _MUTATIONS[name](text)
    path = tmp_path_factory.mktemp("c") / "r.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    got, strict = read_columns(path), _strict(path)
    if got is not None:
        assert strict is not None
        _same_columns(got[0], strict)
    elif not mutations and len({(r["question_id"]) for r in rows}) == len(rows):
        pytest.fail("a canonical file without repeated keys fell back to the strict reader")


def test_canonical_records_take_the_columnar_path_with_their_digest(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(_valid_text(50), encoding="utf-8")
    table, digest = read_columns(path)
    import hashlib

    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert table.num_rows == 50 and table.column_names == list(KEPT)
    _same_columns(table, read_records(path).records)


def test_a_file_over_several_blocks_is_read_whole(tmp_path, monkeypatch):
    import qualgate.records.columns as columns

    monkeypatch.setattr(columns, "BLOCK", 1000)  # a line is about 400 bytes: blocks cut inside lines
    path = tmp_path / "r.jsonl"
    path.write_text(_valid_text(40), encoding="utf-8")
    table, _ = read_columns(path)
    _same_columns(table, read_records(path).records)


# --- Parquet ----------------------------------------------------------------------------------


def _parquet(path, table) -> object:
    pq.write_table(table, path)
    return path


def test_parquet_written_by_pandas_reads_as_the_strict_reader_reads_it(tmp_path):
    import pandas as pd

    rows = [_row(i) for i in range(6)]
    for r in rows[::2]:
        del r["output_tokens"], r["mode"]  # pandas: float64 with NaN, None
    frame = pd.DataFrame(rows).drop(columns=["token_ids", "top2_margins"])
    path = tmp_path / "r.parquet"
    frame.to_parquet(path)
    assert frame["output_tokens"].dtype == np.float64
    got, strict = read_columns(path), _strict(path)
    assert got is not None and strict is not None
    _same_columns(got[0], strict)


@pytest.mark.parametrize(
    "column, values",
    [
        ("seed", pa.array([True, False])),  # bool for an int
        ("seed", pa.array([1.5, 2.0])),  # a fraction for an int
        ("seed", pa.array([2**63, 1], pa.uint64())),  # over 64 bits
        ("latency_s", pa.array([float("inf"), 1.0])),
        ("latency_s", pa.array([-1.0, 1.0])),
        ("suite", pa.array([b"gsm8k", b"x"], pa.binary())),  # bytes for a string
        ("suite", pa.array(["gsm8k", None])),  # a required field missing
        ("suite", pa.array(["gsm8k", ""])),
        ("extra", pa.array([1, 2])),  # an unknown column
        ("top2_margins", pa.array([[float("nan")], [0.5]])),
        ("outcome", pa.array(["correct", "wrong"])),
    ],
)
def test_parquet_columns_the_strict_reader_refuses_are_never_accepted(tmp_path, column, values):
    table = pa.Table.from_pylist([_row(0), _row(1)])
    table = (
        table.set_column(table.column_names.index(column), column, values)
        if column in table.column_names
        else table.append_column(column, values)
    )
    path = _parquet(tmp_path / "r.parquet", table)
    got, strict = read_columns(path), _strict(path)
    assert strict is None, "the case is meant to be invalid"
    assert got is None


# --- pairing, flips and the audit on both paths -----------------------------------------------


def _side(tmp_path, name, rows) -> object:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(_line(r) + "\n" for r in rows), encoding="utf-8")
    return path


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    seeds=st.integers(1, 3),
    flip=st.floats(0, 1),
    drop=st.floats(0, 0.3),
    errors=st.floats(0, 0.2),
    seed=st.integers(0, 2**32 - 1),
)
def test_pairing_flips_and_audit_are_the_same_on_the_columnar_and_the_strict_path(
    tmp_path_factory, n, seeds, flip, drop, errors, seed
):
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("p")
    base, cand = [], []
    for i in range(n):
        for s in range(seeds):
            b = _row(i, seed=s, mode="target", config_id="b")
            c = _row(i, seed=s, config_id="c")
            if rng.random() < flip:
                c["outcome"] = "incorrect" if b["outcome"] == "correct" else "correct"
            if rng.random() < errors:
                c["outcome"], c["error"] = "error", "boom"
            if rng.random() < errors:
                b["outcome"] = "judge_error"
            if rng.random() < 0.3:
                c["output"] = "different"
            base.append(b)
            if rng.random() >= drop:
                cand.append(c)
    rng.shuffle(cand)
    bp, cp = _side(tmp, "b", base), _side(tmp, "c", cand)
    fast_b, fast_c = load_side(bp), load_side(cp)
    assert isinstance(fast_b, ColumnarRecordSet) and (isinstance(fast_c, ColumnarRecordSet) or not cand)
    slow_b, slow_c = list(read_records(bp)), list(read_records(cp))
    from qualgate.verdict.divergence import divergence_audit
    from qualgate.verdict.flips import find_flips

    assert find_flips(fast_b, fast_c) == find_flips(slow_b, slow_c)
    assert divergence_audit(fast_b, fast_c) == divergence_audit(slow_b, slow_c)
    opts = dict(on_missing="drop", max_errors=10**6)
    try:
        fast = pair_records(fast_b, fast_c, **opts)
    except DataError as exc:  # e.g. no pairs left: the same refusal on the strict path
        with pytest.raises(DataError) as slow_exc:
            pair_records(slow_b, slow_c, baseline_path=str(bp), candidate_path=str(cp), **opts)
        assert str(slow_exc.value) == str(exc)
        return
    slow = pair_records(slow_b, slow_c, baseline_path=str(bp), candidate_path=str(cp), **opts)
    for name in ("suite", "question", "baseline_correct", "candidate_correct", "baseline_no_answer", "imputed"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert (fast.suites, fast.notes, fast.dropped, tuple(fast.question_keys)) == (
        slow.suites,
        slow.notes,
        slow.dropped,
        tuple(slow.question_keys),
    )


def test_records_of_a_columnar_side_are_the_strict_readers_read_when_asked_for(tmp_path):
    path = _side(tmp_path, "b", [_row(i) for i in range(5)])
    side = load_side(path)
    assert isinstance(side, ColumnarRecordSet) and len(side) == 5
    assert tuple(side.records) == read_records(path).records
    assert isinstance(side.records[0], Record)


def test_a_columnar_side_whose_file_changed_since_reading_is_refused_when_its_records_are_read(tmp_path):
    path = _side(tmp_path, "b", [_row(i) for i in range(5)])
    side = load_side(path)
    path.write_text(path.read_text().replace('"answer_strict":"1"', '"answer_strict":"2"'), encoding="utf-8")
    with pytest.raises(DataError, match="changed since it was read"):
        list(side.records)


def test_duplicate_keys_on_the_columnar_path_name_both_lines(tmp_path):
    rows = [_row(i) for i in range(4)] + [_row(2)]
    path = _side(tmp_path, "b", rows)
    side = load_side(path)
    assert isinstance(side, ColumnarRecordSet)
    with pytest.raises(
        DataError, match=r"1 duplicated keys .* gsm8k/q2 seed 7 sample 0 at .*b.jsonl:3 and .*b.jsonl:5"
    ):
        pair_records(side, side)


def test_to_json_writes_what_json_dumps_with_an_indent_writes():
    from qualgate.formatting import json_ready, to_json

    value = {"a": [1, 2.5, {"b": None, "c": 'é\u2028"x\n'}], "e": [], "f": {}, "g": [[]], "h": 1e-07, "i": True}
    for indent in (1, 2, 4):
        assert to_json(value, indent=indent) == json.dumps(
            json_ready(value), indent=indent, ensure_ascii=False, allow_nan=False
        )


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
        max_leaves=20,
    )
)
def test_to_json_is_json_dumps_indented_on_any_json_value(value):
    from qualgate.formatting import json_ready, to_json

    assert to_json(value) == json.dumps(json_ready(value), indent=2, ensure_ascii=False, allow_nan=False)


# --- qualgate import qualgate RECORDS --out R.parquet -------------------------------------------


def _cli(*args):
    from click.testing import CliRunner

    from qualgate.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args], env={"GITHUB_STEP_SUMMARY": ""})


def test_records_converted_to_parquet_are_the_same_records_and_gate_the_same(tmp_path):
    rows_b = [_row(i, config_id="b", mode="target") for i in range(60)]
    rows_c = [_row(i, config_id="c", outcome="correct" if i % 7 else "incorrect") for i in range(60)]
    b, c = _side(tmp_path, "b", rows_b), _side(tmp_path, "c", rows_c)
    for p in (b, c):
        result = _cli("import", "qualgate", p, "--out", p.with_suffix(".parquet"))
        assert result.exit_code == 0, result.output
        assert read_records(p.with_suffix(".parquet")).records == read_records(p).records
        assert isinstance(load_side(p.with_suffix(".parquet")), ColumnarRecordSet)
    reports = []
    for suffix in (".jsonl", ".parquet"):
        result = _cli("gate", b.with_suffix(suffix), c.with_suffix(suffix), "--margin", "0.05", "--format", "json")
        assert result.exit_code in (0, 1), result.output
        doc = json.loads(result.stdout)
        reports.append(([{k: v for k, v in x.items() if k != "side"} for x in doc["candidates"]], doc["verdict"]))
    assert reports[0] == reports[1]


def test_converting_to_an_existing_parquet_file_is_refused(tmp_path):
    b = _side(tmp_path, "b", [_row(0)])
    out = tmp_path / "b.parquet"
    out.write_bytes(b"keep")
    result = _cli("import", "qualgate", b, "--out", out)
    assert result.exit_code == 2 and "exists" in result.output
    assert out.read_bytes() == b"keep"


def test_a_line_longer_than_arrows_block_is_read_on_the_columnar_path(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(_line(_row(0, output="x" * (3 << 20))) + "\n" + _valid_text(3), encoding="utf-8")
    got = read_columns(path)
    assert got is not None
    _same_columns(got[0], read_records(path).records)
