"""Checklist findings on the data itself: design problems that weaken or bias a comparison.

Each finding has a stable ``id`` (tools may filter on it), a ``severity`` (``warning``: the comparison is
weakened or may be biased; ``info``: worth knowing), a one-line ``message`` and ``advice``.

=========================  ========  ==================================================================
id                         severity  when
=========================  ========  ==================================================================
``few-runs``               warning   an algorithm has fewer than 10 runs on some task at an audited budget
``unequal-runs``           info      run counts differ between algorithms or tasks
``unequal-tasks``          warning   some tasks are present for only some algorithms (audit uses common ones)
``partial-budgets``        warning   some budgets are present for only some algorithms (not audited)
``mixed-score-kind``       warning   ``train`` and ``eval`` scores are mixed
``train-scores``           warning   all scores are returns logged during training
``max-over-evaluations``   warning   scores are the maximum over evaluations (optimistically biased)
``raw-scores``             warning   raw scores aggregated across several tasks without normalisation
``incomplete-sweep``       warning   a run store whose sweep is not finished (only finished runs are audited)
``data-shape``             warning   collapsed seeds, heavy tails or many ties where the measured error rate of
                                     the default exceeds the nominal one at the data's size (info if it holds)
``iqm-trim``               info      the pooled runs are trimmed noticeably less than 25 % each side
``undecidable``            warning   (older audits only, which kept the bootstrap floor) orderings no gap could
                                     decide: the smallest p-value the replicates give, read on t, above the
                                     level; the audit now decides past the replicates (engine.member_p_value)


``single-run``             warning   an algorithm with one run per task, set aside by the audit (engine.select)
=========================  ========  ==================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd

MIN_RUNS = 10
"""rliable's guidance: percentile bootstrap intervals need about 10 runs per task to be trustworthy."""


@dataclass(frozen=True)
class Finding:
    """One checklist finding."""

    id: str
    """Stable identifier (see the module table)."""
    severity: str
    """``warning`` or ``info``."""
    message: str
    """What was found, in one line, naming the algorithms / tasks / budgets concerned."""
    advice: str = ""
    """What to do about it."""
    details: dict = field(default_factory=dict)
    """Machine-readable specifics (counts per algorithm, dropped tasks, …)."""

    def to_dict(self) -> dict:
        """``audit.json`` form."""
        return asdict(self)


def _names(items: Sequence, limit: int = 6) -> str:
    items = [str(i) for i in items]
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_runs(frame: pd.DataFrame, row: dict | None = None) -> list[Finding]:
    """``few-runs`` and ``unequal-runs`` on the audited rows (``frame``: tidy rows actually audited; ``row``: the
    measured calibration row matching the data, ``settings.calibration.row`` of ``audit.json``, if any)."""
    counts = frame.groupby(["algorithm", "task", "budget"]).size()
    findings = []
    min_runs = counts.groupby(level="algorithm").min()
    few = {a: int(n) for a, n in min_runs.items() if n < MIN_RUNS}
    if few:
        desc = _names([f"{a} has {n}" for a, n in few.items()])
        if row is None:
            measured = ("the default expanded bootstrap keeps its stated error rate down to 3 runs per task on "
                        "skewed continuous runs (docs/audit.md, Calibration)")
        else:
            words = "keeps" if row["holds"] else "does not keep"
            measured = (f"the default expanded bootstrap {words} its stated error rate on data like these "
                        f"({calibration_text(row)}; docs/audit.md, Calibration by data shape)")
        findings.append(Finding(
            "few-runs", "warning",
            f"fewer than {MIN_RUNS} runs per task: {desc} (smallest count over tasks and budgets)",
            f"{measured}, but with so few runs every interval is wide and small differences stay undecided; "
            "add runs (see runs needed). rliable's plain percentile scheme (--ci-method percentile) "
            "under-covers here (rliable's guidance is >= 10 runs per task)",
            {"min_runs": few, **({"calibration_row": row} if row is not None else {})}))
    if counts.nunique() > 1:
        per_alg = {a: sorted({int(n) for n in g}) for a, g in counts.groupby(level="algorithm")}
        groups: dict[str, list[str]] = {}  # "5" or "5/10" -> algorithms with those counts, fewest runs first
        for a, ns in sorted(per_alg.items(), key=lambda kv: (kv[1], kv[0])):
            groups.setdefault("/".join(str(n) for n in ns), []).append(a)
        desc = "; ".join(f"{_names(algs)}: {ns}" for ns, algs in groups.items())
        findings.append(Finding(
            "unequal-runs", "info", f"run counts per task differ ({desc})",
            "the stratified bootstrap handles unequal counts, but intervals of algorithms with fewer runs are "
            "wider; pooled metrics weight each run equally (see docs/statistics.md)",
            {"runs_per_task": per_alg}))
    return findings


def _only_some(items: Sequence, by_algorithm: dict[str, set]) -> tuple[dict, str]:
    """``{item: [algorithms that have it]}`` for items only some algorithms have, and its description
    (``"Pong (only DQN, IQN), …"``): shared by the missing-task and missing-budget findings."""
    have = {x: sorted(a for a, xs in by_algorithm.items() if x in xs) for x in items}
    return have, _names([f"{x} (only {', '.join(have[x])})" for x in items], limit=4)


def check_tasks(tasks_by_algorithm: dict[str, set[str]], common: Sequence[str]) -> list[Finding]:
    """``unequal-tasks``: tasks that only some algorithms have (the audit uses the common tasks)."""
    all_tasks = sorted(set().union(*tasks_by_algorithm.values()))
    dropped = [t for t in all_tasks if t not in set(common)]
    if not dropped:
        return []
    have, desc = _only_some(dropped, tasks_by_algorithm)
    return [Finding(
        "unequal-tasks", "warning",
        f"audited on the {len(common)} tasks every algorithm has; {len(dropped)} dropped: {desc}",
        "aggregates over different task sets are not comparable; run every algorithm on every task or "
        "state the common task set with the results",
        {"common_tasks": list(common), "dropped_tasks": have})]


def check_budgets(budgets_by_algorithm: dict[str, set[int]], audited: Sequence[int], unit: str) -> list[Finding]:
    """``partial-budgets``: budgets that only some algorithms have; they are not audited."""
    all_budgets = sorted(set().union(*budgets_by_algorithm.values()))
    partial = [b for b in all_budgets
               if any(b not in bs for bs in budgets_by_algorithm.values()) and b not in set(audited)]
    if not partial:
        return []
    have, desc = _only_some([int(b) for b in partial], budgets_by_algorithm)
    return [Finding(
        "partial-budgets", "warning",
        f"{len(partial)} budget(s) in {unit} present for some algorithms only and not audited: {desc}",
        "an ordering can only be audited at a budget every algorithm reached; add the missing runs or "
        "compare the subset of algorithms that has them",
        {"budgets": {str(b): a for b, a in have.items()}})]


def check_score_kind(frame: pd.DataFrame, meta_kind: str) -> list[Finding]:
    """``mixed-score-kind`` / ``train-scores`` from the ``score_kind`` column or the table metadata."""
    if "score_kind" in frame.columns:
        per_alg = frame.groupby("algorithm")["score_kind"].agg(lambda s: sorted(set(s)))
        kinds = set(frame["score_kind"])
    else:
        per_alg = None
        kinds = {meta_kind}
    if len(kinds) > 1:
        desc = ""
        if per_alg is not None:
            train = [a for a, ks in per_alg.items() if "train" in ks]
            desc = f" (train scores for {_names(train)})"
        return [Finding(
            "mixed-score-kind", "warning", f"training-time and evaluation scores are mixed{desc}",
            "returns logged during training include exploration and differ systematically from separate "
            "evaluation episodes; compare like with like",
            {"by_algorithm": {a: ks for a, ks in per_alg.items()} if per_alg is not None else {}})]
    if kinds == {"train"}:
        return [Finding(
            "train-scores", "info", "scores are returns logged during training, not separate evaluations",
            "fine for comparing algorithms evaluated the same way (e.g. Dopamine's training returns), but "
            "not comparable with evaluation scores from other papers")]
    return []


def check_eval_protocol(frame: pd.DataFrame) -> list[Finding]:
    """``max-over-evaluations``: scores that are the maximum over evaluations (``eval_protocol == "max"``)."""
    if "eval_protocol" not in frame.columns:
        return []
    maxed = sorted(set(frame.loc[frame["eval_protocol"].astype(str) == "max", "algorithm"]))
    if not maxed:
        return []
    return [Finding(
        "max-over-evaluations", "warning",
        f"scores of {_names(maxed)} are the maximum over evaluations during training",
        "the maximum over evaluations is optimistically biased and favours noisy algorithms; report the "
        "final evaluation (or the mean over the last evaluations) instead",
        {"algorithms": maxed})]


def check_normalization(n_tasks: int, normalization: str) -> list[Finding]:
    """``raw-scores``: aggregating raw scores over tasks whose scales differ."""
    if n_tasks > 1 and normalization in ("", "none"):
        return [Finding(
            "raw-scores", "warning",
            f"raw scores are aggregated across {n_tasks} tasks without normalisation",
            "tasks with large score scales dominate the aggregate; pass --normalize (atari, minmax:FILE, "
            "divide:K) unless the scores are already on a common scale")]
    return []


def check_sweep(runs_planned: int, runs_finished: int) -> list[Finding]:
    """``incomplete-sweep``: a run store audited before all its planned runs finished."""
    if not runs_planned or runs_finished >= runs_planned:
        return []
    return [Finding(
        "incomplete-sweep", "warning",
        f"the sweep is incomplete: {runs_finished} of {runs_planned} planned runs are finished and audited; "
        f"{runs_planned - runs_finished} are not",
        "the verdict may change as the remaining runs arrive; finish the sweep ('rlaudit run PROTOCOL --store "
        "STORE' resumes it) before quoting it as the protocol's result",
        {"runs_planned": runs_planned, "runs_finished": runs_finished})]


SHAPE_WORDS = {"gamma": "skewed continuous runs", "collapsed": "seeds that collapse to ~0 while others learn",
               "heavy": "heavy-tailed runs", "discrete": "integer-like scores with many ties"}
"""The data shapes of :mod:`rlaudit.audit.calibration`, in words."""


def calibration_text(row: dict) -> str:
    """A measured calibration row in words: ``"measured on seeds that collapse ... at 5 tasks x 5 runs, 2
    budgets: null family-wise error 6.9 % [5.4, 8.7], 95 % IQM coverage 89.1 %"``."""
    rate, lo, hi = row["fwer"]
    algorithms = f", {row['n_algorithms']} algorithms" if "n_algorithms" in row else ""
    return (f"measured on {SHAPE_WORDS.get(row['shape'], row['shape'])} at {row['n_tasks']} tasks x "
            f"{row['n_runs']} runs, {row['n_budgets']} budgets{algorithms}: null family-wise error {rate:.1f} % "
            f"[{lo:.1f}, {hi:.1f}], 95 % IQM coverage {row['coverage'][0]:.1f} %")


def check_data_shape(cal: dict) -> list[Finding]:
    """``data-shape`` and ``iqm-trim`` from ``settings.calibration`` (:func:`rlaudit.audit.engine.calibration_doc`)."""
    findings = []
    row = cal.get("row")
    for shape in cal.get("shapes", ()):
        matched = row is not None and row["shape"] == shape["shape"]
        if matched and not row["holds"]:
            findings.append(Finding(
                "data-shape", "warning",
                f"{SHAPE_WORDS[shape['shape']]}: {shape['summary']}; on such data the default's error rates "
                f"are not the nominal ones ({calibration_text(row)})",
                "read the family-wise error and the interval coverage as the measured ones, not 5 % / 95 %; "
                "more runs per task bring them closer (docs/audit.md, Calibration by data shape)",
                {"shape": shape, "calibration_row": row}))
        else:
            measured = f" ({calibration_text(row)})" if matched else ""
            findings.append(Finding(
                "data-shape", "info", f"{SHAPE_WORDS[shape['shape']]}: {shape['summary']}{measured}",
                "the stated error rates were measured to hold on such data at this size" if matched else
                "the calibration of the default at this shape is in docs/audit.md (Calibration by data shape)",
                {"shape": shape, **({"calibration_row": row} if matched else {})}))
    trim = cal.get("iqm_trim", 0.25)
    if trim < 0.24:
        k = int(round(trim * cal["pooled_runs"]))
        findings.append(Finding(
            "iqm-trim", "info",
            f"the IQM pools {cal['pooled_runs']} runs per algorithm and budget and trims {k} from each end: "
            f"{100 * trim:.0f} %, not 25 % (floor(0.25 x {cal['pooled_runs']}) = {k})",
            "rliable's IQM (scipy.stats.trim_mean) rounds the trimmed count down; with unequal or small designs "
            "it is a slightly wider mean than the interquartile one",
            {"pooled_runs": cal["pooled_runs"], "trimmed_each_side": k}))
    return findings


def supported_error_note(settings: dict) -> str:
    """``"; on data like these ... the simulation puts the family-wise error at 6.9 % [5.4, 8.7], not 5 %"`` when
    the measured calibration row matching the data (``settings.calibration.row``) does not keep the nominal
    rates; ``""`` otherwise (and for audits written before the calibration was recorded)."""
    row = (settings.get("calibration") or {}).get("row")
    if not row or row.get("holds", True):
        return ""
    rate, lo, hi = row["fwer"]
    return (f"; on data like these ({SHAPE_WORDS.get(row['shape'], row['shape'])}, {row['n_tasks']} tasks x "
            f"{row['n_runs']} runs) the simulation puts the family-wise error at {rate:.1f} % [{lo:.1f}, {hi:.1f}] "
            f"and the coverage of 95 % intervals at {row['coverage'][0]:.1f} %, not the nominal ones")
