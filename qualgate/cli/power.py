"""``qualgate power``: questions needed, power, or detectable loss for a paired comparison."""

from __future__ import annotations

import contextlib
import math
import threading
import time

import click

from qualgate.config.options import POLICIES

from ..errors import ExitCode
from . import FiniteFloatRange, Fraction

# library argument name (first word of its ValueError) -> the option that set it
_OPTION_OF = {
    "loss": "--loss",
    "expected_loss": "--loss",
    "discordant": "--discordant",
    "n": "--n",
    "method": "--method",
    "margin": "--margin",
    "alternative": "--alternative",
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
                self.fail(
                    f"{item!r} is too small: give 0 or at least {self.min_positive:g} (a smaller "
                    "difference needs more than 10^12 questions)",
                    param,
                    ctx,
                )
            out.append(number)
        return out


_PROBABILITY = Fraction()


@contextlib.contextmanager
def _progress_after(seconds):
    """A line on stderr if the answer takes longer than ``seconds``, then every 10 s (issue 47:
    a silent exact search looked hung)."""
    done = threading.Event()
    start = time.monotonic()

    def report():
        wait = seconds
        while not done.wait(wait):
            click.echo(
                f"qualgate power: computing exact power, every outcome enumerated "
                f"({time.monotonic() - start:.0f} s so far; --method normal answers at once)",
                err=True,
            )
            wait = 10.0

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--design",
    type=click.Choice(POLICIES),
    default="noninferiority",
    show_default=True,
    help="The test to size: non-inferiority at --margin, one-sided (what `qualgate gate` "
    "decides by default), or McNemar's test of a loss (`qualgate gate --policy mcnemar`).",
)
@click.option(
    "--margin",
    "margin",
    type=_PROBABILITY,
    default=None,
    help="Non-inferiority margin: the gate's --margin (H0: loss >= MARGIN).",
)
@click.option(
    "--noninferiority",
    "ni_margin",
    type=_PROBABILITY,
    default=None,
    metavar="MARGIN",
    hidden=True,
    help="Same as --design noninferiority --margin MARGIN.",
)
@click.option(
    "--loss",
    type=_NumberList(float, MIN_LOSS),
    default=None,
    help="Non-inferiority: the expected true loss (default 0). McNemar: the loss to "
    "detect. accuracy(baseline) - accuracy(candidate), as a fraction (0.02 = 2 points).",
)
@click.option(
    "--discordant",
    type=_NumberList(float, MIN_LOSS),
    default=None,
    help="Fraction of questions whose outcome flips either way (lost + gained).",
)
@click.option(
    "--discordance-from",
    "discordance_from",
    nargs=2,
    type=click.Path(exists=True),
    default=None,
    metavar="BASELINE CANDIDATE",
    help="Take the discordance from two record sets of the design to be gated (a pilot, or a stored "
    "A/A run; e.g. FLy against standard for the chained design) instead of --discordant.",
)
@click.option(
    "--discordance-bound",
    type=click.Choice(["estimate", "upper"]),
    default="estimate",
    show_default=True,
    help="With --discordance-from: size with the measured discordance or its upper (1 - alpha) bound.",
)
@click.option(
    "--n",
    "n",
    type=_NumberList(int),
    default=None,
    help="Number of paired questions: print the power (McNemar without --loss: the detectable loss).",
)
@click.option(
    "--method",
    type=click.Choice(["exact", "normal"]),
    default="exact",
    show_default=True,
    help="exact: the questions (or power) the gate's own test needs, every outcome enumerated "
    "(McNemar: the exact McNemar test; non-inferiority: the one-seed test the gate runs); normal: "
    "the normal approximation, on request (it under-sizes the exact tests).",
)
@click.option(
    "--alpha",
    type=_PROBABILITY,
    default=0.05,
    show_default=True,
    help="Significance level (one-sided for non-inferiority, as in `qualgate gate`).",
)
@click.option(
    "--power",
    "target",
    type=FiniteFloatRange(0.5, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="Target power.",
)
@click.option(
    "--alternative",
    type=click.Choice(["two-sided", "less"]),
    default=None,
    help="McNemar only: two-sided (default) or less (candidate worse, as the gate's loss test).",
)
@click.option(
    "--judge-noise",
    type=FiniteFloatRange(0, 1, max_open=True),
    default=None,
    metavar="RATE",
    help="Outcomes from a pairwise judge: its A/A decisive rate (`qualgate judge` on two runs of one "
    "lossless config). The discordance becomes D + RATE * (1 - D) (qualgate.judge._noise).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def power(
    design,
    margin,
    ni_margin,
    loss,
    discordant,
    discordance_from,
    discordance_bound,
    n,
    method,
    alpha,
    target,
    alternative,
    judge_noise,
    fmt,
):
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
    qualgate power --margin 0.02 --discordance-from pilot/standard.jsonl pilot/fly.jsonl

    Fractions, not percentages: 0.02 is two accuracy points. With several seeds per question
    divide by the seeds and multiply by the design effect (`qualgate calibrate` prints both).
    """
    from qualgate.report.power import power_grid

    if ni_margin is not None:
        if margin is not None and margin != ni_margin:
            raise click.BadParameter("give the margin once", param_hint="'--noninferiority'")
        design, margin = "noninferiority", ni_margin
    if design == "noninferiority" and margin is None:
        raise click.UsageError(
            "the gate decides non-inferiority at a margin: give --margin (the gate's "
            "--margin, e.g. --margin 0.02), or --design mcnemar to size McNemar's test of a loss"
        )
    if design == "mcnemar" and margin is None and n is None and loss is None:
        raise click.UsageError("give --loss (questions needed) or --n (power or detectable loss)")
    pilot = None
    if (discordant is None) == (discordance_from is None):
        raise click.UsageError("give --discordant or --discordance-from (one of them)")
    if discordance_from is not None:
        from qualgate.verdict.calibration import pilot_discordance

        pilot = pilot_discordance(*discordance_from, alpha=alpha, bound=discordance_bound)
        discordant = [pilot.value]
        click.echo(pilot.describe(), err=True)
    if judge_noise is not None:  # a noisy judge raises the discordance: it costs questions
        from qualgate.judge import judged_discordance

        discordant = [judged_discordance(d, judge_noise) for d in discordant]
        click.echo(f"judge noise {judge_noise:g}: discordance " + ", ".join(f"{d:.4g}" for d in discordant), err=True)
    try:
        with _progress_after(2.0):
            grid = power_grid(
                discordant=discordant,
                margin=margin,
                loss=loss,
                n=n,
                design=design,
                alpha=alpha,
                target=target,
                method=method,
                alternative=alternative,
            )
    except ValueError as exc:  # a usage error, naming the option
        word, _, rest = str(exc).partition(" ")
        option = _OPTION_OF.get(word.rstrip(":"))
        message = rest if word.endswith(":") and option else str(exc)
        raise click.BadParameter(message, param_hint=f"'{option}'" if option else None) from None
    if fmt == "json":
        from qualgate.formatting import to_json

        doc = grid.to_dict()
        if pilot is not None:  # one row is an object, a grid a list of them
            extra = {"discordance_from": pilot.to_dict()}
            doc = [row | extra for row in doc] if isinstance(doc, list) else doc | extra
        click.echo(to_json(doc))
    else:
        click.echo(str(grid))
        if pilot is not None and pilot.pairs_per_question > 1:
            click.echo(
                f"(n counts pairs; the pilot has {pilot.pairs_per_question:g} pairs per question with design "
                f"effect {pilot.design_effect:.2f}: questions = n x {pilot.design_effect:.2f} / "
                f"{pilot.pairs_per_question:g})"
            )
    return ExitCode.OK
