"""The code that wrote each record is known: a run's manifest, each shard and each resume carry
the identity of the qualgate code (:mod:`qualgate.run.code`), ``merge`` and ``--resume`` refuse
records of other code, and the gate report names the code that wrote the records.

"Other code" here is real: a copy of the package whose request-seed derivation differs by one
line (the scale-out round's finding), run in its own process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import qualgate
from qualgate.cli import cli
from qualgate.run.code import code_identity, compare

TESTS = Path(__file__).resolve().parents[1]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_the_code_identity_changes_with_one_byte_of_the_source(tmp_path):
    here = code_identity()
    copy = _copy_package(tmp_path, edit=False)
    (copy / "qualgate" / "run" / "runner.py").write_text(
        (copy / "qualgate" / "run" / "runner.py").read_text() + "\n# one more line\n"
    )
    other = _identity_of(copy)
    assert other["version"] == here["version"]  # the version string alone cannot tell them apart
    assert other["source_sha256"] != here["source_sha256"]
    said = compare(here, other)
    assert "files that differ: run/runner.py" in said


def test_qualgate_version_names_the_source_hash():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output == f"qualgate {code_identity()['version']} (source {code_identity()['source_sha256'][:12]})\n"


def _copy_package(tmp_path: Path, *, edit: bool = True) -> Path:
    """A copy of the package (without the demo's weights) whose request seeds are derived
    differently when ``edit``: one line changed, as in a checkout one commit apart."""
    root = tmp_path / "other-code"
    src = Path(qualgate.__file__).resolve().parent
    shutil.copytree(src, root / "qualgate", ignore=shutil.ignore_patterns("weights", "__pycache__"))
    if edit:
        runner = root / "qualgate" / "run" / "runner.py"
        text = runner.read_text()
        old = 'blob = "\\x1f".join((suite, question_id, str(seed), str(sample_index))).encode()'
        assert old in text
        runner.write_text(text.replace(old, old.replace("(suite,", "(suite + '-v2',")))
    return root


def _identity_of(copy: Path) -> dict:
    code = "import json; from qualgate.run.code import code_identity; print(json.dumps(code_identity()))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=copy,  # (python -c puts the working directory first on sys.path)
    )
    return json.loads(out.stdout)


def _run_with(copy: Path, *args) -> subprocess.CompletedProcess:
    """``qualgate ARGS`` on the code in ``copy`` (with the tests' toy engine registered)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import toy_engine; toy_engine.register(); "
        "from qualgate.cli import main; main(sys.argv[2:])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(TESTS), *map(str, args)],
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=copy,  # (python -c puts the working directory first on sys.path)
    )


@pytest.fixture(scope="module")
def other_code(tmp_path_factory):
    return _copy_package(tmp_path_factory.mktemp("code"))


@pytest.mark.slow
def test_a_shard_written_by_other_code_is_refused_by_merge_naming_what_differs(other_code, plan_writer, tmp_path):
    plan = plan_writer(tmp_path / "plan", questions=6, seeds=(0,), configs=("target", "fly"), batch_size=3)
    assert invoke("run", plan, "--shard", "0/2", "--out", tmp_path / "s0", "--quiet").exit_code == 0
    theirs = _run_with(other_code, "run", plan, "--shard", "1/2", "--out", tmp_path / "s1", "--quiet")
    assert theirs.returncode == 0, theirs.stderr
    # the other code really decodes differently: its request seeds moved
    ours = json.loads((tmp_path / "s0" / "manifest.json").read_text())["code"]
    assert json.loads((tmp_path / "s1" / "manifest.json").read_text())["code"]["source_sha256"] != ours["source_sha256"]

    result = invoke("merge", tmp_path / "s0", tmp_path / "s1", "--out", tmp_path / "merged")
    assert result.exit_code == 3, result.output
    assert "shard 1/2" in result.output and "other qualgate code" in result.output
    assert "files that differ: run/runner.py" in result.output
    assert not (tmp_path / "merged" / "records").exists()  # nothing written


@pytest.mark.slow
def test_resuming_a_run_that_other_code_started_is_refused_and_nothing_is_written(other_code, plan_writer, tmp_path):
    plan = plan_writer(tmp_path / "plan", questions=6, seeds=(0,), configs=("target", "fly"), batch_size=3)
    started = _run_with(other_code, "run", plan, "--out", tmp_path / "run", "--quiet")
    assert started.returncode in (0, 1, 4), started.stderr
    before = {p.name: p.read_bytes() for p in (tmp_path / "run" / "records").iterdir()}
    result = invoke("run", plan, "--out", tmp_path / "run", "--resume", "--quiet")
    assert result.exit_code == 3, result.output
    assert "written by other qualgate code than this one" in result.output
    assert "run/runner.py" in result.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "run" / "records").iterdir()} == before


@pytest.mark.slow
def test_the_manifest_and_the_gate_report_name_the_code_that_wrote_the_records(plan_writer, tmp_path):
    plan = plan_writer(tmp_path / "plan", questions=5, seeds=(0,), configs=("target", "fly"))
    assert invoke("run", plan, "--out", tmp_path / "run", "--quiet").exit_code in (0, 1, 4)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert compare(manifest["code"], code_identity()) is None
    gate = json.loads((tmp_path / "run" / "gate.json").read_text())
    assert gate["plan"]["code"] == {k: v for k, v in code_identity().items() if k != "files"}
    # a resume of the same code goes on, and is recorded with its code
    assert invoke("run", plan, "--out", tmp_path / "run", "--resume", "--quiet").exit_code in (0, 1, 4)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [r["code"]["source_sha256"] for r in manifest["resumes"]] == [code_identity()["source_sha256"]]


@pytest.mark.slow
def test_a_run_whose_manifest_records_no_code_is_not_resumed(plan_writer, tmp_path):
    plan = plan_writer(tmp_path / "plan", questions=4, seeds=(0,), configs=("target", "fly"))
    assert invoke("run", plan, "--out", tmp_path / "run", "--quiet").exit_code in (0, 1, 4)
    path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["code"]  # as a manifest written before qualgate recorded its code
    path.write_text(json.dumps(manifest))
    result = invoke("run", plan, "--out", tmp_path / "run", "--resume", "--quiet")
    assert result.exit_code == 3 and "written before qualgate recorded its code" in result.output
