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


def _welch(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Standard error of ``mean(y) - mean(x)`` and Welch–Satterthwaite degrees of freedom."""
    vx, vy = np.var(x, ddof=1) / x.size, np.var(y, ddof=1) / y.size
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
    if x.size < 2 or y.size < 2:
        raise ValueError(f"need at least 2 scores per sample, got {x.size} and {y.size}")
    if not margin > 0:
        raise ValueError(f"margin must be positive, not {margin}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    rng = rng if rng is not None else np.random.default_rng(0)
    d = float(y.mean() - x.mean())
    se, df = _welch(x, y)
    if se == 0.0:
        p_diff = 0.0 if d != 0 else 1.0
        p_eq = 0.0 if abs(d) < margin and constant_is_exact else 1.0
    else:
        p_diff = float(2 * stats.t.sf(abs(d) / se, df))
        p_eq = float(max(stats.t.sf((d + margin) / se, df), stats.t.sf((margin - d) / se, df)))
    boot = (y[rng.integers(0, y.size, (reps, y.size))].mean(axis=1)
            - x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1))
    low, high = np.quantile(boot, [level / 2, 1 - level / 2])
    verdict = "different" if p_diff < level else "equivalent" if p_eq < level else "undetermined"
    return SampleComparison(int(x.size), int(y.size), float(x.mean()), float(y.mean()), d, (float(low), float(high)),
                            p_diff, p_eq, float(margin), verdict)


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
