"""Built-in against reference, per task, at one budget: difference of mean scores, bootstrap interval, TOST.

Scores are the per-run scores of the tidy table (mean return over the evaluation episodes at the budget),
``x`` the built-in's runs and ``y`` the reference's, shape ``(n_runs,)`` each, with the difference
``mean(y) - mean(x)``. Per task: Welch's test of equal means, the TOST equivalence test within the margin and
a seeded bootstrap percentile interval (:func:`rlaudit.stats.equivalence.compare_samples`), at level
``alpha / n_tasks`` (Bonferroni over the tasks, so the algorithm's verdict has family-wise error ``alpha``).

**The margin.** Equivalence is tested within ``margin_sd`` pooled standard deviations of the two samples'
scores (default 1: a difference smaller than the seed-to-seed spread of either implementation), a
standardised bound (Lakens 2017) because MinAtar's games have no common score scale and raw score gaps of a
"practically irrelevant" size differ 10x between games. It is estimated from the data, so the test is
approximate. With 10 runs a side and no true difference TOST shows equivalence within 1 SD with probability
about 0.1 (0.73 with 20 runs a side; ``bench/fidelity_power.py``, docs/fidelity.md), so "undetermined" is the
common outcome of a faithful pair at 10 seeds;
each row therefore also reports the smallest margin the data would have shown equivalence within
(``|d| + t_crit · se``), in points and in SDs, and runs accumulate across sittings. ``margin`` (score units,
per task) replaces the standardised bound when given.

Verdict of an algorithm: ``differs`` when any task differs, ``equivalent`` when every task is equivalent,
else ``undetermined``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

VERDICTS = ("equivalent", "differs", "undetermined")
"""Verdicts of one task and of an algorithm (``different`` of :mod:`rlaudit.stats.equivalence` reads ``differs``)."""


@dataclass(frozen=True)
class TaskFidelity:
    """One task's comparison."""

    task: str
    """Task id."""
    n_builtin: int
    """Runs of the built-in."""
    n_reference: int
    """Runs of the reference."""
    mean_builtin: float
    """Mean score of the built-in's runs."""
    sd_builtin: float
    """Standard deviation (ddof 1) of the built-in's scores."""
    mean_reference: float
    """Mean score of the reference's runs."""
    sd_reference: float
    """Standard deviation of the reference's scores."""
    difference: float
    """``mean_reference - mean_builtin``."""
    interval: tuple[float, float]
    """Bootstrap percentile interval of ``difference`` at confidence ``1 - level``."""
    p_different: float
    """Welch's two-sided p-value."""
    p_equivalent: float
    """TOST p-value."""
    margin: float
    """Equivalence margin in score units."""
    pooled_sd: float
    """Pooled standard deviation of the two samples."""
    shown_within: float
    """Smallest margin (score units) within which TOST at ``level`` shows equivalence on these data."""
    level: float
    """Test level (after Bonferroni over the tasks)."""
    verdict: str
    """``equivalent``, ``differs`` or ``undetermined``."""


@dataclass(frozen=True)
class Fidelity:
    """An algorithm's comparison with a reference over tasks at one budget."""

    algorithm: str
    """Registry name of the built-in."""
    label: str
    """Its label in the protocol."""
    reference: str
    """Reference name."""
    reference_version: str
    """The reference's version string."""
    budget: int
    """Budget compared (env steps)."""
    alpha: float
    """Family-wise level over the tasks."""
    margin_rule: str
    """How the margin was set, in words."""
    tasks: tuple[TaskFidelity, ...]
    """Per-task results."""
    verdict: str
    """``equivalent``, ``differs`` or ``undetermined``."""

    def to_dict(self) -> dict:
        """Plain data (JSON)."""
        return asdict(self)


def shown_within_text(shown_within: float, pooled: float) -> str:
    """``0.59 (1.02 SD)``: the smallest margin the data show equivalence within, in points and in pooled SDs."""
    return f"{shown_within:.2f}" + (f" ({shown_within / pooled:.2f} SD)" if pooled > 0 else "")


def markdown_rows(doc: dict) -> list[str]:
    """The per-task rows of docs/fidelity.md's result tables, from a comparison's plain data (:meth:`Fidelity.to_dict`
    or the JSON ``rlaudit fidelity`` writes): ``| game | built-in mean ± SD | reference mean ± SD | difference
    [interval] | Welch p | shown within (SDs) | verdict (TOST p) |``."""
    rows = []
    for t in doc["tasks"]:
        lo, hi = t["interval"]
        game = t["task"].split("/")[-1].rsplit("-v", 1)[0]
        within = shown_within_text(t["shown_within"], t["pooled_sd"])
        verdict = t["verdict"] + ("" if t["verdict"] == "differs" else f" (TOST p {t['p_equivalent']:#.2g})")
        rows.append(f"| {game} | {t['mean_builtin']:.2f} ± {t['sd_builtin']:.2f} | {t['mean_reference']:.2f} ± "
                    f"{t['sd_reference']:.2f} | {t['difference']:+.2f} [{lo:+.2f}, {hi:+.2f}] | "
                    f"{t['p_different']:#.2g} | {within} | {verdict} |")
    return rows


def pooled_sd(x: np.ndarray, y: np.ndarray) -> float:
    """``sqrt(((n_x - 1) s_x² + (n_y - 1) s_y²) / (n_x + n_y - 2))``."""
    return float(np.sqrt(((x.size - 1) * np.var(x, ddof=1) + (y.size - 1) * np.var(y, ddof=1)) / (x.size + y.size - 2)))


def compare_task(task: str, x, y, *, alpha_task: float, margin_sd: float = 1.0, margin: float | None = None,
                 seed: int = 0, reps: int = 10_000) -> TaskFidelity:
    """Compare one task's scores (``x``: built-in, ``y``: reference, shape ``(n,)`` each, n >= 2).

    Args:
        task: task id.
        x, y: per-run scores.
        alpha_task: level of this task's tests.
        margin_sd: margin in pooled SDs (used unless ``margin`` is given).
        margin: margin in score units.
        seed: seed of the bootstrap.
        reps: bootstrap replicates.
    """
    from rlaudit.stats.equivalence import compare_samples, smallest_margin

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    sd = pooled_sd(x, y)
    m = float(margin) if margin is not None else margin_sd * sd
    if not m > 0:  # both samples constant and equal: any positive margin
        m = float(np.finfo(float).eps)
    c = compare_samples(x, y, m, level=alpha_task, reps=reps, rng=np.random.default_rng(seed), constant_is_exact=False)
    shown = smallest_margin(x, y, alpha_task)
    verdict = {"different": "differs"}.get(c.verdict, c.verdict)
    return TaskFidelity(task, c.n_x, c.n_y, c.mean_x, float(np.std(x, ddof=1)), c.mean_y, float(np.std(y, ddof=1)),
                        c.difference, c.interval, c.p_different, c.p_equivalent, c.margin, sd, shown, alpha_task,
                        verdict)


def overall_verdict(verdicts) -> str:
    """``differs`` if any task differs, ``equivalent`` if all are, else ``undetermined``."""
    verdicts = list(verdicts)
    if any(v == "differs" for v in verdicts):
        return "differs"
    if verdicts and all(v == "equivalent" for v in verdicts):
        return "equivalent"
    return "undetermined"


__all__ = ["VERDICTS", "Fidelity", "TaskFidelity", "compare_task", "overall_verdict", "pooled_sd"]
