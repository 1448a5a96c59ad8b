"""Leaf pieces of the report model, shared by :mod:`rlaudit.report.model` and the sections built beside it
(:mod:`rlaudit.report.agreement`, :mod:`rlaudit.report.answer`): number formatting, metric names and the
verdict line."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlaudit.stats.metrics import METRIC_LABELS


def metric_name(metric: str) -> str:
    """``"iqm" -> "IQM"``."""
    return METRIC_LABELS.get(metric, metric)


def join_words(items) -> str:
    """``["a", "b", "c"] -> "a, b and c"``."""
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def format_number(x: float | None) -> str:
    """Format a score or metric with precision adapted to its magnitude (``None``/NaN -> ``"–"``)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    return f"{x:.3f}"


def format_interval(point: float | None, lo: float | None, hi: float | None) -> str:
    """``"0.412 [0.371, 0.450]"``."""
    return f"{format_number(point)} [{format_number(lo)}, {format_number(hi)}]"


def format_p(p: float | None) -> str:
    """A p-value or probability: ``"<0.001"`` below 0.001, three decimals otherwise."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


@dataclass(frozen=True)
class Finding:
    """One line of the verdict, most important first."""

    kind: str
    """``inversion``, ``claim-reversed``, ``claim-inconclusive``, ``undecided``, ``claim-holds``, ``checklist``, ``info``."""
    text: str
    severity: str = "info"
    """``critical`` (changes the conclusion), ``warning`` or ``info``."""
