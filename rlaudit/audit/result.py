"""The audit result: a plain data object, serialised as ``audit.json`` (schema: ``docs/audit-json.md``).

The report stage renders from this object (or the file) and never recomputes statistics.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.io import atomic_write_text, loads_nested

SCHEMA_VERSION = 2
"""Version of ``audit.json``. History: 1 — first version (rlaudit 0.1.0); 2 — calibrated default
(``interval_method`` ``expanded``, ``correction`` ``maxt``), p-values ``(2t + 1) / (reps + 1)``, tested
changes between budgets (``changes``; inversion kinds ``changed`` and ``decided_once`` replace ``lost``,
``finding`` and ``change_tested`` per inversion), ``runs_needed_range``, ``settings.n_tests`` and
``settings.min_effect``, ``data.paired_budgets``."""


# Budgets for humans: one definition for the terminal summary and every report format.
UNIT_NAMES = {"env_steps": "environment steps", "agent_steps": "agent steps", "frames": "frames",
              "iterations": "iterations", "samples": "samples", "episodes": "episodes"}


def format_budget(budget: int | float, unit: str | None = None) -> str:
    """Format a budget for humans: ``100000 -> "100k"``, ``200000000 -> "200M"``, ``1500000 -> "1.5M"``.

    Args:
        budget: the budget in its unit (integer in ``audit.json``).
        unit: budget unit (``"frames"``); appended in words when given.
    """
    value = float(budget)
    text = f"{value:.0f}" if value == round(value) else f"{value:g}"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            v = value / scale
            text = (f"{v:.0f}" if v == round(v) else f"{v:.3g}") + suffix
            break
    return f"{text} {unit_name(unit)}" if unit else text


def unit_name(unit: str | None) -> str:
    """Budget unit in words (``env_steps -> "environment steps"``)."""
    if not unit:
        return ""
    return UNIT_NAMES.get(unit, unit.replace("_", " "))


@dataclass
class AuditResult:
    """Everything an audit found; field names and meanings follow ``docs/audit-json.md``.

    Entries of the list fields are plain dicts with the keys documented there, so the object round-trips
    through JSON unchanged (``AuditResult.from_dict(r.to_dict()) == r``).
    """

    rlaudit_version: str
    """Version of rlaudit that computed the result."""
    created: str
    """UTC time of the audit, ISO 8601."""
    source: dict
    """``{path, protocol, title, citation}`` of the audited input."""
    data: dict
    """What was audited: algorithms, tasks, budgets, budget unit, score kind, normalisation, design."""
    settings: dict
    """:class:`~rlaudit.audit.settings.AuditSettings` as applied, plus the error-control description."""
    budgets: list[int]
    """Audited budgets, ascending (in ``data["budget_unit"]``)."""
    aggregates: list[dict] = field(default_factory=list)
    """``{budget, algorithm, metric, point, lo, hi}`` for every metric of the settings."""
    orderings: list[dict] = field(default_factory=list)
    """Pairwise decisions at each budget under the deciding metric."""
    changes: list[dict] = field(default_factory=list)
    """Change tests of each pair's gap between each budget and the last (error-controlled)."""
    inversions: list[dict] = field(default_factory=list)
    """Non-stable changes of an ordering between two budgets (findings and notes)."""
    crossovers: list[dict] = field(default_factory=list)
    """Budget intervals in which a decided ordering switches to the opposite decided ordering."""
    metric_sensitivity: list[dict] = field(default_factory=list)
    """Pairs and budgets where the metrics' decisions disagree."""
    rank_distribution: list[dict] = field(default_factory=list)
    """``{budget, algorithm, probs}``: bootstrap probability of each rank (rank 1 = best)."""
    profiles: list[dict] = field(default_factory=list)
    """Performance profiles with bands, per budget and algorithm."""
    per_task: list[dict] = field(default_factory=list)
    """Per-task mean raw score with a bootstrap interval."""
    claims: list[dict] = field(default_factory=list)
    """Claim verdicts."""
    checklist: list[dict] = field(default_factory=list)
    """Checklist findings on the data."""
    learning: dict = field(default_factory=dict)
    """Which (task, budget) cells any algorithm has learned, against a random-policy reference
    (:mod:`rlaudit.audit.learning`); ``{}`` when the scores have none."""
    schema_version: int = SCHEMA_VERSION
    """``audit.json`` schema version."""

    def to_dict(self) -> dict:
        """The ``audit.json`` document (JSON-serialisable, keys in the documented order)."""
        d = {"schema_version": self.schema_version}
        for f in fields(self):
            if f.name != "schema_version":
                d[f.name] = getattr(self, f.name)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "audit.json") -> AuditResult:
        """Rebuild from an ``audit.json`` document.

        Raises:
            InputError: when the schema version is unknown or a required key is missing.
        """
        if not isinstance(d, dict):
            raise InputError(f"{where}: not an audit result (expected a JSON object)")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputError(f"{where}: audit.json schema version {version!r} is not supported "
                             f"(this rlaudit reads version {SCHEMA_VERSION})")
        names = [f.name for f in fields(cls)]
        required = ["rlaudit_version", "created", "source", "data", "settings", "budgets"]
        missing = [k for k in required if k not in d]
        if missing:
            raise InputError(f"{where}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        return cls(**{k: d[k] for k in names if k in d})

    def to_json(self) -> str:
        """``audit.json`` text (indented, UTF-8 safe; a non-finite float, which JSON cannot hold, is ``null``)."""
        return document_json(self.to_dict())

    def write_json(self, path: str | os.PathLike) -> Path:
        """Write ``audit.json`` atomically (nothing is left behind on failure); return the path."""
        path = Path(path)
        atomic_write_text(path, self.to_json())
        return path

    @classmethod
    def read_json(cls, path: str | os.PathLike) -> AuditResult:
        """Read an ``audit.json`` file."""
        path = Path(path)
        try:
            doc = loads_nested(json.loads, path.read_text(encoding="utf-8-sig"), str(path))
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
        return cls.from_dict(doc, str(path))

    def ordering(self, budget: int, a: str, b: str) -> dict | None:
        """The ``orderings`` entry of the pair at ``budget`` (either order of ``a``, ``b``), or ``None``."""
        for o in self.orderings:
            if o["budget"] == budget and {o["a"], o["b"]} == {a, b}:
                return o
        return None


def document_json(doc: dict) -> str:
    """The ``audit.json`` text of a document (``AuditResult.to_dict()``, possibly with optional keys such as
    ``published_agreement``): indented, UTF-8 safe, every NaN or infinite float (an unbounded interval) as
    ``null``, which is all JSON can hold. One serializer for every writer of the document."""
    return json.dumps(finite_document(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def finite_document(obj):
    """``obj`` with every NaN or infinite float replaced by ``None`` (recursively through dicts and lists)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_document(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_document(v) for v in obj]
    return obj
