"""The sequential gate: valid under continuous monitoring, stops early, bounds agree with verdicts."""

import numpy as np
import pytest

from qualgate.stats._sequential import _FAIL, _FINAL, _PASS, _final_pass, _paths, sequential_noninferiority

# the simulated gate (vectorised over replicates) with the public defaults: power 0.8, discordant 0.1, prior_weight 20
SIM = {"beta": 0.2, "prior": 0.1, "weight": 20.0}


def draws(rng, reps, n, discordant, loss):
    """Per-question differences for one seed: -1 lost, +1 gained, 0 concordant."""
    lost, gained = (discordant + loss) / 2, (discordant - loss) / 2
    u = rng.random((reps, n))
    return np.where(u < lost, -1.0, np.where(u < lost + gained, 1.0, 0.0))


@pytest.mark.parametrize("discordant", [0.04, 0.10])
@pytest.mark.slow
def test_pass_rate_at_the_margin_is_at_most_alpha_under_continuous_monitoring(discordant):
    # Monte Carlo: 2,000 gates monitored after every question; the bound is Ville's
    # inequality, so the rate must not exceed alpha + 3 MC standard errors (0.05 + 0.0146).
    rng = np.random.default_rng(11)
    d = draws(rng, 2000, 2500, discordant, loss=0.02)
    _, reason, _, _ = _paths(d, margin=0.02, alpha=0.05, max_questions=None, **SIM)
    assert np.mean(reason == _PASS) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.slow
def test_fail_rate_without_loss_is_at_most_alpha():
    rng = np.random.default_rng(12)
    d = draws(rng, 2000, 2500, 0.06, loss=0.0)
    _, reason, _, _ = _paths(d, margin=0.02, alpha=0.05, max_questions=None, **SIM)
    assert np.mean(reason == _FAIL) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


def test_a_good_candidate_passes_before_the_data_run_out():
    rng = np.random.default_rng(0)
    d = draws(rng, 1, 3000, 0.06, loss=-0.01)[0]
    r = sequential_noninferiority(d, margin=0.02)
    assert r.verdict == "PASS" and r.n_questions < 3000
    assert r.upper_bound < 0.02


def test_a_clearly_lossy_candidate_stops_long_before_the_fixed_sample_size():
    # fixed-n non-inferiority at 6% discordance needs ~930 questions (alpha 0.05, power 0.8)
    rng = np.random.default_rng(1)
    d = draws(rng, 1, 3000, 0.06, loss=0.06)[0]
    r = sequential_noninferiority(d, margin=0.02)
    assert r.verdict in ("FAIL", "INCONCLUSIVE") and r.reason in ("fail", "futility")
    assert r.n_questions < 400


def test_fail_verdict_has_a_lower_bound_above_zero():
    d = np.array([-1.0] * 40 + [0.0] * 60)
    r = sequential_noninferiority(d, margin=0.02, power=0.999)
    assert r.verdict == "FAIL" and r.lower_bound > 0


def test_budget_stops_inconclusive_at_the_budget():
    d = np.zeros(500)
    r = sequential_noninferiority(d, margin=0.001, max_questions=100)
    assert (r.verdict, r.reason, r.n_questions) == ("INCONCLUSIVE", "budget", 100)


def test_running_out_of_data_is_reported_as_exhausted():
    r = sequential_noninferiority(np.zeros(50), margin=0.001)
    assert (r.verdict, r.reason, r.n_questions) == ("INCONCLUSIVE", "exhausted", 50)


def test_clustered_differences_are_accepted_as_question_means():
    # three seeds per question: differences in thirds
    rng = np.random.default_rng(3)
    d = rng.choice([-1 / 3, 0.0, 1 / 3], p=[0.05, 0.9, 0.05], size=4000)
    r = sequential_noninferiority(d, margin=0.02)
    assert r.verdict == "PASS"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"margin": 0}, "margin"),
        ({"margin": 0.02, "alpha": 0.6}, "alpha"),
        ({"margin": 0.02, "power": 1.0}, "power"),
        ({"margin": 0.02, "max_questions": 0}, "max_questions"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sequential_noninferiority(np.zeros(3), **kwargs)


def test_differences_outside_minus_one_one_are_rejected():
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        sequential_noninferiority([0.0, 2.0], margin=0.02)


@pytest.mark.slow
def test_with_a_budget_power_stays_within_3_points_of_the_fixed_gate_on_that_budget():
    # issue 14: the futility rule sized for 80 % power gave up power whatever the budget. Same
    # simulated data for both gates (one seed, 6 % discordance, no loss, budget 800 questions);
    # the fixed gate is the exact test on all 800 at full alpha.
    rng = np.random.default_rng(21)
    d = draws(rng, 1500, 800, 0.06, loss=0.0)
    _, reason, _, _ = _paths(d, margin=0.02, alpha=0.05, max_questions=800, **SIM)
    sequential = np.mean((reason == _PASS) | (reason == _FINAL))
    fixed = np.mean(_final_pass(d, pairs=None, margin=0.02, alpha=0.05))
    assert fixed > 0.6
    assert sequential >= fixed - 0.03


@pytest.mark.slow
def test_with_a_budget_the_pass_rate_at_the_margin_is_at_most_alpha():
    rng = np.random.default_rng(22)
    d = draws(rng, 2000, 600, 0.06, loss=0.02)
    _, reason, _, _ = _paths(d, margin=0.02, alpha=0.05, max_questions=600, **SIM)
    assert np.mean((reason == _PASS) | (reason == _FINAL)) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.slow
def test_a_budgeted_gate_can_pass_at_the_budget_with_the_fixed_test_and_its_bound():
    # 800 questions, 24 lost and 24 gained spread evenly: the always-valid boundary at alpha/50
    # is out of reach (about margin²/(2·6 %) = 0.003 of log-capital a question), but the exact
    # fixed-n test at the budget bounds the loss near 1.645·sqrt(0.06/800) = 1.4 points
    d = np.zeros(800)
    d[8::32], d[24::32] = -1.0, 1.0
    r = sequential_noninferiority(d, margin=0.02, max_questions=800)
    assert (r.verdict, r.reason, r.n_questions) == ("PASS", "final", 800)
    assert 0.01 < r.upper_bound < 0.02
    # several seeds: the clustered fixed-n test, with the pairs per question
    r3 = sequential_noninferiority(d / 3, margin=0.02, max_questions=800, pairs=np.full(800, 3))
    assert r3.verdict == "PASS" and r3.upper_bound < 0.02
    with pytest.raises(ValueError, match="pairs"):
        sequential_noninferiority(d, margin=0.02, max_questions=10, pairs=np.zeros(800))


def test_a_budgeted_gate_fed_a_prefix_of_its_budget_neither_tests_finally_nor_drops_for_futility():
    # the harness feeds rounds (complete=False until the last): with 100 of a 1,900-question
    # budget seen, the final test is not due and futility is judged against the budget (a
    # loss-0 candidate, 3 pairs/question)
    import numpy as np

    from qualgate.stats import sequential_noninferiority

    rng = np.random.default_rng(1)
    d = rng.choice([-1.0, 0.0, 1.0], p=[0.05, 0.9, 0.05], size=(1900, 3)).mean(axis=1)
    early = sequential_noninferiority(d[:100], margin=0.02, max_questions=1900, pairs=3, complete=False)
    assert (early.verdict, early.reason, early.n_questions) == ("INCONCLUSIVE", "exhausted", 100)
    full = sequential_noninferiority(d, margin=0.02, max_questions=1900, pairs=3)
    assert full.verdict == "PASS" and full.n_questions < 1900
