"""``qualgate demo``: the embedded default, end to end on CPU."""

from __future__ import annotations

import itertools
import os
import textwrap
import time

import click

__all__ = ["demo"]


class _Seeds(click.ParamType):
    name = "N|S,S,..."

    def convert(self, value, param, ctx):
        if isinstance(value, (int, list, tuple)):
            return value
        try:
            if "," in str(value):
                return [int(x) for x in str(value).split(",")]
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is neither a count nor a comma list of seeds", param, ctx)


def speed_rows(report):
    """Rows of the speed table: per config, accuracy, acceptance length, tokens/s, speed-up."""
    from qualgate.formatting import fmt_pct
    from qualgate.report.run import fmt_speedup

    rows = []
    for c in report.configs:
        rows.append(
            [
                c.name,
                c.mode,
                fmt_pct(c.accuracy),
                fmt_pct(c.no_answer_rate),
                "—" if c.acceptance_length is None else f"{c.acceptance_length:.2f}",
                "—" if c.tokens_per_s is None else f"{c.tokens_per_s:,.0f}",
                fmt_speedup(c.speedup, c.speedup_ci),
            ]
        )
    return rows


SPEED_HEADERS = ["config", "mode", "accuracy", "no-answer", "accept len", "tok/s", "speed-up"]


@click.command()
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False),
    help="Run directory  [default: a new directory qualgate-demo-N in the current directory]",
)
@click.option(
    "--questions",
    "-n",
    type=click.IntRange(min=1),
    default=None,
    help="Questions of the synthetic suite  [default: the plan's, 1000]",
)
@click.option(
    "--seeds", "-s", type=_Seeds(), default=None, help="A count of seeds, or a comma list  [default: the plan's, 1]"
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Engine worker processes, each decoding its part of every batch  [default: 2, or 1 on one CPU]",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="torch CPU threads per worker (tiny models run fastest on one).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bars on stderr.")
@click.option("--wide", is_flag=True, help="Every column of the gate table; default: 100 columns.")
def demo(out, questions, seeds, workers, threads, quiet, wide):
    """Run the embedded demo: target-only, standard speculative decoding, FLy (W=2, τ=0.3,
    top-k 3) and an aggressive FLy (τ=0) over the same seeded questions of a synthetic
    arithmetic suite, with the shipped small target and drafter, on CPU (two worker
    processes); then print the gate table, the speed table (6 interleaved rounds of 16
    questions) and each phase's time.
    """
    import functools

    import torch

    from qualgate.backends import DeviceParallelBackend
    from qualgate.formatting import text_table, write_atomic
    from qualgate.report.gate_text import render_text
    from qualgate.report.html import run_html
    from qualgate.report.run import summarize
    from qualgate.run.runner import run_plan
    from qualgate.run.speed import SpeedSettings

    from .. import demo as demo_pkg
    from ..demo.plan import demo_plan
    from ..errors import DataError, ExitCode
    from .run import progress_factory

    t0 = time.perf_counter()
    for which in demo_pkg.MODELS:
        try:
            demo_pkg.model_path(which)
        except FileNotFoundError as exc:
            raise DataError(str(exc)) from None
    torch.set_num_threads(threads)
    plan = demo_plan(questions=questions, seeds=seeds)
    # the demo is CPU only, whatever the machine has
    plan = _on_cpu(plan)
    out = out or _new_run_dir()
    workers = workers or min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
    if not quiet:
        n = plan.suites[0].limit
        click.echo(
            f"qualgate demo: {n} questions x {len(plan.seeds)} seed(s), {len(plan.configs)} configs, "
            f"{workers} worker process(es), records in {out}",
            err=True,
        )
    log = None if quiet else (lambda msg: click.echo(msg, err=True))
    # each worker decodes its contiguous part of every batch; a request's tokens do not depend
    # on its batch (docs/engine.md), so the records are those of one in-process engine
    factory = functools.partial(DeviceParallelBackend, devices=["cpu"] * workers, threads=threads)
    speed = SpeedSettings(rounds=SPEED_ROUNDS, questions=SPEED_QUESTIONS)
    result = run_plan(plan, out, progress=progress_factory(quiet), log=log, speed=speed, backend_factory=factory)
    if result.gate is None:  # refused: errors in the records
        click.echo(f"gate refused the records: {result.manifest['gate']['message']}", err=True)
        return ExitCode.DATA
    t_report = time.perf_counter()
    click.echo(render_text(result.gate, wide=wide))
    levels = [r["confidence_level"] for r in ((result.manifest.get("speed") or {}).get("results") or {}).values()]
    caption = (
        f"speed (tok/s: output tokens per second of engine time, median of {SPEED_ROUNDS} interleaved rounds "
        f"of {SPEED_QUESTIONS} questions; speed-up: median of those rounds' ratios to the baseline "
        f"[{f'{levels[0]:.1%} ' if levels else ''}interval], so the two columns can rank configs differently)"
    )
    click.echo(textwrap.fill(caption, 100))
    click.echo(text_table(speed_rows(summarize(out)), SPEED_HEADERS))
    page = os.path.join(out, "report.html")
    write_atomic(page, run_html(out))
    click.echo()
    click.echo(
        textwrap.fill(phase_times(result.manifest, time.perf_counter() - t_report, time.perf_counter() - t0), 100)
    )
    click.echo(f"records, manifest and gate.json in {out} (qualgate report {out})")
    click.echo(f"HTML report (plots and the questions that flipped): {page}")
    click.echo(demo_outcome(result.gate.verdict))
    return ExitCode.OK  # the demo's FAILs are its findings, not a failed command


#: the demo's interleaved speed rounds: 6 is the fewest whose median has a 95 % interval
SPEED_ROUNDS, SPEED_QUESTIONS = 6, 16


def _new_run_dir() -> str:
    """A new ``qualgate-demo-N`` in the current directory (it outlives a reboot, unlike /tmp)."""
    for i in itertools.count(1):
        path = f"qualgate-demo-{i}"
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")


def phase_times(manifest: dict, report_s: float, total_s: float) -> str:
    """One line of wall seconds per phase: each config's decoding (with its model load), the
    speed rounds, and the gate and report; then the total."""
    parts = [
        f"{name} {c.get('load_s', 0.0) + c['throughput']['wall_s']:.1f}" for name, c in manifest["configs"].items()
    ]
    if manifest.get("speed", {}).get("wall_s") is not None:
        parts.append(f"speed rounds {manifest['speed']['wall_s']:.1f}")
    gate_s = (manifest.get("gate") or {}).get("wall_s")
    parts.append(f"gate and report {report_s + (gate_s or 0.0):.1f}")
    return f"demo finished in {total_s:.0f} s (wall seconds: " + ", ".join(parts) + ")"


def demo_outcome(verdict: str) -> str:
    """The demo's last line: its verdict is a finding to read, and the command succeeded."""
    from qualgate.evidence.contract import Verdict

    if verdict == Verdict.FAIL:
        return (
            "The demo succeeded (exit 0). Its verdict FAIL is the expected finding: the aggressive FLy "
            "config loses answer quality, and the gate catches it. In CI, `qualgate gate` and "
            "`qualgate run` exit 1 on a FAIL; the demo always exits 0 when it ran."
        )
    return (
        f"The demo succeeded (exit 0) with verdict {verdict}; the expected finding is a FAIL for the "
        "aggressive FLy config, so a larger --questions may be needed to show it."
    )


def _on_cpu(plan):
    import dataclasses

    configs = {
        name: dataclasses.replace(c, engine_options={**c.engine_options, "device": "cpu"})
        for name, c in plan.configs.items()
    }
    return dataclasses.replace(plan, configs=configs)
