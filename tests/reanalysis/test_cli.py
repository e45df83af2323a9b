"""``qualgate reanalyze``: output formats and exit codes."""

import json

from click.testing import CliRunner

from qualgate.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, ["reanalyze", *map(str, args)])


def test_text_report_of_a_shipped_table_by_name():
    r = invoke("fly_pr53987_v1_eval")
    assert r.exit_code == 0, r.output
    assert "retention_printed: fly/standard reproduces 6 of 7 printed value(s); 1 mismatch(es)." in r.output
    assert "Pooled, standard has -8 and fly -10 answers against target over 1387 questions." in r.output


def test_json_is_one_object_on_stdout():
    r = invoke("fly_pr53987_v1_eval", "--format", "json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert [t["net_answers"] for t in d["totals"]] == [-8, -10]


def test_markdown_is_written_to_the_file(tmp_path):
    out = tmp_path / "r.md"
    r = invoke("fly_pr53987_v1_eval", "--markdown", out)
    assert r.exit_code == 0
    md = out.read_text()
    assert md.startswith("# Reanalysis of fly_pr53987_v1_eval\n")
    assert "| line | cell | n | target |" in md


def test_options_reach_the_sample_size_table():
    r = invoke("fly_pr53987_v1_eval", "--discordance", "0.3", "--format", "json")
    assert {q["discordance"] for q in json.loads(r.stdout)["requirements"]} == {0.3}


def test_malformed_table_exits_3_naming_the_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("dataset,n,target_correct,fly_correct\nGSM8K,250,230,260\n")
    r = invoke(path)
    assert r.exit_code == 3
    assert "line 2, column 'fly_correct' = '260': exceeds n = 250" in r.output


def test_layout_only_file_exits_0_with_what_is_missing(shared_dir):
    r = invoke(shared_dir / "published" / "fly_pr53987_accuracy.csv")
    assert r.exit_code == 0
    assert "32 of 32 rows have no counts" in r.output


def test_unknown_table_is_a_usage_error_listing_the_shipped_ones():
    r = invoke("no_such_table")
    assert r.exit_code == 2
    assert "fly_pr53987_v1_eval" in r.output


def test_bad_discordance_is_a_usage_error():
    r = invoke("fly_pr53987_v1_eval", "--discordance", "1.5")
    assert r.exit_code == 2
    assert "discordance" in r.output
