"""Rank agreement between two rankings of the same algorithms: Kendall's τ-b, pointwise and vectorised.

Pure functions over arrays, no files, no global random state. Used by the joined published-vs-rerun audit
(:mod:`rlaudit.audit.agreement`) to say how far the ranking of a published comparison survives a rerun.
"""

from __future__ import annotations

import numpy as np


def kendall_tau(x, y) -> float:
    """Kendall's τ-b between two score vectors over the same items (ties handled as in τ-b).

    ``τ_b = (C - D) / sqrt((n0 - T_x) (n0 - T_y))`` with ``C``/``D`` the concordant/discordant pairs,
    ``n0 = n (n - 1) / 2`` and ``T_x``/``T_y`` the pairs tied in ``x``/``y``; equal to
    ``scipy.stats.kendalltau(x, y).statistic``. Only the orders of ``x`` and ``y`` matter.

    Args:
        x: scores of ``n`` items, shape ``(n,)`` (e.g. one aggregate per algorithm).
        y: scores of the same items in the same order, shape ``(n,)``.

    Returns:
        τ in [-1, 1]; NaN when ``n < 2`` or either vector is constant (τ-b is undefined).
    """
    return float(kendall_tau_rows(np.asarray(x, dtype=float)[None, :], np.asarray(y, dtype=float)[None, :])[0])


def kendall_tau_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's τ-b of each row pair: ``out[r] = kendall_tau(x[r], y[r])``, vectorised over rows.

    Rows are bootstrap replicates in the joined audit; the item count is small (algorithms), so the
    ``O(n²)`` pair enumeration per row is cheap and exact.

    Args:
        x: shape ``(n_rows, n)`` or ``(n,)`` (then broadcast against ``y``'s rows).
        y: shape ``(n_rows, n)`` or ``(n,)``.

    Returns:
        Shape ``(n_rows,)``; NaN for a row where τ-b is undefined.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.atleast_2d(np.asarray(y, dtype=float))
    x, y = np.broadcast_arrays(x, y)
    n = x.shape[1]
    if n < 2:
        return np.full(x.shape[0], np.nan)
    i, j = np.triu_indices(n, k=1)
    sx = np.sign(x[:, i] - x[:, j])
    sy = np.sign(y[:, i] - y[:, j])
    n0 = len(i)
    s = (sx * sy).sum(axis=1)  # concordant - discordant (pairs tied in either vector contribute 0)
    denom = np.sqrt((n0 - (sx == 0).sum(axis=1)) * (n0 - (sy == 0).sum(axis=1)).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, s / np.where(denom > 0, denom, 1.0), np.nan)
