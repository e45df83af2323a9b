"""Flips (lost and gained pairs) and pairing a foreign run by question id with prompt differences reported."""

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.records import Record
from qualgate.verdict.flips import find_flips, render_csv
from qualgate.verdict.pairing import pair_records


def _rec(qid, outcome, *, seed=0, answer=None, output=None, prompt="p", config="c"):
    return Record(
        1, "r", config, "s", "1", qid, seed, 0, outcome, prompt, answer_strict=answer, gold="4", output=output
    )


def test_flips_count_the_discordant_pairs_of_the_table(records_of, table):
    b, c = table(50, 7, 3, 40)
    flips = find_flips(records_of(b), records_of(c, config="cfg-c"))
    assert (len(flips.lost), len(flips.gained), flips.pairs) == (7, 3, 100)
    assert all(f.baseline_outcome == "correct" and f.candidate_outcome == "incorrect" for f in flips.lost)


def test_a_flip_keeps_both_outputs_both_answers_and_the_gold():
    (f,) = find_flips(
        [_rec("q1", "correct", answer="4", output="so 4")],
        [_rec("q1", "no_answer", output="I am not sure", config="d")],
    ).flips
    assert (f.kind, f.gold, f.baseline_answer, f.candidate_answer) == ("lost", "4", "4", None)
    assert (f.baseline_output, f.candidate_output, f.candidate_outcome) == ("so 4", "I am not sure", "no_answer")


def test_error_pairs_and_unpaired_keys_are_not_flips():
    base = [_rec("q1", "correct"), _rec("q2", "correct"), _rec("q3", "correct")]
    cand = [_rec("q1", "error", config="d"), _rec("q2", "incorrect", seed=1, config="d")]
    assert find_flips(base, cand).flips == () and find_flips(base, cand).pairs == 0


def test_flips_csv_round_trips_text_with_commas_quotes_and_newlines():
    import csv
    import io

    text = 'He said, "4"\nthen stopped'
    flips = find_flips([_rec("q1", "correct", output=text)], [_rec("q1", "incorrect", config="d")])
    (row,) = list(csv.DictReader(io.StringIO(render_csv(flips))))
    assert row["baseline_output"] == text and row["candidate_output"] == "" and row["kind"] == "lost"


def test_report_mode_pairs_different_prompts_by_question_id_and_reports_them():
    base = [_rec(f"q{i}", "correct", prompt=f"qualgate-{i}") for i in range(4)]
    cand = [_rec(f"q{i}", "correct", prompt=f"lm-eval-{i}" if i < 3 else "qualgate-3", config="d") for i in range(4)]
    with pytest.raises(DataError, match="3 pairs differ in prompt_hash.*--prompt-mismatch report"):
        pair_records(base, cand)
    p = pair_records(base, cand, on_prompt_mismatch="report")
    assert p.n_pairs == 4 and p.dropped["prompt_hash_differences"] == 3
    assert any(n.startswith("3 of 4 pairs differ in prompt_hash") for n in p.notes)
    with pytest.raises(ValueError, match="on_prompt_mismatch"):
        pair_records(base, cand, on_prompt_mismatch="ignore")


def test_flips_command_json_lists_the_same_flips_as_the_gate_report(write, table):
    b, c = table(60, 4, 2, 34)
    base, cand = write("b.jsonl", b), write("c.jsonl", c, config="cfg-c")
    r = CliRunner().invoke(cli, ["flips", str(base), str(cand), "--format", "json"])
    assert r.exit_code == 0, r.output
    flips = json.loads(r.stdout)
    g = CliRunner().invoke(cli, ["gate", str(base), str(cand), "--margin", "0.05", "--format", "json"])
    assert json.loads(g.stdout)["candidates"][0]["flips"] == flips
    assert (flips["lost"], flips["gained"], len(flips["flips"])) == (4, 2, 6)
