"""Grading without gold: a judge model, pointwise (a rating per output) or pairwise (which
of two outputs is better, asked in both orders).

A judge is a decoding config run through the ordinary backends (:mod:`._judge`), with a
prompt template file (:mod:`._prompts`; shipped: ``pointwise`` and ``pairwise`` in
``qualgate/judge/templates/``). Pointwise: the suite grader ``judge``
(:mod:`._pointwise`). Pairwise: ``qualgate judge`` (:func:`judge_pairs`). A reply the parser
cannot read exactly is outcome ``judge_error``, which ``qualgate gate`` refuses as it refuses
``error`` (``--max-errors``).
"""

from ._judge import Judge, Reply, load_judge
from ._noise import judged_discordance
from ._pairwise import JudgeSummary, VerdictCache, judge_pairs, judged_reasons, load_questions, questions_from_suite
from ._pointwise import JudgeGrade, PointwiseJudge, make_grader
from ._prompts import BUILTIN, Template, Unreadable, load_template, parse_choice, parse_rating
from ._sensitivity import JudgedGate, Sensitivity, judged_gate, planted_pairs, sensitivity_lower_bound

__all__ = [
    "BUILTIN",
    "Judge",
    "JudgeGrade",
    "JudgeSummary",
    "JudgedGate",
    "PointwiseJudge",
    "Reply",
    "Sensitivity",
    "Template",
    "Unreadable",
    "VerdictCache",
    "judge_pairs",
    "judged_discordance",
    "judged_gate",
    "judged_reasons",
    "load_judge",
    "load_questions",
    "load_template",
    "make_grader",
    "parse_choice",
    "parse_rating",
    "planted_pairs",
    "questions_from_suite",
    "sensitivity_lower_bound",
]
