"""rliable score sets (the "Statistical Precipice" bucket files) and similar per-run final scores.

Accepted layouts (``layout="auto"`` picks by shape; the keys decide between the two nested ones):

- ``tasks``: ``{task: [score × runs]}``, one algorithm per file (Atari 100k ``DER.json``, ``SPR.json``, …);
  algorithm = file stem unless ``algorithm`` is given; one budget (option ``budget``).
- ``budgets``: ``{budget: {task: [...]}}`` with budget keys such as ``"100k"``/``"500k"`` (DMC).
- ``algorithms``: ``{algorithm: {task: [...]}}`` (Procgen, ALE 200M finals); one budget.
- ``records``: a JSON array of per-run objects such as ``CURL_10_evals.json``
  (``{game, seed, HNS, Max HNS}``) or ``DER/<Game>.json`` (``{iteration, eval_average_return, game,
  run_number, agent}``). The score field is ``field`` (default ``eval_average_return``, else ``HNS``);
  when it is ``HNS`` the table is marked as already human-normalised (``meta.normalized = "atari"``). An
  ``iteration`` field k is read as budget ``(k + 1) * budget_per_iteration``.

Run ids are positions in the list (``0``, ``1``, …) or the record's ``seed`` / ``run_number``. Position
*i* at two budgets is not documented to be the same run in the DMC files; only per-budget distributions
are compared downstream, which is all an audit needs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError
from rlaudit.importers._common import (check_budget, check_options, expand, is_count, load_json, opt_budgets, opt_int,
                                       parse_count, strip_suffixes, type_name)
from rlaudit.io import has_suffix
from rlaudit.scores import ScoreMeta, ScoreTable

LAYOUTS = ("auto", "tasks", "budgets", "algorithms", "records")
HNS_FIELDS = ("HNS", "Max HNS")
RECORD_TASK_KEYS = ("game", "task", "env")
RECORD_RUN_KEYS = ("seed", "run_number", "run")
RECORD_KEYS = {"game", "task", "env", "seed", "run_number", "run", "HNS", "Max HNS", "eval_average_return",
               "agent", "iteration"}

OPTIONS = {
    "layout": "auto, tasks, budgets, algorithms or records",
    "algorithm": "algorithm name (default: file stem, or the record's 'agent')",
    "budget": "budget of single-budget sets (default 0 with unit 'final': the final score, budget unspecified)",
    "budget_unit": "unit of the budget (default env_steps for budget-keyed sets, else 'final')",
    "field": "records layout: the score field (eval_average_return, HNS or Max HNS)",
    "normalized": "normalisation already applied to the scores (e.g. atari); default: atari for HNS fields",
    "budget_per_iteration": "records with an 'iteration' field: budget of one iteration (required then)",
    "budgets": "curves (records with an 'iteration' field): read each run at these budgets by the 'last' rule "
               "of the curves importer (default: every iteration)",
    "max_staleness": "with budgets: how far before a budget the last iteration may end (default: one iteration)",
}


def import_rliable(paths: list[Path], **options) -> ScoreTable:
    """Import rliable-style per-run score sets.

    Args:
        paths: ``.json`` files or folders of them (folders: every ``.json`` file directly inside,
            except ``MANIFEST``/``README`` files).
        **options: see :data:`OPTIONS`.

    Returns:
        Table with one row per (algorithm, task, run, budget).
    """
    check_options(options, OPTIONS, "rliable importer")
    layout = options.get("layout", "auto")
    if layout not in LAYOUTS:
        raise InputError(f"rliable importer: option 'layout' must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    files = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and has_suffix(f, ".json", ".json.gz"))
            if not found:
                raise InputError(f"{p}: no score set files (.json) in this folder")
            files += found
        else:
            files += expand([p], lambda f: True, "score sets")
    rows: list[tuple] = []
    normalized: dict[str, str] = {}
    units: set[str] = set()
    for path in files:
        data = load_json(path)
        file_layout = layout if layout != "auto" else _detect(data, path)
        norm, unit = _read(path, data, file_layout, options, rows)
        normalized[str(path)] = norm
        units.add(unit)
    if len(set(normalized.values())) > 1:
        raw = [k for k, v in normalized.items() if not v]
        done = [k for k, v in normalized.items() if v]
        raise InputError(f"{done[0]}: holds normalised scores ({normalized[done[0]]}) but {raw[0]} holds raw scores; "
                         "import them separately (a protocol [data] section can combine them)")
    if len(units) > 1:
        raise InputError(f"{files[0]}: files mix budget units ({', '.join(sorted(units))}); give 'budget' and "
                         "'budget_unit' or import them separately")
    frame = pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"])
    unit = units.pop()
    notes = []
    budgets = opt_budgets(options, "budgets", "rliable importer")
    if budgets is not None:
        frame, notes = _read_at(frame, budgets, options, unit, str(files[0]))
    if unit == "final":
        notes.append("final scores; the budget is not given (budget 0, unit 'final')")
    meta = ScoreMeta(budget_unit=unit, score_kind="eval", source=", ".join(str(p) for p in paths),
                     normalized=next(iter(normalized.values())), notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(files[0]), line_offset=1)


def _read_at(frame: pd.DataFrame, budgets: list[int], options: dict, unit: str,
             where: str) -> tuple[pd.DataFrame, list[str]]:
    """Curves (one row per run and iteration) read at ``budgets`` by the curves importer's 'last' rule."""
    from rlaudit.importers.curves import read_runs_at

    per_it = opt_int(options, "budget_per_iteration", None, "rliable importer", minimum=1)
    if per_it is None:
        raise InputError(f"{where}: option 'budgets' reads curves; it needs records with an 'iteration' field "
                         "and option 'budget_per_iteration'")
    stale = opt_int(options, "max_staleness", per_it, "rliable importer", minimum=0)
    runs = [(a, t, r, g["budget"].to_numpy(dtype=np.float64), g["score"].to_numpy(dtype=np.float64))
            for (a, t, r), g in frame.sort_values("budget").groupby(["algorithm", "task", "run"], sort=False)]
    out, notes = read_runs_at(runs, budgets, "last", stale, unit)
    if out.empty:
        raise InputError(f"{where}: no run yields a score at any budget {', '.join(f'{b:,}' for b in budgets)}")
    return out, notes


def _detect(data, path: Path) -> str:
    if isinstance(data, list):
        return "records"
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a JSON object {{task: [scores]}} or an array of run records, "
                         f"got {'an empty object' if isinstance(data, dict) else 'a ' + type_name(data)}")
    first_key, first = next(iter(data.items()))
    if isinstance(first, list):
        return "tasks"
    if isinstance(first, dict):
        return "budgets" if all(is_count(k) for k in data) else "algorithms"
    raise InputError(f"{path}: key {first_key!r}: expected an array of scores or an object, got a {type_name(first)}")


def _single_budget(options: dict, where: str) -> tuple[int, str]:
    budget = opt_int(options, "budget", None, where, minimum=0)
    if budget is None:
        return 0, options.get("budget_unit", "final")
    return budget, options.get("budget_unit", "env_steps")


def _read(path: Path, data, layout: str, options: dict, rows: list) -> tuple[str, str]:
    """Append rows of one file; return (normalized, budget unit)."""
    where = str(path)
    algorithm = options.get("algorithm") or strip_suffixes(path)
    if layout == "tasks":
        budget, unit = _single_budget(options, "rliable importer")
        _tasks(path, _obj(data, where, "{task: [scores]}"), algorithm, budget, rows, where)
        return options.get("normalized", ""), unit
    if layout == "budgets":
        for bkey, tasks in _obj(data, where, "{budget: {task: [scores]}}").items():
            if not is_count(bkey):
                raise InputError(f"{where}: key {bkey!r} is not a budget (expected e.g. '100k' or '500000')")
            _tasks(path, _obj(tasks, f"{where}: [{bkey!r}]", "{task: [scores]}"), algorithm,
                   parse_count(bkey, where), rows, f"{where}: [{bkey!r}]")
        return options.get("normalized", ""), options.get("budget_unit", "env_steps")
    if layout == "algorithms":
        budget, unit = _single_budget(options, "rliable importer")
        for alg, tasks in _obj(data, where, "{algorithm: {task: [scores]}}").items():
            _tasks(path, _obj(tasks, f"{where}: [{alg!r}]", "{task: [scores]}"), alg, budget, rows,
                   f"{where}: [{alg!r}]")
        return options.get("normalized", ""), unit
    if layout == "records":
        return _records(path, data, options, rows)
    raise InputError(f"{where}: unknown layout {layout!r}")


def _obj(data, where: str, shape: str) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object {shape}, got a {type_name(data)}")
    if not data:
        raise InputError(f"{where}: the object is empty, expected {shape}")
    return data


def _tasks(path: Path, tasks: dict, algorithm: str, budget: int, rows: list, where: str) -> None:
    for task, scores in tasks.items():
        if not isinstance(scores, list):
            raise InputError(f"{where}: task {task!r}: expected an array of scores, got a {type_name(scores)}")
        if not scores:
            raise InputError(f"{where}: task {task!r}: the array of scores is empty")
        for i, s in enumerate(scores):
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
                raise InputError(f"{where}: task {task!r}, run {i}: expected a finite number, got {s!r}")
            rows.append((algorithm, task, str(i), budget, float(s)))


def _records(path: Path, data, options: dict, rows: list) -> tuple[str, str]:
    where = str(path)
    if not isinstance(data, list) or not data:
        raise InputError(f"{where}: expected a non-empty JSON array of run records")
    field = options.get("field")
    if field is None:
        first = data[0] if isinstance(data[0], dict) else {}
        field = "eval_average_return" if "eval_average_return" in first else "HNS"
    per_it = opt_int(options, "budget_per_iteration", None, "rliable importer", minimum=1)
    budget, unit = _single_budget(options, "rliable importer")
    for i, rec in enumerate(data, start=1):
        w = f"{where}: record {i}"
        if not isinstance(rec, dict):
            raise InputError(f"{w}: expected an object, got a {type_name(rec)}")
        extra = sorted(set(rec) - RECORD_KEYS)
        if extra:
            raise InputError(f"{w}: unexpected key {extra[0]!r}")
        task = next((rec[k] for k in RECORD_TASK_KEYS if k in rec), None)
        run = next((rec[k] for k in RECORD_RUN_KEYS if k in rec), None)
        if not isinstance(task, str) or not task:
            raise InputError(f"{w}: needs a 'game' (or 'task') string, got {task!r}")
        if (run is None or isinstance(run, bool) or not isinstance(run, (int, float, str))
                or (isinstance(run, float) and not math.isfinite(run))):
            raise InputError(f"{w}: needs a 'seed' or 'run_number' (a number or a string), got {run!r}")
        if field not in rec:
            raise InputError(f"{w}: missing score field {field!r}")
        s = rec[field]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            raise InputError(f"{w}: {field!r} must be a finite number, got {s!r}")
        b = budget
        if "iteration" in rec:
            it = rec["iteration"]
            if isinstance(it, bool) or not isinstance(it, int) or it < 0:
                raise InputError(f"{w}: 'iteration' must be a whole number >= 0, got {it!r}")
            if per_it is None:
                raise InputError(f"{where}: records have an 'iteration' field; give option 'budget_per_iteration' "
                                 "(e.g. 10000 agent steps for the Atari 100k DER curves)")
            b = check_budget((it + 1) * per_it, w, f"(iteration {it:,} + 1) x {per_it:,}")
        alg = options.get("algorithm") or rec.get("agent") or strip_suffixes(path)
        run_id = str(int(run)) if isinstance(run, float) and run == int(run) else str(run)
        rows.append((alg, task, run_id, b, float(s)))
    if per_it is not None:
        unit = options.get("budget_unit", "agent_steps")
    normalized = options.get("normalized", "atari" if field in HNS_FIELDS else "")
    return normalized, unit
