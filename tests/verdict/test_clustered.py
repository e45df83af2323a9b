"""Question-level (clustered) tests: reductions to the unclustered tests, exactness, design effect."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from qualgate.stats import (
    ClusteredTable,
    clustered_difference_ci,
    clustered_mcnemar,
    clustered_noninferiority,
    design_effect,
    mcnemar,
    noninferiority,
    paired_difference_ci,
    stratified_score_test,
)
from qualgate.stats._cluster_variance import robust_z, sandwich_variance

cells = st.tuples(*[st.integers(0, 60)] * 4).filter(lambda c: sum(c) > 0)


def unclustered(both_correct, lost, gained, both_wrong):
    b = [1] * (both_correct + lost) + [0] * (gained + both_wrong)
    c = [1] * both_correct + [0] * lost + [1] * gained + [0] * both_wrong
    return ClusteredTable.from_outcomes(np.arange(len(b)), b, c)


@settings(max_examples=80)
@given(cells, st.sampled_from(["less", "greater", "two-sided"]))
def test_sign_flip_test_with_one_pair_per_question_is_exact_mcnemar(c, alternative):
    t = unclustered(*c)
    assert clustered_mcnemar(t, alternative=alternative).pvalue == pytest.approx(
        mcnemar(c[1], c[2], alternative=alternative).pvalue, rel=1e-9, abs=1e-15
    )


@settings(max_examples=60)
@given(cells, st.sampled_from([0.01, 0.02, 0.05, 0.1]))
def test_noninferiority_with_design_effect_one_is_the_score_test(c, margin):
    ours = clustered_noninferiority(unclustered(*c), margin=margin, design_effect=1)
    ref = noninferiority(*c, margin=margin, method="score")
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
    assert ours.upper_bound == pytest.approx(ref.upper_bound, abs=1e-9)
    assert ours.noninferior == ref.noninferior


@settings(max_examples=60)
@given(cells)
def test_interval_with_design_effect_one_is_tango(c):
    ours = clustered_difference_ci(unclustered(*c), confidence_level=0.9, design_effect=1)
    assert ours == pytest.approx(paired_difference_ci(*c, confidence_level=0.9, method="tango"), abs=1e-9)


def test_sign_flip_p_value_equals_enumeration_of_all_sign_vectors():
    # five questions with d_k = (+2, -1, +3, 0, -2): enumerate the 2^4 sign patterns of the
    # non-zero ones; 'less' counts T = sum(s_k |d_k|) <= observed T = gained - lost = -2
    d = [2, -1, 3, 0, -2]
    cluster, b, c = [], [], []
    for k, dk in enumerate(d):
        for _ in range(abs(dk)):
            cluster.append(k)
            b.append(dk > 0)
            c.append(dk < 0)
        cluster += [k, k]
        b += [True, False]
        c += [True, False]
    t = ClusteredTable.from_outcomes(cluster, b, c)
    nz = [abs(x) for x in d if x]
    ts = [sum(s * a for s, a in zip(signs, nz)) for signs in itertools.product([1, -1], repeat=len(nz))]
    observed = -sum(d)
    assert clustered_mcnemar(t, alternative="less").pvalue == pytest.approx(np.mean([x <= observed for x in ts]))
    assert clustered_mcnemar(t, alternative="greater").pvalue == pytest.approx(np.mean([x >= observed for x in ts]))


@pytest.mark.slow
def test_sign_flip_is_exact_under_the_null_by_simulation():
    # 4,000 clustered data sets under exchangeability; exact test: P(p <= 0.05) <= 0.05 + 3 MC SE
    rng = np.random.default_rng(5)
    rejections = 0
    for _ in range(4000):
        absd = rng.binomial(3, 0.05, size=80)
        signs = rng.choice([-1, 1], size=80)
        counts = tuple(int(np.sum(absd == j)) for j in (1, 2, 3))
        lost = int(np.sum(absd[signs > 0]))
        gained = int(np.sum(absd[signs < 0]))
        t = ClusteredTable(80, 240, 0, lost, gained, 0, 0, 0, 0, counts, 3)
        rejections += clustered_mcnemar(t, alternative="less").pvalue <= 0.05
    assert rejections / 4000 <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000)


def test_design_effect_is_the_cluster_size_under_perfect_correlation():
    # every question's three seeds agree: 20 lost and 10 gained questions of 200
    cluster = np.repeat(np.arange(200), 3)
    b = np.repeat(np.r_[np.ones(20), np.zeros(10), np.ones(170)], 3).astype(bool)
    c = np.repeat(np.r_[np.zeros(20), np.ones(10), np.ones(170)], 3).astype(bool)
    t = ClusteredTable.from_outcomes(cluster, b, c)
    # by hand: loss 0.05, naive 90 - 600*0.0025 = 88.5, robust 200/199*(270 - 2*0.05*90 + 0.0025*1800)
    assert t.design_effect == pytest.approx(200 / 199 * (270 - 9 + 4.5) / 88.5)
    assert t.design_effect == pytest.approx(3, rel=0.02)


def test_design_effect_is_about_one_for_independent_seeds():
    rng = np.random.default_rng(0)
    cluster = np.repeat(np.arange(3000), 3)
    b = rng.random(9000) < 0.8
    c = b ^ (rng.random(9000) < 0.06)
    assert ClusteredTable.from_outcomes(cluster, b, c).design_effect == pytest.approx(1, abs=0.1)


def test_without_discordance_the_bound_lies_between_independent_pairs_and_one_seed():
    # 300 pairs in 100 questions, none discordant: no better than 300 independent pairs and no
    # worse than the same 100 questions with one seed each (more pairs never hurt). With no
    # discordance the seeds' correlation cannot be estimated and the question-level variance
    # takes it as perfect (issue 36), so the three seeds count as one: equal, not better
    t = ClusteredTable.from_outcomes(np.repeat(np.arange(100), 3), [True] * 300, [True] * 300)
    one_seed = ClusteredTable.from_outcomes(np.arange(100), [True] * 100, [True] * 100)
    bound = clustered_noninferiority(t, margin=0.02).upper_bound
    assert clustered_noninferiority(t, margin=0.02, design_effect=1).upper_bound < bound
    assert bound == pytest.approx(clustered_noninferiority(one_seed, margin=0.02).upper_bound, abs=1e-12)


def test_clustering_widens_the_bound():
    cluster = np.repeat(np.arange(400), 3)
    b = np.repeat(np.r_[np.ones(12), np.zeros(6), np.ones(382)], 3).astype(bool)
    c = np.repeat(np.r_[np.zeros(12), np.ones(6), np.ones(382)], 3).astype(bool)
    t = ClusteredTable.from_outcomes(cluster, b, c)
    assert (
        clustered_noninferiority(t, margin=0.02).upper_bound
        > clustered_noninferiority(t, margin=0.02, design_effect=1).upper_bound
    )


def test_design_effect_is_vectorised():
    out = design_effect([300, 300], [9, 0], [3, 0], [100, 100], [36, 0], [18, 0], [900, 900])
    assert out.tolist() == pytest.approx([36 / 11.88, 3.0])


def test_design_effect_form_divides_the_score_statistic_by_its_square_root():
    t = unclustered(500, 14, 6, 80)
    r = clustered_noninferiority(t, margin=0.02, design_effect=1.7)
    plain = noninferiority(500, 14, 6, 80, margin=0.02, method="score")
    assert r.statistic == pytest.approx(plain.statistic / np.sqrt(1.7))
    assert r.pvalue == pytest.approx(stats.norm.cdf(plain.statistic / np.sqrt(1.7)))


def test_stratified_test_with_one_stratum_is_the_score_test_at_zero():
    t = unclustered(500, 14, 6, 80)
    r = stratified_score_test([t], weights=[1.0], design_effect=1, alternative="less")
    assert r.statistic == pytest.approx((6 - 14) / np.sqrt(20))  # McNemar's z at loss 0


def test_equal_weights_bound_lies_between_the_strata_bounds():
    a, b = unclustered(300, 12, 2, 86), unclustered(300, 3, 5, 92)
    both = clustered_noninferiority([a, b], margin=0.02, weights=[0.5, 0.5], design_effect=1)
    single = [clustered_noninferiority(t, margin=0.02, design_effect=1) for t in (a, b)]
    assert both.loss == pytest.approx((12 - 2) / 400 / 2 + (3 - 5) / 400 / 2)
    assert min(s.loss for s in single) < both.loss < max(s.loss for s in single)
    assert both.upper_bound > both.loss


def test_invalid_arguments_name_the_argument():
    t = unclustered(10, 1, 1, 10)
    with pytest.raises(ValueError, match="margin"):
        clustered_noninferiority(t, margin=0)
    with pytest.raises(ValueError, match="alternative"):
        clustered_mcnemar(t, alternative="worse")
    with pytest.raises(ValueError, match="weights"):
        clustered_noninferiority([t, t], margin=0.02, weights=[0.9, 0.9])


# Obuchowski NA. On the comparison of correlated proportions for clustered data. Stat Med
# 1998;17:1495-1507: PET vs SPECT on the parathyroid glands of 21 patients (true negatives per
# gland). Per-patient counts (both negative, PET only, SPECT only, neither), as distributed with
# the R package clust.bin.pair (data `thyroids`, whose documented example prints
# "Obuchowski's Chi-square test: chi-square = 2.8571, df = 1, p-value = 0.09097").
_THYROIDS = (
    (0, 2, 3, 1, 2, 4, 3, 2, 1, 1, 2, 2, 3, 2, 0, 2, 2, 2, 2, 1, 2),  # a_k
    (0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),  # b_k
    (2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0),  # c_k
    (1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0),  # d_k
)


def test_score_test_at_zero_reproduces_obuchowskis_worked_example():
    # the clustered tests' sandwich variance at loss 0 is Obuchowski's K/(K-1)·Σ d_k², so
    # (B - C)² / R(0) is her statistic: (20/21)·36/12 = 2.857 (tolerance 1e-4, the print's
    # digits). The test's variance is never below it (issue 36 added the question-level
    # variance, larger here: 6 of the 21 thyroids carry all the discordance)
    cluster, base, cand = [], [], []
    for k, cells in enumerate(zip(*_THYROIDS)):
        for (b, c), count in zip(((1, 1), (1, 0), (0, 1), (0, 0)), cells):
            cluster += [k] * count
            base += [bool(b)] * count
            cand += [bool(c)] * count
    t = ClusteredTable.from_outcomes(np.array(cluster), np.array(base), np.array(cand))
    assert (t.clusters, t.n, t.lost, t.gained) == (21, 51, 1, 7)
    r0 = sandwich_variance(t.n, t.lost, t.gained, t.clusters, t.sum_d2, 0.0)
    assert (t.lost - t.gained) ** 2 / r0 == pytest.approx(2.8571, abs=1e-4)
    r = stratified_score_test([t], weights=[1.0])  # the two-sided score test at loss 0
    assert r.statistic**2 <= 2.8571 and r.pvalue >= 0.09097


def test_clustered_size_at_small_n_stays_below_alpha_where_the_design_effect_test_did_not():
    # issue 14's model: difficulty Beta(0.4, 0.1), shared noise (the candidate can only lose),
    # the loss on hard questions, expected loss = the 2-point margin; 100 questions x 3 seeds.
    # The former design-effect test passed 0.074 of these; 4,000 simulated gates here, the
    # limit is alpha + 3 Monte Carlo SE (benchmarks/gate_calibration.py runs the full grid)
    rng = np.random.default_rng(14)
    reps, questions, seeds, margin = 4000, 100, 3, 0.02
    p = rng.beta(0.4, 0.1, size=(reps, questions))
    hard = p * (p < 0.9)
    delta = hard * margin / np.mean(hard)
    lost = rng.binomial(seeds, np.minimum(delta, p))
    d = lost.astype(float)
    arrays = (questions * seeds, lost.sum(1), 0.0, questions, (d * d).sum(1), d.sum(1), 0.0, (d * d).sum(1) / seeds)
    crit = stats.norm.isf(0.05)
    passed = robust_z(arrays, delta=margin, crit=crit) < -crit  # the gate's statistic, vectorised over the gates
    assert passed.mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)
