"""The declarative validator of the YAML inputs: each rule refuses what it should, naming where."""

from __future__ import annotations

import math

import pytest

from qualgate.errors import DataError
from qualgate.records.yaml_schema import AnyOf, Bool, Choice, Field, Int, ListOf, Mapping, Number, Str, Where

AT = Where("in.yaml", "x")


def refusal(spec, value, where=AT) -> DataError:
    with pytest.raises(DataError) as info:
        spec.check(value, where)
    return info.value


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_not_an_integer(value):
    err = refusal(Int(), value)
    assert (err.file, err.field, err.value, err.message) == ("in.yaml", "x", value, "must be an integer")


@pytest.mark.parametrize("value", [1.0, "1", None, [1]])
def test_an_integer_is_an_int_and_nothing_else(value):
    assert refusal(Int(), value).message == "must be an integer"


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        (Int(min=1), 0, "must be an integer >= 1"),
        (Int(max=3), 4, "must be an integer <= 3"),
        (Int(min=1, max=3), 4, "must be an integer from 1 to 3"),
    ],
)
def test_integer_bounds_are_inclusive_and_named(spec, value, message):
    assert refusal(spec, value).message == message
    assert spec.check(value - 1 if value else 1, AT) in (1, 2, 3)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "0.5", None])
def test_a_number_is_finite_and_not_a_bool(value):
    assert refusal(Number(), value).message == "must be a finite number"


@pytest.mark.parametrize(
    ("spec", "refused", "taken", "message"),
    [
        (Number(0, 1, low_open=True), 0, 1, "must be a finite number in (0, 1]"),
        (Number(0, 1, high_open=True), 1, 0, "must be a finite number in [0, 1)"),
        (Number(low=0), -0.5, 0, "must be a finite number >= 0"),
        (Number(low=0, low_open=True), 0.0, 1e-9, "must be a finite number > 0"),
        (Number(high=2), 2.5, 2, "must be a finite number <= 2"),
    ],
)
def test_a_range_end_is_open_or_closed_as_declared(spec, refused, taken, message):
    assert refusal(spec, refused).message == message
    assert spec.check(taken, AT) == taken


def test_bool_takes_only_true_and_false():
    assert Bool().check(False, AT) is False
    assert refusal(Bool(), 0).message == "must be true or false"
    assert refusal(Bool(), "yes").value == "yes"


@pytest.mark.parametrize("value", ["", "  ", 3, None])
def test_a_non_empty_string_refuses_blank_and_non_strings(value):
    assert refusal(Str(), value).message == "must be a non-empty string"


def test_an_empty_string_may_be_allowed_and_a_pattern_must_match_whole():
    assert Str(empty=True).check("", AT) == ""
    assert refusal(Str(empty=True), 1).message == "must be a string"
    assert Str(pattern="[a-z]+").check("abc", AT) == "abc"
    err = refusal(Str(pattern="[a-z]+"), "abc1")
    assert (err.message, err.value) == ("must match [a-z]+", "abc1")


def test_a_choice_names_the_valid_values_and_does_not_take_true_for_one():
    spec = Choice((1, "a"))
    assert spec.check(1, AT) == 1
    assert refusal(spec, True).message == "must be one of [1, 'a']"
    assert refusal(spec, "b").value == "b"
    assert refusal(spec, [1]).value == [1]  # unhashable values are compared, not looked up


def test_a_list_checks_each_item_at_its_index():
    spec = ListOf(Int(min=0))
    assert spec.check([0, 2], AT) == [0, 2]
    err = refusal(spec, [0, 1, -1])
    assert (err.field, err.value, err.message) == ("x[2]", -1, "must be an integer >= 0")
    assert refusal(spec, (0,)).message == "must be a list"


def test_a_list_may_be_required_non_empty_bounded_and_without_repeats():
    assert refusal(ListOf(Int(), empty=False), []).message == "must be a non-empty list"
    assert refusal(ListOf(Int(), max_items=2), [1, 2, 3]).value == [1, 2, 3]
    err = refusal(ListOf(Int(), unique=True), [1, 2, 1])
    assert (err.field, err.message) == ("x", "a value is listed twice")
    assert ListOf(unique=True).check([1, 1.5, "1"], AT) == [1, 1.5, "1"]


def test_any_of_takes_the_first_spec_that_fits_else_its_own_message():
    spec = AnyOf((Int(min=1), ListOf(Int())), message="a count or a list")
    assert spec.check(3, AT) == 3 and spec.check([0, -4], AT) == [0, -4]
    err = refusal(spec, [True])
    assert (err.field, err.value, err.message) == ("x", [True], "a count or a list")
    assert refusal(AnyOf((Int(), Bool())), "s").message == "must be an integer or must be true or false"


SPEC = Mapping(
    {
        "n": Field(Int(min=1), default=1),
        "name": Field(Str(), required=True),
        "opt": Field(Str(), null=True),
        "inner": Field(Mapping({"k": Field(ListOf(Number(0, 1)))})),
    }
)


def test_a_mapping_fills_defaults_and_keeps_the_documents_order():
    got = SPEC.check({"opt": None, "name": "a"}, Where("f.yaml"))
    assert got == {"opt": None, "name": "a", "n": 1}
    assert list(got) == ["opt", "name", "n"]


def test_an_unknown_key_is_refused_naming_the_key_its_value_and_the_valid_keys():
    err = refusal(SPEC, {"name": "a", "nme": "b"}, Where("f.yaml"))
    assert (err.file, err.field, err.value) == ("f.yaml", "nme", "b")
    assert err.message == "unknown key; valid keys: ['n', 'name', 'opt', 'inner']"
    assert str(err) == "f.yaml: field 'nme' = 'b': unknown key; valid keys: ['n', 'name', 'opt', 'inner']"


def test_an_unknown_key_message_is_the_readers_own_and_may_leave_the_value_out():
    spec = Mapping({"a": Field()}, unknown="unknown key (valid: a)", unknown_value=False)
    err = refusal(spec, {"b": 1}, Where("f.yaml"))
    assert str(err) == "f.yaml: field 'b': unknown key (valid: a)"


def test_a_missing_required_key_is_named():
    err = refusal(SPEC, {"n": 2}, Where("f.yaml"))
    assert (err.field, err.message) == ("name", "required key is missing")
    spec = Mapping({"a": Field(Int(), required=True, null=True, missing="give a")})
    assert refusal(spec, {"a": None}, Where("f.yaml")).message == "give a"


def test_nested_errors_name_the_dotted_path_and_the_line():
    lines = {"sub.inner.k[1]": 7}
    where = Where("f.yaml", "sub", lines.get)
    err = refusal(SPEC, {"name": "a", "inner": {"k": [0.5, math.nan]}}, where)
    assert (err.field, err.line) == ("sub.inner.k[1]", 7)
    assert str(err).startswith("f.yaml:7: field 'sub.inner.k[1]' = nan: must be a finite number in [0, 1]")


def test_null_is_refused_unless_the_field_allows_it():
    assert refusal(SPEC, {"name": "a", "n": None}, Where("f.yaml")).field == "n"
    assert SPEC.check({"name": "a", "opt": None}, Where("f.yaml"))["opt"] is None


def test_free_form_mappings_check_keys_and_values():
    spec = Mapping(keys=Str(pattern="[a-z]+"), values=Int(), empty=False)
    assert spec.check({"a": 1}, AT) == {"a": 1}
    assert refusal(spec, {}).message == "must be a non-empty mapping"
    err = refusal(spec, {"A": 1})
    assert (err.field, err.value) == ("x", "A")
    assert refusal(spec, {"a": "1"}).field == "x.a"
    assert Mapping(other=True).check({"any": object}, AT) == {"any": object}
    assert refusal(Mapping(), {"any": 1}).field == "x.any"


def test_a_non_mapping_is_refused_with_the_readers_message():
    err = refusal(Mapping(message="a config must be a mapping"), [1], Where("f.yaml", "cfg"))
    assert (err.field, err.value, err.message) == ("cfg", [1], "a config must be a mapping")


def test_at_the_documents_root_the_message_shows_the_value_cut_short():
    err = refusal(Mapping(message="the document must be a mapping"), "x" * 10_000, Where("f.yaml"))
    assert err.field is None and str(err).startswith("f.yaml: the document must be a mapping, not 'xxx")
    assert len(str(err)) < 120
