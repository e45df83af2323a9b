"""MT-Bench data (read in place from ../shared) as qualgate records and questions files."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qualgate.records.prompts import prompt_hash

from judge_double import OPEN_ENDED, _jsonl, judge_prompts

#: FastChat's NEED_REF_CATS: the categories whose judge prompt shows GPT-4's reference answer
NEED_REF = ("math", "reasoning", "coding")
PHI3 = OPEN_ENDED / "mt_bench_phi3"


def mt_questions() -> dict[int, dict]:
    return {q["question_id"]: q for q in _jsonl(OPEN_ENDED / "mt_bench" / "question.jsonl")}


def mt_references() -> dict[int, list[str]]:
    return {
        r["question_id"]: r["choices"][0]["turns"]
        for r in _jsonl(OPEN_ENDED / "mt_bench" / "reference_answer" / "gpt-4.jsonl")
    }


def answers(path: Path) -> dict[int, list[str]]:
    return {r["question_id"]: r["choices"][0]["turns"] for r in _jsonl(path)}


def conversation(q: dict, turn: int, own: list[str]) -> list[dict]:
    """The prompt of ``turn`` (1-based): the user turns, with this arm's earlier answers."""
    msgs = []
    for i in range(turn):
        msgs.append({"role": "user", "content": q["turns"][i]})
        if i < turn - 1:
            msgs.append({"role": "assistant", "content": own[i]})
    return msgs


def write_questions(path: Path, items) -> Path:
    """``items``: (question_id, messages, reference or None)."""
    with open(path, "w", encoding="utf-8") as fh:
        for qid, msgs, ref in items:
            row = {"suite": "mt_bench", "question_id": qid, "messages": msgs}
            if ref is not None:
                row["reference"] = ref
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_records(path: Path, config_id: str, items) -> Path:
    """``items``: (question_id, messages, output). Records as an imported run would carry them."""
    with open(path, "w", encoding="utf-8") as fh:
        for qid, msgs, output in items:
            fh.write(
                json.dumps(
                    {
                        "schema_version": 1,
                        "run_id": f"fastchat-{config_id}",
                        "config_id": config_id,
                        "suite": "mt_bench",
                        "suite_version": "1",
                        "question_id": qid,
                        "seed": 0,
                        "sample_index": 0,
                        "outcome": "correct",
                        "prompt_hash": prompt_hash(msgs),
                        "output": output,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return path


def phi3_rows() -> list[dict]:
    return _jsonl(PHI3 / "model_judgment" / "gpt-4_pair.jsonl")


# --------------------------------------------------------------------------- single grades


def _template_regex(template: str, known: dict[str, str]) -> re.Pattern:
    """A regex of a FastChat template whose unknown variables (the answers) are groups."""
    parts, seen, pattern = re.split(r"\{([a-z_0-9]+)\}", template), set(), ""
    for i, part in enumerate(parts):
        if i % 2 == 0:
            pattern += re.escape(part)
        elif part in known:
            pattern += re.escape(known[part])
        elif part in seen:
            pattern += f"(?P={part})"
        else:
            seen.add(part)
            pattern += f"(?P<{part}>.*?)"
    return re.compile(pattern + r"\Z", re.S)


def graded_answers(judgments: Path, model: str) -> dict[tuple[int, int], str]:
    """``(question_id, turn) -> answer`` that the judge saw, recovered from each ``user_prompt``
    (the Medusa baselines' answers are stored only there)."""
    prompts, qs, refs = judge_prompts(), mt_questions(), mt_references()
    out = {}
    for row in _jsonl(judgments):
        if row["model"] != model:
            continue
        q, ref = qs[row["question_id"]], refs.get(row["question_id"], [None, None])
        known = {
            "question": q["turns"][0],
            "question_1": q["turns"][0],
            "question_2": q["turns"][1],
            "ref_answer_1": ref[0],
            "ref_answer_2": ref[1],
        }
        known = {k: v for k, v in known.items() if v is not None}
        m = _template_regex(prompts[row["judge"][1]]["prompt_template"], known).match(row["user_prompt"])
        assert m is not None, (row["question_id"], row["turn"])
        if row["turn"] == 1:
            out[(row["question_id"], 1)] = m.group("answer")
        else:
            out[(row["question_id"], 2)] = m.group("answer_2")
            out.setdefault((row["question_id"], 1), m.group("answer_1"))
    return out


def stored_scores(judgments: Path, model: str) -> dict[tuple[int, int], float]:
    return {(r["question_id"], r["turn"]): float(r["score"]) for r in _jsonl(judgments) if r["model"] == model}


def single_items(own: dict[tuple[int, int], str]):
    """``(key, messages, reference, output, question_hash)`` for every graded (question, turn).

    ``question_hash`` hashes the user turns only: a turn-2 prompt holds the arm's own turn-1
    answer, so it differs between arms while the question asked is the same."""
    qs, refs = mt_questions(), mt_references()
    items = []
    for (qid, turn), output in sorted(own.items()):
        q = qs[qid]
        msgs = conversation(q, turn, [own[(qid, 1)]])
        ref = refs[qid] if q["category"] in NEED_REF else None
        items.append(
            ((qid, turn), msgs, ref, output, prompt_hash([{"role": "user", "content": t} for t in q["turns"][:turn]]))
        )
    return items


def write_graded(path: Path, config_id: str, items, grades) -> Path:
    """Records of graded items: question_id the MT-Bench id, sample_index the turn - 1 (the
    question is the cluster)."""
    with open(path, "w", encoding="utf-8") as fh:
        for (key, _, _, output, qhash), g in zip(items, grades):
            rec = {
                "schema_version": 1,
                "run_id": f"judged-{config_id}",
                "config_id": config_id,
                "suite": "mt_bench",
                "suite_version": "1",
                "question_id": str(key[0]),
                "seed": 0,
                "sample_index": key[1] - 1,
                "outcome": g.outcome,
                "prompt_hash": qhash,
                "decided_by": g.decided_by,
                "output": output,
            }
            if g.strict is not None:
                rec["answer_strict"] = g.strict
            if g.error is not None:
                rec["error"] = g.error
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path
