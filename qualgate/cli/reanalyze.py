"""``qualgate reanalyze TABLE``: what a published single-run accuracy table can show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from ..errors import ExitCode

__all__ = ["reanalyze"]


def _fractions(ctx, param, value):
    try:
        out = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated fractions, got {value!r}") from None
    if not out:
        raise click.BadParameter("give at least one fraction")
    return out


@click.command()
@click.argument("table")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Report format on stdout.",
)
@click.option(
    "--markdown", type=click.Path(dir_okay=False, writable=True), help="Also write the report as markdown to this file."
)
@click.option(
    "--reference",
    default="target",
    show_default=True,
    help="Mode every other mode is compared with (<reference>_correct).",
)
@click.option(
    "--discordance",
    default="0.05,0.1,0.2",
    show_default=True,
    callback=_fractions,
    help="Discordant fractions at which the McNemar sample size is stated.",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Of the McNemar test.")
@click.option("--power", type=float, default=0.8, show_default=True, help="Of the McNemar test.")
@click.option("--confidence-level", type=float, default=0.95, show_default=True, help="Of the unpaired band.")
def reanalyze(table, fmt, markdown, reference, discordance, alpha, power, confidence_level):
    """Reanalyse a published accuracy table (CSV, one row per model/platform/dataset cell).

    TABLE is a CSV file or the name of a table shipped with qualgate (for example
    fly_pr53987_v1_eval; an unknown name lists them). Prints per-cell gaps against the
    unpaired band, pooled totals, printed figures recomputed from the counts, speed-ups and
    the paired sample size a McNemar gate would need. Layout-only tables are reported as
    missing, not refused. Exit 0, or 3 for a malformed table.
    """
    from ..reanalysis import published_path, published_tables
    from ..reanalysis import reanalyze as run

    path, source = table, table
    if not os.path.exists(table):
        name = table[:-4] if table.endswith(".csv") else table
        if os.sep in table or name not in published_tables():
            raise click.BadParameter(
                f"no such file, and not a shipped table (one of {', '.join(published_tables())})",
                param_hint="TABLE",
            )
        path, source = str(published_path(name)), name
    result = run(
        path,
        reference=reference,
        confidence_level=confidence_level,
        discordance=discordance,
        alpha=alpha,
        power=power,
        source=source,
    )
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(result.to_text(), nl=False)
    if markdown:
        Path(markdown).write_text(result.to_markdown(), encoding="utf-8")
    return ExitCode.OK
