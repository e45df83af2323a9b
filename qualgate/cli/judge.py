"""``qualgate judge``: grade two runs against each other with a judge model (both orders)."""

from __future__ import annotations

import click

_PATH = click.Path(exists=True, path_type=str)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("baseline", type=_PATH)
@click.argument("candidate", type=_PATH)
@click.option(
    "--judge",
    "judge_config",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="The judge: a decoding config YAML (engine vllm-server, vllm or reference).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=str),
    help="Directory for the judged records, pairs.jsonl, judge.json and the verdict cache.",
)
@click.option(
    "--prompt",
    "template",
    default="pairwise",
    show_default=True,
    help="Judge prompt template: 'pairwise' (shipped) or a template YAML file.",
)
@click.option("--suite", help="The suite the runs answered (built-in name or YAML): the questions shown to the judge.")
@click.option("--data-file", multiple=True, type=_PATH, help="Local data file(s) for --suite.")
@click.option(
    "--questions",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help='Instead of --suite: JSON Lines {"suite", "question_id", "messages", "reference"?}.',
)
@click.option(
    "--cache",
    type=click.Path(dir_okay=False, path_type=str),
    help="Verdict cache (append-only JSON Lines; default OUT/verdict_cache.jsonl). Share it across runs.",
)
@click.option(
    "--sensitivity",
    type=click.IntRange(min=0),
    default=None,
    help="Planted pairs (a baseline answer against a degraded copy, both orders) that measure how much of "
    "a real loss the judge sees; qualgate gate scales the margin by the lower bound. 0: not measured "
    "(then gate only with --judge-units). Default: 200, or as many as the baseline has answers of 60+ characters.",
)
@click.option("--sensitivity-seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--max-judge-errors",
    type=click.FloatRange(0, 1),
    default=0.1,
    show_default=True,
    help="Exit 3 (records still written) when more than this share of the judged pairs are judge errors.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def judge(
    baseline,
    candidate,
    judge_config,
    out,
    template,
    suite,
    data_file,
    questions,
    cache,
    sensitivity,
    sensitivity_seed,
    max_judge_errors,
    fmt,
):
    """Judge CANDIDATE's outputs against BASELINE's (record files or directories), pair by pair.

    Every pair whose outputs differ is asked in both orders; lost only if the judge prefers the
    baseline both times, gained only if it prefers the candidate both times, else tied.
    Byte-identical outputs are ties without a judge call. Writes OUT/baseline/*.jsonl and
    OUT/candidate/*.jsonl for `qualgate gate`, OUT/pairs.jsonl (both verdicts and the judge's
    text) and OUT/judge.json (the judge's identity and the counts). On two runs of one lossless
    config (A/A), the decisive rate is the judge's noise: pass it to `qualgate power
    --judge-noise`. With --sensitivity N the judge also compares N of the baseline's answers
    with degraded copies of them (OUT/planted.jsonl): the share it gets right bounds how much
    of a real loss it sees, and `qualgate gate` scales the margin by its lower bound.
    """
    from qualgate.formatting import text_table, to_json
    from qualgate.judge import judge_pairs, load_judge, load_questions, questions_from_suite
    from qualgate.verdict.pairing import load_side

    if (suite is None) == (questions is None):
        raise click.UsageError("give the questions the runs answered: --suite or --questions (exactly one)")
    if suite is not None:
        from qualgate.suites import load_suite

        qs = questions_from_suite(load_suite(suite, data_files=list(data_file) or None))
    else:
        qs = load_questions(questions)
    base, cand = load_side(baseline), load_side(candidate)
    with load_judge(judge_config, template, kind="pairwise") as j:
        summary = judge_pairs(
            base,
            cand,
            j,
            qs,
            out,
            cache=cache,
            log=lambda m: click.echo(m, err=True),
            sensitivity=sensitivity,
            sensitivity_seed=sensitivity_seed,
        )
        judge_id = j.judge_id
    import json
    from pathlib import Path

    sens = json.loads((Path(out) / "judge.json").read_text(encoding="utf-8"))["sensitivity"]
    if summary.judged and summary.judge_error > max_judge_errors * summary.judged:
        from qualgate.errors import DataError

        first = next(
            (
                v.get("error")
                for row in map(json.loads, (Path(out) / "pairs.jsonl").read_text(encoding="utf-8").splitlines())
                if row.get("outcome") == "judge_error"
                for v in row.get("verdicts", ())
                if v.get("error")
            ),
            "unknown",
        )
        raise DataError(
            f"{summary.judge_error} of {summary.judged} judged pairs are judge errors (more than "
            f"--max-judge-errors {max_judge_errors:g}); the first: {str(first)[:300]}. The records are written; "
            "fix the judge and run again (the cache answers what was read)",
            file=str(Path(out) / "pairs.jsonl"),
        )
    if fmt == "json":
        click.echo(to_json(summary.to_dict() | {"sensitivity": sens}))
        return 0
    d = summary.to_dict()
    rate = d["decisive_rate"]
    labels = {
        "identical": "identical (no call)",
        "order_inconsistent": "orders disagree",
        "position_a": "shown first won both",
        "judge_error": "judge_error",
        "engine_error": "engine error",
        "calls": "judge calls",
        "cached": "from the cache",
    }
    rows = [
        (labels.get(k, k), d[k])
        for k in (
            "pairs",
            "identical",
            "judged",
            "lost",
            "gained",
            "tied",
            "order_inconsistent",
            "position_a",
            "judge_error",
            "engine_error",
            "calls",
            "cached",
        )
    ]
    rows.append(("decisive rate", "n/a" if rate is None else f"{rate:.3f}"))  # (lost + gained) / judged
    click.echo(f"judge {judge_id}: {candidate} against {baseline}\n")
    click.echo(text_table(rows, ["", "count"]))
    if sens:
        kinds = ", ".join(f"{k} {v['detected']}/{v['pairs']}" for k, v in sens["by_kind"].items())
        click.echo(
            f"\nsensitivity on {sens['pairs']} planted pairs: {sens['detected']} detected, {sens['inverted']} "
            f"inverted, {sens['missed']} missed ({sens['judge_error']} judge_error); by kind: {kinds}\n"
            f"  estimate {sens['estimate']:.3f}, lower bound {sens['lower_bound']:.3f} at "
            f"{sens['confidence_level']:.1%}: the gate counts a margin of true loss as that fraction of judged loss"
        )
    else:
        click.echo("\nsensitivity not measured (--sensitivity 0): qualgate gate needs --judge-units for these records")
    click.echo(
        f"\nidentical outputs are ties, never sent to the judge; gate the judged records with:\n"
        f"  qualgate gate {out}/baseline {out}/candidate"
    )
    return 0
