"""The catalogue of audited published comparisons: ``reports/index.html`` and ``reports/README.md``.

Built from the protocols (``protocols/published/*.toml``) and the ``audit.json`` of each one's report
(``reports/<name>/audit.json``): one :class:`Entry` per protocol, data objects first
(:func:`build_catalogue`), rendered second (:func:`write_catalogue`, Jinja2 templates shipped as package data).
A protocol whose data is missing (:func:`missing_data`) or whose audit failed is listed with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlaudit.audit.claims import claim_status
from rlaudit.audit.result import format_budget
from rlaudit.errors import InputError
from rlaudit.io import atomic_write_text

CLAIM_STATUSES: tuple[str, ...] = ("holds", "reversed", "inconclusive")
"""Overall claim verdicts counted per comparison (:func:`rlaudit.audit.claims.claim_status`)."""


@dataclass(frozen=True)
class Inversion:
    """Confirmed ranking inversions of one pair: ``winner_low`` decided above ``winner_high`` at each of
    ``budgets_low`` and below it at each of ``budgets_high`` (every low budget is below every high one it is
    paired with in the audit's ``inversions``)."""

    winner_low: str
    winner_high: str
    budgets_low: tuple[str, ...]
    budgets_high: tuple[str, ...]


@dataclass(frozen=True)
class ClaimRow:
    """One published claim of a comparison and its verdict over the audited budgets."""

    text: str
    source: str
    status: str
    """``holds`` (at every audited budget), ``reversed`` (at some budget) or ``inconclusive``."""
    per_budget: str
    """``"10M: holds, 50M: inconclusive"``."""


@dataclass(frozen=True)
class Entry:
    """One published comparison in the catalogue."""

    name: str
    title: str
    protocol: str
    """Protocol file, relative to the repository."""
    report: str | None = None
    """Link to the report, relative to the catalogue folder (``None``: not audited)."""
    reason: str = ""
    """Why the comparison is not audited (data missing, audit failed), or a remark on a kept report."""
    algorithms: tuple[str, ...] = ()
    """Algorithms ordered by the audit."""
    single_run: tuple[str, ...] = ()
    """Algorithms with one run per task: shown in the report, not ordered."""
    n_tasks: int = 0
    runs_per_task: str = ""
    """``"DQN 5; MuZero 1"``: the range of runs per task of each algorithm."""
    budgets: tuple[str, ...] = ()
    n_orderings: int = 0
    n_decided: int = 0
    decided: tuple[str, ...] = ()
    """``"A > B at 10M"`` for every decided ordering."""
    inversions: tuple[Inversion, ...] = ()
    claims: tuple[ClaimRow, ...] = ()

    def claim_counts(self) -> dict[str, int]:
        """Number of claims per overall status."""
        return {s: sum(c.status == s for c in self.claims) for s in CLAIM_STATUSES}


@dataclass(frozen=True)
class Catalogue:
    """Every published comparison, with the headline counts."""

    entries: tuple[Entry, ...]
    n_with_inversion: int = 0
    n_audited: int = 0
    n_claims_not_holding: int = 0
    n_claims: int = 0

    @property
    def headline(self) -> str:
        """``"N of M published comparisons have a confirmed ranking inversion across budgets; K of L published
        claims do not hold at every audited budget"``."""
        return (f"{self.n_with_inversion} of {self.n_audited} published comparisons have a confirmed ranking "
                f"inversion across budgets; {self.n_claims_not_holding} of {self.n_claims} published claims do not "
                f"hold at every audited budget")


def missing_data(protocol_path: Path, data_dir: Path) -> str:
    """Why ``protocol_path`` cannot be audited from ``data_dir`` (files listed in ``[data]`` absent), else ``""``."""
    import tomllib

    doc = tomllib.loads(Path(protocol_path).read_text(encoding="utf-8"))
    files = [f.get("path", "") for f in (doc.get("data") or {}).get("files", [])]
    absent = [f for f in files if not (Path(data_dir) / f).is_file()]
    if not absent:
        return ""
    return (f"data missing: {len(absent)} of {len(files)} files listed in [data] are not in {data_dir} "
            f"(first: {absent[0]}); run `rlaudit fetch {protocol_path}`")


def entry_from_audit(name: str, title: str, protocol: str, audit: Mapping, report: str, reason: str = "") -> Entry:
    """An :class:`Entry` from one ``audit.json`` document (``report``: link to the report folder)."""
    data = audit.get("data", {})
    unit, fmt = data.get("budget_unit"), format_budget
    algorithms = tuple(data.get("algorithms", ()))
    single = next((f for f in audit.get("checklist", ()) if f.get("id") == "single-run"), None)
    single_run = tuple(sorted((single or {}).get("details", {}).get("algorithms", {})))
    counts: dict[str, list[int]] = {}
    for row in data.get("design", ()):
        counts.setdefault(row["algorithm"], []).append(int(row["n_runs"]))
    runs = "; ".join(f"{a} {min(c)}" + (f"–{max(c)}" if max(c) != min(c) else "") for a, c in counts.items())
    if single_run:
        runs += "; " + "; ".join(f"{a} 1" for a in single_run)
    metric = audit.get("settings", {}).get("metric")
    orderings = [o for o in audit.get("orderings", ()) if o.get("metric") == metric]
    decided = []
    for o in orderings:
        if o["decision"] in ("a>b", "b>a"):
            hi, lo = (o["a"], o["b"]) if o["decision"] == "a>b" else (o["b"], o["a"])
            decided.append(f"{hi} > {lo} at {fmt(o['budget'])}")
    by_pair: dict[tuple[str, str], tuple[set, set]] = {}
    for inv in audit.get("inversions", ()):
        if inv.get("kind") == "confirmed" and inv.get("metric") == metric:
            win = {"a>b": inv["a"], "b>a": inv["b"]}
            lows, highs = by_pair.setdefault((win[inv["decision_low"]], win[inv["decision_high"]]), (set(), set()))
            lows.add(int(inv["budget_low"]))
            highs.add(int(inv["budget_high"]))
    inversions = [Inversion(lo, hi, tuple(fmt(b) for b in sorted(bl)), tuple(fmt(b) for b in sorted(bh)))
                  for (lo, hi), (bl, bh) in by_pair.items()]
    claims = []
    for c in audit.get("claims", ()):
        verdicts = [p["verdict"] for p in c.get("per_budget", ())]
        claims.append(ClaimRow(c.get("text", ""), c.get("source", ""), claim_status(verdicts),
                               ", ".join(f"{fmt(p['budget'])}: {p['verdict']}" for p in c.get("per_budget", ()))))
    budgets = tuple(fmt(b) for b in data.get("budgets", ()))
    if unit and budgets:
        budgets = (*budgets[:-1], format_budget(data["budgets"][-1], unit))
    return Entry(name, title, protocol, report, reason, algorithms, single_run, len(data.get("tasks", ())), runs,
                 budgets, len(orderings), len(decided), tuple(decided), tuple(inversions), tuple(claims))


def build_catalogue(protocols: Sequence[Path], reports_dir: Path, root: Path,
                    reasons: Mapping[str, str] | None = None) -> Catalogue:
    """One entry per protocol, from ``reports_dir/<name>/audit.json``.

    Args:
        protocols: published protocol files.
        reports_dir: folder of the reports (and of the catalogue).
        root: folder that protocol paths are shown relative to (the repository).
        reasons: protocol name -> why it was not (re)audited this time (data missing, audit failed). An
            entry with a reason and an earlier report links that report and says so.

    Raises:
        InputError: an ``audit.json`` that is not valid JSON (naming the file).
    """
    import tomllib

    reasons = reasons or {}
    entries = []
    for proto in protocols:
        proto = Path(proto)
        doc = tomllib.loads(proto.read_text(encoding="utf-8"))
        name = doc.get("name") or proto.stem
        title = doc.get("title", "")
        shown = str(proto.resolve().relative_to(root.resolve())) if proto.resolve().is_relative_to(root.resolve()) \
            else str(proto)
        audit_path = Path(reports_dir) / name / "audit.json"
        reason = reasons.get(name, "")
        if not audit_path.is_file():
            entries.append(Entry(name, title, shown, None, reason or "not audited yet (no report)"))
            continue
        try:
            audit = json.loads(audit_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{audit_path}: not a valid audit.json ({exc})") from None
        if reason:
            reason += "; the report shown is the previous one"
        entries.append(entry_from_audit(name, title, shown, audit, f"{name}/index.html", reason))
    audited = [e for e in entries if e.report]
    claims = [c for e in audited for c in e.claims]
    return Catalogue(tuple(entries), n_with_inversion=sum(bool(e.inversions) for e in audited),
                     n_audited=len(audited), n_claims_not_holding=sum(c.status != "holds" for c in claims),
                     n_claims=len(claims))


def render_catalogue(catalogue: Catalogue, kind: str) -> str:
    """The catalogue as ``html`` or ``md`` text."""
    from rlaudit.report.render import _environment

    template = {"html": "catalogue.html.j2", "md": "catalogue.md.j2"}[kind]
    return _environment(kind).get_template(template).render(cat=catalogue, statuses=CLAIM_STATUSES)


def write_catalogue(catalogue: Catalogue, out_dir: Path) -> list[Path]:
    """Write ``index.html`` and ``README.md`` into ``out_dir``; both are rendered before either is written,
    and each is written atomically, so a failed render leaves the previous catalogue in place."""
    texts = {"index.html": render_catalogue(catalogue, "html"), "README.md": render_catalogue(catalogue, "md")}
    out = []
    for fname, text in texts.items():
        atomic_write_text(Path(out_dir) / fname, text)
        out.append(Path(out_dir) / fname)
    return out
