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
from rlaudit.errors import RlauditError

# command name -> "module:attr"; each module is owned by one pipeline stage.
COMMANDS: dict[str, str] = {
    "audit": "rlaudit.cli.audit_cmd:audit",
    "import": "rlaudit.cli.import_cmd:import_scores",
    "fetch": "rlaudit.cli.import_cmd:fetch",
    "validate": "rlaudit.cli.run_cmd:validate",
    "run": "rlaudit.cli.run_cmd:run",
    "status": "rlaudit.cli.run_cmd:status",
    "export": "rlaudit.cli.run_cmd:export",
    "algorithms": "rlaudit.cli.algorithms_cmd:algorithms",
    "report": "rlaudit.cli.report_cmd:report",
}


def fail(exc: RlauditError) -> None:
    """Print ``error: <message>`` on stderr and exit with the error's code."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use and whose errors are one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

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
