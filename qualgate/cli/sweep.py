"""``qualgate sweep PLAN --grid GRID --out DIR``: the fastest config that passes the gate."""

from __future__ import annotations

import click

__all__ = ["sweep"]


@click.command()
@click.argument("plan", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--grid",
    "grid_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Grid file: base config, speculative keys and their values, order.",
)
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False),
    help="Run directory (must be absent or empty unless --resume).",
)
@click.option("--resume", is_flag=True, help="Continue the sweep in OUT.")
@click.option(
    "--batch-questions",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Questions per round of the sequential gate.",
)
@click.option(
    "--max-questions",
    type=click.IntRange(min=1),
    default=None,
    help="Question budget per candidate (default: every question of the plan but the pilot's).",
)
@click.option(
    "--power",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="Target power against no loss (the sequential gate's futility boundary).",
)
@click.option(
    "--order-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the order in which questions are run.",
)
@click.option(
    "--speed-rounds",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="Interleaved rounds timing the candidates that passed against the baseline.",
)
@click.option(
    "--speed-questions", type=click.IntRange(min=1), default=64, show_default=True, help="Requests per speed round."
)
@click.option(
    "--discordance-from",
    "discordance_from",
    nargs=2,
    type=click.Path(exists=True),
    default=None,
    metavar="BASELINE CANDIDATE",
    help="Records of a pilot or a stored A/A run of the design (e.g. FLy against standard): state the "
    "questions a fixed design needs at their discordance, and warn when the budget is smaller.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Use only the first N questions of each suite (pilot and tests together).",
)
@click.option(
    "--order",
    type=click.Choice(["declared", "acceptance"]),
    default=None,
    help="Order of the points (overrides the grid file's): as declared, or by a pilot's acceptance length.",
)
@click.option(
    "--pilot-questions",
    type=click.IntRange(min=1),
    default=None,
    help="With order acceptance: questions of the pilot (overrides the grid file's).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="torch CPU threads of the reference engine (tiny models run fastest on 1).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--markdown", type=click.Path(dir_okay=False), help="Also write the result as markdown to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or diagnostics on stderr.")
def sweep(
    plan,
    grid_path,
    out,
    resume,
    batch_questions,
    max_questions,
    power,
    order_seed,
    speed_rounds,
    speed_questions,
    discordance_from,
    limit,
    order,
    pilot_questions,
    threads,
    fmt,
    markdown,
    quiet,
):
    """Find the fastest setting of a grid that loses less than the plan's margin.

    The grid's points are tested as a fixed sequence, least aggressive first, each with the
    sequential non-inferiority gate at the plan's alpha, stopping at the first that does not
    PASS (family-wise error <= alpha). The configs that passed are timed against the baseline
    in interleaved rounds; the fastest is written to OUT/chosen.yaml, with OUT/gate.json as its
    evidence for `qualgate check`, and OUT/sweep.json.

    \b
    Exit codes: 0 a config was chosen, 1 none passes, 2 usage error,
                3 invalid plan, grid or records.
    """
    import dataclasses

    from qualgate.config.decoding import load_plan, with_limit
    from qualgate.formatting import to_json, write_atomic
    from qualgate.run.speed import SpeedSettings
    from qualgate.run.sweep import load_grid, render_markdown, render_text, run_sweep

    from .run import progress_factory

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    p = with_limit(load_plan(plan), limit)
    grid = load_grid(grid_path, p)
    overrides = {"order": order, "pilot_questions": pilot_questions}
    grid = dataclasses.replace(grid, **{k: v for k, v in overrides.items() if v is not None})
    log = None if quiet else (lambda msg: click.echo(msg, err=True))
    pilot = None
    if discordance_from is not None:
        from qualgate.verdict.calibration import pilot_discordance

        pilot = pilot_discordance(*discordance_from, alpha=p.alpha)
    result = run_sweep(
        p,
        grid,
        out,
        batch_questions=batch_questions,
        max_questions=max_questions,
        power=power,
        order_seed=order_seed,
        speed=SpeedSettings(speed_rounds, speed_questions),
        progress=progress_factory(quiet),
        log=log,
        resume=resume,
        discordance_from=pilot,
    )
    click.echo(to_json(result) if fmt == "json" else render_text(result), nl=fmt == "json")
    if markdown:
        write_atomic(markdown, render_markdown(result))
    return result.exit_code
