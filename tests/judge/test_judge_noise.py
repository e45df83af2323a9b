"""``qualgate judge`` on an A/A pair reports the judge's noise (its decisive rate), which
``qualgate power --judge-noise`` turns into the discordance the gate will see."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.judge import judged_discordance

from judge_double import fastchat_template, judge_args


def noisy(system, user):
    """A judge that names a winner between equivalent answers in 1 of 4 orders (either side)."""
    h = hashlib.sha256(user.encode()).digest()[0] % 8
    return "Both are equally good. [[C]]" if h >= 2 else ("[[A]]" if h == 0 else "[[B]]")


def expected(user_of):
    return {o: noisy(None, u) for o, u in user_of.items()}


@pytest.mark.slow
def test_an_a_a_pair_reports_how_often_the_judge_declares_a_winner(tmp_path, phi3, judge_double):
    base, cand, questions = phi3
    lines = [json.loads(x) for x in cand.read_text().splitlines()]
    blines = [json.loads(x) for x in base.read_text().splitlines()]
    # a second run of the baseline config: 25 outputs the same, 50 equivalent but not identical
    aa = [
        b | {"config_id": "cfg-phi-3-again", "output": b["output"] + ("" if i < 25 else "\n")}
        for i, (b, c) in enumerate(zip(blines, lines))
    ]
    again = tmp_path / "phi-3-again.jsonl"
    again.write_text("".join(json.dumps(r) + "\n" for r in aa))
    double = judge_double({}, reply=noisy)
    out = tmp_path / "aa"
    judge, prompt = double.config(tmp_path / "j.yaml"), fastchat_template(tmp_path / "t.yaml", "pairwise")
    result = CliRunner().invoke(cli, judge_args(base, again, judge, out, questions=questions, prompt=prompt))
    summary = json.loads(result.stdout)
    assert summary["identical"] == 25 and summary["judged"] == 50 and summary["calls"] == 100
    # recount from the judge's own replies, pair by pair
    decisive = 0
    for p in map(json.loads, (out / "pairs.jsonl").read_text().splitlines()):
        if p.get("identical"):
            continue
        sides = [v["verdict"] for v in p["verdicts"]]
        decisive += sides[0] == sides[1] != "tie"
    assert 0 < decisive == summary["lost"] + summary["gained"]
    assert summary["decisive_rate"] == decisive / 50
    text = CliRunner().invoke(cli, judge_args(base, again, judge, out, questions=questions, prompt=prompt, fmt=None))
    assert re.search(rf"\ndecisive rate +{decisive / 50:.3f}\n", text.output), text.output

    power = CliRunner().invoke(
        cli,
        [
            "power",
            "--margin",
            "0.05",
            "--discordant",
            "0.1",
            "--judge-noise",
            str(summary["decisive_rate"]),
            "--format",
            "json",
        ],
    )
    plain = CliRunner().invoke(cli, ["power", "--margin", "0.05", "--discordant", "0.1", "--format", "json"])
    assert power.exit_code == plain.exit_code == 0, power.output
    assert f"{judged_discordance(0.1, summary['decisive_rate']):.4g}" in power.stderr
    n_noisy = json.loads(power.stdout)["n"]
    n_plain = json.loads(plain.stdout)["n"]
    assert n_noisy > n_plain  # a noisy judge costs questions
