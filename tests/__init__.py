"""rlaudit test suite. A regular package, so that `tests.<module>` names this folder: pgx (the JAX extra)
installs a top-level `tests` package of its own into site-packages."""
