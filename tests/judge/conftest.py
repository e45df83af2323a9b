"""Fixtures: MT-Bench pairs as records (:mod:`mt_bench_data`) and the judge double (:mod:`judge_double`)."""

from __future__ import annotations

import pytest

from judge_double import JudgeDouble
from mt_bench_data import (
    NEED_REF,
    PHI3,
    answers,
    conversation,
    mt_questions,
    mt_references,
    phi3_rows,
    write_questions,
    write_records,
)


@pytest.fixture
def phi3(tmp_path):
    """The 75 judged phi-3 / phi-3-dpo turn-1 pairs: (baseline, candidate, questions) files."""
    qs, refs = mt_questions(), mt_references()
    base, cand = answers(PHI3 / "model_answer" / "phi-3.jsonl"), answers(PHI3 / "model_answer" / "phi-3-dpo.jsonl")
    judged = sorted(r["question_id"] for r in phi3_rows())
    items = [(str(q), conversation(qs[q], 1, []), refs[q] if qs[q]["category"] in NEED_REF else None) for q in judged]
    questions = write_questions(tmp_path / "questions.jsonl", items)
    b = write_records(tmp_path / "phi-3.jsonl", "cfg-phi-3", [(qid, m, base[int(qid)][0]) for qid, m, _ in items])
    c = write_records(
        tmp_path / "phi-3-dpo.jsonl", "cfg-phi-3-dpo", [(qid, m, cand[int(qid)][0]) for qid, m, _ in items]
    )
    return b, c, questions


@pytest.fixture
def judge_double():
    started = []

    def start(judgments, **kw):
        d = JudgeDouble(judgments, **kw).__enter__()
        started.append(d)
        return d

    yield start
    for d in started:
        d.__exit__(None, None, None)
