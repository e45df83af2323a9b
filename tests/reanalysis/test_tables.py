"""Reading tables: malformed ones are refused with their lines named; layout-only ones are
accepted and reported as missing; column spellings of the recovered files are understood."""

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualgate.errors import DataError
from qualgate.reanalysis import canonical_column, parse_number, reanalyze

HEADER = ["model", "platform", "dataset", "n", "target_correct", "standard_correct", "fly_correct"]
GOOD = [
    ["m", "p", "GSM8K", "250", "230", "229", "227"],
    ["m", "p", "AIME25", "30", "20", "20", "17"],
]


def write(tmp_path, rows, header=HEADER, name="t.csv"):
    path = tmp_path / name
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_missing_reference_count_column_is_named(tmp_path):
    header = [h for h in HEADER if h != "target_correct"]
    path = write(tmp_path, [r[:4] + r[5:] for r in GOOD], header)
    with pytest.raises(DataError, match="missing column.*target_correct") as exc:
        reanalyze(path)
    assert exc.value.field == "target_correct"


def test_missing_n_column_is_named(tmp_path):
    header = [h for h in HEADER if h != "n"]
    path = write(tmp_path, [r[:3] + r[4:] for r in GOOD], header)
    with pytest.raises(DataError, match=r"missing column.*n \(or n_questions\)"):
        reanalyze(path)


def test_count_above_n_names_line_and_column(tmp_path):
    rows = [GOOD[0], ["m", "p", "AIME25", "30", "20", "31", "17"]]
    with pytest.raises(DataError, match=r"line 3, column 'standard_correct' = '31': exceeds n = 30") as exc:
        reanalyze(write(tmp_path, rows))
    assert (exc.value.line, exc.value.field) == (3, "standard_correct")


def test_negative_value_names_line_and_column(tmp_path):
    rows = [["m", "p", "GSM8K", "250", "230", "-1", "227"], GOOD[1]]
    with pytest.raises(DataError, match=r"line 2, column 'standard_correct' = '-1': is negative"):
        reanalyze(write(tmp_path, rows))


def test_every_problem_is_listed_not_only_the_first(tmp_path):
    rows = [["m", "p", "GSM8K", "250", "251", "229", "x"], ["m", "p", "AIME25", "-30", "20", "20", "17"]]
    with pytest.raises(DataError) as exc:
        reanalyze(write(tmp_path, rows))
    msg = str(exc.value)
    assert msg.count("line ") == 3
    assert "'target_correct' = '251'" in msg and "'fly_correct' = 'x'" in msg and "'n' = '-30'" in msg


def test_negative_throughput_is_refused(tmp_path):
    header = HEADER + ["standard_tok_per_s", "fly_tok_per_s"]
    rows = [GOOD[0] + ["100", "-120"]]
    with pytest.raises(DataError, match=r"line 2, column 'fly_tok_per_s'.*negative"):
        reanalyze(write(tmp_path, rows, header))


def test_a_table_with_no_known_columns_is_refused(tmp_path):
    with pytest.raises(DataError, match="no recognised columns"):
        reanalyze(write(tmp_path, [["a", "b"]], ["x", "y"]))


def test_layout_only_accuracy_table_is_accepted_and_reported(shared_dir):
    r = reanalyze(shared_dir / "published" / "fly_pr53987_accuracy.csv")
    assert r.cells == () and r.totals == () and r.requirements == ()
    assert any(m.startswith("32 of 32 rows have no counts") for m in r.missing)
    assert "value_status: not_found (32 rows)" in r.missing


def test_layout_only_throughput_table_keeps_the_pair_ranges_once(shared_dir):
    r = reanalyze(shared_dir / "published" / "fly_pr53987_throughput.csv")
    # 48 rows = 8 pairs x 6 batch sizes; each pair's docs range is repeated on its 6 rows
    assert len(r.speed.ranges) == 8 and r.speed.count == 0
    assert (r.speed.range_low, r.speed.range_high) == (1.041, 1.310)
    assert any(m.startswith("48 of 48 rows have no speed-up") for m in r.missing)


def test_speedup_ranges_exclude_rows_not_against_standard_sd():
    from qualgate.reanalysis import published_path

    r = reanalyze(published_path("fly_pr53987_speedup_ranges"))
    kimi = [x for x in r.speed.ranges if "Kimi" in x.label]
    assert [x.included for x in kimi] == [False] and kimi[0].baseline == "dflash"
    # the 14 standard-SD ranges span 1.041 (Qwen3.8-27B, B300) to 1.938 (Llama-405B, MI355X)
    assert (sum(x.included for x in r.speed.ranges), r.speed.range_low, r.speed.range_high) == (14, 1.041, 1.938)


def test_extra_modes_are_analysed_like_the_others(tmp_path):
    header = HEADER + ["block_correct"]
    rows = [GOOD[0] + ["231"], GOOD[1] + ["20"]]
    r = reanalyze(write(tmp_path, rows, header))
    assert r.modes == ("target", "standard", "fly", "block")
    block = {t.mode: t for t in r.totals}["block"]
    assert (block.correct, block.net_answers) == (251, 1)


def test_another_reference_mode_can_be_chosen(tmp_path):
    r = reanalyze(write(tmp_path, GOOD), reference="standard")
    assert r.modes[0] == "standard"
    # FLy vs standard: (227 - 229) + (17 - 20) = -5 answers
    assert {t.mode: t.net_answers for t in r.totals}["fly"] == -5


def test_min_retention_is_solved_for_the_counts_that_print_it():
    from qualgate.reanalysis import published_path

    r = reanalyze(published_path("fly_pr53987_v2_min_retention"))
    (d,) = r.derived
    # 96.43% at n = 30: 27/28 = 0.964286 is the only a/b with b <= 30 in [0.96425, 0.96435];
    # 96.30%: 26/27 = 0.962963 in [0.96295, 0.96305]. One answer in 30 = -3.33 points.
    assert [c.count_pairs for c in d.checks] == [((27, 28),), ((26, 27),)]
    assert d.checks[0].implied_gap_points == pytest.approx(-100 / 30)
    # band at 28/30: 1.96*sqrt(2*0.93333*0.06667/30) = 1.96*0.064406 = 0.12624
    assert d.checks[0].implied_band_points == pytest.approx(12.624, abs=0.002)


def test_recovered_column_spellings_map_to_canonical_names():
    assert [
        canonical_column(c)
        for c in (
            "target_raw",
            "retention_raw",
            "fly_over_sd_x",
            "standard_sd_output_tok_per_s",
            "standard_draft_acceptance_pct",
            "fly_acceptance_rate_pct",
            "standard_sd_acceptance_length",
            "speedup_min_x_vs_standard_sd",
            "pair_speedup_max_x_docs",
            "target_draft",
        )
    ] == [
        "target_printed",
        "retention_printed",
        "speedup_x",
        "standard_tok_per_s",
        "standard_acceptance_pct",
        "fly_acceptance_pct",
        "standard_tau",
        "speedup_min_x",
        "pair_speedup_max_x",
        "model",
    ]


def test_printed_figures_keep_their_rounding():
    pct = parse_number("99.1%")
    assert (pct.value, pct.half) == pytest.approx((0.991, 0.0005))
    assert parse_number("1.280").half == pytest.approx(0.0005)
    frac = parse_number("20/30")
    assert (frac.count, frac.of, frac.half) == (20, 30, 0.0)
    assert parse_number("—") is None and parse_number("") is None
    with pytest.raises(ValueError, match="not a number"):
        parse_number("about 90")


@st.composite
def tables(draw):
    k = draw(st.integers(1, 6))
    rows = []
    for _ in range(k):
        n = draw(st.integers(1, 400))
        rows.append(
            {
                "dataset": f"d{draw(st.integers(0, 2))}",
                "n": n,
                **{f"{m}_correct": draw(st.integers(0, n)) for m in ("target", "standard", "fly")},
            }
        )
    return rows


@settings(max_examples=40)
@given(tables())
def test_pooled_net_answers_are_the_sum_of_cell_nets(rows):
    r = reanalyze(rows)
    for t in r.totals:
        assert t.net_answers == sum(g.net_answers for c in r.cells for g in c.gaps if g.mode == t.mode)
        assert sum(x.net_answers for d in r.by_dataset for x in d.modes if x.mode == t.mode) == t.net_answers
        assert t.cells_above + t.cells_below + t.cells_equal == t.cells == len(rows)


@settings(max_examples=40)
@given(tables(), st.integers(1, 50))
def test_any_count_above_n_is_refused(rows, excess):
    rows[-1]["fly_correct"] = rows[-1]["n"] + excess
    with pytest.raises(DataError, match=f"line {len(rows) + 1}, column 'fly_correct'"):
        reanalyze(rows)
