"""The design table of ``qualgate power`` and :func:`qualgate.power`: questions needed, the power
at n, or the detectable loss, for a grid of designs, solved by :mod:`qualgate.stats`."""

from __future__ import annotations

import dataclasses
import itertools
import math

from qualgate import stats

__all__ = ["PowerGrid", "power_grid"]


def _as_list(value):
    if value is None:
        return None
    return list(value) if isinstance(value, (list, tuple)) else [value]


@dataclasses.dataclass(frozen=True, repr=False)
class PowerGrid:
    """Every cell ``(n, loss, discordant)`` of a design grid with its result (``None`` where it
    could not be computed; ``errors`` says why). ``str()`` is ``qualgate power``'s table."""

    design: str
    margin: float | None
    alpha: float
    target: float
    method: str
    alternative: str
    cells: tuple
    results: tuple
    errors: tuple  #: ``(n, loss, discordant, exception)`` of each cell that failed

    def __str__(self) -> str:
        return _render(
            self.cells, self.results, self.errors, self.method, self.alpha, self.target, self.alternative, self.margin
        )

    def __repr__(self) -> str:
        return f"<PowerGrid {self.design}, {len(self.cells)} cell(s)>"

    def to_dict(self):
        """One dict per cell (a list for a grid of several cells), as ``qualgate power --format json``."""
        rows = []
        for (n_i, loss_i, psi), result in zip(self.cells, self.results):
            if result is None:
                exc = next(e for (a, b, c, e) in self.errors if (a, b, c) == (n_i, loss_i, psi))
                rows.append({"design": self.design, "n": n_i, "loss": loss_i, "discordant": psi, "error": str(exc)})
            else:
                rows.append({"design": self.design} | result.to_dict())
        return rows if len(self.cells) > 1 else rows[0]


def power_grid(
    *,
    discordant,
    margin=None,
    loss=None,
    n=None,
    design="noninferiority",
    alpha=0.05,
    target=0.8,
    method="exact",
    alternative=None,
) -> PowerGrid:
    """Solve each cell of the grid ``n x loss x discordant`` for the quantity left out.

    Non-inferiority (``design='noninferiority'``, the gate's default) needs ``margin`` and is
    one-sided; McNemar (``design='mcnemar'``) takes ``alternative`` and ``method``. Raises
    ``ValueError`` naming the argument when the design is incomplete or no cell can be solved.
    """
    n, loss, discordant = _as_list(n), _as_list(loss), _as_list(discordant)
    if design not in ("noninferiority", "mcnemar"):
        raise ValueError(f"design {design!r}: expected 'noninferiority' or 'mcnemar'")
    if method == "exact" and n and max(n) > stats.EXACT_MAX_N:
        raise ValueError(
            f"n {max(n)}: the exact method computes up to {stats.EXACT_MAX_N} questions; use method 'normal'"
        )
    if design == "noninferiority":
        if margin is None:
            raise ValueError(
                "margin: the gate decides non-inferiority at a margin: give it (the gate's margin, "
                "e.g. 0.02), or design 'mcnemar' to size McNemar's test of a loss"
            )
        if alternative is not None:
            raise ValueError("alternative: the non-inferiority test is one-sided (H1: loss < margin); leave it out")
        loss = loss or [0.0]
    elif margin is not None:
        raise ValueError("margin belongs to the non-inferiority design")
    elif n is None and loss is None:
        raise ValueError("loss: give the loss (questions needed) or n (power or detectable loss)")
    alternative = alternative or "two-sided"
    if design == "mcnemar":
        margin = None

    def solve(n_i, loss_i, psi):
        if margin is not None:
            if n_i is None:
                return stats.noninferiority_sample_size(
                    margin, psi, expected_loss=loss_i, alpha=alpha, power=target, method=method
                )
            return stats.noninferiority_power(n_i, margin, psi, expected_loss=loss_i, alpha=alpha, method=method)
        common = dict(alpha=alpha, alternative=alternative, method=method)
        if n_i is None:
            return stats.mcnemar_sample_size(loss_i, psi, power=target, **common)
        if loss_i is None:
            return stats.mcnemar_detectable_loss(n_i, psi, power=target, **common)
        return stats.mcnemar_power(n_i, loss_i, psi, **common)

    cells = list(itertools.product(n or [None], loss or [None], discordant))
    results, errors = [], []
    for n_i, loss_i, psi in cells:
        try:
            results.append(solve(n_i, loss_i, psi))
        except ValueError as exc:
            results.append(None)
            errors.append((n_i, loss_i, psi, exc))
    if len(errors) == len(cells):  # nothing computable
        raise errors[0][3]
    return PowerGrid(design, margin, alpha, target, method, alternative, tuple(cells), tuple(results), tuple(errors))


def _render(cells, results, errors, method, alpha, target, alternative, margin) -> str:
    done = next(r for r in results if r is not None)
    solved = done.solved_for
    how = "normal approximation" if method == "normal" else "exact power of the exact test"
    if margin is not None:
        title = (
            f"Design sized: non-inferiority (what `qualgate gate` decides), H0: loss >= {margin:g}, "
            f"one-sided alpha {alpha:g}"
        )
    else:
        sides = "two-sided" if alternative == "two-sided" else "one-sided (H1: candidate worse)"
        title = f"Design sized: McNemar test, {sides}, alpha {alpha:g}"
    if solved != "power":
        title += f", target power {target:g}"
    title += f" ({how})"

    columns = []  # (header, formatter) in display order
    if margin is not None:
        columns.append(("expected loss", lambda c, r: f"{c[1]:g}"))
    elif solved != "loss":
        columns.append(("loss", lambda c, r: f"{c[1]:g}"))
    columns.append(("discordant", lambda c, r: f"{c[2]:g}"))
    if solved == "n":
        columns.append(("questions needed", lambda c, r: f"{r.n}"))
        if method == "exact":
            columns.append(("stable from", lambda c, r: f"{r.n_stable}"))
    else:
        columns.insert(0, ("questions", lambda c, r: f"{c[0]}"))
    if solved == "loss":
        columns.append(("detectable loss", lambda c, r: "none" if math.isnan(r.loss) else f"{r.loss:.4f}"))
    columns.append(("power", lambda c, r: f"{r.power:.3f}"))

    table = [[h for h, _ in columns]]
    for cell, result in zip(cells, results):
        row = []
        for header, fmt in columns:
            if result is None and header in ("questions needed", "stable from", "power", "detectable loss"):
                row.append("n/a")
            else:
                row.append(fmt(cell, result))
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = [title, ""]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in table]
    lines.append("")
    if margin is not None and method == "normal":
        lines.append("Sized with the normal approximation of the score test; with one seed the gate")
        lines.append("uses the exact test, which needs a few more questions at small n.")
    elif margin is not None:
        lines.append("Exact power of the gate's one-seed test (exact unconditional up to 2,000 pairs,")
        lines.append("continuity-corrected score test above), every outcome enumerated.")
    lines.append("loss = accuracy(baseline) - accuracy(candidate); discordant = fraction of")
    lines.append("questions whose outcome differs between the two runs (both as fractions).")
    if solved == "n":
        lines.append("questions needed: smallest number of paired questions reaching the target;")
        lines.append("power: the power achieved there.")
    elif solved == "loss":
        lines.append("detectable loss: smallest loss detected with the target power at that n")
        lines.append("('none': not even with every discordant question lost); power: achieved.")
    else:
        lines.append("power: probability that the test detects the loss (rejects with the")
        lines.append("candidate worse).")
    if solved == "n" and method == "exact" and margin is not None:
        lines.append("stable from: exact power has a sawtooth in n; from this n on it stays at or")
        lines.append("above the target (checked for the next 8 n).")
    elif solved == "n" and method == "exact":
        lines.append("stable from: exact power has a sawtooth in n; from this n on it stays at or")
        lines.append("above the target (checked for every n up to 4 x the normal-approximation n).")
    for n_i, loss_i, psi, exc in errors:
        where = ", ".join(f"{k}={v:g}" for k, v in (("n", n_i), ("loss", loss_i), ("discordant", psi)) if v is not None)
        lines.append(f"n/a ({where}): {exc}")
    return "\n".join(lines)
