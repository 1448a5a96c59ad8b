"""One entry point for every input a user points ``audit`` or ``report`` at.

A *source* is a tidy score file (``.csv``/``.parquet``), a store (``.sqlite``/``.db``), a protocol
(``.toml``: its ``[data]`` section for a published comparison, or its store for a rerun), or a path in a
published format (``--format``, sniffed when unambiguous).

This is the one module that assembles inputs: it reads tables through the stage that owns each kind
(:mod:`rlaudit.scores`, :mod:`rlaudit.store`, :mod:`rlaudit.protocol`, :mod:`rlaudit.importers`) and adds
what a protocol says about auditing them. Those stages never build a :class:`Source` and never import this
module, so dependencies run one way. They are imported on use: ``rlaudit audit scores.csv`` loads no SQLite
or importer code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable, read_scores

SCORE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".tsv", ".tsv.gz")
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
    settings: tuple[dict, ...] = ()
    """The protocol's declared sources and deviations (:func:`rlaudit.protocol.provenance.settings_rows`)."""
    suites: dict = field(default_factory=dict)
    """Task -> suite (``minatar``, ``atari``, …) when the protocol names them."""
    fidelity: tuple[str, ...] = ()
    """One line per rerun algorithm whose fidelity to an independent implementation is not recorded as
    equivalent (:func:`rlaudit.fidelity.status.fidelity_warnings`)."""
    compute: dict = field(default_factory=dict)
    """For a store: what training its finished runs took (:func:`rlaudit.store.compute_used`)."""


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
        return source_from_store(p)
    if fmt is None and suffix == ".toml":
        return source_from_protocol(p, data_dir=data_dir)
    from rlaudit.importers import import_path

    return Source(import_path(fmt, [p], **(options or {})), str(p))


def _protocol_fields(protocol) -> dict:
    """What a protocol says about auditing its scores, as :class:`Source` fields."""
    from rlaudit.protocol.provenance import settings_rows

    return {"protocol": protocol.name, "title": protocol.title or None, "citation": protocol.citation or None,
            "normalization": protocol.normalization, "audit": protocol.audit.to_dict(), "claims": protocol.claims,
            "settings": tuple(settings_rows(protocol)), "suites": {t.id: t.suite for t in protocol.tasks},
            "fidelity": fidelity_lines(protocol)}


def fidelity_lines(protocol) -> tuple[str, ...]:
    """The report's fidelity lines for a rerun protocol's algorithms, each named by its label (and registry name
    when they differ); ``()`` for a published protocol."""
    from rlaudit.fidelity.status import fidelity_warnings

    out = []
    for a in protocol.algorithms:
        for line in fidelity_warnings([a.name], settings={a.name: (dict(a.hyperparams), dict(a.policy_kwargs))}):
            out.append(line if a.label == a.name else f"{a.label} ({a.name})" + line[len(a.name):])
    return tuple(out)


def source_from_store(path: str | os.PathLike, eval_protocol: str = "final") -> Source:
    """A store as a :class:`Source`: its finished runs plus what its recorded protocol says.

    Args:
        path: the store.
        eval_protocol: ``final`` or ``max`` (see :func:`rlaudit.store.export_table`).
    """
    from rlaudit.store import compute_used, export_table

    path = Path(path)
    table = export_table(path, eval_protocol)
    protocol = store_protocol(path)
    labels = tuple({"budget": r.budget, "regime": r.name, "regime_kind": r.regime_kind} for r in protocol.regimes)
    return Source(table=table, path=str(path), budget_labels=labels, compute=compute_used(path),
                  **_protocol_fields(protocol))


def store_protocol(path: str | os.PathLike):
    """The protocol of a store: the file it was made from when that file is still there with the store's hash,
    else the text recorded in the store.

    Claims, ``[audit]`` and ``[normalization]`` are not part of the protocol hash: a file with the same hash
    describes the same runs, and its (possibly corrected) claims are what the user audits against now.
    """
    from rlaudit.protocol import load_protocol, parse_protocol
    from rlaudit.store import stored_protocol_hash, stored_protocol_text

    text, original = stored_protocol_text(path)
    stored_hash = stored_protocol_hash(path)
    # a relative path is the one `rlaudit run` was given: from the current folder, or from a folder above the
    # store (a sweep committed in a repository, read from elsewhere)
    candidates = [Path(original)]
    if not Path(original).is_absolute():
        candidates += [parent / original for parent in Path(path).resolve().parents]
    for candidate in candidates if stored_hash and original.endswith(".toml") else ():
        if not candidate.is_file():
            continue
        try:
            current = load_protocol(candidate)
        except InputError:
            continue
        if current.hash == stored_hash:
            return current
    return parse_protocol(text, where=f"{path} (protocol {original})", base_dir=Path(original).parent)


def source_from_protocol(path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Source:
    """A protocol as a :class:`Source`.

    A published protocol loads its ``[data]`` files through the importers; a rerun protocol reads its
    default store (``sweeps/<name>/store.sqlite``, relative to the working directory). The protocol file
    the user named is authoritative for claims and audit settings.
    """
    from dataclasses import replace

    from rlaudit.protocol import default_store, load_protocol

    protocol = load_protocol(path)
    if protocol.is_published:
        from rlaudit.importers.data_section import load_data_section

        table = load_data_section(protocol.data, f"{protocol.path}: data", Path(data_dir) if data_dir else None)
        return Source(table=table, path=str(path), **_protocol_fields(protocol))
    store = default_store(protocol)
    if not store.exists():
        raise InputError(f"{path}: a rerun protocol with no store at {store}; run 'rlaudit run {path}' first, "
                         f"or audit the store file directly")
    from rlaudit.store import stored_protocol_hash

    stored = stored_protocol_hash(store)
    if stored != protocol.hash:
        raise InputError(f"{path}: the store {store} holds runs of another protocol (hash "
                         f"{stored[:12] if stored else '?'}, this file {protocol.hash[:12]}); audit the store file "
                         f"directly or rerun with --new-store")
    source = source_from_store(store)
    return replace(source, path=str(path), **_protocol_fields(protocol))
