"""``qualgate sweep``: grid validation, the fixed sequence, the chosen config and its evidence."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.config.decoding import load_plan
from qualgate.errors import DataError
from qualgate.run.sweep import expand_grid, load_grid

GRID = {"base": "fly", "grid": {"fly_entropy_threshold": [0.6, 0.0], "fly_window_size": [2, 1]}}


def _grid(tmp_path, doc):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory, plan_writer):
    root = tmp_path_factory.mktemp("sweep")
    # a wide margin, so that the toy engine's FLy at tau 0.6 (nearly lossless) passes on few questions
    return plan_writer(root / "plan", questions=24, seeds=(0,), configs=("target", "fly"), gate="{margin: 0.3}")


@pytest.fixture(scope="module")
def swept(tmp_path_factory, plan_path):
    out = tmp_path_factory.mktemp("swept") / "out"
    grid = _grid(out.parent, GRID)
    r = CliRunner().invoke(
        cli,
        [
            "sweep",
            str(plan_path),
            "--grid",
            str(grid),
            "--out",
            str(out),
            "--quiet",
            "--batch-questions",
            "8",
            "--speed-rounds",
            "6",
            "--speed-questions",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    return out, r


def test_the_grid_expands_in_declared_order_into_validated_configs(tmp_path, plan_path):
    plan = load_plan(plan_path)
    points = expand_grid(load_grid(_grid(tmp_path, GRID), plan), plan)
    assert list(points) == ["fly-tau0.6-W2", "fly-tau0.6-W1", "fly-tau0.0-W2", "fly-tau0.0-W1"]
    spec = points["fly-tau0.0-W1"].speculative
    assert (spec["fly_entropy_threshold"], spec["fly_window_size"]) == (0.0, 1)
    assert spec["model"] == plan.configs["fly"].speculative["model"]
    assert len({c.config_id for c in points.values()}) == 4


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({**GRID, "grdi": {}}, "grdi"),
        ({**GRID, "base": "target"}, "base"),
        ({**GRID, "base": "nope"}, "base"),
        ({**GRID, "grid": {"fly_window_size": []}}, "grid.fly_window_size"),
        ({**GRID, "grid": {"fly_window_size": [2, 2]}}, "grid.fly_window_size"),
        ({**GRID, "grid": {"fly_window_size": [-1]}}, "grid"),
        ({**GRID, "grid": {"fly_entropy_treshold": [0.3]}}, "grid"),
        ({**GRID, "order": "fastest"}, "order"),
        ({**GRID, "order": "acceptance", "pilot_questions": 0}, "pilot_questions"),
    ],
)
def test_a_bad_grid_is_refused_naming_its_field(tmp_path, plan_path, doc, field):
    with pytest.raises(DataError) as exc:
        load_grid(_grid(tmp_path, doc), load_plan(plan_path))
    assert exc.value.field == field and "grid.yaml" in str(exc.value)


@pytest.mark.slow
def test_the_sequence_stops_at_the_first_candidate_that_does_not_pass(swept):
    out, _ = swept
    sweep = json.loads((out / "sweep.json").read_text())
    declared = ["fly-tau0.6-W2", "fly-tau0.6-W1", "fly-tau0.0-W2", "fly-tau0.0-W1"]
    tested = [r["name"] for r in sweep["rows"]]
    assert tested == declared[: len(tested)] and sweep["not_run"] == declared[len(tested) :]
    verdicts = [r["verdict"] for r in sweep["rows"]]
    assert all(v == "PASS" for v in verdicts[:-1])
    if len(tested) < len(declared):
        assert verdicts[-1] != "PASS"
    gate = json.loads((out / "gate.json").read_text())
    assert [c["name"] for c in gate["candidates"]] == tested
    assert gate["settings"]["multiplicity"] == "fixed-sequence"
    assert all(c["alpha"] == gate["settings"]["alpha"] for c in gate["candidates"])  # each at the full alpha
    for name in sweep["not_run"]:
        assert not (out / "records" / f"{name}.jsonl").exists()


@pytest.mark.slow
def test_the_chosen_config_is_the_fastest_that_passed_and_check_finds_its_evidence(swept):
    out, r = swept
    sweep = json.loads((out / "sweep.json").read_text())
    passed = [row for row in sweep["rows"] if row["verdict"] == "PASS"]
    if not passed:
        assert r.exit_code == 1 and sweep["chosen"] is None and not (out / "chosen.yaml").exists()
        return
    assert r.exit_code == 0
    fastest = max(passed, key=lambda row: row["speedup"])
    assert sweep["chosen"] == fastest["name"] and sweep["chosen"] in sweep["frontier"]
    low, high = fastest["speedup_ci"]
    assert low <= fastest["speedup"] <= high
    gate = json.loads((out / "gate.json").read_text())
    entry = next(c for c in gate["candidates"] if c["name"] == sweep["chosen"])
    assert entry["verdict"] == "PASS"
    c = CliRunner().invoke(
        cli,
        [
            "check",
            "--vllm-version",
            "0.33.0",
            str(out / "chosen.yaml"),
            "--evidence",
            str(out / "gate.json"),
            "--max-margin",
            str(gate["settings"]["margin"]),
        ],
    )  # the test plan's loose margin
    assert entry["config_id"] in c.output
    assert c.exit_code == 0, c.output


@pytest.mark.slow
def test_the_report_reads_a_sweep_directory_with_interleaved_speed_ups(swept):
    out, _ = swept
    sweep = json.loads((out / "sweep.json").read_text())
    r = CliRunner().invoke(cli, ["report", str(out), "--format", "json"])
    assert r.exit_code == json.loads((out / "manifest.json").read_text())["gate"]["exit_code"], r.output
    configs = {c["name"]: c for c in json.loads(r.stdout)["configs"]}
    for row in sweep["rows"]:
        if row["speedup"] is not None:
            assert configs[row["name"]]["speedup"] == row["speedup"]
            assert configs[row["name"]]["speedup_ci"] == row["speedup_ci"]
