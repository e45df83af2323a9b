"""The ``qualgate`` command line: a thin layer over the library.

Each command lives in its own module and is imported only when it runs, so that
``qualgate power`` never imports pandas or torch. Exit codes are decided here, once,
for every command (see :class:`qualgate.errors.ExitCode`):

- a command returns an ``int`` (or an ``ExitCode``) to set the exit code;
- :class:`qualgate.errors.DataError` becomes exit 3 with its message on stderr;
- any other ``ValueError`` from the library (an invalid argument value) becomes exit 2;
- click's own usage errors exit 2.

A gate's verdicts map to its exit code in one function, :func:`qualgate.evidence.gate_report.decide_exit`.
"""

from __future__ import annotations

import importlib

import click

from ..errors import DataError, ExitCode

__all__ = ["FiniteFloatRange", "Fraction", "cli", "main"]

# command name -> "module:attribute"
_COMMANDS = {
    "power": "qualgate.cli.power:power",
    "gate": "qualgate.cli.gate:gate",
    "calibrate": "qualgate.cli.gate:calibrate",
    "suites": "qualgate.cli.suites:suites",
    "run": "qualgate.cli.run:run",
    "report": "qualgate.cli.run:report",
    "merge": "qualgate.cli.run:merge",
    "demo": "qualgate.cli.demo:demo",
    "sweep": "qualgate.cli.sweep:sweep",
    "reanalyze": "qualgate.cli.reanalyze:reanalyze",
    "lint": "qualgate.cli.ci:lint",
    "check": "qualgate.cli.ci:check",
    "audit-log": "qualgate.cli.ci:audit_log",
    "admission": "qualgate.cli.ci:admission",
    "import": "qualgate.cli.importing:import_",
    "flips": "qualgate.cli.importing:flips",
    "prompt-hash": "qualgate.cli.importing:prompt_hash",
    "judge": "qualgate.cli.judge:judge",
}


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` (which passes every range comparison)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


class Fraction(FiniteFloatRange):
    """A fraction in (0, 1); a value in [1, 100) is refused with the fraction it may have
    meant (``--margin 2`` -> ``0.02``: margins are fractions, not points)."""

    def __init__(self):
        super().__init__(0, 1, min_open=True, max_open=True)

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            try:
                number = float(value)
            except (TypeError, ValueError):  # not a number at all: click's own message
                raise exc from None
            if 1 <= number < 100:
                self.fail(
                    f"{value} is not in (0, 1): give a fraction, not percentage points "
                    f"({number:g} points is {number / 100:g}: did you mean {number / 100:g}?)",
                    param,
                    ctx,
                )
            raise


class _DataErrorExit(click.ClickException):
    exit_code = int(ExitCode.DATA)

    def format_message(self) -> str:
        from qualgate.formatting import inert

        return inert(f"invalid data: {self.message}")


class _ValueErrorExit(click.ClickException):
    exit_code = int(ExitCode.USAGE)

    def format_message(self) -> str:
        from qualgate.formatting import inert

        return inert(f"invalid value: {self.message}")


class _Group(click.Group):
    def list_commands(self, ctx):
        return sorted(_COMMANDS)

    def get_command(self, ctx, name):
        target = _COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx):
        try:
            rv = super().invoke(ctx)
        except DataError as exc:
            raise _DataErrorExit(str(exc)) from exc
        except click.ClickException:
            raise
        except ValueError as exc:
            raise _ValueErrorExit(str(exc)) from exc
        if isinstance(rv, int) and rv:
            ctx.exit(int(rv))
        return rv


def _version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from qualgate.run.code import code_identity, short

    click.echo(f"qualgate {short(code_identity(files=False))}")
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version and the content hash of this qualgate's source (which tells commits apart), and exit.",
)
def cli():
    """Decide, with paired statistics, whether an inference configuration loses quality.

    \b
    Exit codes: 0 success / PASS, 1 FAIL or findings, 2 usage error,
                3 invalid data or configuration, 4 INCONCLUSIVE.
    """
    from ..formatting import show_engine_warnings

    show_engine_warnings()


def main(argv=None):
    """Console-script entry point."""
    cli.main(args=argv, prog_name="qualgate")
