"""One bound per quantity: the gate's interval and upper bound of the loss (issue 36 items 7, 8)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qualgate.stats import ClusteredTable, noninferiority
from qualgate.verdict.scope import PASS, analyze


def one_seed(both_correct, lost, gained, both_wrong):
    base = np.array([1] * both_correct + [1] * lost + [0] * gained + [0] * both_wrong, bool)
    cand = np.array([1] * both_correct + [0] * lost + [1] * gained + [0] * both_wrong, bool)
    return ClusteredTable.from_outcomes(np.arange(len(base)), base, cand)


@pytest.mark.slow
def test_the_upper_bound_does_not_depend_on_the_margin_tested():
    # issue 36 item 7: the bound was a root search bracketed by the margin, so a p-value that
    # is not monotone in the loss gave a different root per margin (demo: -1.411 points at
    # five margins, -1.329 at 0.05). Now: one bound per table, the largest loss not rejected.
    rng = np.random.default_rng(36)
    for _ in range(6):
        n = int(rng.integers(40, 260))
        lost, gained = (int(x) for x in rng.integers(0, max(2, n // 12), 2))
        bounds = {
            noninferiority(n - lost - gained, lost, gained, 0, margin=m).upper_bound
            for m in (0.01, 0.02, 0.03, 0.05, 0.07, 0.10)
        }
        assert len(bounds) == 1, (n, lost, gained, bounds)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(5, 60),
    lost=st.integers(0, 12),
    gained=st.integers(0, 12),
    margin=st.sampled_from([0.01, 0.05, 0.2]),
)
def test_no_row_has_two_intervals_of_the_loss_that_disagree_on_the_margin_or_zero(n, lost, gained, margin):
    # issue 36 item 8: 9 pairs, 3 lost, 0 gained printed "90% CI diff [-60.17, -2.52]" (Tango)
    # beside "loss UB 95% 66.25" (exact). The row's interval is now the one-seed test inverted
    # on both sides, so its lower end is minus the bound: they exclude the margin and 0 together,
    # and excluding the margin is exactly a PASS.
    lost, gained = min(lost, n), min(gained, n - min(lost, n))
    a = analyze(one_seed(n - lost - gained, lost, gained, 0), margin=margin, alpha=0.05)
    low, high = a.ci_difference
    assert low == -a.loss_upper_bound and low <= high
    assert (low > -margin) == (a.loss_upper_bound < margin) == (a.verdict == PASS)
    assert (a.pvalue_noninferiority < 0.05) == (a.verdict == PASS)
    assert (low > 0) == (a.loss_upper_bound < 0)
    assert a.methods["interval"] == "exact-inverted"


def test_the_issues_nine_pairs_show_one_interval_and_name_each_columns_test(write, table):
    from click.testing import CliRunner

    from qualgate.cli import cli

    b, c = table(6, 3, 0, 0)
    args = ["gate", str(write("b.jsonl", b)), str(write("c.jsonl", c, config="cfg-c")), "--margin", "0.05"]
    args.append("--wide")  # the columns the line names (the 100-column table shows counts and the bound)
    out = CliRunner().invoke(cli, args, env={"GITHUB_STEP_SUMMARY": ""}).output
    a = analyze(one_seed(6, 3, 0, 0), margin=0.05)
    assert a.ci_difference[0] == -a.loss_upper_bound  # was -0.6017 against 0.6625
    assert a.ci_difference[1] > 0  # the interval no longer excludes 0 while p loss is 0.125
    assert "columns: p loss from the exact McNemar test; p NI, CI diff and loss UB from the exact" in out
