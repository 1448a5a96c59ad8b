"""How many runs per task would decide an inconclusive ordering, at the effect observed.

Method (normal approximation on the bootstrap standard error). Under the stratified bootstrap the
standard error of ``metric(A) - metric(B)`` shrinks as ``1 / sqrt(n)`` when every task's run count is
multiplied by the same factor. With observed difference ``d``, bootstrap standard error ``se`` at the
current ``n`` runs per task, the two-sided critical value ``z = Phi^-1(1 - alpha / (2 m))`` of the
Bonferroni level over the audit's ``m`` orderings (the strictest level any ordering meets under Holm, so
the estimate is enough under either correction) and ``z_power = Phi^-1(power)``::

    n* = ceil(n * ((z + z_power) * se / |d|) ** 2)

is the number of runs per task at which, if the true difference were ``d``, the study would decide the
pair with probability ``power``. When run counts differ, ``n`` is the largest count of the two algorithms
(all counts scaled by the same factor; the estimate is then conservative for the smaller ones). An
estimate above the cap, or a zero effect, is reported as ``> cap``.
"""

from __future__ import annotations

import math

from scipy.stats import norm


def method_description(alpha: float, m: int, power: float, cap: int) -> str:
    """One sentence describing the estimate, written to ``audit.json`` (``settings.runs_needed_method``)."""
    return (f"normal approximation with the bootstrap standard error scaled as 1/sqrt(n): "
            f"n* = ceil(n * ((z + z_power) * se / |diff|)^2) with z = Phi^-1(1 - {alpha:g}/(2*{m})) "
            f"(Bonferroni level over the {m} orderings) and z_power = Phi^-1({power:g}); n = current runs "
            f"per task (largest of the pair); estimates above {cap} or at a zero effect are reported as > {cap}")


def runs_needed(diff_point: float, se: float, n_runs: int, alpha: float, m: int, power: float = 0.8,
                cap: int = 1_000) -> tuple[int, bool]:
    """Runs per task that would decide the pair at the observed effect.

    Args:
        diff_point: observed ``metric(A) - metric(B)``.
        se: bootstrap standard error of the difference at ``n_runs`` runs per task.
        n_runs: current runs per task (largest of the two algorithms when they differ).
        alpha: family-wise error rate of the audit.
        m: number of orderings in the family (pairs x budgets).
        power: probability of deciding at the returned run count if the true difference is ``diff_point``.
        cap: largest value reported as a number.

    Returns:
        ``(n_star, capped)``; when ``capped`` is true, ``n_star == cap`` and the estimate is "> cap".
        ``n_star`` is at least ``n_runs + 1`` (the pair was not decided at ``n_runs``).
    """
    if not (se > 0) or diff_point == 0 or not math.isfinite(diff_point):
        return cap, True
    z = norm.ppf(1.0 - alpha / (2.0 * m)) + norm.ppf(power)
    n_float = n_runs * (z * se / abs(diff_point)) ** 2
    if not math.isfinite(n_float) or n_float > cap:
        return cap, True
    n_star = max(math.ceil(n_float), n_runs + 1)
    if n_star > cap:
        return cap, True
    return int(n_star), False
