"""Claims ("Rainbow outperforms DQN") and their verdict at each audited budget.

A claims file is TOML with one ``[[claims]]`` table per statement::

    [[claims]]
    better = "Rainbow"
    worse = "DQN"
    metric = "iqm"                 # optional (default: the audit's metric)
    budgets = [200_000_000]        # optional (default: every audited budget)
    text = "Rainbow outperforms DQN"   # optional: the statement as made
    source = "Hessel et al. (2018)"    # optional

The same tables may sit in a protocol file. Each claim gets a verdict per budget from the audit's
(error-controlled) ordering of ``better`` vs ``worse``: ``holds`` (decided in the claimed direction),
``reversed`` (decided in the opposite direction) or ``inconclusive``; and one overall verdict.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlaudit.errors import InputError, did_you_mean
from rlaudit.io import loads_nested
from rlaudit.stats.metrics import METRICS

CLAIM_KEYS: tuple[str, ...] = ("better", "worse", "metric", "budgets", "text", "source")
"""Keys a ``[[claims]]`` table may hold."""

VERDICTS: tuple[str, ...] = ("holds", "reversed", "inconclusive")


@dataclass(frozen=True)
class Claim:
    """One stated ordering: ``better`` outperforms ``worse``."""

    better: str
    """Algorithm claimed to be better."""
    worse: str
    """Algorithm claimed to be worse."""
    metric: str | None = None
    """Metric of the claim (``None``: the audit's metric)."""
    budgets: tuple[int, ...] | None = None
    """Budgets at which the claim is checked (``None``: every audited budget)."""
    text: str = ""
    """The statement as made (default ``"<better> > <worse>"``)."""
    source: str = ""
    """Where the claim was made (paper, protocol file)."""
    where: str = ""
    """Where the claim was read (``file: claims[i]``), used in error messages."""

    @property
    def label(self) -> str:
        """The statement as made, or ``"better > worse"``."""
        return self.text or f"{self.better} > {self.worse}"


def parse_claims(items: Sequence[dict], where: str) -> tuple[Claim, ...]:
    """Validate raw ``[[claims]]`` tables and return :class:`Claim` objects.

    Args:
        items: the tables, as read from TOML (a ``where`` key, if present, overrides the location).
        where: file (and section) the tables come from, for error messages.

    Raises:
        InputError: naming the file, the claim index and the field for every malformed claim.
    """
    if not isinstance(items, (list, tuple)):
        raise InputError(f"{where}: 'claims' must be an array of tables ([[claims]])")
    claims = []
    for i, item in enumerate(items):
        at = f"{where}: claims[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{at}: expected a table with 'better' and 'worse'")
        item = dict(item)
        at = str(item.pop("where", at))
        for key in item:
            if key not in CLAIM_KEYS:
                raise InputError(f"{at}: unknown field {key!r}{did_you_mean(key, CLAIM_KEYS)}; "
                                 f"expected {', '.join(CLAIM_KEYS)}")
        for key in ("better", "worse"):
            value = item.get(key)
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{at}: field {key!r} must be an algorithm name (a non-empty string)")
        if item["better"] == item["worse"]:
            raise InputError(f"{at}: 'better' and 'worse' are the same algorithm {item['better']!r}")
        metric = item.get("metric")
        if metric is not None and metric not in METRICS:
            raise InputError(f"{at}: field 'metric' is {metric!r}{did_you_mean(str(metric), METRICS)}; "
                             f"expected one of {', '.join(METRICS)}")
        budgets = item.get("budgets")
        if budgets is not None:
            if isinstance(budgets, int) and not isinstance(budgets, bool):
                budgets = [budgets]
            if (not isinstance(budgets, list) or not budgets
                    or not all(isinstance(b, int) and not isinstance(b, bool) for b in budgets)):
                raise InputError(f"{at}: field 'budgets' must be a non-empty list of integers")
            budgets = tuple(sorted(set(budgets)))
        for key in ("text", "source"):
            if key in item and not isinstance(item[key], str):
                raise InputError(f"{at}: field {key!r} must be a string")
        _check_text_names(item, at)
        claims.append(Claim(better=item["better"], worse=item["worse"], metric=metric, budgets=budgets,
                            text=item.get("text", ""), source=item.get("source", ""), where=at))
    return tuple(claims)


def _check_text_names(item: dict, at: str) -> None:
    """A claim's ``text`` names both algorithms as ``better`` and ``worse`` do (their labels), so one algorithm
    never appears under two names in a report ("QR-DQN" in the claim, "Quantile (JAX)" in every table)."""
    text = item.get("text") or ""
    for key in ("better", "worse") if text else ():
        if item[key].casefold() not in text.casefold():
            raise InputError(f"{at}: field 'text' ({text!r}) does not name {item[key]!r}, the algorithm in {key!r}; "
                             f"name both algorithms by their labels in 'text' (or leave 'text' out: it defaults "
                             f"to '{item['better']} > {item['worse']}')")


def load_claims_file(path: str | os.PathLike) -> tuple[Claim, ...]:
    """Read a TOML claims file (``[[claims]]`` tables) and validate it.

    Raises:
        InputError: when the file is missing, not TOML, has no claims, or a claim is malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such claims file")
    try:
        doc = loads_nested(tomllib.loads, path.read_text(encoding="utf-8-sig"), str(path))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(f"{path}: cannot read claims file ({exc})") from None
    for key in doc:
        if key != "claims":
            raise InputError(f"{path}: unknown top-level key {key!r}{did_you_mean(key, ['claims'])}; "
                             f"a claims file holds [[claims]] tables only")
    if not doc.get("claims"):
        raise InputError(f"{path}: no [[claims]] tables found")
    return parse_claims(doc["claims"], str(path))


def check_claims(claims: Iterable[Claim], algorithms: Sequence[str], budgets: Sequence[int],
                 budget_unit: str = "") -> None:
    """Raise :class:`InputError` when a claim names an algorithm or budget the audit does not have."""
    for claim in claims:
        for key in ("better", "worse"):
            name = getattr(claim, key)
            if name not in algorithms:
                raise InputError(f"{claim.where}: unknown algorithm {name!r} in {key!r}"
                                 f"{did_you_mean(name, algorithms)}; algorithms in the scores: "
                                 f"{', '.join(algorithms)}")
        for b in claim.budgets or ():
            if b not in budgets:
                raise InputError(f"{claim.where}: budget {b} is not audited; audited budgets"
                                 f"{' (' + budget_unit + ')' if budget_unit else ''}: "
                                 f"{', '.join(str(x) for x in budgets)}")


def verdict(decision: str) -> str:
    """Per-budget verdict from the decision of ``better`` vs ``worse`` (``"a>b"`` = better wins)."""
    return {"a>b": "holds", "b>a": "reversed"}.get(decision, "inconclusive")


def claim_status(verdicts: Sequence[str]) -> str:
    """One word for a claim over its budgets, in the per-budget vocabulary (:data:`VERDICTS`): ``holds`` at
    every budget, ``reversed`` at some budget, else ``inconclusive``."""
    if verdicts and all(v == "holds" for v in verdicts):
        return "holds"
    if any(v == "reversed" for v in verdicts):
        return "reversed"
    return "inconclusive"


def overall_verdict(per_budget: Sequence[tuple[int, str]], budget_format: Callable[[int], str] = str) -> str:
    """Overall verdict from ``(budget, verdict)`` pairs, budgets ascending.

    Args:
        per_budget: ``(budget, verdict)`` pairs.
        budget_format: how budgets are written (``audit.json`` uses plain integers).

    Returns:
        ``"holds at all budgets"``, ``"holds only at B1, B2"``, ``"reversed at all budgets"``,
        ``"reversed at B1"``, ``"mixed: holds at B1, reversed at B2"`` or ``"never decided"``.
    """
    holds = [b for b, v in per_budget if v == "holds"]
    reversed_ = [b for b, v in per_budget if v == "reversed"]
    fmt = lambda bs: ", ".join(budget_format(b) for b in bs)  # noqa: E731
    if holds and reversed_:
        return f"mixed: holds at {fmt(holds)}, reversed at {fmt(reversed_)}"
    if holds:
        return "holds at all budgets" if len(holds) == len(per_budget) else f"holds only at {fmt(holds)}"
    if reversed_:
        return "reversed at all budgets" if len(reversed_) == len(per_budget) else f"reversed at {fmt(reversed_)}"
    return "never decided"


def evaluate_claim(claim: Claim, budgets: Sequence[int], metric: str,
                   lookup: Callable[[int, str, str, str], dict]) -> dict:
    """Verdicts of one claim.

    Args:
        claim: the claim.
        budgets: audited budgets (used when the claim names none), ascending.
        metric: the audit's deciding metric (used when the claim names none).
        lookup: ``lookup(budget, better, worse, metric)`` -> dict with ``decision`` (``"a>b"`` means
            ``better`` wins), ``diff_point``, ``diff_lo``, ``diff_hi`` (``metric(better) - metric(worse)``).

    Returns:
        The claim's ``audit.json`` entry.
    """
    metric = claim.metric or metric
    rows = []
    for b in claim.budgets or budgets:
        o = lookup(b, claim.better, claim.worse, metric)
        rows.append({"budget": int(b), "verdict": verdict(o["decision"]), "decision": o["decision"],
                     "diff_point": o["diff_point"], "diff_lo": o["diff_lo"], "diff_hi": o["diff_hi"]})
    return {"text": claim.label, "better": claim.better, "worse": claim.worse, "metric": metric,
            "budgets": [r["budget"] for r in rows], "source": claim.source or claim.where,
            "per_budget": rows, "overall": overall_verdict([(r["budget"], r["verdict"]) for r in rows])}
