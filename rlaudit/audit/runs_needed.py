"""How many runs per task would decide an inconclusive ordering.

Method (the bootstrap standard error scaled as ``1 / sqrt(n)``). Under the stratified bootstrap the
standard error of ``metric(A) - metric(B)`` shrinks as ``1 / sqrt(n)`` when every task's run count is
multiplied by the same factor. The standard error ``se`` is that of the audit's bootstrap scheme (the
expanded bootstrap by default, whose variance is not biased low at few runs; the plain percentile
bootstrap's ``se`` is ``sqrt((n - 1) / n)`` too small and its estimate too optimistic). With an effect
``d``, the two-sided critical value ``q = Phi^-1(1 - alpha / (2 m))`` of the Bonferroni level over the
audit's ``m`` tests (the strictest level any test meets under Holm or max-T, so the estimate is enough
under each correction) and ``q_power = Phi^-1(power)``::

    n* = ceil(n * ((q + q_power) * se / |d|) ** 2)

is the number of runs per task at which, if the true difference were ``d``, the study would decide the pair
with probability ``power``. The expanded scheme reads its decisions on Student's t with the statistic's
effective degrees of freedom ``nu`` (Welch-Satterthwaite over the tasks' degrees of freedom, ``g(n)`` each:
``rlaudit.stats.bootstrap.task_dfs``), and so does the estimate there: both quantiles are Student's t at
``nu(n*) = nu * g(n*) / g(n)`` (every task's variance contribution scales alike, so their Welch-Satterthwaite
ratio does not change; ``g(n) = n - 1`` until 2026-12-07, ``max(n - 3, (n - 1) / 2)`` since, or half of
``n - 1`` where collapsing seeds are found), and ``se`` is planned on at its
median-unbiased value ``se * sqrt(nu / chi2_nu(0.5))`` (``chi2_nu(0.5)`` the median of chi-square with ``nu``
degrees of freedom): a pilot's squared standard error is a scaled chi-square draw, below the true one more
often than not and the more so the fewer its degrees of freedom (factor 1.44 on ``n*`` at ``nu = 2``, 1.19 at
4, 1.07 at 10), and ``n*`` planned on the plain estimate fell short of its power. ``n*`` is the smallest run
count that meets the inequality. The audit decides past its bootstrap replicates on ``|d| / se`` read on the
same t (``rlaudit.audit.engine.member_p_value``), so the smallest p-value the replicates resolve does not bound
what more runs can decide (until 2026-12-06 it did, and the estimate waited for a run count where that floor's
t reading was below the level). Power achieved by following the estimate is measured in
``bench/bench_audit_calibration.py --rn-only`` (``docs/audit.md``, Runs needed): with few runs and many tests
the normal quantiles promised 80 % and gave about 50 %, the t quantiles on the plain ``se`` 74-85 %, and on the
median-unbiased one 81-98 % (5, 10 and 26 tasks x 2-5 runs, four data shapes). ``d`` is ``--min-effect`` when
given, else the observed difference; the *range* reports ``n*`` at the two ends of the ordering's interval (the
end farther from 0 gives the fewest runs; an interval that contains 0 gives no upper end: "> cap"). When run
counts differ, ``n`` is the largest count of the two algorithms (all counts scaled by the same factor; the
estimate is then conservative for the smaller ones). An estimate above the cap, or a zero effect, is reported
as ``> cap``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import chi2, norm
from scipy.stats import t as student_t

from rlaudit.stats import bootstrap


def method_description(alpha: float, m: int, power: float, cap: int, min_effect: float | None = None,
                       t_reading: bool = False) -> str:
    """One sentence describing the estimate, written to ``audit.json`` (``settings.runs_needed_method``);
    ``t_reading``: the quantiles are Student's t (the expanded scheme)."""
    effect = f"|diff| = the smallest effect of interest {min_effect:g}" if min_effect else "|diff| = the observed difference"
    if t_reading:
        quantiles = (f"q = the upper {alpha:g}/(2*{m}) quantile (Bonferroni level over the {m} tests) and q_power = "
                     f"the {power:g} quantile, both of Student's t with the pair's effective degrees of freedom nu "
                     "scaled to n' runs (nu * g(n') / g(n), g a task's degrees of freedom: the expanded scheme reads "
                     "its decisions on t), "
                     "and se the median-unbiased standard error se * sqrt(nu / chi2_nu(0.5)); n* = the smallest n' > "
                     "n that meets it (the audit decides past the bootstrap replicates on |diff|/se, so no replicate "
                     "floor bounds it)")
    else:
        quantiles = (f"q = Phi^-1(1 - {alpha:g}/(2*{m})) (Bonferroni level over the {m} tests) and "
                     f"q_power = Phi^-1({power:g}); n* = the smallest n' > n that meets it")
    return (f"the bootstrap standard error scaled as 1/sqrt(n): n' >= n * ((q + q_power) * se / |diff|)^2 with "
            f"{quantiles}; {effect}; range: n* at the two ends of the ordering's interval; n = current runs per "
            f"task (largest of the pair); estimates above {cap} or at a zero effect are reported as > {cap}")


def scaled_df(df: float, n_runs: int, n, df_scale: float = 1.0):
    """The effective degrees of freedom ``df`` measured at ``n_runs`` runs per task, at ``n`` runs (a number or an
    array): ``df * g(n) / g(n_runs)`` with ``g`` a task's count (``rlaudit.stats.bootstrap.task_dfs``)."""
    return df * bootstrap.task_dfs(np.atleast_1d(n), df_scale) / bootstrap.task_dfs([n_runs], df_scale)[0]


def runs_needed(diff_point: float, se: float, n_runs: int, alpha: float, m: int, power: float = 0.8,
                cap: int = 1_000, df: float = math.inf, df_scale: float = 1.0) -> tuple[int, bool]:
    """Runs per task that would decide the pair if the true effect were ``diff_point``.

    Args:
        diff_point: the effect: the observed ``metric(A) - metric(B)`` or a smallest effect of interest.
        se: bootstrap standard error of the difference at ``n_runs`` runs per task.
        n_runs: current runs per task (largest of the two algorithms when they differ).
        alpha: family-wise error rate of the audit.
        m: number of tests in the family.
        power: probability of deciding at the returned run count if the true difference is ``diff_point``.
        cap: largest value reported as a number.
        df: effective degrees of freedom of the difference at ``n_runs`` when decisions are read on Student's
            t (the expanded scheme; ``se`` is then planned on at its median-unbiased value); ``inf``: normal
            quantiles and ``se`` as given.
        df_scale: the data shape's factor on each task's ``n - 1`` (``rlaudit.stats.bootstrap.task_dfs``), so
            that ``df`` grows with the run count as the audit's own reading would.

    Returns:
        ``(n_star, capped)``; when ``capped`` is true, ``n_star == cap`` and the estimate is "> cap".
        ``n_star`` is at least ``n_runs + 1`` (the pair was not decided at ``n_runs``).
    """
    if not (se > 0) or diff_point == 0 or not math.isfinite(diff_point):
        return cap, True
    ratio = se / abs(diff_point)
    if math.isfinite(df) and df > 0 and n_runs >= 2:
        n = np.arange(n_runs + 1, cap + 1)
        if n.size == 0:
            return cap, True
        nu = scaled_df(df, n_runs, n, df_scale)
        q_level = student_t.isf(alpha / (2.0 * m), nu)
        median_unbiased = df / chi2.median(df)  # on se squared (module docstring)
        meets = n >= n_runs * ((q_level + student_t.ppf(power, nu)) * ratio) ** 2 * median_unbiased
        return (int(n[np.argmax(meets)]), False) if meets.any() else (cap, True)
    z = norm.ppf(1.0 - alpha / (2.0 * m)) + norm.ppf(power)
    n_float = n_runs * (z * ratio) ** 2
    if not math.isfinite(n_float) or n_float > cap:
        return cap, True
    n_star = max(math.ceil(n_float), n_runs + 1)
    if n_star > cap:
        return cap, True
    return int(n_star), False


def runs_needed_range(lo: float, hi: float, se: float, n_runs: int, alpha: float, m: int, power: float = 0.8,
                      cap: int = 1_000, df: float = math.inf, df_scale: float = 1.0) -> tuple[int, int | None]:
    """``n*`` over an effect's interval ``[lo, hi]``: ``(fewest, most)``; ``most`` is ``None`` ("> cap")
    when the interval contains 0 or its near end needs more than ``cap``."""
    far, near = max(abs(lo), abs(hi)), min(abs(lo), abs(hi))
    fewest, _ = runs_needed(far, se, n_runs, alpha, m, power, cap, df, df_scale)
    if lo <= 0 <= hi:
        return fewest, None
    most, capped = runs_needed(near, se, n_runs, alpha, m, power, cap, df, df_scale)
    return fewest, None if capped else most
