"""Terminal summary of an audit (rich): per-budget rankings with intervals, then orderings, inversions,
claim verdicts and checklist findings. Renders from an :class:`AuditResult` only (never recomputes)."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rlaudit.audit.checklist import supported_error_note
from rlaudit.audit.inversions import FINDINGS, NOTES
from rlaudit.audit.result import AuditResult, format_budget
from rlaudit.audit.rows import AuditRows, decision_text
from rlaudit.stats.metrics import HIGHER_IS_BETTER, METRIC_LABELS

_VERDICT_STYLE = {"holds": "green", "reversed": "red", "inconclusive": "yellow"}
_KIND_STYLE = {"confirmed": "bold red", "changed": "red"}


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if abs(x) >= 1000 or (x != 0 and abs(x) < 1e-3) else f"{x:.{digits}f}"


def _ci(point: float, lo: float, hi: float) -> str:
    return f"{_num(point)} [{_num(lo)}, {_num(hi)}]"


def _styled(decision: str, text: str) -> Text:
    """A decision's words (:func:`~rlaudit.audit.rows.decision_text`, as in every report), bold when decided."""
    return Text(text, style="yellow" if decision == "inconclusive" else "bold")


def _p(p: float | None, reps: int) -> str:
    """``p`` to 3 digits; the smallest p-value ``reps`` replicates can give, ``1 / (reps + 1)``, as ``≤ …``."""
    if p is None:
        return "-"
    return f"≤ {1 / (reps + 1):.1g}" if p <= 1.0 / (reps + 1) else f"{p:.3g}"


def render_summary(result: AuditResult, console: Console | None = None, max_rows: int = 40,
                   rows: AuditRows | None = None) -> None:
    """Print the summary of ``result`` on ``console`` (default: stdout).

    Args:
        result: the audit result.
        console: a rich console.
        max_rows: longest list printed per section; the rest is counted and left to ``audit.json``.
        rows: the typed rows of ``result`` (read from it when not given; the report model holds the same).
    """
    console = console or Console()
    typed = rows if rows is not None else AuditRows.from_dict(result.to_dict())
    s, d = result.settings, result.data
    unit = d.get("budget_unit", "")
    metric = s["metric"]
    mlabel = METRIC_LABELS.get(metric, metric)
    src = result.source.get("title") or result.source.get("path") or "scores"
    console.print(Text(f"rlaudit audit — {src}", style="bold"))
    console.print(Text(f"{len(d['algorithms'])} algorithms x {len(d['tasks'])} tasks x {len(result.budgets)} "
                  f"budget(s) ({unit}); scores: {d.get('score_kind')}, normalisation: {d.get('normalization')}"))
    # two lines, each short enough for a 140-column console: one wrapped line ended in a dangling "; "
    console.print(Text(f"deciding metric {mlabel}; {s['reps']} bootstrap replicates, seed {s['seed']}; "
                  f"{s['correction']} correction, family-wise alpha {s['alpha']:g} over "
                  f"{s.get('n_tests', len(result.orderings))} test(s) ({len(result.orderings)} orderings, "
                  f"{len(result.changes)} changes)"))
    console.print(Text(f"intervals on aggregates at {100 * s['confidence']:g}% ({s['interval_method']}); "
                       f"other metrics: point estimates (intervals in audit.json)"))
    note = supported_error_note(s)
    if note:
        console.print(Text("measured error rates: " + note.removeprefix("; "), style="yellow"))

    for f in typed.checklist:  # an incomplete sweep qualifies everything below it: say so before any of it
        if f.id == "incomplete-sweep":
            console.print(Text(f"[{f.severity}] ", style="yellow") + Text(f.message))
    gone = (getattr(result, "learning", None) or {}).get("nothing_learned") or []
    if gone:  # orderings on these cells compare play at random level
        cells = ", ".join(f"{c['task']} at {format_budget(c['budget'])}" for c in gone)
        console.print(Text("[warning] ", style="yellow") + Text(f"nothing learned yet (no algorithm's per-task interval "
                                                                f"above the random policy's score): {cells}"))

    agg = typed.aggregate_index()
    rank1 = {(r.budget, r.algorithm): r.probs[0] for r in typed.rank_distribution if r.metric == metric and r.probs}
    metrics = s["metrics"]
    higher = HIGHER_IS_BETTER.get(metric, True)
    by_budget = defaultdict(list)
    for o in typed.orderings:
        by_budget[o.budget].append(o)
    for budget in result.budgets:
        algs = sorted(d["algorithms"], key=lambda a: agg[(budget, a, metric)].point, reverse=higher)
        table = Table(title=f"budget {format_budget(budget)} {unit}: ranking by {mlabel}", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("algorithm")
        table.add_column(f"{mlabel} [{100 * s['confidence']:g}% CI]", justify="right", style="bold")
        others = [m for m in metrics if m != metric]
        for m in others:
            table.add_column(METRIC_LABELS.get(m, m), justify="right")
        table.add_column("P(rank 1)", justify="right")
        for i, a in enumerate(algs, 1):
            main = agg[(budget, a, metric)]
            table.add_row(str(i), Text(a), _ci(main.point, main.lo, main.hi),
                          *[_num(agg[(budget, a, m)].point) for m in others], _num(rank1.get((budget, a))))
        console.print(table)
        at_budget = by_budget[budget]
        if at_budget:
            t = Table(title=f"budget {format_budget(budget)}: orderings ({mlabel} difference, interval at the "
                            f"corrected level)", title_justify="left")
            for col, just in (("pair", "left"), ("a - b [CI]", "right"), ("p adj.", "right"),
                              ("decision", "left"), ("P(a > b) [CI]", "right"), ("runs needed", "right")):
                t.add_column(col, justify=just)
            shown = sorted(at_budget, key=lambda o: 1.0 if o.p_adjusted is None else o.p_adjusted)
            for o in shown[:max_rows]:
                t.add_row(Text(f"{o.a} vs {o.b}"), _ci(o.diff.point, o.diff.lo, o.diff.hi),
                          _p(o.p_adjusted, s["reps"]), _styled(o.decision, o.decision_text()),
                          _ci(o.p_improvement.point, o.p_improvement.lo, o.p_improvement.hi),
                          o.runs_needed_text(s["runs_needed_cap"]))
            console.print(t)
            if len(shown) > max_rows:
                console.print(Text(f"  … {len(shown) - max_rows} more pairs in audit.json"))

    console.print(Text("Inversions and tested changes between budgets", style="bold"))
    counts = defaultdict(int)
    for inv in typed.inversions:
        counts[inv.kind] += 1
    found = [i for i in typed.inversions if i.kind in FINDINGS]
    if len(result.budgets) < 2:
        console.print(Text("  one budget audited: no inversions to look for"))
    elif not found:
        console.print(Text("  none found: no ordering is decided both ways and no change test rejects"))
    else:
        console.print(Text("  " + ", ".join(f"{counts[k]} {k}" for k in FINDINGS) + " (error-controlled)"))
        t = Table(show_header=True)
        for col in ("kind", "pair", "low budget", "decision", "high budget", "decision"):
            t.add_column(col)
        invs = sorted(found, key=lambda r: (FINDINGS.index(r.kind), r.a, r.b, r.budget_low))
        for inv in invs[:max_rows]:
            pair = (inv.a, inv.b)
            t.add_row(Text(inv.kind, style=_KIND_STYLE[inv.kind]), Text(f"{inv.a} vs {inv.b}"),
                      format_budget(inv.budget_low), _styled(inv.decision_low, decision_text(inv.decision_low, *pair)),
                      format_budget(inv.budget_high),
                      _styled(inv.decision_high, decision_text(inv.decision_high, *pair)))
        console.print(t)
        if len(invs) > max_rows:
            console.print(Text(f"  … {len(invs) - max_rows} more in audit.json"))
    if any(counts[k] for k in NOTES):
        console.print(Text(f"  notes (descriptive, not findings): {counts['decided_once']} decided at one budget "
                           f"only, {counts['unconfirmed']} with point estimates that swap", style="dim"))
    for c in typed.crossovers[:max_rows]:
        console.print(Text(f"  crossover: {decision_text(c.before, c.a, c.b)} up to "
                           f"{format_budget(c.last_budget_before)}, {decision_text(c.after, c.a, c.b)} from "
                           f"{format_budget(c.first_budget_after)} {unit}"))

    if typed.metric_sensitivity:
        console.print(Text("Metric sensitivity (decisions differ between metrics)", style="bold"))
        sens = sorted(typed.metric_sensitivity, key=lambda r: (r.kind != "opposed", r.budget))
        for r in sens[:max_rows]:
            ds = ", ".join(f"{METRIC_LABELS.get(m, m)}: {r.decision_text(m)}" for m in r.decisions)
            console.print(Text(f"  [{r.kind}] budget {format_budget(r.budget)}, {r.a} vs {r.b}: {ds}"))
        if len(sens) > max_rows:
            console.print(Text(f"  … {len(sens) - max_rows} more in audit.json"))

    if typed.claims:
        t = Table(title="Claims", title_justify="left")
        for col in ("claim", "metric", "per budget", "overall"):
            t.add_column(col)
        for c in typed.claims:
            per = Text()
            for i, p in enumerate(c.per_budget):
                if i:
                    per.append(", ")
                per.append(f"{format_budget(p.budget)}: {p.verdict}", style=_VERDICT_STYLE[p.verdict])
            t.add_row(Text(c.text), METRIC_LABELS.get(c.metric, c.metric), per, Text(c.overall_text(format_budget)))
        console.print(t)

    console.print(Text("Checklist", style="bold"))
    if not typed.checklist:
        console.print(Text("  no findings"))
    for f in typed.checklist:
        style = "yellow" if f.severity == "warning" else "cyan"
        console.print(Text(f"  [{f.severity}] ", style=style) + Text(f.message))
        if f.advice:
            console.print(Text(f"      {f.advice}", style="dim"))
