"""The suite grader ``judge``: a judge model rates each output; a rating of at least
``pass_score`` is ``correct``.

In a suite file::

    grader:
      name: judge
      params:
        config: judge.yaml     # the judge: a decoding config (path relative to the suite file)
        prompt: pointwise      # a template: built-in name or YAML path (default: pointwise)
        pass_score: 7          # correct when the rating >= pass_score (on the template's scale)
        reference: true        # show the suite's gold answer as the reference (default true)

``extract`` and ``decides`` are not used with this grader (and may be left out). The record
keeps the rating in ``answer_strict`` and names the judge in ``decided_by``
(``judge:<name>@<judge_id>``); a reply that holds no readable rating, or a judge request that
failed, is outcome ``judge_error`` with the reason in ``error``. The gate is unchanged: it
compares pass rates, and ``qualgate gate`` refuses ``judge_error`` pairs unless
``--max-errors`` allows them.

:meth:`PointwiseJudge.grade_many` rates a batch in one backend call (the backend's own
concurrency keeps the judge requests in flight together); the harness grades each decoded
batch that way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.graders import Grade, strip_think

from ._judge import Judge, load_judge
from ._prompts import Unreadable, variables

__all__ = ["JudgeGrade", "PointwiseJudge", "make_grader"]


@dataclass(frozen=True)
class JudgeGrade(Grade):
    """A :class:`~qualgate.graders.Grade` from a judge, with the judge's text and error."""

    error: str | None = None
    judgment: str | None = None


class PointwiseJudge:
    """A judge grader (see the module docstring)."""

    #: grades an output without a gold answer (a traffic suite needs no gold column for it)
    grades_without_gold = True

    def __init__(self, judge: Judge, pass_score: float, *, reference: bool = True):
        t = judge.template
        if (
            isinstance(pass_score, bool)
            or not isinstance(pass_score, (int, float))
            or not t.low <= pass_score <= t.high
        ):
            raise DataError(
                f"pass_score must be a number on the template's scale [{t.low:g}, {t.high:g}]",
                file=t.path,
                field="pass_score",
                value=pass_score,
            )
        self.judge, self.pass_score, self.reference = judge, float(pass_score), bool(reference)

    def describe(self) -> dict[str, Any]:
        return {
            "judge": self.judge.identity | {"judge_id": self.judge.judge_id},
            "pass_score": self.pass_score,
            "reference": self.reference,
        }

    def grade_many(self, items: Sequence[tuple[Sequence[dict], Any, str]], *, think: str = "off") -> list[JudgeGrade]:
        """Grade ``(messages, reference, output)`` items; one :class:`JudgeGrade` each."""
        by = self.judge.decided_by
        grades: list[JudgeGrade | None] = [None] * len(items)
        asks = []
        for i, (messages, reference, output) in enumerate(items):
            if think != "off":
                output = strip_think(output, prefilled=think == "prefilled")
                if output is None:  # ended inside its reasoning: nothing to judge
                    grades[i] = JudgeGrade("no_answer", None, None, "no_answer", "no_answer", "think:unfinished")
                    continue
            turns, var = variables(messages, reference if self.reference else None, {"": output})
            variant = self.judge.template.variant(turns, "reference" in var)
            asks.append((i, self.judge.template.render(variant, var)))
        replies = self.judge.ask([m for _, m in asks])
        for (i, _), reply in zip(asks, replies):
            if reply.error is not None:
                grades[i] = JudgeGrade(
                    "judge_error",
                    None,
                    None,
                    "judge_error",
                    "judge_error",
                    by,
                    error=f"the judge failed: {reply.error}",
                )
                continue
            try:
                score = self.judge.template.parse(reply.text)
            except Unreadable as exc:
                grades[i] = JudgeGrade(
                    "judge_error", None, None, "judge_error", "judge_error", by, error=str(exc), judgment=reply.text
                )
                continue
            outcome = "correct" if score >= self.pass_score else "incorrect"
            grades[i] = JudgeGrade(outcome, f"{score:g}", None, outcome, outcome, by, judgment=reply.text)
        return grades  # type: ignore[return-value]

    def close(self) -> None:
        self.judge.close()


def make_grader(params: dict, suite_path: str) -> PointwiseJudge:
    """The grader of a suite file's ``grader: {name: judge, params: ...}``."""
    allowed = {"config", "prompt", "pass_score", "reference"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise DataError(
            f"unknown judge grader parameter; valid: {sorted(allowed)}",
            file=suite_path,
            field=f"grader.params.{unknown[0]}",
        )
    for key in ("config", "pass_score"):
        if key not in params:
            raise DataError("required by the judge grader", file=suite_path, field=f"grader.params.{key}")
    if not isinstance(params["config"], str):
        raise DataError(
            "must be the path of a decoding config",
            file=suite_path,
            field="grader.params.config",
            value=params["config"],
        )
    reference = params.get("reference", True)
    if not isinstance(reference, bool):
        raise DataError("must be true or false", file=suite_path, field="grader.params.reference", value=reference)
    base = Path(suite_path).parent
    judge = load_judge(params["config"], params.get("prompt", "pointwise"), kind="pointwise", base=base)
    return PointwiseJudge(judge, params["pass_score"], reference=reference)
