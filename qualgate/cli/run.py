"""``qualgate run PLAN --out DIR``, ``qualgate merge SHARD... --out DIR`` and ``qualgate report DIR``."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback

import click

from ..errors import ExitCode
from . import FiniteFloatRange

__all__ = ["merge", "report", "run"]


#: seconds between progress lines when stderr is not a terminal (a CI log); the environment
#: variable QUALGATE_PROGRESS_EVERY_S overrides it
PROGRESS_EVERY_S = 5.0


def progress_every_s() -> float:
    """Seconds between progress lines: ``QUALGATE_PROGRESS_EVERY_S``, else :data:`PROGRESS_EVERY_S`."""
    value = os.environ.get("QUALGATE_PROGRESS_EVERY_S")
    try:
        return float(value) if value else PROGRESS_EVERY_S
    except ValueError:
        raise click.UsageError(f"QUALGATE_PROGRESS_EVERY_S must be a number of seconds, got {value!r}") from None


class LineProgress:
    """Progress of one step as periodic lines on ``file`` (stderr not a terminal: a CI log).

    While the step runs, a line ``label: done/total (pct), elapsed s`` is written every
    ``every_s`` seconds, whether or not work finished in between (a batch can take longer
    than that), so that a log never goes quiet for longer during a long step.
    """

    def __init__(self, label: str, total: int, *, file=None, every_s: float | None = None):
        import threading

        self.label, self.total, self.every_s = label, total, every_s or progress_every_s()
        self.stage = ""  #: with ``total`` 0: what the step is doing now (:meth:`at`)
        self.file = file or sys.stderr
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"progress-{label}", daemon=True)

    def __enter__(self):
        import time

        self.t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def update(self, n: int) -> None:
        self.done += n

    def at(self, stage: str) -> None:
        """The hook a step without a count calls as it goes (``run_gate``'s, ``check``'s)."""
        self.stage = stage

    def line(self) -> str:
        import time

        elapsed = f"{time.perf_counter() - self.t0:.0f} s"
        if not self.total:
            return f"{self.label}: {self.stage or 'working'}, {elapsed}"
        return f"{self.label}: {self.done}/{self.total} ({self.done / self.total:.0%}), {elapsed}"

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            click.echo(self.line(), file=self.file)


def progress_factory(quiet: bool, *, every_s: float | None = None):
    """``progress(label, total)`` for :func:`qualgate.run.runner.run_plan`: on stderr, a bar
    with ETA on a terminal, else a :class:`LineProgress` line every ``every_s`` seconds
    (default :data:`PROGRESS_EVERY_S`); None with ``quiet``."""
    if quiet:
        return None

    def progress(label, total):
        if not sys.stderr.isatty():
            return LineProgress(label, total, every_s=every_s)
        return click.progressbar(
            length=total,
            label=f"{label:<16}",
            file=sys.stderr,
            show_eta=True,
            show_pos=True,
            width=24,
        )

    return progress


def stage_progress(label: str, quiet: bool = False):
    """A :class:`LineProgress` for a step without a count (a gate, ``check``'s recomputation),
    in both modes: a line every :func:`progress_every_s` seconds from then on, saying which
    stage the step is at (its ``at`` is the hook the library calls); nothing with ``quiet``."""
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)
    return LineProgress(label, 0)


def emit_report(out, fmt: str, markdown: str | None, html: str | None = None) -> None:
    """Print the report of run directory ``out`` (text or JSON), write its markdown to
    ``markdown`` and its HTML page to ``html``, and append the markdown to
    ``$GITHUB_STEP_SUMMARY`` when that is set."""
    from qualgate.formatting import append_step_summary, to_json, write_atomic
    from qualgate.report.run import render_markdown, render_text, summarize

    rep = summarize(out)
    click.echo(to_json(rep) if fmt == "json" else render_text(rep), nl=fmt == "json")
    md = render_markdown(rep)
    if markdown:
        write_atomic(markdown, md)
    if html:
        from qualgate.report.html import run_html

        write_html(html, run_html(out))
    append_step_summary(md)


def write_html(path: str, page: str) -> None:
    """Write an HTML page to ``path`` (atomically) and say where it is, on stderr."""
    from qualgate.formatting import write_atomic

    write_atomic(path, page)
    click.echo(f"HTML report: {path}", err=True)


_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Report format on stdout.",
)
_MARKDOWN = click.option(
    "--markdown", type=click.Path(dir_okay=False, writable=True), help="Also write the report as markdown to this file."
)
_HTML = click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write a self-contained HTML page (plots, flips, provenance) to this file.",
)


def _shard_option(ctx, param, value):
    from qualgate.run.shards import Shard

    if value is None:
        return None
    try:
        return Shard.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("plan", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False),
    help="Run directory (must be absent or empty unless --resume).",
)
@click.option(
    "--resume", is_flag=True, help="Continue the run in OUT: skip records already written, retry 'error' records."
)
@click.option("--keep-errors", is_flag=True, help="With --resume: keep 'error' records instead of retrying them.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Run only the first N questions of each suite (in the suite's order; a smaller limit of the plan stays).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or diagnostics on stderr.")
@click.option(
    "--max-errors",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Pairs with an 'error' outcome (engine failure) the gate may drop; more is exit 3.",
)
@click.option(
    "--sequential",
    is_flag=True,
    help="Run in rounds of questions (seeded order) and stop each candidate as soon as the "
    "sequential non-inferiority gate decides.",
)
@click.option(
    "--batch-questions",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="With --sequential: questions per round (each with all its seeds and samples).",
)
@click.option(
    "--max-questions",
    type=click.IntRange(min=1, max=10**15),  # the most a gate report holds
    default=None,
    help="With --sequential: question budget per candidate (INCONCLUSIVE when reached).",
)
@click.option(
    "--power",
    type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="With --sequential: target power against no loss (futility boundary).",
)
@click.option(
    "--order-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the order in which questions are run (the same for every config).",
)
@click.option(
    "--speed-rounds",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="After the run, measure each config's speed-up over the baseline in this many interleaved "
    "rounds (the same questions under every config back to back, order rotated); 0: off.",
)
@click.option(
    "--speed-questions",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="With --speed-rounds: requests per round.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="torch CPU threads of the reference engine, on CUDA of each GPU's worker (default: torch's "
    "own choice, shared out between the workers; tiny models run fastest on 1, and speed tables are "
    "only comparable at a fixed count).",
)
@click.option(
    "--shard",
    "shard",
    default=None,
    metavar="I/N",
    callback=_shard_option,
    help="Decode only shard I of N of every config (a hash of each question's key; 0 <= I < N), for a "
    "batch scheduler's array job; merge the N shard directories with qualgate merge.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[ADDRESS]",
    help="Decode the batches on Ray actors (one engine per GPU the cluster offers): the cluster at "
    "ADDRESS, else RAY_ADDRESS's, else a local instance. Needs the ray extra. Write --ray=ADDRESS "
    "or put --ray after PLAN.",
)
@click.option(
    "--ray-actors",
    type=click.IntRange(min=1),
    default=None,
    help="With --ray: actors per config (default: as many as the cluster has GPUs, or CPUs, for).",
)
@_FORMAT
@_MARKDOWN
@_HTML
def run(
    plan,
    out,
    resume,
    keep_errors,
    limit,
    quiet,
    max_errors,
    sequential,
    batch_questions,
    max_questions,
    power,
    order_seed,
    speed_rounds,
    speed_questions,
    threads,
    shard,
    ray_address,
    ray_actors,
    fmt,
    markdown,
    html,
):
    """Run every config of PLAN over the same seeded questions, then gate and report.

    Writes OUT/manifest.json, OUT/records/<config>.jsonl (appended as requests finish) and
    OUT/gate.json, then prints the report. Each request is decoded with a seed derived from
    (suite, question, seed, sample), the same under every config. Questions run in a seeded
    order; with --sequential each candidate stops as soon as its verdict is decided, and its
    records are a prefix of a full run's (a later run without --sequential can --resume them).

    One run at a time may hold OUT (a second one is refused with the holder's pid and
    host). --resume decodes again the questions whose record is an 'error' (the new record
    supersedes it; the error is kept in OUT/retried_errors/) unless --keep-errors. An engine
    that stops the run is reported in one line (QUALGATE_DEBUG=1 adds the traceback).

    --shard I/N decodes one shard of every config for an array job (docs/scale-out.md; it
    prints one line, and qualgate merge gates the shards together); --ray decodes the batches
    on Ray actors, this process writing the records.

    \b
    Exit codes: the gate's, 0 PASS, 1 FAIL, 4 INCONCLUSIVE; 2 usage error;
                3 invalid data or configuration, records the gate refuses,
                or an engine that stopped the run (continue it with --resume);
                130 interrupted by Ctrl-C (the records written are kept: --resume).
    """
    from qualgate.config.decoding import load_plan, with_limit
    from qualgate.run.runner import run_plan
    from qualgate.run.sequential import SequentialSettings
    from qualgate.run.speed import SpeedSettings

    from ..backends import open_on_devices

    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # (and in each GPU's worker process, below)
    log = None if quiet else (lambda msg: click.echo(msg, err=True))
    settings = SequentialSettings(batch_questions, max_questions, power) if sequential else None
    speed = SpeedSettings(speed_rounds, speed_questions) if speed_rounds else None
    if ray_actors is not None and ray_address is None:
        raise click.UsageError("--ray-actors needs --ray")
    if shard is not None and (sequential or speed_rounds):
        raise click.UsageError("--shard runs a part of a plain run: not with --sequential or --speed-rounds")
    factory = functools.partial(open_on_devices, threads=threads)
    loaded = load_plan(plan)
    engine_log = None
    try:
        with contextlib.ExitStack() as stack:
            if any(c.engine == "vllm" for c in loaded.configs.values()):  # vLLM's engine logs to fd 2
                from qualgate.vllm033.installed import capture_stderr

                engine_log = capture_stderr()
                stack.callback(_keep_engine_log, out, engine_log)  # after the capture ends
                stack.enter_context(engine_log)
            if ray_address is not None:
                from qualgate.run.ray_backend import RayCluster

                factory = stack.enter_context(
                    RayCluster(ray_address or None, actors=ray_actors, threads=threads, log=log)
                ).open
            result = run_plan(
                with_limit(loaded, limit),
                out,
                resume=resume,
                progress=progress_factory(quiet),
                log=log,
                max_errors=max_errors,
                sequential=settings,
                order_seed=order_seed,
                speed=speed,
                keep_errors=keep_errors,
                backend_factory=factory,
                shard=shard,
            )
    except (ValueError, click.ClickException):
        raise
    except KeyboardInterrupt:  # Ctrl-C: neither a gate FAIL (1) nor click's "Aborted!" (1)
        written = _records_written(out)
        click.echo(
            "interrupted: "
            + (
                f"the {written} records written so far are kept (whole batches); continue with --resume"
                if written
                else "no record was written"
            ),
            err=True,
        )
        return ExitCode.INTERRUPTED
    except Exception as exc:  # the engine broke: not a gate FAIL (exit 1) for CI
        if os.environ.get("QUALGATE_DEBUG"):
            traceback.print_exc(file=sys.stderr)
        written = _records_written(out)
        from qualgate.vllm033.installed import explain

        cause = explain(engine_log.text) if engine_log is not None else None
        click.echo(
            f"the run stopped: {cause if cause else f'{type(exc).__name__}: {exc}'}"
            + (f" (vLLM's own message: {os.path.join(out, 'engine.log')})" if engine_log is not None else "")
            + "; "
            + (
                f"the {written} records written so far are kept; continue with --resume"
                if written
                else "no record was written"
            ),
            err=True,
        )
        return ExitCode.DATA
    if shard is not None:  # the gate and the report are the merge's
        counts = ", ".join(f"{name} {n}" for name, n in _records_per_config(out).items())
        click.echo(
            f"shard {shard} of plan {result.manifest['plan']['name']}: complete in {out} ({counts} records); "
            f"merge the {shard.count} shards with: qualgate merge DIR_0 ... DIR_{shard.count - 1} --out DIR"
        )
        return ExitCode.OK
    emit_report(out, fmt, markdown, html if result.manifest["gate"]["status"] == "ok" else None)
    if result.manifest["gate"]["status"] == "refused":
        click.echo(f"gate refused the records: {result.manifest['gate']['message']}", err=True)
    return ExitCode(result.exit_code)


def _keep_engine_log(out, capture) -> None:
    """Append what vLLM's engine wrote to stderr during the run to OUT/engine.log (the run's
    directory exists once the run started)."""
    from pathlib import Path

    if Path(out).is_dir() and capture.text:
        with open(Path(out) / "engine.log", "a", encoding="utf-8") as f:
            f.write(capture.text)


def _records_per_config(out) -> dict[str, int]:
    from pathlib import Path

    return {f.stem: f.read_bytes().count(b"\n") for f in sorted(Path(out, "records").glob("*.jsonl"))}


@click.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option(
    "--out", "-o", required=True, type=click.Path(file_okay=False), help="The merged run directory (absent or empty)."
)
@click.option(
    "--plan",
    "plan_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The plan the shards ran (default: the plan file named in the first shard's manifest).",
)
@click.option(
    "--max-errors",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Pairs with an 'error' outcome the gate may drop; more is exit 3.",
)
@click.option(
    "--order-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The run order the merged records are written in (the shards' --order-seed).",
)
@click.option("--quiet", "-q", is_flag=True, help="No diagnostics on stderr.")
@_FORMAT
@_MARKDOWN
@_HTML
def merge(shards, out, plan_path, max_errors, order_seed, quiet, fmt, markdown, html):
    """Merge the run directories of shards 0/N .. N-1/N (qualgate run --shard) into OUT, then gate
    and report as qualgate run does.

    Refused (exit 3, naming the shard) when a shard is missing, given twice, unfinished or torn,
    ran another plan, fingerprint or config id, or holds requests of another shard; nothing is
    written then. OUT holds the records in the plan's run order, manifest.json (each shard's
    provenance under 'shards') and gate.json.

    \b
    Exit codes: the gate's, 0 PASS, 1 FAIL, 4 INCONCLUSIVE; 2 usage error;
                3 shards refused, or records the gate refuses.
    """
    from qualgate.config.decoding import load_plan
    from qualgate.run.shards import merge_shards

    log = None if quiet else (lambda msg: click.echo(msg, err=True))
    plan = load_plan(plan_path) if plan_path else None
    result = merge_shards(shards, out, plan=plan, max_errors=max_errors, order_seed=order_seed, log=log)
    emit_report(out, fmt, markdown, html if result.manifest["gate"]["status"] == "ok" else None)
    if result.manifest["gate"]["status"] == "refused":
        click.echo(f"gate refused the records: {result.manifest['gate']['message']}", err=True)
    return ExitCode(result.exit_code)


def _records_written(out) -> int:
    """Record lines under ``OUT/records`` (0 when there are none)."""
    from pathlib import Path

    files = Path(out, "records").glob("*.jsonl")
    return sum(f.read_bytes().count(b"\n") for f in files if f.is_file())


@click.command()
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@_FORMAT
@_MARKDOWN
@_HTML
def report(out, fmt, markdown, html):
    """Print the report of run directory OUT: per config, accuracy per suite, no-answer rate,
    mean acceptance length, tokens/s, speed-up over the baseline, and the gate's verdict with
    the loss bound. With --html, also a self-contained page with plots and the flipped questions.

    \b
    Exit codes: the run's gate's, 0 PASS, 1 FAIL, 4 INCONCLUSIVE, 3 when the gate refused the
                records or the run has no gate yet (unfinished); 2 usage error.
    """
    from qualgate.run.manifest import read_manifest

    emit_report(out, fmt, markdown, html)
    code = (read_manifest(out).get("gate") or {}).get("exit_code")
    if code is None:
        click.echo(f"{out}: the run has no gate yet (continue it with qualgate run --resume)", err=True)
        return ExitCode.DATA
    return ExitCode(code)
