"""GPQA-Diamond with a synthetic fixture (the real data is gated and never stored here).

The fixture follows the Hub CSV's column layout (``gpqa_diamond.csv``, documented in
../shared/data/README.md section 4): ``Question``, ``Correct Answer``, ``Incorrect Answer
1``..``3``, ``Explanation``, ``Subdomain``, ``High-level domain``, ``Record ID`` and
``Canary String`` (other columns omitted), with made-up values.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import subprocess
import sys
from collections import Counter

import pytest
from scipy.stats import chisquare

from qualgate.graders import choice_permutation
from qualgate.suites import load_suite

COLUMNS = [
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Explanation",
    "Subdomain",
    "High-level domain",
    "Record ID",
    "Canary String",
]
N = 48


@pytest.fixture(scope="module")
def gpqa_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpqa") / "gpqa_diamond.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for i in range(N):
            w.writerow(
                [
                    f"Synthetic question {i}?\n",
                    f" right {i}\n",
                    f"wrong {i}a",
                    f"wrong {i}b",
                    f"wrong {i}c",
                    "because",
                    "Physics (general)",
                    "Physics",
                    f"rec{i:05d}x",
                    "CANARY",
                ]
            )
    return path


@pytest.fixture(scope="module")
def gpqa(gpqa_csv):
    return load_suite("gpqa_diamond", data_files=gpqa_csv)


def _reference_permutation(key: str, salt: str) -> tuple[int, ...]:
    # Independent reference: the documented rule, with itertools' lexicographic order.
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return list(itertools.permutations(range(4)))[int.from_bytes(digest, "big") % 24]


def test_csv_copy_loads_every_row_keyed_by_record_id(gpqa):
    assert [q.id for q in gpqa.questions] == [f"rec{i:05d}x" for i in range(N)]
    assert gpqa.questions[0].meta == {"High-level domain": "Physics", "Subdomain": "Physics (general)"}


def test_prompt_shows_the_four_options_once_with_the_gold_letter_on_the_correct_one(gpqa):
    for i, q in enumerate(gpqa.questions):
        content = q.prompt[0]["content"]
        lines = {line[:3]: line[3:] for line in content.splitlines() if line[1:3] == ") "}
        assert sorted(lines) == ["A) ", "B) ", "C) ", "D) "]
        assert sorted(lines.values()) == sorted([f"right {i}", f"wrong {i}a", f"wrong {i}b", f"wrong {i}c"])
        assert lines[f"{q.gold}) "] == f"right {i}"
        assert f"Synthetic question {i}?\n\nA) " in content


def test_shuffle_is_the_documented_hash_permutation(gpqa):
    for q in gpqa.questions:
        order = _reference_permutation(q.id, "gpqa_diamond")
        assert choice_permutation(q.id, salt="gpqa_diamond") == order
        assert q.gold == "ABCD"[order.index(0)]


def test_gold_letters_are_not_all_the_same(gpqa):
    assert len(Counter(q.gold for q in gpqa.questions)) == 4


def test_grading_the_requested_format(gpqa):
    q = gpqa.questions[0]
    wrong = next(x for x in "ABCD" if x != q.gold)
    assert gpqa.grade(q, f"Reasoning...\nAnswer: {q.gold}").outcome == "correct"
    assert gpqa.grade(q, f"Reasoning...\n**Answer: ({wrong})**").outcome == "incorrect"
    assert gpqa.grade(q, "I cannot decide.").outcome == "no_answer"


def test_lenient_takes_the_last_standalone_letter(gpqa):
    q = gpqa.questions[0]
    g = gpqa.grade(q, f"Between A and {q.gold}, it must be {q.gold}.")
    assert (g.strict, g.lenient, g.outcome, g.lenient_outcome) == (None, q.gold, "no_answer", "correct")


@pytest.mark.slow
def test_permutation_is_identical_in_another_process_and_python_hash_seed(gpqa_csv, gpqa):
    keys = [f"id-{i}" for i in range(500)]
    code = (
        "import json, sys; from qualgate.graders import choice_permutation; "
        "from qualgate.suites import load_suite; keys = json.loads(sys.argv[1]); "
        "s = load_suite('gpqa_diamond', data_files=sys.argv[2], cache_dir=sys.argv[3]); "
        "print(json.dumps([[choice_permutation(k, salt='gpqa_diamond') for k in keys], "
        "[[q.gold, q.prompt_hash] for q in s.questions]]))"
    )
    import datasets.config

    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(keys), str(gpqa_csv), str(datasets.config.HF_DATASETS_CACHE)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "987", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    perms, golds = json.loads(out.stdout)
    assert [tuple(p) for p in perms] == [choice_permutation(k, salt="gpqa_diamond") for k in keys]
    assert golds == [[q.gold, q.prompt_hash] for q in gpqa.questions]


def test_permutation_is_uniform_over_the_24_orders():
    counts = Counter(choice_permutation(f"rec{i:07d}") for i in range(24_000))
    assert len(counts) == 24
    # Deterministic ids, so this p-value is fixed; uniform sampling would fall below
    # 0.001 with probability 0.001.
    assert chisquare([counts[p] for p in itertools.permutations(range(4))]).pvalue > 0.001


def test_correct_option_position_is_uniform():
    counts = Counter(choice_permutation(f"q{i}").index(0) for i in range(20_000))
    assert chisquare([counts[k] for k in range(4)]).pvalue > 0.001


def test_salt_changes_the_permutation():
    same = sum(choice_permutation(f"q{i}", salt="a") == choice_permutation(f"q{i}", salt="b") for i in range(2400))
    assert 50 < same < 150  # about 1 in 24 agree by chance (binomial mean 100, sd 9.8)
