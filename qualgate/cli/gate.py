"""``qualgate gate`` (the verdict) and ``qualgate calibrate`` (A/A runs)."""

from __future__ import annotations

import functools
import os

import click

from qualgate.config.options import (
    INCONCLUSIVE_AS,
    INPUT_FORMATS,
    MISSING,
    ON_MISSING,
    ON_PROMPT_MISMATCH,
    ORDERS,
    POLICIES,
    WEIGHTINGS,
)
from qualgate.formatting import inert

from . import FiniteFloatRange, Fraction
from .importing import import_options, options_from

_FRACTION = Fraction()
_ALPHA = FiniteFloatRange(0, 0.5, min_open=True, max_open=True)
_PATH = click.Path(exists=True, path_type=str)
_OUT = click.Path(dir_okay=False, path_type=str)


def _records_options(f):
    """Options shared by ``gate`` and ``calibrate`` about reading and pairing records."""
    for decorator in reversed(
        [
            click.option(
                "--on-missing",
                type=click.Choice(ON_MISSING),
                default="error",
                show_default=True,
                help="Keys present on one side only: refuse (exit 3), or drop them and pair the rest.",
            ),
            click.option(
                "--max-errors",
                type=click.IntRange(min=0),
                default=0,
                show_default=True,
                help="Drop up to this many pairs with an 'error' outcome (engine failure); more is exit 3.",
            ),
            click.option(
                "--drop-truncated",
                is_flag=True,
                help="Drop an incomplete last line of a records file (a crashed writer) instead of refusing.",
            ),
            click.option(
                "--allow-unknown-fields",
                "allow_unknown",
                is_flag=True,
                help="Ignore record fields the schema does not define instead of refusing them.",
            ),
            click.option(
                "--input-format",
                type=click.Choice(["auto", *INPUT_FORMATS]),
                default="auto",
                show_default=True,
                help="Format of the runs: qualgate records, or another tool's logs (auto: detected per path).",
            ),
            click.option(
                "--prompt-mismatch",
                type=click.Choice(ON_PROMPT_MISMATCH),
                default="error",
                show_default=True,
                help="Pairs whose prompt hash or suite version differ: refuse (exit 3), or pair them by "
                "question id and report how many differ (a qualgate run against another tool's run).",
            ),
            import_options,
            click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
            click.option("--output", "-o", type=_OUT, help="Also write the JSON report to this file (atomically)."),
            click.option("--markdown", type=_OUT, help="Also write the report as markdown to this file."),
        ]
    ):
        f = decorator(f)
    return f


def _emit(report, fmt, output, markdown, text, md, html=None):
    """Print ``report``, write its JSON, markdown and HTML (``html``: (path, build) or None)."""
    from qualgate.formatting import append_step_summary, to_json, write_atomic

    # a gate report is written as evidence: signed when QUALGATE_EVIDENCE_KEY is set
    evidence = report.evidence() if hasattr(report, "evidence") else None
    doc = to_json(evidence.signed() if evidence is not None else report)
    click.echo(doc if fmt == "json" else inert(text(report)), nl=fmt == "json")
    for warning in evidence.warnings if evidence is not None else ():  # (recorded in the report too)
        click.echo(inert(f"warning: {warning}"), err=True)
    if output:
        write_atomic(output, doc + "\n")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    page = md(report) if markdown or summary else None  # 0.3 s at 30,000 flips: only when written
    if markdown:
        write_atomic(markdown, page)
    if html:
        from .run import write_html

        path, build = html
        write_html(path, build(report.to_dict()))
    if summary:
        append_step_summary(page)
    return report.exit_code


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("baseline", type=_PATH)
@click.argument("candidates", nargs=-1, required=True, type=_PATH)
@click.option(
    "--margin",
    type=_FRACTION,
    help="Largest tolerable loss as a fraction (0.02 = 2 accuracy points); required unless --policy-file.",
)
@click.option(
    "--policy-file",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="Per-suite margins (absolute or relative drops) and tiers (blocking / warning / advisory) "
    "instead of one --margin: see qualgate.verdict.policy.",
)
@click.option("--alpha", type=_ALPHA, default=0.05, show_default=True, help="One-sided significance level.")
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default="noninferiority",
    show_default=True,
    help="Non-inferiority (PASS/FAIL/INCONCLUSIVE) or the McNemar gate (PASS/FAIL).",
)
@click.option(
    "--inconclusive",
    type=click.Choice(INCONCLUSIVE_AS),
    default="inconclusive",
    show_default=True,
    help="Exit code of an INCONCLUSIVE verdict: 4, or that of FAIL (1) or PASS (0).",
)
@click.option(
    "--weighting",
    type=click.Choice(WEIGHTINGS),
    default="pooled",
    show_default=True,
    help="Pooled decision over suites: counts summed, or suites weighted equally.",
)
@click.option(
    "--sequential",
    is_flag=True,
    help="Decide as the questions arrive (always-valid e-process test), stopping at PASS, FAIL, "
    "futility or the budget.",
)
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default="seeded",
    show_default=True,
    help="With --sequential: arrival order of the questions (as qualgate run --sequential "
    "schedules them, or the baseline's record order).",
)
@click.option(
    "--order-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="With --sequential --order seeded: the seed of the arrival order.",
)
@click.option(
    "--max-questions",
    type=click.IntRange(min=1, max=10**15),  # the most a gate report holds
    default=None,
    help="With --sequential: question budget per candidate.",
)
@click.option(
    "--final",
    is_flag=True,
    help="With --sequential --max-questions: the records are final (the run finished), so the "
    "budget's fixed-n test may decide. Without it each call is a look at records that may still "
    "grow: only the always-valid test decides (valid however often the gate is re-run).",
)
@click.option(
    "--power",
    type=_FRACTION,
    default=0.8,
    show_default=True,
    help="With --sequential and no --max-questions: target power against no loss (sets the futility boundary).",
)
@click.option(
    "--missing",
    type=click.Choice(MISSING),
    default="worst-case",
    show_default=True,
    help="Which verdict decides when pairs are incomplete (--on-missing drop, --max-errors): with "
    "the gaps and errors that may hide a loss (a candidate gap where the baseline was correct, a "
    "baseline gap where the candidate is not) counted as lost, or with them "
    "dropped. Both are reported; qualgate check refuses a PASS that needs 'drop'.",
)
@click.option(
    "--baseline-config",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="The baseline's serving or decoding config (any format qualgate check reads); its config id "
    "must be the baseline records'. Written into the report: qualgate check refuses evidence "
    "whose baseline config it cannot resolve to a lossless one.",
)
@click.option(
    "--candidate-config",
    "candidate_configs",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="Each candidate's serving or decoding config, in the candidates' order (repeat it once per "
    "candidate); its config id must be the candidate records'. With --baseline-config, written into "
    "the report so that qualgate check can verify that the baseline is the candidate's own reference "
    "(same target, tokenizer, sampling and numerics); a decoding config states the sampling.",
)
@click.option(
    "--judge-units",
    is_flag=True,
    help="Records from qualgate judge: the margin is in the judge's own verdicts, not corrected by its "
    "measured sensitivity (a judge noisy on every pair sees only part of a real loss).",
)
@_records_options
@click.option("--html", type=_OUT, help="Also write a self-contained HTML page (plots, flips) to this file.")
@click.option("--wide", is_flag=True, help="Every column of the text table (p-values, interval); default: 100 columns.")
def gate(
    baseline,
    candidates,
    margin,
    policy_file,
    alpha,
    policy,
    inconclusive,
    weighting,
    sequential,
    order,
    order_seed,
    max_questions,
    final,
    power,
    missing,
    baseline_config,
    candidate_configs,
    judge_units,
    on_missing,
    max_errors,
    drop_truncated,
    allow_unknown,
    input_format,
    prompt_mismatch,
    fmt,
    output,
    markdown,
    html,
    wide,
    **kwargs,
):
    """Decide whether each CANDIDATE loses quality against BASELINE.

    BASELINE and each CANDIDATE are record files (.jsonl, .parquet, .csv) or directories of
    them, or another tool's logs (lm-eval, inspect, nemo-evaluator, lighteval: see `qualgate
    import`), paired on (suite, question_id, seed, sample_index). With several seeds per question
    the question is the unit (clustered tests). Write the evidence for `qualgate check` with
    --output REPORT.json. When GITHUB_STEP_SUMMARY is set, the markdown report is appended there.

    With QUALGATE_EVIDENCE_KEY set, the report is signed (HMAC-SHA256) for `qualgate check`.

    \b
    Exit codes: 0 PASS, 1 FAIL, 4 INCONCLUSIVE (see --inconclusive),
                2 usage error, 3 invalid or unpairable records.
    """
    if (margin is None) == (policy_file is None):
        raise click.UsageError("give --margin or --policy-file (one of them)")
    for cand in candidates:
        if _same_file(baseline, cand):
            click.echo(
                f"warning: candidate {cand} is the baseline itself: every pair agrees, so it passes "
                "whatever the configuration (qualgate run refuses such a plan)",
                err=True,
            )
    from qualgate.judge import judged_gate

    judged = judged_gate(baseline, candidates, margin, alpha, judge_units=judge_units, max_errors=max_errors)
    if judged is not None:  # records of qualgate judge: the margin in judged loss, the level less the bound's
        click.echo(judged.note, err=True)
        margin, alpha = judged.margin, judged.alpha
    elif judge_units:
        raise click.UsageError("--judge-units is for records qualgate judge wrote")
    records = dict(
        on_missing=on_missing,
        max_errors=max_errors,
        drop_truncated=drop_truncated,
        allow_unknown=allow_unknown,
        missing=missing,
        baseline_config=_describe(baseline_config),
        candidate_configs=_describe_candidates(candidate_configs, candidates),
    )
    foreign = dict(input_format=input_format, import_options=options_from(kwargs), on_prompt_mismatch=prompt_mismatch)
    if sequential and (policy_file or input_format != "auto" or prompt_mismatch != "error"):
        raise click.UsageError(
            "--sequential reads qualgate records at one margin: no --policy-file, --input-format or --prompt-mismatch"
        )
    if html:
        from qualgate.report.html import gate_html

        read = dict(
            drop_truncated=drop_truncated,
            allow_unknown=allow_unknown,
            fmt=input_format,
            options=foreign["import_options"],
        )
        html = (html, lambda doc: gate_html(doc, baseline, list(candidates), **read))
    if sequential:
        from qualgate.verdict import sequential as seq

        if policy != "noninferiority":
            raise click.UsageError("--sequential decides non-inferiority; it cannot be combined with --policy mcnemar")
        report = seq.run_sequential_gate(
            baseline,
            list(candidates),
            margin=margin,
            alpha=alpha,
            power=power,
            order=order,
            seed=order_seed,
            max_questions=max_questions,
            inconclusive=inconclusive,
            final=final,
            **records,
        )
        return _emit(report, fmt, output, markdown, seq.render_text, seq.render_markdown, html)

    from qualgate.report.gate_text import render_markdown, render_text
    from qualgate.verdict.fixed import run_gate
    from qualgate.verdict.policy import read_policy

    from .run import stage_progress

    suite_policy = read_policy(policy_file) if policy_file else None
    with stage_progress("qualgate gate") as bar:  # (lines only when it takes a while)
        report = run_gate(
            baseline,
            list(candidates),
            policy=policy,
            margin=margin,
            alpha=alpha,
            weighting=weighting,
            inconclusive=inconclusive,
            suite_policy=suite_policy,
            progress=bar.at,
            **records,
            **foreign,
        )
    text = functools.partial(render_text, wide=wide)
    return _emit(report, fmt, output, markdown, text, render_markdown, html)


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _describe(path):
    """:func:`qualgate.evidence.binding.describe_side` of a serving or decoding config file (the
    sampling and engine where a decoding config states them)."""
    if path is None:
        return None
    from qualgate.evidence.binding import describe_side

    from ..ci import read_serving_config

    cfg = read_serving_config(path)
    cfg.config_id()  # a DataError naming the file when it cannot be resolved
    if cfg.format == "decoding-config":
        from qualgate.config.decoding import load_config
        from qualgate.run.manifest import describe_decoding

        return describe_decoding(load_config(path))
    return describe_side(cfg.model, cfg.speculative, cfg.numerics, engine_version=getattr(cfg, "vllm_version", None))


def _describe_candidates(paths, candidates):
    if not paths:
        return None
    if len(paths) != len(candidates):
        raise click.UsageError(
            f"--candidate-config was given {len(paths)} times for {len(candidates)} candidates: once per candidate"
        )
    return [_describe(p) for p in paths]


class _Losses(click.ParamType):
    name = "FRACTION[,...]"

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return list(value)
        try:
            out = [float(x) for x in str(value).split(",")]
        except ValueError:
            self.fail(f"{value!r} is not a comma list of numbers", param, ctx)
        if not all(0 < x < 1 for x in out):
            self.fail(f"{value!r}: every loss must be a fraction in (0, 1) (0.02 = 2 points)", param, ctx)
        return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_a", type=_PATH)
@click.argument("run_b", type=_PATH)
@click.option(
    "--loss",
    "losses",
    type=_Losses(),
    default="0.01,0.02,0.03",
    show_default=True,
    help="Losses to size a gate for (fractions).",
)
@click.option(
    "--alpha",
    type=_ALPHA,
    default=0.05,
    show_default=True,
    help="Level of the A/A test (two-sided) and of the gates sized; 1 - alpha intervals.",
)
@click.option(
    "--power",
    type=FiniteFloatRange(0.5, 1, max_open=True),
    default=0.8,
    show_default=True,
    help="Power of the gates sized.",
)
@_records_options
def calibrate(
    run_a,
    run_b,
    losses,
    alpha,
    power,
    on_missing,
    max_errors,
    drop_truncated,
    allow_unknown,
    input_format,
    prompt_mismatch,
    fmt,
    output,
    markdown,
    **kwargs,
):
    """A/A calibration: two runs that should be equivalent (RUN_A, RUN_B: files or directories).

    Reports the discordant fraction with its confidence interval, tests that the net
    difference is null (a significant difference points at a harness or engine bug), and
    the questions a gate needs for each --loss at that discordance and at its upper bound.

    \b
    Exit codes: 0 consistent, 1 the runs differ significantly,
                2 usage error, 3 invalid or unpairable records.
    """
    from qualgate.verdict.calibration import (
        render_calibration_markdown,
        render_calibration_text,
        run_calibration,
    )

    report = run_calibration(
        run_a,
        run_b,
        losses=losses,
        alpha=alpha,
        power=power,
        on_missing=on_missing,
        max_errors=max_errors,
        drop_truncated=drop_truncated,
        allow_unknown=allow_unknown,
        input_format=input_format,
        import_options=options_from(kwargs),
        on_prompt_mismatch=prompt_mismatch,
    )
    return _emit(report, fmt, output, markdown, render_calibration_text, render_calibration_markdown)
