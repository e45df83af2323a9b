"""Pairing on (suite, question_id, seed, sample_index), and every refusal it owes."""

import dataclasses
import random

import numpy as np
import pytest

from qualgate.errors import DataError
from qualgate.verdict.pairing import IMPUTED_BASELINE, IMPUTED_ERROR, IMPUTED_MISSING, pair_records


def test_pairs_on_keys_not_row_order(records_of):
    base = records_of(["correct", "incorrect", "correct", "incorrect"])
    cand = records_of(["correct", "correct", "incorrect", "incorrect"], config="cfg-c")
    shuffled = cand[:]
    random.Random(3).shuffle(shuffled)
    p, q = pair_records(base, cand), pair_records(base, shuffled)
    assert np.array_equal(p.candidate_correct, q.candidate_correct)
    assert p.candidate_correct.tolist() == [True, True, False, False]


def test_no_answer_is_not_correct_and_counted_apart(records_of):
    p = pair_records(records_of(["correct", "correct"]), records_of(["no_answer", "incorrect"], config="c"))
    assert p.candidate_correct.tolist() == [False, False]
    assert p.candidate_no_answer.tolist() == [True, False]


def test_duplicated_keys_are_refused_with_count_and_place(records_of):
    base = records_of(["correct"] * 3)
    with pytest.raises(DataError, match=r"baseline: 1 duplicated keys .*gsm8k/q0 seed 0"):
        pair_records(base + base[:1], records_of(["correct"] * 3, config="c"))


def test_keys_on_one_side_only_are_refused_with_examples(records_of):
    base = records_of(["correct"] * 5)
    with pytest.raises(DataError, match=r"2 keys only in the baseline \(e\.g\. gsm8k/q3 seed 0"):
        pair_records(base, records_of(["correct"] * 3, config="c"))


def test_candidate_gaps_on_baseline_correct_questions_count_as_lost(records_of):
    p = pair_records(records_of(["correct"] * 5), records_of(["correct"] * 3, config="c"), on_missing="drop")
    assert p.n_pairs == 5 and p.n_imputed == 2 and p.imputed.tolist() == [0, 0, 0, IMPUTED_MISSING, IMPUTED_MISSING]
    assert p.candidate_correct.tolist() == [True, True, True, False, False]
    assert "incomplete: 2 keys only in the baseline" in p.notes[0]
    assert p.dropped["by_side"]["candidate_missing"] == 2 and p.dropped["by_baseline_outcome"]["correct"] == 2
    dropped = p.without_imputed()
    assert dropped.n_pairs == 3 and dropped.n_questions == 3 and dropped.n_imputed == 0


def test_gaps_on_baseline_wrong_questions_and_baseline_side_gaps_are_dropped(records_of):
    base = records_of(["incorrect", "correct", "error", "correct"])
    cand = records_of(["error", "correct", "correct"], config="c")  # q3 missing
    p = pair_records(base, cand, on_missing="drop", max_errors=2)
    # q0: candidate error, baseline wrong -> dropped; q2: baseline error -> dropped; q3: lost
    assert p.n_pairs == 2 and p.imputed.tolist() == [0, IMPUTED_MISSING]
    assert p.dropped["by_side"] == {
        "candidate_missing": 1,
        "candidate_error": 1,
        "baseline_missing": 0,
        "baseline_error": 1,
        "both_error": 0,
        "baseline_error_candidate_missing": 0,
    }
    assert p.dropped["by_baseline_outcome"] == {"correct": 1, "incorrect": 1, "no_answer": 0, "error": 1, "missing": 0}


def test_baseline_side_errors_and_gaps_where_the_candidate_is_not_correct_count_as_lost(records_of):
    # issue 34 item 2: turning the baseline into `error` on the questions the candidate lost
    # must not drop the losses; q0..q2 baseline error (candidate wrong, no answer, error),
    # q3 baseline error with the candidate correct (dropped), q4 complete
    base = records_of(["error", "error", "error", "error", "correct"])
    cand = records_of(["incorrect", "no_answer", "error", "correct", "correct", "incorrect"], config="c")
    p = pair_records(base, cand, on_missing="drop", max_errors=4)  # q5: only in the candidate, wrong
    assert p.imputed.tolist() == [IMPUTED_BASELINE] * 3 + [0, IMPUTED_BASELINE]
    assert p.baseline_correct.tolist() == [True, True, True, True, True]
    assert p.candidate_correct.tolist() == [False, False, False, True, False]
    assert p.dropped["imputed_as_lost"] == 4 == p.n_imputed
    assert [k[1] for k in p.question_keys] == ["q0", "q1", "q2", "q4", "q5"]
    assert p.without_imputed().n_pairs == 1


@pytest.mark.slow
def test_a_gate_cannot_pass_by_turning_the_baselines_losses_into_errors(tmp_path):
    from click.testing import CliRunner

    from qualgate.cli import cli

    import support

    base, cand = support.table_outcomes(370, 26, 0, 4)
    # the baseline is made to fail exactly where the candidate lost
    base = ["error" if b == "correct" and c != "correct" else b for b, c in zip(base, cand)]
    b = support.write_records(tmp_path / "b.jsonl", base, config="cfg-b")
    c = support.write_records(tmp_path / "c.jsonl", cand, config="cfg-c")
    r = CliRunner().invoke(cli, ["gate", str(b), str(c), "--margin", "0.02", "--max-errors", "28"])
    assert r.exit_code == 1, r.output
    assert "FAIL" in r.output


def test_prompt_hash_mismatch_is_refused(records_of):
    with pytest.raises(DataError, match=r"1 pairs differ in prompt_hash .*'p1' vs 'x1'"):
        recs = records_of(["correct"] * 2, config="c")
        recs[1] = dataclasses.replace(recs[1], prompt_hash="x1")
        pair_records(records_of(["correct"] * 2), recs)


def test_suite_version_mismatch_is_refused(records_of):
    cand = [dataclasses.replace(r, suite_version="2") for r in records_of(["correct"] * 2, config="c")]
    with pytest.raises(DataError, match="2 pairs differ in suite_version"):
        pair_records(records_of(["correct"] * 2), cand)


def test_error_outcome_is_refused_not_counted_wrong(records_of):
    cand = records_of(["correct", "error", "correct"], config="c")
    cand[1] = dataclasses.replace(cand[1], error="CUDA out of memory")
    with pytest.raises(DataError, match=r"1 pairs have an 'error' outcome .*CUDA out of memory.*--max-errors allows 0"):
        pair_records(records_of(["correct"] * 3), cand)


def test_max_errors_drops_that_many_error_pairs_and_says_so(records_of):
    p = pair_records(
        records_of(["correct"] * 3), records_of(["correct", "error", "incorrect"], config="c"), max_errors=1
    )
    assert p.dropped["errors"] == 1 and "incomplete: 1 pairs" in p.notes[0]
    # the candidate's error on a question the baseline got right is a loss (worst case)
    assert p.n_pairs == 3 and p.imputed.tolist() == [0, IMPUTED_ERROR, 0]
    assert p.candidate_correct.tolist() == [True, False, False]
    assert p.without_imputed().candidate_correct.tolist() == [True, False]


def test_every_problem_is_listed_at_once(records_of):
    cand = records_of(["error"] * 4, config="c", prompt="x")
    with pytest.raises(DataError) as exc:
        pair_records(records_of(["correct"] * 5), cand)
    assert all(s in str(exc.value) for s in ("keys only in the baseline", "prompt_hash", "'error' outcome"))


def test_a_side_with_two_config_ids_is_refused(records_of):
    mixed = records_of(["correct"] * 2)
    mixed[1] = dataclasses.replace(mixed[1], config_id="other")
    with pytest.raises(DataError, match="candidate records carry 2 config ids"):
        pair_records(records_of(["correct"] * 2), mixed)


def test_questions_are_clusters_across_seeds_and_suites(records_of):
    base = records_of(["correct"] * 6, seeds=3) + records_of(["correct"] * 3, seeds=3, suite="aime")
    cand = records_of(["correct"] * 6, seeds=3, config="c") + records_of(
        ["correct"] * 3, seeds=3, suite="aime", config="c"
    )
    p = pair_records(base, cand)
    assert p.suites == ("aime", "gsm8k") and p.n_questions == 3 and p.max_cluster_size == 3
    assert p.suite.tolist() == [1] * 6 + [0] * 3
    assert p.question.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_sides_with_no_common_key_get_a_hint_that_names_what_differs_not_on_missing_drop(tmp_path):
    from click.testing import CliRunner

    from qualgate.cli import cli

    from support import make_records, write_records

    base = write_records(tmp_path / "b.jsonl", make_records(["correct"] * 6, suite="gsm8k"))
    other = [r for r in make_records(["correct"] * 6, suite="gsm8k", config="cfg-c")]
    import dataclasses

    other = [dataclasses.replace(r, seed=r.seed + 1) for r in other]  # another seed: no key in common
    cand = write_records(tmp_path / "c.jsonl", other)
    result = CliRunner().invoke(cli, ["gate", str(base), str(cand), "--margin", "0.05"])
    assert result.exit_code == 3
    assert "--on-missing drop would leave no pair" in result.output
    assert "seeds: baseline 0, candidate 1" in result.output
    assert "pass --on-missing drop" not in result.output
