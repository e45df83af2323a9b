"""``qualgate suites list`` and ``qualgate suites show NAME``."""

from __future__ import annotations

import json

import click

from ..errors import ExitCode

_FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)


@click.group()
def suites():
    """List the built-in benchmark suites, or render a suite's prompts and gold answers."""


def _source_text(source: dict) -> str:
    if "traffic" in source:
        files = source["traffic"] if isinstance(source["traffic"], list) else [source["traffic"]]
        text = "traffic " + ", ".join(files)
        if "lines" in source:  # a loaded suite: what was read
            sample = source["sample"]
            text += (
                f" ({source['lines']} lines, {source['duplicates']} duplicates removed, "
                f"{source['distinct']} distinct requests"
                + (f", a sample of {sample['n']} with seed {sample['seed']}" if sample else "")
                + f"; sampling: {source['sampling']})"
            )
        return text
    if "generator" in source:
        params = ", ".join(f"{k}={v!r}" for k, v in (source.get("params") or {}).items())
        return f"generator {source['generator']}({params})"
    if "data_files" in source:
        return "local " + ", ".join(source["data_files"])
    where = "/".join(p for p in (source.get("config"), source["split"]) if p)
    return f"{source['dataset']} [{where}] @ {source['revision']}"


def _value(v) -> str:
    """A meta or sampling value as its file writes it: a string as is, anything else as JSON
    (``["\\n"]``, ``null``, ``true``), never a Python repr."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


@suites.command("list")
@_FORMAT
def list_(fmt):
    """List the built-in suites: name, version, source, deciding extraction."""
    from ..suites import list_suites, read_spec, suite_path

    specs = [read_spec(suite_path(name)) for name in list_suites()]
    if fmt == "json":
        out = [
            {
                "name": s.name,
                "version": s.version,
                "source": s.source,
                "decides": s.decides,
                "description": s.description,
                "path": s.path,
            }
            for s in specs
        ]
        click.echo(json.dumps(out, indent=2))
        return ExitCode.OK
    rows = [("NAME", "VERSION", "DECIDES", "SOURCE")]
    rows += [(s.name, str(s.version), s.decides, _source_text(s.source)) for s in specs]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    return ExitCode.OK


@suites.command("show")
@click.argument("name")
@click.option(
    "--limit", type=click.IntRange(min=1), default=3, show_default=True, help="Number of questions to render."
)
@click.option(
    "--data-file",
    "data_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Local JSONL/Parquet/CSV copy of the data (repeatable); default: the Hub.",
)
@click.option("--revision", default=None, help="Hub revision instead of the pinned one.")
@_FORMAT
def show(name, limit, data_files, revision, fmt):
    """Render the prompts and gold answers of the first questions of suite NAME.

    NAME is a built-in suite (see `qualgate suites list`) or the path of a suite YAML file.
    """
    import datasets

    from ..suites import load_suite

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    suite = load_suite(name, data_files=list(data_files) or None, revision=revision, limit=limit)
    if fmt == "json":
        click.echo(json.dumps(suite.to_dict(), indent=2, ensure_ascii=False))
        return ExitCode.OK
    gen = ", ".join(f"{k}={v}" for k, v in suite.generation.items())
    click.echo(f"{suite.name} (version {suite.version}): {suite.description}")
    click.echo(f"source: {_source_text(suite.source)}")
    click.echo(f"decides: {suite.decides}; generation: {gen}")
    for q in suite.questions:
        click.echo("")
        click.echo(f"=== {q.id}  (prompt sha256 {q.prompt_hash[:16]})")
        for m in q.prompt:
            click.echo(f"[{m['role']}]")
            click.echo(m["content"])
            for call in m.get("tool_calls") or ():
                click.echo(f"(tool call {call['id']}: {json.dumps(call['function'], ensure_ascii=False)})")
        if q.meta:
            click.echo("meta: " + ", ".join(f"{k}={_value(v)}" for k, v in q.meta.items()))
        if q.sampling:
            click.echo("sampling: " + ", ".join(f"{k}={_value(v)}" for k, v in q.sampling.items()))
        click.echo(f"gold: {'(none: graded without gold)' if q.gold is None else q.gold}")
    return ExitCode.OK
