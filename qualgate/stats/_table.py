"""The paired 2×2 table of baseline-vs-candidate outcomes."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import checks

__all__ = ["PairedTable"]


def _as_bool(name, values):
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of booleans, got shape {arr.shape}")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iu" or not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans (or 0/1 integers), got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr


@dataclasses.dataclass(frozen=True)
class PairedTable:
    """Counts of the four paired outcomes of baseline B and candidate C.

    Attributes
    ----------
    both_correct, lost, gained, both_wrong : int
        B and C correct; B correct and C wrong; B wrong and C correct; both wrong.

    Examples
    --------
    >>> t = PairedTable.from_outcomes([True, True, False, True], [True, False, True, False])
    >>> t
    PairedTable(both_correct=1, lost=2, gained=1, both_wrong=0)
    >>> t.n, t.n_discordant, t.discordant, t.loss
    (4, 3, 0.75, 0.25)
    """

    both_correct: int
    lost: int
    gained: int
    both_wrong: int

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = checks.count(field.name, getattr(self, field.name))
            object.__setattr__(self, field.name, value)

    @classmethod
    def from_outcomes(cls, baseline_correct, candidate_correct) -> PairedTable:
        """Count the table from per-question correctness, aligned by position.

        Parameters
        ----------
        baseline_correct, candidate_correct : array_like of bool
            Same length; element i is whether B (resp. C) answered question i correctly.
            Pair records by question id *before* calling this.
        """
        b = _as_bool("baseline_correct", baseline_correct)
        c = _as_bool("candidate_correct", candidate_correct)
        if b.shape != c.shape:
            raise ValueError(
                f"baseline_correct and candidate_correct must have the same length, got {b.size} and {c.size}"
            )
        return cls(
            both_correct=int(np.count_nonzero(b & c)),
            lost=int(np.count_nonzero(b & ~c)),
            gained=int(np.count_nonzero(~b & c)),
            both_wrong=int(np.count_nonzero(~b & ~c)),
        )

    @property
    def n(self) -> int:
        """Number of paired questions."""
        return self.both_correct + self.lost + self.gained + self.both_wrong

    @property
    def n_discordant(self) -> int:
        """Number of questions whose outcome differs: lost + gained."""
        return self.lost + self.gained

    @property
    def discordant(self) -> float:
        """Discordant fraction ψ̂ = (lost + gained)/n, the ``discordant`` of the power functions
        (nan when n = 0)."""
        return self.n_discordant / self.n if self.n else float("nan")

    @property
    def difference(self) -> float:
        """accuracy(C) − accuracy(B) = (gained − lost)/n (nan when n = 0)."""
        return (self.gained - self.lost) / self.n if self.n else float("nan")

    @property
    def loss(self) -> float:
        """accuracy(B) − accuracy(C) = (lost − gained)/n (nan when n = 0)."""
        return (self.lost - self.gained) / self.n if self.n else float("nan")

    def to_dict(self) -> dict:
        """The four counts, ``n``, and ``discordant``, ``difference``, ``loss`` (``None`` if n = 0)."""
        out = dataclasses.asdict(self)
        out["n"] = self.n
        for key in ("discordant", "difference", "loss"):
            out[key] = getattr(self, key) if self.n else None
        return out

    def mcnemar(self, *, alternative="two-sided", method="exact"):
        """:func:`qualgate.stats.mcnemar` on this table's discordant counts."""
        from ._mcnemar import mcnemar

        return mcnemar(self.lost, self.gained, alternative=alternative, method=method)

    def confidence_interval(self, *, confidence_level=0.95, method="tango"):
        """:func:`qualgate.stats.paired_difference_ci` for accuracy(C) − accuracy(B)."""
        from ._paired_ci import paired_difference_ci

        return paired_difference_ci(*dataclasses.astuple(self), confidence_level=confidence_level, method=method)

    def noninferiority(self, *, margin, alpha=0.05, method="exact"):
        """:func:`qualgate.stats.noninferiority` of the candidate against ``margin``."""
        from ._noninferiority import noninferiority

        return noninferiority(*dataclasses.astuple(self), margin=margin, alpha=alpha, method=method)
