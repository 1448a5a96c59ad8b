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
