"""Settings of one audit: which metric decides, how many replicates, the seed and the error control.

Settings are resolved once, here: :meth:`AuditSettings.from_section` reads a protocol's ``[audit]`` table
(every field below is a key, with ``ci_method`` accepted for ``interval_method``), :meth:`AuditSettings.override`
applies command-line flags on top, and :meth:`AuditSettings.check` names the flag or the protocol key a bad
value came from (``--reps`` or ``protocol.toml: audit.reps``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from rlaudit.audit.orderings import CORRECTIONS, min_reps
from rlaudit.errors import InputError, did_you_mean
from rlaudit.stats.schemes import CI_METHODS, DEFAULT_REPS
from rlaudit.stats.metrics import METRICS

FLAGS: dict[str, str] = {
    "metric": "--metric", "metrics": "metrics", "gamma": "--gamma", "reps": "--reps",
    "reps_pairwise": "--reps-pairwise", "seed": "--seed", "alpha": "--alpha", "confidence": "confidence",
    "interval_method": "--ci-method", "correction": "--correction", "budgets": "--budgets",
    "normalization": "--normalize", "runs_needed_cap": "runs_needed_cap", "power": "power",
    "min_effect": "--min-effect", "small_sample": "--small-sample", "max_seconds": "max_seconds",
    "random_policy": "random_policy",
}
"""Every setting and the command-line flag that sets it (the setting's name when there is no flag)."""

SECTION_ALIASES: dict[str, str] = {"ci_method": "interval_method"}
"""Protocol ``[audit]`` keys accepted under a flag's name."""

SECTION_KEYS: tuple[str, ...] = tuple(k for k in FLAGS if k != "normalization") + tuple(SECTION_ALIASES)
"""Keys of a protocol's ``[audit]`` table (normalisation has its own ``[normalization]`` section)."""


def check_section(section: dict, where: str) -> None:
    """Check a protocol's ``[audit]`` table (``where``: the file); raise :class:`InputError` naming
    ``where: audit.KEY``."""
    AuditSettings.from_section(section, where).check()


@dataclass(frozen=True)
class AuditSettings:
    """What an audit computes and how. Every field is written to ``audit.json`` under ``settings``."""

    metric: str = "iqm"
    """Metric that decides orderings, inversions and claims (``iqm``, ``median``, ``mean`` or ``og``)."""
    metrics: tuple[str, ...] = METRICS
    """Metrics whose aggregates and intervals are reported; ``metric`` is always included."""
    gamma: float = 1.0
    """Threshold of the optimality gap (``og``): the gap counts scores below ``gamma``."""
    reps: int | None = None
    """Bootstrap replicates for aggregates, orderings and changes; ``None``: 50,000 (rliable's default) or
    the fewest that resolve the corrected level (``20 m / alpha`` for ``m`` tests), whichever is larger."""
    reps_pairwise: int = 2_000
    """Bootstrap replicates for probability of improvement, performance profiles and per-task intervals."""
    seed: int = 0
    """Seed of every random stream of the audit; same seed and data give bit-identical numbers."""
    alpha: float = 0.05
    """Family-wise error rate over all tests of the audit (orderings and changes, for one metric)."""
    confidence: float = 0.95
    """Level of the (unadjusted) intervals on aggregates, probability of improvement and profiles."""
    interval_method: str = "expanded"
    """Bootstrap scheme for aggregate intervals *and* decisions: ``expanded`` (default; calibrated at 3-10
    runs per task, ``docs/audit.md``), ``percentile`` (rliable's, exact parity) or ``bca`` (BCa aggregate
    intervals; decisions as ``percentile``)."""
    correction: str = "maxt"
    """Family-wise error control: ``maxt`` (Westfall-Young step-down on the joint bootstrap), ``holm`` or
    ``bonferroni``."""
    budgets: tuple[int, ...] | None = None
    """Budgets to audit (``None``: every budget that all algorithms have)."""
    normalization: str | dict | None = None
    """Normalisation spec (``none``, ``atari``, ``divide:K``, ``minmax:PATH`` or a protocol dict)."""
    runs_needed_cap: int = 1_000
    """Largest runs-per-task estimate reported as a number; above it (or at a ~zero effect) "> cap"."""
    power: float = 0.8
    """Power used by the runs-needed estimate (probability the larger study decides the pair)."""
    min_effect: float | None = None
    """Smallest difference of interest (deciding metric's units) for the runs-needed estimate; ``None``:
    the observed difference."""
    small_sample: bool = False
    """Deprecated alias of ``interval_method = "expanded"`` (now the default); kept so old protocols load."""
    max_seconds: float = 300.0
    """An audit whose up-front estimate (:func:`rlaudit.audit.audit_cost`) exceeds this many seconds is refused
    with the way out (fewer budgets, another correction) instead of running for hours; ``inf``: no limit. The
    command line reads it from ``RLAUDIT_AUDIT_MAX_SECONDS``. Not written to ``audit.json`` (no number depends
    on it)."""
    random_policy: dict | None = None
    """The random policy's raw score per task with where it comes from, ``{"source": str, "scores": {task:
    score}}``, for the learned-vs-random check when the normalisation's low ends are not random-policy scores
    (raw MinAtar scores, say). Protocol only: ``[audit.random_policy]``; it wins over such low ends."""
    origins: dict = field(default_factory=dict, compare=False, repr=False)
    """Where each setting not at its default came from (``{"reps": "protocol.toml: audit.reps"}``); error
    messages name it. Flags are named by :data:`FLAGS`."""

    def __post_init__(self) -> None:
        metrics = self.metrics
        if isinstance(metrics, (list, tuple)):
            object.__setattr__(self, "metrics", tuple(dict.fromkeys((self.metric, *metrics))))
        if self.budgets is not None and not isinstance(self.budgets, (str, bytes)):
            budgets = tuple(self.budgets) if hasattr(self.budgets, "__iter__") else (self.budgets,)
            if all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in budgets):
                budgets = tuple(int(b) for b in budgets)
            object.__setattr__(self, "budgets", budgets)  # anything else is reported by check()

    # ------------------------------------------------------------------------------------ resolution

    @classmethod
    def from_section(cls, section: dict | None, where: str) -> AuditSettings:
        """Settings from a protocol's ``[audit]`` table; unknown keys raise :class:`InputError` naming
        ``where: audit.KEY`` (with a suggestion). Values are checked by :meth:`check`."""
        values, origins = {}, {}
        for key, value in (section or {}).items():
            name = SECTION_ALIASES.get(key, key)
            if name not in SECTION_KEYS:
                raise InputError(f"{where}: audit.{key}: unknown key{did_you_mean(key, SECTION_KEYS)}; expected one "
                                 f"of {', '.join(SECTION_KEYS)}")
            if value is None:
                continue
            values[name] = tuple(value) if isinstance(value, list) else value
            origins[name] = f"{where}: audit.{key}"
        return cls(**values, origins=origins)

    def override(self, **flags) -> AuditSettings:
        """A copy with command-line ``flags`` applied (``None`` leaves a setting as it is); the error
        messages of an overridden setting name its flag."""
        changes = {k: v for k, v in flags.items() if v is not None}
        if "interval_method" in changes and "small_sample" not in changes:
            changes["small_sample"] = False  # an explicit scheme wins over an older small_sample = true
        unknown = [k for k in changes if k not in FLAGS]
        if unknown:
            raise TypeError(f"unknown audit setting(s): {', '.join(unknown)}")
        origins = {k: v for k, v in self.origins.items() if k not in changes}
        return dataclasses.replace(self, **changes, origins=origins)

    def replace(self, **changes) -> AuditSettings:
        """A copy with ``changes`` applied (``None`` values leave a field unchanged)."""
        return self.override(**changes)

    def where(self, name: str) -> str:
        """What to call setting ``name`` in an error message: its protocol key, else its flag."""
        return self.origins.get(name, FLAGS.get(name, name))

    @property
    def scheme(self) -> str:
        """The bootstrap scheme applied (``small_sample`` asks for ``expanded``)."""
        return "expanded" if self.small_sample else self.interval_method

    # ------------------------------------------------------------------------------------ validation

    def check(self) -> AuditSettings:
        """Raise :class:`InputError` naming the flag or protocol key of an impossible setting; return ``self``."""
        w = self.where
        for name in ("reps_pairwise", "seed", "runs_needed_cap") + (("reps",) if self.reps is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InputError(f"{w(name)}: must be an integer, got {value!r}")
        for name in ("alpha", "gamma", "confidence", "power", "max_seconds") + (
                ("min_effect",) if self.min_effect is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{w(name)}: must be a number, got {value!r}")
            if not math.isfinite(value):  # 1e400 reads as inf: an infinite gamma or effect size means nothing
                raise InputError(f"{w(name)}: must be a finite number, got {value!r}")
        if self.budgets is not None and (
                isinstance(self.budgets, (str, bytes)) or not self.budgets
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in self.budgets)):
            raise InputError(f"{w('budgets')}: expected a non-empty list of integer budgets, got {self.budgets!r}")
        if not isinstance(self.small_sample, bool):
            raise InputError(f"{w('small_sample')}: must be true or false, got {self.small_sample!r}")
        for name in ("metric", "correction", "interval_method"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{w(name)}: must be a string, got {getattr(self, name)!r}")
        if not isinstance(self.metrics, tuple) or not all(isinstance(m, str) for m in self.metrics):
            raise InputError(f"{w('metrics')}: expected a list of metric names, got {self.metrics!r}")
        for m in self.metrics:
            if m not in METRICS:
                name = "metric" if m == self.metric else "metrics"
                raise InputError(f"{w(name)}: unknown metric {m!r}{did_you_mean(m, METRICS)}; "
                                 f"expected one of {', '.join(METRICS)}")
        for name, allowed in (("correction", CORRECTIONS), ("interval_method", CI_METHODS)):
            value = getattr(self, name)
            if value not in allowed:
                raise InputError(f"{w(name)}: unknown {'correction' if name == 'correction' else 'interval method'} "
                                 f"{value!r}{did_you_mean(value, allowed)}; expected one of {', '.join(allowed)}")
        for name in ("alpha", "confidence", "power"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise InputError(f"{w(name)}: must be between 0 and 1 (exclusive), got {getattr(self, name)}")
        if self.reps is not None and self.reps < 100:
            raise InputError(f"{w('reps')}: need at least 100 bootstrap replicates, got {self.reps}")
        if self.reps_pairwise < 100:
            raise InputError(f"{w('reps_pairwise')}: need at least 100 bootstrap replicates, got {self.reps_pairwise}")
        if self.seed < 0:
            raise InputError(f"{w('seed')}: must be a non-negative integer, got {self.seed}")
        if not self.gamma > 0:
            raise InputError(f"{w('gamma')}: the optimality-gap threshold must be positive, got {self.gamma}")
        if not self.max_seconds > 0:
            raise InputError(f"{w('max_seconds')}: must be a number of seconds above 0 (inf: no limit), got "
                             f"{self.max_seconds!r}")
        if self.runs_needed_cap < 2:
            raise InputError(f"{w('runs_needed_cap')}: must be at least 2, got {self.runs_needed_cap}")
        if self.min_effect is not None and not self.min_effect > 0:
            raise InputError(f"{w('min_effect')}: the smallest effect of interest must be positive, got {self.min_effect}")
        if self.random_policy is not None:
            check_random_policy(self.random_policy, w("random_policy"))
        return self

    def reps_for(self, n_tests: int) -> int:
        """Replicates for a family of ``n_tests`` tests: :attr:`reps` if given (refused with one line naming
        it when too few to resolve ``alpha / n_tests``), else the larger of 50,000 and the fewest that do."""
        need = min_reps(n_tests, self.alpha)
        if self.reps is None:
            return max(DEFAULT_REPS, need)
        if self.reps < need:
            raise InputError(f"{self.where('reps')}: {self.reps} replicates cannot resolve the corrected level "
                             f"alpha/m = {self.alpha:g}/{n_tests} of this audit's {n_tests} tests; use --reps {need} "
                             f"or more (20 m / alpha), or leave it unset")
        return int(self.reps)

    def higher_is_better(self, metric: str | None = None) -> bool:
        """Whether a larger value of ``metric`` (default :attr:`metric`) is better (``og``: lower is better)."""
        return (metric or self.metric) != "og"


def check_random_policy(value, where: str) -> None:
    """``[audit.random_policy]``: a ``source`` in words and ``scores``, a non-empty table of finite numbers."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table with source and scores, got {value!r}")
    unknown = [k for k in value if k not in ("source", "scores")]
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key{did_you_mean(unknown[0], ('source', 'scores'))}; "
                         f"expected source and scores")
    source = value.get("source")
    if not isinstance(source, str) or not source.strip():
        raise InputError(f"{where}.source: say where the random policy's scores come from (a paper, or the "
                         f"command that measured them)")
    scores = value.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise InputError(f"{where}.scores: expected a table of task = score, got {scores!r}")
    for task, score in scores.items():
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise InputError(f"{where}.scores.{task}: must be a finite number, got {score!r}")
