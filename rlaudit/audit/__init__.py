"""The audit stage: aggregates, orderings with error control, inversions, claims and checklist.

``run_audit(table, settings, claims)`` takes a tidy :class:`~rlaudit.scores.ScoreTable` and returns an
:class:`~rlaudit.audit.result.AuditResult` (the ``audit.json`` document). It is pure apart from the
optional progress callback: no files are read or written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlaudit.audit.claims import Claim, load_claims_file, parse_claims
from rlaudit.audit.result import SCHEMA_VERSION, AuditResult
from rlaudit.audit.settings import AuditSettings
from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable

if TYPE_CHECKING:  # the engine is imported on use (see __getattr__ below)
    from rlaudit.audit.engine import Progress

__all__ = ["AuditResult", "AuditSettings", "Claim", "SCHEMA_VERSION", "load_claims_file", "parse_claims",
           "run_audit", "Progress"]


def work_estimate(table: ScoreTable, settings: AuditSettings) -> float:
    """Rough number of random draws an audit makes (the CLI shows a progress bar above a threshold).

    Aggregates draw ``reps`` per run score; probability of improvement draws ``reps_pairwise`` per run score
    of both algorithms of every pair; profiles and per-task intervals ``2 reps_pairwise`` per run score.
    """
    n_algorithms = max(1, table.frame["algorithm"].nunique())
    reps = settings.reps or 50_000
    return float(len(table.frame)) * (reps + (n_algorithms + 1) * settings.reps_pairwise)


MAX_REPLICATE_BYTES = 4 << 30
"""Largest replicate store an audit may hold (every (algorithm, budget, metric) keeps its ``reps`` replicates
for the joint max-T family); above it the audit is refused with the way out rather than running out of memory."""


def _check_alpha(sel, n_metrics: int, settings: AuditSettings) -> None:
    """Refuse, naming alpha, an alpha so small that the replicates it needs (20 m / alpha) cannot be held."""
    from rlaudit.audit.orderings import MIN_REPS_PER_TEST

    per_replicate = len(sel.algorithms) * len(sel.budgets) * n_metrics * 8
    need = MIN_REPS_PER_TEST * max(sel.n_tests, 1) / settings.alpha  # a float: 1e-300 gives 6e+301, not digits
    if need * per_replicate > MAX_REPLICATE_BYTES:
        smallest = MIN_REPS_PER_TEST * max(sel.n_tests, 1) * per_replicate / MAX_REPLICATE_BYTES
        raise InputError(f"{settings.where('alpha')}: alpha = {settings.alpha:g} needs {need:.3g} bootstrap replicates "
                         f"(20 m / alpha for {sel.n_tests} tests), more than {MAX_REPLICATE_BYTES / 2**20:,.0f} MiB "
                         f"holds; use an alpha of {float(f'{smallest * 1.05:.2g}'):g} or more")


def _check_memory(sel, n_metrics: int, reps: int) -> None:
    need = len(sel.algorithms) * len(sel.budgets) * n_metrics * reps * 8
    if need > MAX_REPLICATE_BYTES:
        raise InputError(f"--budgets: {len(sel.algorithms)} algorithms x {len(sel.budgets)} budgets make {sel.n_tests} "
                         f"tests, which need {reps:,} replicates each ({need / 2**20:,.0f} MiB of replicates, more "
                         f"than {MAX_REPLICATE_BYTES / 2**20:,.0f} MiB); audit fewer budgets (--budgets) or algorithms")


def run_audit(table: ScoreTable, settings: AuditSettings | None = None, claims: Sequence[Claim] = (),
              source=None, progress: Progress | None = None) -> AuditResult:
    """Audit a score table (the steps are in :mod:`rlaudit.audit.engine`).

    Args:
        table: the tidy scores (one row per algorithm, task, run, budget).
        settings: what to compute (defaults: IQM, expanded bootstrap, max-T at alpha 0.05, seed 0).
        claims: claims to check (see :mod:`rlaudit.audit.claims`).
        source: a :class:`~rlaudit.sources.Source` (or a path string) for provenance in ``audit.json``.
        progress: optional progress sink (see :class:`Progress`).

    Returns:
        The :class:`AuditResult`.

    Raises:
        InputError: a requested budget some algorithm lacks, a task with a single run, no common tasks, a
            claim naming an unknown algorithm or budget, a task without reference scores, bad settings, too
            few replicates for the family.
    """
    from rlaudit.audit import engine  # on use: the bootstrap engine (SciPy) is not needed to check settings

    settings = (settings or AuditSettings()).check()
    claims = tuple(claims)
    metrics = list(dict.fromkeys(settings.metrics + tuple(c.metric for c in claims if c.metric)))
    progress = progress or engine.Progress()
    sel = engine.select(table, settings, claims, engine.where_of(table, source))
    _check_alpha(sel, len(metrics), settings)
    reps = settings.reps_for(sel.n_tests)
    _check_memory(sel, len(metrics), reps)
    boot = engine.bootstrap_aggregates(sel, settings, metrics, reps, progress)
    families = {m: engine.decide_family(sel, boot, settings, m) for m in metrics}
    orderings = engine.pairwise_details(sel, families[settings.metric], settings, progress)
    profile_rows, per_task = engine.profiles_and_tasks(sel, settings, progress)
    return engine.assemble(sel, settings, boot, families, orderings, profile_rows, per_task, claims, source)


def __getattr__(name: str):
    # Progress lives in the engine, which is imported on first use so that ``rlaudit run`` / ``validate``
    # (which check [audit] settings) start without SciPy and the bootstrap engine.
    if name == "Progress":
        from rlaudit.audit.engine import Progress

        return Progress
    raise AttributeError(f"module 'rlaudit.audit' has no attribute {name!r}")
