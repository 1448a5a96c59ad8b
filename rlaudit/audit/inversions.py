"""Ranking inversions and tested changes between budgets, crossover budgets, and metric sensitivity.

For a pair (A, B) and two budgets ``b1 < b2`` with decisions ``d1``, ``d2`` (after error control):

Findings (error-controlled; what the verdict headline reports):

- ``confirmed``: decided one way at ``b1`` and the other way at ``b2``;
- ``changed``: not confirmed, but the change test of the gap, ``gap(b2) - gap(b1)``, rejects (tested
  between every budget and the last one, inside the same family as the orderings).

Notes (descriptive only, never a finding):

- ``decided_once``: decided at one budget only, with no decided change (formerly ``lost``: a decision
  that does not carry over is not evidence that the ordering changed);
- ``unconfirmed``: neither decided, but the point estimates point in opposite directions.

Every other combination is ``stable`` and not listed. Because every ordering and change test of the audit is
covered by one family-wise error control, the probability that an audit reports *any* finding when nothing
differs is at most ``alpha``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlaudit.audit.orderings import opposite

FINDINGS: tuple[str, ...] = ("confirmed", "changed")
"""Kinds that are error-controlled findings."""

NOTES: tuple[str, ...] = ("decided_once", "unconfirmed")
"""Kinds that are descriptive notes only."""

KINDS: tuple[str, ...] = FINDINGS + NOTES + ("stable",)


def classify(decision_low: str, decision_high: str, direction_low: str, direction_high: str,
             changed: bool = False) -> str:
    """Kind of change between two budgets.

    Args:
        decision_low, decision_high: ``"a>b"``, ``"b>a"`` or ``"inconclusive"`` at the lower/higher budget.
        direction_low, direction_high: direction of the point estimates (``"a>b"``, ``"b>a"`` or ``"tie"``).
        changed: whether the change test of this pair and these budgets rejected (``False`` when untested).

    Returns:
        One of :data:`KINDS`.
    """
    decided_low = decision_low != "inconclusive"
    decided_high = decision_high != "inconclusive"
    if decided_low and decided_high and decision_high == opposite(decision_low):
        return "confirmed"
    if changed:
        return "changed"
    if decided_low != decided_high:
        return "decided_once"
    if not decided_low and direction_low != "tie" and direction_high == opposite(direction_low):
        return "unconfirmed"
    return "stable"


def find_inversions(budgets: Sequence[int], decisions: Mapping[tuple[str, str], Sequence[str]],
                    directions: Mapping[tuple[str, str], Sequence[str]], metric: str,
                    changed: Mapping[tuple[str, str, int, int], bool] | None = None) -> list[dict]:
    """Every non-stable change of every pair between every two budgets ``b1 < b2``.

    Args:
        budgets: audited budgets, ascending.
        decisions: ``(a, b)`` -> decisions at each budget (aligned with ``budgets``).
        directions: ``(a, b)`` -> point-estimate directions at each budget.
        metric: metric of the decisions (written to each entry).
        changed: ``(a, b, budget_low, budget_high)`` -> whether that change test rejected (absent: untested).

    Returns:
        ``audit.json`` ``inversions`` entries, ordered by pair, then ``budget_low``, then ``budget_high``;
        ``finding`` says whether the entry is an error-controlled finding or a note.
    """
    changed = changed or {}
    out = []
    for (a, b), ds in decisions.items():
        dirs = directions[(a, b)]
        for i in range(len(budgets)):
            for j in range(i + 1, len(budgets)):
                tested = changed.get((a, b, int(budgets[i]), int(budgets[j])))
                kind = classify(ds[i], ds[j], dirs[i], dirs[j], bool(tested))
                if kind != "stable":
                    out.append({"a": a, "b": b, "metric": metric, "budget_low": int(budgets[i]),
                                "budget_high": int(budgets[j]), "kind": kind, "finding": kind in FINDINGS,
                                "decision_low": ds[i], "decision_high": ds[j],
                                "change_tested": tested is not None})
    return out


def find_crossovers(budgets: Sequence[int], decisions: Mapping[tuple[str, str], Sequence[str]],
                    metric: str) -> list[dict]:
    """Budget intervals where a decided ordering turns into the opposite decided ordering.

    For each pair, walking up the budgets, every switch between decided directions gives one entry with
    the last budget decided the old way (``last_budget_before``) and the first budget decided the new
    way (``first_budget_after``); the crossover lies between them. Inconclusive budgets in between are
    skipped.
    """
    out = []
    for (a, b), ds in decisions.items():
        last = None  # (decision, budget) of the latest decided budget
        for budget, d in zip(budgets, ds):
            if d == "inconclusive":
                continue
            if last is not None and d == opposite(last[0]):
                out.append({"a": a, "b": b, "metric": metric, "from": last[0], "to": d,
                            "last_budget_before": int(last[1]), "first_budget_after": int(budget)})
            last = (d, budget)
    return out


def metric_sensitivity(budgets: Sequence[int],
                       decisions_by_metric: Mapping[str, Mapping[tuple[str, str], Sequence[str]]]) -> list[dict]:
    """Pairs and budgets at which the metrics do not agree on the ordering.

    Args:
        budgets: audited budgets, ascending.
        decisions_by_metric: metric -> ``(a, b)`` -> decisions aligned with ``budgets``.

    Returns:
        ``audit.json`` ``metric_sensitivity`` entries with ``decisions`` per metric and ``kind``:
        ``"opposed"`` when one metric decides ``a>b`` and another ``b>a``, else ``"partial"`` (some metrics
        decide, others are inconclusive).
    """
    metrics = list(decisions_by_metric)
    if len(metrics) < 2:
        return []
    out = []
    pairs = list(decisions_by_metric[metrics[0]])
    for i, budget in enumerate(budgets):
        for pair in pairs:
            ds = {m: decisions_by_metric[m][pair][i] for m in metrics}
            values = set(ds.values())
            if len(values) > 1:
                kind = "opposed" if {"a>b", "b>a"} <= values else "partial"
                out.append({"budget": int(budget), "a": pair[0], "b": pair[1], "decisions": ds, "kind": kind})
    return out
