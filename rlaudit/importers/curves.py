"""Per-seed learning curves (DreamerV3 ``scores/*.json.gz``) and the resampling rule shared with Dopamine.

Format: a JSON array (often gzipped) of runs ``{"task", "method", "seed", "xs", "ys"}``; ``xs`` ascending
environment steps (frames for Atari), ``ys`` episode scores, possibly ``null``/``NaN``. Runs have
different x grids, so each run is *read at* the requested budgets:

- ``rule="last"`` (default): the score at budget ``B`` is the last finite point with ``x <= B``, provided it
  is at most ``max_staleness`` before ``B`` (default: 5% of ``B``). Never looks into the future.
- ``rule="linear"``: linear interpolation between the finite points bracketing ``B`` (an exact hit is
  taken as is); no extrapolation, so ``B`` beyond a run's last point is missing.

A run that yields nothing at a budget (it stops too early, starts too late, or its last point is too
stale) is left out at that budget and reported in ``meta.notes``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError
from rlaudit.importers._common import (check_options, check_record, expand, load_json, opt_budgets, opt_int, track,
                                       type_name)
from rlaudit.io import has_suffix
from rlaudit.scores import ScoreMeta, ScoreTable

RULES = ("last", "linear")
DEFAULT_RELATIVE_STALENESS = 0.05

OPTIONS = {
    "budgets": "budgets to read the curves at (default: 25/50/75/100% of the median run length)",
    "rule": "resampling rule: last (last point at or before the budget) or linear",
    "max_staleness": "'last' rule: how far before the budget the last point may be (default 5% of the budget)",
    "algorithm": "algorithm name (default: the 'method' field)",
    "budget_unit": "unit of xs (default: frames when every task starts with 'atari', else env_steps)",
}
RUN_KEYS = ("task", "method", "seed", "xs", "ys")


def resample(xs: np.ndarray, ys: np.ndarray, budgets: np.ndarray, rule: str = "last",
             max_staleness: float | None = None) -> np.ndarray:
    """Read one run at ``budgets``.

    Args:
        xs: shape ``(n_points,)``, non-decreasing x values (steps).
        ys: shape ``(n_points,)``, scores; non-finite entries are ignored.
        budgets: shape ``(n_budgets,)``, budgets to read at.
        rule: ``"last"`` or ``"linear"`` (see the module docstring).
        max_staleness: ``"last"`` rule only; ``None`` = 5% of each budget.

    Returns:
        Shape ``(n_budgets,)``: the score at each budget, ``NaN`` where the run yields none.
    """
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    budgets = np.asarray(budgets, dtype=np.float64)
    keep = np.isfinite(ys) & np.isfinite(xs)
    xs, ys = xs[keep], ys[keep]
    out = np.full(budgets.shape, np.nan)
    if xs.size == 0:
        return out
    if rule == "last":
        idx = np.searchsorted(xs, budgets, side="right") - 1
        ok = idx >= 0
        stale = DEFAULT_RELATIVE_STALENESS * budgets if max_staleness is None else np.full(budgets.shape,
                                                                                            float(max_staleness))
        ok &= (budgets - xs[np.clip(idx, 0, None)]) <= stale
        out[ok] = ys[idx[ok]]
        return out
    if rule == "linear":
        inside = (budgets >= xs[0]) & (budgets <= xs[-1])
        hi = np.clip(np.searchsorted(xs, budgets, side="left"), 0, xs.size - 1)
        lo = np.clip(hi - 1, 0, None)
        exact = xs[hi] == budgets
        span = xs[hi] - xs[lo]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(span > 0, (budgets - xs[lo]) / np.where(span > 0, span, 1.0), 1.0)
        vals = np.where(exact, ys[hi], ys[lo] + w * (ys[hi] - ys[lo]))
        out[inside] = vals[inside]
        return out
    raise InputError(f"resampling rule {rule!r} is not one of {', '.join(RULES)}")


def resample_rule_note(rule: str, max_staleness: int | None, unit: str) -> str:
    """One-line description of the resampling rule for ``meta.notes``."""
    if rule == "linear":
        return "resampling: linear interpolation between the points bracketing each budget, no extrapolation"
    stale = "5% of the budget" if max_staleness is None else f"{max_staleness:,} {unit}"
    return f"resampling: last point at or before each budget, at most {stale} before it"


def default_budgets(final_xs: list[float]) -> list[int]:
    """25/50/75/100% of the median final x, each rounded down to two significant digits."""
    med = float(np.median(final_xs))
    out = []
    for frac in (0.25, 0.5, 0.75, 1.0):
        v = med * frac
        if v <= 0:
            continue
        scale = 10 ** max(int(math.floor(math.log10(v))) - 1, 0)
        out.append(int(v // scale * scale))
    return sorted(set(out)) or [0]


def import_curves(paths: list[Path], **options) -> ScoreTable:
    """Import DreamerV3-style per-seed curves, read at budgets by the documented rule.

    Args:
        paths: files (``.json``/``.json.gz``) or folders holding them.
        **options: see :data:`OPTIONS`.

    Returns:
        A table with one row per (method, task, seed, budget) that the rule yields.
    """
    check_options(options, OPTIONS, "curves importer")
    rule = options.get("rule", "last")
    if rule not in RULES:
        raise InputError(f"curves importer: option 'rule' must be one of {', '.join(RULES)}, got {rule!r}")
    max_staleness = opt_int(options, "max_staleness", None, "curves importer", minimum=0)
    budgets = opt_budgets(options, "budgets", "curves importer")
    files = expand(paths, lambda f: has_suffix(f, ".json", ".json.gz"), "curve files (.json, .json.gz)")

    runs = []  # (where, algorithm, task, seed, xs, ys)
    seen: dict[tuple, str] = {}
    for path in track(files, "importing curves", min_items=5):
        data = load_json(path)
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON array of runs {{task, method, seed, xs, ys}}, "
                             f"got a {type_name(data)}")
        if not data:
            raise InputError(f"{path}: the array of runs is empty")
        for i, run in enumerate(data):
            where = f"{path}: run #{i}"
            check_record(run, RUN_KEYS, where, "{task, method, seed, xs, ys}")
            task, method, seed = run["task"], options.get("algorithm") or run["method"], run["seed"]
            if not isinstance(task, str) or not task:
                raise InputError(f"{where}: 'task' must be a non-empty string, got {task!r}")
            if not isinstance(method, str) or not method:
                raise InputError(f"{where}: 'method' must be a non-empty string, got {method!r}")
            if not isinstance(seed, (int, str)) or isinstance(seed, bool):
                raise InputError(f"{where}: 'seed' must be an integer or a string, got {type_name(seed)}")
            where = f"{path}: run #{i} (task {task}, seed {seed})"
            xs, ys = _numbers(run["xs"], f"{where}: 'xs'"), _numbers(run["ys"], f"{where}: 'ys'")
            if xs.size != ys.size:
                raise InputError(f"{where}: 'xs' has {xs.size} values but 'ys' has {ys.size}")
            if xs.size == 0:
                raise InputError(f"{where}: the curve has no points")
            if not np.all(np.isfinite(xs)):
                raise InputError(f"{where}: 'xs' holds a null or NaN at position {int(np.argmin(np.isfinite(xs)))}")
            if np.any(np.diff(xs) < 0):
                raise InputError(f"{where}: 'xs' is not ascending at position {int(np.argmax(np.diff(xs) < 0)) + 1}")
            if not np.any(np.isfinite(ys)):
                raise InputError(f"{where}: all {ys.size} values of 'ys' are NaN or null")
            key = (method, task, str(seed))
            if key in seen:
                raise InputError(f"{where}: duplicate run (also {seen[key]})")
            seen[key] = where
            runs.append((where, method, task, str(seed), xs, ys))

    tasks = {r[2] for r in runs}
    unit = options.get("budget_unit") or ("frames" if all(t.startswith("atari") for t in tasks) else "env_steps")
    if budgets is None:
        budgets = default_budgets([float(r[4][np.isfinite(r[5])][-1]) for r in runs])
    frame, notes = read_runs_at([r[1:] for r in runs], budgets, rule, max_staleness, unit)
    if frame.empty:
        raise InputError(f"{files[0]}: no run yields a score at any budget "
                         f"{', '.join(f'{x:,}' for x in budgets)} under the {rule!r} rule")
    meta = ScoreMeta(budget_unit=unit, score_kind="eval", source=", ".join(str(p) for p in paths),
                     notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(files[0]), line_offset=1)


def nearest_gap(xs: np.ndarray, ys: np.ndarray, budgets: np.ndarray, rule: str = "last") -> np.ndarray:
    """How far the recorded point(s) a rule reads are from each budget.

    Args:
        xs, ys: shape ``(n_points,)``, as for :func:`resample`.
        budgets: shape ``(n_budgets,)``.
        rule: ``"last"``: budget minus the last finite point at or before it; ``"linear"``: distance to the
            nearer of the two bracketing finite points.

    Returns:
        Shape ``(n_budgets,)``, ``NaN`` where no point qualifies (read :func:`resample` for whether it is used).
    """
    xs = np.asarray(xs, dtype=np.float64)[np.isfinite(np.asarray(ys, dtype=np.float64))]
    budgets = np.asarray(budgets, dtype=np.float64)
    out = np.full(budgets.shape, np.nan)
    if xs.size == 0:
        return out
    idx = np.searchsorted(xs, budgets, side="right") - 1
    before = np.where(idx >= 0, budgets - xs[np.clip(idx, 0, None)], np.nan)
    if rule == "last":
        return before
    after = np.where(idx + 1 < xs.size, xs[np.clip(idx + 1, None, xs.size - 1)] - budgets, np.nan)
    return np.fmin(before, after)


def read_runs_at(runs: list[tuple], budgets: list[int], rule: str, max_staleness: int | None,
                 unit: str) -> tuple[pd.DataFrame, list[str]]:
    """Read runs at ``budgets`` by ``rule``; return the tidy rows and the notes a reader needs.

    Args:
        runs: ``(algorithm, task, run, xs, ys)`` per run; ``xs``/``ys`` of shape ``(n_points,)``, ``ys``
            possibly ``NaN`` (a missing value).
        budgets, rule, max_staleness: as for :func:`resample`.
        unit: budget unit, for the notes.

    Returns:
        ``(frame, notes)``: one row per (algorithm, task, run, budget) the rule yields; notes say the rule, the
        missing values skipped per algorithm, per algorithm and budget how far the recorded points read were
        from the budget (median and maximum over runs), and the runs that yield nothing at a budget.
    """
    b = np.asarray(budgets, dtype=np.float64)
    rows: list[tuple] = []
    short: dict[int, list[str]] = {}
    n_missing: dict[str, list[int]] = {}
    gaps: dict[str, list[np.ndarray]] = {}
    for method, task, seed, xs, ys in runs:
        vals = resample(xs, ys, b, rule, max_staleness)
        gap = nearest_gap(xs, ys, b, rule)
        gaps.setdefault(method, []).append(np.where(np.isnan(vals), np.nan, gap))
        missing = int(np.count_nonzero(~np.isfinite(np.asarray(ys, dtype=np.float64))))
        count = n_missing.setdefault(method, [0, 0])
        count[0] += missing
        count[1] += bool(missing)
        for budget, v in zip(budgets, vals):
            if np.isnan(v):
                short.setdefault(budget, []).append(f"{method}/{task}/seed {seed}")
            else:
                rows.append((method, task, seed, budget, float(v)))
    notes = [resample_rule_note(rule, max_staleness, unit)]
    for method, (n_values, n_runs) in n_missing.items():
        if n_values:
            notes.append(f"{method}: {n_values:,} missing values (null/NaN) in {n_runs} run(s) skipped by the rule")
    for method, per_run in gaps.items():
        g = np.vstack(per_run)
        parts = []
        for j, budget in enumerate(budgets):
            col = g[:, j][np.isfinite(g[:, j])]
            if col.size:
                parts.append(f"{budget:,}: median {float(np.median(col)):,.0f}, max {float(col.max()):,.0f}")
        if parts:
            notes.append(f"{method}: distance from each budget to the recorded point read ({unit}; "
                         f"{'last point at or before' if rule == 'last' else 'nearer bracketing point'}): "
                         + "; ".join(parts))
    for budget in budgets:
        if budget in short:
            names = short[budget]
            notes.append(f"{len(names)} run(s) yield no score at budget {budget:,}: {', '.join(names[:5])}"
                         + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    frame = pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"])
    return frame, notes


def _numbers(values, where: str) -> np.ndarray:
    """JSON array of numbers / null -> float array (null -> NaN); anything else raises."""
    if not isinstance(values, list):
        raise InputError(f"{where} must be an array of numbers, got a {type_name(values)}")
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        for j, v in enumerate(values):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InputError(f"{where}: position {j} holds a {type_name(v)} ({v!r}), expected a number") from None
        raise InputError(f"{where}: not an array of numbers") from None
