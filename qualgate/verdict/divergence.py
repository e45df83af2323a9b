"""The divergence audit of two configs: how often their outputs are byte-identical, and where
the others first differ.

For every pair (same suite, question, seed and sample) with an output on both sides:

- whether the two outputs are byte-identical;
- for the others, the position of the first difference: in tokens when every compared record
  carries ``token_ids``, else in characters of ``output`` (the audit says which);
- where the records carry ``top2_margins`` (the target's top-1 minus top-2 probability at each
  emitted position), the margin at that position: below ``near_tie`` the two configs parted on
  a near-tie of the target's numerics, above it on a changed decision;
- for a lossless candidate decoded greedily (``greedy``), identical outputs are the
  expectation, and the audit says how many pairs are away from it.

It describes the outputs; it decides nothing (the verdicts are the gate's).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["NEAR_TIE", "DivergenceAudit", "divergence_audit"]

#: a top-2 margin below this (a probability difference) is a near-tie of the target's numerics
NEAR_TIE = 0.01
_LOSSLESS = ("target", "standard", "block")


@dataclasses.dataclass(frozen=True)
class DivergenceAudit:
    """The audit of one candidate against the baseline (see the module docstring)."""

    pairs: int  #: pairs with an output on both sides
    identical: int  #: byte-identical outputs among them
    unit: str  #: ``token`` or ``character``: what ``first_difference`` counts
    first_difference: tuple[int, ...]  #: per differing pair, the 0-based position of the first difference
    margins: tuple[float, ...]  #: the target's top-2 margin there, for the pairs whose records carry it
    near_tie: float = NEAR_TIE
    without_output: int = 0  #: pairs left out: an output missing on a side
    lossless: bool = False  #: the candidate's mode is lossless
    greedy: bool | None = None  #: both decoded greedily (None: not known)

    @property
    def differing(self) -> int:
        return self.pairs - self.identical

    @property
    def identical_share(self) -> float | None:
        return self.identical / self.pairs if self.pairs else None

    @property
    def near_ties(self) -> int:
        return sum(m < self.near_tie for m in self.margins)

    def quantiles(self, qs: Sequence[float] = (0.1, 0.5, 0.9)) -> tuple[float, ...] | None:
        """Quantiles of the first-difference positions (``None`` when no pair differs)."""
        if not self.first_difference:
            return None
        return tuple(float(np.quantile(self.first_difference, q, method="inverted_cdf")) for q in qs)

    @property
    def expects_identical(self) -> bool:
        """A lossless candidate decoded greedily: every output should be the baseline's."""
        return self.lossless and self.greedy is True

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "identical": self.identical,
            "identical_share": self.identical_share,
            "unit": self.unit,
            "first_difference_quantiles": dict(zip(("p10", "p50", "p90"), self.quantiles() or ())),
            "margins_at_first_difference": len(self.margins),
            "near_ties": self.near_ties,
            "near_tie": self.near_tie,
            "without_output": self.without_output,
            "expects_identical": self.expects_identical,
        }


def _first_difference(a: Sequence, b: Sequence) -> int:
    if isinstance(a, str) and isinstance(b, str):
        return len(os.path.commonprefix([a, b]))
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _margin_at(margins, tokens, i: int) -> float | None:
    if margins is None or tokens is None or len(margins) != len(tokens) or i >= len(margins):
        return None
    return float(margins[i])


def divergence_audit(
    baseline: Iterable, candidate: Iterable, *, mode: str | None = None, greedy: bool | None = None
) -> DivergenceAudit:
    """Audit ``candidate``'s records against ``baseline``'s (records: :class:`qualgate.records.Record`,
    or record sets, read on the columnar path or not).

    ``mode``: the candidate's mode (default: its records'); ``greedy``: whether both sides were
    decoded at temperature 0, when known.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from qualgate.records.columns import columns_of, key_codes, last_row_of_key

    bt, ct = columns_of(baseline), columns_of(candidate)
    (bk, ck), _ = key_codes([bt, ct])
    n_keys = int(max(bk.max(initial=-1), ck.max(initial=-1))) + 1
    matched = last_row_of_key(bk, n_keys)[ck]  # per candidate record, its baseline record
    rows = np.flatnonzero(matched >= 0)
    c_rows, b_rows = pa.array(rows), pa.array(matched[rows])
    modes = set(pc.unique(ct["mode"].take(c_rows)).to_pylist())
    with_output = np.asarray(
        pc.and_(pc.is_valid(bt["output"].take(b_rows)), pc.is_valid(ct["output"].take(c_rows))), dtype=bool
    )
    without = int(len(rows) - np.count_nonzero(with_output))
    b_rows, c_rows = b_rows.filter(pa.array(with_output)), c_rows.filter(pa.array(with_output))
    b = [bt[name].take(b_rows).to_pylist() for name in ("output", "token_ids", "top2_margins")]
    c = [ct[name].take(c_rows).to_pylist() for name in ("output", "token_ids", "top2_margins")]
    n = len(b[0])
    tokens = n > 0 and all(x is not None for x in b[1]) and all(x is not None for x in c[1])
    identical, positions, margins = 0, [], []
    for (bo, bt_, bm), (co, ct_, cm) in zip(zip(*b), zip(*c)):
        if bo == co and (not tokens or bt_ == ct_):
            identical += 1
            continue
        i = _first_difference(bt_, ct_) if tokens else _first_difference(bo, co)
        positions.append(i)
        if tokens:
            m = _margin_at(bm, bt_, i)
            m = _margin_at(cm, ct_, i) if m is None else m
            if m is not None:
                margins.append(m)
    mode = mode if mode is not None else (next(iter(modes)) if len(modes) == 1 else None)
    return DivergenceAudit(
        pairs=n,
        identical=identical,
        unit="token" if tokens else "character",
        first_difference=tuple(sorted(positions)),
        margins=tuple(margins),
        without_output=without,
        lossless=mode in _LOSSLESS,
        greedy=greedy,
    )
