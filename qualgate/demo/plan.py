"""The embedded demo's plan (``qualgate demo``): ``qualgate/demo/plan.yaml``, sized on demand."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from qualgate.config.decoding import load_plan

__all__ = ["demo_plan"]


def demo_plan(*, questions: int | None = None, seeds: int | Sequence[int] | None = None):
    """The embedded demo plan (``qualgate/demo/plan.yaml``), with the suite's question limit
    and the seeds optionally replaced (``seeds``: a count or a list)."""
    path = Path(str(resources.files("qualgate.demo") / "plan.yaml"))
    plan = load_plan(path)
    changes: dict[str, Any] = {}
    if questions is not None:
        if isinstance(questions, bool) or not isinstance(questions, int) or questions < 1:
            raise ValueError(f"questions must be a positive integer, got {questions!r}")
        changes["suites"] = tuple(dataclasses.replace(s, limit=questions) for s in plan.suites)
    if seeds is not None:
        seeds = list(range(seeds)) if isinstance(seeds, int) and not isinstance(seeds, bool) else list(seeds)
        if (
            not seeds
            or len(set(seeds)) != len(seeds)
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
        ):
            raise ValueError(f"seeds must be a count or distinct non-negative integers, got {seeds!r}")
        changes["seeds"] = tuple(seeds)
    return dataclasses.replace(plan, **changes)
