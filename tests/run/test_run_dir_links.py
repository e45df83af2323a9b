"""``qualgate run --resume`` writes inside ``--out`` only (issue 34, item 8).

A run directory whose ``records/<config>.jsonl`` (or ``records/``) was a symbolic link got its
records appended to the link's target outside ``--out``; a manifest entry named
``../../victim`` made resume truncate the torn last line of an outside ``.jsonl``. Record
files, the manifest and the lock file are now opened without following links, and the
manifest's paths are confined to the run directory."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.records import RecordWriter, repair_truncated


def _run(plan, out, *more):
    return CliRunner().invoke(cli, ["run", str(plan), "--out", str(out), "--quiet", *more])


@pytest.fixture
def done_run(plan_factory, tmp_path):
    """A finished toy run (2 questions x 1 seed, two configs) and its plan."""
    plan = plan_factory(questions=2, seeds=(0,), configs=("target", "fly"), batch_size=2)
    out = tmp_path / "out"
    result = _run(plan, out)
    assert result.exit_code in (0, 1, 4), result.output
    return plan, out


def _outside_copy(out, tmp_path, keep_lines=1):
    """An outside file holding the first ``keep_lines`` records of fly (so resume has work)."""
    victim = tmp_path / "victim.jsonl"
    lines = (out / "records" / "fly.jsonl").read_bytes().splitlines(keepends=True)
    victim.write_bytes(b"".join(lines[:keep_lines]))
    return victim


@pytest.mark.slow
def test_resume_refuses_a_records_file_that_is_a_link_to_an_outside_file(done_run, tmp_path):
    plan, out = done_run
    victim = _outside_copy(out, tmp_path)
    before = victim.read_bytes()
    (out / "records" / "fly.jsonl").unlink()
    (out / "records" / "fly.jsonl").symlink_to(victim)
    result = _run(plan, out, "--resume")
    assert result.exit_code == 3, result.output
    assert "symbolic link" in result.output
    assert victim.read_bytes() == before


@pytest.mark.slow
def test_resume_refuses_a_dangling_records_link_and_creates_nothing_outside(done_run, tmp_path):
    plan, out = done_run
    target = tmp_path / "elsewhere" / "created.jsonl"
    target.parent.mkdir()
    (out / "records" / "fly.jsonl").unlink()
    (out / "records" / "fly.jsonl").symlink_to(target)
    result = _run(plan, out, "--resume")
    assert result.exit_code == 3, result.output
    assert not target.exists()


@pytest.mark.slow
def test_resume_refuses_a_records_directory_that_is_a_link(done_run, tmp_path):
    plan, out = done_run
    outside = tmp_path / "outside-records"
    shutil.copytree(out / "records", outside)
    (outside / "fly.jsonl").write_bytes((outside / "fly.jsonl").read_bytes().splitlines(keepends=True)[0])
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    shutil.rmtree(out / "records")
    (out / "records").symlink_to(outside, target_is_directory=True)
    result = _run(plan, out, "--resume")
    assert result.exit_code == 3, result.output
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


@pytest.mark.slow
def test_a_manifest_entry_outside_the_run_directory_truncates_nothing(done_run, tmp_path):
    plan, out = done_run
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(b'{"keep": 1}\n{"torn": ')  # a torn last line resume would cut
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["configs"]["../../victim"] = dict(manifest["configs"]["fly"], records="records/../../victim.jsonl")
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = _run(plan, out, "--resume")
    assert result.exit_code == 3, result.output
    assert victim.read_bytes() == b'{"keep": 1}\n{"torn": '


@pytest.mark.slow
def test_resume_refuses_a_manifest_that_is_a_link(done_run, tmp_path):
    plan, out = done_run
    outside = tmp_path / "manifest-outside.json"
    shutil.move(out / "manifest.json", outside)
    before = outside.read_bytes()
    (out / "manifest.json").symlink_to(outside)
    result = _run(plan, out, "--resume")
    assert result.exit_code == 3, result.output
    assert "symbolic link" in result.output
    assert outside.read_bytes() == before


def test_the_writer_and_the_repair_refuse_a_link_as_the_file(tmp_path):
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(b'{"keep": 1}\n{"torn": ')
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    with pytest.raises(DataError, match="symbolic link"):
        repair_truncated(link)
    with pytest.raises(DataError, match="symbolic link"):
        RecordWriter(link)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(DataError, match="symbolic link"):
        RecordWriter(dangling)
    assert not (tmp_path / "nowhere.jsonl").exists()
    assert victim.read_bytes() == b'{"keep": 1}\n{"torn": '


@pytest.mark.parametrize("relative", ["../x.jsonl", "records/../../x.jsonl", "/etc/x.jsonl", ""])
def test_run_dir_paths_must_be_plain_names_below_out(tmp_path, relative):
    from qualgate.run.runner import in_run_dir

    with pytest.raises(DataError, match="outside the run directory"):
        in_run_dir(tmp_path, relative)
    assert in_run_dir(tmp_path, "records/x.jsonl") == tmp_path / "records" / "x.jsonl"
