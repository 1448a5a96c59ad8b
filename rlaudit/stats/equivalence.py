"""Two samples of runs from the same distribution? The check a rerun on another machine gets.

On another machine a run's numbers differ (see :mod:`rlaudit.run.machine`), so a reproduction is judged on
the distribution of the runs' scores at each budget: the recorded runs' scores ``x`` (shape ``(n_x,)``) and
the retrained runs' scores ``y`` (shape ``(n_y,)``). Two tests, after Colas et al. (2018), "How many random
seeds? Statistical power analysis in deep RL experiments", who recommend Welch's t-test for runs:

- **difference**: Welch's two-sided t-test of equal means; *different* when its p-value is below the level;
- **equivalence**: two one-sided Welch tests (TOST, Schuirmann 1987) of ``|mean(y) - mean(x)| < margin``;
  *equivalent* when both reject at the level.

Neither rejecting is *undetermined*: with a few runs per side an equivalence within a tight margin is rarely
shown, and "no difference detected" is not "the same". The bootstrap interval of the difference of means
(the two samples resampled independently) is reported beside them for reading, not deciding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VERDICTS: tuple[str, ...] = ("equivalent", "different", "undetermined")
"""Verdicts of :func:`compare_samples`."""


@dataclass(frozen=True)
class SampleComparison:
    """Recorded runs' scores against retrained ones at one budget."""

    n_x: int
    """Recorded runs."""
    n_y: int
    """Retrained runs."""
    mean_x: float
    """Mean score of the recorded runs."""
    mean_y: float
    """Mean score of the retrained runs."""
    difference: float
    """``mean_y - mean_x``."""
    interval: tuple[float, float]
    """Bootstrap percentile interval of ``difference`` at the comparison's confidence."""
    p_different: float
    """Welch's two-sided p-value of equal means."""
    p_equivalent: float
    """TOST p-value (the larger one-sided p) of ``|difference| < margin``."""
    margin: float
    """Equivalence margin, in score units."""
    verdict: str
    """``equivalent``, ``different`` or ``undetermined`` (at the level given)."""


def _welch(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[float, float]:
    """Standard error of ``mean(y) - c * mean(x)`` and Welch–Satterthwaite degrees of freedom."""
    vx, vy = c * c * np.var(x, ddof=1) / x.size, np.var(y, ddof=1) / y.size
    se = float(np.sqrt(vx + vy))
    if se == 0.0:
        return 0.0, np.inf
    return se, float((vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1)))


def compare_samples(x, y, margin: float, level: float = 0.05, reps: int = 10_000,
                    rng: np.random.Generator | None = None, *, constant_is_exact: bool = True) -> SampleComparison:
    """Welch difference test, TOST equivalence test and a bootstrap interval for ``mean(y) - mean(x)``.

    Args:
        x: recorded scores, shape ``(n_x,)``, ``n_x >= 2``.
        y: retrained scores, shape ``(n_y,)``, ``n_y >= 2``.
        margin: equivalence margin (> 0, score units).
        level: test level (already corrected for multiplicity by the caller); the interval's confidence is
            ``1 - level``.
        reps: bootstrap replicates.
        rng: random generator of the bootstrap (default: ``np.random.default_rng(0)``).
        constant_is_exact: both samples constant mean the difference is exact (replays of the same runs,
            where every copy must score the same): *different* when non-zero, *equivalent* when within the
            margin. ``False`` for independent runs (other seeds, another implementation or backend), where
            constant samples are runs that all ended in one score (a policy collapsed to one outcome): equal
            constants are then *undetermined*, since a standard error of 0 would make TOST's p 0 at any n.

    Raises:
        ValueError: fewer than 2 scores on a side, a non-positive margin, or a level outside (0, 1).
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    _check(x, y, level)
    if not margin > 0:
        raise ValueError(f"margin must be positive, not {margin}")
    d, p_diff, interval = _difference(x, y, level, reps, rng)
    se, df = _welch(x, y)
    if se == 0.0:
        p_eq = 0.0 if abs(d) < margin and constant_is_exact else 1.0
    else:
        p_eq = float(max(stats.t.sf((d + margin) / se, df), stats.t.sf((margin - d) / se, df)))
    return _comparison(x, y, d, interval, p_diff, p_eq, float(margin), level)


def compare_relative(x, y, frac: float, level: float = 0.05, reps: int = 10_000,
                     rng: np.random.Generator | None = None) -> SampleComparison:
    """Welch difference test, and TOST of ``mean(y)`` within ``(1 ± frac) * mean(x)``: a margin relative to the
    reference ``x``'s mean, for independent runs.

    ``frac * mean(x)`` taken as a known margin in :func:`compare_samples` ignores that ``mean(x)`` is itself an
    estimate, and the TOST then shows equivalence at the margin's edge more often than its level
    (``bench/equivalence_calibration.py``, docs/backends.md). Here each one-sided test is a test of the linear
    contrast ``mean(y) - c * mean(x)``, ``c = 1 ± frac`` (the bounds swap when ``mean(x) < 0``), as in the
    ratio-of-means equivalence test of Hauschke, Kieser & Hothorn (1999), with Welch's standard error
    ``sqrt(var(y) / n_y + c**2 var(x) / n_x)`` and degrees of freedom instead of pooled ones: the standard error
    carries the reference mean's uncertainty. ``margin`` in the result is
    ``frac * |mean(x)|``; the difference test and the bootstrap interval are :func:`compare_samples`'s.

    Args:
        x: reference scores, shape ``(n_x,)``, ``n_x >= 2``.
        y: other scores, shape ``(n_y,)``, ``n_y >= 2``.
        frac: relative margin, > 0.
        level: test level; the interval's confidence is ``1 - level``.
        reps: bootstrap replicates.
        rng: random generator of the bootstrap (default: ``np.random.default_rng(0)``).

    Raises:
        ValueError: fewer than 2 scores on a side, a non-positive ``frac``, or a level outside (0, 1).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    _check(x, y, level)
    if not frac > 0:
        raise ValueError(f"frac must be positive, not {frac}")
    d, p_diff, interval = _difference(x, y, level, reps, rng)
    p_eq = _relative_p(x, y, frac)
    return _comparison(x, y, d, interval, p_diff, p_eq, frac * abs(float(x.mean())), level)


def _relative_p(x: np.ndarray, y: np.ndarray, frac: float) -> float:
    """TOST p-value of ``(1 - frac) mean(x) < mean(y) < (1 + frac) mean(x)`` (bounds swapped for a negative mean)."""
    from scipy import stats

    mx, my = float(x.mean()), float(y.mean())
    if mx == 0.0:
        return 1.0
    sign = 1.0 if mx > 0 else -1.0
    p = 0.0
    for c, upper in ((1 + sign * frac, True), (1 - sign * frac, False)):
        se, df = _welch(x, y, c)
        if se == 0.0:
            return 1.0  # constant samples of independent runs: no evidence (see compare_samples)
        t = (c * mx - my) / se if upper else (my - c * mx) / se
        p = max(p, float(stats.t.sf(t, df)))
    return p


def smallest_relative_margin(x, y, level: float = 0.05) -> float:
    """The narrowest ``frac`` within which :func:`compare_relative` shows equivalence at ``level`` with these
    samples (to 1e-4), shapes ``(n_x,)`` and ``(n_y,)``; ``inf`` when none up to 100 (``mean(x)`` too close to
    0 for a relative margin to mean anything)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    _check(x, y, level)
    if _relative_p(x, y, 100.0) >= level:
        return float("inf")
    low, high = 0.0, 100.0
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (low, mid) if _relative_p(x, y, mid) < level else (mid, high)
    return high


def _check(x: np.ndarray, y: np.ndarray, level: float) -> None:
    if x.size < 2 or y.size < 2:
        raise ValueError(f"need at least 2 scores per sample, got {x.size} and {y.size}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")


def _difference(x: np.ndarray, y: np.ndarray, level: float, reps: int,
                rng: np.random.Generator | None) -> tuple[float, float, tuple[float, float]]:
    """``mean(y) - mean(x)``, Welch's two-sided p-value of equal means and the bootstrap percentile interval."""
    from scipy import stats

    rng = rng if rng is not None else np.random.default_rng(0)
    d = float(y.mean() - x.mean())
    se, df = _welch(x, y)
    p_diff = (0.0 if d != 0 else 1.0) if se == 0.0 else float(2 * stats.t.sf(abs(d) / se, df))
    boot = (y[rng.integers(0, y.size, (reps, y.size))].mean(axis=1)
            - x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1))
    low, high = np.quantile(boot, [level / 2, 1 - level / 2])
    return d, p_diff, (float(low), float(high))


def _comparison(x, y, d, interval, p_diff, p_eq, margin, level) -> SampleComparison:
    verdict = "different" if p_diff < level else "equivalent" if p_eq < level else "undetermined"
    return SampleComparison(int(x.size), int(y.size), float(x.mean()), float(y.mean()), d, interval, p_diff, p_eq,
                            margin, verdict)


def smallest_margin(x, y, level: float = 0.05) -> float:
    """The narrowest margin within which TOST shows ``mean(y) - mean(x)`` equivalent at ``level`` with these
    samples: ``|difference| + t_{1-level, df} * se`` (Welch), shapes ``(n_x,)`` and ``(n_y,)``, ``n >= 2``.

    What a pair of samples can establish: a margin narrower than this is not shown equivalent, whatever the truth.
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2 or y.size < 2:
        raise ValueError(f"need at least 2 scores per sample, got {x.size} and {y.size}")
    d = float(y.mean() - x.mean())
    se, df = _welch(x, y)
    if se == 0.0:
        return abs(d)
    return abs(d) + float(stats.t.ppf(1 - level, df)) * se


@dataclass(frozen=True)
class ShiftTest:
    """Whether side ``b`` scores above side ``a`` across several algorithms on one task (:func:`shift_across`)."""

    n: int
    """Algorithms compared."""
    n_higher: int
    """Of them, those whose mean is higher on side ``b``."""
    z: float
    """Stouffer's combination ``sum(z_i) / sqrt(n)`` of the algorithms' one-sided Welch tests (``z_i`` the normal
    quantile of ``P(t > t_i)``)."""
    p_independent: float
    """Two-sided p of ``z`` read as standard normal: right only if the algorithms' runs are independent."""
    p_permutation: float | None
    """Two-sided p of ``|z|`` under seed-block permutation (the sides' seeds shuffled, each seed's runs of every
    algorithm kept together): right when the algorithms share seeds; ``None`` without per-seed scores."""
    correlation: float | None
    """Mean pairwise Spearman correlation between algorithms of their per-seed scores at a shared seed, within each
    side (how much a seed's luck is shared); ``None`` when fewer than 3 seeds are shared by two algorithms."""
    reps: int
    """Permutations drawn (0 without per-seed scores)."""
    splits: int
    """Distinct ways to split the seeds between the sides. ``|z|`` of a split and of its mirror image (the sides
    swapped, when they have as many seeds) are equal, so ``p_permutation`` cannot go below about ``2 / splits``:
    with 3 seeds a side (20 splits) it never reaches 0.05."""


def _welch_z(n_a, s_a, ss_a, n_b, s_b, ss_b) -> np.ndarray:
    """``z`` of the one-sided Welch test ``b > a`` from counts, sums and sums of squares (arrays, any shape); 0 where
    a side has fewer than 2 runs or both have no spread."""
    from scipy import stats

    with np.errstate(divide="ignore", invalid="ignore"):
        m_a, m_b = s_a / n_a, s_b / n_b
        v_a = np.maximum(ss_a - n_a * m_a ** 2, 0.0) / (n_a - 1) / n_a
        v_b = np.maximum(ss_b - n_b * m_b ** 2, 0.0) / (n_b - 1) / n_b
        se2 = v_a + v_b
        t = (m_b - m_a) / np.sqrt(se2)
        df = se2 ** 2 / (v_a ** 2 / (n_a - 1) + v_b ** 2 / (n_b - 1))
        z = np.sign(t) * stats.norm.isf(stats.t.sf(np.abs(t), df))  # symmetric: a mirrored split gives -z exactly
    return np.where((n_a >= 2) & (n_b >= 2) & (se2 > 0) & np.isfinite(z), z, 0.0)


def shift_across(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], reps: int = 10_000,
                 rng: np.random.Generator | None = None) -> ShiftTest:
    """Does side ``b`` (a backend, a machine) score above side ``a`` across algorithms, on one task?

    Args:
        a, b: ``algorithm -> {seed: score}`` of each side (the algorithms both sides ran). Within a side the runs
            of one seed share its randomness (the same network and environment seeds for every algorithm), so
            their scores may move together; each side's seeds are its own (``a``'s seed 3 is unrelated to
            ``b``'s seed 3).
        reps: permutations of the seeds between the sides.
        rng: draws the permutations (seeded ``default_rng(0)`` when ``None``: same stores, same p).

    Stouffer's z assumes the algorithms' tests independent. With shared seeds they are not: a correlation ``rho``
    between the tests makes ``z``'s variance about ``1 + (n - 1) rho``, and ``p_independent`` too small
    (``bench/shift_calibration.py`` measures by how much). ``p_permutation`` keeps its level either way: under
    "the two sides' runs come from one distribution" a side's seeds are exchangeable with the other's, each
    seed carrying all its algorithms' scores.
    """
    from scipy import stats

    names = [g for g in a if g in b]
    if not names:
        raise ValueError("no algorithm on both sides")
    units = [("a", s) for s in sorted({s for g in names for s in a[g]})] + \
            [("b", s) for s in sorted({s for g in names for s in b[g]})]
    x = np.full((len(units), len(names)), np.nan)
    for i, (side, seed) in enumerate(units):
        for j, g in enumerate(names):
            x[i, j] = (a if side == "a" else b)[g].get(seed, np.nan)
    present = ~np.isnan(x)
    x0 = np.where(present, x, 0.0)
    in_b = np.array([side == "b" for side, _ in units])

    def z_of(labels: np.ndarray) -> np.ndarray:  # labels (R, U) of side b -> z (R,)
        lb = labels.astype(float)
        la = 1.0 - lb
        zs = _welch_z(la @ present, la @ x0, la @ x0 ** 2, lb @ present, lb @ x0, lb @ x0 ** 2)
        return zs.sum(axis=1) / np.sqrt(len(names))

    z = float(z_of(in_b[None, :])[0])
    means = [(np.mean(list(a[g].values())), np.mean(list(b[g].values()))) for g in names]
    p_perm = None
    if reps > 0:
        rng = np.random.default_rng(0) if rng is None else rng
        labels = np.argsort(rng.random((reps, len(units))), axis=1) < in_b.sum()
        p_perm = float((1 + np.sum(np.abs(z_of(labels)) >= abs(z) - 1e-12)) / (1 + reps))
    rhos = []
    for side in ("a", "b"):
        rows = x[np.array([s == side for s, _ in units])]
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                both = ~np.isnan(rows[:, i]) & ~np.isnan(rows[:, j])
                if both.sum() >= 3 and np.ptp(rows[both, i]) > 0 and np.ptp(rows[both, j]) > 0:
                    rhos.append(stats.spearmanr(rows[both, i], rows[both, j])[0])
    return ShiftTest(len(names), int(sum(mb > ma for ma, mb in means)), z, float(2 * stats.norm.sf(abs(z))), p_perm,
                     float(np.mean(rhos)) if rhos else None, reps if p_perm is not None else 0,
                     math.comb(len(units), int(in_b.sum())))
