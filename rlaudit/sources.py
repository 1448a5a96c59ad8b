"""One entry point for every input a user points ``audit`` or ``report`` at.

A *source* is a tidy score file (``.csv``/``.parquet``), a store (``.sqlite``/``.db``), a protocol
(``.toml``: its ``[data]`` section for a published comparison, or its store for a rerun), or a path in a
published format (``--format``, sniffed when unambiguous). Each kind is delegated to the stage that owns
it; this module only dispatches, so it imports those stages lazily.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable, read_scores

SCORE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".tsv")
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


@dataclass(frozen=True)
class Source:
    """A loaded input: the score table plus what a protocol says about auditing it."""

    table: ScoreTable
    """The tidy score table."""
    path: str
    """What the user named."""
    protocol: str | None = None
    """Protocol name when the source is (or came from) a protocol."""
    title: str | None = None
    """Human title of the comparison, when known."""
    citation: str | None = None
    """Citation of the original work, when known."""
    normalization: str | dict | None = None
    """Normalisation the protocol asks for (``None``: not specified)."""
    audit: dict = field(default_factory=dict)
    """The protocol's ``[audit]`` section (metric, budgets of interest, …)."""
    claims: tuple[dict, ...] = ()
    """Raw claim tables from the protocol, each with ``where`` naming the file."""
    budget_labels: tuple[dict, ...] = ()
    """``{budget, regime, regime_kind}`` for reruns (nested anytime reading vs separate run)."""


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in SCORE_SUFFIXES + STORE_SUFFIXES + (".toml",):
        if name.endswith(s):
            return s
    return path.suffix.lower()


def load_source(path: str | os.PathLike, fmt: str | None = None, data_dir: str | os.PathLike | None = None,
                options: dict | None = None) -> Source:
    """Load any supported input as a :class:`Source`.

    Args:
        path: score file, store, protocol, or published-format file/folder.
        fmt: importer name (``dopamine``, ``rliable``, ``zoo``, ``curves``, ``tidy``, ``wide``); ``None``
            decides by suffix, then by sniffing.
        data_dir: for a published protocol, the folder holding its files (else the fetch cache).
        options: importer options (e.g. ``{"budgets": [...]}`` for curves).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    suffix = _suffix(p)
    if fmt is None and suffix in SCORE_SUFFIXES:
        return Source(read_scores(p), str(p))
    if fmt is None and suffix in STORE_SUFFIXES:
        from rlaudit.store import source_from_store

        return source_from_store(p)
    if fmt is None and suffix == ".toml":
        from rlaudit.protocol import source_from_protocol

        return source_from_protocol(p, data_dir=data_dir)
    from rlaudit.importers import import_source

    return import_source(p, fmt=fmt, options=options or {})
