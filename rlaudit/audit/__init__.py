"""The audit stage: aggregates, orderings with error control, inversions, claims and checklist.

``run_audit(table, settings, claims)`` takes a tidy :class:`~rlaudit.scores.ScoreTable` and returns an
:class:`~rlaudit.audit.result.AuditResult` (the ``audit.json`` document). It is pure apart from the
optional progress callback: no files are read or written here.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rlaudit import __version__
from rlaudit.audit.checklist import (check_budgets, check_eval_protocol, check_normalization, check_runs,
                                     check_score_kind, check_tasks)
from rlaudit.audit.claims import Claim, check_claims, evaluate_claim, load_claims_file, parse_claims
from rlaudit.audit.inversions import find_crossovers, find_inversions, metric_sensitivity
from rlaudit.audit.orderings import (control_family, correction_description, decision_label, opposite,
                                     extremes, interval_from_extremes, max_tail_limit,
                                     point_decision, tail_counts)
from rlaudit.audit.result import SCHEMA_VERSION, AuditResult
from rlaudit.audit.runs_needed import method_description, runs_needed
from rlaudit.audit.settings import AuditSettings
from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable

__all__ = ["AuditResult", "AuditSettings", "Claim", "SCHEMA_VERSION", "load_claims_file", "parse_claims",
           "run_audit", "Progress"]


class Progress:
    """Progress sink for long audits; the CLI passes a rich-backed subclass. The default does nothing."""

    def start(self, stage: str, total: int) -> None:
        """A stage with ``total`` steps begins."""

    def advance(self, n: int = 1) -> None:
        """``n`` steps of the current stage are done."""

    def done(self) -> None:
        """The current stage is finished."""


def work_estimate(table: ScoreTable, settings: AuditSettings) -> float:
    """Rough number of random draws an audit makes (the CLI shows a progress bar above a threshold).

    Aggregates draw ``reps`` per run score; probability of improvement draws ``reps_pairwise`` per run score
    of both algorithms of every pair; profiles and per-task intervals ``2 reps_pairwise`` per run score.
    """
    n_algorithms = max(1, table.frame["algorithm"].nunique())
    return float(len(table.frame)) * (settings.reps + (n_algorithms + 1) * settings.reps_pairwise)


# ----------------------------------------------------------------------------------------- selection

def _normalize(table: ScoreTable, spec) -> tuple[ScoreTable, str]:
    """Apply the normalisation ``spec``; return the table and the label written to ``audit.json``."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return table, table.meta.normalized or "none"
    from rlaudit.stats.normalize import normalize, parse_normalization

    norm = spec if hasattr(spec, "method") and hasattr(spec, "label") else parse_normalization(spec, "--normalize")
    if getattr(norm, "method", None) == "none":
        return table, table.meta.normalized or "none"
    out = normalize(table, norm)
    return out, out.meta.normalized or norm.label


def _select(table: ScoreTable, settings: AuditSettings, where: str) -> tuple[list[int], list[str], list]:
    """Audited budgets, common tasks and the checklist findings about what was left out."""
    frame = table.frame
    algorithms = table.algorithms
    budgets_by_alg = {a: set(int(b) for b in g["budget"].unique()) for a, g in frame.groupby("algorithm", sort=False)}
    unit = table.meta.budget_unit
    if settings.budgets:
        present = set().union(*budgets_by_alg.values())
        for b in settings.budgets:
            if b not in present:
                raise InputError(f"--budgets: budget {b} is not in {where} (budgets present, in {unit}: "
                                 f"{', '.join(str(x) for x in sorted(present))})")
            lacking = [a for a in algorithms if b not in budgets_by_alg[a]]
            if lacking:
                raise InputError(f"--budgets: budget {b} is missing for {', '.join(lacking)} in {where} "
                                 f"(it has budgets {', '.join(str(x) for x in sorted(budgets_by_alg[lacking[0]]))})")
        budgets = sorted(set(settings.budgets))
    else:
        budgets = sorted(set.intersection(*budgets_by_alg.values()))
        if not budgets:
            desc = "; ".join(f"{a}: {', '.join(str(b) for b in sorted(bs))}" for a, bs in budgets_by_alg.items())
            raise InputError(f"{where}: no budget is shared by all algorithms ({desc}); pick algorithms or "
                             f"budgets that overlap")
    sub = frame[frame["budget"].isin(budgets)]
    cells = {k: set(g) for k, g in sub.groupby(["algorithm", "budget"], sort=False)["task"]}
    tasks_by_alg = {a: set.intersection(*[cells.get((a, b), set()) for b in budgets]) for a in algorithms}
    common = sorted(set.intersection(*tasks_by_alg.values()))
    if not common:
        raise InputError(f"{where}: no task is present for every algorithm at every audited budget")
    all_tasks = {a: set(g) for a, g in sub.groupby("algorithm", sort=False)["task"]}
    findings = check_tasks(all_tasks, common)
    findings += check_budgets(budgets_by_alg, budgets, unit)
    return budgets, common, findings


def _check_runs(frame: pd.DataFrame, where: str) -> None:
    counts = frame.groupby(["algorithm", "task", "budget"]).size()
    single = counts[counts < 2]
    if len(single):
        cells = [f"{a}/{t}/budget {b}" for (a, t, b) in single.index[:3]]
        more = f" and {len(single) - 3} more" if len(single) > 3 else ""
        raise InputError(f"{where}: a single run for {', '.join(cells)}{more}; the stratified bootstrap needs at "
                         f"least 2 runs per task (drop the task or add runs)")


# ------------------------------------------------------------------------------------------- the audit

def run_audit(table: ScoreTable, settings: AuditSettings | None = None, claims: Sequence[Claim] = (),
              source=None, progress: Progress | None = None) -> AuditResult:
    """Audit a score table.

    Args:
        table: the tidy scores (one row per algorithm, task, run, budget).
        settings: what to compute (defaults: IQM, 50,000 replicates, Holm at alpha 0.05, seed 0).
        claims: claims to check (see :mod:`rlaudit.audit.claims`).
        source: a :class:`~rlaudit.sources.Source` (or a path string) for provenance in ``audit.json``.
        progress: optional progress sink (see :class:`Progress`).

    Returns:
        The :class:`AuditResult`.

    Raises:
        InputError: a requested budget some algorithm lacks, a task with a single run, no common tasks, a
            claim naming an unknown algorithm or budget, a task without reference scores, bad settings.
    """
    from rlaudit.stats import bootstrap, improvement, metrics as stats_metrics, profiles, ranks

    settings = (settings or AuditSettings()).check()
    claims = tuple(claims)
    extra = tuple(c.metric for c in claims if c.metric and c.metric not in settings.metrics)
    if extra:
        settings = settings.replace(metrics=settings.metrics + tuple(dict.fromkeys(extra)))
    progress = progress or Progress()
    where = _where(table, source)

    raw = table
    table, norm_label = _normalize(table, settings.normalization)
    budgets, tasks, findings = _select(table, settings, where)
    algorithms = table.algorithms
    check_claims(claims, algorithms, budgets, table.meta.budget_unit)
    audited = table.frame[table.frame["budget"].isin(budgets) & table.frame["task"].isin(tasks)]
    _check_runs(audited, where)

    scores = _score_sets(audited)
    raw_scores = _score_sets(raw.frame[raw.frame["budget"].isin(budgets) & raw.frame["task"].isin(tasks)])
    metrics = list(settings.metrics)
    pairs = list(itertools.combinations(algorithms, 2))
    seed, gamma = settings.seed, settings.gamma

    # One replicate matrix per (algorithm, budget), shared by every pair that involves it. Budgets are
    # processed one at a time; of each pair's replicate differences only the k_max smallest and largest
    # are kept (every interval the error control can ask for is within them), so memory is bounded by one
    # budget's replicates whatever the number of budgets.
    k_max = max_tail_limit(settings.reps, settings.alpha)
    main = settings.metric
    j_main = metrics.index(main)
    sets: dict[tuple[str, int], list[np.ndarray]] = {}
    points: dict[tuple[str, int], list[float]] = {}
    pending: dict[str, list[dict]] = {m: [] for m in metrics}  # orderings before the error control
    aggregates, rank_rows = [], []
    progress.start("bootstrap aggregates", len(algorithms) * len(budgets))
    for b in budgets:
        reps = {}
        reps_dec = reps if not settings.small_sample else {}  # replicates behind the decisions
        for a in algorithms:
            s = [scores[(a, b, t)] for t in tasks]
            sets[(a, b)] = s
            values = bootstrap.replicates(s, metrics, settings.reps, bootstrap.rng_for(seed, "aggregate", b, a), gamma)
            reps[a] = values
            points[(a, b)] = [stats_metrics.aggregate(m, s, gamma) for m in metrics]
            for j, m in enumerate(metrics):
                point = points[(a, b)][j]
                jk = bootstrap.jackknife(m, s, gamma) if settings.interval_method == "bca" else None
                lo, hi = bootstrap.interval(point, values[:, j], settings.confidence, settings.interval_method, jk)
                aggregates.append({"budget": b, "algorithm": a, "metric": m, "point": point, "lo": lo, "hi": hi})
            if settings.small_sample:
                rng = bootstrap.rng_for(seed, "aggregate", b, a)
                reps_dec[a] = _expanded_replicates(s, metrics, settings.reps, rng, gamma, points[(a, b)], bootstrap,
                                                   stats_metrics)
            progress.advance()
        for j, m in enumerate(metrics):
            for a1, a2 in pairs:
                d = reps_dec[a1][:, j] - reps_dec[a2][:, j]
                pending[m].append({"budget": b, "a": a1, "b": a2, "tail": min(tail_counts(d)),
                                   "se": float(np.std(d, ddof=1)), "extremes": extremes(d, k_max),
                                   "point": points[(a1, b)][j] - points[(a2, b)][j]})
        values = np.column_stack([reps[a][:, j_main] for a in algorithms])
        probs = ranks.rank_probabilities(values, stats_metrics.HIGHER_IS_BETTER[main])
        rank_rows += [{"budget": b, "algorithm": a, "metric": main, "probs": [float(p) for p in probs[i]]}
                      for i, a in enumerate(algorithms)]
        del reps, reps_dec, values
    progress.done()

    # Orderings: one error-controlled family per metric (all pairs x budgets).
    rows: dict[str, dict[tuple[int, str, str], dict]] = {}
    m_family = len(pairs) * len(budgets)
    for m in metrics:
        hib = stats_metrics.HIGHER_IS_BETTER[m]
        fam = control_family([o["tail"] for o in pending[m]], settings.reps, settings.alpha, settings.correction)
        rows[m] = {}
        for i, o in enumerate(pending[m]):
            lo, hi = interval_from_extremes(o["extremes"], int(fam.tail_limits[i]))
            rows[m][(o["budget"], o["a"], o["b"])] = {
                "budget": o["budget"], "a": o["a"], "b": o["b"], "metric": m,
                "decision": decision_label(bool(fam.decided[i]), lo, hi, hib),
                "diff_point": o["point"], "diff_lo": lo, "diff_hi": hi, "diff_se": o["se"],
                "ci_level": 1.0 - float(fam.levels[i]),
                "p_value": float(fam.p_values[i]), "p_adjusted": float(fam.p_adjusted[i]),
                "direction": point_decision(o["point"], hib)}
    del pending

    # Probability of improvement and runs needed, for the deciding metric's orderings.
    orderings = []
    progress.start("probability of improvement", len(pairs) * len(budgets))
    for (b, a1, a2), row in rows[settings.metric].items():
        x, y = sets[(a1, b)], sets[(a2, b)]
        poi = improvement.probability_of_improvement(x, y)
        poi_reps = improvement.poi_replicates(x, y, settings.reps_pairwise,
                                              bootstrap.rng_for(seed, "poi", b, a1, a2))
        poi_lo, poi_hi = bootstrap.interval(poi, poi_reps, settings.confidence, "percentile")
        needed, capped = None, False
        if row["decision"] == "inconclusive":
            n_runs = max(int(max(len(t) for t in x)), int(max(len(t) for t in y)))
            needed, capped = runs_needed(row["diff_point"], row["diff_se"], n_runs, settings.alpha,
                                         max(m_family, 1), settings.power, settings.runs_needed_cap)
        orderings.append({k: row[k] for k in ("budget", "a", "b", "metric", "decision", "diff_point", "diff_lo",
                                               "diff_hi", "diff_se", "ci_level", "p_value", "p_adjusted")}
                         | {"p_improvement": poi, "p_improvement_lo": poi_lo, "p_improvement_hi": poi_hi,
                            "runs_needed": needed, "runs_needed_capped": capped})
        progress.advance()
    progress.done()

    def decisions_of(m: str) -> dict[tuple[str, str], list[str]]:
        return {(a1, a2): [rows[m][(b, a1, a2)]["decision"] for b in budgets] for a1, a2 in pairs}

    directions = {(a1, a2): [rows[main][(b, a1, a2)]["direction"] for b in budgets] for a1, a2 in pairs}
    inversions = find_inversions(budgets, decisions_of(main), directions, main)
    crossovers = find_crossovers(budgets, decisions_of(main), main)
    sensitivity = metric_sensitivity(budgets, {m: decisions_of(m) for m in metrics})

    # Profiles and per-task intervals.
    profile_rows = []
    progress.start("profiles and per-task intervals", len(budgets) * len(algorithms))
    per_task = []
    for b in budgets:
        taus = profiles.default_taus(np.concatenate([np.concatenate(sets[(a, b)]) for a in algorithms]))
        for a in algorithms:
            point, lo, hi = _profile_bands(profiles, sets[(a, b)], taus, settings.reps_pairwise,
                                           bootstrap.rng_for(seed, "profile", b, a), settings.confidence)
            profile_rows.append({"budget": b, "algorithm": a, "taus": _floats(taus), "fraction": _floats(point),
                                 "lo": _floats(lo), "hi": _floats(hi)})
            raw_set = [raw_scores[(a, b, t)] for t in tasks]
            for t, scores in zip(tasks, raw_set):
                values = bootstrap.replicates([scores], ["mean"], settings.reps_pairwise,
                                              bootstrap.rng_for(seed, "task", b, a, t))[:, 0]
                mean = float(np.mean(scores))
                lo_t, hi_t = bootstrap.interval(mean, values, settings.confidence, "percentile")
                per_task.append({"budget": b, "algorithm": a, "task": t, "n_runs": int(scores.size),
                                 "mean": mean, "lo": lo_t, "hi": hi_t})
            progress.advance()
    progress.done()

    # Claims.
    def lookup(budget: int, better: str, worse: str, metric: str) -> dict:
        row = rows[metric].get((budget, better, worse))
        if row is not None:
            return row
        row = rows[metric][(budget, worse, better)]
        return {"decision": opposite(row["decision"]), "diff_point": -row["diff_point"],
                "diff_lo": -row["diff_hi"], "diff_hi": -row["diff_lo"]}

    claim_rows = [evaluate_claim(c, budgets, main, lookup) for c in claims]

    # Checklist.
    findings += check_runs(audited)
    findings += check_score_kind(audited, table.meta.score_kind)
    findings += check_eval_protocol(audited)
    findings += check_normalization(len(tasks), norm_label)

    design = (audited.groupby(["algorithm", "task", "budget"], sort=False).size().reset_index(name="n_runs"))
    score_kind = (sorted(set(audited["score_kind"])) if "score_kind" in audited.columns else [table.meta.score_kind])
    data = {
        "algorithms": algorithms, "tasks": tasks, "budgets": budgets, "budget_unit": table.meta.budget_unit,
        "budget_labels": [dict(x) for x in getattr(source, "budget_labels", ()) if x.get("budget") in budgets],
        "score_kind": score_kind[0] if len(score_kind) == 1 else "mixed",
        "normalization": norm_label,
        "design": [{"algorithm": r.algorithm, "task": r.task, "budget": int(r.budget), "n_runs": int(r.n_runs)}
                   for r in design.itertuples()],
        "notes": list(table.meta.notes),
    }
    settings_doc = {
        "metric": main, "metrics": metrics, "gamma": gamma, "reps": settings.reps,
        "reps_pairwise": settings.reps_pairwise, "seed": seed, "alpha": settings.alpha,
        "confidence": settings.confidence, "interval_method": settings.interval_method,
        "correction": settings.correction,
        "correction_description": correction_description(settings.correction, settings.alpha, len(pairs),
                                                         len(budgets), main),
        "runs_needed_method": method_description(settings.alpha, max(m_family, 1), settings.power,
                                                 settings.runs_needed_cap),
        "runs_needed_cap": settings.runs_needed_cap, "power": settings.power,
        "small_sample": settings.small_sample,
        "budgets_requested": list(settings.budgets) if settings.budgets else None,
        "normalization": norm_label,
    }
    return AuditResult(
        rlaudit_version=__version__, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        source=_source_doc(source, table), data=data, settings=settings_doc, budgets=budgets,
        aggregates=aggregates, orderings=orderings, inversions=inversions, crossovers=crossovers,
        metric_sensitivity=sensitivity, rank_distribution=rank_rows, profiles=profile_rows, per_task=per_task,
        claims=claim_rows, checklist=[f.to_dict() for f in findings])


def _score_sets(frame: pd.DataFrame) -> dict[tuple[str, int, str], np.ndarray]:
    """``(algorithm, budget, task)`` -> scores of its runs, shape ``(n_runs,)``, in the table's run order."""
    return {(a, int(b), t): g.to_numpy(dtype=np.float64)
            for (a, b, t), g in frame.groupby(["algorithm", "budget", "task"], sort=False)["score"]}


def _expanded_replicates(score_set, metrics, reps, rng, gamma, points, bootstrap, stats_metrics) -> np.ndarray:
    """Replicates of the *expanded* bootstrap used for decisions with ``small_sample=True``.

    Each task's runs are expanded about their mean by ``sqrt(n / (n - 1))`` before the stratified
    resampling (so the bootstrap variance of a task mean is unbiased instead of ``(n - 1) / n`` of it), and
    the replicates are shifted so that they are centred like those of the original data (the expansion
    moves the IQM and median slightly). Same random stream as the aggregate replicates.

    Returns:
        Array of shape ``(reps, len(metrics))``.
    """
    expanded = [x.mean() + np.sqrt(x.size / (x.size - 1.0)) * (x - x.mean()) for x in score_set]
    values = bootstrap.replicates(expanded, metrics, reps, rng, gamma)
    shift = np.asarray(points) - np.array([stats_metrics.aggregate(m, expanded, gamma) for m in metrics])
    return values + shift


def _profile_bands(profiles, score_set, taus, reps, rng, confidence):
    """``profiles.profile_bands`` with the per-tau percentile intervals taken in one vectorised call.

    Same random draws and the same linear-interpolation quantiles as ``profile_bands`` (tested equal); it
    avoids one ``np.quantile`` call per threshold, which dominated small audits.
    """
    point = profiles.performance_profile(score_set, taus)
    values = profiles.profile_replicates(score_set, taus, reps, rng)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, (tail, 1.0 - tail), axis=0)
    return point, lo, hi


def _floats(a) -> list[float]:
    return [float(x) for x in np.asarray(a).reshape(-1)]


def _where(table: ScoreTable, source) -> str:
    if source is not None:
        return str(getattr(source, "path", source))
    return table.meta.source or "scores"


def _source_doc(source, table: ScoreTable) -> dict:
    if source is None:
        return {"path": table.meta.source or None, "protocol": None, "title": None, "citation": None}
    if isinstance(source, str):
        return {"path": source, "protocol": None, "title": None, "citation": None}
    return {"path": str(getattr(source, "path", "")) or None, "protocol": getattr(source, "protocol", None),
            "title": getattr(source, "title", None), "citation": getattr(source, "citation", None)}

