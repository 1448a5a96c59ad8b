"""Settings of one audit: which metric decides, how many replicates, the seed and the error control."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rlaudit.errors import InputError, did_you_mean

METRICS: tuple[str, ...] = ("iqm", "median", "mean", "og")
"""Aggregate metrics an audit can compute (rliable's four)."""

CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni")
"""Family-wise error control over all orderings of one audit."""

INTERVAL_METHODS: tuple[str, ...] = ("percentile", "bca")
"""Bootstrap interval methods for the aggregate intervals."""


@dataclass(frozen=True)
class AuditSettings:
    """What an audit computes and how. Every field is written to ``audit.json`` under ``settings``."""

    metric: str = "iqm"
    """Metric that decides orderings, inversions and claims (``iqm``, ``median``, ``mean`` or ``og``)."""
    metrics: tuple[str, ...] = METRICS
    """Metrics whose aggregates and intervals are reported; ``metric`` is always included."""
    gamma: float = 1.0
    """Threshold of the optimality gap (``og``): the gap counts scores below ``gamma``."""
    reps: int = 50_000
    """Bootstrap replicates for aggregate intervals and metric differences (rliable's default)."""
    reps_pairwise: int = 2_000
    """Bootstrap replicates for probability of improvement, performance profiles and per-task intervals."""
    seed: int = 0
    """Seed of every random stream of the audit; same seed and data give bit-identical numbers."""
    alpha: float = 0.05
    """Family-wise error rate over all orderings of the audit (all pairs x budgets, for one metric)."""
    confidence: float = 0.95
    """Level of the (unadjusted) intervals on aggregates, probability of improvement and profiles."""
    interval_method: str = "percentile"
    """Interval method for aggregates: ``percentile`` (default, rliable's) or ``bca``."""
    correction: str = "holm"
    """Family-wise error control: ``holm`` (step-down on bootstrap p-values) or ``bonferroni``."""
    budgets: tuple[int, ...] | None = None
    """Budgets to audit (``None``: every budget that all algorithms have)."""
    normalization: str | dict | None = None
    """Normalisation spec (``none``, ``atari``, ``divide:K``, ``minmax:PATH`` or a protocol dict)."""
    runs_needed_cap: int = 1_000
    """Largest runs-per-task estimate reported as a number; above it (or at a ~zero effect) "> cap"."""
    power: float = 0.8
    """Power used by the runs-needed estimate (probability the larger study decides the pair)."""
    small_sample: bool = False
    """Decide orderings from the *expanded* bootstrap (each task's runs spread by ``sqrt(n / (n - 1))``
    about their mean before resampling), which corrects the percentile bootstrap's too-narrow spread with
    few runs per task. Aggregate intervals are unchanged (rliable's scheme). See ``docs/audit.md``."""

    def __post_init__(self) -> None:
        metrics = tuple(dict.fromkeys((self.metric, *self.metrics)))
        object.__setattr__(self, "metrics", metrics)
        if self.budgets is not None and not isinstance(self.budgets, (str, bytes)):
            budgets = tuple(self.budgets) if hasattr(self.budgets, "__iter__") else (self.budgets,)
            if all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in budgets):
                budgets = tuple(int(b) for b in budgets)
            object.__setattr__(self, "budgets", budgets)  # anything else is reported by check()

    def check(self) -> AuditSettings:
        """Raise :class:`InputError` naming the option when a setting is impossible; return ``self``."""
        for name, flag in (("reps", "--reps"), ("reps_pairwise", "--reps-pairwise"), ("seed", "--seed"),
                           ("runs_needed_cap", "runs_needed_cap")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"{flag}: must be an integer, got {value!r}")
        for name, flag in (("alpha", "--alpha"), ("gamma", "--gamma"), ("confidence", "confidence"),
                           ("power", "power")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{flag}: must be a number, got {value!r}")
        if self.budgets is not None and (
                isinstance(self.budgets, (str, bytes)) or not self.budgets
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in self.budgets)):
            raise InputError(f"--budgets: expected a non-empty list of integer budgets, got {self.budgets!r}")
        if not isinstance(self.small_sample, bool):
            raise InputError(f"small_sample: must be true or false, got {self.small_sample!r}")
        for name, flag in (("metric", "--metric"), ("correction", "--correction"),
                           ("interval_method", "--ci-method")):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{flag}: must be a string, got {getattr(self, name)!r}")
        for m in self.metrics:
            if m not in METRICS:
                raise InputError(f"--metric: unknown metric {m!r}{did_you_mean(m, METRICS)}; "
                                 f"expected one of {', '.join(METRICS)}")
        if self.correction not in CORRECTIONS:
            raise InputError(f"--correction: unknown correction {self.correction!r}"
                             f"{did_you_mean(self.correction, CORRECTIONS)}; expected one of {', '.join(CORRECTIONS)}")
        if self.interval_method not in INTERVAL_METHODS:
            raise InputError(f"--ci-method: unknown interval method {self.interval_method!r}"
                             f"{did_you_mean(self.interval_method, INTERVAL_METHODS)}; expected one of "
                             f"{', '.join(INTERVAL_METHODS)}")
        if not 0.0 < self.alpha < 1.0:
            raise InputError(f"--alpha: must be between 0 and 1 (exclusive), got {self.alpha}")
        if not 0.0 < self.confidence < 1.0:
            raise InputError(f"confidence: must be between 0 and 1 (exclusive), got {self.confidence}")
        if not 0.0 < self.power < 1.0:
            raise InputError(f"power: must be between 0 and 1 (exclusive), got {self.power}")
        if self.reps < 100:
            raise InputError(f"--reps: need at least 100 bootstrap replicates, got {self.reps}")
        if self.reps_pairwise < 100:
            raise InputError(f"reps_pairwise: need at least 100 bootstrap replicates, got {self.reps_pairwise}")
        if self.seed < 0:
            raise InputError(f"--seed: must be a non-negative integer, got {self.seed}")
        if not self.gamma > 0:
            raise InputError(f"--gamma: the optimality-gap threshold must be positive, got {self.gamma}")
        if self.runs_needed_cap < 2:
            raise InputError(f"runs_needed_cap: must be at least 2, got {self.runs_needed_cap}")
        return self

    def replace(self, **changes) -> AuditSettings:
        """A copy with ``changes`` applied (``None`` values leave a field unchanged)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def higher_is_better(self, metric: str | None = None) -> bool:
        """Whether a larger value of ``metric`` (default :attr:`metric`) is better (``og``: lower is better)."""
        return (metric or self.metric) != "og"
