"""Statistics stage: normalisation, aggregate metrics, stratified bootstrap, probability of improvement,
performance profiles and rank distributions.

Pure functions: no files, no training, an explicit ``np.random.Generator`` (or seed) wherever randomness
is used, never NumPy's global RNG. Score arrays follow rliable: a *score set* is a list with one array of
shape ``(n_runs_m,)`` per task (or a matrix ``(n_runs, n_tasks)`` when run counts are equal). See
``docs/statistics.md``.
"""

from rlaudit.stats.bootstrap import (
    CI_METHODS,
    DEFAULT_REPS,
    INTERVAL_METHODS,
    expand_runs,
    interval,
    interval_estimates,
    jackknife,
    joint_replicates,
    method_replicates,
    replicates,
    rng_for,
)
from rlaudit.stats.improvement import (
    DEFAULT_POI_REPS,
    poi_replicates,
    probability_of_improvement,
    task_probabilities,
)
from rlaudit.stats.metrics import HIGHER_IS_BETTER, METRIC_LABELS, METRICS, aggregate, aggregate_all, as_score_set
from rlaudit.stats.normalize import (
    ATARI_REFERENCE,
    Normalization,
    canonical_game,
    normalize,
    parse_normalization,
)
from rlaudit.stats.profiles import (
    DEFAULT_PROFILE_REPS,
    default_taus,
    performance_profile,
    profile_bands,
    profile_replicates,
)
from rlaudit.stats.ranks import rank_probabilities

__all__ = [
    "ATARI_REFERENCE", "CI_METHODS", "DEFAULT_POI_REPS", "DEFAULT_PROFILE_REPS", "DEFAULT_REPS", "HIGHER_IS_BETTER",
    "INTERVAL_METHODS", "METRICS", "METRIC_LABELS", "Normalization", "aggregate", "aggregate_all", "as_score_set",
    "canonical_game", "default_taus", "expand_runs", "interval", "interval_estimates", "jackknife",
    "joint_replicates", "method_replicates", "normalize",
    "parse_normalization", "performance_profile", "poi_replicates", "probability_of_improvement",
    "profile_bands", "profile_replicates", "rank_probabilities", "replicates", "rng_for", "task_probabilities",
]
