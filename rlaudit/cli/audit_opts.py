"""Audit options shared by ``rlaudit audit``, ``rlaudit report`` and the joined published-vs-rerun audit:
the click options, and :func:`audit_from_options`, which resolves them exactly as ``rlaudit audit`` does."""

from __future__ import annotations

import os
from pathlib import Path

import click

from rlaudit.errors import InputError

# Work (random draws) above which a progress bar is shown: a few seconds of bootstrap on one busy core.
PROGRESS_THRESHOLD = 3e7
MAX_SECONDS_VAR = "RLAUDIT_AUDIT_MAX_SECONDS"
"""Environment variable overriding the audit's time limit (``AuditSettings.max_seconds``)."""


def _int(value: str | None, flag: str, minimum: int | None = None) -> int | None:
    if value is None:
        return None
    try:
        out = int(str(value).replace("_", ""))
    except ValueError:
        raise InputError(f"{flag}: {value!r} is not an integer") from None
    if minimum is not None and out < minimum:
        raise InputError(f"{flag}: must be at least {minimum}, got {out}")
    return out


def _float(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{flag}: {value!r} is not a number") from None


def _budgets(value: str | None) -> tuple[int, ...] | None:
    """``"100k,1M"`` -> ``(100_000, 1_000_000)``: the suffixes (k, M, G) and forms (``1e5``, ``1_000``) that
    ``run``, ``validate`` and ``import`` accept; ``0`` stays valid (the budget of a final-score set)."""
    from rlaudit.importers._common import OutOfRange, parse_count
    from rlaudit.scores import BUDGET_MAX

    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise InputError("--budgets: expected a comma-separated list of budgets, e.g. 100k,200k")
    out = []
    for v in items:
        try:
            out.append(parse_count(v, "--budgets"))
        except OutOfRange:
            raise InputError(f"--budgets: {v!r} is out of range: a budget is at most {BUDGET_MAX:,} "
                             f"(2^63 - 1)") from None
        except InputError:
            raise InputError(f"--budgets: {v!r} is not an integer budget (write 100000, 100k or 1M)") from None
    return tuple(out)


class _RichProgress:
    """:class:`rlaudit.audit.Progress` on a rich progress bar (stderr)."""

    def __init__(self, progress, console):
        self._p = progress
        self._console = console
        self._task = None

    def estimate(self, cost) -> None:
        self._console.print(f"audit: {cost.n_tests:,} tests, {cost.reps:,} replicates of {cost.n_scores:,} scores; "
                            f"estimated at most about {max(1, round(cost.seconds / 60))} min", highlight=False)

    def start(self, stage: str, total: int) -> None:
        if not self._console.is_terminal:  # no live bar in a log: one line per stage
            self._console.print(f"audit: {stage} ({total} steps)", highlight=False)
        self._task = self._p.add_task(stage, total=total)

    def advance(self, n: int = 1) -> None:
        self._p.advance(self._task, n)

    def done(self) -> None:
        pass


def audit_from_options(scores, fmt=None, data_dir=None, normalize=None, metric=None, budgets=None, claims_file=None,
                       reps=None, reps_pairwise=None, seed=None, alpha=None, gamma=None, ci_method=None,
                       correction=None, small_sample=None, min_effect=None):
    """Load ``scores`` and audit it exactly as ``rlaudit audit`` does with these option strings.

    Settings are resolved once by the API: the source's protocol ``[audit]`` section
    (:meth:`AuditSettings.from_section`), then the flags (:meth:`AuditSettings.override`); ``[normalization]``
    and ``[[claims]]`` likewise. A progress bar is shown on a terminal when the work is large. Other commands
    (``rlaudit report``) reuse this so that both agree on options and defaults.

    Returns:
        The :class:`~rlaudit.audit.AuditResult` (nothing is written).
    """
    from rlaudit.audit import AuditSettings, run_audit, work_estimate
    from rlaudit.audit.claims import load_claims_file, parse_claims
    from rlaudit.sources import load_source

    flags = {"metric": metric, "reps": _int(reps, "--reps"), "reps_pairwise": _int(reps_pairwise, "--reps-pairwise"),
             "seed": _int(seed, "--seed"), "alpha": _float(alpha, "--alpha"), "gamma": _float(gamma, "--gamma"),
             "interval_method": ci_method, "correction": correction, "budgets": _budgets(budgets),
             "small_sample": small_sample or None, "min_effect": _float(min_effect, "--min-effect")}
    source = load_source(scores, fmt=fmt, data_dir=data_dir)
    settings = AuditSettings.from_section(source.audit, str(source.path)).override(**flags)

    if normalize is not None:
        norm_spec, norm_where, base = normalize, "--normalize", None
    else:
        norm_spec, norm_where, base = source.normalization, f"{source.path}: [normalization]", Path(source.path).parent
    if norm_spec is not None and not (isinstance(norm_spec, str) and norm_spec.strip().lower() == "none"):
        from rlaudit.stats.normalize import parse_normalization

        norm_spec = parse_normalization(norm_spec, norm_where, base)
    settings = settings.override(normalization=norm_spec)

    if claims_file is not None:
        claims = load_claims_file(claims_file)
    elif source.claims:
        claims = parse_claims(list(source.claims), f"{source.path}: [[claims]]")
    else:
        claims = ()

    limit = os.environ.get(MAX_SECONDS_VAR)
    if limit is not None:
        value = _float(limit, MAX_SECONDS_VAR)
        if not value > 0:
            raise InputError(f"{MAX_SECONDS_VAR}: must be a number of seconds above 0 (inf: no limit), got {limit!r}")
        settings = settings.override(max_seconds=value)
    settings.check()
    if work_estimate(source.table, settings) > PROGRESS_THRESHOLD:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
            return run_audit(source.table, settings, claims, source=source, progress=_RichProgress(bar, console))
    return run_audit(source.table, settings, claims, source=source)


def audit_options(format_flag: str = "--format"):
    """The audit options shared by ``rlaudit audit`` and ``rlaudit report`` (``report`` names the importer
    flag ``--from``, since its ``--format`` picks the outputs)."""
    options = [
        click.option(format_flag, "fmt", metavar="F", help="Importer for a published format (dopamine, rliable, …); "
                  "default: by suffix or sniffing."),
        click.option("--data", "data_dir", metavar="DIR", help="Folder with a published protocol's data files."),
        click.option("--normalize", metavar="SPEC", help="none | atari | divide:K | minmax:FILE.csv "
                  "(default: the protocol's, else none)."),
        click.option("--metric", metavar="M", help="Deciding metric: iqm (default) | median | mean | og."),
        click.option("--budgets", metavar="B1,B2,…", help="Budgets to audit (default: every budget all algorithms have)."),
        click.option("--claims", "claims_file", metavar="FILE", help="TOML file of [[claims]] (replaces the protocol's)."),
        click.option("--reps", metavar="N", help="Bootstrap replicates for aggregates and differences (default 50000)."),
        click.option("--reps-pairwise", metavar="N", help="Replicates for P(a > b), profiles, per-task (default 2000)."),
        click.option("--seed", metavar="S", help="Seed of every random stream (default 0)."),
        click.option("--alpha", metavar="A", help="Family-wise error rate over all orderings (default 0.05)."),
        click.option("--gamma", metavar="G", help="Optimality-gap threshold (default 1.0)."),
        click.option("--ci-method", metavar="M", help="Bootstrap for intervals and decisions: expanded (default; "
                  "calibrated at 3-10 runs per task) | percentile (rliable's) | bca."),
        click.option("--correction", metavar="C", help="Family-wise error control: maxt (default; Westfall-Young on "
                  "the joint bootstrap) | holm | bonferroni."),
        click.option("--small-sample", is_flag=True, help="Same as --ci-method expanded (the default; kept for old "
                  "scripts)."),
    ]

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate
