"""The joined audit: a rerun of a published comparison against the published data.

Both sources are audited separately with the same settings (:func:`rlaudit.audit.run_audit`, a black box
here); this module joins the two results into the ``published_agreement`` document of ``audit.json``
(``docs/audit-json.md``): per decided published ordering, whether it holds, reverses or is inconclusive at
each rerun budget (:func:`rlaudit.audit.agreement.compare_orderings`), and Kendall's τ between the
published ranking and each rerun budget's ranking with a seeded stratified-bootstrap interval.

The two score tables are kept apart in one joined table by its ``source`` column (``published`` /
``rerun``); scores are never compared across sources.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlaudit.audit.agreement import compare_orderings, rank_agreement, summarize
from rlaudit.errors import InputError
from rlaudit.scores import ScoreMeta, ScoreTable

CAVEAT = ("Implementations differ: the published scores come from the original authors' code ({published}), the "
          "rerun from rlaudit's SB3-based built-ins on another suite ({suite}), with the rerun protocol's settings "
          "(the published ones scaled to the suite, or the suite's own published settings where it has them; its "
          "settings-vs-published table lists each difference) and budgets in other units. Only orderings and "
          "rankings are compared across the two sources, never scores.")
METHOD = ("Kendall's tau-b between the agents' {metric} on the published side (at each published budget) and on "
          "the rerun side (at each rerun budget), over the agents present on both sides and the tasks on which all "
          "of them have runs. Interval: {confidence:.0%} percentile interval over {reps} stratified-bootstrap "
          "replicates; runs are resampled with replacement within each task on BOTH sides, independently (the "
          "published ranking is also an estimate from a few runs), tasks are held fixed; seed {seed}. Measured "
          "coverage of the true tau (bench/sim_kendall_tau.py: 5 agents, 60 published tasks x 5 runs, 5 rerun tasks "
          "x 3-10 runs; docs/audit-json.md): 82-100 % for a nominal 95 %; conservative (94-100 %) when the "
          "rankings partly agree, down to 82 % when they agree or disagree completely with 3 rerun runs per "
          "task. With few agents tau takes few values, so an end of the interval often equals the estimate.")


def joined_table(published: ScoreTable, rerun: ScoreTable) -> ScoreTable:
    """One table holding both sources, told apart by the ``source`` column (``published`` / ``rerun``).

    Budgets keep their own units (the rerun's in ``meta.budget_unit``, the published ones named in
    ``meta.notes``); rows never collide because the two sides' tasks differ — if they do not, the rerun's
    algorithm labels are prefixed so that a key (algorithm, task, run, budget) stays unique.
    """
    # Per-row score kinds, since the two sources differ (Dopamine: training returns; rerun: evaluations).
    pub = published.frame.assign(source="published")
    rer = rerun.frame.assign(source="rerun")
    for frame, table in ((pub, published), (rer, rerun)):
        if "score_kind" not in frame.columns:
            frame["score_kind"] = table.meta.score_kind
    keys = ["algorithm", "task", "run", "budget"]
    if len(pub.merge(rer, on=keys)):
        rer = rer.assign(algorithm="rerun:" + rer["algorithm"])
    frame = pd.concat([pub, rer], ignore_index=True)
    notes = (*rerun.meta.notes, f"rows with source = published: budgets in {published.meta.budget_unit}, "
             f"{published.meta.score_kind} scores from {published.meta.source or 'the published data'}")
    meta = ScoreMeta(budget_unit=rerun.meta.budget_unit, score_kind="eval", source="joined", notes=notes)
    return ScoreTable.from_frame(frame, meta, where="joined scores")


def _side(joined: ScoreTable, source: str) -> ScoreTable:
    frame = joined.frame[joined.frame["source"] == source]
    if source == "rerun":
        frame = frame.assign(algorithm=frame["algorithm"].str.removeprefix("rerun:"))
    return ScoreTable.from_frame(frame.drop(columns="source"), joined.meta, where=f"{source} scores")


def _replicates(table: ScoreTable, agents: list[str], budget: int, metric: str, reps: int, seed: int, gamma: float,
                side: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Point ``(n_agents,)`` and replicates ``(reps, n_agents)`` of ``metric`` over the shared tasks."""
    from rlaudit.stats.bootstrap import replicates, rng_for
    from rlaudit.stats.metrics import aggregate

    at = table.at_budget(budget)
    tasks = sorted(set.intersection(*(set(at.loc[at["algorithm"] == a, "task"]) for a in agents)))
    if not tasks:
        return np.full(len(agents), np.nan), np.full((reps, len(agents)), np.nan), 0
    point = np.empty(len(agents))
    reps_out = np.empty((reps, len(agents)))
    for j, a in enumerate(agents):
        score_set = table.score_matrix(a, budget, tasks)
        point[j] = aggregate(metric, score_set, gamma)
        reps_out[:, j] = replicates(score_set, [metric], reps, rng_for(seed, "published-agreement", side, budget, a),
                                    gamma)[:, 0]
    return point, reps_out, len(tasks)


def published_agreement(joined: ScoreTable, mapping: dict[str, str], published_doc: dict, rerun_doc: dict,
                        published_info: dict, reps: int, seed: int = 0, confidence: float = 0.95) -> dict:
    """The ``published_agreement`` document.

    Args:
        joined: :func:`joined_table` of the two sources, each already normalised as its audit normalised it.
        mapping: published agent -> rerun label.
        published_doc: the published audit (``audit.json`` document).
        rerun_doc: the rerun audit.
        published_info: ``{protocol, name, title, implementation, suite}`` for the text.
        reps: bootstrap replicates for the τ intervals.
        seed: seed of every stream (keys: side, budget, agent).
        confidence: interval level.
    """
    metric = rerun_doc["settings"]["metric"]
    gamma = float(rerun_doc["settings"].get("gamma", 1.0))
    published_agents = list(published_doc["data"]["algorithms"])
    rerun_agents = set(rerun_doc["data"]["algorithms"])
    live = {p: r for p, r in mapping.items() if p in published_agents and r in rerun_agents}
    pub_budgets, rerun_budgets = list(published_doc["budgets"]), list(rerun_doc["budgets"])
    orderings = compare_orderings(published_doc["orderings"], rerun_doc["orderings"], live, rerun_budgets, metric)
    pub, rer = _side(joined, "published"), _side(joined, "rerun")
    agents = [p for p in published_agents if p in live]
    ranks = []
    if len(agents) >= 2:
        cache = {}
        for b in rerun_budgets:
            cache[("rerun", b)] = _replicates(rer, [live[a] for a in agents], b, metric, reps, seed, gamma, "rerun")
        for pb in pub_budgets:
            cache[("published", pb)] = _replicates(pub, agents, pb, metric, reps, seed, gamma, "published")
        for pb in pub_budgets:
            pp, pr, n_pub = cache[("published", pb)]
            for b in rerun_budgets:
                rp, rr, n_rer = cache[("rerun", b)]
                r = rank_agreement(pp, rp, pr, rr, confidence) if n_pub and n_rer else \
                    {"tau": None, "lo": None, "hi": None, "n_agents": len(agents), "n_reps": 0}
                ranks.append({"published_budget": pb, "rerun_budget": b, **r, "n_tasks_published": n_pub,
                              "n_tasks_rerun": n_rer,
                              "published_ranking": _ranking(agents, pp, metric),
                              "rerun_ranking": _ranking(agents, rp, metric)})
    suites = {"published": published_info.get("published_suite"), "rerun": published_info.get("suite")}
    return {
        "published": {"protocol": published_info.get("protocol"), "name": published_info.get("name"),
                      "title": published_info.get("title"), "suite": suites["published"], "budgets": pub_budgets,
                      "budget_unit": published_doc["data"].get("budget_unit"),
                      "normalization": published_doc["data"].get("normalization")},
        "rerun": {"suite": published_info.get("suite"), "budgets": rerun_budgets,
                  "budget_unit": rerun_doc["data"].get("budget_unit"),
                  "normalization": rerun_doc["data"].get("normalization")},
        "metric": metric,
        "mapping": [{"published": p, "rerun": live[p]} for p in published_agents if p in live],
        "not_rerun": [p for p in published_agents if p not in live],
        "caveat": CAVEAT.format(published=published_info.get("implementation") or "published implementation",
                                suite=published_info.get("suite") or "rerun suite"),
        "suite_change": suite_change(suites["published"], suites["rerun"]),
        "method": METHOD.format(metric=metric, confidence=confidence, reps=reps, seed=seed),
        "orderings": orderings,
        "summary": summarize(orderings, rerun_budgets),
        "rank_agreement": ranks,
    }


def suite_change(published: str | None, rerun: str | None) -> dict:
    """``{published, rerun, differs, note}``: whether the rerun changes the suite as well as the budget.

    ``differs`` is ``None`` when the published suite is not known.
    """
    differs = None if not published or not rerun else published.strip().lower() != rerun.strip().lower()
    if differs:
        note = (f"The published runs are on {published} and the rerun on {rerun}: an ordering that differs from the "
                f"published one can come from the change of suite as well as of budget. Orderings reversed between "
                f"the rerun's own budgets are on one suite ({rerun}) and are reported separately.")
    elif differs is None:
        note = ("The published runs' suite is not recorded (the published protocol's [rerun] has no "
                "published_suite), so whether the rerun also changes the suite is not known.")
    else:
        note = f"Both sides are on {rerun}: a difference from the published ordering comes from the budget or the code."
    return {"published": published, "rerun": rerun, "differs": differs, "note": note}


def _ranking(agents: list[str], point: np.ndarray, metric: str) -> list[str]:
    """Agents best first (lower is better for the optimality gap)."""
    if not np.all(np.isfinite(point)):
        return []
    sign = 1.0 if metric == "og" else -1.0
    return [agents[i] for i in np.argsort(sign * point, kind="stable")]


def mapping_from(published_protocol, rerun_of: dict | None, where: str) -> dict[str, str]:
    """Published agent -> rerun label: from the store's ``[rerun_of]`` when recorded, else from the published
    protocol's ``[rerun]`` section.

    Raises:
        InputError: neither gives a mapping (naming what is missing).
    """
    if rerun_of and rerun_of.get("agents"):
        return {p: label for label, p in rerun_of["agents"].items()}
    if published_protocol.rerun:
        from rlaudit.protocol.rerun import parse_section

        section = parse_section(published_protocol.rerun, f"{published_protocol.path}: rerun")
        return {a.published: a.label for a in section.runnable}
    raise InputError(f"{where}: no agent mapping; the published protocol {published_protocol.path} has no [rerun] "
                     f"section and the scores do not record which published agents they rerun")
