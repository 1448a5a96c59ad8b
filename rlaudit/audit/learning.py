"""Learned or not: the (task, budget) cells where no algorithm is yet clear of the random policy.

An ordering on a task where every agent still plays like the uniformly random policy compares noise around
random play. When the scores come with a random-policy reference (Atari's human-normalised score; a
``minmax`` normalisation whose low ends are the random policy's scores, ``low = "random"``), a cell counts
as **learned** when at least one algorithm's per-task interval (the report's per-task table: the mean raw
score over runs with its stratified-bootstrap percentile interval) lies entirely above the random policy's
score. Each cell is read on its own interval, without multiplicity control, and with 3-5 runs those
intervals are narrow, so the flag errs towards "learned": a cell flagged "nothing learned" is one where
even the best agent's interval reaches down to random play.

The result is the ``audit.json`` ``learning`` document (``docs/audit-json.md``); :func:`claim_notes` marks
the claim verdicts that rest on such cells, and the aggregates over the learned tasks alone are given
beside the full ones, so a reader sees whether the unlearned tasks move the conclusion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

RULE = ("a task is learned at a budget when at least one algorithm's per-task {confidence:.0%} interval of the mean "
        "raw score (stratified bootstrap over runs, percentile, no multiplicity control) lies above the random "
        "policy's score; with few runs those intervals are narrow, so the flag errs towards 'learned'")


def learning_cells(per_task: Sequence[dict], random_refs: Mapping[str, float], budgets: Sequence[int],
                   tasks: Sequence[str]) -> list[dict]:
    """One entry per (task, budget) with a reference: ``{task, budget, reference, best_algorithm, best_mean,
    best_lo, learned}`` (``best_*``: the algorithm whose interval's lower end is highest).

    Args:
        per_task: ``audit.json`` ``per_task`` rows ``{budget, algorithm, task, mean, lo, hi}`` (raw scores).
        random_refs: task -> the random policy's raw score; tasks without one are skipped.
        budgets: audited budgets, ascending.
        tasks: audited tasks, in table order.
    """
    by_cell: dict[tuple[str, int], list[dict]] = {}
    for row in per_task:
        by_cell.setdefault((row["task"], int(row["budget"])), []).append(row)
    cells = []
    for b in budgets:
        for t in tasks:
            if t not in random_refs or (t, b) not in by_cell:
                continue
            ref = float(random_refs[t])
            rows = [r for r in by_cell[(t, b)] if r.get("lo") is not None and np.isfinite(r["lo"])]
            best = max(rows, key=lambda r: r["lo"], default=None)
            cells.append({"task": t, "budget": int(b), "reference": ref,
                          "best_algorithm": best["algorithm"] if best else None,
                          "best_mean": float(best["mean"]) if best else None,
                          "best_lo": float(best["lo"]) if best else None,
                          "learned": bool(best is not None and best["lo"] > ref)})
    return cells


def learned_only_aggregates(sets: Mapping[tuple[str, int], list[np.ndarray]], tasks: Sequence[str],
                            cells: Sequence[dict], metric: str, reps: int, seed: int, confidence: float,
                            gamma: float = 1.0) -> list[dict]:
    """The deciding metric over the learned tasks only, at each budget where some but not all tasks are unlearned.

    Args:
        sets: ``(algorithm, budget)`` -> normalised score set (one array of runs per task, ``tasks`` order).
        tasks: the tasks of ``sets``.
        cells: :func:`learning_cells`.
        metric: the deciding metric.
        reps: bootstrap replicates.
        seed: the audit's seed (stream key ``"learned-only", budget, algorithm``).
        confidence: interval level (percentile interval).
        gamma: the optimality gap's threshold.

    Returns:
        ``[{budget, algorithm, metric, point, lo, hi, n_tasks, tasks_left_out}]``.
    """
    from rlaudit.stats import bootstrap
    from rlaudit.stats.metrics import aggregate

    unlearned: dict[int, set[str]] = {}
    for c in cells:
        if not c["learned"]:
            unlearned.setdefault(c["budget"], set()).add(c["task"])
    out = []
    for (a, b), score_set in sets.items():
        gone = unlearned.get(b, set())
        keep = [i for i, t in enumerate(tasks) if t not in gone]
        if not gone or not keep:
            continue
        subset = [score_set[i] for i in keep]
        point = float(aggregate(metric, subset, gamma))
        values = bootstrap.replicates(subset, [metric], reps, bootstrap.rng_for(seed, "learned-only", b, a), gamma)[:, 0]
        lo, hi = bootstrap.interval(point, values, confidence, "percentile")
        out.append({"budget": int(b), "algorithm": a, "metric": metric, "point": point, "lo": lo, "hi": hi,
                    "n_tasks": len(keep), "tasks_left_out": sorted(gone)})
    out.sort(key=lambda r: (r["budget"], r["algorithm"]))
    return out


def claim_notes(claims: Sequence[dict], cells: Sequence[dict], n_tasks: int) -> list[dict]:
    """Claims with each ``per_budget`` entry marked where the tasks nothing has learned weigh in.

    Adds ``nothing_learned_tasks`` (the unlearned tasks at that budget, when any) and ``rests_on_unlearned``
    (``true`` when no task is learned at that budget: the verdict compares agents that all still play like
    the random policy). Claims are returned as new dicts; the input is not changed.
    """
    unlearned: dict[int, list[str]] = {}
    for c in cells:
        if not c["learned"]:
            unlearned.setdefault(c["budget"], []).append(c["task"])
    out = []
    for claim in claims:
        rows = []
        for p in claim.get("per_budget", []):
            gone = unlearned.get(int(p["budget"]), [])
            rows.append({**p, **({"nothing_learned_tasks": gone, "rests_on_unlearned": len(gone) >= n_tasks}
                                 if gone else {})})
        out.append({**claim, "per_budget": rows})
    return out


def learning_doc(per_task: Sequence[dict], random_refs: Mapping[str, float], source: str, budgets: Sequence[int],
                 tasks: Sequence[str], sets, metric: str, reps: int, seed: int, confidence: float,
                 gamma: float = 1.0) -> dict:
    """The ``audit.json`` ``learning`` document (``{}`` without a random-policy reference)."""
    if not random_refs:
        return {}
    cells = learning_cells(per_task, random_refs, budgets, tasks)
    return {"reference": "random policy", "source": source, "rule": RULE.format(confidence=confidence),
            "cells": cells,
            "nothing_learned": [{"task": c["task"], "budget": c["budget"]} for c in cells if not c["learned"]],
            "aggregates_learned_only": learned_only_aggregates(sets, tasks, cells, metric, reps, seed, confidence,
                                                               gamma)}
