"""Aggregate performance metrics, defined exactly as rliable defines them.

A *score set* is a list of 1-D arrays, one per task: ``score_set[m]`` has shape ``(n_runs_m,)`` and holds
the (normalised) scores of the runs on task ``m``. When every task has the same number of runs ``n`` a
score set is the columns of rliable's ``(n_runs, n_tasks)`` matrix, and every metric below equals
``rliable.metrics.aggregate_*`` on that matrix (to 1e-12; tested).

With unequal run counts rliable's functions (which take a rectangular matrix) do not apply; rlaudit
generalises them as follows, and every definition reduces to rliable's when run counts are equal:

- ``mean``: mean over tasks of the per-task mean score (each task weighs ``1 / n_tasks``).
- ``median``: median over tasks of the per-task mean score.
- ``og`` (optimality gap): ``gamma - mean over tasks of mean_r min(score, gamma)`` (each task weighs the same).
- ``iqm``: the 25 %-trimmed mean of *all* run scores pooled across tasks (``scipy.stats.trim_mean`` with
  ``proportiontocut=0.25``, as rliable), so a task with more runs holds proportionally more of the pooled
  sample. This is the one pooled metric: a task-weighted trimmed mean would not reduce to rliable's
  floor-rounded trimming. The audit checklist flags unequal run counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METRICS: tuple[str, ...] = ("iqm", "median", "mean", "og")
"""Aggregate metrics, in display order."""

METRIC_LABELS: dict[str, str] = {"iqm": "IQM", "median": "Median", "mean": "Mean", "og": "Optimality gap"}
"""Human-readable names."""

HIGHER_IS_BETTER: dict[str, bool] = {"iqm": True, "median": True, "mean": True, "og": False}
"""Direction of each metric (the optimality gap is lower-is-better)."""

TRIM = 0.25
"""Proportion cut from each end for the IQM."""


def as_score_set(score_set) -> list[np.ndarray]:
    """Coerce a score set to a list of contiguous float64 1-D arrays.

    Args:
        score_set: a list of 1-D arrays (one per task, shape ``(n_runs_m,)``), or a 2-D array of shape
            ``(n_runs, n_tasks)`` as rliable uses.

    Returns:
        A list of ``n_tasks`` float64 arrays.

    Raises:
        ValueError: no tasks, a task with no runs, or a non-finite score.
    """
    if isinstance(score_set, np.ndarray):
        if score_set.ndim != 2:
            raise ValueError(f"a score matrix must have shape (n_runs, n_tasks), got {score_set.shape}")
        arrays = [np.ascontiguousarray(score_set[:, m], dtype=np.float64) for m in range(score_set.shape[1])]
    else:
        arrays = [np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1)) for a in score_set]
    if not arrays:
        raise ValueError("a score set needs at least one task")
    for m, a in enumerate(arrays):
        if a.size == 0:
            raise ValueError(f"task {m} of the score set has no runs")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"task {m} of the score set holds a non-finite score")
    return arrays


def check_metric(metric: str) -> str:
    """Return ``metric`` if it is one of :data:`METRICS`, else raise ``ValueError``."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
    return metric


def aggregate(metric: str, score_set: Sequence[np.ndarray] | np.ndarray, gamma: float = 1.0) -> float:
    """Point estimate of an aggregate metric.

    Args:
        metric: one of :data:`METRICS`.
        score_set: one array of shape ``(n_runs_m,)`` per task, or a matrix ``(n_runs, n_tasks)``.
        gamma: optimality-gap threshold (scores above ``gamma`` count as ``gamma``); only for ``og``.

    Returns:
        The metric as a Python float.
    """
    check_metric(metric)
    arrays = as_score_set(score_set)
    if metric == "iqm":
        import scipy.stats  # on use: the metric names above are read by commands that compute nothing

        return float(scipy.stats.trim_mean(np.concatenate(arrays), proportiontocut=TRIM, axis=None))
    if metric == "og":
        return float(gamma - np.mean([np.mean(np.minimum(a, gamma)) for a in arrays]))
    task_means = np.array([np.mean(a) for a in arrays])
    return float(np.mean(task_means) if metric == "mean" else np.median(task_means))


def aggregate_all(metrics: Sequence[str], score_set, gamma: float = 1.0) -> np.ndarray:
    """Point estimates of several metrics, shape ``(len(metrics),)``."""
    return np.array([aggregate(m, score_set, gamma) for m in metrics], dtype=np.float64)
