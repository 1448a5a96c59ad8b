"""Options of ``rlaudit validate`` / ``run`` for rerunning a published protocol (``--suite``, ``--budgets``,
``--seeds``), and loading the protocol to run: a rerun protocol as written, or the rerun protocol built
from a published protocol's ``[rerun]`` section (:mod:`rlaudit.protocol.rerun`)."""

from __future__ import annotations

import click

from rlaudit.errors import InputError


def rerun_options(f):
    """Add ``--suite``, ``--budgets`` and ``--seeds`` to a command."""
    f = click.option("--seeds", "rerun_seeds", metavar="N", default=None,
                     help="Published protocol: number of seeds (default: its [rerun] seeds).")(f)
    f = click.option("--budgets", "rerun_budgets", metavar="B1,B2", default=None,
                     help="Published protocol: budgets in env steps, e.g. 100k,1M (default: the suite's).")(f)
    f = click.option("--suite", "rerun_suite", metavar="SUITE", default=None,
                     help="Published protocol: the [rerun] suite to rerun on (minatar, gymnasium, …).")(f)
    return f


def load_to_run(protocol_path: str, suite: str | None = None, budgets: str | None = None,
                seeds: str | None = None):
    """``(protocol, rerun section or None)``: the rerun protocol that ``run`` trains.

    Raises:
        InputError: bad options, a published protocol without ``[rerun]``, unknown suite, agents without a
            registered counterpart.
    """
    from rlaudit.protocol import load_protocol
    from rlaudit.protocol.rerun import parse_budgets, rerun_protocol, section_of

    protocol = load_protocol(protocol_path)
    given = [flag for flag, v in (("--suite", suite), ("--budgets", budgets), ("--seeds", seeds)) if v is not None]
    if not protocol.is_published:
        if given:
            raise InputError(f"{given[0]}: applies to a published protocol with a [rerun] section; "
                             f"{protocol_path} is a rerun protocol (edit its regimes, seeds or tasks instead)")
        return protocol, None
    n_seeds = None
    if seeds is not None:
        try:
            n_seeds = int(str(seeds).replace("_", ""))
        except ValueError:
            raise InputError(f"--seeds: {seeds!r} is not a number of seeds") from None
    # Options are checked before the protocol's section, so that a typo is named even on a protocol that
    # cannot be rerun.
    parsed = parse_budgets(budgets)
    section = section_of(protocol)
    return rerun_protocol(protocol, suite, parsed, n_seeds), section


def describe_rerun(protocol, section, echo=click.echo) -> None:
    """Print the agent mapping of a rerun built from a published protocol (nothing for a plain rerun)."""
    if section is not None:
        from rlaudit.protocol.rerun import describe

        describe(section, protocol, echo)
