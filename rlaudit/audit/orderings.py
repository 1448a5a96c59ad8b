"""Pairwise orderings at each budget, with family-wise error control over all orderings of one audit.

For a pair (A, B) at a budget, the statistic is ``metric(A) - metric(B)``. Its bootstrap distribution is
the difference of two *independent* stratified-bootstrap replicate vectors, one per (algorithm, budget),
each generated once from a deterministic random stream keyed by (seed, budget, algorithm) and shared by
every pair that involves it.

Decision rule, exactly dual to the reported interval. With ``D`` the ``n`` replicate differences,
``t = min(#{D <= 0}, #{D >= 0})`` and the bootstrap two-sided p-value ``p = min(1, 2 t / n)`` (0 means
``< 2 / n``). An ordering tested with multiplier ``c`` (Holm: ``m - k`` at step ``k``, 0-based;
Bonferroni: ``m``) is decided iff ``c p < alpha``. Because ``c p`` is non-decreasing in ``t``, the tail
counts that pass form a prefix ``0 .. K - 1``; the reported interval is [``K``-th smallest ``D``,
``K``-th largest ``D``], the percentile interval at level about ``1 - alpha / c``. Its lower end is > 0 iff
``#{D <= 0} < K`` and its upper end < 0 iff ``#{D >= 0} < K``, so "decided" and "interval excludes 0" are
the same event, computed with the same floating-point expression as ``p_adjusted < alpha``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DECISIONS: tuple[str, ...] = ("a>b", "b>a", "inconclusive")


@dataclass(frozen=True)
class FamilyDecision:
    """Outcome of the error control for one family of orderings (arrays aligned with its members)."""

    p_values: np.ndarray
    """Bootstrap two-sided p-values, shape ``(n_orderings,)``."""
    p_adjusted: np.ndarray
    """p-values after the correction (Holm or Bonferroni), shape ``(n_orderings,)``; decided iff < alpha."""
    levels: np.ndarray
    """Per-ordering nominal significance level ``alpha / c`` of its interval (interval level ``1 - alpha / c``)."""
    tail_limits: np.ndarray
    """Per-ordering ``K``: the interval is [K-th smallest, K-th largest] replicate difference (int)."""
    decided: np.ndarray
    """Boolean, shape ``(n_orderings,)``: the null "no difference" is rejected."""


def tail_counts(diffs: np.ndarray) -> tuple[int, int]:
    """Counts ``(#{D <= 0}, #{D >= 0})`` of bootstrap differences ``diffs`` (shape ``(reps,)``)."""
    return int(np.count_nonzero(diffs <= 0)), int(np.count_nonzero(diffs >= 0))


def p_value(diffs: np.ndarray) -> float:
    """Bootstrap two-sided p-value of "no difference": ``min(1, 2 min(#{D<=0}, #{D>=0}) / n)``.

    Args:
        diffs: bootstrap replicates of ``metric(A) - metric(B)``, shape ``(reps,)``.
    """
    return float(_p(min(tail_counts(diffs)), diffs.size))


def _p(tail, n: int):
    return np.minimum(1.0, 2.0 * np.asarray(tail, dtype=np.float64) / n)


def _tail_limit(multiplier: int, n: int, alpha: float) -> int:
    """``K`` = number of tail counts ``t`` in ``0..n`` with ``multiplier * p(t) < alpha`` (a prefix)."""
    t = np.arange(n + 1)
    return int(np.count_nonzero(multiplier * _p(t, n) < alpha))


def control_family(tails: Sequence[int] | np.ndarray, n: int, alpha: float,
                   correction: str = "holm") -> FamilyDecision:
    """Decide every ordering of one family with family-wise error rate ``alpha``.

    Args:
        tails: per ordering, ``min(#{D <= 0}, #{D >= 0})`` of its ``n`` bootstrap differences
            (see :func:`tail_counts`), shape ``(n_orderings,)``.
        n: number of bootstrap replicates behind every ordering.
        alpha: family-wise error rate.
        correction: ``"holm"`` (step-down: the k-th smallest p-value, k = 1..m, is tested at
            ``alpha / (m - k + 1)``, stopping at the first failure) or ``"bonferroni"`` (every ordering at
            ``alpha / m``).

    Returns:
        A :class:`FamilyDecision`. Under Holm an ordering decided at step k gets the interval of that step;
        every ordering not decided gets the interval of the step where the procedure stopped (its p-value
        is at least that step's, so its interval contains 0).
    """
    tails = np.asarray(tails, dtype=np.int64)
    m = tails.size
    if m == 0:
        empty = np.empty(0)
        return FamilyDecision(empty, empty, empty, np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    p = _p(tails, n)
    if correction == "bonferroni":
        adjusted = np.minimum(1.0, m * p)
        limit = _tail_limit(m, n, alpha)
        return FamilyDecision(p, adjusted, np.full(m, alpha / m), np.full(m, limit, dtype=np.int64),
                              adjusted < alpha)
    if correction != "holm":
        raise ValueError(f"unknown correction {correction!r}")
    order = np.argsort(tails, kind="stable")
    adjusted = np.empty(m)
    multiplier = np.empty(m, dtype=np.int64)
    running = 0.0
    stopped = None
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
        if stopped is None and not running < alpha:
            stopped = m - k
        multiplier[i] = stopped if stopped is not None else m - k
    limits = {c: _tail_limit(int(c), n, alpha) for c in set(multiplier.tolist())}
    return FamilyDecision(p, adjusted, alpha / multiplier, np.array([limits[c] for c in multiplier], dtype=np.int64),
                          adjusted < alpha)


def correction_description(correction: str, alpha: float, n_pairs: int, n_budgets: int, metric: str) -> str:
    """One paragraph saying exactly how the family-wise error is controlled (``settings.correction_description``)."""
    m = n_pairs * n_budgets
    family = f"all {n_pairs} pair(s) x {n_budgets} budget(s) = {m} ordering(s) of this audit under {metric}"
    common = ("Each ordering's bootstrap two-sided p-value is p = 2 min(#(D<=0), #(D>=0)) / reps over the "
              "replicates D of metric(a) - metric(b) (independent stratified resampling of each algorithm); "
              "p = 0 means p < 2/reps. An ordering is decided iff its interval [diff_lo, diff_hi] (percentile "
              "interval of D at level ci_level) excludes 0, which is the same event as p_adjusted < alpha. "
              "Other metrics (metric sensitivity, claims naming another metric) form their own families, "
              "controlled the same way.")
    if correction == "bonferroni":
        return (f"Bonferroni over {family}: every ordering is tested at level {alpha:g}/{m}, so the family-wise "
                f"error rate is at most {alpha:g} and every interval is a {100 * (1 - alpha / max(m, 1)):.4g}% "
                f"interval. p_adjusted = min(1, {m} p). " + common)
    return (f"Holm step-down over {family}: the k-th smallest p-value is tested at level {alpha:g}/({m} - k + 1) "
            f"until the first failure, so the family-wise error rate is at most {alpha:g}. The interval of a "
            f"decided ordering is at 1 - the level of the step that decided it; that of an undecided ordering "
            f"at 1 - the level of the step where the procedure stopped. p_adjusted is Holm's adjusted "
            f"p-value. " + common)


def interval_at(diffs: np.ndarray, k: int) -> tuple[float, float]:
    """[``k``-th smallest, ``k``-th largest] of ``diffs`` (shape ``(reps,)``), ``1 <= k <= reps``.

    With ``k = FamilyDecision.tail_limits[i]`` this is the percentile interval dual to the decision: its lower
    end is > 0 iff ``#{D <= 0} < k`` and its upper end < 0 iff ``#{D >= 0} < k``.
    """
    n = diffs.size
    k = min(max(int(k), 1), n)
    lo = float(np.partition(diffs, k - 1)[k - 1])
    hi = float(-np.partition(-diffs, k - 1)[k - 1])
    return lo, hi


def max_tail_limit(n: int, alpha: float) -> int:
    """The largest ``K`` any ordering of a family can get (multiplier 1, i.e. level ``alpha``)."""
    return max(1, _tail_limit(1, n, alpha))


def extremes(diffs: np.ndarray, k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k_max`` smallest (ascending) and ``k_max`` largest (descending) of ``diffs``, shape ``(reps,)``.

    Enough to evaluate :func:`interval_at` for any ``k <= k_max`` without keeping all replicates.
    """
    n = diffs.size
    k = min(k_max, n)
    low = np.sort(np.partition(diffs, k - 1)[:k])
    high = -np.sort(np.partition(-diffs, k - 1)[:k])
    return low, high


def interval_from_extremes(ext: tuple[np.ndarray, np.ndarray], k: int) -> tuple[float, float]:
    """:func:`interval_at` from the output of :func:`extremes` (``1 <= k <= k_max``)."""
    low, high = ext
    k = min(max(int(k), 1), low.size)
    return float(low[k - 1]), float(high[k - 1])


def percentile_interval(diffs: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval at confidence ``1 - level``: [k-th smallest, k-th largest], ``k = ceil(level n / 2)``."""
    return interval_at(diffs, math.ceil(level * diffs.size / 2.0))


def decision_label(decided: bool, lo: float, hi: float, higher_is_better: bool = True) -> str:
    """``"a>b"`` (A better), ``"b>a"`` or ``"inconclusive"`` from a decided interval of metric(A) - metric(B).

    For a metric where lower is better (optimality gap) a negative difference means A is better.
    """
    if not decided:
        return "inconclusive"
    positive = lo > 0
    if not positive and not hi < 0:  # cannot happen for intervals from percentile_interval at the same level
        return "inconclusive"
    return "a>b" if positive == higher_is_better else "b>a"


def point_decision(diff_point: float, higher_is_better: bool = True) -> str:
    """Direction of a point estimate alone: ``"a>b"``, ``"b>a"`` or ``"tie"``."""
    if diff_point == 0:
        return "tie"
    return "a>b" if (diff_point > 0) == higher_is_better else "b>a"


def opposite(decision: str) -> str:
    """``"a>b"`` <-> ``"b>a"``; anything else unchanged."""
    return {"a>b": "b>a", "b>a": "a>b"}.get(decision, decision)
