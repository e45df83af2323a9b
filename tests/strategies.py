"""Reusable hypothesis strategies (import with ``from strategies import ...``)."""

from __future__ import annotations

from hypothesis import strategies as st

from qualgate.records import FIELDS
from qualgate.stats import PairedTable

#: a count of questions in one cell of a paired table
counts = st.integers(min_value=0, max_value=500)

#: the names of the ``alternative`` argument
alternatives = st.sampled_from(["two-sided", "less", "greater"])

mcnemar_methods = st.sampled_from(["exact", "midp", "asymptotic", "asymptotic-cc"])

ci_methods = st.sampled_from(["tango", "newcombe", "wald", "wald-cc", "agresti-min", "bonett-price"])


@st.composite
def paired_tables(draw, max_count=500, min_n=0):
    """A :class:`PairedTable` with cells in [0, max_count] and at least ``min_n`` questions."""
    cells = draw(st.lists(st.integers(0, max_count), min_size=4, max_size=4).filter(lambda c: sum(c) >= min_n))
    return PairedTable(*cells)


@st.composite
def boolean_outcomes(draw, max_size=200):
    """Two aligned lists of per-question correctness (baseline, candidate)."""
    size = draw(st.integers(0, max_size))
    pair = st.lists(st.booleans(), min_size=size, max_size=size)
    return draw(pair), draw(pair)


@st.composite
def mcnemar_designs(draw, min_loss=0.005):
    """(loss, discordant) with 0 < loss <= discordant <= 1 and loss >= ``min_loss``.

    ``min_loss`` bounds the sample sizes (and so the run time) of exact calculations.
    """
    discordant = draw(st.floats(min_value=max(min_loss, 0.01), max_value=1.0))
    loss = draw(st.floats(min_value=min_loss, max_value=discordant))
    return loss, discordant


@st.composite
def noninferiority_designs(draw):
    """(margin, discordant, expected_loss), |expected_loss| <= discordant and < margin."""
    margin = draw(st.floats(min_value=0.005, max_value=0.3))
    discordant = draw(st.floats(min_value=0.01, max_value=0.9))
    low = -discordant
    high = min(discordant, margin - 0.005)
    expected_loss = draw(st.floats(min_value=low, max_value=high)) if high > low else low
    return margin, discordant, expected_loss


_text = st.text(max_size=8)
_name = st.text(min_size=1, max_size=8)
_i64 = st.integers(-(2**63), 2**63 - 1)
_count = st.integers(0, 2**63 - 1)

#: a valid record row, as parsed from JSON: every required field and some optional ones
record_rows = st.fixed_dictionaries(
    {
        "schema_version": st.just(1),
        "run_id": _name,
        "config_id": _name,
        "suite": _name,
        "suite_version": _name,
        "question_id": _name,
        "seed": _i64,
        "sample_index": _count,
        "outcome": st.sampled_from(["correct", "incorrect", "no_answer", "error"]),
        "prompt_hash": _name,
    },
    optional={
        "mode": _text,
        "answer_strict": _text,
        "answer_lenient": _text,
        "decided_by": _text,
        "gold": _text,
        "output": _text,
        "output_tokens": _count,
        "spec_steps": _count,
        "draft_tokens": _count,
        "accepted_tokens": _count,
        "deferred_tokens": _count,
        "error": _text,
        "latency_s": st.floats(0, allow_nan=False, allow_infinity=False) | _count,
    },
)

#: values of every JSON type, and the edges of the record schema's types and ranges
odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=3),
    st.sampled_from(
        [
            0,
            1,
            2,
            -1,
            2**63 - 1,
            2**63,
            -(2**63),
            -(2**63) - 1,
            10**400,
            1.0,
            -0.0,
            -1e-300,
            float("nan"),
            float("inf"),
            float("-inf"),
            "",
            "1",
            "correct",
            "wrong",
            "Correct",
        ]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@st.composite
def near_valid_record_rows(draw):
    """A valid record row, or one with one thing changed: a field removed, or set to an odd
    value (another type, out of range, NaN, a bool for an int, ``None``, an unknown field), or
    the row replaced by another JSON value."""
    row = draw(record_rows)
    change = draw(st.sampled_from(["none", "remove", "set", "not an object"]))
    if change == "not an object":
        return draw(odd_values.filter(lambda v: not isinstance(v, dict)))
    name = draw(st.sampled_from([*FIELDS, "temperature"]))
    if change == "remove":
        row.pop(name, None)
    elif change == "set":
        row[name] = draw(odd_values)
    return row
