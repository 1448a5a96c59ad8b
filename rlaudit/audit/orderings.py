"""Pairwise orderings and changes between budgets, with family-wise error control over one audit.

Members of a family. For a pair (A, B) at a budget the statistic is ``metric(A) - metric(B)`` (an
*ordering*); for a pair and two budgets ``b < b_final`` it is the change of that gap,
``gap(b_final) - gap(b)`` (a *change*). Their bootstrap distributions come from one replicate vector
per (algorithm, budget) shared by every member that involves it: when an algorithm's runs are the same
at every budget (same run ids: nested regimes, published curves) one resampling matrix is reused at every
budget, so gaps at two budgets are paired; otherwise each budget draws independently.

p-values. With ``D`` the ``n`` replicates of a member and ``t = min(#{D <= 0}, #{D >= 0})`` the two-sided
bootstrap p-value is ``p = min(1, (2 t + 1) / (n + 1))`` (never 0: with ``n`` replicates nothing below
``1 / (n + 1)`` can be resolved).

Error control (``correction``):

- ``maxt`` (default): Westfall & Young's step-down min-P on the joint bootstrap. Every replicate ``r`` gives
  each member the tail count ``t*_r`` of that replicate as a null value (``min(#{D <= D_r}, #{D >= D_r})``); at step ``k`` the members not yet decided are compared with the
  distribution of ``min`` of their ``t*_r``. It uses the dependence between members (pairs sharing an
  algorithm, paired budgets), so it decides at least as much as Holm up to Monte-Carlo error, and it
  equals the single test when the family has one member. A step's adjusted p-value is never below the
  member's own p-value (``P(min of the null p-values <= p) >= p``): the replicate count alone can fall below
  that bound when the replicates are tied (2 runs per task) or the p-values are read on Student's t.
- ``holm``: step-down with multiplier ``m - k`` at step ``k`` (0-based); valid under any dependence.
- ``bonferroni``: every member with multiplier ``m``.

Decision rule, exactly dual to the reported interval. Under each correction the tail counts that pass a
step form a prefix ``0 .. K - 1``; the reported interval is [``K``-th smallest ``D``,
``K``-th largest ``D``] (the percentile interval at the step's level). Its lower end is > 0 iff
``#{D <= 0} < K`` and its upper end < 0 iff ``#{D >= 0} < K``, so "decided" and "interval excludes 0" are
the same event.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DECISIONS: tuple[str, ...] = ("a>b", "b>a", "inconclusive")

CORRECTIONS: tuple[str, ...] = ("maxt", "holm", "bonferroni")
"""Family-wise error control over the members of one family (see the module docstring)."""

MIN_REPS_PER_TEST = 20
"""An audit needs ``reps >= MIN_REPS_PER_TEST * m / alpha`` replicates for a family of ``m`` members, so that
the corrected level ``alpha / m`` spans at least 20 replicates in each tail (below that the decision is
set by the replicate count, not by the data)."""


@dataclass(frozen=True)
class FamilyDecision:
    """Outcome of the error control for one family (arrays aligned with its members)."""

    p_values: np.ndarray
    """Bootstrap two-sided p-values ``(2 t + 1) / (n + 1)``, shape ``(n_members,)``."""
    p_adjusted: np.ndarray
    """p-values after the correction, shape ``(n_members,)``; decided iff < alpha."""
    levels: np.ndarray
    """Per-member significance level of its interval (interval level ``1 - levels``)."""
    tail_limits: np.ndarray
    """Per-member ``K``: the interval is [K-th smallest, K-th largest] replicate (int)."""
    decided: np.ndarray
    """Boolean, shape ``(n_members,)``: the null "no difference" is rejected."""


def min_reps(n_members: int, alpha: float) -> int:
    """Fewest replicates that resolve the corrected level of a family of ``n_members`` (see :data:`MIN_REPS_PER_TEST`)."""
    return int(math.ceil(MIN_REPS_PER_TEST * max(n_members, 1) / alpha))


def tail_counts(diffs: np.ndarray) -> tuple[int, int]:
    """Counts ``(#{D <= 0}, #{D >= 0})`` of bootstrap differences ``diffs`` (shape ``(reps,)``)."""
    return int(np.count_nonzero(diffs <= 0)), int(np.count_nonzero(diffs >= 0))


def p_value(diffs: np.ndarray) -> float:
    """Bootstrap two-sided p-value of "no difference": ``min(1, (2 min(#{D<=0}, #{D>=0}) + 1) / (n + 1))``.

    Args:
        diffs: bootstrap replicates of the statistic, shape ``(reps,)``.
    """
    return float(p_from_tail(min(tail_counts(diffs)), diffs.size))


def p_from_tail(tail, n: int):
    """Two-sided bootstrap p-value ``min(1, (2 t + 1) / (n + 1))`` of tail count(s) ``t`` out of ``n`` replicates."""
    return np.minimum(1.0, (2.0 * np.asarray(tail, dtype=np.float64) + 1.0) / (n + 1.0))


def null_tails(diffs: np.ndarray) -> np.ndarray:
    """Tail count of each replicate as a null value: ``min(#{D <= D_r}, #{D >= D_r})``.

    The joint null distribution of the min-P step-down (``correction="maxt"``). For distinct replicates the
    values ``1, 1, 2, 2, ...`` each appear twice, so ``#{r: p(t*_r) <= p(t)} + 1 = 2 t + 1``: with one member
    the step-down p-value is the member's own ``(2 t + 1) / (n + 1)``. Ties count on both sides (a constant
    statistic gives ``t* = n``, p-value 1).

    Args:
        diffs: bootstrap replicates of one member, shape ``(reps,)``.

    Returns:
        Integer array of shape ``(reps,)``.
    """
    n = diffs.size
    order = np.argsort(diffs)
    s = diffs[order]
    # Runs of equal values in sorted order: #{D <= D_r} is the end of r's run, #{D >= D_r} is n - its start
    # (one pass over the sorted values; three times faster than two binary searches per replicate).
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    run = np.cumsum(new) - 1
    out = np.empty(n, dtype=np.int64)
    out[order] = np.minimum(np.append(starts[1:], n)[run], n - starts[run])
    return out


def tail_limit(level: float, n: int) -> int:
    """``K`` = number of tail counts ``t`` in ``0..n`` whose p-value ``(2 t + 1) / (n + 1)`` is below ``level``."""
    t = np.arange(n + 1)
    return int(np.count_nonzero(p_from_tail(t, n) < level))


def control_family(p_values: Sequence[float] | np.ndarray, n: int, alpha: float, correction: str = "holm",
                   null_column: Callable[[int], np.ndarray] | None = None,
                   raw_level: Callable[[int, float], float] | None = None) -> FamilyDecision:
    """Decide every member of one family with family-wise error rate ``alpha``.

    Args:
        p_values: per member, its p-value (:func:`p_value`, or a calibrated transform of it), shape
            ``(n_members,)``.
        n: number of bootstrap replicates behind every member (the same replicate index ``r`` across
            members for ``maxt``).
        alpha: family-wise error rate.
        correction: ``"maxt"``, ``"holm"`` or ``"bonferroni"`` (module docstring).
        null_column: for ``maxt``: ``null_column(i)`` returns :func:`null_tails` of member ``i``'s replicates.
        raw_level: ``raw_level(i, c)``: the level of the plain bootstrap p-value ``(2 t + 1) / (n + 1)`` at which
            member ``i``'s p-value equals ``c`` (the inverse of the transform; default: identity). It turns a
            step's critical value into the member's interval ``K``.

    Returns:
        A :class:`FamilyDecision`. A member decided at step k gets the interval of that step; every member not
        decided gets the interval of the step where the procedure stopped (its p-value is at least that
        step's, so its interval contains 0).
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    m = p.size
    if m == 0:
        empty = np.empty(0)
        return FamilyDecision(empty, empty, empty, np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    order = np.argsort(p, kind="stable")
    steps = np.arange(m)
    if correction == "bonferroni":
        step_p, critical = np.minimum(1.0, m * p[order]), np.full(m, alpha / m)
    elif correction == "holm":
        step_p, critical = np.minimum(1.0, (m - steps) * p[order]), alpha / (m - steps)
    elif correction == "maxt":
        if null_column is None:
            raise ValueError("correction='maxt' needs null_column")
        step_p, critical = _min_p_steps(p, order, n, alpha, null_column)
    else:
        raise ValueError(f"unknown correction {correction!r}")
    adjusted = np.empty(m)
    adjusted[order] = step_p if correction == "bonferroni" else np.maximum.accumulate(step_p)
    decided = adjusted < alpha
    stop = m if decided.all() else int(np.count_nonzero(np.cumprod(step_p < alpha)))
    levels = np.empty(m)
    limits = np.empty(m, dtype=np.int64)
    for k, i in enumerate(order):
        c = float(critical[k if (k < stop or correction == "bonferroni") else stop])
        levels[i] = c
        limits[i] = tail_limit(raw_level(int(i), c) if raw_level else c, n)
    return FamilyDecision(p, adjusted, levels, limits, decided)


def _min_p_steps(p: np.ndarray, order: np.ndarray, n: int, alpha: float,
                 null_column: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per step ``k`` of the min-P step-down: the step's p-value and its critical value.

    ``minU_r(k)`` is the smallest null p-value ``(2 t*_r + 1) / (n + 1)`` of replicate ``r`` over the members
    from step ``k`` on (built from the last step backwards, one column at a time, so memory is one ``(n,)``
    vector). The step's p-value is ``max(p_k, (#{r: minU_r(k) <= p_k} + 1) / (n + 1))`` (with one member, the
    member's own p-value, see :func:`null_tails`); a member is decided at the step iff that is below
    ``alpha``, i.e. iff its p-value is below the critical value, the smaller of ``alpha`` and the
    ``(A + 1)``-th smallest ``minU_r(k)`` with ``A`` the largest count such that ``(A + 1) / (n + 1) < alpha``.
    """
    m = p.size
    step_p = np.empty(m)
    critical = np.empty(m)
    running = np.full(n, np.inf)
    allowed = int(math.ceil(alpha * (n + 1) - 1.0)) - 1  # largest count with (count + 1) / (n + 1) < alpha
    for k in range(m - 1, -1, -1):
        np.minimum(running, p_from_tail(null_column(int(order[k])), n), out=running)
        # P(min of the remaining null p-values <= p_k) is at least P(member's own null p-value <= p_k) = p_k.
        # The replicate count can fall below that bound when the null p-values are coarser than uniform
        # (tied replicates: 2 runs per task give a handful of distinct bootstrap values) or when p_k is a
        # calibrated transform of the plain p-value (the t reading); the bound keeps p_adjusted >= p_value.
        step_p[k] = max((np.count_nonzero(running <= p[order[k]]) + 1.0) / (n + 1.0), p[order[k]])
        if allowed < 0:
            critical[k] = 0.0
        elif allowed >= n:
            critical[k] = alpha
        else:
            critical[k] = min(float(np.partition(running, allowed)[allowed]), alpha)
    return np.minimum(step_p, 1.0), critical


def correction_description(correction: str, alpha: float, n_orderings: int, n_changes: int, metric: str,
                           paired: bool, t_reading: bool = False) -> str:
    """One paragraph saying exactly how the family-wise error is controlled (``settings.correction_description``);
    ``t_reading``: the p-values and intervals are read on Student's t (the expanded scheme,
    ``rlaudit.audit.engine.member_p_value`` and ``member_interval``)."""
    m = n_orderings + n_changes
    family = (f"{n_orderings} ordering(s) (pairs x budgets) and {n_changes} change test(s) (pairs x each budget "
              f"vs the last) = {m} test(s) of this audit under {metric}")
    draws = ("the same runs are read at every budget, so one resampling of runs per algorithm is reused at "
             "every budget (paired budgets)" if paired else
             "runs differ between budgets, so each budget is resampled independently")
    common = (f"Each test's bootstrap two-sided p-value is p = (2 min(#(D<=0), #(D>=0)) + 1) / (reps + 1) over "
              f"the replicates D of its statistic ({draws}). A test is decided iff its interval [diff_lo, "
              f"diff_hi] (percentile interval of D at level ci_level) excludes 0, the same event as "
              f"p_adjusted < alpha. Other metrics form their own families, controlled the same way.")
    if t_reading:
        common = (f"Each test's bootstrap two-sided p-value p = (2 min(#(D<=0), #(D>=0)) + 1) / (reps + 1) over the "
                  f"replicates D of its statistic ({draws}) is read on Student's t with the test's effective degrees "
                  f"of freedom nu (Welch-Satterthwaite over its tasks' variance contributions): 2 P(T_nu > "
                  f"Phi^-1(1 - p/2)); where no replicate lies on the other side of 0, 2 P(T_nu > |diff_point| / "
                  f"diff_se) when that is smaller (the t reading carried past the replicates). A test is decided iff "
                  f"its interval [diff_lo, diff_hi] excludes 0, the same event as p_adjusted < alpha: the percentile "
                  f"interval of D at the level whose t reading is 1 - ci_level or, where no replicate resolves that "
                  f"level, diff_point -/+ t_nu^-1((1 + ci_level) / 2) diff_se widened to cover every replicate. "
                  f"Other metrics form their own families, controlled the same way.")
    if correction == "bonferroni":
        return (f"Bonferroni over {family}: every test at level {alpha:g}/{m}, so the family-wise error rate is "
                f"at most {alpha:g}. p_adjusted = min(1, {m} p). " + common)
    if correction == "holm":
        return (f"Holm step-down over {family}: the k-th smallest p-value is tested at level {alpha:g}/({m} - k + 1) "
                f"until the first failure, so the family-wise error rate is at most {alpha:g}. " + common)
    return (f"Westfall-Young step-down min-P over {family}, on the joint bootstrap replicates (the same "
            f"replicate index for every test): the k-th smallest p-value is compared with the distribution of "
            f"the smallest replicate p-value among the tests not yet decided, until the first failure, so the "
            f"family-wise error rate is at most {alpha:g} and dependence between tests (shared algorithms, "
            f"paired budgets) is used instead of assumed away. " + common)


def interval_at(diffs: np.ndarray, k: int) -> tuple[float, float]:
    """[``k``-th smallest, ``k``-th largest] of ``diffs`` (shape ``(reps,)``), ``1 <= k <= reps``.

    With ``k = FamilyDecision.tail_limits[i]`` this is the percentile interval dual to the decision: its lower
    end is > 0 iff ``#{D <= 0} < k`` and its upper end < 0 iff ``#{D >= 0} < k``. ``k = 0`` (a level that
    ``reps`` replicates cannot resolve; audits refuse such replicate counts) gives ``(-inf, inf)``.
    """
    n = diffs.size
    if int(k) < 1:
        return -math.inf, math.inf
    k = min(int(k), n)
    lo = float(np.partition(diffs, k - 1)[k - 1])
    hi = float(-np.partition(-diffs, k - 1)[k - 1])
    return lo, hi


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
