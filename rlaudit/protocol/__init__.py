"""Protocol stage: protocol files -> frozen typed objects (:mod:`.schema`), checks (:mod:`.loader`), and
the plan of runs (:mod:`.plan`). Reference of every field: ``docs/protocol.md``."""

from __future__ import annotations

import os
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.protocol.loader import check_runnable, load_protocol, parse_protocol
from rlaudit.protocol.plan import Plan, parse_only, plan
from rlaudit.protocol.schema import SCHEMA_VERSION, Protocol

__all__ = ["SCHEMA_VERSION", "Plan", "Protocol", "check_runnable", "default_store", "load_protocol", "parse_only",
           "parse_protocol", "plan", "source_from_protocol"]


def default_store(protocol: Protocol) -> Path:
    """Where ``rlaudit run`` puts a protocol's store unless ``--store`` is given: ``sweeps/<name>/store.sqlite``."""
    return Path("sweeps") / protocol.name / "store.sqlite"


def source_from_protocol(path: str | os.PathLike, data_dir: str | os.PathLike | None = None):
    """A protocol as an audit :class:`~rlaudit.sources.Source`.

    A published protocol loads its ``[data]`` files through the importers; a rerun protocol reads its
    default store (``sweeps/<name>/store.sqlite``, relative to the working directory).
    """
    from dataclasses import replace

    protocol = load_protocol(path)
    if protocol.is_published:
        from rlaudit.importers import load_data_section
        from rlaudit.sources import Source

        table = load_data_section(protocol.data, f"{protocol.path}: data", Path(data_dir) if data_dir else None)
        return Source(table=table, path=str(path), protocol=protocol.name, title=protocol.title or None,
                      citation=protocol.citation or None, normalization=protocol.normalization,
                      audit=protocol.audit.to_dict(), claims=protocol.claims)
    store = default_store(protocol)
    if not store.exists():
        raise InputError(f"{path}: a rerun protocol with no store at {store}; run 'rlaudit run {path}' first, "
                         f"or audit the store file directly")
    from rlaudit.store import open_readonly, source_from_store

    con = open_readonly(store)
    try:
        row = con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()
    finally:
        con.close()
    if row is None or row[0] != protocol.hash:
        raise InputError(f"{path}: the store {store} holds runs of another protocol (hash "
                         f"{row[0][:12] if row else '?'}, this file {protocol.hash[:12]}); audit the store file "
                         f"directly or rerun with --new-store")
    source = source_from_store(store)
    # The protocol file the user named is authoritative for claims and audit settings.
    return replace(source, path=str(path), claims=protocol.claims, audit=protocol.audit.to_dict(),
                   normalization=protocol.normalization, title=protocol.title or None,
                   citation=protocol.citation or None)
