"""What a gate decides, the base of both designs' reports: :class:`GateResult`.

:class:`qualgate.verdict.fixed.GateReport` and
:class:`qualgate.verdict.sequential.SequentialReport` add their design's settings; the
report file is built here, once, from the typed parts of :mod:`qualgate.evidence.contract`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from qualgate.config.options import READING_DEFAULTS
from qualgate.evidence.contract import Baseline, Candidate, Settings, Verdict
from qualgate.evidence.gate_report import Evidence
from qualgate.verdict.pairing import Side

__all__ = ["GateResult"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateResult:
    """The settings and verdicts of one gate over one baseline and its candidates.

    ``comparisons``: one per candidate, each with a ``verdict`` and a ``to_candidate()`` (its
    part of the report file). ``reading``: the options the records were read and paired with
    (:data:`qualgate.config.options.READING_DEFAULTS` for pairings read elsewhere).
    ``baseline_config``: what the baseline serves
    (:func:`qualgate.evidence.gate_report.describe_config`); ``plan``: the plan file's and the
    run's digests (harness runs). :meth:`evidence` is the report file, ``to_dict()`` its content.
    """

    DESIGN: ClassVar[str]
    created_at: str
    margin: float
    alpha: float
    inconclusive: str
    baseline: Side
    comparisons: tuple[Any, ...]
    verdict: Verdict
    exit_code: int
    missing: str = "worst-case"
    reading: dict = dataclasses.field(default_factory=lambda: dict(READING_DEFAULTS))
    baseline_config: dict | None = None
    plan: dict | None = None
    #: what each candidate serves (:func:`qualgate.evidence.binding.describe_side`), in order; ``None``: unknown
    candidate_configs: tuple[dict | None, ...] | None = None

    def settings(self) -> Settings:
        """The report's ``settings``: every setting that can change a verdict."""
        raise NotImplementedError

    def candidates(self) -> tuple[Candidate, ...]:
        out = tuple(c.to_candidate() for c in self.comparisons)
        configs = self.candidate_configs or (None,) * len(out)
        return tuple(  # an unknown config is left out (as reports before issue 46 have it), not null
            dataclasses.replace(c, config=cfg, absent=c.absent - {"config"})
            if cfg is not None
            else dataclasses.replace(c, absent=c.absent | {"config"})
            for c, cfg in zip(out, configs)
        )

    def warnings(self, candidates: tuple[Candidate, ...] | None = None) -> tuple[str, ...]:
        """Swapped sides, sides that differ in more than the speculative block, a binding that
        cannot be checked (:func:`qualgate.evidence.binding.binding_warnings`)."""
        from qualgate.evidence.binding import binding_warnings

        candidates = self.candidates() if candidates is None else candidates
        return tuple(
            binding_warnings(
                self.baseline_config,
                [c.config for c in candidates],
                [c.name for c in candidates],
                baseline_mode=self.baseline.mode,
                candidate_modes=[c.mode for c in candidates],
            )
        )

    def evidence(self) -> Evidence:
        """The report file (:class:`qualgate.evidence.gate_report.Evidence`), unsigned."""
        candidates = self.candidates()
        return Evidence(
            created_at=self.created_at,
            design=self.DESIGN,
            settings=self.settings(),
            baseline=Baseline.of(self.baseline, self.baseline_config),
            candidates=candidates,
            verdict=self.verdict,
            exit_code=int(self.exit_code),
            plan=self.plan,
            warnings=self.warnings(candidates),
        )

    def to_dict(self) -> dict:
        return self.evidence().to_dict()
