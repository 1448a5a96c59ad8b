"""The steps of an audit, in the order :func:`rlaudit.audit.run_audit` runs them.

1. :func:`select` — normalise, pick the audited budgets and common tasks, build the score sets and say
   which algorithms have paired budgets (the same run ids at every budget).
2. :func:`bootstrap_aggregates` — one replicate matrix per (algorithm, budget) under the audit's bootstrap
   scheme (drawn jointly across budgets for paired algorithms); aggregate intervals; rank distributions.
3. :func:`decide_family` — per metric, one error-controlled family of orderings (pairs x budgets) and
   changes (pairs x each budget vs the last).
4. :func:`pairwise_details` — probability of improvement and runs needed for the deciding metric.
5. :func:`profiles_and_tasks` — performance profiles and per-task intervals (descriptive).
6. :func:`assemble` — inversions, crossovers, metric sensitivity, claims, checklist, ``AuditResult``.

Every step is pure (no files); random streams are keyed by what they describe (:func:`~rlaudit.stats.
bootstrap.rng_for`), so the numbers do not depend on the order of the steps or on other algorithms.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from rlaudit import __version__
from rlaudit.audit import calibration
from rlaudit.audit.learning import claim_notes, learning_doc
from rlaudit.audit.checklist import (check_budgets, check_data_shape, check_eval_protocol, check_normalization,
                                     check_runs, check_score_kind, check_sweep, check_tasks)
from rlaudit.audit.claims import Claim, check_claims, evaluate_claim
from rlaudit.audit.inversions import find_crossovers, find_inversions, metric_sensitivity
from rlaudit.audit.orderings import (control_family, correction_description, decision_label, interval_at,
                                     null_tails, opposite, p_from_tail, point_decision, tail_counts)
from rlaudit.audit.result import AuditResult
from rlaudit.audit.runs_needed import method_description, runs_needed, runs_needed_range
from rlaudit.audit.settings import AuditSettings
from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable
from rlaudit.stats import bootstrap, improvement, profiles, ranks
from rlaudit.stats import metrics as stats_metrics


class Progress:
    """Progress sink for long audits; the CLI passes a rich-backed subclass. The default does nothing."""

    def start(self, stage: str, total: int) -> None:
        """A stage with ``total`` steps begins."""

    def advance(self, n: int = 1) -> None:
        """``n`` steps of the current stage are done."""

    def done(self) -> None:
        """The current stage is finished."""

    def estimate(self, cost) -> None:
        """The audit's up-front estimate (:class:`~rlaudit.audit.AuditCost`), before any replicate is drawn."""


# ------------------------------------------------------------------------------------------ 1. select

@dataclass
class Selection:
    """What is audited, after normalisation and selection."""

    table: ScoreTable
    """The normalised table."""
    norm_label: str
    """Normalisation written to ``audit.json``."""
    algorithms: list[str]
    budgets: list[int]
    """Audited budgets, ascending."""
    tasks: list[str]
    """Tasks every algorithm has at every audited budget."""
    audited: pd.DataFrame
    """Tidy rows actually audited (normalised scores)."""
    sets: dict[tuple[str, int], list[np.ndarray]]
    """``(algorithm, budget)`` -> score set (one array of shape ``(n_runs_m,)`` per task, runs by run id)."""
    raw_sets: dict[tuple[str, int], list[np.ndarray]]
    """The same cells before normalisation (per-task intervals are in raw scores)."""
    paired: dict[str, bool]
    """Per algorithm: the same run ids at every audited budget (runs resampled jointly across budgets)."""
    findings: list = field(default_factory=list)
    """Checklist findings about what was left out."""
    norm_detail: dict = field(default_factory=dict)
    """``{"references": {task: [low, high]}, "source": str}`` of the applied normalisation, each key only when
    it applies (references of the audited tasks, for ``minmax``/``atari``); ``{}`` for raw scores."""
    shapes: list = field(default_factory=list)
    """Data shapes found in ``sets`` (:func:`rlaudit.audit.calibration.detect_shapes`)."""
    random_refs: dict = field(default_factory=dict)
    """Task -> the random policy's raw score, when the normalisation's low ends are random-policy scores."""
    random_source: str = ""
    """Where those scores come from, in words."""

    @property
    def df_scale(self) -> float:
        """Factor on each task's ``n - 1`` in the expanded scheme's t reading (:data:`calibration.DF_SCALE`)."""
        return min((calibration.DF_SCALE.get(s.shape, 1.0) for s in self.shapes), default=1.0)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Every pair of algorithms, in table order."""
        return list(itertools.combinations(self.algorithms, 2))

    @property
    def n_tests(self) -> int:
        """Members of one metric's family: orderings (pairs x budgets) and changes (pairs x earlier budgets)."""
        n_pairs = len(self.pairs)
        return n_pairs * len(self.budgets) + n_pairs * max(len(self.budgets) - 1, 0)


def select(table: ScoreTable, settings: AuditSettings, claims: Sequence[Claim], where: str) -> Selection:
    """Normalise ``table``, choose budgets and tasks and build the score sets.

    Raises:
        InputError: a requested budget some algorithm lacks, no shared budget or task, a task with a single
            run, a claim naming an unknown algorithm or budget, a task without reference scores.
    """
    raw = table
    table, norm_label, norm = _normalize(table, settings.normalization)
    table, single = _set_aside_single_run(table)
    budgets, tasks, findings = _budgets_and_tasks(table, settings, where)
    if not single.empty:
        findings.append(_single_run_finding(single, budgets, tasks, settings, table.meta.budget_unit))
    check_claims(claims, table.algorithms, budgets, table.meta.budget_unit)
    keep = table.frame["budget"].isin(budgets) & table.frame["task"].isin(tasks)
    audited = table.frame[keep]
    _check_runs(audited, where)
    _check_magnitude(audited, where, norm_label if norm is not None else "")
    raw_audited = raw.frame[raw.frame["budget"].isin(budgets) & raw.frame["task"].isin(tasks)]
    _check_magnitude(raw_audited, where, "")
    sets, run_ids = _score_sets(audited, table.algorithms, budgets, tasks)
    raw_sets, _ = _score_sets(raw_audited, table.algorithms, budgets, tasks)
    paired = {a: all(run_ids[(a, b)] == run_ids[(a, budgets[0])] for b in budgets) for a in table.algorithms}
    return Selection(table, norm_label, list(table.algorithms), budgets, tasks, audited, sets, raw_sets, paired,
                     findings, norm_detail=_norm_detail(norm, tasks), shapes=calibration.detect_shapes(sets, tasks),
                     **_random_references(norm, tasks, settings.random_policy))


def _random_references(norm, tasks: list[str], given: dict | None = None) -> dict:
    """``random_refs`` and ``random_source`` of a :class:`Selection`: the protocol's ``[audit.random_policy]``
    (``given``) when there is one, else a normalisation's low ends when they are the random policy's scores,
    else none."""
    if given:
        refs = {t: float(given["scores"][t]) for t in tasks if t in given["scores"]}
        return {"random_refs": refs, "random_source": str(given.get("source", ""))}
    if norm is None or not getattr(norm, "low_is_random", False):
        return {}
    refs = {t: float(pair[0]) for t in tasks if (pair := norm.reference_for(t))}
    source = norm.source or ("Atari-57 random-policy scores (DQN Zoo)" if norm.method == "atari" else "")
    return {"random_refs": refs, "random_source": source}


def _set_aside_single_run(table: ScoreTable) -> tuple[ScoreTable, pd.DataFrame]:
    """Split off the algorithms with at most one run in every (task, budget) cell (MuZero, IMPALA in the
    published data): no interval can be computed for them, so they take no part in orderings. Returns the
    table without them and their rows (empty when none, or when no algorithm has several runs)."""
    frame = table.frame
    most = frame.groupby(["algorithm", "task", "budget"], sort=False).size().groupby(level=0).max()
    single = [a for a in table.algorithms if most[a] <= 1]
    if not single or len(single) == len(table.algorithms):
        return table, frame.iloc[:0]
    keep = ~frame["algorithm"].isin(single)
    return ScoreTable(frame[keep].reset_index(drop=True), table.meta), frame[~keep]


def _single_run_finding(rows: pd.DataFrame, budgets: list[int], tasks: list[str], settings: AuditSettings,
                        unit: str):
    """``single-run`` finding: each set-aside algorithm by name, with its point estimate per audited budget on
    the audited tasks it has (no interval: one run per task)."""
    from rlaudit.audit.checklist import Finding

    details, parts = {}, []
    for a, g in rows.groupby("algorithm", sort=True):
        points, n_tasks = {}, {}
        for b in budgets:
            at = g[(g["budget"] == b) & g["task"].isin(tasks)]
            if len(at):
                score_set = [t["score"].to_numpy(dtype=np.float64) for _, t in at.groupby("task")]
                points[str(b)] = float(stats_metrics.aggregate(settings.metric, score_set, settings.gamma))
                n_tasks[str(b)] = len(score_set)
        details[a] = {"points": points, "n_tasks": n_tasks}
        shown = ", ".join(f"{int(b):,}: {v:.3g} ({n_tasks[b]} tasks)" for b, v in points.items()) or "no audited budget"
        parts.append(f"{a} ({settings.metric} over the audited tasks it has, of {len(tasks)}; by budget in {unit}: "
                     f"{shown})")
    return Finding(
        "single-run", "warning",
        f"one run per task, so no interval and no part in the orderings, inversions or claims: {'; '.join(parts)}",
        "these point estimates are descriptive only; several runs per task are needed to order them",
        {"algorithms": details})


def _normalize(table: ScoreTable, spec) -> tuple[ScoreTable, str, object | None]:
    """Apply the normalisation ``spec``; return the table, the label written to ``audit.json`` and the
    :class:`~rlaudit.stats.normalize.Normalization` applied (``None``: none)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return table, table.meta.normalized or "none", None
    from rlaudit.stats.normalize import normalize, parse_normalization

    norm = spec if hasattr(spec, "method") and hasattr(spec, "label") else parse_normalization(spec, "--normalize")
    if getattr(norm, "method", None) == "none":
        return table, table.meta.normalized or "none", None
    out = normalize(table, norm)
    return out, out.meta.normalized or norm.label, norm


def _norm_detail(norm, tasks: list[str]) -> dict:
    """What a reader needs to check a normalisation: the audited tasks' references and their source."""
    if norm is None:
        return {}
    detail: dict = {}
    if norm.method in ("minmax", "atari"):
        detail["references"] = {t: list(pair) for t in tasks if (pair := norm.reference_for(t))}
    if getattr(norm, "source", ""):
        detail["source"] = norm.source
    return detail


def _budgets_and_tasks(table: ScoreTable, settings: AuditSettings, where: str) -> tuple[list[int], list[str], list]:
    """Audited budgets, common tasks and the checklist findings about what was left out."""
    frame = table.frame
    algorithms = table.algorithms
    budgets_by_alg = {a: set(int(b) for b in g["budget"].unique()) for a, g in frame.groupby("algorithm", sort=False)}
    unit = table.meta.budget_unit
    flag = settings.where("budgets")
    if settings.budgets:
        present = set().union(*budgets_by_alg.values())
        for b in settings.budgets:
            if b not in present:
                raise InputError(f"{flag}: budget {b} is not in {where} (budgets present, in {unit}: "
                                 f"{', '.join(str(x) for x in sorted(present))})")
            lacking = [a for a in algorithms if b not in budgets_by_alg[a]]
            if lacking:
                raise InputError(f"{flag}: budget {b} is missing for {', '.join(lacking)} in {where} "
                                 f"(it has budgets {', '.join(str(x) for x in sorted(budgets_by_alg[lacking[0]]))})")
        budgets = sorted(set(settings.budgets))
    else:
        budgets = sorted(set.intersection(*budgets_by_alg.values()))
        if not budgets:
            desc = "; ".join(f"{a}: {', '.join(str(b) for b in sorted(bs))}" for a, bs in budgets_by_alg.items())
            raise InputError(f"{where}: no budget is shared by all algorithms ({desc}); pick algorithms or "
                             f"budgets that overlap")
    # One row per (algorithm, budget, task) first: the set comprehensions below then walk cells, not runs.
    sub = frame.loc[frame["budget"].isin(budgets), ["algorithm", "budget", "task"]].drop_duplicates()
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


SCORE_LIMIT = 1e100
"""Largest score magnitude an audit takes. Far past any real score, and small enough that no sum, mean,
difference, or sum of squared deviations over runs or over bootstrap replicates (variances and standard
errors, up to 10^100 terms) can overflow to infinity."""


def _check_magnitude(frame: pd.DataFrame, where: str, normalized: str) -> None:
    scores = frame["score"].to_numpy(dtype=np.float64)
    big = np.abs(scores) > SCORE_LIMIT
    if big.any():
        row = frame.iloc[int(np.argmax(big))]
        what = f"normalised ({normalized}) score" if normalized else "score"
        raise InputError(f"{where}: {what} {row['score']:.4g} of {row['algorithm']} on {row['task']} (run "
                         f"{row['run']}, budget {row['budget']}) is too large for the bootstrap, whose variances "
                         f"overflow past {SCORE_LIMIT:g} in magnitude; rescale the scores in the source (divide "
                         f"them by 1e100, say)")


def _score_sets(frame: pd.DataFrame, algorithms, budgets, tasks) -> tuple[dict, dict]:
    """``(algorithm, budget)`` -> score set ordered by task then run id, and -> the ``(task, run)`` ids."""
    frame = frame.sort_values(["algorithm", "budget", "task", "run"], kind="stable")
    # Positions per cell at once (iterating a groupby of 10^4 cells costs seconds per pass at 10^6 rows).
    where = {(a, int(b), t): idx for (a, b, t), idx in frame.groupby(["algorithm", "budget", "task"], sort=False)
             .indices.items()}
    scores, runs = frame["score"].to_numpy(dtype=np.float64), frame["run"].to_numpy()
    sets, ids = {}, {}
    for a in algorithms:
        for b in budgets:
            cells = [where[(a, b, t)] for t in tasks]
            sets[(a, b)] = [scores[idx] for idx in cells]
            ids[(a, b)] = [tuple(runs[idx].tolist()) for idx in cells]
    return sets, ids


# -------------------------------------------------------------------------------- 2. bootstrap aggregates

@dataclass
class Replicates:
    """Point estimates and the replicates behind every interval and decision of the aggregate metrics."""

    metrics: list[str]
    reps: int
    points: dict[tuple[str, int], np.ndarray]
    """``(algorithm, budget)`` -> point estimates, shape ``(n_metrics,)``."""
    values: dict[tuple[str, int], np.ndarray]
    """``(algorithm, budget)`` -> replicates, shape ``(reps, n_metrics)`` (same replicate index across
    algorithms and budgets: joint draws for paired budgets, independent streams otherwise)."""
    df_parts: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """``(algorithm, budget)`` -> per-task variance contributions ``(n_metrics, n_tasks)`` and their degrees of
    freedom ``(n_tasks,)`` (:func:`~rlaudit.stats.bootstrap.variance_contributions`), for the expanded scheme."""
    aggregates: list[dict] = field(default_factory=list)
    """``audit.json`` ``aggregates`` rows."""

    def df(self, cells: Sequence[tuple[str, int]], j: int) -> float:
        """Effective degrees of freedom of a statistic built from ``cells`` (Welch-Satterthwaite over every
        task of every cell, as if independent); ``inf`` unless the scheme is ``expanded``."""
        if not self.df_parts:
            return float("inf")
        v = np.concatenate([self.df_parts[c][0][j] for c in cells])
        d = np.concatenate([self.df_parts[c][1] for c in cells])
        return bootstrap.effective_df(v, d)


def bootstrap_aggregates(sel: Selection, settings: AuditSettings, metrics: Sequence[str], reps: int,
                         progress: Progress) -> Replicates:
    """Replicates of every metric for every (algorithm, budget) under the settings' scheme, and intervals.

    A paired algorithm draws one resampling of runs per replicate from ``rng_for(seed, "aggregate", a)`` and
    reads it at every budget; otherwise each budget draws from ``rng_for(seed, "aggregate", b, a)``.
    """
    metrics = list(metrics)
    out = Replicates(metrics, reps, {}, {})
    progress.start("bootstrap aggregates", len(sel.algorithms))
    for a in sel.algorithms:
        if sel.paired[a]:
            groups = [(bootstrap.rng_for(settings.seed, "aggregate", a), sel.budgets)]
        else:
            groups = [(bootstrap.rng_for(settings.seed, "aggregate", b, a), [b]) for b in sel.budgets]
        for rng, budgets in groups:
            points, values = bootstrap.method_replicates([sel.sets[(a, b)] for b in budgets], metrics, reps, rng,
                                                         settings.gamma, settings.scheme)
            for i, b in enumerate(budgets):
                out.points[(a, b)], out.values[(a, b)] = points[i], values[i]
        progress.advance()
    progress.done()
    if settings.scheme == "expanded":
        for key, score_set in sel.sets.items():
            contributions = [bootstrap.variance_contributions(m, score_set, settings.gamma) for m in metrics]
            out.df_parts[key] = (np.array(contributions), bootstrap.task_dfs([x.size for x in score_set], sel.df_scale))
    for b in sel.budgets:
        for a in sel.algorithms:
            for j, m in enumerate(metrics):
                point = float(out.points[(a, b)][j])
                lo, hi = bootstrap.scheme_interval(m, sel.sets[(a, b)], point, out.values[(a, b)][:, j],
                                                   settings.confidence, settings.scheme, settings.gamma,
                                                   sel.df_scale)
                out.aggregates.append({"budget": b, "algorithm": a, "metric": m, "point": point, "lo": lo, "hi": hi})
    return out


def rank_distribution(sel: Selection, boot: Replicates, metric: str) -> list[dict]:
    """``audit.json`` ``rank_distribution`` rows of ``metric`` at every budget."""
    j = boot.metrics.index(metric)
    rows = []
    for b in sel.budgets:
        values = np.column_stack([boot.values[(a, b)][:, j] for a in sel.algorithms])
        probs = ranks.rank_probabilities(values, stats_metrics.HIGHER_IS_BETTER[metric])
        rows += [{"budget": b, "algorithm": a, "metric": metric, "probs": [float(p) for p in probs[i]]}
                 for i, a in enumerate(sel.algorithms)]
    return rows


# -------------------------------------------------------------------------------------- 3. test family

@dataclass
class Family:
    """One metric's error-controlled tests."""

    orderings: dict[tuple[int, str, str], dict]
    """``(budget, a, b)`` -> ordering row (``audit.json`` keys plus ``direction``)."""
    changes: list[dict]
    """``audit.json`` ``changes`` rows (each budget vs the last, every pair)."""


def member_p_value(diffs: np.ndarray, point: float, df: float) -> float:
    """A member's p-value: its bootstrap p-value ``(2 t + 1) / (reps + 1)`` read on Student's t with ``df``
    degrees of freedom (identity at ``df = inf``). Where no replicate lies on the other side of 0 (``t = 0``: the
    replicates only bound the p-value) and ``df`` is finite, ``2 P(T_df > |point| / se)`` when that is smaller
    (``se`` the replicates' standard deviation): the t reading's premise, ``D`` about normal, carried past the
    replicates (docs/audit.md, "Beyond the replicates"). Without it a large gap at few degrees of freedom could
    not be decided at all: the floor's t reading is 0.008 at ``df = 5`` with 50,000 replicates, above a 70-test
    family's level."""
    tail = min(tail_counts(diffs))
    p = float(bootstrap.t_corrected_p(p_from_tail(tail, diffs.size), df))
    if tail == 0 and math.isfinite(df):
        se = bootstrap.replicate_se(diffs)  # the se member_interval reads: decided iff the interval excludes 0
        if se > 0 and point * float(np.mean(diffs)) > 0:
            p = min(p, float(2.0 * student_t.sf(abs(point) / se, df)))
    return p


def member_interval(diffs: np.ndarray, point: float, k: int, level: float, df: float) -> tuple[float, float]:
    """A member's interval, dual to its decision: the ``k``-th smallest and largest replicate
    (:func:`~rlaudit.audit.orderings.interval_at`); at a level no tail count resolves (``k = 0``) the t interval
    ``point -/+ t_df^-1(1 - level / 2) se`` widened to cover every replicate, so that "decided" (by
    :func:`member_p_value` beyond the replicates) and "interval excludes 0" stay the same event; ``(-inf, inf)``
    when the replicates do not vary.

    Args:
        diffs: the member's replicates, shape ``(reps,)``.
        point: its point estimate.
        k: its tail limit (``FamilyDecision.tail_limits``).
        level: its level on the t reading (``FamilyDecision.levels``).
        df: its effective degrees of freedom.
    """
    if k >= 1:
        return interval_at(diffs, k)
    return bootstrap.t_interval_past(point, diffs, level, df)


def family_members(budgets: Sequence[int], pairs: Sequence[tuple[str, str]]) -> list[tuple[str, int, str, str]]:
    """The members of one metric's family, in the order it is decided: ``("order", b, a1, a2)`` for every budget
    and pair, then ``("change", b, a1, a2)`` for every pair and every budget but the last."""
    return ([("order", b, a1, a2) for b in budgets for a1, a2 in pairs]
            + [("change", b, a1, a2) for a1, a2 in pairs for b in budgets[:-1]])


def member_statistic(member: tuple[str, int, str, str], boot: Replicates, j: int, last: int
                     ) -> tuple[float, np.ndarray]:
    """A member's point estimate and its replicates, shape ``(reps,)``, of metric column ``j``: the ordering's
    ``D = metric(a1) - metric(a2)`` at its budget, or the change's ``gap(last) - gap(b)``."""
    kind, b, a1, a2 = member

    def gap(budget: int) -> tuple[float, np.ndarray]:
        return (float(boot.points[(a1, budget)][j] - boot.points[(a2, budget)][j]),
                boot.values[(a1, budget)][:, j] - boot.values[(a2, budget)][:, j])

    point, d = gap(b)
    if kind == "order":
        return point, d
    point_last, d_last = gap(last)
    return point_last - point, d_last - d


def decide_family(sel: Selection, boot: Replicates, settings: AuditSettings, metric: str) -> Family:
    """Decide every ordering and change of ``metric`` with family-wise error rate ``settings.alpha``.

    Orderings: ``D = metric(a) - metric(b)`` at each budget. Changes: ``D = gap(last) - gap(budget)`` for
    every earlier budget, where ``gap = metric(a) - metric(b)``; with paired budgets both gaps come from
    the same resampled runs.
    """
    j = boot.metrics.index(metric)
    hib = stats_metrics.HIGHER_IS_BETTER[metric]
    last = sel.budgets[-1]
    members = family_members(sel.budgets, sel.pairs)

    def statistic(i: int) -> tuple[float, np.ndarray]:
        return member_statistic(members[i], boot, j, last)

    def cells(i: int) -> list[tuple[str, int]]:
        kind, b, a1, a2 = members[i]
        return [(a1, b), (a2, b)] + ([(a1, last), (a2, last)] if kind == "change" else [])

    # Expanded scheme: the bootstrap p-value is read on Student's t with the statistic's effective degrees of
    # freedom (few runs per task, or a few tasks dominating the variance, make the bootstrap's normal-like
    # tails too thin), and past the replicates on |D| / se where no replicate crosses 0 (member_p_value); the joint
    # bootstrap still supplies the dependence between tests (max-T).
    dfs = [boot.df(cells(i), j) for i in range(len(members))]
    p_values = [member_p_value(d, point, df) for (point, d), df in zip(map(statistic, range(len(members))), dfs)]
    fam = control_family(p_values, boot.reps, settings.alpha, settings.correction,
                         null_column=lambda i: null_tails(statistic(i)[1]),
                         raw_level=lambda i, c: float(bootstrap.normal_level(c, dfs[i])))
    orderings, changes = {}, []
    for i, (kind, b, a1, a2) in enumerate(members):
        point, d = statistic(i)
        lo, hi = member_interval(d, point, int(fam.tail_limits[i]), float(fam.levels[i]), dfs[i])
        # read past the replicates: none on the other side of 0, and |D| / se on t below the floor's t reading
        past = min(tail_counts(d)) == 0 and p_values[i] < float(bootstrap.t_corrected_p(p_from_tail(0, d.size),
                                                                                          dfs[i]))
        row = {"a": a1, "b": a2, "metric": metric, "diff_point": point, "diff_lo": lo, "diff_hi": hi,
               "diff_se": float(np.std(d, ddof=1)), "ci_level": 1.0 - float(fam.levels[i]),
               "p_value": float(fam.p_values[i]), "p_adjusted": float(fam.p_adjusted[i]), "df": dfs[i],
               "past_replicates": bool(past)}
        if kind == "order":
            orderings[(b, a1, a2)] = {"budget": b, **row, "decision": decision_label(bool(fam.decided[i]), lo, hi, hib),
                                      "direction": point_decision(point, hib)}
        else:
            changes.append({"budget_low": b, "budget_high": last, **row,
                            "decision": "changed" if fam.decided[i] else "inconclusive"})
    return Family(orderings, changes)


# --------------------------------------------------------------------------------- 4. pairwise details

ORDERING_KEYS = ("budget", "a", "b", "metric", "decision", "diff_point", "diff_lo", "diff_hi", "diff_se", "ci_level",
                 "p_value", "p_adjusted", "df", "past_replicates")


def pairwise_details(sel: Selection, family: Family, settings: AuditSettings, progress: Progress) -> list[dict]:
    """``audit.json`` ``orderings`` of the deciding metric: decisions plus probability of improvement and,
    for inconclusive orderings, runs needed (at ``min_effect`` or the observed difference, and a range)."""
    m_family = max(sel.n_tests, 1)
    out = []
    progress.start("probability of improvement", len(family.orderings))
    for (b, a1, a2), row in family.orderings.items():
        x, y = sel.sets[(a1, b)], sel.sets[(a2, b)]
        poi = improvement.probability_of_improvement(x, y)
        poi_reps = improvement.poi_replicates(x, y, settings.reps_pairwise,
                                              bootstrap.rng_for(settings.seed, "poi", b, a1, a2))
        poi_lo, poi_hi = bootstrap.interval(poi, poi_reps, settings.confidence, "percentile")
        needed, capped, fewest, most = None, False, None, None
        if row["decision"] == "inconclusive":
            n_runs = max(int(max(len(t) for t in x)), int(max(len(t) for t in y)))
            args = (row["diff_se"], n_runs, settings.alpha, m_family, settings.power, settings.runs_needed_cap,
                    row["df"], sel.df_scale)  # the t reading's degrees of freedom (inf unless expanded)
            effect = settings.min_effect if settings.min_effect is not None else row["diff_point"]
            needed, capped = runs_needed(effect, *args)
            fewest, most = runs_needed_range(row["diff_lo"], row["diff_hi"], *args)
        out.append({k: row[k] for k in ORDERING_KEYS}
                   | {"p_improvement": poi, "p_improvement_lo": poi_lo, "p_improvement_hi": poi_hi,
                      "runs_needed": needed, "runs_needed_capped": capped, "runs_needed_range": (
                          None if needed is None else [fewest, most])})
        progress.advance()
    progress.done()
    return out


# ------------------------------------------------------------------------------ 5. profiles and tasks

def profiles_and_tasks(sel: Selection, settings: AuditSettings, progress: Progress) -> tuple[list[dict], list[dict]]:
    """Performance profiles with bands (normalised scores) and per-task mean intervals (raw scores)."""
    profile_rows, per_task = [], []
    seed = settings.seed
    progress.start("profiles and per-task intervals", len(sel.budgets) * len(sel.algorithms))
    for b in sel.budgets:
        taus = profiles.default_taus(np.concatenate([np.concatenate(sel.sets[(a, b)]) for a in sel.algorithms]))
        for a in sel.algorithms:
            point, lo, hi = profiles.profile_bands(sel.sets[(a, b)], taus, settings.reps_pairwise,
                                                   bootstrap.rng_for(seed, "profile", b, a), settings.confidence)
            profile_rows.append({"budget": b, "algorithm": a, "taus": _floats(taus), "fraction": _floats(point),
                                 "lo": _floats(lo), "hi": _floats(hi)})
            for t, scores in zip(sel.tasks, sel.raw_sets[(a, b)]):
                values = bootstrap.replicates([scores], ["mean"], settings.reps_pairwise,
                                              bootstrap.rng_for(seed, "task", b, a, t))[:, 0]
                mean = float(np.mean(scores))
                lo_t, hi_t = bootstrap.interval(mean, values, settings.confidence, "percentile")
                per_task.append({"budget": b, "algorithm": a, "task": t, "n_runs": int(scores.size),
                                 "mean": mean, "lo": lo_t, "hi": hi_t})
            progress.advance()
    progress.done()
    return profile_rows, per_task


# ------------------------------------------------------------------------------------------ 6. assemble

def budget_findings(sel: Selection, families: dict[str, Family], metric: str) -> tuple[list, list, list]:
    """``inversions``, ``crossovers`` and ``metric_sensitivity`` entries from the families' decisions."""
    rows = families[metric].orderings

    def decisions_of(m: str) -> dict[tuple[str, str], list[str]]:
        return {(a1, a2): [families[m].orderings[(b, a1, a2)]["decision"] for b in sel.budgets]
                for a1, a2 in sel.pairs}

    directions = {(a1, a2): [rows[(b, a1, a2)]["direction"] for b in sel.budgets] for a1, a2 in sel.pairs}
    changed = {(c["a"], c["b"], c["budget_low"], c["budget_high"]): c["decision"] == "changed"
               for c in families[metric].changes}
    inversions = find_inversions(sel.budgets, decisions_of(metric), directions, metric, changed)
    crossovers = find_crossovers(sel.budgets, decisions_of(metric), metric)
    sensitivity = metric_sensitivity(sel.budgets, {m: decisions_of(m) for m in families})
    return inversions, crossovers, sensitivity


def claim_verdicts(sel: Selection, families: dict[str, Family], claims: Sequence[Claim], metric: str) -> list[dict]:
    """``audit.json`` ``claims`` entries from the error-controlled orderings."""
    def lookup(budget: int, better: str, worse: str, m: str) -> dict:
        row = families[m].orderings.get((budget, better, worse))
        if row is not None:
            return row
        row = families[m].orderings[(budget, worse, better)]
        return {"decision": opposite(row["decision"]), "diff_point": -row["diff_point"],
                "diff_lo": -row["diff_hi"], "diff_hi": -row["diff_lo"]}

    return [evaluate_claim(c, sel.budgets, metric, lookup) for c in claims]


def calibration_doc(sel: Selection, settings: AuditSettings) -> dict:
    """``audit.json`` ``settings.calibration``: the data shapes found (:mod:`rlaudit.audit.calibration`) and the
    measured calibration row that matches the data's shape and size under the default scheme (``row``: ``None``
    for another scheme, whose calibration is in ``docs/audit.md`` only)."""
    shapes = sel.shapes
    n_runs = int(sel.audited.groupby(["algorithm", "task", "budget"]).size().min())
    design = (len(sel.tasks), n_runs, len(sel.budgets))
    rows = [calibration.supported_rates(s.shape, *design, n_algorithms=len(sel.algorithms)) for s in shapes] or \
        [calibration.supported_rates("gamma", *design, n_algorithms=len(sel.algorithms))]
    rows = [r for r in rows if r is not None]
    # The least favourable measured row among the shapes found: the error rate the audit can stand behind.
    row = max(rows, key=lambda r: (not r.holds, r.fwer[0], -r.coverage[0]), default=None)
    pooled = min(sum(x.size for x in score_set) for score_set in sel.sets.values())
    return {"shapes": [{"shape": s.shape, "summary": s.summary, **s.details} for s in shapes],
            "row": row.to_dict() if row is not None and settings.scheme == "expanded" else None,
            "df_scale": sel.df_scale if settings.scheme == "expanded" else 1.0, "n_runs": n_runs, "pooled_runs": pooled,
            "iqm_trim": int(pooled * stats_metrics.TRIM) / pooled if pooled else stats_metrics.TRIM}


def checklist(sel: Selection, cal: dict) -> list[dict]:
    """Checklist findings on the audited data (``cal``: :func:`calibration_doc`)."""
    findings = list(sel.findings)
    findings += check_runs(sel.audited, cal["row"])
    findings += check_data_shape(cal)
    findings += check_score_kind(sel.audited, sel.table.meta.score_kind)
    findings += check_eval_protocol(sel.audited)
    findings += check_normalization(len(sel.tasks), sel.norm_label)
    findings += check_sweep(sel.table.meta.runs_planned, sel.table.meta.runs_finished)
    return [f.to_dict() for f in findings]


def data_doc(sel: Selection, source) -> dict:
    """``audit.json`` ``data``: what was audited."""
    audited, table = sel.audited, sel.table
    design = audited.groupby(["algorithm", "task", "budget"], sort=False).size().reset_index(name="n_runs")
    score_kind = sorted(set(audited["score_kind"])) if "score_kind" in audited.columns else [table.meta.score_kind]
    return {
        "algorithms": sel.algorithms, "tasks": sel.tasks, "budgets": sel.budgets,
        "budget_unit": table.meta.budget_unit,
        "budget_labels": [dict(x) for x in getattr(source, "budget_labels", ()) if x.get("budget") in sel.budgets],
        "score_kind": score_kind[0] if len(score_kind) == 1 else "mixed",
        "normalization": sel.norm_label,
        **({"normalization_detail": sel.norm_detail} if sel.norm_detail else {}),
        "paired_budgets": [a for a in sel.algorithms if sel.paired[a]] if len(sel.budgets) > 1 else [],
        "design": [{"algorithm": r.algorithm, "task": r.task, "budget": int(r.budget), "n_runs": int(r.n_runs)}
                   for r in design.itertuples()],
        "notes": list(table.meta.notes),
    }


def settings_doc(sel: Selection, settings: AuditSettings, metrics: Sequence[str], reps: int, cal: dict) -> dict:
    """``audit.json`` ``settings``: the settings as applied, with the error-control description."""
    n_pairs, n_budgets = len(sel.pairs), len(sel.budgets)
    m = max(sel.n_tests, 1)
    return {
        "metric": settings.metric, "metrics": list(metrics), "gamma": settings.gamma, "reps": reps,
        "reps_pairwise": settings.reps_pairwise, "seed": settings.seed, "alpha": settings.alpha,
        "confidence": settings.confidence, "interval_method": settings.scheme,
        "correction": settings.correction,
        "correction_description": correction_description(settings.correction, settings.alpha, n_pairs * n_budgets,
                                                         n_pairs * max(n_budgets - 1, 0), settings.metric,
                                                         all(sel.paired.values()), settings.scheme == "expanded"),
        "n_tests": m,
        "runs_needed_method": method_description(settings.alpha, m, settings.power, settings.runs_needed_cap,
                                                 settings.min_effect, t_reading=settings.scheme == "expanded"),
        "runs_needed_cap": settings.runs_needed_cap, "power": settings.power, "min_effect": settings.min_effect,
        "small_sample": settings.scheme == "expanded",
        "budgets_requested": list(settings.budgets) if settings.budgets else None,
        "normalization": sel.norm_label,
        "calibration": cal,
    }


def assemble(sel: Selection, settings: AuditSettings, boot: Replicates, families: dict[str, Family],
             orderings: list[dict], profile_rows: list[dict], per_task: list[dict], claims: Sequence[Claim],
             source) -> AuditResult:
    """The :class:`AuditResult` from the steps' outputs."""
    main = settings.metric
    inversions, crossovers, sensitivity = budget_findings(sel, families, main)
    cal = calibration_doc(sel, settings)
    learning = learning_doc(per_task, sel.random_refs, sel.random_source, sel.budgets, sel.tasks, sel.sets, main,
                            settings.reps_pairwise, settings.seed, settings.confidence, settings.gamma)
    verdicts = claim_verdicts(sel, families, claims, main)
    if learning:
        verdicts = claim_notes(verdicts, learning["cells"], len(sel.tasks))
    return AuditResult(
        rlaudit_version=__version__, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        source=source_doc(source, sel.table), data=data_doc(sel, source),
        settings=settings_doc(sel, settings, boot.metrics, boot.reps, cal), budgets=sel.budgets,
        aggregates=boot.aggregates, orderings=orderings, changes=families[main].changes, inversions=inversions,
        crossovers=crossovers, metric_sensitivity=sensitivity, rank_distribution=rank_distribution(sel, boot, main),
        profiles=profile_rows, per_task=per_task, claims=verdicts,
        checklist=checklist(sel, cal), learning=learning)


def _floats(a) -> list[float]:
    return [float(x) for x in np.asarray(a).reshape(-1)]


def where_of(table: ScoreTable, source) -> str:
    """The input's name for error messages."""
    if source is not None:
        return str(getattr(source, "path", source))
    return table.meta.source or "scores"


def source_doc(source, table: ScoreTable) -> dict:
    """``audit.json`` ``source``: ``{path, protocol, title, citation}``, plus ``settings_vs_published`` (the
    protocol's declared sources and deviations) and ``suites`` (task -> suite) when the protocol gives them."""
    if source is None:
        return {"path": table.meta.source or None, "protocol": None, "title": None, "citation": None}
    if isinstance(source, str):
        return {"path": source, "protocol": None, "title": None, "citation": None}
    doc = {"path": str(getattr(source, "path", "")) or None, "protocol": getattr(source, "protocol", None),
           "title": getattr(source, "title", None), "citation": getattr(source, "citation", None)}
    settings = list(getattr(source, "settings", ()) or ())
    if settings:
        doc["settings_vs_published"] = settings
    suites = dict(getattr(source, "suites", {}) or {})
    if suites:
        doc["suites"] = suites
    fidelity = list(getattr(source, "fidelity", ()) or ())
    if fidelity:
        doc["fidelity"] = fidelity
    compute = dict(getattr(source, "compute", {}) or {})
    if compute:
        doc["compute"] = compute
    return doc
