"""``qualgate import`` (other tools' logs -> records), ``qualgate flips`` and ``qualgate prompt-hash``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from qualgate.config.options import INPUT_FORMATS, ON_MISSING, ON_PROMPT_MISMATCH

_PATH = click.Path(exists=True, path_type=str)
_OUT = click.Path(dir_okay=False, path_type=str)
_TOOLS = INPUT_FORMATS  # qualgate's own records (to Parquet), and the tools whose logs are read


def import_options(f):
    """Options of the importers, shared by ``import``, ``gate``, ``calibrate`` and ``flips``."""
    for decorator in reversed(
        [
            click.option(
                "--suite", "imp_suite", help="Imported logs: suite name to give (default: the tool's task name)."
            ),
            click.option(
                "--suite-version",
                "imp_suite_version",
                help="Imported logs: suite version to give (default: the tool's task version).",
            ),
            click.option(
                "--id-field",
                "imp_id_field",
                help="Imported logs: a field of the tool's document to use as question id "
                "(default: the tool's question key: lm-eval doc_id, inspect sample id, "
                "NeMo problem_idx, lighteval doc id).",
            ),
            click.option(
                "--filter", "imp_filter", help="lm-eval: the filter whose answers decide (default: the task's first)."
            ),
            click.option(
                "--metric",
                "imp_metric",
                help="The 0/1 metric (lm-eval, lighteval) or scorer (inspect; scorer.key for a scorer whose "
                "value is a dict) that decides (default: the only one that could be the outcome, or the "
                "tool's own primary one; never guessed: several are refused, listed).",
            ),
            click.option(
                "--config-id",
                "imp_config_id",
                help="Imported logs: config id to give (default: derived from the model arguments the tool recorded).",
            ),
            click.option(
                "--seed", "imp_seed", type=int, help="Imported logs: seed to give (default: the tool's, else 0)."
            ),
            click.option(
                "--allow-partial",
                "imp_partial",
                is_flag=True,
                help="Imported logs: read a log holding fewer samples than its run reports (lm-eval n-samples or "
                "tasks without samples files, an inspect log cancelled or failed) instead of refusing it.",
            ),
        ]
    ):
        f = decorator(f)
    return f


def options_from(kwargs: dict):
    """Pop the import options out of a command's keyword arguments."""
    from qualgate.records.importers import ImportOptions

    values = {k[4:]: kwargs.pop(k) for k in list(kwargs) if k.startswith("imp_")}
    return ImportOptions(**values)


@click.command(name="import", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("fmt", metavar="FORMAT", type=click.Choice(_TOOLS))
@click.argument("paths", nargs=-1, required=True, type=_PATH)
@click.option(
    "--out",
    "-o",
    required=True,
    type=_OUT,
    help="Records file to write: JSON Lines, or Parquet with a .parquet suffix (must not exist).",
)
@import_options
def import_(fmt, paths, out, **kwargs):
    """Convert another tool's per-sample logs (PATH: files or output folders) into qualgate records.

    \b
    FORMAT:
      qualgate        qualgate's own records (e.g. JSON Lines to --out R.parquet)
      lm-eval         samples_<task>_<time>.jsonl (--log_samples) or the output folder
      inspect         inspect_ai .eval / .json logs (needs the 'inspect' extra)
      nemo-evaluator  results.jsonl with its run bundle, or the run folder
      lighteval       details_<task>_<time>.parquet or the output folder

    Anything that cannot be mapped is refused (exit 3) naming the file, line and field.
    `qualgate gate` and `calibrate` also read these formats directly (--input-format).
    A .parquet --out is read by the gate on its columnar path: a million records a side are
    gated in seconds (benchmarks/bench_gate.py).
    """
    from qualgate.records.importers import check_runs, import_records

    from ..records import RecordWriter

    options = options_from(kwargs)
    target = Path(out)
    if target.exists():
        raise click.UsageError(f"{out} exists: qualgate import writes a new file (records are never overwritten)")
    if fmt == "qualgate":
        from ..records import read_records

        records = [r for p in paths for r in read_records(p)]
    else:
        located = [x for p in paths for x in import_records(fmt, p, options)]
        check_runs(fmt, located, ", ".join(paths))  # several paths: still one configuration
        records = [x.record for x in located]
    if target.suffix == ".parquet":
        from ..records.columns import write_parquet

        write_parquet(records, target)
    else:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with RecordWriter(tmp) as w:
                w.write_batch(records)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    suites = sorted({r.suite for r in records})
    configs = sorted({r.config_id for r in records})
    click.echo(f"wrote {len(records):,} records ({', '.join(suites)}; config {', '.join(configs)}) to {out}", err=True)
    if fmt != "qualgate":  # the metric each suite was read on (never guessed: qualgate.records.importers)
        read_on = {(r.suite, r.decided_by.rsplit(":", 1)[-1]) for r in records if r.decided_by}
        for suite, metric in sorted(read_on):
            click.echo(f"{suite}: outcome from the metric {metric}", err=True)
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("baseline", type=_PATH)
@click.argument("candidate", type=_PATH)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("--output", "-o", type=_OUT, help="Also write the flips in this format to this file (atomically).")
@click.option(
    "--input-format",
    type=click.Choice(["auto", *INPUT_FORMATS]),
    default="auto",
    show_default=True,
    help="Format of BASELINE and CANDIDATE (auto: detected per path).",
)
@click.option("--on-missing", type=click.Choice(ON_MISSING), default="error", show_default=True)
@click.option("--max-errors", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--prompt-mismatch",
    type=click.Choice(ON_PROMPT_MISMATCH),
    default="error",
    show_default=True,
    help="Pairs whose prompt hash or suite version differ: refuse, or pair by question id and report.",
)
@import_options
def flips(baseline, candidate, fmt, output, input_format, on_missing, max_errors, prompt_mismatch, **kwargs):
    """Every question CANDIDATE lost or gained against BASELINE, with both outputs, both
    extracted answers and the gold (pairs are checked as `qualgate gate` checks them)."""
    from qualgate.formatting import to_json, write_atomic
    from qualgate.records.importers import load_records
    from qualgate.verdict.flips import find_flips, render_csv, render_text
    from qualgate.verdict.pairing import pair_records

    options = options_from(kwargs)
    base, cand = (load_records(p, fmt=input_format, options=options) for p in (baseline, candidate))
    pair_records(base, cand, on_missing=on_missing, max_errors=max_errors, on_prompt_mismatch=prompt_mismatch)
    result = find_flips(base, cand)
    from qualgate.judge import judged_reasons

    reasons = judged_reasons(candidate)  # records of `qualgate judge`: the judge's text
    text = {
        "json": lambda: to_json(result) + "\n",
        "csv": lambda: render_csv(result),
        "text": lambda: render_text(result, title=f"{candidate} against {baseline}: ", reasons=reasons),
    }[fmt]()
    click.echo(text, nl=False)
    if output:
        write_atomic(output, text)
    return 0


@click.command(name="prompt-hash", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--messages",
    is_flag=True,
    help="FILE holds chat messages as a JSON list of {role, content} objects (else: the exact prompt text).",
)
def prompt_hash(file, messages):
    """Print the prompt hash records carry (qualgate.records.prompts.prompt_hash) of the prompt in FILE ('-': stdin).

    Without --messages the file's text is hashed exactly as it is (no trailing newline is
    removed); with --messages, the canonical JSON of the messages.
    """
    from qualgate.records.prompts import prompt_hash as hash_prompt

    from ..errors import DataError

    text = file.read()
    prompt = text
    if messages:
        try:
            prompt = json.loads(text)
            click.echo(hash_prompt(prompt))
        except (ValueError, TypeError) as exc:
            raise DataError(f"not a JSON list of message objects ({exc})", file=file.name) from None
        return 0
    click.echo(hash_prompt(prompt))
    return 0
