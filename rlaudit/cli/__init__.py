"""The ``rlaudit`` command line: a thin layer that parses options and calls the Python API.

Each command lives in its own module and is imported only when used, so ``rlaudit audit`` never pays for
torch or Ray. Every :class:`~rlaudit.errors.RlauditError` becomes one line on stderr and its exit code
(2 for bad input, 1 for failed runs), with no traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from rlaudit import __version__
from rlaudit.errors import InputError, RlauditError, did_you_mean

# command name -> ("module:attr", one-line help). Each module is owned by one pipeline stage; the help
# text lives here so that `rlaudit --help` imports none of them (torch, Ray and scipy load on use only).
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("rlaudit.cli.run_cmd:validate", "Check a protocol without training and print its plan."),
    "run": ("rlaudit.cli.run_cmd:run", "Train and evaluate a protocol's runs into a resumable store."),
    "status": ("rlaudit.cli.run_cmd:status", "Show done / running / failed / pending runs of a store."),
    "export": ("rlaudit.cli.run_cmd:export", "Export a store as a tidy score table (CSV or Parquet)."),
    "import": ("rlaudit.cli.import_cmd:import_scores", "Convert published results into a tidy score table."),
    "fetch": ("rlaudit.cli.import_cmd:fetch", "Download and verify a published protocol's data files."),
    "audit": ("rlaudit.cli.audit_cmd:audit", "Audit scores: aggregates, orderings, inversions, claims."),
    "report": ("rlaudit.cli.report_cmd:report", "Write an audit report (HTML, Markdown, LaTeX, JSON)."),
    "algorithms": ("rlaudit.cli.algorithms_cmd:algorithms", "List registered algorithms or show one."),
    "fidelity": ("rlaudit.cli.fidelity_cmd:fidelity", "Run a built-in against an independent implementation."),
}


def fail(exc: RlauditError) -> None:
    """Print ``error: <message>`` on stderr and exit with the error's code."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use and whose errors are one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and name not in COMMANDS and not name.startswith("-"):  # one line, with the closest command
            fail(InputError(f"no such command {name!r}{did_you_mean(name, COMMANDS)}; commands: "
                            f"{', '.join(COMMANDS)} (rlaudit --help)"))
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_) for name, (_, help_) in COMMANDS.items()])

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except RlauditError as exc:
            fail(exc)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="rlaudit")
def main() -> None:
    """Audit deep-RL comparisons across training budgets."""
