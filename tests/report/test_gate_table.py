"""``qualgate gate``'s text: a table that fits 100 columns (``--wide`` for every one), a
sentence for a PASS with a bound below zero, "1 pair", a warning for a file gated against
itself and a hint for a margin given in points."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import Record, RecordWriter


def _records(path, outcomes, *, config="c"):
    recs = [
        Record(
            schema_version=1,
            run_id="r",
            config_id=config,
            suite="s",
            suite_version="1",
            question_id=f"test-0-{i}",
            seed=0,
            sample_index=0,
            outcome=o,
            prompt_hash="h",
            answer_strict=None if o == "no_answer" else "7",
            gold="7",
        )
        for i, o in enumerate(outcomes)
    ]
    with RecordWriter(path) as w:
        w.write_batch(recs)
    return path


@pytest.fixture
def files(tmp_path):
    n = 400
    base = ["correct"] * 300 + ["incorrect"] * 100
    gainer = ["correct"] * 300 + ["correct"] * 40 + ["incorrect"] * 60  # 40 gained, none lost
    loser = ["incorrect"] * 60 + ["correct"] * 240 + ["incorrect"] * 99 + ["no_answer"]  # 60 lost
    assert len(base) == len(gainer) == len(loser) == n
    return (
        _records(tmp_path / "base.jsonl", base, config="b"),
        _records(tmp_path / "gainer.jsonl", gainer, config="g"),
        _records(tmp_path / "loser.jsonl", loser, config="l"),
    )


def _gate(*args):
    return CliRunner().invoke(cli, ["gate", *map(str, args)])


@pytest.mark.slow
def test_the_gate_table_fits_100_columns_and_wide_shows_every_column(files):
    r = _gate(*files, "--margin", "0.05")
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    table = lines[lines.index("") + 1 : lines.index("") + 4]
    assert table[0].split()[0] == "candidate" and all(len(line) <= 100 for line in table)
    assert "p NI" not in table[0] and "loss UB 95%" in table[0] and "verdict" in table[0]
    wide = _gate(*files, "--margin", "0.05", "--wide").stdout.splitlines()
    head = wide[wide.index("") + 1]
    assert "p NI" in head and "90% CI diff (pts)" in head and len(head) > 100


def test_a_pass_with_a_bound_below_zero_says_the_candidate_gained(files):
    base, gainer, _ = files
    r = _gate(base, gainer, "--margin", "0.05")
    assert r.exit_code == 0, r.output
    ub = json.loads(_gate(base, gainer, "--margin", "0.05", "--format", "json").stdout)["candidates"][0]
    assert ub["loss_upper_bound"] < 0
    assert "note: the bound is below zero because the candidate gained (40 gained against 0 lost)" in r.stdout
    assert "a gain is not a loss, so it passes" in r.stdout


def test_one_no_answer_reads_one_pair(files):
    base, _, loser = files
    r = _gate(base, loser, "--margin", "0.05")
    assert "gave no answer on 1 pair, the baseline on 0" in r.stdout


@pytest.mark.slow
def test_a_candidate_that_is_the_baselines_file_is_warned_about(files):
    base = files[0]
    r = _gate(base, base, "--margin", "0.05")
    assert r.exit_code == 0
    assert "warning: candidate" in r.stderr and "is the baseline itself" in r.stderr
    assert "is the baseline itself" not in _gate(*files[:2], "--margin", "0.05").stderr


@pytest.mark.parametrize("command", [["gate", "a", "b"], ["power", "--discordant", "0.06"]])
def test_a_margin_in_points_suggests_the_fraction(files, command):
    args = [*command[:1], *(map(str, files[:2]) if command[0] == "gate" else command[1:])]
    r = CliRunner().invoke(cli, [*args, "--margin", "2"])
    assert r.exit_code == 2
    assert "did you mean 0.02?" in r.stderr
