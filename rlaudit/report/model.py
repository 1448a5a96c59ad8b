"""Report data objects, built from an ``audit.json`` document (schema in ``docs/audit-json.md``).

The report stage never recomputes statistics: every number shown comes from the audit document. This
module reads the document, checks that the keys the report needs are there (one clear error naming the
key otherwise), and arranges the numbers into plain objects that the templates and plots consume. The
only derived quantities are presentational: human-readable budgets, the order of findings in the verdict,
and the expected rank and its central range read off ``rank_distribution``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rlaudit.audit.checklist import supported_error_note
from rlaudit.audit.claims import VERDICTS
from rlaudit.audit.result import SCHEMA_VERSION, finite_document  # one definition: the audit stage writes what the report reads
from rlaudit.audit.result import format_budget, unit_name
from rlaudit.audit.rows import (  # the typed audit.json rows (one from_dict each)
    AuditRows, ChecklistItem, Claim, Crossover, Inversion, Ordering, RankDistribution, Sensitivity, check_header,
    decision_text)
from rlaudit.errors import InputError
from rlaudit.report.parts import (Finding, format_interval, format_number, format_p,  # noqa: F401 (re-exported)
                                  join_words, metric_name)
from rlaudit.stats.metrics import HIGHER_IS_BETTER

SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict"),
    ("setup", "Setup and provenance"),
    ("aggregates", "Aggregate performance per budget"),
    ("budget-curves", "Performance vs budget"),
    ("rankings", "Rankings across budgets"),
    ("claims", "Claims"),
    ("profiles", "Score distributions"),
    ("checklist", "Methodology checklist"),
    ("per-task", "Per-task detail"),
)
"""(anchor, heading) of every report section, in the order they appear in every format."""

CLAIM_OUTCOMES: tuple[str, ...] = ("holds", "holds only at some budgets", "reversed", "never decided")
"""What the verdict's counter counts (:attr:`~rlaudit.audit.rows.Claim.outcome`)."""

QUALIFIERS = frozenset({"incomplete-sweep"})
"""Checklist findings that qualify every other finding, so the verdict puts them right after its headline."""

LOWER_IS_BETTER = frozenset(m for m, higher in HIGHER_IS_BETTER.items() if not higher)

# Budgets and metric names are formatted once (format_budget and unit_name next to the audit.json document,
# metric_name in parts; imported above, they are what the terminal summary uses too).


FEW_RUNS_TASKS = 10
"""Largest suite on which 2-3 runs per task make the report call runs-needed estimates lower bounds, for audits
written before 2026-12-06 whose estimate planned on the plain standard error with the audit's decisions floored at
1 / (reps + 1): those were measured short of their power on 5 tasks; on 10 and 26 skewed tasks they held (77-86 %,
docs/audit.md)."""

FLOOR_CLAUSE = "the bootstrap replicates resolve"
"""Words of ``settings.runs_needed_method`` in audits of 2026-12-06 whose estimate waited for a run count where the
floor's t reading was below the level; those met their power at 2-3 runs per task on every measured shape (79-99 %),
so the report does not call them lower bounds."""

MEDIAN_CLAUSE = "median-unbiased standard error"
"""Words of ``settings.runs_needed_method`` (:func:`rlaudit.audit.runs_needed.method_description`) in audits whose
estimate plans on the median-unbiased standard error, decided past the replicates; measured to meet their power at
2-3 runs per task (docs/audit.md, Runs needed), so the report does not call them lower bounds."""


# --------------------------------------------------------------------------------------------- objects
@dataclass(frozen=True)
class RankSummary:
    """Rank of one algorithm at one budget, read off the bootstrap rank distribution (1 = best)."""

    budget: int
    algorithm: str
    probs: tuple[float, ...]
    expected: float
    lo: int
    hi: int
    modal: int


@dataclass(frozen=True)
class SettingRow:
    """One row of the "Settings vs published" table."""

    algorithm: str
    """The algorithm's label, or ``"all algorithms"`` for a protocol-wide entry."""
    sources: tuple[tuple[str, str | None], ...]
    """``(text, url)`` of each source named."""
    key: str
    """The setting (empty for a source with no declared deviation)."""
    published: str
    here: str
    why: str


def settings_table(source: dict) -> tuple[SettingRow, ...]:
    """Rows of ``audit.json`` ``source.settings_vs_published``, in protocol order."""
    out = []
    for entry in source.get("settings_vs_published") or []:
        who = entry.get("algorithm") or "all algorithms"
        srcs = tuple((str(x.get("text", "")), x.get("url")) for x in entry.get("sources") or [])
        devs = entry.get("deviations") or []
        if not devs:
            out.append(SettingRow(who, srcs, "", "", "", "as published: no deviation declared"))
        for d in devs:
            out.append(SettingRow(who, srcs, str(d["key"]), str(d["published"]), str(d["here"]), str(d["why"])))
    return tuple(out)


@dataclass(frozen=True)
class Report:
    """Everything a report shows, in the order it shows it. Built by :func:`build_model`."""

    title: str
    audit: dict
    """The audit document itself (written out unchanged as ``audit.json``)."""
    algorithms: tuple[str, ...]
    tasks: tuple[str, ...]
    budgets: tuple[int, ...]
    budget_unit: str
    metric: str
    metrics: tuple[str, ...]
    findings: tuple[Finding, ...]
    summary: dict
    setup: tuple[tuple[str, str], ...]
    aggregates: dict
    """``{(budget, algorithm, metric): Interval}``."""
    orderings: tuple[Ordering, ...]
    inversions: tuple[Inversion, ...]
    crossovers: tuple[Crossover, ...]
    metric_sensitivity: tuple[Sensitivity, ...]
    ranks: dict
    """``{(budget, algorithm): RankSummary}`` (empty when the audit has no rank distribution)."""
    profiles: dict
    """``{(budget, algorithm): Profile}``."""
    claims: tuple[Claim, ...]
    checklist: tuple[ChecklistItem, ...]
    runs_needed: tuple[Ordering, ...]
    """Inconclusive orderings with an estimate of the runs needed, most runs last."""
    per_task: dict
    """``{budget: [(task, {algorithm: TaskScore})]}``."""
    budgets_of_interest: tuple[int, ...] = ()
    sections: tuple[tuple[str, str], ...] = SECTIONS
    agreement: object | None = None
    """:class:`rlaudit.report.agreement.Agreement` when the audit was joined with a published protocol."""
    agreement_anchor: str = ""
    agreement_heading: str = ""
    rows: AuditRows | None = None
    """Every typed row of the document (what the terminal summary reads too)."""
    settings_published: tuple[SettingRow, ...] = ()
    """The "Settings vs published" table: one row per declared deviation (or per source declaring none)."""
    answer: tuple = ()
    """:class:`rlaudit.report.answer.AnswerLine` s the verdict leads with (several budgets only)."""

    @property
    def verdict_lead(self) -> int:
        """How many findings come before the answer: the headline, then what qualifies every other line (an
        incomplete sweep)."""
        qualifiers = {item.message for item in self.checklist if item.id in QUALIFIERS}
        return 1 + sum(1 for f in self.findings[1:] if f.kind == "checklist" and f.text in qualifiers)

    @property
    def rerun_suite(self) -> str | None:
        """The one suite of a joined audit's rerun tasks (its inversions are between budgets on that suite)."""
        if not self.audit.get("published_agreement"):
            return None
        suites = set(((self.audit.get("source") or {}).get("suites") or {}).values())
        return next(iter(suites)) if len(suites) == 1 else None

    @property
    def learned_only(self) -> list:
        """``learning.aggregates_learned_only`` rows (the deciding metric without the unlearned tasks)."""
        from types import SimpleNamespace

        rows = (self.audit.get("learning") or {}).get("aggregates_learned_only") or []
        return [SimpleNamespace(budget=int(x["budget"]), algorithm=str(x["algorithm"]), n_tasks=int(x["n_tasks"]),
                                left_out=", ".join(x.get("tasks_left_out") or []),
                                iv=SimpleNamespace(point=x.get("point"), lo=x.get("lo"), hi=x.get("hi")))
                for x in rows]

    @property
    def settings_sources(self) -> list[str]:
        """Every source named in the "Settings vs published" table, once, in order."""
        return list(dict.fromkeys(text for row in self.settings_published for text, _ in row.sources))

    def budget(self, budget: int, unit: bool = False) -> str:
        """Human budget (``"10M"``; with ``unit=True``: ``"10M frames"``)."""
        return format_budget(budget, self.budget_unit if unit else None)

    @property
    def unit(self) -> str:
        """Budget unit in words."""
        return unit_name(self.budget_unit)

    def unbounded_note_at(self, table: str) -> str:
        """Why some interval shows "–": the "[–, –]" note under ``table`` (``"aggregates"`` or ``"orderings"``),
        ``""`` when each of its intervals is bounded. The full explanation goes under the first table that has
        one; the orderings' note points back to it when the aggregates already carry it."""
        def unbounded(intervals) -> bool:
            return any(iv.point is not None and (iv.lo is None or iv.hi is None) for iv in intervals)

        in_aggregates = unbounded(self.aggregates.values())
        if table == "aggregates" and not in_aggregates:
            return ""
        if table == "orderings":
            if not unbounded(o.diff for o in self.orderings):
                return ""
            if in_aggregates:
                return "[–, –]: no bounded interval at this level (why: the aggregate metrics' note)."
        if self.audit.get("settings", {}).get("interval_method") == "expanded":
            return ("[–, –]: no bounded interval at this level. The expanded bootstrap reads its interval on "
                    "Student's t with the effective degrees of freedom of the per-task variances; when a task or "
                    "two carry almost all of the variance (few runs per task, or raw scores on different scales), "
                    "that level (for an ordering, the error-controlled one) lies beyond the most extreme bootstrap "
                    "replicate. Audits since 2026-12-06 give the t interval past the replicates there, unless "
                    "the replicates do not vary at all (a median sitting on one task whose runs tie: no spread "
                    "to read); audits written before left every such interval unbounded. More runs per task, or "
                    "normalised scores, give a bounded one.")
        return "[–, –]: no bounded interval at this level from these bootstrap replicates."

    @property
    def past_replicates_note(self) -> str:
        """What "†" after a p-value means ("" when no ordering's p-value was read past the replicates)."""
        past = [o for o in self.orderings if o.past_replicates]
        if not past:
            return ""
        dfs = sorted(o.df for o in past if o.df is not None)
        span = (f"{dfs[0]:.1f}" if dfs[0] == dfs[-1] else f"{dfs[0]:.1f}–{dfs[-1]:.1f}") if dfs else "?"
        return (f"†: no bootstrap replicate of the difference lies on the other side of 0, so the replicates only "
                f"bound its p-value; it is read on Student's t, 2 P(T_ν > |D| / se), with the test's effective "
                f"degrees of freedom ν ({span} here; df in audit.json) — docs/audit.md, \"Beyond the replicates\".")

    def runs_needed_range_cell(self, o: Ordering) -> str:
        """The "over the CI" cell of an undecided pair, or ``""`` where it says nothing: an open range
        (``"6 or more"``: the interval contains 0) starting at one run more than the pair has is what every
        undecided pair reads, so only a range with an upper end, or one whose far end already needs more
        than one extra run, is shown."""
        text = o.runs_needed_range_text
        if not text or not o.runs_needed_range:
            return ""
        fewest, most = o.runs_needed_range
        current = max((int(d["n_runs"]) for d in self.audit["data"].get("design") or []
                       if int(d["budget"]) == o.budget and d["algorithm"] in (o.a, o.b)), default=0)
        return text if most is not None or fewest > current + 1 else ""

    @property
    def runs_needed_range_note(self) -> str:
        """The sentence under the runs-needed table saying what a missing "over the CI" value means ("" when
        every row shows one); when no row shows one, the column is left out altogether."""
        hidden = [o for o in self.runs_needed if o.runs_needed_range and not self.runs_needed_range_cell(o)]
        if not hidden:
            return ""
        where = "every pair" if len(hidden) == len(self.runs_needed) else "pairs showing –"
        return (f"Runs per task needed over the CI, for {where}: at most one run per task more than the pair "
                "has, with no upper end (the interval contains 0: its far end would be decided with at most one "
                "more run, its near end with no number of runs).")

    @property
    def few_runs(self) -> int | None:
        """The smallest run count per task of the algorithms with an undecided pair when it is 2 or 3 on at most
        ``FEW_RUNS_TASKS`` tasks under the expanded scheme, in an audit written before 2026-12-06 (its estimate
        was measured to fall short of its power there: neither ``FLOOR_CLAUSE`` nor ``MEDIAN_CLAUSE`` in its
        method), else ``None``."""
        settings = self.audit.get("settings", {})
        method = settings.get("runs_needed_method") or ""
        if (settings.get("interval_method") != "expanded" or len(self.tasks) > FEW_RUNS_TASKS
                or FLOOR_CLAUSE in method or MEDIAN_CLAUSE in method):
            return None
        paired = {name for o in self.runs_needed for name in (o.a, o.b)}
        runs = [int(d["n_runs"]) for d in self.audit["data"].get("design") or [] if d["algorithm"] in paired]
        return min(runs) if runs and 2 <= min(runs) <= 3 else None

    @property
    def runs_needed_few_runs_note(self) -> str:
        """The sentence under the runs-needed table when the audit has 2-3 runs per task ("" otherwise)."""
        if not self.runs_needed or self.few_runs is None:
            return ""
        return (f"With {self.few_runs} runs per task on {len(self.tasks)} tasks, read these as lower bounds: in "
                "simulation (5 tasks, 2-3 runs per task, 70 tests), following the estimate decided 60-86 % of studies "
                "for the promised 80 %, least often on heavy-tailed and integer scores: the audit then could not "
                "decide past its bootstrap replicates, and the estimate planned on the pilot's plain standard error "
                "(docs/audit.md, Runs needed).")

    @property
    def runs_needed_range_column(self) -> bool:
        """Whether the runs-needed table has an "over the CI" column (some row has an informative value)."""
        return any(self.runs_needed_range_cell(o) for o in self.runs_needed)

    @property
    def sensitivity_note(self) -> str:
        """How the metric-sensitivity table's decisions were reached (every metric has its own test family)."""
        s = self.audit.get("settings", {})
        return (f"Each metric's orderings are tested in a family of their own ({s.get('n_tests', '–')} tests at "
                f"family-wise α = {s.get('alpha', '–')}, the same bootstrap as {metric_name(self.metric)}), so "
                f"“inconclusive” under a metric is that metric's test result.")

    def sensitivity_text(self, row: Sensitivity, metric: str) -> str:
        """A cell of the metric-sensitivity table: the decision, or ``not tested (deciding metric IQM)``."""
        if metric not in row.decisions:
            return f"not tested (deciding metric {metric_name(self.metric)})"
        return row.decision_text(metric)

    def orderings_at(self, budget: int) -> list[Ordering]:
        """Orderings at one budget, in algorithm order."""
        return [o for o in self.orderings if o.budget == budget]

    def ordering(self, budget: int, a: str, b: str) -> Ordering | None:
        """The ordering of ``a`` vs ``b`` at ``budget`` (either orientation), or ``None``."""
        for o in self.orderings:
            if o.budget == budget and {o.a, o.b} == {a, b}:
                return o
        return None


def _normalisation_text(label: str, detail) -> str:
    """The setup row: the method, then (when ``audit.json`` has them) the references and their source."""
    if not isinstance(detail, dict):
        return label
    parts = [label]
    refs = detail.get("references")
    if isinstance(refs, dict) and refs and label != "atari":  # Atari's table is standard; 57 pairs would drown
        parts.append("(score − low) / (high − low) with [low, high] " + ", ".join(
            f"{t} [{format_number(p[0])}, {format_number(p[1])}]" for t, p in refs.items()
            if isinstance(p, list) and len(p) == 2))
    if detail.get("source"):
        parts.append(str(detail["source"]))
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------- building
def _require(doc: dict, key: str, where: str, kind: type | tuple = (list, dict)):
    if key not in doc:
        raise InputError(f"{where}: missing key {key!r} (is this an rlaudit audit.json?)")
    value = doc[key]
    if not isinstance(value, kind):
        raise InputError(f"{where}: key {key!r} has type {type(value).__name__}, expected "
                         f"{getattr(kind, '__name__', None) or ' or '.join(k.__name__ for k in kind)}")
    return value


def _rank_summary(row: RankDistribution) -> RankSummary:
    budget, algorithm, p = row.budget, row.algorithm, list(row.probs)
    total = sum(p) or 1.0
    p = [v / total for v in p]
    expected = sum((k + 1) * v for k, v in enumerate(p))
    cum, lo, hi = 0.0, None, len(p)
    for k, v in enumerate(p):
        cum += v
        if lo is None and cum > 0.025:
            lo = k + 1
        if cum >= 0.975:
            hi = k + 1
            break
    modal = max(range(len(p)), key=lambda k: p[k]) + 1
    return RankSummary(budget, algorithm, tuple(p), expected, lo or 1, hi, modal)


def build_model(audit: dict, title: str | None = None, where: str = "audit.json") -> Report:
    """Arrange an audit document into a :class:`Report`.

    Args:
        audit: the ``audit.json`` document (``AuditResult.to_dict()``).
        title: report title; defaults to the source's title, protocol or path.
        where: name of the document in error messages.

    Raises:
        InputError: when the document is not an audit result this report can read.
    """
    if not isinstance(audit, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(audit).__name__}")
    # Render exactly what audit.json holds: an unbounded interval (inf) is null there, "–" here.
    audit = finite_document(audit)
    version = audit.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version {version!r} is not supported (this rlaudit reads "
                         f"schema_version {SCHEMA_VERSION})")
    data = _require(audit, "data", where, dict)
    settings = _require(audit, "settings", where, dict)
    check_header(audit, where)
    algorithms = tuple(str(a) for a in _require(data, "algorithms", f"{where}: data", list))
    tasks = tuple(str(t) for t in _require(data, "tasks", f"{where}: data", list))
    budgets = tuple(int(budget) for budget in _require(data, "budgets", f"{where}: data", list))
    unit = str(data.get("budget_unit") or "")
    metric = str(settings.get("metric", "iqm"))
    metrics = tuple(settings.get("metrics") or (metric,))
    source = audit.get("source") or {}

    if title is None:
        title = source.get("title") or source.get("protocol") or source.get("path") or "rlaudit report"
        title = f"Audit: {title}"

    rows = AuditRows.from_dict(audit, where)
    aggregates = rows.aggregate_index()
    orderings = rows.orderings
    ranks = {(row.budget, row.algorithm): _rank_summary(row) for row in rows.rank_distribution
             if row.metric == metric}
    profiles = {(p.budget, p.algorithm): p for p in rows.profiles}

    per_task_rows: dict = defaultdict(lambda: defaultdict(dict))
    for row in rows.per_task:
        per_task_rows[row.budget][row.task][row.algorithm] = row
    task_order = {t: i for i, t in enumerate(tasks)}
    per_task = {budget: sorted(per_task_rows[budget].items(),
                               key=lambda kv: (task_order.get(kv[0], len(task_order)), kv[0]))
                for budget in budgets if budget in per_task_rows}

    claims, checklist, inversions, crossovers = rows.claims, rows.checklist, rows.inversions, rows.crossovers
    runs_needed = tuple(sorted((o for o in orderings if o.decision == "inconclusive" and o.metric == metric),
                               key=lambda o: (o.runs_needed_capped, o.runs_needed is None,
                                              o.runs_needed or 0, o.budget)))

    interest = settings.get("budgets_of_interest") or data.get("budgets_of_interest")
    if not interest:
        interest = sorted({budget for c in claims for budget in c.budgets})
    budgets_of_interest = tuple(int(budget) for budget in interest if int(budget) in budgets)
    if set(budgets_of_interest) == set(budgets):
        budgets_of_interest = ()  # marking every budget marks nothing

    main = [o for o in orderings if o.metric == metric]
    summary = {
        "n_orderings": len(main),
        "n_decided": sum(o.decision != "inconclusive" for o in main),
        "n_confirmed_inversions": sum(i.kind == "confirmed" for i in inversions),
        "claims": {v: sum(1 for c in claims if c.status == v) for v in VERDICTS},
        # the counter splits "inconclusive" the way the verdict does: held somewhere, or decided nowhere
        "claim_outcomes": {o: sum(1 for c in claims if c.outcome == o) for o in CLAIM_OUTCOMES},
    }
    report = Report(
        title=title, audit=audit, algorithms=algorithms, tasks=tasks, budgets=budgets, budget_unit=unit,
        metric=metric, metrics=metrics, findings=(), summary=summary, setup=(), aggregates=aggregates,
        orderings=tuple(orderings), inversions=inversions, crossovers=crossovers,
        metric_sensitivity=rows.metric_sensitivity, ranks=ranks, profiles=profiles,
        claims=claims, checklist=checklist, runs_needed=runs_needed, per_task=per_task,
        budgets_of_interest=budgets_of_interest, rows=rows)
    from rlaudit.report.agreement import ANCHOR, HEADING, agreement_findings, build_agreement  # joined audits

    object.__setattr__(report, "agreement", build_agreement(audit.get("published_agreement"), where))
    object.__setattr__(report, "agreement_anchor", ANCHOR)
    object.__setattr__(report, "agreement_heading", HEADING)
    object.__setattr__(report, "findings", tuple(_findings(report) + agreement_findings(report.agreement)))
    object.__setattr__(report, "settings_published", settings_table(source))
    object.__setattr__(report, "setup", tuple(_setup(report)))
    from rlaudit.report.answer import build_answer

    object.__setattr__(report, "answer", build_answer(report))
    return report


def _findings(r: Report) -> list[Finding]:
    out: list[Finding] = []
    m = metric_name(r.metric)
    confirmed: dict = {}
    for inv in r.inversions:
        if inv.kind == "confirmed":
            confirmed.setdefault((inv.a, inv.b, inv.metric), []).append(inv)
    for (a, b, metric), invs in confirmed.items():
        budgets = sorted({i.budget_low for i in invs} | {i.budget_high for i in invs})
        by_decision: dict = {}
        for budget in budgets:
            o = r.ordering(budget, a, b) if metric == r.metric else None
            dec = next((i.decision_low for i in invs if i.budget_low == budget), None)
            dec = dec or next((i.decision_high for i in invs if i.budget_high == budget), None)
            if o is not None:
                dec = o.decision if o.a == a else {"a>b": "b>a", "b>a": "a>b"}.get(o.decision, o.decision)
            by_decision.setdefault(dec, []).append(r.budget(budget))
        parts = [f"{decision_text(d, a, b)} at {join_words(bs)} {r.unit}" for d, bs in by_decision.items()]
        on = f" between budgets on {r.rerun_suite}" if r.rerun_suite else ""
        out.append(Finding("inversion", f"Ranking inversion{on} ({metric_name(metric)}): " + "; ".join(parts) + ".",
                           "critical"))
    for c in r.claims:
        if c.status == "reversed":
            rev = [r.budget(budget) for budget in c.budgets_with("reversed")]
            held = [r.budget(budget) for budget in c.budgets_with("holds")]
            tail = f"; it holds at {join_words(held)} {r.unit}" if held else ""
            out.append(Finding("claim-reversed", f"Claim \u201c{c.text}\u201d is reversed at "
                               f"{join_words(rev)} {r.unit}{tail}.", "critical"))
    for c in r.claims:
        if c.status == "inconclusive":
            held = [r.budget(budget) for budget in c.budgets_with("holds")]
            undecided = [r.budget(budget) for budget in c.budgets_with("inconclusive")]
            where = (f"holds only at {join_words(held)} {r.unit}; it is not decided at {join_words(undecided)}" if held
                     else "is not decided at any audited budget")
            out.append(Finding("claim-inconclusive", f"Claim \u201c{c.text}\u201d {where}.", "warning"))
    # Tested changes are findings; "decided_once" and "unconfirmed" entries are descriptive notes only (shown in
    # the inversions table, never in the verdict), since nothing was tested to say the ordering changed.
    changed = [i for i in r.inversions if i.kind == "changed"]
    if changed:
        pairs = sorted({f"{i.a} vs {i.b}" for i in changed})
        shown = join_words(pairs[:4]) + (f" and {len(pairs) - 4} more" if len(pairs) > 4 else "")
        out.append(Finding("inversion", (
            f"{len(changed)} tested change(s) of a gap between budgets ({m}), involving {shown}: the difference "
            "between the two algorithms is not the same at both budgets (error-controlled)."), "warning"))
    n, k = r.summary["n_orderings"], r.summary["n_decided"]
    undecided = [o for o in r.orderings if o.metric == r.metric and o.decision == "inconclusive"]
    if undecided:
        pairs = sorted({f"{o.a} vs {o.b}" for o in undecided})
        shown = join_words(pairs[:4]) + (f" and {len(pairs) - 4} more" if len(pairs) > 4 else "")
        out.append(Finding("undecided", f"{len(undecided)} of {n} pairwise orderings ({m}) are undecided after "
                           f"error control, involving {len(pairs)} pair(s): {shown}.", "warning"))
    for c in r.claims:
        if c.status == "holds":
            out.append(Finding("claim-holds", f"Claim \u201c{c.text}\u201d holds at every audited budget.", "info"))
    out += _learning_findings(r)
    for item in r.checklist:
        if item.severity == "warning":
            out.append(Finding("checklist", item.message, "warning"))
    out.insert(0, Finding("info", f"{k} of {n} pairwise orderings ({m}) are decided at family-wise error "
                          f"{r.audit['settings'].get('alpha', 0.05)} across {len(r.budgets)} budgets "
                          f"({join_words([r.budget(budget) for budget in r.budgets])} {r.unit})"
                          f"{supported_error_note(r.audit['settings'])}.", "info"))
    # keep the headline first, then an incomplete sweep (it qualifies every finding after it), then the rest by
    # severity (stable within a severity)
    rank = {"critical": 0, "warning": 1, "info": 2}
    qualifiers = [Finding("checklist", item.message, "warning") for item in r.checklist if item.id in QUALIFIERS]
    rest = sorted((f for f in out[1:] if f not in qualifiers), key=lambda f: rank.get(f.severity, 3))
    return [out[0], *qualifiers, *rest]


def _learning_findings(r: Report) -> list[Finding]:
    """"Nothing learned yet on …" and the claims that rest on those cells (``audit.json`` ``learning``)."""
    learning = r.audit.get("learning") or {}
    gone = learning.get("nothing_learned") or []
    if not gone:
        return []
    by_budget: dict = defaultdict(list)
    for c in gone:
        by_budget[int(c["budget"])].append(str(c["task"]))
    parts = [f"at {r.budget(b)}{' ' + r.unit if i == 0 else ''} on {join_words(ts)}"
             for i, (b, ts) in enumerate(sorted(by_budget.items()))]
    where = "; ".join(parts)
    out = [Finding("nothing-learned", f"Nothing learned yet {where}: no algorithm's per-task interval lies above "
                   f"the random policy's score, so orderings there compare play at random level (aggregates without "
                   f"those tasks are in section 3).", "warning")]
    for c in r.audit.get("claims") or []:
        resting = [r.budget(int(p["budget"])) for p in c.get("per_budget", []) if p.get("rests_on_unlearned")]
        if resting:
            out.append(Finding("nothing-learned", f"Claim \u201c{c.get('text')}\u201d at {join_words(resting)} {r.unit} "
                               f"rests only on tasks nothing has learned yet.", "warning"))
    return out


def _runs(n: int) -> str:
    return f"{n} run{'' if int(n) == 1 else 's'}"


def compute_text(c: dict) -> str:
    """The setup's "Compute" row: what training a store's finished runs took, on which backend and where."""
    runs = int(c.get("runs", 0))
    timed = int(c.get("runs_timed", 0))
    cpu, wall = c.get("cpu_hours"), float(c.get("wall_hours", 0.0))
    if cpu is not None and timed == runs:
        head = f"{cpu:.3g} CPU-hours over {_runs(runs)} (wall-clock {wall:.3g} run-hours)"
    elif cpu is not None:
        head = (f"{cpu:.3g} CPU-hours over the {timed} of {runs} runs that record their CPU time; the others were "
                f"recorded before it was stored (wall-clock of all {runs}: {wall:.3g} run-hours)")
    else:
        head = (f"{wall:.3g} run-hours of wall-clock time over {_runs(runs)} (CPU time not recorded: runs from "
                f"before store schema 3)")
    backends = ", ".join(f"{b} ({_runs(n)})" for b, n in (c.get("backends") or {}).items())
    machines = "; ".join(f"{m['machine']} ({_runs(m['runs'])})" for m in c.get("machines") or [])
    return f"{head}; backend: {backends}; machine: {machines}"


def _setup(r: Report) -> list[tuple[str, str]]:
    a, data, s = r.audit, r.audit["data"], r.audit["settings"]
    src = a.get("source") or {}
    rows: list[tuple[str, str]] = []
    rows.append(("Source", str(src.get("path") or "–")))
    if src.get("protocol"):
        rows.append(("Protocol", str(src["protocol"])))
    if src.get("citation"):
        rows.append(("Citation", str(src["citation"])))
    if r.settings_published:
        n = sum(1 for x in r.settings_published if x.key)
        rows.append(("Settings vs published", f"{n} declared deviation{'s' if n != 1 else ''} from the published "
                     f"settings; table below"))
    elif data.get("budget_labels"):  # a rerun that names no source: say so rather than imply fidelity
        rows.append(("Settings vs published", "no published source is declared for these settings, so how far "
                     "they are from the original is not stated"))
    for line in src.get("fidelity") or []:  # algorithms not shown equivalent to an independent implementation
        rows.append(("Fidelity", str(line)))
    rows.append((f"Algorithms ({len(r.algorithms)})", ", ".join(r.algorithms)))
    shown = ", ".join(r.tasks[:12]) + (f", … ({len(r.tasks) - 12} more)" if len(r.tasks) > 12 else "")
    rows.append((f"Tasks ({len(r.tasks)})", shown))
    runs = defaultdict(list)
    for d in data.get("design") or []:
        runs[str(d["algorithm"])].append(int(d["n_runs"]))
    if runs:
        parts = []
        for alg in r.algorithms:
            ns = runs.get(alg, [])
            if ns:
                parts.append(f"{alg}: {min(ns)}" if min(ns) == max(ns) else f"{alg}: {min(ns)}–{max(ns)}")
        rows.append(("Runs per task", "; ".join(parts)))
    if src.get("compute"):
        rows.append(("Compute", compute_text(src["compute"])))
    rows.append(("Budgets", ", ".join(r.budget(budget) for budget in r.budgets) + f" {r.unit}"
                 + f" ({', '.join(f'{budget:,}' for budget in r.budgets)})"))
    labels = data.get("budget_labels") or []
    if labels:
        rows.append(("Regimes", "; ".join(f"{r.budget(int(l['budget']))}: {l.get('regime')} ({l.get('regime_kind')})"
                                          for l in labels)))
    rows.append(("Score kind", {"eval": "evaluation episodes", "train": "returns logged during training",
                                "mixed": "mixed (evaluation and training returns)"}.get(
                                    data.get("score_kind"), str(data.get("score_kind")))))
    rows.append(("Normalisation", _normalisation_text(str(s.get("normalization") or data.get("normalization")
                                                          or "none"), data.get("normalization_detail"))))
    if data.get("eval_protocol"):
        rows.append(("Evaluation protocol", str(data["eval_protocol"])))
    rows.append(("Deciding metric", f"{metric_name(r.metric)} (also reported: "
                 f"{', '.join(metric_name(m) for m in r.metrics if m != r.metric) or 'none'})"))
    rows.append(("Bootstrap", f"stratified over runs within tasks; {s.get('reps', '–')} replicates for aggregates "
                 f"and differences, {s.get('reps_pairwise', '–')} for probability of improvement, profiles, "
                 f"ranks and per-task intervals; {s.get('interval_method', 'percentile')} intervals at "
                 f"{s.get('confidence', 0.95)} (the same scheme decides orderings and changes); seed {s.get('seed', '–')}"))
    first = str(s.get("correction_description") or "").split(": ")[0].split(". ")[0].rstrip(".")
    rows.append(("Error control", f"family-wise α = {s.get('alpha', '–')}, {s.get('correction', '–')}"
                 + (f" ({first}; details in audit.json settings.correction_description)" if first else "")))
    if s.get("runs_needed_method"):
        rows.append(("Runs needed", f"{s['runs_needed_method']} (cap {s.get('runs_needed_cap', '–')})"))
    for note in data.get("notes") or []:
        rows.append(("Note", str(note)))
    rows.append(("Versions", f"rlaudit {a.get('rlaudit_version', '–')}; audit created {a.get('created', '–')}"))
    return rows
