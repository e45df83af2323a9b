"""qualgate.run.speed: the median interval against exact references, its coverage, and the interleaved schedule.

References for :func:`median_ci` (the binomial sign-test interval ``(x_(k), x_(n+1-k))``):

- exact rational arithmetic written out here (``math.comb`` over ``2**n``, no scipy): the
  largest ``k`` with ``2 * sum_{i<k} C(n, i) / 2**n <= 1 - level``, and the achieved level
  ``1 - 2 * sum_{i<k} C(n, i) / 2**n``; compared exactly (the function's level to 1e-12);
- ``scipy.stats.quantile_test(x, q, p=0.5).confidence_interval`` (an independent
  implementation of the same order-statistic interval), compared exactly;
- hand-derived values in the published tables of ranks and exact levels for the median's 95 %
  interval (Campbell MJ, Gardner MJ, BMJ 1988;296:1454-6; Conover 1999, Table A3): n = 9 → ranks
  2 and 8, level 1 − 2·10/512 = 96.1 %; n = 10 → 2 and 9, 1 − 2·11/1024 = 97.9 %; n = 20 → 6
  and 15, 1 − 2·21700/2**20 = 95.9 %; n = 30 → 10 and 21, 95.7 %; tolerance 0.0005 (the tables
  round to 0.1 %).

The scheduling tests use a virtual clock and generate functions that advance it: the unit
under test is the schedule and the arithmetic, not an engine.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from qualgate.run.speed import interleaved_speed, median_ci, speed_summary


def exact_rank(n: int, level: float) -> tuple[int, Fraction]:
    """(k, achieved level) of the sign-test interval, in exact arithmetic; k = 0: none exists."""
    tail = Fraction(1) - Fraction(level).limit_denominator(10**9)
    k, below = 0, Fraction(0)  # below = P(B <= k - 1)
    while k + 1 <= n // 2:
        nxt = below + Fraction(math.comb(n, k), 2**n)  # P(B <= k)
        if 2 * nxt > tail:
            break
        k, below = k + 1, nxt
    return k, 1 - 2 * below


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
def test_median_ci_ranks_and_level_match_exact_binomial_arithmetic(level):
    rng = np.random.default_rng(7)
    for n in [*range(1, 41), 50, 64, 99, 100]:
        x = rng.standard_normal(n)
        low, high, achieved = median_ci(x, level)
        k, exact_level = exact_rank(n, level)
        xs = np.sort(x)
        if k == 0:
            assert (low, high, achieved) == (-math.inf, math.inf, 1.0), n
        else:
            assert (low, high) == (xs[k - 1], xs[n - k]), n
            assert achieved == pytest.approx(float(exact_level), abs=1e-12)
            assert achieved >= level


@pytest.mark.parametrize("n", [6, 7, 9, 10, 11, 17, 20, 25, 30, 49, 50, 99, 100])
def test_median_ci_equals_scipy_quantile_test_interval(n):
    x = np.random.default_rng(n).exponential(size=n)
    ref = stats.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(0.95)
    low, high, _ = median_ci(x)
    assert (low, high) == (float(ref.low), float(ref.high))


@pytest.mark.parametrize(
    ("n", "ranks", "published_level"),
    [(9, (2, 8), 0.961), (10, (2, 9), 0.979), (20, (6, 15), 0.959), (30, (10, 21), 0.957)],
)
def test_median_ci_matches_published_table_of_ranks_and_levels(n, ranks, published_level):
    low, high, level = median_ci(range(1, n + 1))  # the values are their own ranks
    assert (low, high) == ranks
    assert level == pytest.approx(published_level, abs=0.0005)


def test_median_ci_of_ten_values_is_the_hand_computed_interval():
    # P(Binomial(10, 1/2) <= 1) = 11/1024; 2 * 11/1024 <= 0.05 but 2 * 56/1024 > 0.05
    assert median_ci(range(1, 11)) == (2.0, 9.0, 1 - 22 / 1024)


@pytest.mark.parametrize("n", [6, 9, 15, 30])
@pytest.mark.parametrize("dist", ["normal", "exponential", "cauchy"])
def test_median_ci_covers_the_true_median_at_least_at_the_nominal_level(n, dist):
    reps = 20_000
    rng = np.random.default_rng([n, len(dist)])
    draw = {
        "normal": (rng.standard_normal, 0.0),
        "exponential": (rng.exponential, math.log(2)),
        "cauchy": (rng.standard_cauchy, 0.0),
    }
    sample, median = draw[dist]
    x = np.sort(sample(size=(reps, n)), axis=1)
    low, high, level = median_ci(range(1, n + 1))  # the ranks of the interval's ends
    covered = (x[:, int(low) - 1] <= median) & (median <= x[:, int(high) - 1])
    for row in x[:20]:  # the function itself on samples picks the same order statistics
        assert median_ci(row)[:2] == (row[int(low) - 1], row[int(high) - 1])
    se = math.sqrt(level * (1 - level) / reps)
    assert covered.mean() >= 0.95 - 3 * se
    assert covered.mean() == pytest.approx(level, abs=4 * se)  # exact for continuous data


@pytest.mark.parametrize("n", [1, 2, 5])
def test_median_ci_is_unbounded_with_fewer_than_six_values_at_95(n):
    assert median_ci([1.0] * n) == (-math.inf, math.inf, 1.0)
    assert median_ci(range(6))[:2] == (0.0, 5.0)


def test_median_ci_with_five_values_is_finite_at_90_percent():
    # 2 * P(B(5, 1/2) = 0) = 1/16 <= 0.10
    assert median_ci([5, 1, 4, 2, 3], 0.9) == (1.0, 5.0, 1 - 1 / 16)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1])
def test_median_ci_rejects_a_level_outside_zero_one(level):
    with pytest.raises(ValueError, match="confidence_level"):
        median_ci([1, 2, 3, 4, 5, 6], level)


def test_median_ci_rejects_no_values():
    with pytest.raises(ValueError, match="at least one"):
        median_ci([])


class Out:
    def __init__(self, tokens):
        self.output_tokens = tokens


class VirtualMachine:
    """A clock and generate functions: config ``name`` takes ``cost[name] * slowdown(t)`` virtual
    seconds per batch and returns ``tokens`` tokens per request; every call is logged."""

    def __init__(self, cost, slowdown=lambda t: 1.0, tokens=10):
        self.t, self.cost, self.slowdown, self.tokens, self.calls = 0.0, cost, slowdown, tokens, []

    def clock(self):
        return self.t

    def generate(self):
        def make(name):
            def run(requests):
                self.calls.append((name, tuple(requests)))
                self.t += self.cost[name] * self.slowdown(self.t)
                return [Out(self.tokens) for _ in requests]

            return run

        return {name: make(name) for name in self.cost}


def test_interleaved_rounds_rotate_the_order_so_every_config_goes_first():
    vm = VirtualMachine({"base": 2.0, "a": 1.0, "b": 0.5})
    rounds = [[f"q{r}"] for r in range(7)]
    interleaved_speed(vm.generate(), rounds, baseline="base", clock=vm.clock)
    orders = [[name for name, _ in vm.calls[3 * r : 3 * r + 3]] for r in range(7)]
    names = ["base", "a", "b"]
    assert orders == [names[r % 3 :] + names[: r % 3] for r in range(7)]
    assert {o[0] for o in orders} == set(names)
    # every config gets the same batch within a round
    assert all(len({req for _, req in vm.calls[3 * r : 3 * r + 3]}) == 1 for r in range(7))


def test_interleaved_speedup_is_the_median_of_per_round_token_rate_ratios():
    vm = VirtualMachine({"base": 2.0, "fast": 0.5})
    res = interleaved_speed(vm.generate(), [[1, 2, 3]] * 9, baseline="base", clock=vm.clock)
    assert list(res) == ["fast"]
    r = res["fast"]
    assert r.tokens_per_s == (30 / 0.5,) * 9 and r.baseline_tokens_per_s == (30 / 2.0,) * 9
    assert r.speedup == 4.0 and r.confidence_interval == (4.0, 4.0) and r.rounds == 9
    assert r.warning is None


def test_interleaved_speedup_ignores_a_load_burst_that_naive_timing_reports():
    # the machine is 5x slower between virtual seconds 10 and 14: one round's ratio moves,
    # the median does not
    vm = VirtualMachine({"base": 2.0, "fast": 1.0}, slowdown=lambda t: 5.0 if 10 <= t < 14 else 1.0)
    r = interleaved_speed(vm.generate(), [[0]] * 9, baseline="base", clock=vm.clock)["fast"]
    assert r.speedup == 2.0
    assert sum(abs(x - 2.0) > 1e-9 for x in r.ratios) == 1
    lo, hi = r.confidence_interval
    assert lo <= 2.0 <= hi


def test_interleaved_speed_rejects_a_baseline_it_does_not_run():
    vm = VirtualMachine({"a": 1.0})
    with pytest.raises(ValueError, match="baseline 'base'"):
        interleaved_speed(vm.generate(), [[0]], baseline="base", clock=vm.clock)


def test_speed_summary_warns_when_the_interval_is_wider_than_the_stated_fraction():
    base = [100.0] * 9
    narrow = speed_summary("c", "b", [200, 201, 199, 200, 202, 198, 200, 201, 199], base)
    assert narrow.warning is None and narrow.speedup == 2.0
    wide = speed_summary("c", "b", [120, 300, 200, 150, 260, 180, 230, 140, 210], base)
    assert wide.confidence_interval == (1.4, 2.6)  # ranks 2 and 8 of nine ratios
    assert wide.warning is not None and "wider than 20%" in wide.warning
    assert (
        speed_summary("c", "b", [120, 300, 200, 150, 260, 180, 230, 140, 210], base, max_relative_width=0.7).warning
        is None
    )
    few = speed_summary("c", "b", [200, 200, 200], [100] * 3)
    assert few.confidence_interval == (-math.inf, math.inf) and "run more rounds" in few.warning


def test_speed_summary_refuses_a_round_without_baseline_tokens_clearly():
    with pytest.raises(ValueError, match="token"):
        speed_summary("c", "b", [100.0] * 7, [100.0] * 6 + [0.0])
