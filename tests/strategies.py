"""Reusable hypothesis strategies (import with ``from strategies import ...``)."""

from __future__ import annotations

from hypothesis import strategies as st

from qualgate.stats import PairedTable

#: a count of questions in one cell of a paired table
counts = st.integers(min_value=0, max_value=500)

#: the names of the ``alternative`` argument
alternatives = st.sampled_from(["two-sided", "less", "greater"])

mcnemar_methods = st.sampled_from(["exact", "midp", "asymptotic", "asymptotic-cc"])

ci_methods = st.sampled_from(
    ["tango", "newcombe", "wald", "wald-cc", "agresti-min", "bonett-price"]
)


@st.composite
def paired_tables(draw, max_count=500, min_n=0):
    """A :class:`PairedTable` with cells in [0, max_count] and at least ``min_n`` questions."""
    cells = draw(st.lists(st.integers(0, max_count), min_size=4, max_size=4).filter(
        lambda c: sum(c) >= min_n))  # fmt: skip
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
