"""Protocol stage: protocol files -> frozen typed objects (:mod:`.schema`), checks (:mod:`.loader`), and
the plan of runs (:mod:`.plan`). Reference of every field: ``docs/protocol.md``."""

from __future__ import annotations

from pathlib import Path

from rlaudit.protocol.loader import check_runnable, load_protocol, parse_protocol
from rlaudit.protocol.plan import Plan, parse_only, plan
from rlaudit.protocol.schema import SCHEMA_VERSION, Protocol

__all__ = ["SCHEMA_VERSION", "Plan", "Protocol", "check_runnable", "default_store", "load_protocol", "parse_only",
           "parse_protocol", "plan"]


def default_store(protocol: Protocol) -> Path:
    """Where ``rlaudit run`` puts a protocol's store unless ``--store`` is given: ``sweeps/<name>/store.sqlite``."""
    return Path("sweeps") / protocol.name / "store.sqlite"
