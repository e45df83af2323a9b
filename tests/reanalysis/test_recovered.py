"""The reanalysis of the recovered vLLM #53987 V1 table, checked against hand calculations.

Every expected value below is worked out by hand in the comment beside it from the counts
printed in the pull request (``qualgate/data/published/fly_pr53987_v1_eval.csv``): n,
target-only / standard SD / FLy correct answers per benchmark. z = 1.96 in the hand
calculations, 1.959964 in the code: tolerances allow for that.
"""

import math

import pytest

from qualgate.reanalysis import load_published, reanalyze

TABLE = "fly_pr53987_v1_eval"


@pytest.fixture(scope="module")
def result():
    return reanalyze(load_published(TABLE), source=TABLE)


def cell(result, dataset, model="DeepSeek-R1-Distill-Llama-70B"):
    (c,) = [c for c in result.cells if c.dataset == dataset and c.label.startswith(model)]
    return c


def gap(c, mode):
    (g,) = [g for g in c.gaps if g.mode == mode]
    return g


def total(result, mode):
    (t,) = [t for t in result.totals if t.mode == mode]
    return t


def derived(result, column):
    (d,) = [d for d in result.derived if d.column == column]
    return d


def test_gsm8k_band_and_gaps(result):
    c = cell(result, "GSM8K")
    # 230/250 = 0.92; 1.96*sqrt(2*0.92*0.08/250) = 1.96*0.024265 = 0.04756 -> 4.756 points
    assert c.reference_accuracy == 0.92
    assert c.band_points == pytest.approx(4.756, abs=0.002)
    # FLy (227-230)/250 = -1.2 points; standard (229-230)/250 = -0.4 points; both inside 4.756
    assert gap(c, "fly").gap_points == pytest.approx(-1.2)
    assert gap(c, "standard").gap_points == pytest.approx(-0.4)
    assert not gap(c, "fly").exceeds_band


def test_aime_2024_ten_point_drop_is_inside_the_band(result):
    c = cell(result, "AIME 2024")
    # 20/30 = 0.6667; 1.96*sqrt(2*(2/3)*(1/3)/30) = 1.96*0.121716 = 0.23856 -> 23.86 points
    assert c.band_points == pytest.approx(23.856, abs=0.005)
    # FLy 17/30 vs 20/30: -3/30 = -10.00 points, well inside +-23.86
    assert gap(c, "fly").gap_points == pytest.approx(-10.0)
    assert not gap(c, "fly").exceeds_band


def test_mbpp_largest_relative_gap_is_still_inside_the_band(result):
    c = cell(result, "MBPP")
    # 193/207 = 0.932367; 2*0.932367*0.067633/207 = 6.0926e-4; sqrt = 0.024683;
    # *1.96 = 0.048379 -> 4.838 points. FLy (188-193)/207 = -2.415 points.
    assert c.band_points == pytest.approx(4.838, abs=0.003)
    assert gap(c, "fly").gap_points == pytest.approx(-2.4155, abs=1e-4)
    assert not gap(c, "fly").exceeds_band


def test_no_gap_of_any_mode_exceeds_its_band(result):
    assert all(not g.exceeds_band for c in result.cells for g in c.gaps)
    assert len(result.cells) == 11


def test_spec_bench_uses_the_80_scored_prompts_as_n(result):
    c = cell(result, "Spec-Bench")
    # 480 prompts, 80 scored: 57/80 = 0.7125 (printed 71.3%), FLy 59/80: +2/80 = +2.5 points
    assert (c.n, c.reference_accuracy) == (80, 0.7125)
    assert gap(c, "fly").gap_points == pytest.approx(2.5)


def test_mean_absolute_gap_of_lossless_standard_is_the_noise_yardstick(result):
    # standard |gaps| in points: GSM8K 1/250=0.4, MGSM 0.4, MATH 3/150=2.0, AIME24 0, AIME25 0,
    # GPQA 4/148=2.7027, HumanEval 1/114=0.8772, MBPP 4/207=1.9324, Spec-Bench 0, HLE 0, HLE 0
    # sum 8.3123 / 11 = 0.7557
    assert total(result, "standard").mean_abs_gap_points == pytest.approx(0.7557, abs=1e-4)
    # FLy: 1.2 + 0.8 + 0.6667 + 10 + 10 + 0.6757 + 0 + 2.4155 + 2.5 + 1.5625 + 4.6875
    # = 34.5079 / 11 = 3.1371
    assert total(result, "fly").mean_abs_gap_points == pytest.approx(3.1371, abs=1e-4)


def test_pooled_totals_count_answers_against_target_only(result):
    # n: 250+250+150+30+30+148+114+207+80+64+64 = 1387
    # target 230+223+134+20+13+93+107+193+57+4+11 = 1085
    # standard 229+222+137+20+13+89+106+189+57+4+11 = 1077 (-8)
    # FLy 227+225+133+17+16+92+107+188+59+3+8 = 1075 (-10)
    std, fly = total(result, "standard"), total(result, "fly")
    assert (std.n, std.reference_correct, std.correct, std.net_answers) == (1387, 1085, 1077, -8)
    assert (fly.n, fly.correct, fly.net_answers) == (1387, 1075, -10)
    # cells above/below/equal: standard MATH-500 above; GSM8K, MGSM, GPQA, HumanEval, MBPP below
    assert (std.cells_above, std.cells_below, std.cells_equal) == (1, 5, 5)
    # FLy above on MGSM, AIME 2025, Spec-Bench; equal on HumanEval; the other seven below
    assert (fly.cells_above, fly.cells_below, fly.cells_equal) == (3, 7, 1)


def test_by_dataset_pools_the_two_hle_rows(result):
    (hle,) = [d for d in result.by_dataset if d.dataset == "HLE"]
    fly = {t.mode: t for t in hle.modes}["fly"]
    # HLE: 64 + 64 questions; target 4 + 11 = 15; FLy 3 + 8 = 11 (-4)
    assert (fly.cells, fly.n, fly.reference_correct, fly.correct) == (2, 128, 15, 11)


def test_printed_accuracies_are_reproduced_by_count_over_n(result):
    for mode in ("target", "standard", "fly"):
        d = derived(result, f"{mode}_printed")
        assert d.formula == f"{mode}_correct/n"
        assert (d.checked, d.mismatches) == (11, 0)


def test_retention_column_is_fly_over_standard_except_math500(result):
    d = derived(result, "retention_printed")
    # printed / fly-over-standard: GSM8K 227/229 = 0.99127 (99.1%), MGSM 225/222 = 1.01351
    # (101.4%), GPQA 92/89 = 1.03371 (103.4%), HumanEval 107/106 = 1.00943 (100.9%),
    # MBPP 188/189 = 0.99471 (99.5%), Spec-Bench 59/57 = 1.03509 (103.5%): 6 of the 7 printed
    # values (AIME rows print a dash). MATH-500 prints 99.3% but 133/137 = 0.97080 (97.1%).
    assert d.formula == "fly/standard"
    assert (d.checked, d.reproduced, d.mismatches) == (7, 6, 1)
    (bad,) = [c for c in d.checks if c.status == "mismatch"]
    assert bad.label.endswith("MATH-500") and bad.printed == "99.3%"
    assert bad.recomputed == pytest.approx(133 / 137)
    # 133/134 = 0.99254 -> 99.3%: the MATH-500 row is FLy relative to target-only
    assert bad.reproduced_by == ("fly/target",)


def test_every_flagged_mismatch_is_real(result):
    """A flagged value cannot be the column formula rounded; an unflagged one can."""
    raw = load_published(TABLE)
    flagged = 0
    for d in result.derived:
        for c in d.checks:
            if c.status != "mismatch":
                continue
            flagged += 1
            row = raw.iloc[c.line - 2]
            assert row[d.column] == c.printed
            # recompute the column formula independently from the raw CSV text
            num, den = d.formula.split("/")
            value = int(row[f"{num}_correct"]) / int(row[f"{den}_correct"])
            printed = float(c.printed.rstrip("%")) / 100
            decimals = len(c.printed.rstrip("%").split(".")[1])
            assert abs(value - printed) > 0.5 * 10 ** (-decimals) / 100
    assert flagged == 1


def test_speedups_off_by_rounding_of_printed_throughput_are_not_flagged(result):
    d = derived(result, "speedup_x")
    assert d.formula == "fly/standard tok/s" and d.mismatches == 0
    c = next(c for c in d.checks if c.label.endswith("MATH-500"))
    # 364/317 = 1.14826 rounds to 1.148, printed 1.147; with throughputs rounded to whole
    # tok/s the ratio lies in [363.5/317.5, 364.5/316.5] = [1.14488, 1.15166], which holds 1.147
    assert round(364 / 317, 3) != 1.147
    assert c.status == "within_input_rounding"
    assert sum(c.status == "within_input_rounding" for c in d.checks) == 6


def test_tau_ratio_column_is_reproduced(result):
    d = derived(result, "tau_ratio_x")
    # e.g. GPQA 10.35/6.58 = 1.57295 -> 1.57; AIME 2024 13.03/9.16 = 1.42249 -> 1.42
    assert (d.formula, d.checked, d.mismatches) == ("fly/standard tau", 9, 0)


def test_speed_range_median_and_rank_correlation(result):
    s = result.speed
    # speed-ups sorted: 1.147 1.161 1.177 1.188 1.222 1.223 1.280 1.347 1.467 -> median 1.222
    assert (s.count, s.low, s.high, s.median) == (9, 1.147, 1.467, 1.222)
    (tau,) = [c for c in s.correlations if c.gain == "fly/standard tau"]
    # ranks of speed-up (GSM8K..Spec-Bench in table order): 5 2 1 9 6 4 8 7 3
    # ranks of fly_tau/standard_tau (1.2676 1.2425 1.2921 1.4225 1.2923 1.5729 1.3100 1.3299
    # 1.1619):                                             3 2 4 8 5 9 6 7 1
    # sum d^2 = 4+0+9+1+1+25+4+0+4 = 48; rho = 1 - 6*48/(9*80) = 0.6
    assert tau.n == 9
    assert tau.spearman_rho == pytest.approx(0.6)


def test_acceptance_length_is_one_plus_fifteen_times_acceptance_rate(result):
    # GSM8K standard: (8.97 - 1)/0.531 = 15.009; FLy: (11.37 - 1)/0.692 = 14.986; every row
    # and mode agrees with K = 15 within the printed precision (rate 0.1%, length 0.01)
    assert result.speed.draft_length == (15,)
    assert result.speed.draft_length_pairs == 18


def test_mcnemar_sample_size_for_the_pooled_fly_loss(result):
    (req,) = [q for q in result.requirements if q.mode == "fly" and q.scope == "pooled" and q.discordance == 0.05]
    # loss 10/1387 = 0.0072098; Connor: n = (1.959964*sqrt(0.05) + 0.841621*sqrt(0.05 -
    # 0.0072098^2))^2 / 0.0072098^2 = (0.438261 + 0.188095)^2 / 5.1981e-5 = 7547.4 -> 7548
    assert req.loss == pytest.approx(10 / 1387)
    assert req.n_required == 7548


def test_sample_size_is_absent_when_discordance_is_below_the_loss(result):
    (req,) = [
        q for q in result.requirements if q.mode == "fly" and q.scope.endswith("AIME 2024") and q.discordance == 0.05
    ]
    # a 10-point loss needs at least 10% of questions discordant
    assert req.loss == pytest.approx(0.1) and req.n_required is None


def test_missing_speed_values_of_the_hle_rows_are_reported(result):
    assert any("2 of 11 rows have no speed-up" in m and "lines 11, 12" in m for m in result.missing)


def test_result_is_json_serialisable(result):
    import json

    d = json.loads(json.dumps(result.to_dict()))
    assert d["totals"][1]["net_answers"] == -10
    assert math.isclose(d["cells"][0]["band_points"], result.cells[0].band_points)
