"""Stratified bootstrap engine: replicates of aggregate metrics, confidence intervals, seeded RNG streams.

Scheme (rliable's ``StratifiedBootstrap`` with ``task_bootstrap=False``): one bootstrap replicate resamples,
*within each task independently*, ``n_runs_m`` runs with replacement from that task's ``n_runs_m`` runs,
and evaluates the metric on the resampled score set. Tasks are never resampled.

Engine: a replicate is represented by the multiplicity of every run (``counts``, shape
``(batch, n_scores)`` where ``n_scores = sum_m n_runs_m``), so every metric is an O(n_scores) pass with no
sort per replicate:

- per-task means are ``sum(counts * scores) / n_runs_m`` over the task's runs (``np.add.reduceat``);
- the IQM trims the pooled sample by walking the runs in a fixed global sorted order and clipping the
  cumulative counts to ``[k, n_scores - k]`` (``k = floor(0.25 * n_scores)``, scipy's ``trim_mean``);
  the kept sum then follows by summation by parts (see ``_Layout.iqm``).

Random numbers: each replicate consumes exactly ``n_scores`` uniform doubles from the generator, drawn in
replicate-major order (``rng.random((batch, n_scores))``; the run index is ``floor(u * n_runs_m)``), so
the numbers do not depend on the batch size: replicate ``r`` is the same whether it is computed in a
batch of 1 or of 50,000 (tested bit for bit).

Memory: a batch holds about ten ``(batch, n_scores)`` arrays of 8-byte numbers; the default batch keeps
``batch * n_scores <= MAX_BATCH_ELEMENTS`` (2**16), i.e. about 5 MiB of temporaries whatever ``reps``
is, plus the ``(reps, n_metrics)`` result.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import norm, t as student_t

from rlaudit.stats.metrics import METRICS, TRIM, aggregate, as_score_set, check_metric

MAX_BATCH_ELEMENTS = 1 << 16
"""Upper bound on ``batch * n_scores`` for the default batch size."""

from rlaudit.stats.schemes import CI_METHODS, DEFAULT_REPS, INTERVAL_METHODS  # noqa: F401 (re-exported)


# ------------------------------------------------------------------------------------------ RNG streams

def stable_key(key) -> int:
    """A stable 64-bit integer for ``key`` (``str(key)`` hashed with BLAKE2b; independent of PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.blake2b(str(key).encode("utf-8"), digest_size=8).digest(), "little")


def rng_for(seed: int, *keys) -> np.random.Generator:
    """An independent, deterministic random generator for ``(seed, *keys)``.

    The stream is ``PCG64(SeedSequence(seed, spawn_key=(stable_key(k) for k in keys)))``. It depends only on
    the seed and the keys (e.g. ``"aggregate", budget, algorithm``), never on which other algorithms,
    budgets or pairs are in the same audit or on the order they are processed, so adding an algorithm does
    not change another algorithm's interval. Keys are compared through ``str(key)``.

    Args:
        seed: the user's ``--seed`` (non-negative integer).
        *keys: any values naming the stream.

    Returns:
        A fresh ``np.random.Generator``.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    ss = np.random.SeedSequence(int(seed), spawn_key=tuple(stable_key(k) for k in keys))
    return np.random.Generator(np.random.PCG64(ss))


# --------------------------------------------------------------------------------------------- engine

class _Layout:
    """Flattened score set: ``scores`` (n_scores,), task ``offsets`` (n_tasks,), ``n_runs`` (n_tasks,)."""

    def __init__(self, arrays: list[np.ndarray]):
        self.n_runs = np.array([a.size for a in arrays], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.n_runs)[:-1]]).astype(np.int64)
        self.scores = np.concatenate(arrays)
        self.n_scores = int(self.scores.size)
        self.n_tasks = len(arrays)
        # Per-score task size and offset, for turning uniforms into run indices.
        self.n_rep = np.repeat(self.n_runs, self.n_runs)
        self.off_rep = np.repeat(self.offsets, self.n_runs)
        self.n_rep_f = self.n_rep.astype(np.float64)
        # Pooled sort order for the IQM.
        self.order = np.argsort(self.scores, kind="stable")
        self.sorted_scores = self.scores[self.order]
        self.k_trim = int(TRIM * self.n_scores)
        self.sorted_steps = self.sorted_scores[:-1] - self.sorted_scores[1:]  # (n_scores - 1,), <= 0
        self._base_cache: np.ndarray | None = None

    def draw_counts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Multiplicities of each run in ``n`` stratified resamples, shape ``(n, n_scores)`` (int64)."""
        u = rng.random((n, self.n_scores))
        # floor(u * n_runs) < n_runs for every double u < 1 (the product rounds below n_runs), so no clip.
        idx = (u * self.n_rep_f).astype(np.int64)
        idx += self._base(n)
        return np.bincount(idx.ravel(), minlength=n * self.n_scores).reshape(n, self.n_scores)

    def _base(self, n: int) -> np.ndarray:
        """Flat index of the first run of each score's task in each of ``n`` rows, shape ``(n, n_scores)``."""
        if self._base_cache is None or self._base_cache.shape[0] != n:
            self._base_cache = self.off_rep + (np.arange(n, dtype=np.int64) * self.n_scores)[:, None]
        return self._base_cache

    def task_means(self, counts: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Per-task means of ``values`` (default ``scores``) under ``counts``, shape ``(n, n_tasks)``."""
        v = self.scores if values is None else values
        return np.add.reduceat(counts * v, self.offsets, axis=1) / self.n_runs

    def metrics(self, counts: np.ndarray, metrics: Sequence[str], gamma: float) -> np.ndarray:
        """Metric values for each resample in ``counts``, shape ``(n, len(metrics))``."""
        out = np.empty((counts.shape[0], len(metrics)))
        means = None
        for j, metric in enumerate(metrics):
            if metric in ("mean", "median"):
                if means is None:
                    means = self.task_means(counts)
                out[:, j] = means.mean(axis=1) if metric == "mean" else _row_median(means)
            elif metric == "og":
                out[:, j] = gamma - self.task_means(counts, np.minimum(self.scores, gamma)).mean(axis=1)
            else:  # iqm
                out[:, j] = self.iqm(counts)
        return out

    def iqm(self, counts: np.ndarray) -> np.ndarray:
        """25 %-trimmed mean of each pooled resample, shape ``(n,)``.

        With ``C_j = clip(copies of sorted scores 0..j, k, n_scores - k)`` the copies of sorted score ``j``
        inside the kept middle are ``C_j - C_{j-1}`` (``C_{-1} = k``), so by summation by parts the kept sum
        is ``sum_{j<last} C_j (x_j - x_{j+1}) + (n_scores - k) x_last - k x_0``: one clip, one product.
        """
        k, top = self.k_trim, self.n_scores - self.k_trim
        c = np.cumsum(np.take(counts, self.order, axis=1), axis=1)
        np.maximum(c, k, out=c)
        np.minimum(c, top, out=c)
        kept = (c[:, :-1] * self.sorted_steps).sum(axis=1)
        kept += top * self.sorted_scores[-1] - k * self.sorted_scores[0]
        return kept / (top - k)


def _row_median(a: np.ndarray) -> np.ndarray:
    """Median of each row (as ``np.median(a, axis=1)``; a full sort is faster for short rows)."""
    s = np.sort(a, axis=1)
    mid = a.shape[1] // 2
    return s[:, mid] if a.shape[1] % 2 else (s[:, mid - 1] + s[:, mid]) / 2


def default_batch(n_scores: int) -> int:
    """Default number of replicates per batch for a score set with ``n_scores`` run scores."""
    return max(1, MAX_BATCH_ELEMENTS // max(1, n_scores))


def replicates(score_set, metrics: Sequence[str], reps: int, rng: np.random.Generator, gamma: float = 1.0,
               batch: int | None = None) -> np.ndarray:
    """Stratified-bootstrap replicates of aggregate metrics.

    Args:
        score_set: one array of shape ``(n_runs_m,)`` per task, or a matrix ``(n_runs, n_tasks)``.
        metrics: names from :data:`~rlaudit.stats.metrics.METRICS`.
        reps: number of bootstrap replicates.
        rng: the generator to draw from (see :func:`rng_for`); it is advanced by ``reps * n_scores`` doubles.
        gamma: optimality-gap threshold.
        batch: replicates per batch (memory bound); ``None`` = :func:`default_batch`. The result does not
            depend on it.

    Returns:
        Array of shape ``(reps, len(metrics))``; column ``j`` holds the replicates of ``metrics[j]``.
    """
    metrics = [check_metric(m) for m in metrics]
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    lay = _Layout(as_score_set(score_set))
    batch = default_batch(lay.n_scores) if batch is None else int(batch)
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    out = np.empty((reps, len(metrics)))
    for start in range(0, reps, batch):
        n = min(batch, reps - start)
        out[start:start + n] = lay.metrics(lay.draw_counts(n, rng), metrics, gamma)
    return out


def joint_replicates(score_sets: Sequence, metrics: Sequence[str], reps: int, rng: np.random.Generator,
                     gamma: float = 1.0, batch: int | None = None) -> np.ndarray:
    """Stratified-bootstrap replicates of several score sets that share their runs (paired budgets).

    The same runs read at several budgets (nested regimes, published curves) are resampled *jointly*: one
    matrix of run multiplicities per replicate, applied to every score set, so replicate ``r`` of budget 1
    and of budget 2 hold the same runs and differences between budgets keep the run-to-run correlation.
    With one score set this is :func:`replicates` (same draws, bit for bit).

    Args:
        score_sets: ``n_sets`` score sets with identical layout (task ``m`` has the same ``n_runs_m`` runs in
            every set, in the same run order), each one array of shape ``(n_runs_m,)`` per task.
        metrics: names from :data:`~rlaudit.stats.metrics.METRICS`.
        reps: number of bootstrap replicates.
        rng: the generator to draw from; advanced by ``reps * n_scores`` doubles whatever ``n_sets`` is.
        gamma: optimality-gap threshold.
        batch: replicates per batch (memory bound); the result does not depend on it.

    Returns:
        Array of shape ``(n_sets, reps, len(metrics))``.
    """
    metrics = [check_metric(m) for m in metrics]
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    layouts = [_Layout(as_score_set(s)) for s in score_sets]
    if not layouts:
        raise ValueError("no score sets")
    first = layouts[0]
    for lay in layouts[1:]:
        if not np.array_equal(lay.n_runs, first.n_runs):
            raise ValueError("joint replicates need the same number of runs per task in every score set")
    batch = default_batch(first.n_scores) if batch is None else int(batch)
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    out = np.empty((len(layouts), reps, len(metrics)))
    for start in range(0, reps, batch):
        n = min(batch, reps - start)
        counts = first.draw_counts(n, rng)
        for i, lay in enumerate(layouts):
            out[i, start:start + n] = lay.metrics(counts, metrics, gamma)
    return out


def expand_runs(score_set) -> list[np.ndarray]:
    """Each task's runs spread about their mean by ``sqrt(n_m / (n_m - 1))`` (the expanded bootstrap).

    Resampling ``n_m`` runs with replacement gives a task mean whose bootstrap variance is ``(n_m - 1) / n_m``
    of the unbiased estimate ``s_m^2 / n_m``: intervals 18 % too narrow at 3 runs, 11 % at 5. Resampling the
    expanded runs removes that factor (Hesterberg 2015, "What teachers should know about the bootstrap",
    section 3.2). Tasks with a single run are left as they are.

    Args:
        score_set: one array of shape ``(n_runs_m,)`` per task, or a matrix ``(n_runs, n_tasks)``.

    Returns:
        One array of shape ``(n_runs_m,)`` per task.
    """
    out = []
    for x in as_score_set(score_set):
        if x.size < 2:
            out.append(x.copy())
            continue
        mean = x.mean()
        out.append(mean + np.sqrt(x.size / (x.size - 1.0)) * (x - mean))
    return out


def variance_contributions(metric: str, score_set, gamma: float = 1.0) -> np.ndarray:
    """Each task's contribution to the variance of ``metric``'s estimate (delta method, unbiased per task).

    ``mean`` / ``og``: ``s_m^2 / (n_m T^2)`` with ``s_m^2`` the sample variance of task ``m``'s (clipped at
    ``gamma`` for ``og``) scores. ``median`` (an approximation: the median of task means moves only with the
    tasks near it): the same for the tasks whose mean lies between the quartiles of the task means, 0 for
    the others. ``iqm``: the trimmed mean's influence
    function is the score winsorised at the trimming points divided by the kept fraction, so the
    contribution is ``n_m w_m^2 / (n_scores kept)^2`` with ``w_m^2`` the sample variance of task ``m``'s
    winsorised scores. Tasks with one run contribute 0. They set the effective degrees of freedom of the
    expanded scheme (:func:`effective_df`).

    Args:
        metric: one of :data:`~rlaudit.stats.metrics.METRICS`.
        score_set: one array of shape ``(n_runs_m,)`` per task.
        gamma: optimality-gap threshold.

    Returns:
        Array of shape ``(n_tasks,)``.
    """
    arrays = as_score_set(score_set)
    n_tasks = len(arrays)
    out = np.zeros(n_tasks)
    if metric == "iqm":
        pooled = np.sort(np.concatenate(arrays))
        n = pooled.size
        k = int(TRIM * n)
        lo, hi = pooled[k], pooled[n - k - 1]
        for m, x in enumerate(arrays):
            if x.size > 1:
                out[m] = x.size * np.var(np.clip(x, lo, hi), ddof=1) / float(n - 2 * k) ** 2
        return out
    middle = np.ones(n_tasks, dtype=bool)
    if metric == "median":
        means = np.array([x.mean() for x in arrays])
        q1, q3 = np.quantile(means, (0.25, 0.75))
        middle = (means >= q1) & (means <= q3)
    for m, x in enumerate(arrays):
        if x.size > 1 and middle[m]:
            v = np.minimum(x, gamma) if metric == "og" else x
            out[m] = np.var(v, ddof=1) / (x.size * n_tasks ** 2)
    return out


DF_CUT = 2.0
"""Small-sample correction of the expanded scheme's t reading where no data shape's correction applies: each
task's ``n - 1`` degrees of freedom become ``max(n - 1 - DF_CUT, (n - 1) / 2)`` (2 runs 0.5, 3 runs 1, 5 runs 2,
10 runs 7). Chosen by measurement over every row of ``rlaudit.audit.calibration.CALIBRATION`` (docs/audit.md,
"The small-sample rule adopted"); ``0`` is Welch's ``n - 1``, the rule until 2026-12-07
(``bench/bench_audit_calibration.py --df-rule welch --collapse-rule floor`` measures it)."""


def task_dfs(sizes: Sequence[int], scale: float = 1.0) -> np.ndarray:
    """Each task's degrees of freedom in the expanded scheme's t reading, from its run counts ``sizes``: ``scale``
    times ``n - 1`` where a data shape's correction applies (``scale < 1``: ``rlaudit.audit.calibration.DF_SCALE``),
    else ``max(n - 1 - DF_CUT, (n - 1) / 2)``; the two corrections do not compound."""
    d = np.asarray(sizes, dtype=np.float64) - 1.0
    if scale < 1.0:
        return scale * d
    return np.maximum(d - DF_CUT, d / 2.0)


def effective_df(contributions: np.ndarray, dfs: np.ndarray) -> float:
    """Welch-Satterthwaite degrees of freedom ``(sum v)^2 / sum(v^2 / df)`` of a sum of independent variance
    estimates ``v`` (shape ``(n,)``) with ``dfs`` degrees of freedom each; ``inf`` when nothing varies."""
    v = np.asarray(contributions, dtype=np.float64)
    d = np.asarray(dfs, dtype=np.float64)
    keep = (v > 0) & (d > 0)
    if not keep.any():
        return math.inf
    v = v[keep] / np.max(v[keep])  # the ratio is scale-free; scaling keeps v^2 from overflowing for huge scores
    den = np.sum(v ** 2 / d[keep])
    return float(np.sum(v) ** 2 / den) if den > 0 else math.inf


def t_corrected_p(p, df: float):
    """A two-sided normal-theory p-value read on Student's t with ``df`` degrees of freedom instead:
    ``2 P(T_df > Phi^-1(1 - p / 2))`` (identity for ``df = inf``). Monotone in ``p``; never smaller."""
    p = np.asarray(p, dtype=np.float64)
    if not math.isfinite(df):
        return p
    return np.minimum(1.0, 2.0 * student_t.sf(norm.isf(p / 2.0), df))


def normal_level(level, df: float):
    """Inverse of :func:`t_corrected_p`: the two-sided normal-theory level whose t-corrected value is
    ``level`` (``2 Phi(-t_df^-1(1 - level / 2))``); identity for ``df = inf``."""
    level = np.asarray(level, dtype=np.float64)
    if not math.isfinite(df):
        return level
    return 2.0 * norm.sf(student_t.isf(level / 2.0, df))


def method_replicates(score_sets: Sequence, metrics: Sequence[str], reps: int, rng: np.random.Generator,
                      gamma: float = 1.0, method: str = "expanded") -> tuple[np.ndarray, np.ndarray]:
    """Point estimates and the replicates behind intervals and decisions for a bootstrap scheme.

    ``expanded``: replicates of the expanded runs (:func:`expand_runs`), shifted so that they are centred
    like those of the original runs (expanding moves the IQM and median slightly; the shift is
    ``point - metric(expanded runs)``). ``percentile`` and ``bca``: replicates of the original runs (rliable).
    The random draws are those of :func:`joint_replicates` for every method.

    Args:
        score_sets: ``n_sets`` score sets sharing their runs (see :func:`joint_replicates`); one set for
            a single budget.
        metrics: names from :data:`~rlaudit.stats.metrics.METRICS`.
        reps: number of bootstrap replicates.
        rng: the generator to draw from.
        gamma: optimality-gap threshold.
        method: one of :data:`CI_METHODS`.

    Returns:
        ``(points, values)``: shapes ``(n_sets, n_metrics)`` and ``(n_sets, reps, n_metrics)``.
    """
    if method not in CI_METHODS:
        raise ValueError(f"unknown bootstrap method {method!r}; expected one of {', '.join(CI_METHODS)}")
    sets = [as_score_set(s) for s in score_sets]
    points = np.array([[aggregate(m, s, gamma) for m in metrics] for s in sets]).reshape(len(sets), len(metrics))
    if method != "expanded":
        return points, joint_replicates(sets, metrics, reps, rng, gamma)
    expanded = [expand_runs(s) for s in sets]
    values = joint_replicates(expanded, metrics, reps, rng, gamma)
    centre = np.array([[aggregate(m, s, gamma) for m in metrics] for s in expanded]).reshape(points.shape)
    values += (points - centre)[:, None, :]
    return points, values


def jackknife(metric: str, score_set, gamma: float = 1.0) -> list[np.ndarray]:
    """Leave-one-run-out values of ``metric``, one array per task (for BCa's acceleration).

    Vectorised: the per-task means with one run left out are ``(sum_m - x_i) / (n_m - 1)``; the IQM of
    the pooled sample with one score left out follows from prefix sums of the sorted scores. Agrees with
    recomputing :func:`~rlaudit.stats.metrics.aggregate` on each reduced set to 1e-12 (tested).

    Args:
        metric: one of :data:`~rlaudit.stats.metrics.METRICS`.
        score_set: one array of shape ``(n_runs_m,)`` per task (every task needs at least 2 runs).
        gamma: optimality-gap threshold.

    Returns:
        A list with, for task ``m``, an array of shape ``(n_runs_m,)``: the metric with run ``i`` of task
        ``m`` deleted.
    """
    check_metric(metric)
    arrays = as_score_set(score_set)
    for m, a in enumerate(arrays):
        if a.size < 2:
            raise ValueError(f"task {m} has a single run; the jackknife needs at least 2")
    lay = _Layout(arrays)
    task = np.repeat(np.arange(lay.n_tasks), lay.n_runs)  # (n_scores,) task of each score
    if metric == "iqm":
        values = _jackknife_iqm(lay)
    else:
        x = np.minimum(lay.scores, gamma) if metric == "og" else lay.scores
        sums = np.add.reduceat(x, lay.offsets)
        means = np.broadcast_to(sums / lay.n_runs, (lay.n_scores, lay.n_tasks)).copy()  # row j: run j left out
        means[np.arange(lay.n_scores), task] = (sums[task] - x) / (lay.n_runs[task] - 1)
        if metric == "median":
            values = np.median(means, axis=1)
        else:
            values = means.mean(axis=1)
            if metric == "og":
                values = gamma - values
    return [values[o:o + n] for o, n in zip(lay.offsets, lay.n_runs)]


def _jackknife_iqm(lay: _Layout) -> np.ndarray:
    """IQM of the pooled scores with score ``j`` left out, for every ``j``, shape ``(n_scores,)``."""
    n = lay.n_scores - 1
    k = int(TRIM * n)
    a, b = k, n - k  # kept positions [a, b) of the reduced sorted sample
    xs = lay.sorted_scores
    prefix = np.concatenate([[0.0], np.cumsum(xs)])
    p = np.arange(lay.n_scores)  # sorted position left out
    # reduced index i is original i below p and i + 1 from p on
    kept = np.where(b <= p, prefix[b] - prefix[a],
                    np.where(a > p, prefix[b + 1] - prefix[a + 1], prefix[b + 1] - prefix[a] - xs))
    out = np.empty(lay.n_scores)
    out[lay.order] = kept / (b - a)
    return out


# ------------------------------------------------------------------------------------------ intervals

def interval(point: float, values: np.ndarray, confidence: float = 0.95, method: str = "percentile",
             jackknife_values: Sequence[np.ndarray] | np.ndarray | None = None) -> tuple[float, float]:
    """Two-sided bootstrap confidence interval.

    ``percentile``: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of ``values``
    (linear interpolation, as ``np.percentile``, arch and scipy).

    ``bca``: bias-corrected and accelerated (Efron & Tibshirani 1993, 14.3 and 15.4), computed exactly as
    ``scipy.stats.bootstrap(method="BCa")`` does: ``z0 = ndtri(mean(values < point, values <= point))``;
    the acceleration from the jackknife values of each sample (task), summed over samples
    ``a = sum_m sum_i U_mi^3 / n_m^3 / 6 (sum_m sum_i U_mi^2 / n_m^2)^1.5`` with
    ``U_mi = (n_m - 1)(mean_i theta_mi - theta_mi)``.

    Args:
        point: the point estimate (statistic on the original data).
        values: bootstrap replicates of the statistic, shape ``(reps,)``.
        confidence: coverage, in (0, 1).
        method: ``"percentile"`` or ``"bca"``.
        jackknife_values: for ``bca``: one array of leave-one-out values per sample (task), or one array for
            a single sample; see :func:`jackknife`.

    Returns:
        ``(lo, hi)`` as Python floats. When all replicates are equal the interval is that value.
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if values.size == 0:
        raise ValueError("no bootstrap values")
    alpha = (1.0 - confidence) / 2.0
    if method == "percentile":
        q = (alpha, 1.0 - alpha)
    elif method == "bca":
        if jackknife_values is None:
            raise ValueError("method='bca' needs jackknife_values")
        if values.min() == values.max():
            return float(values[0]), float(values[0])
        q = bca_levels(point, values, alpha, jackknife_values)
    else:
        raise ValueError(f"unknown interval method {method!r}; expected one of {', '.join(INTERVAL_METHODS)}")
    lo, hi = np.quantile(values, q)
    return float(lo), float(hi)


def bca_levels(point: float, values: np.ndarray, alpha: float,
               jackknife_values: Sequence[np.ndarray] | np.ndarray) -> tuple[float, float]:
    """BCa-adjusted quantile levels ``(alpha_1, alpha_2)`` for a two-sided ``1 - 2 alpha`` interval."""
    b = values.size
    z0 = ndtri((np.count_nonzero(values < point) + np.count_nonzero(values <= point)) / (2.0 * b))
    jk = [np.asarray(jackknife_values, dtype=np.float64)] if np.ndim(jackknife_values[0]) == 0 else \
        [np.asarray(j, dtype=np.float64) for j in jackknife_values]
    num = den = 0.0
    for theta in jk:
        n = float(theta.size)
        u = (n - 1.0) * (theta.mean() - theta)
        num += np.sum(u ** 3) / n ** 3
        den += np.sum(u ** 2) / n ** 2
    a = num / den ** 1.5 / 6.0 if den > 0 else 0.0
    z_lo, z_hi = ndtri(alpha), -ndtri(alpha)
    a1 = ndtr(z0 + (z0 + z_lo) / (1.0 - a * (z0 + z_lo)))
    a2 = ndtr(z0 + (z0 + z_hi) / (1.0 - a * (z0 + z_hi)))
    # A point estimate outside every replicate gives z0 = +-inf; the interval is then an end of the range.
    return float(np.nan_to_num(a1, nan=0.0)), float(np.nan_to_num(a2, nan=1.0))


def interval_estimates(score_sets: Mapping[str, Sequence[np.ndarray]], metrics: Sequence[str] = METRICS,
                       reps: int = DEFAULT_REPS, seed: int = 0, confidence: float = 0.95,
                       method: str = "percentile", gamma: float = 1.0, keys: Sequence = (),
                       ) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Point estimates and stratified-bootstrap intervals for several algorithms (rliable's
    ``get_interval_estimates``, seeded).

    Each algorithm draws from its own stream ``rng_for(seed, "aggregate", *keys, algorithm)``, so its
    interval depends only on its own scores, the seed and ``keys``, never on the other algorithms.

    Args:
        score_sets: algorithm -> score set (one array of shape ``(n_runs_m,)`` per task).
        metrics: names from :data:`~rlaudit.stats.metrics.METRICS`.
        reps: bootstrap replicates.
        seed: non-negative integer seed.
        confidence: interval coverage.
        method: a scheme of :data:`CI_METHODS`; ``"percentile"`` is rliable's.
        gamma: optimality-gap threshold.
        keys: extra stream keys (e.g. the budget) so that different cells of one audit draw independently.

    Returns:
        ``{algorithm: {metric: (point, lo, hi)}}``.
    """
    metrics = [check_metric(m) for m in metrics]
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for algorithm, score_set in score_sets.items():
        arrays = as_score_set(score_set)
        points, values = method_replicates([arrays], metrics, reps, rng_for(seed, "aggregate", *keys, algorithm),
                                           gamma, method)
        out[algorithm] = {}
        for j, metric in enumerate(metrics):
            out[algorithm][metric] = (float(points[0, j]),
                                      *scheme_interval(metric, arrays, points[0, j], values[0, :, j], confidence,
                                                       method, gamma))
    return out


def scheme_interval(metric: str, score_set, point: float, values: np.ndarray, confidence: float, method: str,
                    gamma: float = 1.0, df_scale: float = 1.0) -> tuple[float, float]:
    """Interval of one metric under a bootstrap scheme of :data:`CI_METHODS` from its replicates
    (``values``, shape ``(reps,)``, from :func:`method_replicates`).

    ``bca``: BCa. ``percentile``: rliable's percentile interval. ``expanded``: the percentile interval of the
    expanded replicates at the level whose t-corrected value is ``1 - confidence`` (Hesterberg's expanded
    percentile interval, with the Welch-Satterthwaite degrees of freedom of the per-task variances,
    :func:`effective_df`, in place of ``n - 1``; each task's count from :func:`task_dfs`, ``df_scale`` the
    smaller-sample correction the audit applies to data shapes on which Welch's normal-theory count overstates
    what a few runs say about their spread, ``rlaudit.audit.calibration``); where that level lies beyond the replicates
    (about df <= 2.3 at 50,000 replicates), the t interval of :func:`t_interval_past`.
    """
    if method == "bca":
        return interval(point, values, confidence, "bca", jackknife(metric, score_set, gamma))
    if method == "expanded":
        arrays = as_score_set(score_set)
        df = effective_df(variance_contributions(metric, arrays, gamma), task_dfs([a.size for a in arrays], df_scale))
        return expanded_interval(point, values, confidence, df)
    return interval(point, values, confidence, "percentile")


def expanded_interval(point: float, values: np.ndarray, confidence: float, df: float) -> tuple[float, float]:
    """The expanded scheme's interval from its replicates at ``df`` effective degrees of freedom: the percentile
    interval at the level whose t-corrected value is ``1 - confidence``, or past the replicates
    (:func:`t_interval_past`) where no percentile of them resolves that level."""
    level = float(normal_level(1.0 - confidence, df))
    # With very few degrees of freedom (one task of two runs: df = 1) the t-corrected level lies beyond
    # the last replicate (or underflows to 0): no percentile of these replicates resolves it.
    if level * values.size < 2.0:
        return t_interval_past(point, values, 1.0 - confidence, df)
    return interval(point, values, 1.0 - level, "percentile")


def t_interval_past(point: float, values: np.ndarray, alpha: float, df: float) -> tuple[float, float]:
    """The interval at a two-sided level ``alpha`` that no percentile of the replicates resolves, read on the
    expanded scheme's own premise (the statistic about normal, its spread read on Student's t with ``df``
    degrees of freedom): ``point -/+ t_df^-1(1 - alpha / 2) se``, ``se`` the replicates' standard deviation,
    widened to cover every replicate (a percentile interval at a level the replicates resolve never reaches
    past them, so the interval stays monotone in the level); ``(-inf, inf)`` when the replicates do not vary
    beyond rounding (a median sitting on one task whose runs tie: the per-task variances give df a spread the
    replicates never show, so there is no se to read).
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    se, q = replicate_se(values), float(student_t.isf(alpha / 2.0, df))
    if not (se > 0 and math.isfinite(q)):
        return -math.inf, math.inf
    return min(point - q * se, float(values.min())), max(point + q * se, float(values.max()))


def replicate_se(values: np.ndarray) -> float:
    """The replicates' standard deviation, the se the t reading past the replicates uses; 0 when they vary only
    by rounding (below 1e-9 of their magnitude), so that a p-value and an interval read past the replicates
    agree on whether there is a spread to read."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    se = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return se if se > 1e-9 * max(1.0, float(np.max(np.abs(values)))) else 0.0
