"""The sequential gate: valid under continuous monitoring, stops early, bounds agree with verdicts."""

import numpy as np
import pytest

from qualgate.stats._sequential import _paths, sequential_noninferiority


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
    _, reason, _, _ = _paths(d, 0.02, 0.05, 0.2, 0.1, 20.0, None)
    assert np.mean(reason == 1) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.slow
def test_fail_rate_without_loss_is_at_most_alpha():
    rng = np.random.default_rng(12)
    d = draws(rng, 2000, 2500, 0.06, loss=0.0)
    _, reason, _, _ = _paths(d, 0.02, 0.05, 0.2, 0.1, 20.0, None)
    assert np.mean(reason == 2) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)


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
