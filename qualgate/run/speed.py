"""Speed-ups measured side by side: interleaved rounds, the median of per-round ratios.

Timing each config on its own, at a different moment, lets whatever else the machine does
decide the speed-up (a loaded CPU once turned a 2.8x speed-up into "105x"). Here every round
decodes the *same* batch of questions under every config back to back, in an order rotated
from round to round, and each candidate's speed-up is the median over rounds of

    ratio_r = (output tokens / engine seconds of the candidate in round r)
              / (output tokens / engine seconds of the baseline in round r),

with a distribution-free confidence interval for that median from the order statistics of the
ratios (the binomial sign-test interval: Conover, *Practical Nonparametric Statistics*, 3rd
ed., 1999, §3.2; the same interval as R's ``DescTools::MedianCI(method = "exact")``). Load
that lasts a round slows both sides of its ratio; load that comes and goes moves a few ratios,
which the median ignores. A warning is raised when the interval is wider than
``max_relative_width`` times the speed-up.

:func:`measure_speed` runs those rounds for a plan (``qualgate run --speed-rounds``): every
config's backend open at once, each round's work items decoded under each config with
:func:`batch_generator`.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scipy import stats

from qualgate.backends import open_backend
from qualgate.errors import DataError

if TYPE_CHECKING:
    from qualgate.run.runner import WorkItem

__all__ = [
    "SpeedResult",
    "SpeedSettings",
    "batch_generator",
    "interleaved_speed",
    "measure_speed",
    "median_ci",
    "speed_summary",
]


@dataclass(frozen=True)
class SpeedResult:
    """One candidate's interleaved speed-up over the baseline."""

    config: str
    baseline: str
    rounds: int
    ratios: tuple[float, ...]  #: per round, candidate tokens/s over baseline tokens/s
    tokens_per_s: tuple[float, ...]  #: the candidate's, per round
    baseline_tokens_per_s: tuple[float, ...]
    speedup: float  #: median of ``ratios``
    confidence_interval: tuple[float, float]
    confidence_level: float  #: achieved (order statistics give discrete levels >= the asked one)
    warning: str | None = None

    def to_dict(self) -> dict:
        return {
            "config": self.config,
            "baseline": self.baseline,
            "rounds": self.rounds,
            "ratios": list(self.ratios),
            "tokens_per_s": list(self.tokens_per_s),
            "baseline_tokens_per_s": list(self.baseline_tokens_per_s),
            "speedup": self.speedup,
            "confidence_interval": list(self.confidence_interval),
            "confidence_level": self.confidence_level,
            "warning": self.warning,
        }


def median_ci(values: Sequence[float], confidence_level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free interval for the median: ``(low, high, achieved_level)``.

    With the values sorted, ``(x_(k), x_(n+1-k))`` for the largest ``k`` with
    ``2 * P(Binomial(n, 1/2) <= k - 1) <= 1 - confidence_level``; its coverage is at least
    ``confidence_level`` for any continuous distribution. With too few values for that level
    (n < 6 at 95 %) the interval is ``(-inf, inf)`` with level 1.

    Examples
    --------
    >>> median_ci(range(1, 11))  # n = 10: x_(2), x_(9), level 1 - 2 * 11/1024
    (2.0, 9.0, 0.978515625)
    """
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if n == 0:
        raise ValueError("median_ci needs at least one value")
    tail = (1 - confidence_level) / 2
    k = 0
    while k + 1 <= n // 2 and stats.binom.cdf(k, n, 0.5) <= tail:
        k += 1
    if k == 0:
        return -math.inf, math.inf, 1.0
    return xs[k - 1], xs[n - k], float(1 - 2 * stats.binom.cdf(k - 1, n, 0.5))


def speed_summary(
    config, baseline, candidate_tps, baseline_tps, *, confidence_level=0.95, max_relative_width=0.2
) -> SpeedResult:
    """The :class:`SpeedResult` of per-round tokens/s of a candidate and of the baseline."""
    if len(candidate_tps) != len(baseline_tps) or not candidate_tps:
        raise ValueError("candidate_tps and baseline_tps must hold one value per round, at least one round")
    if any(not (math.isfinite(b) and b > 0) for b in baseline_tps):
        raise ValueError(
            f"a round of the baseline produced no output tokens per second ({list(baseline_tps)}): "
            "its requests failed or the round was empty, so no speed-up can be measured"
        )
    ratios = [c / b for c, b in zip(candidate_tps, baseline_tps)]
    speedup = float(statistics.median(ratios))
    low, high, level = median_ci(ratios, confidence_level)
    warning = None
    if not math.isfinite(low) or (high - low) > max_relative_width * speedup:
        warning = (
            f"the speed-up's {level:.1%} interval [{low:.3g}, {high:.3g}] is wider than "
            f"{max_relative_width:.0%} of the speed-up ({speedup:.3g}): run more rounds or on a quieter machine"
        )
    return SpeedResult(
        config,
        baseline,
        len(ratios),
        tuple(ratios),
        tuple(candidate_tps),
        tuple(baseline_tps),
        speedup,
        (low, high),
        level,
        warning,
    )


def interleaved_speed(
    generate: Mapping[str, Callable],
    rounds: Sequence[Sequence],
    *,
    baseline: str,
    confidence_level: float = 0.95,
    max_relative_width: float = 0.2,
    clock: Callable[[], float] = time.perf_counter,
    step: Callable[[int], None] | None = None,
) -> dict[str, SpeedResult]:
    """Measure every config's speed-up over ``baseline`` in interleaved rounds.

    Parameters
    ----------
    generate : mapping of name -> callable
        ``generate[name](requests)`` decodes a batch and returns objects with
        ``output_tokens`` (a backend's ``generate``); the baseline is one of the names.
    rounds : sequence of request batches
        Round ``r`` sends ``rounds[r]`` to every config, in the order of the names rotated by
        ``r`` (so that no config always goes first, or always follows the same one).
    step : callable, optional
        ``step(n)`` after each config's part of a round, with the part's requests (progress).

    Returns
    -------
    dict of name -> SpeedResult, for every name but the baseline.
    """
    names = list(generate)
    if baseline not in generate:
        raise ValueError(f"baseline {baseline!r} is not one of {names}")
    tps: dict[str, list[float]] = {n: [] for n in names}
    for r, requests in enumerate(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = clock()
            gens = generate[name](requests)
            seconds = clock() - t0
            tokens = sum(g.output_tokens or 0 for g in gens)
            tps[name].append(tokens / seconds if seconds > 0 else math.inf)
            if step is not None:
                step(len(requests))
    return {
        name: speed_summary(
            name,
            baseline,
            tps[name],
            tps[baseline],
            confidence_level=confidence_level,
            max_relative_width=max_relative_width,
        )
        for name in names
        if name != baseline
    }


@dataclass(frozen=True)
class SpeedSettings:
    """Interleaved speed rounds after the quality run (see :func:`measure_speed`): ``rounds``
    rounds of ``questions`` work items each, the first ones of the seeded order."""

    rounds: int = 7
    questions: int = 64
    confidence_level: float = 0.95
    max_relative_width: float = 0.2

    def __post_init__(self):
        for name in ("rounds", "questions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"speed {name} must be a positive integer, got {v!r}")


def batch_generator(cfg, backend) -> Callable[[Sequence[WorkItem]], list]:
    """``generate(items)``: decode work items under ``cfg`` through ``backend``, in its batch
    size, each with its request seed; the generations in order."""
    size = max(1, int(backend.batch_size))

    def generate(items):
        gens = []
        for start in range(0, len(items), size):
            gens += backend.generate([w.request(cfg.sampling) for w in items[start : start + size]])
        return gens

    return generate


def measure_speed(
    plan,
    work: Sequence[WorkItem],
    settings: SpeedSettings,
    *,
    names: Sequence[str] | None = None,
    backend_factory: Callable = open_backend,
    log: Callable[[str], None] | None = None,
    progress: Callable | None = None,
    open_backends: Mapping | None = None,
) -> dict:
    """Interleaved speed of ``names`` (default: every config) against the plan's baseline.

    Every config's backend is open at once, so that round ``r`` can send the same requests to
    each config back to back; a backend that must hold the accelerator alone cannot take part
    (``DataError``). ``progress(label, total)`` (as :func:`qualgate.run.runner.run_plan`'s)
    follows the rounds' requests. ``open_backends`` (name -> backend) are used instead of new
    ones, and left open (the quality run's, whose models are loaded and warm). Returns the manifest's ``speed`` entry: the settings and, per candidate,
    :meth:`qualgate.run.speed.SpeedResult.to_dict`.
    """
    log = log or (lambda msg: None)
    names = [plan.baseline] + [n for n in (names or plan.configs) if n != plan.baseline]
    per_round = settings.questions
    if len(work) < settings.rounds * per_round:
        per_round = max(1, len(work) // settings.rounds)
    rounds = [work[r * per_round : (r + 1) * per_round] for r in range(settings.rounds)]
    rounds = [r for r in rounds if r]
    t0 = time.perf_counter()
    opened = dict(open_backends or {})
    backends = {}
    try:
        for name in names:
            backend = opened.get(name) or backend_factory(plan.configs[name])
            backends[name] = backend
            if getattr(backend, "exclusive", False):
                raise DataError(
                    f"engine {backend.engine!r} of config {name!r} holds the accelerator alone, so its "
                    "speed cannot be measured interleaved with the others; measure it without "
                    "--speed-rounds",
                    field="engine",
                    value=backend.engine,
                )

        def generate_for(name):
            return batch_generator(plan.configs[name], backends[name])

        for name in names:  # one warm-up batch each: lazy initialisation is not speed
            generate_for(name)(rounds[0][:1])
        total = sum(len(r) for r in rounds) * len(names)
        label = f"speed: {len(rounds)} interleaved rounds"
        with progress(label, total) if progress else contextlib.nullcontext() as bar:
            results = interleaved_speed(
                {n: generate_for(n) for n in names},
                rounds,
                baseline=plan.baseline,
                confidence_level=settings.confidence_level,
                max_relative_width=settings.max_relative_width,
                step=bar.update if bar is not None else None,
            )
    finally:
        for name, backend in backends.items():
            if name not in opened:
                backend.close()
    for r in results.values():
        log(
            # the interval named as its warning names it (and the HTML page): its achieved level
            f"{r.config}: speed-up {r.speedup:.2f}x ({r.confidence_level:.1%} interval [{r.confidence_interval[0]:.2f}"
            f", {r.confidence_interval[1]:.2f}]) over {r.rounds} interleaved rounds"
        )
        if r.warning:
            log(f"{r.config}: warning: {r.warning}")
    return {
        "method": "interleaved",
        "rounds": len(rounds),
        "questions_per_round": per_round,
        "confidence_level": settings.confidence_level,
        "max_relative_width": settings.max_relative_width,
        "wall_s": round(time.perf_counter() - t0, 3),  #: opening the backends, warm-up and rounds
        "results": {name: r.to_dict() for name, r in results.items()},
    }
