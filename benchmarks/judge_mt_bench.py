"""The judge paths on real MT-Bench data, with the judge double replaying GPT-4's stored grades.

1. Pointwise (suite grader ``judge``, pass = rating >= 7): Medusa on Vicuna-7B against plain
   greedy and plain sampling decoding, H2O (10 % + 10 % KV cache) against the full cache on
   Llama-2-7b-chat; 80 questions x 2 turns, the question as the cluster; gate at margin 5
   points, alpha 0.05. Printed next to the single-run mean scores (1-10) the authors reported.
2. GPT-4's own run-to-run noise: prompts GPT-4 graded twice (two arms gave the same answer),
   and how often the two grades differ, and cross the pass threshold.
3. Pairwise (``qualgate judge``): phi-3 against phi-3-dpo, GPT-4's 75 verdicts in both orders.

Run: ``python benchmarks/judge_mt_bench.py`` (results: benchmarks/results/judge_mt_bench.txt).
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from qualgate.judge import PointwiseJudge, judge_pairs, load_judge, load_questions  # noqa: E402
from qualgate.verdict.fixed import run_gate  # noqa: E402
from qualgate.verdict.pairing import load_side  # noqa: E402

from judge_double import OPEN_ENDED, JudgeDouble, fastchat_judgments, fastchat_template  # noqa: E402
from mt_bench_data import (  # noqa: E402
    NEED_REF,
    PHI3,
    answers,
    conversation,
    graded_answers,
    mt_questions,
    mt_references,
    single_items,
    stored_scores,
    write_graded,
    write_questions,
    write_records,
)

MEDUSA = "medusa-vicuna-7b-v1.3-1-temperature-0.0-posterior_threshold-0.09-posterior_alpha-0.3"
PASS, MARGIN = 7, 0.05
CASES = [
    ("Medusa vs greedy (Vicuna-7B)", "mt_bench_medusa", "vicuna-7b-v1.3-greedy", MEDUSA),
    ("Medusa vs sampling (Vicuna-7B)", "mt_bench_medusa", "vicuna-7b-v1.3", MEDUSA),
    ("H2O 10%+10% vs full cache (Llama-2-7b-chat)", "mt_bench_h2o", "llama-2-chat-7b", "llama-2-chat-7b-0.1-0.1"),
]


def pointwise(tmp: Path):
    print(
        f"## 1. Pointwise judge grader, pass = rating >= {PASS}; gate: margin {MARGIN * 100:g} points of pass "
        "rate, alpha 0.05, 80 questions x 2 turns\n"
    )
    print(
        "| pair | mean score B / C (stored grades, as the data README reports) | pass rate B / C | lost / gained | loss UB 95% (points) | verdict |"
    )
    print("|---|---:|---:|---:|---:|---|")
    with JudgeDouble({}) as d:
        judge = PointwiseJudge(
            load_judge(d.config(tmp / "gpt4.yaml"), fastchat_template(tmp / "p.yaml", "pointwise"), kind="pointwise"),
            PASS,
        )
        for label, folder, b, c in CASES:
            judgments = OPEN_ENDED / folder / "model_judgment" / "gpt-4_single.jsonl"
            files, means, rates = [], [], []
            for arm in (b, c):
                d.judgments = fastchat_judgments(judgments, model=arm)
                items = single_items(graded_answers(judgments, arm))
                grades = judge.grade_many([(m, r, o) for _, m, r, o, _ in items])
                stored = stored_scores(judgments, arm)
                assert [float(g.strict) for g in grades] == [stored[k] for k, *_ in items]
                means.append(sum(stored.values()) / len(stored))
                rates.append(sum(g.outcome == "correct" for g in grades) / len(grades))
                files.append(write_graded(tmp / f"{arm[:40]}.jsonl", f"cfg-{arm[:40]}", items, grades))
            assert not d.refused
            report = run_gate(files[0], [files[1]], margin=MARGIN, alpha=0.05)
            p = report.comparisons[0].pooled
            print(
                f"| {label} | {means[0]:.3f} / {means[1]:.3f} | {rates[0]:.1%} / {rates[1]:.1%} | "
                f"{p.lost} / {p.gained} | {100 * p.loss_upper_bound:.2f} | {report.verdict} |"
            )


def grader_noise():
    print("\n## 2. GPT-4's own noise: one prompt graded twice (two arms gave the same answer)\n")
    print("| data | prompts graded twice | grades differ | pass/fail differ (>= 7) |")
    print("|---|---:|---:|---:|")
    for folder in ("mt_bench_medusa", "mt_bench_h2o"):
        by = collections.defaultdict(list)
        for line in (OPEN_ENDED / folder / "model_judgment" / "gpt-4_single.jsonl").read_text().splitlines():
            r = json.loads(line)
            by[(r["judge"][1], r["user_prompt"])].append(float(r["score"]))
        twice = [v for v in by.values() if len(v) > 1]
        differ = sum(len(set(v)) > 1 for v in twice)
        flips = sum(len({s >= PASS for s in v}) > 1 for v in twice)
        print(f"| {folder} | {len(twice)} | {differ} | {flips} |")


def pairwise(tmp: Path):
    print("\n## 3. Pairwise: qualgate judge phi-3 phi-3-dpo, GPT-4's 75 stored verdicts (both orders)\n")
    qs, refs = mt_questions(), mt_references()
    base, cand = answers(PHI3 / "model_answer" / "phi-3.jsonl"), answers(PHI3 / "model_answer" / "phi-3-dpo.jsonl")
    rows = [json.loads(x) for x in (PHI3 / "model_judgment" / "gpt-4_pair.jsonl").read_text().splitlines()]
    items = [
        (str(q), conversation(qs[q], 1, []), refs[q] if qs[q]["category"] in NEED_REF else None)
        for q in sorted(r["question_id"] for r in rows)
    ]
    questions = write_questions(tmp / "q.jsonl", items)
    b = write_records(tmp / "phi-3.jsonl", "cfg-phi-3", [(q, m, base[int(q)][0]) for q, m, _ in items])
    c = write_records(tmp / "phi-3-dpo.jsonl", "cfg-phi-3-dpo", [(q, m, cand[int(q)][0]) for q, m, _ in items])
    with JudgeDouble(fastchat_judgments(PHI3 / "model_judgment" / "gpt-4_pair.jsonl")) as d:
        j = load_judge(
            d.config(tmp / "gpt4-pair.yaml"), fastchat_template(tmp / "pp.yaml", "pairwise"), kind="pairwise"
        )
        s = judge_pairs(load_side(b), load_side(c), j, load_questions(questions), tmp / "judged")
        again = judge_pairs(load_side(b), load_side(c), j, load_questions(questions), tmp / "judged")
    print(json.dumps(s.to_dict()))
    print(f"second run: {again.calls} judge calls, {again.cached} from the cache")
    report = run_gate(
        tmp / "judged" / "baseline", [tmp / "judged" / "candidate"], margin=0.1, alpha=0.05, max_errors=s.judge_error
    )
    p = report.comparisons[0].pooled
    print(
        f"gate (--max-errors {s.judge_error}, margin 10 points): {p.pairs} pairs, lost {p.lost}, gained {p.gained}, "
        f"loss UB 95% {100 * p.loss_upper_bound:.2f} points: {report.verdict}"
    )


def main():
    with tempfile.TemporaryDirectory() as tmp:
        pointwise(Path(tmp))
        grader_noise()
        pairwise(Path(tmp))


if __name__ == "__main__":
    main()
