"""``qualgate power --discordance-from``: the discordance of a pilot's records sizes the gate."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from scipy import stats

from qualgate.cli import cli
from qualgate.stats import noninferiority_sample_size

import support


def pilot(tmp_path, both_correct=150, lost=12, gained=8, both_wrong=30):
    b, c = support.table_outcomes(both_correct, lost, gained, both_wrong)
    return (
        support.write_records(tmp_path / "standard.jsonl", b, config="cfg-s"),
        support.write_records(tmp_path / "fly.jsonl", c, config="cfg-f"),
    )


def power(*args):
    # the normal approximation, as noninferiority_sample_size's default: the exact default of
    # the command scans exact power (minutes at n ~ 1,500) and is tested in test_cli_power.py
    return CliRunner().invoke(cli, ["power", "--method", "normal", *map(str, args)])


def test_the_pilots_discordance_sizes_the_gate_as_the_same_discordance_given(tmp_path):
    b, c = pilot(tmp_path)  # 20 discordant pairs of 200: psi = 0.1
    r = power("--margin", 0.02, "--discordance-from", b, c, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["discordant"] == pytest.approx(0.1) and doc["discordance_from"]["pairs"] == 200
    assert doc["n"] == noninferiority_sample_size(0.02, 0.1).n
    given = json.loads(power("--margin", 0.02, "--discordant", 0.1, "--format", "json").stdout)
    assert doc["n"] == given["n"]
    assert "discordance from" in r.stderr and "10.00% of 200 pairs" in r.stderr


def test_the_upper_bound_is_the_clopper_pearson_limit(tmp_path):
    b, c = pilot(tmp_path)
    doc = json.loads(power("--margin", 0.02, "--discordance-from", b, c, "--discordance-bound", "upper",
                           "--format", "json").stdout)  # fmt: skip
    # two-sided 95% Clopper-Pearson upper limit of 20 of 200: beta(0.975; 21, 180) (scipy), to 1e-9
    assert doc["discordant"] == pytest.approx(stats.beta.ppf(0.975, 21, 180), abs=1e-9)
    assert doc["n"] == noninferiority_sample_size(0.02, doc["discordant"]).n


def test_one_source_of_discordance_is_required(tmp_path):
    b, c = pilot(tmp_path)
    assert power("--margin", 0.02).exit_code == 2
    r = power("--margin", 0.02, "--discordant", 0.1, "--discordance-from", b, c)
    assert r.exit_code == 2 and "one of them" in r.output
