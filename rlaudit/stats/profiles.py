"""Performance profiles (rliable's score distributions) with stratified-bootstrap bands.

The profile at threshold ``tau`` is the fraction of runs scoring strictly above ``tau``. Each task weighs
the same: ``F(tau) = mean_m (1 / n_runs_m) * #{r : score_mr > tau}``. With equal run counts this is
rliable's ``create_performance_profile(use_score_distribution=True)`` (the fraction over all runs and
tasks pooled); with unequal counts pooling would let tasks with more runs dominate, so rlaudit keeps
task weights equal.

Bands resample runs within each task (rliable's scheme), 2,000 replicates by default, and report the
percentile interval at each ``tau`` separately (pointwise bands, as rliable).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlaudit.stats.bootstrap import _Layout, default_batch
from rlaudit.stats.metrics import as_score_set

DEFAULT_PROFILE_REPS = 2_000


def default_taus(all_scores: Sequence[np.ndarray] | np.ndarray, n: int = 101) -> np.ndarray:
    """``n`` evenly spaced thresholds from the lowest to the highest score, shape ``(n,)``.

    Pass the scores of *every* algorithm being compared so their profiles share one axis.

    Args:
        all_scores: any arrays of scores (e.g. every algorithm's score sets concatenated).
        n: number of thresholds (at least 2).
    """
    flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in all_scores]) \
        if not isinstance(all_scores, np.ndarray) else all_scores.astype(np.float64).reshape(-1)
    if flat.size == 0:
        raise ValueError("default_taus needs at least one score")
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    lo, hi = float(flat.min()), float(flat.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, n)


class _ProfileLayout:
    """Per-task sorted scores and, for each (task, tau), how many runs score <= tau."""

    def __init__(self, arrays: list[np.ndarray], taus: np.ndarray):
        self.lay = _Layout(arrays)  # resampling in the original run order, as every other replicate
        # Within each task, runs in ascending score order: a prefix sum of the resampled counts in that
        # order gives, for every threshold, how many resampled runs score <= tau.
        self.sorted_order = np.concatenate([o + np.argsort(a, kind="stable")
                                            for o, a in zip(self.lay.offsets, arrays)])
        # at_or_below[m, t] = number of runs of task m with score <= taus[t]
        self.at_or_below = np.stack([np.searchsorted(np.sort(a), taus, side="right") for a in arrays])
        self.gather = self.lay.offsets[:, None] + self.at_or_below  # index into the prefix-sum row

    def point(self) -> np.ndarray:
        n = self.lay.n_runs[:, None].astype(np.float64)
        return ((n - self.at_or_below) / n).mean(axis=0)

    def replicates(self, n: int, rng: np.random.Generator) -> np.ndarray:
        counts = np.take(self.lay.draw_counts(n, rng), self.sorted_order, axis=1)
        prefix = np.zeros((n, self.lay.n_scores + 1), dtype=np.int64)
        np.cumsum(counts, axis=1, out=prefix[:, 1:])
        below = prefix[:, self.gather] - prefix[:, self.lay.offsets][:, :, None]  # (n, n_tasks, n_taus)
        n_runs = self.lay.n_runs[None, :, None].astype(np.float64)
        return ((n_runs - below) / n_runs).mean(axis=1)


def performance_profile(score_set, taus: Sequence[float] | np.ndarray) -> np.ndarray:
    """Fraction of runs above each threshold, tasks weighted equally.

    Args:
        score_set: one array of shape ``(n_runs_m,)`` per task, or a matrix ``(n_runs, n_tasks)``.
        taus: thresholds, shape ``(n_taus,)``.

    Returns:
        Array of shape ``(n_taus,)`` with values in [0, 1], non-increasing in ``tau`` for sorted taus.
    """
    taus = np.asarray(taus, dtype=np.float64).reshape(-1)
    return _ProfileLayout(as_score_set(score_set), taus).point()


def profile_replicates(score_set, taus, reps: int, rng: np.random.Generator,
                       batch: int | None = None) -> np.ndarray:
    """Stratified-bootstrap replicates of the profile, shape ``(reps, n_taus)`` (batch-size independent)."""
    taus = np.asarray(taus, dtype=np.float64).reshape(-1)
    pl = _ProfileLayout(as_score_set(score_set), taus)
    if batch is None:
        batch = default_batch(pl.lay.n_scores + pl.lay.n_tasks * taus.size)
    out = np.empty((reps, taus.size))
    for start in range(0, reps, batch):
        n = min(batch, reps - start)
        out[start:start + n] = pl.replicates(n, rng)
    return out


def profile_bands(score_set, taus, reps: int = DEFAULT_PROFILE_REPS, rng: np.random.Generator | None = None,
                  confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Performance profile with pointwise percentile bands.

    Args:
        score_set: one array of shape ``(n_runs_m,)`` per task, or a matrix ``(n_runs, n_tasks)``.
        taus: thresholds, shape ``(n_taus,)``.
        reps: bootstrap replicates (rliable's default 2,000).
        rng: generator (required; see :func:`rlaudit.stats.bootstrap.rng_for`).
        confidence: band coverage at each ``tau``.

    Returns:
        ``(point, lo, hi)``, each of shape ``(n_taus,)``.
    """
    if rng is None:
        raise ValueError("profile_bands needs an explicit rng (see rlaudit.stats.bootstrap.rng_for)")
    taus = np.asarray(taus, dtype=np.float64).reshape(-1)
    point = performance_profile(score_set, taus)
    values = profile_replicates(score_set, taus, reps, rng)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    # The percentile interval of every threshold in one call (np.quantile per column, as interval() does);
    # one call per threshold dominated small audits.
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, (tail, 1.0 - tail), axis=0)
    return point, lo, hi
