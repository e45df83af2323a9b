"""The shared strict reader (qualgate.records.strict), and fuzzing of the record reader and the plan
loader: whatever the bytes, the only error is a DataError that names the file."""

from __future__ import annotations

import json
import os
import threading

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qualgate.config.decoding import load_plan
from qualgate.errors import DataError
from qualgate.records import Record, read_records
from qualgate.records import strict as _strict

VALID = {
    "schema_version": 1,
    "run_id": "r",
    "config_id": "c",
    "suite": "s",
    "suite_version": "1",
    "question_id": "q1",
    "seed": 0,
    "sample_index": 0,
    "outcome": "correct",
    "prompt_hash": "h",
}


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    done = []
    worker = threading.Thread(target=lambda: done.append(pytest.raises(DataError, _strict.read_bytes, fifo)))
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # unblock the reader before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO blocked")
    assert "FIFO" in str(done[0].value) and str(fifo) in str(done[0].value)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused_before_any_byte_is_read(device):
    with pytest.raises(DataError, match="character device"):
        _strict.read_bytes(device)


def test_a_file_over_its_kind_limit_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_text("a: 1\n" * 100)
    monkeypatch.setitem(_strict.LIMITS, "yaml", 100)
    with pytest.raises(DataError, match="over the 100 byte limit"):
        _strict.load_yaml(path)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x1f\x8b\x08\x00", "gzip"),
        ("{}".encode("utf-16"), "UTF-16 text (byte-order mark FF FE)"),
        ("{}".encode("utf-32"), "UTF-32"),
        ('{"a": 1}'.encode("utf-16-le"), "UTF-16 without a byte-order mark"),
        (b"\xef\xbb\xbf{}", "byte-order mark (EF BB BF)"),
        (b'{"a":\n"\xff"}', "not valid UTF-8: byte 0xff"),
        (b"ab\x00cd", "NUL byte at offset 2"),
    ],
)
def test_bytes_that_are_not_utf8_text_are_named_for_what_they_are(data, says):
    with pytest.raises(DataError) as exc:
        _strict.decode_text(data, file="f.json")
    assert says in str(exc.value) and "f.json" in str(exc.value)


def test_a_utf8_bom_is_stripped_only_when_asked():
    assert _strict.decode_text(b"\xef\xbb\xbfa: 1", file="f", bom="strip") == "a: 1"


@pytest.mark.parametrize(
    ("text", "says", "field"),
    [
        ('{"outcome": "incorrect", "outcome": "correct"}', "duplicate key 'outcome'", "outcome"),
        ('{"x": NaN}', "NaN is not a JSON number", None),
        ('{"x": -Infinity}', "-Infinity is not a JSON number", None),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply", None),
        ('{"x": "\\udc00"}', "lone surrogate", None),
    ],
)
def test_json_that_json_loads_would_accept_silently_is_refused(text, says, field):
    with pytest.raises(DataError) as exc:
        _strict.loads_json(text, file="f.json")
    assert says in str(exc.value) and exc.value.field == field


def test_json_keeps_escaped_surrogate_pairs():
    assert _strict.loads_json('{"x": "\\ud83d\\ude00"}') == {"x": "\U0001f600"}


@pytest.mark.parametrize(
    ("text", "says", "line", "field"),
    [
        ("a: 1\nb: 2\na: 3\n", "duplicate key (first at line 1", 3, "a"),
        ("s:\n  t: .nan\n", "'.nan' is not a finite number", 2, "s.t"),
        ("l: [1, -.inf]\n", "'-.inf' is not a finite number", 1, "l[1]"),
        ("n: " + "9" * 41 + "\n", "an integer of 41 digits", 1, "n"),
        ("a: &x [1]\nb: *x\n", "an anchor (&x)", 1, None),
        ("b: !!binary aGk=\n", "could not determine a constructor", 1, None),
        ("x: " + "[" * 65 + "]" * 65 + "\n", "nested deeper than 64", 1, None),
    ],
)
def test_yaml_refusals_name_the_line_and_key(text, says, line, field):
    with pytest.raises(DataError) as exc:
        _strict.loads_yaml(text, file="c.yaml")
    assert says in str(exc.value)
    assert (exc.value.file, exc.value.line, exc.value.field) == ("c.yaml", line, field)


def test_a_yaml_alias_bomb_is_refused_at_the_first_anchor_in_milliseconds():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
    )
    with pytest.raises(DataError, match="anchors and aliases are not allowed"):
        _strict.loads_yaml(bomb)


def test_yaml_dates_stay_strings():
    assert _strict.loads_yaml("name: 2024-01-31\n") == {"name": "2024-01-31"}


# --------------------------------------------------------------------------- fuzzing

_values = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json_values = st.recursive(
    _values, lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=4), v, max_size=3), max_leaves=6
)


@st.composite
def _record_lines(draw):
    """A valid record, then some of its fields replaced, removed or repeated, as raw text."""
    rec = dict(VALID)
    for name in draw(st.lists(st.sampled_from(sorted(VALID) + ["output", "latency_s", "extra"]), max_size=3)):
        rec[name] = draw(_json_values)
    for name in draw(st.lists(st.sampled_from(sorted(VALID)), max_size=2)):
        rec.pop(name, None)
    text = json.dumps(rec)  # NaN and Infinity are written as the bare tokens
    if draw(st.booleans()):  # a repeated key
        name = draw(st.sampled_from(sorted(rec) or ["x"]))
        text = text[:-1] + f', "{name}": {json.dumps(draw(_json_values))}}}'
    return text


_junk = st.binary(max_size=40) | st.sampled_from([b"\r", b"\n", b"[", b"{", b"\xef\xbb\xbf", b"\x1f\x8b", b"\x00"])


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(_record_lines(), min_size=1, max_size=4),
    junk=st.lists(st.tuples(st.integers(0, 400), _junk), max_size=2),
)
def test_fuzzed_record_files_are_read_or_refused_with_a_data_error(tmp_path, lines, junk):
    data = bytearray(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    for at, piece in junk:
        data[at:at] = piece
    path = tmp_path / "r.jsonl"
    path.write_bytes(bytes(data))
    try:
        records = read_records(path)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    for r in records:  # whatever was accepted is a valid record
        assert Record.from_dict(r.to_dict()) == r


_PLAN_KEYS = ["name", "suites", "seeds", "samples", "configs", "baseline", "candidates", "gate", "x"]
_yaml_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["base", "cand", "base.yaml", "../x", "demo_arithmetic"]),
    lambda v: (
        st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=6) | st.sampled_from(_PLAN_KEYS), v, max_size=3)
    ),
    max_leaves=8,
)
GOOD_PLAN = {"suites": ["demo_arithmetic"], "configs": {"base": "base.yaml", "cand": "base.yaml"}, "baseline": "base"}


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    changes=st.dictionaries(st.sampled_from(_PLAN_KEYS), _yaml_values, max_size=4), raw=st.none() | st.text(max_size=60)
)
def test_fuzzed_plans_load_or_are_refused_with_a_data_error(tmp_path, changes, raw):
    (tmp_path / "base.yaml").write_text("engine: reference\nmodel: m\nsampling: {max_tokens: 8}\n")
    plan = tmp_path / "plan.yaml"
    if raw is None:
        plan.write_text(yaml.safe_dump({**GOOD_PLAN, **changes}, allow_unicode=True))
    else:
        plan.write_text(raw, encoding="utf-8", errors="surrogatepass")
    try:
        loaded = load_plan(plan)
    except DataError as exc:
        assert str(plan) in str(exc) or "base.yaml" in str(exc)
        return
    assert loaded.baseline in loaded.configs and loaded.seeds and loaded.samples >= 1
