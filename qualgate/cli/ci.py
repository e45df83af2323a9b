"""``qualgate lint``, ``check``, ``audit-log`` and ``admission``: the CI commands."""

from __future__ import annotations

import json

import click

from qualgate.formatting import inert

from ..errors import DataError, ExitCode

FORMATS = ("text", "json")


def _emit_json(obj) -> None:
    from qualgate.formatting import to_json

    click.echo(to_json(obj))


def _where(path, line):
    return f"{path}:{line}" if line else str(path)


# --------------------------------------------------------------------------- lint


def _gh_escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _deployment_options(fn):
    """--manifest, --assume-entrypoint, --drafter-model-type and --vllm-version, shared by lint and check."""
    fn = click.option(
        "--vllm-version",
        metavar="X.Y.Z",
        help="The vLLM release the deployment runs, when its files do not state it (an image tag "
        "vllm/vllm-openai:vX.Y.Z, a pinned vllm==X.Y.Z): its rules apply (0.32, 0.33, 0.34). check "
        "refuses a config whose release it cannot tell, and evidence decoded on another minor release.",
    )(fn)
    fn = click.option(
        "--drafter-model-type",
        metavar="TYPE",
        help="The model_type of the drafter's config.json (e.g. gemma4_assistant, deepseek_mtp, "
        "qwen3): with no `method` it decides whether vLLM runs mtp or draft_model.",
    )(fn)
    fn = click.option(
        "--assume-entrypoint",
        type=click.Choice(["serve", "api_server", "none"]),
        help="What an image started with only its arguments runs: `vllm serve`, the api_server "
        "module, or none (the arguments run as written). Needed for any image but vllm/vllm-openai.",
    )(fn)
    return click.option(
        "--manifest",
        "manifests",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="A Kubernetes file whose ConfigMaps the config's containers read (env, envFrom, volumes); repeatable.",
    )(fn)


@click.command()
@click.argument("configs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option(
    "--fail-on",
    type=click.Choice(["info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="Exit 1 when a finding is at or above this severity.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, "github"]),
    default="text",
    show_default=True,
    help="text; json (a list of reports); github (workflow annotations).",
)
@_deployment_options
def lint(configs, fail_on, fmt, manifests, assume_entrypoint, drafter_model_type, vllm_version):
    """Report what vLLM serving configs really do: lossy verifiers, FLy windows, rejections.

    CONFIG is a `vllm serve ...` command line or shell script (also `python -m
    vllm.entrypoints...` and `docker run ... vllm/vllm-openai`), an args file, a YAML file
    for `vllm serve --config`, a qualgate decoding config, a docker-compose file, Kubernetes
    manifests (Deployment, StatefulSet, Pod, Job, kserve ServingRuntime, ...; with their
    ConfigMaps), production-stack Helm values (servingEngineSpec.modelSpec) or a
    production-stack VLLMRuntime. A file that shows no vLLM serving command is exit 3.
    Severities: info < warning < error.

    \b
    Exit codes: 0 no finding at or above --fail-on, 1 findings, 2 usage error,
                3 a config cannot be read or shows no vLLM serving command.
    """
    from ..ci import lint as lint_file

    reports, unreadable = [], False
    for path in configs:
        try:
            reports.append(
                lint_file(
                    path,
                    manifests=manifests,
                    assume_entrypoint=assume_entrypoint,
                    drafter_model_type=drafter_model_type,
                    vllm_version=vllm_version,
                )
            )
        except DataError as exc:
            unreadable = True
            click.echo(inert(f"invalid data: {exc}"), err=True)
    failed = any(r.at_or_above(fail_on) for r in reports)
    if fmt == "json":
        _emit_json([r.to_dict() for r in reports])
    for r in reports if fmt != "json" else ():
        path = r.config.path
        for f in r.findings:
            at = f.file or path  # the file where the setting is (a --config YAML, a compose override)
            if fmt == "github":
                level = {"info": "notice"}.get(f.severity, f.severity)
                props = f"file={_gh_escape(at, prop=True)}"
                if f.line:
                    props += f",line={f.line}"
                props += f",title={_gh_escape('qualgate ' + f.rule, prop=True)}"
                click.echo(f"::{level} {props}::{_gh_escape(f.message)}")
            else:
                click.echo(inert(f"{_where(at, f.line)}: {f.severity}: {f.message} [{f.rule}]"))
        for note in r.notes if fmt != "json" else ():
            click.echo(inert(f"{path}: note: {note}"), err=True)
        if fmt == "text":
            c = r.counts()
            what = (
                f"{len(r.findings)} finding(s): {c['error']} error, {c['warning']} warning, {c['info']} info"
                if r.findings
                else "clean"
            )
            cid = f", config id {r.config_id}" if r.config_id else ""
            click.echo(inert(f"{path}: {r.config.format}{cid}{', lossy' if r.lossy else ''}: {what}"))
    if unreadable:
        return ExitCode.DATA
    return ExitCode.FAIL if failed else ExitCode.OK


# --------------------------------------------------------------------------- check


def _check_markdown(result) -> str:
    from qualgate.formatting import markdown_table

    head = "allowed" if result.allowed else "refused"
    rows = [
        ["config", f"`{result.config.path}` ({result.config.format})"],
        ["config id", f"`{result.config_id}`"],
        ["verifier", f"{result.method} ({'lossy' if result.lossy else 'lossless'})"],
    ]
    ev = result.evidence
    if ev:
        cand = ev.get("candidate") or {}
        rows += [
            ["evidence", f"`{ev['path']}` created {ev['created_at']}"],
            ["gate", f"{ev['policy']}, margin {ev['margin']}, alpha {ev['alpha']}"],
        ]
        if cand:
            rows.append(["candidate", f"{cand.get('name')}: {cand.get('verdict')}"])
    out = [f"### qualgate check: {head}", "", markdown_table(rows, ["", ""])]
    if result.reasons:
        out += ["", "Refused because:", ""] + [f"- {r}" for r in result.reasons]
    if result.notes:
        out += [""] + [f"- {n}" for n in result.notes]
    return "\n".join(out) + "\n"


@click.command()
@click.argument("config", type=click.Path(dir_okay=False, allow_dash=True), required=False)
@click.option(
    "--evidence", type=click.Path(dir_okay=False), help="Gate report JSON (qualgate gate --output REPORT.json)."
)
@click.option(
    "--server",
    help="A running vLLM's URL: check what it runs (its /v1/models, /version, /metrics and, with "
    "--server-log, its startup log's non-default arguments) instead of, or besides, CONFIG; exit 3 "
    "when it cannot tell or when the server runs another config than CONFIG.",
)
@click.option("--server-log", type=click.Path(exists=True, dir_okay=False), help="The --server's startup log.")
@click.option(
    "--max-margin",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.02,
    show_default=True,
    help="Loosest non-inferiority margin accepted (0.02 = 2 points).",
)
@click.option(
    "--max-alpha",
    type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Largest one-sided alpha accepted.",
)
@click.option(
    "--max-age",
    default="30d",
    show_default=True,
    help="Oldest evidence accepted: 30d, 12h, 90m, 2w (bare number: days).",
)
@click.option(
    "--records",
    type=click.Path(file_okay=False),
    help="Directory holding the report's record files (found by SHA-256): the verdicts are "
    "recomputed from them. Default: the paths in the report, when present.",
)
@click.option(
    "--trust-unsigned",
    is_flag=True,
    help="Accept a report that can be verified neither from its records nor by its signature (QUALGATE_EVIDENCE_KEY).",
)
@click.option(
    "--allow-missing-dependence",
    is_flag=True,
    help="Accept a PASS that holds only with incomplete pairs dropped (gate --missing drop).",
)
@click.option(
    "--allow-key",
    "allow_keys",
    multiple=True,
    help="A speculative_config key outside qualgate's config id that does not change "
    "outputs: only draft_tensor_parallel_size, enforce_eager or disable_lookahead_block_hashes "
    "(a key that can change lossiness is never waived); repeatable.",
)
@click.option(
    "--policy-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Require the evidence to meet this gate policy file: every blocking suite PASS at a "
    "margin no looser than the policy's.",
)
@click.option(
    "--against-target",
    is_flag=True,
    help="Require evidence against target-only: a report whose baseline is standard speculative "
    "decoding must carry a passing lossless leg (a plan's chain), the claim at the two margins' sum.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@_deployment_options
def check(
    config,
    evidence,
    max_margin,
    max_alpha,
    max_age,
    records,
    trust_unsigned,
    allow_missing_dependence,
    allow_keys,
    policy_file,
    against_target,
    fmt,
    server,
    server_log,
    manifests,
    assume_entrypoint,
    drafter_model_type,
    vllm_version,
):
    """Block a lossy serving config unless a verified gate report passed exactly this config.

    CONFIG is any format `qualgate lint` reads (command lines, --config files, decoding
    configs, docker-compose, Kubernetes manifests, production-stack Helm values and
    VLLMRuntime). A lossless CONFIG is allowed without evidence. A lossy one (fly, synthetic) is allowed
    only if --evidence is a gate report with verdict PASS for a candidate whose config id
    equals CONFIG's, against a baseline whose resolved config is lossless, with a margin no
    looser than --max-margin, alpha no larger than --max-alpha, no older than --max-age, and
    verified: recomputed from its record files (--records, or the paths in the report), or
    its HMAC checked with QUALGATE_EVIDENCE_KEY (always, when set), or --trust-unsigned.
    A chained report (a plan's chain: candidate against standard, standard against target-only)
    is evidence against target-only only when both legs pass, the lossless leg on the same
    engine, drafter and seed derivation, at a total margin no looser than --max-margin.
    With GITHUB_STEP_SUMMARY set, a markdown summary is appended to it.

    The vLLM release the deployment runs (its image tag, a pinned requirement, a version
    field, or --vllm-version) decides which rules apply; a config whose release cannot be told
    (none stated, `latest`), or evidence decoded on another minor release, is exit 3.

    \b
    Exit codes: 0 allowed, 1 refused, 2 usage error, 3 unreadable config or evidence, or an
                unknown vLLM release.
    """
    from qualgate.verdict.policy import read_policy

    from ..ci import check as check_config
    from ..ci import parse_age
    from .run import stage_progress

    served_notes = ()
    if server:
        config, served_notes = _served(config, server, server_log)
    elif config is None:
        raise click.UsageError("give CONFIG, or --server URL")
    with stage_progress("qualgate check") as bar:  # (lines only when it takes a while)
        result = check_config(
            config,
            evidence,
            max_margin=max_margin,
            max_alpha=max_alpha,
            max_age=parse_age(max_age),
            allow_keys=tuple(allow_keys),
            records=records,
            trust_unsigned=trust_unsigned,
            allow_missing_dependence=allow_missing_dependence,
            suite_policy=read_policy(policy_file) if policy_file else None,
            manifests=tuple(manifests),
            assume_entrypoint=assume_entrypoint,
            drafter_model_type=drafter_model_type,
            against_target=against_target,
            vllm_version=vllm_version,
            progress=None if bar is None else bar.at,
        )
    if served_notes:
        import dataclasses

        result = dataclasses.replace(result, notes=tuple(served_notes) + result.notes)
    if fmt == "json":
        _emit_json(result.to_dict())
    else:
        head = "allowed" if result.allowed else "refused"
        kind = "lossy" if result.lossy else "lossless"
        _say(f"{result.config.path}: {head} ({result.method}, {kind}; config id {result.config_id})")
        ev = result.evidence
        if ev and ev.get("candidate"):
            c = ev["candidate"]
            how = ", ".join(ev["verified"]) or "not verified"
            _say(
                f"  evidence {ev['path']}: candidate {c['name']} {c['verdict']}, policy "
                f"{ev['policy']}, margin {ev['margin']}, created {ev['created_at']}; "
                f"verified by: {how}"
            )
        chain = (ev or {}).get("chain")
        if chain and chain.get("lossless"):
            leg = chain["lossless"]
            click.echo(
                f"  chain: against target-only at margin {chain['margin']:g}; lossless leg {leg['verdict']} "
                f"(margin {leg['margin']:g}, created {leg['created_at']}; verified by: "
                f"{', '.join(chain['verified']) or 'not verified'})"
            )
        for reason in result.reasons:
            _say(f"  refused: {reason}")
        for note in result.notes:
            _say(f"  note: {note}")
    from qualgate.formatting import append_step_summary

    append_step_summary(_check_markdown(result))
    if result.unbound:  # the evidence is not about this config's own baseline: a configuration error
        return ExitCode.DATA
    return ExitCode.OK if result.allowed else ExitCode.FAIL


def _served(config, server, server_log):
    """``(the config the server runs, notes)``; with CONFIG too, the server must run CONFIG
    (a :class:`DataError`, exit 3, naming what differs)."""
    from ..ci import read_server, read_serving_config, server_config

    served, notes = server_config(read_server(server), server_log)
    if config is not None:
        mine = read_serving_config(config)
        if mine.config_id() != served.config_id():
            from qualgate.evidence.binding import compare_sides, describe_side

            d = compare_sides(
                describe_side(mine.model, mine.speculative, mine.numerics, sampling={}),
                describe_side(served.model, served.speculative, served.numerics, sampling={}),
            )
            what = "; ".join(d.differences) or (
                f"speculative_config: {json.dumps(mine.speculative)} against {json.dumps(served.speculative)}"
            )
            raise DataError(
                f"the server at {server} runs config {served.config_id()}, not {config}'s {mine.config_id()} "
                f"(CONFIG first, the server second: {what})",
                file=str(config),
            )
        notes.append(f"the server runs {config}'s config {mine.config_id()}")
    return served, notes


def _say(line: str) -> None:
    """One line of the check's text output; a newline inside it (a file name) is escaped."""
    click.echo(inert(line.replace("\n", "\\n")))


# --------------------------------------------------------------------------- audit-log


def _describe_spec(spec) -> str:
    return " ".join(f"{k}={v}" for k, v in spec.items() if v is not None)


@click.command()
@click.argument("logfile", type=click.Path(dir_okay=False))
@click.option("--forbid-lossy", is_flag=True, help="Exit 1 when a lossy verifier appears.")
@click.option(
    "--expect",
    "expect",
    type=click.Path(dir_okay=False),
    help="The reviewed serving config: exit 1 when an echoed config id differs.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
def audit_log(logfile, forbid_lossy, expect, fmt):
    """Scan a vLLM server log for lossy verifiers, scheduler overrides and config echoes.

    Reports the one-time FLy warning, "Overriding max_num_active_seqs from A to B", the
    speculative config the server echoed (with its config id when the model is echoed too)
    and the vLLM version, each with its line number: for alerting on silent config drift.

    \b
    Exit codes: 0 OK, 1 lossy verifier with --forbid-lossy (or a config id other than
                --expect's), 2 usage error, 3 unreadable log or config, or no vLLM
                start-up line in the log.
    """
    from ..ci import audit_log as scan
    from ..ci import read_serving_config

    expected = read_serving_config(expect).config_id() if expect else None
    report = scan(logfile, expected_id=expected)
    if fmt == "json":
        _emit_json(report.to_dict())
    else:
        for e in report.events:
            where = _where(report.path, e.line)
            if e.kind == "version":
                click.echo(f"{where}: vLLM version {e.data['vllm_version']}")
            elif e.kind == "lossy_warning":
                click.echo(f"{where}: lossy verifier: {e.text}")
            elif e.kind == "scheduler_override":
                click.echo(f"{where}: scheduler override: max_num_active_seqs {e.data['from']} -> {e.data['to']}")
            else:
                cid = e.data.get("config_id")
                click.echo(
                    f"{where}: speculative config ({e.data['source']}): "
                    f"{_describe_spec(e.data['speculative_config'])}" + (f" -> {cid}" if cid else "")
                )
        parts = []
        if report.lossy_lines:
            parts.append("lossy verifier in use (lines " + ", ".join(map(str, report.lossy_lines)) + ")")
        else:
            parts.append("no lossy verifier seen")
        if report.config_ids:
            parts.append("config ids: " + ", ".join(report.config_ids))
        if expected:
            parts.append(
                f"expected {expected}: "
                + (
                    "drift at lines " + ", ".join(map(str, report.drift_lines))
                    if report.drift_lines
                    else "matches"
                    if report.config_ids
                    else "no config id echoed"
                )
            )
        click.echo(f"{report.path}: " + "; ".join(parts))
    if expected and not report.config_ids:
        click.echo(
            "note: the log echoes no model with a speculative config, so the config id cannot be confirmed", err=True
        )
    bad = (forbid_lossy and report.lossy_lines) or report.drift_lines
    return ExitCode.FAIL if bad else ExitCode.OK


# --------------------------------------------------------------------------- admission


@click.command()
@click.option("--budget", type=int, help="Tokens per scheduler step (max_num_batched_tokens).")
@click.option("--max-seqs", "--max-num-seqs", "max_seqs", type=int, help="vLLM's max_num_seqs.")
@click.option(
    "--method",
    type=click.Choice(["draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "ngram", "suffix"]),
    help="Speculative method: charge and lookahead as vLLM 0.33 computes them (with --k).",
)
@click.option("--k", "k", type=int, help="num_speculative_tokens (with --method).")
@click.option(
    "--parallel-drafting", is_flag=True, help="PARD (draft_model) or P-EAGLE (eagle/eagle3) parallel drafting."
)
@click.option("--fill-in", is_flag=True, help="A dspark drafter with sample_from_anchor: false (lookahead K + 1).")
@click.option(
    "--charge",
    type=int,
    help="Tokens charged per running decode request, for cases --method does not "
    "cover (draft_model: K + 2; eagle/eagle3/mtp/dflash/dspark: K + 1).",
)
@click.option(
    "--lookahead", type=int, help="num_lookahead_tokens of a dflash/dspark drafter: also caps at budget // N."
)
@click.option("--metrics", help="Prometheus text exposition: a file of scrapes or a URL.")
@click.option("--samples", type=int, default=10, show_default=True, help="Fetches of a --metrics URL.")
@click.option(
    "--interval", type=float, default=1.0, show_default=True, help="Seconds between fetches of a --metrics URL."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
def admission(
    budget, max_seqs, method, k, parallel_drafting, fill_in, charge, lookahead, metrics, samples, interval, fmt
):
    """Running requests a token budget admits, and whether measured ones plateau below it.

    With --budget, --max-seqs and --method/--k (or --charge, and --lookahead for a
    dflash/dspark drafter): min(max_seqs, budget // charge, budget // lookahead), saying
    which bound binds and printing vLLM's "Overriding max_num_active_seqs" line when vLLM
    logs it. With --metrics and --max-num-seqs: whether vllm:num_requests_running levels
    off below max_num_seqs while requests wait (vllm:num_requests_waiting > 0).

    \b
    Exit codes: 0 OK, 2 usage error, 3 unreadable metrics.
    """
    from ..ci import admission as compute
    from ..ci import admission_for, read_metrics, running_plateau

    if (method is None) != (k is None):
        raise click.UsageError("--method and --k go together")
    if method is not None and (charge is not None or lookahead is not None):
        raise click.UsageError("give --method/--k or --charge/--lookahead, not both")
    arith = budget is not None or charge is not None or lookahead is not None or method is not None
    if not arith and metrics is None:
        raise click.UsageError(
            "give --budget, --max-seqs and --method/--k (or --charge), or --metrics with --max-num-seqs"
        )
    missing = [n for n, v in (("--budget", budget), ("--charge or --method/--k", charge or k)) if arith and v is None]
    if max_seqs is None:
        missing.append("--max-seqs/--max-num-seqs")
    if missing:
        raise click.UsageError(f"missing {', '.join(missing)}")
    out = {}
    if arith and method is not None:
        try:
            out["admission"] = admission_for(
                method, k, budget, max_seqs, parallel_drafting=parallel_drafting, fill_in=fill_in
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    elif arith:
        out["admission"] = compute(budget, max_seqs, charge, lookahead=lookahead)
    if metrics is not None:
        scrapes = read_metrics(metrics, samples=samples, interval=interval)
        out["metrics"] = running_plateau(scrapes, max_seqs, source=metrics)
    if fmt == "json":
        _emit_json({k: v.to_dict() for k, v in out.items()})
        return ExitCode.OK
    from ..ci import render_admission

    click.echo(render_admission(out.get("admission"), out.get("metrics")))
    return ExitCode.OK
