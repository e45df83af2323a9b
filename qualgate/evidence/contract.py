"""The gate report's parts as typed, frozen classes: what the writer builds and every reader reads.

A report (:class:`qualgate.evidence.gate_report.Evidence`) holds its design's settings
(:class:`FixedSettings` or :class:`SequentialSettings`), the baseline (:class:`Baseline`: a
:class:`ReportSide` with what it serves), one candidate per config gated
(:class:`FixedCandidate` or :class:`SequentialCandidate`, each with its :class:`ReportSide` and its
:class:`Missingness`) and the overall :class:`Verdict`. The verdicts are defined here and
nowhere else.

Each part writes itself (``to_dict``) as version 2 of the file has it, keys in the order the
writer has always written them, and reads itself back (``from_dict``) from a document that
:mod:`qualgate.evidence.gate_report` has validated. Keys an earlier version-2 writer did not
write (``flips`` of a candidate, ``decided_by`` and ``metric`` of a side) read as their default and are not
written back, and keys a part does not name are kept as they were (``extra``), so that a
report read and written again is the same document and its HMAC still holds.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

__all__ = [
    "Baseline",
    "Candidate",
    "FixedCandidate",
    "FixedMissingness",
    "FixedSettings",
    "Missingness",
    "RecordFile",
    "ReportSide",
    "SequentialCandidate",
    "SequentialSettings",
    "Settings",
    "Verdict",
]


class Verdict(enum.StrEnum):
    """A gate's verdict; a ``str``, so that it compares with and is written as its name."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"

    @classmethod
    def worst(cls, verdicts: Iterable[str]) -> Verdict:
        """FAIL if any is FAIL, else INCONCLUSIVE if any is, else PASS (``verdicts`` non-empty).

        >>> Verdict.worst(["PASS", "INCONCLUSIVE"])
        <Verdict.INCONCLUSIVE: 'INCONCLUSIVE'>
        """
        seen = {cls(v) for v in verdicts}
        if not seen:
            raise ValueError("no verdicts")
        return cls.FAIL if cls.FAIL in seen else cls.INCONCLUSIVE if cls.INCONCLUSIVE in seen else cls.PASS


_SCALARS = frozenset({str, int, float, bool})


def _plain(value):
    """A part's value as JSON holds it (verdicts as strings, parts as dicts, tuples as lists)."""
    if value is None or type(value) in _SCALARS:  # most values of a large report
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, _Part):
        return value.to_dict()
    if type(value) is dict and all(v is None or type(v) in _SCALARS for v in value.values()):
        return dict(value)  # a flat dict (a flip): no call per value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _read(kind):
    """The field metadata that reads a JSON value into ``kind`` (a part, a verdict, a tuple of parts)."""
    return {"read": kind}


def _tuple_of(kind):
    return lambda values: tuple(kind(v) for v in values)


def _dict(value):
    return dict(value) if isinstance(value, Mapping) else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Part:
    """Fields in the order they are written; ``extra``: keys kept as read; ``absent``: fields the
    document read did not have (written back without them)."""

    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    absent: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)

    _OWN: ClassVar[tuple[str, ...]] = ("extra", "absent")

    @classmethod
    def _fields(cls):
        return [f for f in dataclasses.fields(cls) if f.name not in _Part._OWN]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: _plain(getattr(self, f.name)) for f in self._fields() if f.name not in self.absent}
        return out | {k: _plain(v) for k, v in self.extra.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        """Read a validated document's part (see the module docstring)."""
        if isinstance(data, cls):
            return data
        fields = cls._fields()
        names = {f.name for f in fields}
        values = {}
        for f in fields:
            if f.name in data:
                read = f.metadata.get("read")
                values[f.name] = read(data[f.name]) if read is not None and data[f.name] is not None else data[f.name]
        absent = frozenset(names - set(data))
        return cls(**values, extra={k: v for k, v in data.items() if k not in names}, absent=absent)


# ------------------------------------------------------------------------------- sides


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordFile(_Part):
    """A record file read, with its SHA-256 as read."""

    path: str
    sha256: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportSide(_Part):
    """One side's records as the report describes them (:meth:`qualgate.verdict.pairing.Side.to_dict`)."""

    path: str | None = None
    config_id: str
    mode: str | None = None
    run_ids: tuple[str, ...] = dataclasses.field(default=(), metadata=_read(tuple))
    files: tuple[RecordFile, ...] = dataclasses.field(metadata=_read(_tuple_of(RecordFile.from_dict)))
    records: int | None = None
    dropped_truncated: tuple[str, ...] = dataclasses.field(default=(), metadata=_read(tuple))
    decided_by: Mapping[str, int] = dataclasses.field(default_factory=dict, metadata=_read(_dict))
    #: suite -> the metric another tool's log was read on (``<tool>:<metric>``, the records'
    #: ``decided_by``); written only for sides imported from such logs
    metric: Mapping[str, str] = dataclasses.field(default_factory=dict, metadata=_read(_dict))
    #: the engine and version the side's records name (absent: records or a report written
    #: before qualgate kept them)
    engine: str | None = None
    engine_version: str | None = None

    @classmethod
    def of(cls, side) -> ReportSide:
        """The report's description of a :class:`qualgate.verdict.pairing.Side`."""
        return cls.from_dict(side.to_dict())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Baseline(ReportSide):
    """The baseline side, with what it serves (``config``:
    :func:`qualgate.evidence.gate_report.describe_config`, or ``None``)."""

    config: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))

    @classmethod
    def of(cls, side, config: Mapping[str, Any] | None = None) -> Baseline:
        return cls.from_dict(side.to_dict() | {"config": config})


# ------------------------------------------------------------------------- missingness


@dataclasses.dataclass(frozen=True, kw_only=True)
class Missingness(_Part):
    """A candidate's verdict with its incomplete pairs counted as lost and with them dropped,
    and what was incomplete (:attr:`qualgate.verdict.pairing.Pairing.dropped`)."""

    imputed_as_lost: int | None = None
    verdict_worst_case: Verdict = dataclasses.field(metadata=_read(Verdict))
    verdict_dropped: Verdict = dataclasses.field(metadata=_read(Verdict))
    incomplete: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))

    def decisive(self, missing: str) -> Verdict:
        """The verdict that decides under ``settings.missing``."""
        return self.verdict_worst_case if missing == "worst-case" else self.verdict_dropped


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedMissingness(Missingness):
    """:class:`Missingness` of the fixed design, with the loss bound under each handling."""

    loss_upper_bound_worst_case: float | None = None
    loss_upper_bound_dropped: float | None = None

    @classmethod
    def _fields(cls):  # as written: the bounds before ``incomplete``
        *first, incomplete, worst, dropped = super()._fields()
        return [*first, worst, dropped, incomplete]


# ---------------------------------------------------------------------------- settings


class Settings:
    """What both designs' settings hold (every setting that can change a verdict)."""

    DESIGN: ClassVar[str]
    policy: str
    margin: float
    alpha: float
    inconclusive: str
    missing: str
    on_missing: str
    max_errors: int
    drop_truncated: bool
    allow_unknown: bool

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The settings keys of this design, in the order they are written."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def reading(self) -> dict[str, Any]:
        """The options the records were read and paired with."""
        return {
            "on_missing": self.on_missing,
            "max_errors": self.max_errors,
            "drop_truncated": self.drop_truncated,
            "allow_unknown": self.allow_unknown,
        }

    def to_dict(self) -> dict[str, Any]:
        return {k: _plain(getattr(self, k)) for k in self.keys()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        return data if isinstance(data, cls) else cls(**{k: data[k] for k in cls.keys()})


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedSettings(Settings):
    """``settings`` of a fixed-design report (:func:`qualgate.verdict.fixed.gate`)."""

    DESIGN: ClassVar[str] = "fixed"
    policy: str
    margin: float
    alpha: float
    weighting: str
    inconclusive: str
    missing: str
    on_missing: str
    max_errors: int
    drop_truncated: bool
    allow_unknown: bool
    suite_policy: Mapping[str, Any] | None  #: the policy file's rules (:mod:`qualgate.verdict.policy`)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SequentialSettings(Settings):
    """``settings`` of a sequential report (:func:`qualgate.verdict.sequential.sequential_gate`)."""

    DESIGN: ClassVar[str] = "sequential"
    policy: str
    margin: float
    alpha: float
    power: float
    order: str
    order_seed: int | None
    max_questions: int | None
    multiplicity: str
    inconclusive: str
    missing: str
    on_missing: str
    max_errors: int
    drop_truncated: bool
    allow_unknown: bool
    #: the records were declared final (``--final``), so the budget's fixed-n test could decide;
    #: written only when not (reports before issue 47 had no such key and always tested finally),
    #: so a report of an interim look is verified as one and cannot pass as final
    final: bool = True

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.final:
            del out["final"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        if isinstance(data, cls):
            return data
        return cls(**{k: data[k] for k in cls.keys() if k != "final"}, final=data.get("final", True))


# -------------------------------------------------------------------------- candidates


class Candidate:
    """What both designs' candidates hold; ``loss_upper_bound`` is the decisive bound of the loss."""

    DESIGN: ClassVar[str]
    name: str
    config_id: str
    mode: str | None
    verdict: Verdict
    reason: str | None
    loss_upper_bound: float | None
    missing: Missingness
    side: ReportSide
    config: Mapping[str, Any] | None  #: what it serves (:func:`qualgate.evidence.binding.describe_side`)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixedCandidate(Candidate, _Part):
    """A candidate of a fixed-design report (:class:`qualgate.verdict.fixed.Comparison`):
    ``pooled`` and each of ``suites`` are :meth:`qualgate.verdict.scope.Analysis.to_dict`
    (with a policy file a suite has its ``tier`` and ``verdict_decisive``)."""

    DESIGN: ClassVar[str] = "fixed"
    name: str
    config_id: str
    mode: str | None = None
    verdict: Verdict = dataclasses.field(metadata=_read(Verdict))
    reason: str | None = None
    verdict_unadjusted: Verdict | None = dataclasses.field(default=None, metadata=_read(Verdict))
    pvalue_holm: float | None = None
    loss_upper_bound: float | None = None
    missing: FixedMissingness = dataclasses.field(metadata=_read(FixedMissingness.from_dict))
    side: ReportSide = dataclasses.field(metadata=_read(ReportSide.from_dict))
    #: what the candidate serves (:func:`qualgate.evidence.binding.describe_side`), or ``None``
    config: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))
    pooled: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))
    suites: tuple[Mapping[str, Any], ...] = dataclasses.field(default=(), metadata=_read(_tuple_of(_dict)))
    notes: tuple[str, ...] = dataclasses.field(default=(), metadata=_read(tuple))
    flips: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SequentialCandidate(Candidate, _Part):
    """A candidate of a sequential report (:class:`qualgate.verdict.sequential.SequentialComparison`)."""

    DESIGN: ClassVar[str] = "sequential"
    name: str
    config_id: str
    mode: str | None = None
    verdict: Verdict = dataclasses.field(metadata=_read(Verdict))
    reason: str | None = None
    stopped_by: str | None = None
    questions_used: int | None = None
    questions_available: int | None = None
    pairs_per_question: int | None = None
    loss: float | None = None
    loss_lower_bound: float | None = None
    loss_upper_bound: float | None = None
    e_pass: float | None = None
    e_fail: float | None = None
    alpha: float | None = None
    missing: Missingness = dataclasses.field(metadata=_read(Missingness.from_dict))
    side: ReportSide = dataclasses.field(metadata=_read(ReportSide.from_dict))
    config: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=_read(_dict))


SETTINGS = {s.DESIGN: s for s in (FixedSettings, SequentialSettings)}
CANDIDATES = {c.DESIGN: c for c in (FixedCandidate, SequentialCandidate)}
