"""``qualgate power``: questions needed, power, or detectable loss for a paired comparison."""

from __future__ import annotations

import itertools
import math

import click

from ..errors import ExitCode
from qualgate.config.options import POLICIES
from . import FiniteFloatRange

# library argument name (first word of its ValueError) -> the option that set it
_OPTION_OF = {
    "loss": "--loss",
    "expected_loss": "--loss",
    "discordant": "--discordant",
    "n": "--n",
    "method": "--method",
    "margin": "--margin",
}


#: Input bounds: more questions than this is not a design (and overflows the arithmetic);
#: a loss below MIN_LOSS (a ten-thousandth of a point) needs more than ~10^12 questions.
MAX_N, MIN_LOSS = 10**9, 1e-6


class _NumberList(click.ParamType):
    """A comma-separated list of numbers (one value is a list of one), each finite; integers
    in [1, MAX_N]; fractions at least ``min_positive`` unless 0."""

    def __init__(self, kind, min_positive: float = 0.0):
        self.kind = kind
        self.min_positive = min_positive
        self.name = "INTEGER[,...]" if kind is int else "FRACTION[,...]"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for item in str(value).split(","):
            item = item.strip()
            try:
                number = self.kind(item)
            except ValueError:
                word = "an integer" if self.kind is int else "a number"
                self.fail(f"{item[:40]!r} is not {word} (give one value or a comma list)", param, ctx)
            if self.kind is int and not 1 <= number <= MAX_N:
                self.fail(f"{item!r}: the number of questions must be from 1 to {MAX_N}", param, ctx)
            if self.kind is float and not math.isfinite(number):
                self.fail(f"{item!r} is not a finite number", param, ctx)
            if self.kind is float and 0 < abs(number) < self.min_positive:
                self.fail(f"{item!r} is too small: give 0 or at least {self.min_positive:g} (a smaller "
                          "difference needs more than 10^12 questions)", param, ctx)
            out.append(number)
        return out


_PROBABILITY = FiniteFloatRange(0, 1, min_open=True, max_open=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--design", type=click.Choice(POLICIES), default="noninferiority",
              show_default=True,
              help="The test to size: non-inferiority at --margin, one-sided (what `qualgate gate` "
                   "decides by default), or McNemar's test of a loss (`qualgate gate --policy mcnemar`).")
@click.option("--margin", "margin", type=_PROBABILITY, default=None,
              help="Non-inferiority margin: the gate's --margin (H0: loss >= MARGIN).")
@click.option("--noninferiority", "ni_margin", type=_PROBABILITY, default=None, metavar="MARGIN",
              hidden=True, help="Same as --design noninferiority --margin MARGIN.")
@click.option("--loss", type=_NumberList(float, MIN_LOSS), default=None,
              help="Non-inferiority: the expected true loss (default 0). McNemar: the loss to "
                   "detect. accuracy(baseline) - accuracy(candidate), as a fraction (0.02 = 2 points).")
@click.option("--discordant", type=_NumberList(float, MIN_LOSS), required=True,
              help="Fraction of questions whose outcome flips either way (lost + gained).")
@click.option("--n", "n", type=_NumberList(int), default=None,
              help="Number of paired questions: print the power (McNemar without --loss: the "
                   "detectable loss).")
@click.option("--method", type=click.Choice(["normal", "exact"]), default="normal",
              show_default=True, help="McNemar only: normal approximation, or exact power of the exact test.")
@click.option("--alpha", type=_PROBABILITY, default=0.05, show_default=True,
              help="Significance level (one-sided for non-inferiority, as in `qualgate gate`).")
@click.option("--power", "target", type=FiniteFloatRange(0.5, 1, max_open=True), default=0.8,
              show_default=True, help="Target power.")
@click.option("--alternative", type=click.Choice(["two-sided", "less"]), default=None,
              help="McNemar only: two-sided (default) or less (candidate worse, as the gate's loss test).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def power(design, margin, ni_margin, loss, discordant, n, method, alpha, target, alternative, fmt):  # fmt: skip
    """Questions needed, or the power at n, for the test a gate will run.

    By default the design `qualgate gate` decides by: non-inferiority at a margin, one-sided,
    the same alpha. McNemar's test is sized with --design mcnemar.

    \b
    qualgate power --margin 0.02 --discordant 0.06                   questions needed (loss 0)
    qualgate power --margin 0.02 --loss 0.005 --discordant 0.06      ... if the loss is 0.5 points
    qualgate power --margin 0.02 --n 1000 --discordant 0.06          power at n
    qualgate power --design mcnemar --loss 0.02 --discordant 0.06    McNemar, two-sided
    qualgate power --design mcnemar --n 428 --discordant 0.06        detectable loss
    qualgate power --margin 0.02 --loss 0,0.005 --discordant 0.04,0.06   (comma lists: a grid)

    Fractions, not percentages: 0.02 is two accuracy points. With several seeds per question
    divide by the seeds and multiply by the design effect (`qualgate calibrate` prints both).
    """
    from .. import stats

    if method == "exact" and n and max(n) > stats.EXACT_MAX_N:
        raise click.BadParameter(f"{max(n)}: the exact method computes up to {stats.EXACT_MAX_N} questions; "
                                 "use --method normal", param_hint="'--n'")
    if ni_margin is not None:
        if margin is not None and margin != ni_margin:
            raise click.BadParameter("give the margin once", param_hint="'--noninferiority'")
        design, margin = "noninferiority", ni_margin
    if design == "noninferiority":
        if margin is None:
            raise click.UsageError(
                "the gate decides non-inferiority at a margin: give --margin (the gate's "
                "--margin, e.g. --margin 0.02), or --design mcnemar to size McNemar's test of a loss"
            )
        if method != "normal":
            raise click.BadParameter(
                "the non-inferiority design has the normal method only", param_hint="'--method'"
            )
        if alternative is not None:
            raise click.BadParameter(
                "the non-inferiority test is one-sided (H1: loss < margin); leave it out",
                param_hint="'--alternative'",
            )
        loss = loss or [0.0]
    elif margin is not None:
        raise click.BadParameter("--margin belongs to the non-inferiority design", param_hint="'--margin'")
    elif n is None and loss is None:
        raise click.UsageError("give --loss (questions needed) or --n (power or detectable loss)")
    alternative = alternative or "two-sided"

    def solve(n_i, loss_i, psi):
        if margin is not None:
            if n_i is None:
                return stats.noninferiority_sample_size(
                    margin, psi, expected_loss=loss_i, alpha=alpha, power=target
                )
            return stats.noninferiority_power(n_i, margin, psi, expected_loss=loss_i, alpha=alpha)
        common = dict(alpha=alpha, alternative=alternative, method=method)
        if n_i is None:
            return stats.mcnemar_sample_size(loss_i, psi, power=target, **common)
        if loss_i is None:
            return stats.mcnemar_detectable_loss(n_i, psi, power=target, **common)
        return stats.mcnemar_power(n_i, loss_i, psi, **common)

    if design == "mcnemar":
        margin = None
    cells = list(itertools.product(n or [None], loss or [None], discordant))
    results, errors = [], []
    for n_i, loss_i, psi in cells:
        try:
            results.append(solve(n_i, loss_i, psi))
        except ValueError as exc:
            results.append(None)
            errors.append((n_i, loss_i, psi, exc))
    if len(errors) == len(cells):  # nothing computable: a usage error, naming the option
        exc = errors[0][3]
        option = _OPTION_OF.get(str(exc).split(" ", 1)[0])
        raise click.BadParameter(str(exc), param_hint=f"'{option}'" if option else None)

    grid = len(cells) > 1
    if fmt == "json":
        rows = []
        for (n_i, loss_i, psi), result in zip(cells, results):
            if result is None:
                exc = next(e for (a, b, c, e) in errors if (a, b, c) == (n_i, loss_i, psi))
                rows.append({"design": design, "n": n_i, "loss": loss_i, "discordant": psi, "error": str(exc)})
            else:
                rows.append({"design": design} | result.to_dict())
        from qualgate.formatting import to_json

        click.echo(to_json(rows if grid else rows[0]))
        return ExitCode.OK
    click.echo(_render(cells, results, errors, method, alpha, target, alternative, margin))
    return ExitCode.OK


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
        columns.append(
            ("detectable loss", lambda c, r: "none" if math.isnan(r.loss) else f"{r.loss:.4f}")
        )
    columns.append(("power", lambda c, r: f"{r.power:.3f}"))

    table = [[h for h, _ in columns]]
    for cell, result in zip(cells, results):
        row = []
        for index, (header, fmt) in enumerate(columns):
            if result is None and header in ("questions needed", "stable from", "power",
                                             "detectable loss"):  # fmt: skip
                row.append("n/a")
            else:
                row.append(fmt(cell, result))
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    lines = [title, ""]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in table]
    lines.append("")
    if margin is not None:
        lines.append("Sized with the normal approximation of the score test; with one seed the gate")
        lines.append("uses the exact test, which needs a few more questions at small n.")
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
    if solved == "n" and method == "exact":
        lines.append("stable from: exact power has a sawtooth in n; from this n on it stays at or")
        lines.append("above the target (checked for every n up to 4 x the normal-approximation n).")
    for n_i, loss_i, psi, exc in errors:
        where = ", ".join(
            f"{k}={v:g}" for k, v in (("n", n_i), ("loss", loss_i), ("discordant", psi))
            if v is not None
        )  # fmt: skip
        lines.append(f"n/a ({where}): {exc}")
    return "\n".join(lines)
