"""Bootstrap rank distribution: the probability that each algorithm holds each rank."""

from __future__ import annotations

import numpy as np


def rank_probabilities(values: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """P(algorithm ``i`` holds rank ``j``) over bootstrap replicates; rank 1 (column 0) is the best.

    In each replicate, algorithms with equal values share the ranks they span evenly: two algorithms tied
    for first each get 1/2 of rank 1 and 1/2 of rank 2.

    Args:
        values: bootstrap replicates of one metric, shape ``(reps, n_algorithms)``; column ``i`` is
            algorithm ``i``. Replicates of different algorithms are paired only by row position, so draw
            them independently (rliable's independent resampling of each algorithm).
        higher_is_better: ``False`` for the optimality gap.

    Returns:
        Array of shape ``(n_algorithms, n_algorithms)``; row ``i`` sums to 1, and so does every column.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError(f"values must have shape (reps, n_algorithms), got {values.shape}")
    if np.isnan(values).any():
        raise ValueError("values contain NaN")
    reps, n = values.shape
    v = values if higher_is_better else -values
    better = (v[:, None, :] > v[:, :, None]).sum(axis=2)  # (reps, n): how many beat algorithm i
    tied = (v[:, None, :] == v[:, :, None]).sum(axis=2)  # including itself
    # Algorithm i spreads 1/tied over ranks better .. better + tied - 1 (0-based): a difference array.
    diff = np.zeros((n, n + 1))
    share = 1.0 / tied
    alg = np.broadcast_to(np.arange(n), (reps, n))
    np.add.at(diff, (alg, better), share)
    np.add.at(diff, (alg, better + tied), -share)
    return np.cumsum(diff, axis=1)[:, :n] / reps
