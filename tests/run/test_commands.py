"""Small runs from the command line (``run --limit``, ``sweep --limit/--threads``), a CUDA
config on a machine without CUDA, and where the demo puts its run."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.records import read_records


@pytest.mark.slow
def test_run_limit_decodes_only_the_first_questions_of_each_suite(plan_factory, tmp_path):
    plan = plan_factory(questions=9, seeds=(0, 1))
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "o"), "--quiet", "--limit", "3"])
    assert r.exit_code in (0, 1, 4), r.output
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["plan"]["suites"][0]["limit"] == 3
    for name in ("target", "standard", "fly"):
        recs = read_records(tmp_path / "o" / "records" / f"{name}.jsonl")
        assert len(recs) == 6 and {x.question_id for x in recs} == {"test-0-0", "test-0-1", "test-0-2"}


def test_with_limit_keeps_a_smaller_limit_of_the_plan_and_refuses_zero(plan_factory):
    import dataclasses

    from qualgate.config.decoding import load_plan, with_limit

    plan = load_plan(plan_factory(questions=9))
    small = dataclasses.replace(plan, suites=tuple(dataclasses.replace(s, limit=2) for s in plan.suites))
    assert [s.limit for s in with_limit(small, 5).suites] == [2]
    assert [s.limit for s in with_limit(plan, 5).suites] == [5]
    with pytest.raises(ValueError, match="limit"):
        with_limit(plan, 0)


@pytest.mark.slow
def test_sweep_is_bounded_and_threaded_from_the_command_line(plan_factory, tmp_path):
    plan = plan_factory(questions=40, seeds=(0,), configs=("target", "fly"), gate="{margin: 0.3}")
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"base": "fly", "grid": {"fly_window_size": [2, 1]}, "pilot_questions": 30}))
    out = tmp_path / "s"
    args = ["sweep", str(plan), "--grid", str(grid), "--out", str(out), "--quiet", "--batch-questions", "4"]
    args += ["--limit", "10", "--order", "acceptance", "--pilot-questions", "3", "--threads", "1"]
    r = CliRunner().invoke(cli, [*args, "--speed-rounds", "1", "--speed-questions", "2"])
    assert r.exit_code in (0, 1), r.output
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["grid"]["order"] == "acceptance" and sweep["grid"]["pilot_questions"] == 3
    assert sweep["pilot"] is not None
    for path in (out / "records").glob("*.jsonl"):  # 10 questions, 3 of them the pilot's
        ids = {x.question_id for x in read_records(path)}
        assert 0 < len(ids) <= 7 and all(int(i.rsplit("-", 1)[1]) < 10 for i in ids), (path.name, ids)


@pytest.mark.slow
def test_a_cuda_config_on_a_machine_without_cuda_is_exit_3_naming_the_device(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from qualgate import demo as demo_pkg
    from qualgate.backends import open_backend
    from qualgate.config.decoding import load_config
    from qualgate.errors import DataError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"engine: reference\nmodel: {demo_pkg.model_path('target')}\nsampling: {{max_tokens: 8}}\n"
        "engine_options: {device: cuda:0}\n"
    )
    with pytest.raises(DataError) as exc:
        open_backend(load_config(cfg))
    text = str(exc.value)
    assert "'cuda:0'" in text and "no CUDA device" in text and "engine_options.device" in text and str(cfg) in text


def test_the_demo_makes_its_run_directory_in_the_current_directory(tmp_path, monkeypatch):
    from qualgate.cli.demo import _new_run_dir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "qualgate-demo-1").mkdir()
    made = _new_run_dir()
    assert made == "qualgate-demo-2" and (tmp_path / made).is_dir()
