"""The report's "Published vs rerun" section: the ``published_agreement`` document arranged for the templates.

Built from ``audit.json`` only (never recomputed); absent when the audit was not joined with a published
protocol. Budgets are written in each source's own unit, since the two sources count budgets differently.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlaudit.audit.result import format_budget
from rlaudit.audit.rows import PublishedAgreement
from rlaudit.report.parts import Finding, format_interval

ANCHOR = "published-vs-rerun"
HEADING = "Published vs rerun"


@dataclass(frozen=True)
class Agreement:
    """What the section shows."""

    published: str
    """Published protocol name (and file)."""
    suite: str
    """Where the rerun ran."""
    caveat: str
    """Implementations differ; only orderings are compared."""
    method: str
    """How τ and its interval are computed."""
    metric: str
    mapping: tuple[tuple[str, str], ...]
    """``(published agent, rerun label)``."""
    not_rerun: tuple[str, ...]
    rerun_budgets: tuple[str, ...]
    """Rerun budgets, human form with unit."""
    rows: tuple[dict, ...]
    """``{pair, published_budgets, cells: [(status, text)]}``, one per decided published ordering."""
    summary: tuple[dict, ...]
    """``{budget, holds, reversed, inconclusive, not_rerun}`` per rerun budget (budget in human form)."""
    ranks: tuple[dict, ...]
    """``{published_budget, rerun_budget, tau, ci, published_ranking, rerun_ranking}`` (strings)."""
    published_suite: str | None = None
    """The published runs' suite (``None``: not recorded)."""
    suite_note: str = ""
    """Whether the rerun changes the suite as well as the budget, in words."""
    suite_differs: bool | None = None


def build_agreement(doc: dict | None, where: str = "audit.json") -> Agreement | None:
    """The section model, or ``None`` when the audit has no ``published_agreement``.

    Raises:
        InputError: a malformed ``published_agreement`` (naming the part and key).
    """
    if not doc:
        return None
    pa = PublishedAgreement.from_dict(doc, where)
    pu, ru = pa.published_unit, pa.rerun_unit
    rows = []
    for o in pa.orderings:
        cells = []
        for p in o.per_budget:
            diff = "" if p.diff.point is None else f" ({format_interval(p.diff.point, p.diff.lo, p.diff.hi)})"
            cells.append((p.status, p.status + diff))
        rows.append({"pair": f"{o.better} > {o.worse}",
                     "rerun_pair": f"{o.rerun_better or '–'} vs {o.rerun_worse or '–'}",
                     "published_budgets": ", ".join(format_budget(budget) for budget in o.published_budgets),
                     "cells": cells})
    summary = tuple({"budget": format_budget(s.budget, ru), "holds": s.holds, "reversed": s.reversed,
                     "inconclusive": s.inconclusive, "not_rerun": s.not_rerun} for s in pa.summary)
    ranks = tuple({"published_budget": format_budget(r.published_budget, pu),
                   "rerun_budget": format_budget(r.rerun_budget, ru),
                   "tau": "undefined" if r.tau.point is None else f"{r.tau.point:.2f}",
                   "ci": "–" if r.tau.lo is None or r.tau.hi is None else f"[{r.tau.lo:.2f}, {r.tau.hi:.2f}]",
                   "published_ranking": " > ".join(r.published_ranking),
                   "rerun_ranking": " > ".join(r.rerun_ranking)} for r in pa.ranks)
    return Agreement(published=f"{pa.name} ({pa.protocol})", suite=str(pa.suite), caveat=pa.caveat,
                     method=pa.method, metric=pa.metric, mapping=pa.mapping, not_rerun=pa.not_rerun,
                     rerun_budgets=tuple(format_budget(budget, ru) for budget in pa.rerun_budgets), rows=tuple(rows),
                     summary=summary, ranks=ranks, published_suite=pa.published_suite, suite_note=pa.suite_note,
                     suite_differs=pa.suite_differs)


def agreement_findings(a: Agreement | None) -> list:
    """Verdict lines for a joined audit: reversed published orderings first (``warning``), then the counts."""
    if a is None:
        return []
    decided = len(a.rows)
    parts = [f"{s['budget']}: {s['holds']} hold, {s['reversed']} reversed, {s['inconclusive']} inconclusive"
             + (f", {s['not_rerun']} not rerun" if s["not_rerun"] else "") for s in a.summary]
    severity = "warning" if any(s["reversed"] for s in a.summary) else "info"
    sides = f"{a.published}, {a.published_suite or 'suite not recorded'} -> rerun on {a.suite}"
    reversed_word = ("reversed (differ from the published suite's ordering)" if a.suite_differs else "reversed")
    parts = [p.replace(" reversed,", f" {reversed_word},", 1) for p in parts]
    out = [Finding("info", f"Published vs rerun ({sides}): of {decided} decided published "
                           f"orderings, at rerun budget " + "; ".join(parts) + ". Implementations differ, so only "
                           f"orderings are compared, not scores (section {HEADING}).", severity)]
    if a.suite_differs is not False and a.suite_note:
        out.append(Finding("suite-change", a.suite_note, "warning" if a.suite_differs else "info"))
    return out

