"""Typed rows of ``audit.json``: one ``from_dict`` per row kind, read by the terminal summary and the report.

``AuditResult`` keeps the document's rows as plain dicts (it round-trips through JSON unchanged); code that
*reads* rows goes through these classes (all of them at once through :class:`AuditRows`), so a key is named
in one place and a malformed document fails with one line naming the row and key
(``audit.json: orderings[3] lacks key 'decision'``, ``audit.json: claims[0].budgets is 'x', expected a list
of integers``). The words shown for a decision or a claim verdict are defined here too, so the terminal
summary, HTML, Markdown and LaTeX say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlaudit.audit.checklist import Finding
from rlaudit.audit.claims import VERDICTS, claim_status, overall_verdict
from rlaudit.audit.inversions import FINDINGS, KINDS
from rlaudit.audit.orderings import DECISIONS
from rlaudit.errors import InputError

CHANGE_DECISIONS: tuple[str, ...] = ("changed", "inconclusive")
"""``changes[].decision``: the gap between two budgets differs (after the correction), or not decided."""
SEVERITIES: tuple[str, ...] = ("warning", "info")
"""``checklist[].severity``."""
SENSITIVITY_KINDS: tuple[str, ...] = ("opposed", "partial")
"""``metric_sensitivity[].kind``."""


def decision_text(decision: str | None, a: str, b: str) -> str:
    """``"A > B"``, ``"B > A"`` or ``"inconclusive"``: the one wording of a pair's decision everywhere."""
    return {"a>b": f"{a} > {b}", "b>a": f"{b} > {a}"}.get(decision, "inconclusive")


# --------------------------------------------------------------------------------------------- reading keys
_REQUIRED = object()


def _int(v) -> int:
    if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
        raise TypeError
    return int(v)


def _float(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError
    # audit.json holds an unbounded interval as null; an in-memory result may still hold inf or NaN
    return float(v) if math.isfinite(v) else None


def _str(v) -> str:
    if not isinstance(v, str):
        raise TypeError
    return v


def _bool(v) -> bool:
    if not isinstance(v, bool):
        raise TypeError
    return v


def _list_of(conv):
    def read(v):
        if not isinstance(v, (list, tuple)):  # a list in audit.json, a tuple in a result still in memory
            raise TypeError
        return tuple(conv(x) for x in v)
    return read


def _dict(v) -> dict:
    if not isinstance(v, dict):
        raise TypeError
    return v


_KINDS = {_int: "an integer", _float: "a number", _str: "a string", _bool: "true or false", _dict: "an object"}


class _Row:
    """One row being read: every key goes through :meth:`__call__`, which names ``where: section[index].key``
    on a missing key, a wrongly typed value or a value outside ``choices``."""

    def __init__(self, row, name: str):
        self.name = name
        if not isinstance(row, dict):
            raise InputError(f"{self.name} is {type(row).__name__}, expected an object")
        self.row = row

    def __call__(self, key: str, conv: Callable = _str, default=_REQUIRED, what: str = "",
                 choices: Sequence[str] = ()):
        if key not in self.row:
            if default is _REQUIRED:
                raise InputError(f"{self.name} lacks key {key!r}")
            return default
        value = self.row[key]
        if value is None and default is not _REQUIRED:
            return default
        if choices:
            what = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        try:
            out = conv(value)
        except (TypeError, ValueError):
            out = _REQUIRED
        if out is _REQUIRED or (choices and out not in choices):
            raise InputError(f"{self.name}.{key} is {_short(value)}, expected {what or _KINDS[conv]}")
        return out

    def nested(self, key: str, index: int) -> _Row:
        """Entry ``index`` of the list under ``key``, named ``claims[0].per_budget[1]``."""
        return _Row.at(self.row[key][index], self.name, key, index, ".")

    @classmethod
    def at(cls, row, where: str, section: str, index: int, sep: str = ": ") -> _Row:
        """Entry ``index`` of the list ``section`` of ``where`` (``audit.json: claims[2]``)."""
        return cls(row, f"{where}{sep}{section}[{index}]")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_LIST = _list_of(lambda x: x)
_INTS = _list_of(_int)
_STRS = _list_of(_str)
_NUMBERS = _list_of(lambda x: None if x is None else _float(x))
_KINDS.update({_LIST: "a list", _INTS: "a list of integers", _STRS: "a list of strings",
               _NUMBERS: "a list of numbers"})


# --------------------------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (``None`` where ``audit.json`` has ``null``)."""

    point: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def read(cls, r: _Row, point: str, lo: str, hi: str, point_required: bool = False) -> Interval:
        """The interval stored under three keys of the row being read (each may be ``null``: unbounded or not
        applicable; ``point_required``: the point's key must be there)."""
        if point_required and point not in r.row:
            raise InputError(f"{r.name} lacks key {point!r}")
        return cls(r(point, _float, None), r(lo, _float, None), r(hi, _float, None))


@dataclass(frozen=True)
class Aggregate:
    """An ``aggregates`` row: one metric of one algorithm at one budget."""

    budget: int
    algorithm: str
    metric: str
    interval: Interval

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0) -> Aggregate:
        """Read one ``aggregates`` row (``InputError`` naming ``where: aggregates[index]`` when malformed)."""
        r = _Row.at(row, where, "aggregates", index)
        return cls(r("budget", _int), r("algorithm"), r("metric"), Interval.read(r, "point", "lo", "hi", True))


@dataclass(frozen=True)
class Ordering:
    """An ``orderings`` row: the decision on a pair at one budget (``diff = metric(a) - metric(b)``)."""

    budget: int
    a: str
    b: str
    metric: str
    decision: str
    """``"a>b"``, ``"b>a"`` or ``"inconclusive"`` (after the family-wise correction)."""
    diff: Interval
    p_value: float | None
    p_adjusted: float | None
    p_improvement: Interval
    runs_needed: int | None
    runs_needed_capped: bool
    runs_needed_range: tuple[int, int | None] | None = None
    """Runs needed over the effect's interval: ``(fewest, most)``, ``most`` ``None`` for "unbounded"."""
    df: float | None = None
    """The t reading's effective degrees of freedom (``None``: infinite, or an audit written before 2026-12-06)."""
    past_replicates: bool = False
    """Whether ``p_value`` was read on Student's t past the bootstrap replicates (none on the other side of 0)."""

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Ordering:
        """Read one ``orderings`` row; ``metric`` is the default for rows without one.

        Raises:
            InputError: a missing or wrongly typed key or an unknown decision, naming ``where: orderings[index]``.
        """
        r = _Row.at(row, where, "orderings", index)
        rng = r("runs_needed_range", _list_of(lambda x: None if x is None else _int(x)), None,
                "[fewest, most or null]")
        if rng is not None and (len(rng) != 2 or rng[0] is None):
            raise InputError(f"{r.name}.runs_needed_range is {_short(row['runs_needed_range'])}, expected "
                             "[fewest, most or null]")
        return cls(
            budget=r("budget", _int), a=r("a"), b=r("b"), metric=r("metric", _str, metric),
            decision=r("decision", choices=DECISIONS), diff=Interval.read(r, "diff_point", "diff_lo", "diff_hi"),
            p_value=r("p_value", _float, None), p_adjusted=r("p_adjusted", _float, None),
            p_improvement=Interval.read(r, "p_improvement", "p_improvement_lo", "p_improvement_hi"),
            runs_needed=r("runs_needed", _int, None), runs_needed_capped=r("runs_needed_capped", _bool, False),
            runs_needed_range=rng, df=r("df", _float, None), past_replicates=r("past_replicates", _bool, False))

    @property
    def winner(self) -> str | None:
        """The better algorithm, or ``None`` when inconclusive."""
        return {"a>b": self.a, "b>a": self.b}.get(self.decision)

    def decision_text(self) -> str:
        """``"A > B"``, ``"B > A"`` or ``"inconclusive"``."""
        return decision_text(self.decision, self.a, self.b)

    def runs_needed_text(self, cap: int) -> str:
        """``"24 (9 to > 1000)"``: the estimate, then its range over the effect's interval; ``-`` when decided."""
        if self.runs_needed is None:
            return "-"
        main = f"> {cap}" if self.runs_needed_capped else str(self.runs_needed)
        if not self.runs_needed_range:
            return main
        return f"{main} ({self.runs_needed_range_text.replace('or more', f'to > {cap}')})"

    @property
    def runs_needed_range_text(self) -> str:
        """``"9 to 40"``, ``"9 or more"`` (the interval contains 0), or ``""`` without a range."""
        if not self.runs_needed_range:
            return ""
        fewest, most = self.runs_needed_range
        return f"{fewest} or more" if most is None else f"{fewest} to {most}"


@dataclass(frozen=True)
class Change:
    """A ``changes`` row: the test of a pair's gap between ``budget_low`` and ``budget_high``
    (``diff = gap(budget_high) - gap(budget_low)``, ``gap = metric(a) - metric(b)``)."""

    budget_low: int
    budget_high: int
    a: str
    b: str
    metric: str
    diff: Interval
    p_value: float | None
    p_adjusted: float | None
    decision: str
    """``"changed"`` or ``"inconclusive"`` (after the family-wise correction)."""

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Change:
        """Read one ``changes`` row (``InputError`` naming ``where: changes[index]`` when malformed)."""
        r = _Row.at(row, where, "changes", index)
        return cls(r("budget_low", _int), r("budget_high", _int), r("a"), r("b"), r("metric", _str, metric),
                   Interval.read(r, "diff_point", "diff_lo", "diff_hi"), r("p_value", _float, None),
                   r("p_adjusted", _float, None), r("decision", choices=CHANGE_DECISIONS))


@dataclass(frozen=True)
class Inversion:
    """An ``inversions`` row: a non-stable change of a pair's ordering between two budgets."""

    a: str
    b: str
    metric: str
    budget_low: int
    budget_high: int
    kind: str
    """Findings: ``confirmed``, ``changed``; notes: ``decided_once``, ``unconfirmed``."""
    decision_low: str
    decision_high: str
    finding: bool
    change_tested: bool

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Inversion:
        """Read one ``inversions`` row (``InputError`` naming ``where: inversions[index]`` when malformed)."""
        r = _Row.at(row, where, "inversions", index)
        kind = r("kind", choices=KINDS)
        return cls(r("a"), r("b"), r("metric", _str, metric), r("budget_low", _int), r("budget_high", _int), kind,
                   r("decision_low", choices=DECISIONS), r("decision_high", choices=DECISIONS),
                   r("finding", _bool, kind in FINDINGS), r("change_tested", _bool, False))


@dataclass(frozen=True)
class Crossover:
    """A ``crossovers`` row: a decided ordering switches to the opposite one between two budgets."""

    a: str
    b: str
    metric: str
    before: str
    """Decision up to ``last_budget_before`` (the row's ``from``)."""
    after: str
    """Decision from ``first_budget_after`` (the row's ``to``)."""
    last_budget_before: int
    first_budget_after: int

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Crossover:
        """Read one ``crossovers`` row (``InputError`` naming ``where: crossovers[index]`` when malformed)."""
        r = _Row.at(row, where, "crossovers", index)
        return cls(r("a"), r("b"), r("metric", _str, metric), r("from", choices=DECISIONS),
                   r("to", choices=DECISIONS), r("last_budget_before", _int), r("first_budget_after", _int))


@dataclass(frozen=True)
class Sensitivity:
    """A ``metric_sensitivity`` row: the metrics' decisions on a pair at a budget disagree."""

    budget: int
    a: str
    b: str
    decisions: dict
    """``{metric: decision}``."""
    kind: str
    """``opposed`` (``a>b`` and ``b>a`` both present) or ``partial``."""

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0) -> Sensitivity:
        """Read one ``metric_sensitivity`` row (``InputError`` naming the row when malformed)."""
        r = _Row.at(row, where, "metric_sensitivity", index)
        decisions = r("decisions", _dict)
        bad = [m for m, d in decisions.items() if d not in DECISIONS]
        if bad:
            raise InputError(f"{r.name}.decisions[{bad[0]!r}] is {_short(decisions[bad[0]])}, expected "
                             "'a>b', 'b>a' or 'inconclusive'")
        return cls(r("budget", _int), r("a"), r("b"), dict(decisions), r("kind", choices=SENSITIVITY_KINDS))

    def decision_text(self, metric: str) -> str:
        """The decision under ``metric`` in words (``"–"`` when the metric was not decided)."""
        return decision_text(self.decisions[metric], self.a, self.b) if metric in self.decisions else "\u2013"


@dataclass(frozen=True)
class RankDistribution:
    """A ``rank_distribution`` row: bootstrap probability of each rank (rank 1 = best)."""

    budget: int
    algorithm: str
    metric: str
    probs: tuple[float, ...]

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm"
                  ) -> RankDistribution:
        """Read one ``rank_distribution`` row (``InputError`` naming the row when malformed)."""
        r = _Row.at(row, where, "rank_distribution", index)
        probs = r("probs", _NUMBERS)
        return cls(r("budget", _int), r("algorithm"), r("metric", _str, metric),
                   tuple(0.0 if p is None else p for p in probs))


@dataclass(frozen=True)
class Profile:
    """A ``profiles`` row: fraction of runs scoring above each threshold, with a band (``lo``/``hi`` may be empty)."""

    budget: int
    algorithm: str
    taus: tuple[float, ...]
    fraction: tuple[float | None, ...]
    lo: tuple[float | None, ...] = ()
    hi: tuple[float | None, ...] = ()

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0) -> Profile:
        """Read one ``profiles`` row (``InputError`` naming ``where: profiles[index]`` when malformed)."""
        r = _Row.at(row, where, "profiles", index)
        taus = r("taus", _NUMBERS)
        out = cls(r("budget", _int), r("algorithm"), taus, r("fraction", _NUMBERS), r("lo", _NUMBERS, ()),
                  r("hi", _NUMBERS, ()))
        if None in taus or any(len(v) not in (0, len(taus)) for v in (out.lo, out.hi)) or \
                len(out.fraction) != len(taus):
            raise InputError(f"{r.name}: taus, fraction, lo and hi must be lists of the same length "
                             "(taus without nulls)")
        return out


@dataclass(frozen=True)
class TaskScore:
    """A ``per_task`` row: mean raw score of one algorithm on one task at one budget, with an interval."""

    budget: int
    algorithm: str
    task: str
    n_runs: int
    mean: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0) -> TaskScore:
        """Read one ``per_task`` row (``InputError`` naming ``where: per_task[index]`` when malformed)."""
        r = _Row.at(row, where, "per_task", index)
        return cls(r("budget", _int), r("algorithm"), r("task"), r("n_runs", _int), r("mean", _float, None),
                   r("lo", _float, None), r("hi", _float, None))


@dataclass(frozen=True)
class ClaimBudget:
    """One entry of ``claims[].per_budget`` (``diff = metric(better) - metric(worse)``)."""

    budget: int
    verdict: str
    """``holds``, ``reversed`` or ``inconclusive``."""
    decision: str
    diff: Interval


@dataclass(frozen=True)
class Claim:
    """A ``claims`` row: a claimed ordering and its verdict at each claimed budget."""

    text: str
    better: str
    worse: str
    metric: str
    budgets: tuple[int, ...]
    source: str | None
    per_budget: tuple[ClaimBudget, ...]

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Claim:
        """Read one ``claims`` row and its ``per_budget`` entries (``InputError`` naming the row when malformed)."""
        r = _Row.at(row, where, "claims", index)
        per = []
        for i, _ in enumerate(r("per_budget", _LIST)):
            p = r.nested("per_budget", i)
            per.append(ClaimBudget(p("budget", _int), p("verdict", choices=VERDICTS), p("decision", choices=DECISIONS),
                                   Interval.read(p, "diff_point", "diff_lo", "diff_hi")))
        return cls(r("text"), r("better"), r("worse"), r("metric", _str, metric),
                   r("budgets", _INTS, ()), r("source", _str, None), tuple(per))

    @property
    def status(self) -> str:
        """``holds`` (every budget), ``reversed`` (somewhere) or ``inconclusive``."""
        return claim_status([p.verdict for p in self.per_budget])

    @property
    def outcome(self) -> str:
        """The status as the counter and tables say it: ``holds``, ``reversed``, and for ``inconclusive`` either
        ``holds only at some budgets`` (decided in the claimed direction somewhere) or ``never decided``."""
        if self.status != "inconclusive":
            return self.status
        return "holds only at some budgets" if self.budgets_with("holds") else "never decided"

    def overall_text(self, budget_format: Callable[[int], str] = str) -> str:
        """``"holds at all budgets"``, ``"mixed: holds at 10M, reversed at 200M"``, … with budgets written by
        ``budget_format`` (``audit.json``'s ``overall`` is this with plain integers)."""
        return overall_verdict([(p.budget, p.verdict) for p in self.per_budget], budget_format)

    def budgets_with(self, verdict: str) -> list[int]:
        """The claimed budgets with this verdict, ascending."""
        return [p.budget for p in self.per_budget if p.verdict == verdict]


class ChecklistItem(Finding):
    """A ``checklist`` row: the :class:`~rlaudit.audit.checklist.Finding` the audit wrote, read back."""

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0) -> ChecklistItem:
        """Read one ``checklist`` row (``InputError`` naming ``where: checklist[index]`` when malformed)."""
        r = _Row.at(row, where, "checklist", index)
        return cls(r("id"), r("severity", choices=SEVERITIES), r("message"), r("advice", _str, ""),
                   r("details", _dict, {}))


# --------------------------------------------------------------------------------------------- the header
SETTING_KINDS: dict[str, Callable] = {
    "metric": _str, "metrics": _STRS, "gamma": _float, "reps": _int, "reps_pairwise": _int, "seed": _int,
    "alpha": _float, "confidence": _float, "interval_method": _str, "correction": _str,
    "correction_description": _str, "n_tests": _int, "runs_needed_method": _str, "runs_needed_cap": _int,
    "power": _float, "min_effect": _float, "small_sample": _bool, "budgets_requested": _INTS,
    "budgets_of_interest": _INTS,
}
"""Type of each ``settings`` key a reader uses (``null`` allowed: not set)."""


def check_header(doc: dict, where: str = "audit.json") -> None:
    """Check the ``data`` and ``settings`` objects of an ``audit.json`` document, which the report reads
    besides the rows: names listed once, design rows complete, settings of the documented types.

    Raises:
        InputError: one line naming the key (``audit.json: data.design[3] lacks key 'n_runs'``).
    """
    data = _Row(doc.get("data"), f"{where}: data")
    for key in ("algorithms", "tasks"):
        names = data(key, _STRS, what="a list of strings")
        repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if repeated is not None:
            raise InputError(f"{where}: data.{key} lists {repeated!r} twice")
    data("budgets", _INTS)
    for i, _ in enumerate(data("design", _LIST, ())):
        row = data.nested("design", i)
        row("algorithm"), row("task"), row("budget", _int), row("n_runs", _int)
    settings = _Row(doc.get("settings"), f"{where}: settings")
    for key, kind in SETTING_KINDS.items():
        settings(key, kind, None)


# --------------------------------------------------------------------------------------------- the document
@dataclass(frozen=True)
class AuditRows:
    """Every row list of an ``audit.json`` document, typed; what the terminal summary and the report read."""

    metric: str
    """The deciding metric (``settings.metric``); the default for rows without one."""
    aggregates: tuple[Aggregate, ...]
    orderings: tuple[Ordering, ...]
    changes: tuple[Change, ...] = ()
    inversions: tuple[Inversion, ...] = ()
    crossovers: tuple[Crossover, ...] = ()
    metric_sensitivity: tuple[Sensitivity, ...] = ()
    rank_distribution: tuple[RankDistribution, ...] = ()
    profiles: tuple[Profile, ...] = ()
    per_task: tuple[TaskScore, ...] = ()
    claims: tuple[Claim, ...] = ()
    checklist: tuple[ChecklistItem, ...] = ()

    @classmethod
    def from_dict(cls, doc: dict, where: str = "audit.json") -> AuditRows:
        """Read the row lists of an ``audit.json`` document (``aggregates`` and ``orderings`` required).

        Raises:
            InputError: a missing list, a list that is not one, or a malformed row, naming ``where`` and the row.
        """
        settings = doc.get("settings")
        metric = settings.get("metric", "iqm") if isinstance(settings, dict) else "iqm"
        metric = metric if isinstance(metric, str) else "iqm"

        def rows(key: str, kind, required: bool = False, with_metric: bool = True) -> tuple:
            if key not in doc and required:
                raise InputError(f"{where}: missing key {key!r} (is this an rlaudit audit.json?)")
            items = doc.get(key)
            items = [] if items is None and not required else items
            if not isinstance(items, list):
                raise InputError(f"{where}: key {key!r} has type {type(items).__name__}, expected list")
            extra = (metric,) if with_metric else ()
            return tuple(kind.from_dict(row, where, i, *extra) for i, row in enumerate(items))

        return cls(metric=metric, aggregates=rows("aggregates", Aggregate, True, False),
                   orderings=rows("orderings", Ordering, True), changes=rows("changes", Change),
                   inversions=rows("inversions", Inversion), crossovers=rows("crossovers", Crossover),
                   metric_sensitivity=rows("metric_sensitivity", Sensitivity, with_metric=False),
                   rank_distribution=rows("rank_distribution", RankDistribution),
                   profiles=rows("profiles", Profile, with_metric=False),
                   per_task=rows("per_task", TaskScore, with_metric=False),
                   claims=rows("claims", Claim), checklist=rows("checklist", ChecklistItem, with_metric=False))

    def aggregate_index(self) -> dict:
        """``{(budget, algorithm, metric): Interval}``."""
        return {(g.budget, g.algorithm, g.metric): g.interval for g in self.aggregates}


# --------------------------------------------------------------------------------------------- published_agreement
AGREEMENT_STATUSES: tuple[str, ...] = ("holds", "reversed", "inconclusive", "not rerun")
"""What a published ordering becomes at a rerun budget (``inconclusive``: no decision after error control)."""


@dataclass(frozen=True)
class AgreementCell:
    """One entry of ``published_agreement.orderings[].per_budget``."""

    budget: int
    status: str
    diff: Interval
    """Rerun ``metric(better) - metric(worse)`` (``None`` when not rerun)."""


@dataclass(frozen=True)
class PublishedOrdering:
    """A ``published_agreement.orderings`` row: a decided published ordering and its status at each rerun budget."""

    better: str
    worse: str
    published_budgets: tuple[int, ...]
    rerun_better: str | None
    rerun_worse: str | None
    per_budget: tuple[AgreementCell, ...]


@dataclass(frozen=True)
class AgreementCount:
    """A ``published_agreement.summary`` row: how many published orderings have each status at a rerun budget."""

    budget: int
    holds: int
    reversed: int
    inconclusive: int
    not_rerun: int
    """The row's ``"not rerun"``."""


@dataclass(frozen=True)
class RankAgreement:
    """A ``published_agreement.rank_agreement`` row: Kendall's tau-b between the two rankings."""

    published_budget: int
    rerun_budget: int
    tau: Interval
    """``point`` is tau (``None`` when undefined), ``[lo, hi]`` its interval."""
    published_ranking: tuple[str, ...]
    rerun_ranking: tuple[str, ...]


@dataclass(frozen=True)
class PublishedAgreement:
    """The ``published_agreement`` document of a joined audit, typed (``docs/audit-json.md``)."""

    name: str | None
    protocol: str | None
    published_budgets: tuple[int, ...]
    published_unit: str | None
    suite: str | None
    rerun_budgets: tuple[int, ...]
    rerun_unit: str | None
    metric: str
    mapping: tuple[tuple[str, str], ...]
    """``(published agent, rerun label)``."""
    not_rerun: tuple[str, ...]
    caveat: str
    method: str
    orderings: tuple[PublishedOrdering, ...]
    summary: tuple[AgreementCount, ...]
    ranks: tuple[RankAgreement, ...]
    published_suite: str | None = None
    """The published runs' suite (``None``: not recorded)."""
    suite_note: str = ""
    """Whether the rerun changes the suite as well as the budget (``suite_change.note``)."""
    suite_differs: bool | None = None

    @classmethod
    def from_dict(cls, doc: dict, where: str = "audit.json") -> PublishedAgreement:
        """Read the ``published_agreement`` document (``InputError`` naming the part and key when malformed)."""
        where = f"{where}: published_agreement"
        top = _Row(doc, where)
        pub, rer = _Row(top("published", _dict), f"{where}.published"), _Row(top("rerun", _dict), f"{where}.rerun")
        listed = top("orderings", _LIST)
        orderings = []
        for i in range(len(listed)):
            r = _Row.at(listed[i], where, "orderings", i, ".")
            cells = []
            for j in range(len(r("per_budget", _LIST))):
                p = r.nested("per_budget", j)
                cells.append(AgreementCell(p("budget", _int), p("status", choices=AGREEMENT_STATUSES),
                                           Interval.read(p, "diff_point", "diff_lo", "diff_hi")))
            orderings.append(PublishedOrdering(r("better"), r("worse"), r("published_budgets", _INTS, ()),
                                               r("rerun_better", _str, None), r("rerun_worse", _str, None),
                                               tuple(cells)))
        summary = []
        for i in range(len(top("summary", _LIST))):
            r = _Row.at(doc["summary"][i], where, "summary", i, ".")
            summary.append(AgreementCount(r("budget", _int), r("holds", _int), r("reversed", _int),
                                          r("inconclusive", _int), r("not rerun", _int)))
        ranks = []
        for i in range(len(top("rank_agreement", _LIST, ()))):
            r = _Row.at(doc["rank_agreement"][i], where, "rank_agreement", i, ".")
            ranks.append(RankAgreement(r("published_budget", _int), r("rerun_budget", _int),
                                       Interval.read(r, "tau", "lo", "hi"),
                                       r("published_ranking", _STRS, ()),
                                       r("rerun_ranking", _STRS, ())))
        mapping = []
        for i in range(len(top("mapping", _LIST, ()))):
            r = _Row.at(doc["mapping"][i], where, "mapping", i, ".")
            mapping.append((r("published"), r("rerun")))
        return cls(name=pub("name", _str, None), protocol=pub("protocol", _str, None),
                   published_budgets=pub("budgets", _INTS, ()),
                   published_unit=pub("budget_unit", _str, None), suite=rer("suite", _str, None),
                   rerun_budgets=rer("budgets", _INTS),
                   rerun_unit=rer("budget_unit", _str, None), metric=top("metric"), mapping=tuple(mapping),
                   not_rerun=top("not_rerun", _STRS, ()), caveat=top("caveat"),
                   method=top("method"), orderings=tuple(orderings), summary=tuple(summary), ranks=tuple(ranks),
                   published_suite=pub("suite", _str, None), suite_note=str((doc.get("suite_change") or {}).get("note") or ""),
                   suite_differs=(doc.get("suite_change") or {}).get("differs"))
