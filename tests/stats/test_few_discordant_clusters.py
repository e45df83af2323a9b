"""The clustered test when the discordance sits in few questions, and with questions of unequal size (issue 36).

- Size: in the issue's model (each question loses all its seeds with probability 0.03 and gains
  all with 0.01, so the loss per pair is exactly the 2-point margin) the former sandwich-based
  test had exact size 0.0578 at 200 questions x 3 seeds. Every table is enumerated here (no
  Monte Carlo error) and decided by the gate's statistic; the size must be at most the level,
  at alpha and at Holm's smaller levels alpha/2 ... alpha/16.
- Agreeing data: pairs on which both sides agree, added to any question, never widen the upper
  bound (the former one-question floor used the largest question's size).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special, stats

from qualgate.stats import ClusteredTable, clustered_noninferiority
from qualgate.stats._cluster_variance import robust_z


def table(rows):
    """rows: per question (lost, gained, concordant) pair counts."""
    cluster, base, cand = [], [], []
    for k, (lost, gained, same) in enumerate(rows):
        cluster += [k] * (lost + gained + same)
        base += [True] * lost + [False] * gained + [True] * same
        cand += [False] * lost + [True] * gained + [True] * same
    return ClusteredTable.from_outcomes(np.array(cluster), np.array(base), np.array(cand))


def all_or_nothing_size(questions, seeds, level, p_lost=0.03, p_gained=0.01, margin=0.02):
    """Exact P(PASS): every question-level trinomial (L questions lost, G gained) enumerated."""
    lost, gained = np.arange(questions + 1)[:, None], np.arange(questions + 1)[None, :]
    rest = questions - lost - gained
    ok = rest >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (
            special.gammaln(questions + 1)
            - special.gammaln(lost + 1)
            - special.gammaln(gained + 1)
            - special.gammaln(np.maximum(rest, 0) + 1)
            + special.xlogy(lost, p_lost)
            + special.xlogy(gained, p_gained)
            + special.xlog1py(np.maximum(rest, 0), -(p_lost + p_gained))
        )
    prob = np.where(ok, np.exp(log_p), 0.0)
    L, G = lost + 0 * gained, gained + 0 * lost
    m = seeds
    arrays = (questions * m, m * L, m * G, questions, m * m * (L + G), m * L, m * G, m * (L + G))
    crit = stats.norm.isf(level)
    return float(prob[ok & (robust_z(arrays, margin, crit) < -crit)].sum())


@pytest.mark.parametrize(("questions", "seeds"), [(200, 3), (200, 10), (300, 10), (400, 3)])
def test_size_in_the_issues_all_or_nothing_model_is_at_most_the_level_down_to_alpha_over_16(questions, seeds):
    # the former test: 0.0578 (200 x 3 and x 10), 0.0545 (300 x 10), 0.0520 (400 x 3) at alpha 0.05
    for m in (1, 2, 4, 8, 16):
        assert all_or_nothing_size(questions, seeds, 0.05 / m) <= 0.05 / m


def test_the_enumeration_reproduces_the_issues_size_of_the_question_level_table():
    # cross-check of the enumeration on its own: the statistic is decided through the public API
    # on a few tables and agrees with the vectorised one (a PASS iff z < -crit)
    for lost, gained in [(0, 0), (1, 0), (2, 1), (5, 0)]:
        rows = [(3, 0, 0)] * lost + [(0, 3, 0)] * gained + [(0, 0, 3)] * (200 - lost - gained)
        r = clustered_noninferiority(table(rows), margin=0.02)
        L, G = float(lost), float(gained)
        arrays = (600, 3 * L, 3 * G, 200, 9 * (L + G), 3 * L, 3 * G, 3 * (L + G))
        crit = stats.norm.isf(0.05)
        assert r.statistic == pytest.approx(robust_z(arrays, 0.02, crit), abs=1e-12)


def test_the_issues_smallest_pass_table_no_longer_passes():
    # 200 questions x 3 seeds, one question lost in all its seeds, none gained: PASS before
    rows = [(3, 0, 0)] + [(0, 0, 3)] * 199
    assert not clustered_noninferiority(table(rows), margin=0.02).noninferior


def test_a_hundred_agreeing_samples_on_one_question_leave_the_bound_where_it_was():
    # issue 36: identical on 1,000 questions x 1 sample, UB 0.30 points (PASS); 99 agreeing
    # samples more on one question gave 24.7 (INCONCLUSIVE)
    one = clustered_noninferiority(table([(0, 0, 1)] * 1000), margin=0.02)
    more = clustered_noninferiority(table([(0, 0, 100)] + [(0, 0, 1)] * 999), margin=0.02)
    assert one.noninferior and more.noninferior
    assert more.upper_bound <= one.upper_bound + 1e-12


def test_one_large_question_does_not_widen_a_bound_with_symmetric_discordance():
    # 1,000 questions x 3 seeds, 3 % symmetric discordance: 0.93 points before, then 2.61 /
    # 7.83 / 25.2 when one question carried 30 / 100 / 300 pairs
    rows = [(1, 0, 2)] * 45 + [(0, 1, 2)] * 45 + [(0, 0, 3)] * 910
    base = clustered_noninferiority(table(rows), margin=0.02).upper_bound
    for size in (30, 100, 300):
        for k in (0, len(rows) - 1):  # a discordant and a concordant question grow
            lost, gained, _ = rows[k]
            grown = rows[:k] + [(lost, gained, size - lost - gained)] + rows[k + 1 :]
            assert clustered_noninferiority(table(grown), margin=0.02).upper_bound <= base + 1e-9


@st.composite
def tables_and_growth(draw):
    """Questions of 1-5 pairs each (unequal), the candidate not better (lost >= gained), a question
    and a number of agreeing pairs to add to it."""
    questions = draw(st.integers(2, 60))
    rows = []
    for _ in range(questions):
        size = draw(st.integers(1, 5))
        lost = draw(st.integers(0, size))
        gained = draw(st.integers(0, size - lost))
        rows.append((lost, gained, size - lost - gained))
    rows += [(0, 0, draw(st.integers(1, 5)))] * draw(st.integers(0, 300))
    k = draw(st.integers(0, len(rows) - 1))
    extra = draw(st.sampled_from([1, 3, 10, 99, 300]))
    margin = draw(st.sampled_from([0.01, 0.02, 0.05]))
    alpha = draw(st.sampled_from([0.05 / 16, 0.0125, 0.05]))
    return rows, k, extra, margin, alpha


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables_and_growth())
def test_adding_agreeing_pairs_to_any_question_never_widens_the_upper_bound(design):
    # Restricted to a question the candidate did not net-gain (lost_k >= gained_k): with
    # questions of unequal size each question's loss d_k/n_k counts once (issue 47), and agreeing
    # pairs added to a question that gained dilute its gain, so the estimate itself rises (as
    # with independent pairs, where agreeing pairs dilute a net gain). Any question may grow
    # here, sizes 1-5 become unequal, and the candidate may be better overall.
    # Tolerance 0.1 % of the bound: the question-level variance's all-or-nothing prior is in
    # pairs of the mean question, so a growing question moves the typical discordant size h a
    # hair towards 1 (largest widening found: 0.05 %, at a 34-point bound on 12 questions);
    # the issue's examples above do not widen at all
    rows, k, extra, margin, alpha = design
    lost, gained, same = rows[k]
    if lost < gained:
        return
    grown = rows[:k] + [(lost, gained, same + extra)] + rows[k + 1 :]
    before = clustered_noninferiority(table(rows), margin=margin, alpha=alpha)
    after = clustered_noninferiority(table(grown), margin=margin, alpha=alpha)
    assert after.upper_bound <= before.upper_bound * (1 + 1e-3) + 1e-9
    assert after.noninferior or not before.noninferior


@st.composite
def unequal_designs(draw):
    """Questions of unequal size (1 to 30 pairs), a question with a concordant pair to flip."""
    rows = []
    for _ in range(draw(st.integers(2, 60))):
        size = draw(st.sampled_from([1, 2, 3, 5, 10, 30]))
        lost = draw(st.integers(0, size))
        gained = draw(st.integers(0, size - lost))
        rows.append((lost, gained, size - lost - gained))
    rows += [(0, 0, draw(st.integers(1, 20)))] * draw(st.integers(0, 300))
    flippable = [k for k, r in enumerate(rows) if r[2] > 0]
    k = draw(st.sampled_from(flippable)) if flippable else None
    return rows, k, draw(st.sampled_from([0.01, 0.02, 0.05])), draw(st.sampled_from([0.1, 0.05, 0.0125, 0.05 / 16]))


def flip(rows, k, to):
    lost, gained, same = rows[k]
    new = (lost + 1, gained, same - 1) if to == "lost" else (lost, gained + 1, same - 1)
    return rows[:k] + [new] + rows[k + 1 :]


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unequal_designs())
def test_with_questions_of_unequal_size_a_lost_pair_never_lowers_the_bound_nor_a_gained_one_raises_it(design):
    # the question-level variance counts a question by its pairs (not as one unit whatever its
    # size), and the all-or-nothing prior keeps the typical discordant size from dropping at
    # the first thin flip: both were needed for this (tests/stats/test_monotone.py: equal sizes)
    rows, k, margin, alpha = design
    if k is None:
        return
    run = lambda r: clustered_noninferiority(table(r), margin=margin, alpha=alpha)  # noqa: E731
    before, lost, gained = run(rows), run(flip(rows, k, "lost")), run(flip(rows, k, "gained"))
    assert lost.upper_bound >= before.upper_bound - 1e-9
    assert gained.upper_bound <= before.upper_bound + 1e-9
    assert not (lost.noninferior and not before.noninferior)
    assert not (before.noninferior and not gained.noninferior)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [2, 3, 5, 10])
def test_the_first_lost_pair_of_an_identical_candidate_never_lowers_the_bound(seeds):
    # an identical candidate, then one lost pair: the typical discordant size moves from the
    # prior's 1 towards 1/seeds, and the bound must rise all the same
    for questions in (60, 200, 1000):
        for alpha in (0.05, 0.05 / 16):
            same = [(0, 0, seeds)] * questions
            before = clustered_noninferiority(table(same), margin=0.02, alpha=alpha).upper_bound
            after = clustered_noninferiority(table(flip(same, 0, "lost")), margin=0.02, alpha=alpha).upper_bound
            assert after >= before - 1e-12
