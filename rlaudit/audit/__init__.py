"""The audit stage: aggregates, orderings with error control, inversions, claims and checklist.

``run_audit(table, settings, claims)`` takes a tidy :class:`~rlaudit.scores.ScoreTable` and returns an
:class:`~rlaudit.audit.result.AuditResult` (the ``audit.json`` document). It is pure apart from the
optional progress callback: no files are read or written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlaudit.audit.claims import Claim, load_claims_file, parse_claims
from rlaudit.audit.result import SCHEMA_VERSION, AuditResult
from rlaudit.audit.settings import AuditSettings
from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable

if TYPE_CHECKING:  # the engine is imported on use (see __getattr__ below)
    from rlaudit.audit.engine import Progress

__all__ = ["AuditCost", "AuditResult", "AuditSettings", "Claim", "SCHEMA_VERSION", "audit_cost", "load_claims_file",
           "parse_claims", "run_audit", "Progress"]


def work_estimate(table: ScoreTable, settings: AuditSettings) -> float:
    """Rough number of random draws an audit makes (the CLI shows a progress bar above a threshold).

    Aggregates draw ``reps`` per run score; probability of improvement draws ``reps_pairwise`` per run score
    of both algorithms of every pair; profiles and per-task intervals ``2 reps_pairwise`` per run score.
    """
    n_algorithms = max(1, table.frame["algorithm"].nunique())
    reps = settings.reps or 50_000
    return float(len(table.frame)) * (reps + (n_algorithms + 1) * settings.reps_pairwise)


# Throughput of the audit's stages on one core of the 2-core development machine, quiet. First measured with
# bench/bench_audit_scale.py while other work shared the machine (load average about 9): those rates made the
# estimate 4.7x too long on a quiet machine (Dopamine CNN vs Impala, 10 algorithms x 5 budgets, 405 tests,
# 162,000 replicates: estimated 347 s, took 74 s), which refused audits that finish in a minute. These are
# those rates x 3.5, so the estimate still errs long (99 s for that audit) and a loaded machine takes longer.
AGGREGATE_DRAWS_PER_S = 5.25e7
"""Aggregate bootstrap: (replicate x audited score) pairs per second, all reported metrics together."""
FAMILY_DRAWS_PER_S = {"maxt": 5.25e6, "holm": 1.6e7, "bonferroni": 1.6e7}
"""Error control: (test x replicate x metric) triples per second; max-T walks the null distribution of every
test, Holm and Bonferroni only count tails."""
PAIRWISE_DRAWS_PER_S = 3.5e7
"""Probability of improvement, profiles and per-task intervals: (pairwise replicate x score) pairs per second."""


@dataclass(frozen=True)
class AuditCost:
    """The up-front estimate of an audit's work (:func:`audit_cost`)."""

    n_tests: int
    """Members of one metric's error-controlled family (orderings and changes)."""
    reps: int
    """Bootstrap replicates of the aggregates (``settings.reps_for(n_tests)``)."""
    n_scores: int
    """Scores audited (rows of the audited budgets and tasks)."""
    work: float
    """Random draws and comparisons, all stages."""
    seconds: float
    """Estimated wall time on the development machine (see the rate constants)."""


def audit_cost(table: ScoreTable, settings: AuditSettings, n_budgets: int | None = None,
               n_metrics: int | None = None) -> AuditCost:
    """Estimate an audit of ``table`` before it starts: ``reps`` x scores for the aggregates, tests x ``reps``
    x metrics for the error control, ``reps_pairwise`` x scores x (algorithms + 1) for the pairwise parts.

    Args:
        table: the scores; only its shape is used (the audited budgets: ``settings.budgets``, else all).
        settings: the audit settings (checked).
        n_budgets: audit this many budgets instead (the scores scale with them).
        n_metrics: metrics computed (default: ``settings.metrics``).

    Raises:
        InputError: explicit ``reps`` too few for the family (as the audit itself would).
    """
    frame = table.frame
    budgets = settings.budgets or sorted(int(b) for b in frame["budget"].unique())
    rows = len(frame) if not settings.budgets else int(frame["budget"].isin(budgets).sum())
    n_algorithms = max(1, int(frame["algorithm"].nunique()))
    k = len(budgets) if n_budgets is None else n_budgets
    return _cost(n_algorithms, k, int(rows * k / max(len(budgets), 1)), n_metrics or len(settings.metrics), settings)


def _cost(n_algorithms: int, n_budgets: int, n_scores: int, n_metrics: int, settings: AuditSettings) -> AuditCost:
    n_pairs = n_algorithms * (n_algorithms - 1) // 2
    n_tests = n_pairs * n_budgets + n_pairs * max(n_budgets - 1, 0)
    reps = settings.reps_for(max(n_tests, 1))
    aggregate = float(reps) * n_scores
    family = float(max(n_tests, 1)) * reps * n_metrics
    pairwise = float(settings.reps_pairwise) * n_scores * (n_algorithms + 1)
    seconds = (aggregate / AGGREGATE_DRAWS_PER_S + family / FAMILY_DRAWS_PER_S.get(settings.correction, 1.5e6)
               + pairwise / PAIRWISE_DRAWS_PER_S)
    return AuditCost(n_tests, reps, n_scores, aggregate + family + pairwise, seconds)


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _check_time(sel, settings: AuditSettings, n_metrics: int, cost: AuditCost) -> None:
    """Refuse an audit estimated past ``settings.max_seconds``, saying what would fit."""
    limit = settings.max_seconds
    if cost.seconds <= limit:
        return
    n_b, n_a = len(sel.budgets), len(sel.algorithms)
    per_budget = cost.n_scores / max(n_b, 1)
    fits = [k for k in range(1, n_b) if _cost(n_a, k, int(per_budget * k), n_metrics, settings).seconds <= limit]
    ways = []
    if fits:
        ways.append(f"audit at most {fits[-1]} of the {n_b} budgets (--budgets)")
    if settings.correction == "maxt":
        holm = _cost(n_a, n_b, cost.n_scores, n_metrics, settings.override(correction="holm"))
        if holm.seconds <= limit:
            ways.append(f"use --correction holm (about {_duration(holm.seconds)})")
    ways.append("audit fewer algorithms")
    n = math.ceil(cost.seconds * 1.5)
    ways.append(f"or allow it: RLAUDIT_AUDIT_MAX_SECONDS={n} (a protocol: max_seconds = {n} under [audit])")
    raise InputError(f"this audit is estimated at about {_duration(cost.seconds)}, more than the "
                     f"{_duration(limit)} limit: {n_a} algorithms x {n_b} budget{'s' if n_b != 1 else ''} make {cost.n_tests:,} "
                     f"test{'s' if cost.n_tests != 1 else ''}, so "
                     f"{cost.reps:,} replicates (20 m / alpha) of {cost.n_scores:,} scores; " + ", ".join(ways))


MAX_PAIRWISE_BYTES = 4 << 30
"""Largest replicate array of the pairwise parts: a performance profile keeps ``reps_pairwise`` x 101 thresholds."""
_PROFILE_TAUS = 101  # rlaudit.stats.profiles.default_taus


def _check_pairwise_memory(settings: AuditSettings) -> None:
    need = settings.reps_pairwise * _PROFILE_TAUS * 8
    if need > MAX_PAIRWISE_BYTES:
        most = MAX_PAIRWISE_BYTES // (_PROFILE_TAUS * 8)
        raise InputError(f"{settings.where('reps_pairwise')}: {settings.reps_pairwise:,} replicates need "
                         f"{need / 2**30:,.0f} GiB for one performance profile ({_PROFILE_TAUS} thresholds x 8 bytes "
                         f"each), more than the {MAX_PAIRWISE_BYTES / 2**30:.0f} GiB limit; use at most {most:,} "
                         f"(default 2000)")


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
    _check_pairwise_memory(settings)
    claims = tuple(claims)
    metrics = list(dict.fromkeys(settings.metrics + tuple(c.metric for c in claims if c.metric)))
    progress = progress or engine.Progress()
    sel = engine.select(table, settings, claims, engine.where_of(table, source))
    _check_alpha(sel, len(metrics), settings)
    reps = settings.reps_for(sel.n_tests)
    _check_memory(sel, len(metrics), reps)
    cost = _cost(len(sel.algorithms), len(sel.budgets), len(sel.audited), len(metrics), settings)
    _check_time(sel, settings, len(metrics), cost)
    note = getattr(progress, "estimate", None)
    if callable(note):
        note(cost)
    boot = engine.bootstrap_aggregates(sel, settings, metrics, reps, progress)
    families = {}
    progress.start("error-controlled orderings", len(metrics))
    for m in metrics:
        families[m] = engine.decide_family(sel, boot, settings, m)
        progress.advance()
    progress.done()
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
