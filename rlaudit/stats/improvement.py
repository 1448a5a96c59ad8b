"""Average probability of improvement P(X > Y), as rliable defines it, and its stratified bootstrap.

For task ``m`` with runs ``x_1..x_nx`` of algorithm X and ``y_1..y_ny`` of algorithm Y,
``P_m(X > Y) = U_m / (nx * ny)`` where ``U_m = sum_ij [x_i > y_j] + 0.5 [x_i == y_j]`` is the Mann-Whitney
U statistic of X (ties count one half); ``P(X > Y)`` is the mean of ``P_m`` over tasks, each task
weighing the same. This equals ``rliable.metrics.probability_of_improvement`` (to 1e-12; tested).

Bootstrap (rliable's ``StratifiedIndependentBootstrap``): X and Y are resampled independently, runs
within each task with replacement. The engine works on ranks: per task, the pooled distinct values are
sorted once; a replicate is the multiplicity of each distinct value among the resampled X runs and
among the resampled Y runs, and ``U_m`` is ``sum_g cx_g * (cy_<g + cy_g / 2)`` with ``cy_<g`` a
cumulative sum. All of it is integer or half-integer arithmetic, so it is exact, vectorised over
replicates, and (like :func:`rlaudit.stats.bootstrap.replicates`) independent of the batch size.
"""

from __future__ import annotations

import numpy as np

from rlaudit.stats.metrics import as_score_set

DEFAULT_POI_REPS = 2_000
"""rliable's default number of replicates for the probability of improvement."""

MAX_BATCH_ELEMENTS = 1 << 16
"""Upper bound on ``batch * (n_scores_x + n_scores_y)`` for the default batch size."""


def _pair(x_set, y_set) -> tuple[list[np.ndarray], list[np.ndarray]]:
    xs, ys = as_score_set(x_set), as_score_set(y_set)
    if len(xs) != len(ys):
        raise ValueError(f"X has {len(xs)} tasks but Y has {len(ys)}; both score sets need the same tasks")
    return xs, ys


def task_probabilities(x_set, y_set) -> np.ndarray:
    """Per-task ``P_m(X > Y)``, shape ``(n_tasks,)``.

    Args:
        x_set: X's score set: one array of shape ``(n_runs_x_m,)`` per task, or ``(n_runs_x, n_tasks)``.
        y_set: Y's score set on the same tasks (run counts may differ from X's).
    """
    xs, ys = _pair(x_set, y_set)
    out = np.empty(len(xs))
    for m, (x, y) in enumerate(zip(xs, ys)):
        greater = np.count_nonzero(x[:, None] > y[None, :])
        ties = np.count_nonzero(x[:, None] == y[None, :])
        out[m] = (greater + 0.5 * ties) / (x.size * y.size)
    return out


def probability_of_improvement(x_set, y_set) -> float:
    """Average probability of improvement ``P(X > Y)`` (rliable's definition).

    Args:
        x_set: X's score set: one array of shape ``(n_runs_x_m,)`` per task, or ``(n_runs_x, n_tasks)``.
        y_set: Y's score set on the same tasks (run counts may differ from X's).

    Returns:
        The mean over tasks of ``P_m(X > Y)``, in [0, 1].
    """
    return float(np.mean(task_probabilities(x_set, y_set)))


class _RankLayout:
    """Per-task pooled distinct values of X and Y, flattened over tasks."""

    def __init__(self, xs: list[np.ndarray], ys: list[np.ndarray]):
        self.n_tasks = len(xs)
        self.nx = np.array([x.size for x in xs], dtype=np.int64)
        self.ny = np.array([y.size for y in ys], dtype=np.int64)
        group_x, group_y, n_groups = [], [], []
        start = 0
        for x, y in zip(xs, ys):
            values = np.unique(np.concatenate([x, y]))
            group_x.append(start + np.searchsorted(values, x))
            group_y.append(start + np.searchsorted(values, y))
            n_groups.append(values.size)
            start += values.size
        self.n_groups = start
        self.group_offsets = np.concatenate([[0], np.cumsum(n_groups)[:-1]]).astype(np.int64)
        self.group_task = np.repeat(np.arange(self.n_tasks), n_groups)
        self.group_x = np.concatenate(group_x)  # (n_scores_x,) global group of each X run
        self.group_y = np.concatenate(group_y)
        self.kx, self.ky = int(self.nx.sum()), int(self.ny.sum())
        self.nx_rep_f = np.repeat(self.nx, self.nx).astype(np.float64)
        self.ny_rep_f = np.repeat(self.ny, self.ny).astype(np.float64)
        self.offx_rep = np.repeat(np.concatenate([[0], np.cumsum(self.nx)[:-1]]), self.nx)
        self.offy_rep = np.repeat(np.concatenate([[0], np.cumsum(self.ny)[:-1]]), self.ny)
        self.pairs = (self.nx * self.ny).astype(np.float64)

    def _group_counts(self, u: np.ndarray, n_rep_f, off_rep, group_of) -> np.ndarray:
        n = u.shape[0]
        run = (u * n_rep_f).astype(np.int64)  # floor(u * n_runs) < n_runs for every double u < 1
        run += off_rep
        flat = group_of[run]
        flat += (np.arange(n, dtype=np.int64) * self.n_groups)[:, None]
        return np.bincount(flat.ravel(), minlength=n * self.n_groups).reshape(n, self.n_groups)

    def replicates(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((n, self.kx + self.ky))
        cx = self._group_counts(u[:, :self.kx], self.nx_rep_f, self.offx_rep, self.group_x)
        cy = self._group_counts(u[:, self.kx:], self.ny_rep_f, self.offy_rep, self.group_y)
        below = np.cumsum(cy, axis=1)
        below -= cy  # Y copies strictly below each group, counted from the first group of all tasks
        below -= below[:, self.group_offsets][:, self.group_task]  # ... restarted at each task
        u_stat = np.add.reduceat(cx * (below + 0.5 * cy), self.group_offsets, axis=1)  # (n, n_tasks)
        return (u_stat / self.pairs).mean(axis=1)


def poi_replicates(x_set, y_set, reps: int = DEFAULT_POI_REPS, rng: np.random.Generator | None = None,
                   batch: int | None = None) -> np.ndarray:
    """Stratified-bootstrap replicates of ``P(X > Y)``, X and Y resampled independently.

    Args:
        x_set: X's score set: one array of shape ``(n_runs_x_m,)`` per task, or ``(n_runs_x, n_tasks)``.
        y_set: Y's score set on the same tasks (run counts may differ from X's).
        reps: number of replicates (rliable's default 2,000).
        rng: generator (required; see :func:`rlaudit.stats.bootstrap.rng_for`). Each replicate consumes
            ``n_scores_x + n_scores_y`` doubles.
        batch: replicates per batch; ``None`` keeps ``batch * (n_scores_x + n_scores_y) <= 2**16``. The
            result does not depend on it.

    Returns:
        Array of shape ``(reps,)``.
    """
    if rng is None:
        raise ValueError("poi_replicates needs an explicit rng (see rlaudit.stats.bootstrap.rng_for)")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    lay = _RankLayout(*_pair(x_set, y_set))
    batch = max(1, MAX_BATCH_ELEMENTS // (lay.kx + lay.ky)) if batch is None else int(batch)
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    out = np.empty(reps)
    for start in range(0, reps, batch):
        n = min(batch, reps - start)
        out[start:start + n] = lay.replicates(n, rng)
    return out
