"""The Python API (``qualgate.gate``, ``qualgate.power``, ``qualgate.load_records``): the README's
example runs as a doctest on a demo run, and it decides what ``qualgate gate`` decides."""

from __future__ import annotations

import doctest
import json
import re

import pytest
from click.testing import CliRunner

import qualgate
from qualgate.cli import cli

from support import REPO


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    """The state the README's quick start leaves a user in: ``qualgate demo`` run with no
    ``--out`` in a fresh directory, which writes ``./qualgate-demo-1`` (fewer questions here)."""
    root = tmp_path_factory.mktemp("api")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = CliRunner().invoke(cli, ["demo", "--questions", "30", "--seeds", "1", "--quiet"])
    assert r.exit_code == 0, r.output
    assert (root / "qualgate-demo-1" / "records" / "target.jsonl").is_file()
    return root


def _readme_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    return re.search(r"```pycon\n(.*?)```", section, re.S)[1]


@pytest.mark.slow
def test_the_readme_python_example_runs_as_a_doctest(demo_dir, monkeypatch):
    monkeypatch.chdir(demo_dir)
    test = doctest.DocTestParser().get_doctest(_readme_example(), {}, "README.md", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = []
    runner.run(test, out=out.append)
    assert runner.failures == 0 and runner.tries >= 6, "".join(out)


@pytest.mark.slow
def test_the_api_gives_the_verdicts_of_the_gate_command(demo_dir, monkeypatch):
    monkeypatch.chdir(demo_dir)
    names = ["standard", "fly-w2", "fly-aggressive"]
    paths = [f"qualgate-demo-1/records/{n}.jsonl" for n in names]
    r = CliRunner().invoke(
        cli, ["gate", "qualgate-demo-1/records/target.jsonl", *paths, "--margin", "0.05", "--format", "json"]
    )
    cli_doc = json.loads(r.stdout)
    report = qualgate.gate("qualgate-demo-1/records/target.jsonl", *paths, margin=0.05)
    assert report.verdict == cli_doc["verdict"] and report.exit_code == r.exit_code
    assert [(c.name, c.verdict) for c in report.comparisons] == [
        (c["name"], c["verdict"]) for c in cli_doc["candidates"]
    ]
    text = CliRunner().invoke(cli, ["gate", "qualgate-demo-1/records/target.jsonl", *paths, "--margin", "0.05"]).stdout
    assert str(report) == text


@pytest.mark.slow
def test_a_record_set_read_once_gates_like_its_path(demo_dir, monkeypatch):
    monkeypatch.chdir(demo_dir)
    base = qualgate.load_records("qualgate-demo-1/records/target.jsonl")
    by_set = qualgate.gate(base, "qualgate-demo-1/records/fly-w2.jsonl", margin=0.05).to_dict()
    by_path = qualgate.gate(
        "qualgate-demo-1/records/target.jsonl", "qualgate-demo-1/records/fly-w2.jsonl", margin=0.05
    ).to_dict()
    assert {k: v for k, v in by_set.items() if k != "created_at"} == {
        k: v for k, v in by_path.items() if k != "created_at"
    }


def test_power_returns_the_table_of_the_power_command():
    # the normal approximation on both sides (fast; the default is exact on both sides)
    args = ["power", "--method", "normal", "--margin", "0.02", "--discordant", "0.04,0.06", "--loss", "0,0.005"]
    text = CliRunner().invoke(cli, args).stdout
    grid = qualgate.power(margin=0.02, discordant=[0.04, 0.06], loss=[0, 0.005], method="normal")
    assert str(grid) + "\n" == text
    assert [r.n for r in grid.results] == [row["n"] for row in grid.to_dict()]


def test_power_names_the_missing_margin():
    with pytest.raises(ValueError, match="^margin: "):
        qualgate.power(margin=None, discordant=0.06)


def test_the_package_top_imports_no_statistics_until_used():
    import subprocess
    import sys

    code = "import sys, qualgate; print(any(m.startswith(('qualgate.verdict', 'scipy')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
