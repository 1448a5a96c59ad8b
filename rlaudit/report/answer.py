"""The answer a report of several budgets leads with: does the comparison's conclusion hold at another budget?

Five lines, in this order, each read from ``audit.json`` (nothing is recomputed): the orderings that change
between the audited budgets (confirmed inversions and tested changes, with their crossover budgets, and what the
design can detect when the sweep has measured it: :mod:`rlaudit.audit.design_power`); the
published orderings at each rerun budget (a joined audit, suite change stated); where nothing has learned yet;
the declared settings deviations; the runs per task that would decide each undecided pair. A line whose input
the audit does not have (no published side, no random-policy reference, no declared source) is left out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rlaudit.audit.design_power import power_sentence, read_note
from rlaudit.audit.rows import decision_text
from rlaudit.report.parts import join_words, metric_name

SHOWN = 6
"""Pairs named in the runs-to-decide line; the rest are counted (the full table is in section 8)."""


@dataclass(frozen=True)
class AnswerLine:
    """One line of the answer: a short heading and what the audit says."""

    heading: str
    text: str


def build_answer(r) -> tuple[AnswerLine, ...]:
    """The answer of the report model ``r`` (:class:`rlaudit.report.model.Report`); empty with one budget."""
    if len(r.budgets) < 2:
        return ()
    lines = [_between_budgets(r), _published(r), _learned(r), _settings(r), _runs_to_decide(r)]
    return tuple(line for line in lines if line is not None)


def _between_budgets(r) -> AnswerLine:
    on = f" on {r.rerun_suite}" if r.rerun_suite else ""
    span = f"{r.budget(r.budgets[0])} to {r.budget(r.budgets[-1])} {r.unit}, {metric_name(r.metric)}"
    heading = f"Orderings that change between budgets{on}"
    pairs = _by_pair(i for i in r.inversions if i.metric == r.metric and i.kind in ("confirmed", "changed"))
    inversions, changes = [], []
    for (a, b), invs in pairs.items():
        if any(i.kind == "confirmed" for i in invs):
            crossings = [c for c in r.crossovers if c.metric == r.metric and {c.a, c.b} == {a, b}]
            steps = [f"{decision_text(c.before, c.a, c.b)} up to {r.budget(c.last_budget_before)}, "
                     f"{decision_text(c.after, c.a, c.b)} from {r.budget(c.first_budget_after)} (crossover between "
                     f"{r.budget(c.last_budget_before)} and {r.budget(c.first_budget_after)})" for c in crossings]
            steps = steps or [f"{decision_text(i.decision_low, a, b)} at {r.budget(i.budget_low)}, "
                              f"{decision_text(i.decision_high, a, b)} at {r.budget(i.budget_high)}"
                              for i in invs if i.kind == "confirmed"]
            inversions.append("; ".join(steps))
            continue
        widest = max(invs, key=lambda i: (i.budget_high - i.budget_low, -i.budget_low))
        lo, hi = r.ordering(widest.budget_low, a, b), r.ordering(widest.budget_high, a, b)
        gap = ""
        if lo is not None and hi is not None and lo.diff.point is not None and hi.diff.point is not None:
            gap = (f": {a} \u2212 {b} {_signed(lo, a)} at {r.budget(widest.budget_low)} \u2192 {_signed(hi, a)} at "
                   f"{r.budget(widest.budget_high)}")
        changes.append(f"{a} vs {b}{gap}")
    counts = _pair_counts(r, exclude=set(pairs))
    tail = (f"{counts['same']} decided the same way at every budget, {counts['some']} at some budgets only "
            f"(nothing tested says those changed), {counts['never']} at none")
    parts = []
    if inversions:
        parts.append(f"{len(inversions)} confirmed inversion(s): " + "; ".join(inversions))
    if changes:
        parts.append(f"{len(changes)} pair(s) whose gap changes (tested) without reversing: " + "; ".join(changes))
    power = _design_power(r)
    if not parts:
        return AnswerLine(heading, f"none ({span}, family-wise error {r.audit['settings'].get('alpha', 0.05)}): "
                                   f"of {counts['pairs']} pairs, {tail}.{power}")
    rest = f" Of the other {counts['pairs']} pairs: {tail}." if counts["pairs"] else ""
    return AnswerLine(heading, ". ".join(parts) + f" ({span}).{rest}{power}")


def _design_power(r) -> str:
    """" What this design can detect: ..." from the sweep's design-power note, at its fewest runs a task ("" when
    the audit has no such note)."""
    sentence = power_sentence(read_note(r.audit["data"].get("notes") or []), min(_run_counts(r), default=0))
    return f" What this design can detect: {sentence}." if sentence else ""


def _run_counts(r) -> list[int]:
    """The audit's runs per task (over algorithms, tasks and budgets), each count once, fewest first."""
    return sorted({int(d["n_runs"]) for d in r.audit["data"].get("design") or []})


def _signed(o, a: str) -> str:
    d = o.diff.point if o.a == a else -o.diff.point
    return f"{d:+.3f}"


def _by_pair(rows) -> dict:
    out: dict = defaultdict(list)
    for row in rows:
        out[(row.a, row.b)].append(row)
    return dict(out)


def _pair_counts(r, exclude: set) -> dict:
    """How the pairs not in ``exclude`` are decided across the budgets."""
    decisions: dict = defaultdict(dict)
    for o in r.orderings:
        if o.metric == r.metric and (o.a, o.b) not in exclude and (o.b, o.a) not in exclude:
            decisions[tuple(sorted((o.a, o.b)))][o.budget] = o.decision if o.a <= o.b else \
                {"a>b": "b>a", "b>a": "a>b"}.get(o.decision, o.decision)
    same = sum(1 for d in decisions.values()
               if len(d) == len(r.budgets) and len(set(d.values())) == 1 and "inconclusive" not in d.values())
    never = sum(1 for d in decisions.values() if set(d.values()) == {"inconclusive"})
    return {"pairs": len(decisions), "same": same, "never": never, "some": len(decisions) - same - never}


def _published(r) -> AnswerLine | None:
    a = r.agreement
    if a is None:
        return None
    reversed_at: dict = defaultdict(list)
    for row in a.rows:
        for budget, (status, _) in zip(a.rerun_budgets, row["cells"], strict=False):
            if status == "reversed":
                reversed_at[row["pair"]].append(budget)
    counts = "; ".join(f"at {s['budget']}: {s['holds']} hold, {s['reversed']} reversed, {s['inconclusive']} "
                       f"undecided" + (f", {s['not_rerun']} not rerun" if s["not_rerun"] else "") for s in a.summary)
    named = "; ".join(f"{pair} reversed at {join_words(bs)}" for pair, bs in reversed_at.items())
    suite = ""
    if a.suite_differs:
        suite = (f" The published runs are on {a.published_suite} and the rerun on {a.suite}: a reversal can come "
                 f"from the suite as well as the budget.")
    elif a.suite_differs is None:
        suite = " The published suite is not recorded, so a reversal may also come from the suite."
    return AnswerLine("Published orderings at each budget",
                      f"{a.published}: of {len(a.rows)} decided published orderings, {counts}"
                      + (f" ({named})" if named else "") + "." + suite)


def _learned(r) -> AnswerLine | None:
    learning = r.audit.get("learning") or {}
    if not learning:
        return None
    by_budget: dict = defaultdict(list)
    for c in learning.get("nothing_learned") or []:
        by_budget[int(c["budget"])].append(str(c["task"]))
    heading = "Tasks where nothing has learned yet"
    if not by_budget:
        return AnswerLine(heading, "none: at every budget every task has an algorithm whose interval lies above the "
                                   "random policy's score.")
    parts = [f"at {r.budget(b)} on {join_words(ts)}" for b, ts in sorted(by_budget.items())]
    return AnswerLine(heading, "; ".join(parts) + " (no algorithm's interval above the random policy's score; "
                                                  "orderings there compare play at random level).")


def _settings(r) -> AnswerLine | None:
    rows = r.settings_published
    if not rows:
        return None
    deviations = [row for row in rows if row.key]
    if not deviations:
        return AnswerLine("Settings vs published", f"every setting as published ({join_words(r.settings_sources)}).")
    per_key: dict = defaultdict(list)
    for row in deviations:
        per_key[row.key].append(row.algorithm)
    named = [f"{key} ({', '.join(dict.fromkeys(algos))})" for key, algos in per_key.items()]
    more = len(named) - SHOWN
    keys = join_words(named[:SHOWN] + ([f"{more} more setting(s)"] if more > 0 else []))
    return AnswerLine("Settings vs published", f"{len(deviations)} declared deviation(s) from "
                                               f"{len(r.settings_sources)} published source(s), in {len(named)} "
                                               f"setting(s): {keys} (table in section 2).")


def _runs(o) -> str:
    if o.runs_needed is None:
        return "not estimable"
    return f"> {o.runs_needed}" if o.runs_needed_capped else str(o.runs_needed)


def _runs_to_decide(r) -> AnswerLine:
    heading = "Runs per task that would decide each undecided pair"
    if not r.runs_needed:
        return AnswerLine(heading, "none: every pair is decided at every budget.")
    per_pair: dict = defaultdict(list)
    for o in r.runs_needed:  # fewest runs first
        per_pair[f"{o.a} vs {o.b}"].append(o)
    texts = []
    for pair, os in per_pair.items():
        cells = ", ".join(f"{_runs(o)} at {r.budget(o.budget)}" for o in sorted(os, key=lambda o: o.budget))
        texts.append(f"{pair}: {cells}")
    more = len(texts) - SHOWN
    shown = "; ".join(texts[:SHOWN]) + (f"; and {more} more pair(s)" if more > 0 else "")
    runs = _run_counts(r)
    now = f" (now {runs[0]}{'–' + str(runs[-1]) if len(runs) > 1 else ''} runs per task)" if runs else ""
    bounds = " (lower bounds at this run count)" if r.few_runs is not None else ""
    return AnswerLine(heading, f"{shown}{now}; estimates{bounds} and their method in section 8.")
