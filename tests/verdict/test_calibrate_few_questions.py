"""``qualgate calibrate`` on too few questions says so instead of printing an interval of the
accuracy difference that spans every difference possible (-100 to +100 points)."""

from __future__ import annotations

from click.testing import CliRunner

from qualgate.cli import cli

from support import write_records

A = ["correct", "incorrect", "correct", "correct", "incorrect", "correct", "correct"]
B = ["incorrect", "correct", "correct", "correct", "incorrect", "correct", "correct"]


def test_seven_questions_of_three_seeds_say_too_few_questions_not_minus_100_to_plus_100(tmp_path):
    a = write_records(tmp_path / "a.jsonl", A * 3, seeds=3)
    b = write_records(tmp_path / "b.jsonl", B * 3, seeds=3, config="cfg-b")
    result = CliRunner().invoke(cli, ["calibrate", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "too few questions (7) for an interval" in result.output
    assert "-100.00 to +100.00" not in result.output


def test_an_informative_interval_is_still_printed(tmp_path):
    a = write_records(tmp_path / "a.jsonl", A * 20)
    b = write_records(tmp_path / "b.jsonl", B * 20, config="cfg-b")
    result = CliRunner().invoke(cli, ["calibrate", str(a), str(b)])
    assert "95% CI" in result.output.split("difference B − A", 1)[1].splitlines()[0]
    assert "too few questions" not in result.output
