"""Exceptions that reach the user as one clear line.

Every problem caused by the user's input (a file, a field, a flag) raises :class:`InputError` with a
message that names *what* and *where* (file, row, column, field). The CLI prints ``error: <message>``
and exits with status 2, without a traceback and without writing partial output.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable


class RlauditError(Exception):
    """Base class for errors rlaudit reports to the user as a single line."""

    exit_code = 2


class InputError(RlauditError):
    """Bad user input: a file, a field or an option. Exit status 2."""

    exit_code = 2


class RunFailed(RlauditError):
    """A sweep finished but some runs failed. Exit status 1."""

    exit_code = 1


class WriteFailed(RlauditError):
    """A store or an output file could not be written (disk full, I/O error). Exit status 1.

    Nothing partial is left: a store keeps every transaction committed before, an output file is not created.
    """

    exit_code = 1


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest candidates, or ``""`` when none is close."""
    cands = [str(c) for c in candidates]
    close = difflib.get_close_matches(str(name), cands, n=n, cutoff=0.6)
    if not close:
        lower = {c.lower(): c for c in cands}
        close = [lower[m] for m in difflib.get_close_matches(str(name).lower(), list(lower), n=n, cutoff=0.6)]
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def format_rows(rows: Iterable[int], limit: int = 5) -> str:
    """Format 1-based row/line numbers as ``"2, 5, 9 and 3 more"``."""
    rows = list(rows)
    head = ", ".join(str(r) for r in rows[:limit])
    return head + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse's usage errors as one line (``error: ...``), exit status 2, like every other bad input
    (for the scripts under ``scripts/``; the CLI parses with click)."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\n")
