"""Issue 16's bad-input corpus: every case ends in a clean, named refusal.

The corpus (``corpus.py``, about 400 cases: records, plans, decoding configs, suite files and
CLI numbers) runs once per session in worker processes (``run_corpus.py``), each case under
a 20 s alarm and a 6 GiB address-space limit; a case the alarm cannot stop is killed by a
watchdog. Each case is then one test here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from support import REPO

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_corpus import drive  # noqa: E402

from corpus import cases, verdict  # noqa: E402

CASES = cases()


@pytest.fixture(scope="session")
def outcomes(tmp_path_factory):
    return drive(tmp_path_factory.mktemp("corpus"), pythonpath=os.pathsep.join([str(REPO), str(REPO / "tests")]))


def test_the_corpus_has_at_least_300_bad_inputs_in_every_family():
    groups = {c.group.split(":")[0] for c in CASES}
    assert len(CASES) >= 300
    assert groups == {"records", "plan", "config", "ci files", "cli numbers"}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly_naming_what_is_wrong(case, outcomes):
    outcome = outcomes.get(case.id)
    assert verdict(case, outcome) == "ok", (case.names, outcome)
