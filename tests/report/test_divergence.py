"""The divergence audit in the gate's text and the HTML page: identical outputs, the first
difference (tokens when records carry token_ids, else characters), the target's top-2 margin
there, and the greedy lossless expectation."""

from __future__ import annotations

import dataclasses

import pytest

from qualgate.records import Record
from qualgate.report.html import gate_html
from qualgate.verdict.divergence import divergence_audit
from qualgate.verdict.fixed import run_gate

import support


def record(i, output, *, config="cfg-b", mode="target", tokens=None, margins=None):
    return Record(
        1, "r", config, "gsm8k", "1", f"q{i}", 0, 0, "correct", f"p{i}", mode=mode, output=output,
        token_ids=tokens, top2_margins=margins,
    )  # fmt: skip


def token_pairs():
    """10 pairs: 6 identical; 4 first differing at tokens 0, 2, 5, 5, the target's margin there
    0.004, 0.5, 0.002, 0.9 (two near-ties below 0.01, two changed decisions)."""
    base, cand = [], []
    for i in range(6):
        toks = [1, 2, 3, 4, 5, 6, 7]
        base.append(record(i, "abcdefg", tokens=toks, margins=[0.3] * 7))
        cand.append(record(i, "abcdefg", config="cfg-c", mode="fly", tokens=toks, margins=[0.3] * 7))
    for i, (at, margin) in enumerate([(0, 0.004), (2, 0.5), (5, 0.002), (5, 0.9)], start=6):
        toks = [1, 2, 3, 4, 5, 6, 7]
        other = toks[:at] + [99] + toks[at + 1 :]
        margins = [0.3] * 7
        margins[at] = margin
        base.append(record(i, "abcdefg", tokens=toks, margins=margins))
        cand.append(record(i, "abcdefX", config="cfg-c", mode="fly", tokens=other, margins=[0.3] * 7))
    return base, cand


def test_the_audit_counts_identical_outputs_and_the_first_differing_token_with_its_margin():
    a = divergence_audit(*token_pairs())
    assert (a.pairs, a.identical, a.unit) == (10, 6, "token")
    assert a.first_difference == (0, 2, 5, 5)
    assert a.margins == (0.004, 0.5, 0.002, 0.9) and a.near_ties == 2
    # inverted-CDF quantiles of (0, 2, 5, 5): 10th -> 0, 50th -> 2, 90th -> 5 (by hand)
    assert a.quantiles() == (0.0, 2.0, 5.0)


def test_without_token_ids_the_audit_counts_characters_and_says_so():
    base, cand = token_pairs()
    strip = {"token_ids": None, "top2_margins": None}
    a = divergence_audit(
        [dataclasses.replace(r, **strip) for r in base], [dataclasses.replace(r, **strip) for r in cand]
    )
    assert a.unit == "character" and a.margins == ()
    assert a.first_difference == (6, 6, 6, 6)  # "abcdefg" against "abcdefX"


@pytest.mark.slow
def test_the_gate_text_and_the_html_page_show_the_audit(tmp_path):
    base, cand = token_pairs()
    b = support.write_records(tmp_path / "b.jsonl", base)
    c = support.write_records(tmp_path / "c.jsonl", cand)
    report = run_gate(b, [c], margin=0.05)
    text = str(report)
    assert "divergence, c: 60.0% of 10 pairs byte-identical; first difference at token 0 / 2 / 5" in text
    assert "2 of 4 at a near-tie (top-2 margin < 0.01: the target's numerics), 2 at a changed decision" in text
    page = gate_html(report.evidence(), b, [c])
    assert '<section id="divergence">' in page and '<td class="id">token</td>' in page and "2 / 4" in page


@pytest.mark.slow
def test_a_greedy_lossless_candidate_is_measured_against_all_identical(tmp_path):
    base, cand = token_pairs()
    cand = [dataclasses.replace(r, mode="standard") for r in cand]
    b = support.write_records(tmp_path / "b.jsonl", base)
    c = support.write_records(tmp_path / "c.jsonl", cand)
    text = str(run_gate(b, [c], margin=0.05, greedy=[True]))
    assert "lossless and greedy, so every output should be the baseline's: 4 of 10 (40.0%) differ, 2 of them" in text
    same = support.write_records(tmp_path / "same.jsonl", [dataclasses.replace(r, config_id="cfg-c") for r in base])
    assert "all 10 outputs identical, as expected" in str(run_gate(b, [same], margin=0.05, greedy=[True]))
    assert "lossless and greedy" not in str(run_gate(b, [c], margin=0.05))  # sampling unknown: no expectation
