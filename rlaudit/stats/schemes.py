"""Names of the bootstrap schemes and the default replicate count: a leaf, so that settings can be checked
(``rlaudit validate``, ``rlaudit run``) without importing SciPy and the bootstrap engine."""

DEFAULT_REPS = 50_000
"""rliable's default number of bootstrap replicates for aggregate metrics."""

INTERVAL_METHODS: tuple[str, ...] = ("percentile", "bca")
"""Interval rules of :func:`interval` (applied to replicates of the original or the expanded runs)."""

CI_METHODS: tuple[str, ...] = ("expanded", "percentile", "bca")
"""Bootstrap schemes of an audit: ``expanded`` (default; percentile intervals of the expanded bootstrap,
see :func:`expand_runs`), ``percentile`` (rliable's scheme, exact parity) and ``bca``."""
