"""Statistics stage: normalisation, aggregate metrics, stratified bootstrap, probability of improvement,
performance profiles and rank distributions.

Pure functions: no files, no training, an explicit ``np.random.Generator`` (or seed) wherever randomness
is used, never NumPy's global RNG. Score arrays follow rliable: a *score set* is a list with one array of
shape ``(n_runs_m,)`` per task (or a matrix ``(n_runs, n_tasks)`` when run counts are equal). See
``docs/statistics.md``.
"""

import importlib

# Names are loaded from their modules on first use (PEP 562), so that importing one light module of the stage
# (``rlaudit.stats.metrics`` for the metric names, as the protocol loader does) does not pull in SciPy and the
# bootstrap engine: ``rlaudit run`` starts without them.
_HOME: dict[str, str] = {
    "ATARI_REFERENCE": "normalize",
    "CI_METHODS": "bootstrap",
    "DEFAULT_POI_REPS": "improvement",
    "DEFAULT_PROFILE_REPS": "profiles",
    "DEFAULT_REPS": "bootstrap",
    "HIGHER_IS_BETTER": "metrics",
    "INTERVAL_METHODS": "bootstrap",
    "METRICS": "metrics",
    "METRIC_LABELS": "metrics",
    "Normalization": "normalize",
    "aggregate": "metrics",
    "aggregate_all": "metrics",
    "as_score_set": "metrics",
    "canonical_game": "normalize",
    "default_taus": "profiles",
    "expand_runs": "bootstrap",
    "interval": "bootstrap",
    "interval_estimates": "bootstrap",
    "jackknife": "bootstrap",
    "joint_replicates": "bootstrap",
    "method_replicates": "bootstrap",
    "normalize": "normalize",
    "parse_normalization": "normalize",
    "performance_profile": "profiles",
    "poi_replicates": "improvement",
    "probability_of_improvement": "improvement",
    "profile_bands": "profiles",
    "profile_replicates": "profiles",
    "rank_probabilities": "ranks",
    "replicates": "bootstrap",
    "rng_for": "bootstrap",
    "task_probabilities": "improvement",
}

__all__ = [
    "ATARI_REFERENCE", "CI_METHODS", "DEFAULT_POI_REPS", "DEFAULT_PROFILE_REPS", "DEFAULT_REPS", "HIGHER_IS_BETTER",
    "INTERVAL_METHODS", "METRICS", "METRIC_LABELS", "Normalization", "aggregate", "aggregate_all", "as_score_set",
    "canonical_game", "default_taus", "expand_runs", "interval", "interval_estimates", "jackknife",
    "joint_replicates", "method_replicates", "normalize",
    "parse_normalization", "performance_profile", "poi_replicates", "probability_of_improvement",
    "profile_bands", "profile_replicates", "rank_probabilities", "replicates", "rng_for", "task_probabilities",
]


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f"rlaudit.stats.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlaudit.stats' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
