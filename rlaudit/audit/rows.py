"""Typed rows of ``audit.json``: one ``from_dict`` per row kind, read by the terminal summary and the report.

``AuditResult`` keeps the document's rows as plain dicts (it round-trips through JSON unchanged); code that
*reads* rows goes through these classes, so a key is named in one place and a malformed document fails with
one line naming the row (``audit.json: orderings[3] lacks key 'decision'``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlaudit.audit.orderings import DECISIONS
from rlaudit.errors import InputError


def _float(x) -> float | None:
    return None if x is None else float(x)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (``None`` where ``audit.json`` has ``null``)."""

    point: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def from_keys(cls, row: dict, point: str, lo: str, hi: str) -> Interval:
        """The interval stored under three keys of ``row``."""
        return cls(_float(row.get(point)), _float(row.get(lo)), _float(row.get(hi)))


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

    @classmethod
    def from_dict(cls, row: dict, where: str = "audit.json", index: int = 0, metric: str = "iqm") -> Ordering:
        """Read one ``orderings`` row; ``metric`` is the default for rows without one.

        Raises:
            InputError: a missing key or an unknown decision, naming ``where: orderings[index]``.
        """
        try:
            rng = row.get("runs_needed_range")
            out = cls(
                budget=int(row["budget"]), a=str(row["a"]), b=str(row["b"]), metric=str(row.get("metric", metric)),
                decision=str(row["decision"]), diff=Interval.from_keys(row, "diff_point", "diff_lo", "diff_hi"),
                p_value=_float(row.get("p_value")), p_adjusted=_float(row.get("p_adjusted")),
                p_improvement=Interval.from_keys(row, "p_improvement", "p_improvement_lo", "p_improvement_hi"),
                runs_needed=None if row.get("runs_needed") is None else int(row["runs_needed"]),
                runs_needed_capped=bool(row.get("runs_needed_capped", False)),
                runs_needed_range=None if not rng else (int(rng[0]), None if rng[1] is None else int(rng[1])))
        except KeyError as exc:
            raise InputError(f"{where}: orderings[{index}] lacks key {exc.args[0]!r}") from None
        if out.decision not in DECISIONS:
            raise InputError(f"{where}: orderings[{index}].decision is {row['decision']!r}, expected "
                             "'a>b', 'b>a' or 'inconclusive'")
        return out

    @property
    def winner(self) -> str | None:
        """The better algorithm, or ``None`` when inconclusive."""
        return {"a>b": self.a, "b>a": self.b}.get(self.decision)

    def decision_text(self) -> str:
        """``"A > B"``, ``"B > A"`` or ``"inconclusive"``."""
        if self.decision == "a>b":
            return f"{self.a} > {self.b}"
        if self.decision == "b>a":
            return f"{self.b} > {self.a}"
        return "inconclusive"

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
