"""Weights & Biases exports and openrlbenchmark's per-run cache, read without the ``wandb`` package.

Shapes (told apart by the header, :func:`wandb_shape`):

- **panel** (a chart's "Export CSV"): a step column first (``Step``, or the panel's x axis such as
  ``global_step``), then ``<run> - <metric>`` columns, each with ``<run> - <metric>__MIN`` and ``__MAX``
  (the range of the points W&B drew in one bucket; not read). One row per step; an empty cell means the run
  logged nothing there.
- **runs** (the runs table's "Export CSV"): ``Name`` (and ``State``, ``Tags``, …), then config columns
  (``env_id``, ``exp_name``, ``seed``, …) and summary columns (each metric's last value, ``global_step``).
  One score per run.
- **history** (``wandb.Api().run(path).history()`` or ``.scan_history()`` saved with ``to_csv`` /
  ``to_parquet``): ``_step``, ``_runtime``, ``_timestamp`` and one column per logged key, one row per
  ``wandb.log`` call; a leading unnamed index column is ignored. One run per file.

openrlbenchmark (``python -m openrlbenchmark.rlops … --scan-history``) caches each run as
``dataset/<entity>/<project>/<run id>/run_df.csv`` (the history shape) beside ``run.json`` (the run's
attributes, its ``config`` among them); its ``--output-filename`` CSV only holds ``mean ± std`` per
environment and is refused, since an audit needs the runs. (Based on openrlbenchmark's ``cache.py`` and
``rlops.py``: ``CachedRun`` and ``create_hypothesis``.)

Metric: option ``tag`` (comma-separated, first found wins) or the defaults of :mod:`rlaudit.importers._logs`
(``eval/mean_reward``, ``charts/episodic_return``, ``rollout/ep_rew_mean``); a panel with one metric needs
none. Algorithm / task / run: a run name in CleanRL's form ``<env>__<exp>__<seed>__<time>`` gives all
three; the runs table's config columns (``exp_name`` / ``algo``, ``env_id`` / ``env``, ``seed``), an
openrlbenchmark run's config likewise; else options ``algorithm`` and ``task`` (run = the run's name).
``algorithm``, ``task`` and ``run_from`` (a regular expression searched in the run's name) override them.
"""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError, did_you_mean
from rlaudit.importers._common import check_options, decode_utf8, expand, parse_count, read_bytes
from rlaudit.importers._logs import (CLEANRL_RUN, READ_OPTIONS, TRAIN_NOTE, Reader, apply_run_from, compile_run_from,
                                     finish, tag_list)
from rlaudit.scores import ScoreMeta, ScoreTable

STEP_COLUMNS = ("Step", "global_step", "_step")
ALGORITHM_KEYS = ("exp_name", "algo", "algorithm")
TASK_KEYS = ("env_id", "env", "task")
OPTIONS = {
    "tag": "metric(s), comma-separated, first found wins (default: eval/mean_reward, charts/episodic_return, "
           "rollout/ep_rew_mean; a one-metric panel: that one)",
    "score_kind": "eval or train for metrics outside the default list (default: eval for eval/..., else train)",
    "algorithm": "algorithm name (default: from the run name or config)",
    "task": "task name (default: from the run name or config)",
    "run_from": "regular expression searched in each run's name; groups algorithm/task/run (or group 1 = run)",
    "step_column": "history: the step column (default global_step when present, else _step)",
    "budget": "runs table: budget of the summary values (default: its global_step column, else 0 = final)",
    **READ_OPTIONS,
}
OPENRLBENCHMARK_OPTIONS = {
    **{k: v for k, v in OPTIONS.items() if k != "budget"},
    "algorithm_key": "config key naming the algorithm (default exp_name, openrlbenchmark's 'cen')",
    "task_key": "config key naming the environment (default env_id, openrlbenchmark's 'ceik')",
}
_PANEL_COLUMN = re.compile(r"^(?P<run>.+) - (?P<metric>.+?)(?P<bound>__MIN|__MAX)?$")
_INDEX_COLUMNS = ("", "Unnamed: 0")


def wandb_shape(columns) -> str | None:
    """``"panel"``, ``"runs"``, ``"history"``, ``"openrlbenchmark-summary"`` or ``None`` for a header."""
    cols = [str(c).strip() for c in columns]
    if not cols:
        return None
    if "_step" in cols and ("_runtime" in cols or "_timestamp" in cols):
        return "history"
    if cols[0] in STEP_COLUMNS and any(_PANEL_COLUMN.match(c) for c in cols[1:]):
        return "panel"
    if cols[0] == "Name" or ("Name" in cols and "State" in cols):
        return "runs"
    if cols[0] in _INDEX_COLUMNS and len(cols) > 1:
        return "openrlbenchmark-summary"
    return None


def _read_table(path: Path) -> tuple[pd.DataFrame, bool]:
    """The file as a frame of strings (CSV) or values (Parquet); ``True`` when cells are strings."""
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a W&B export (.csv or .parquet)")
    if path.name.lower().endswith(".parquet"):
        try:
            return pd.read_parquet(path), False
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    text = decode_utf8(read_bytes(path), path, "CSV text file")
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False), True
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file, expected a W&B export") from None
    except pd.errors.ParserError as exc:
        raise InputError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None


def _number(cell, where: str) -> float | None:
    """A cell as a finite float; ``None`` for an empty / null cell; anything else raises naming ``where``."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    if isinstance(cell, str):
        if not cell.strip():
            return None
        try:
            value = float(cell)
        except ValueError:
            raise InputError(f"{where}: {cell!r} is not a number") from None
    elif isinstance(cell, (int, float, np.integer, np.floating)) and not isinstance(cell, bool):
        value = float(cell)
    else:
        raise InputError(f"{where}: {cell!r} is not a number")
    if not math.isfinite(value):
        raise InputError(f"{where}: {cell!r} is not a finite number")
    return value


def _step(cell, where: str) -> int:
    if isinstance(cell, (int, np.integer)):
        value = int(cell)
    else:
        value = parse_count(cell.strip() if isinstance(cell, str) else cell, where)
    if value < 0:
        raise InputError(f"{where}: negative step {value}")
    return value


def _ids(name: str, options: dict, pattern, where: str, known: dict | None = None) -> tuple[str, str, str]:
    """(algorithm, task, run) of the run called ``name``: CleanRL's name form, ``known`` (config), options."""
    m = CLEANRL_RUN.match(name)
    ids = {"algorithm": m.group("algorithm"), "task": m.group("task"), "run": m.group("run")} if m else \
        {"algorithm": None, "task": None, "run": name}
    ids.update({k: v for k, v in (known or {}).items() if v not in (None, "")})
    ids = apply_run_from(pattern, name, ids, where, f"the run name {name!r}")
    for key in ("algorithm", "task"):
        ids[key] = options.get(key) or ids[key]
        if not ids[key]:
            raise InputError(f"{where}: cannot tell the {key} of run {name!r} (not <env>__<exp>__<seed>__<time>); "
                             f"pass --{key} or --run-from")
    return str(ids["algorithm"]), str(ids["task"]), str(ids["run"])


def _choose(wanted, present, where: str, explicit: bool) -> tuple[str, str]:
    chosen = next(((t, k) for t, k in wanted if t in present), None)
    if chosen is None:
        asked = ", ".join(t for t, _ in wanted)
        hint = did_you_mean(wanted[0][0], sorted(present)) if explicit else ""
        raise InputError(f"{where}: no metric {asked}{hint}; metrics here: {', '.join(sorted(present)) or 'none'} "
                         f"(pass --tag)")
    return chosen


def _panel(path: Path, df: pd.DataFrame, options: dict, reader: Reader, pattern, wanted) -> list[pd.DataFrame]:
    step_col = df.columns[0]
    series: dict[str, dict[str, str]] = {}
    for col in df.columns[1:]:
        m = _PANEL_COLUMN.match(col)
        if m is None:
            raise InputError(f"{path}: column {col!r} is not '<run> - <metric>' as in a W&B panel export")
        if not m.group("bound"):
            series.setdefault(m.group("metric"), {})[m.group("run")] = col
    if options.get("tag") is None and len(series) == 1:
        wanted = [(t, k) for t, k in tag_list({"tag": next(iter(series)), "score_kind": options.get("score_kind")})]
    tag, kind = _choose(wanted, series, str(path), options.get("tag") is not None)
    parts = []
    for run_name, col in series[tag].items():
        steps, values = [], []
        for i, (s, v) in enumerate(zip(df[step_col], df[col])):
            where = f"{path}: line {i + 2}, column {col!r}"
            value = _number(v, where)
            if value is not None:
                steps.append(_step(s, f"{path}: line {i + 2}, column {step_col!r}"))
                values.append(value)
        if not steps:
            raise InputError(f"{path}: column {col!r} holds no value")
        parts.append(reader.rows(_ids(run_name, options, pattern, str(path)), np.asarray(steps), np.asarray(values),
                                 kind, f"{path}, column {col!r}"))
    return parts


def _runs_table(path: Path, df: pd.DataFrame, options: dict, reader: Reader, pattern, wanted,
                notes: list) -> list[pd.DataFrame]:
    tag, kind = _choose(wanted, set(df.columns), str(path), options.get("tag") is not None)
    algo_col = next((c for c in ALGORITHM_KEYS if c in df.columns), None)
    task_col = next((c for c in TASK_KEYS if c in df.columns), None)
    budget = options.get("budget")
    fixed = parse_count(budget, "--budget") if budget is not None else None
    rows, n_empty = [], 0
    for i, rec in enumerate(df.to_dict("records")):
        line = i + 2
        name = str(rec["Name"]).strip()
        if not name:
            raise InputError(f"{path}: line {line}, column 'Name': empty run name")
        value = _number(rec[tag], f"{path}: line {line}, column {tag!r}")
        if value is None:
            n_empty += 1
            continue
        known = {"algorithm": rec.get(algo_col) if algo_col else None, "task": rec.get(task_col) if task_col else None}
        if "seed" in df.columns and str(rec["seed"]).strip():
            known["run"] = str(rec["seed"]).strip()
        algo, task, run = _ids(name, options, pattern, f"{path}: line {line}", known)
        reader.claim((algo, task, run), f"{path}: line {line}")
        if fixed is not None:
            step = fixed
        elif "global_step" in df.columns and str(rec["global_step"]).strip():
            step = _step(rec["global_step"], f"{path}: line {line}, column 'global_step'")
        else:
            step = 0
        rows.append((algo, task, run, step, value, kind))
    if n_empty:
        notes.append(f"{n_empty} run(s) without a {tag} value left out")
    if "State" in df.columns:
        states = df["State"].str.strip().value_counts().to_dict()
        unfinished = {s: n for s, n in states.items() if s and s != "finished"}
        if unfinished:
            notes.append("runs not finished: " + ", ".join(f"{n} {s}" for s, n in sorted(unfinished.items()))
                         + " (their summary is the last value they logged)")
    if not rows:
        raise InputError(f"{path}: no run has a {tag} value")
    return [pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score", "score_kind"])]


def _history(path: Path, df: pd.DataFrame, options: dict, reader: Reader, pattern, wanted, notes: list,
             known: dict | None = None, name: str | None = None) -> pd.DataFrame:
    step_col = options.get("step_column") or ("global_step" if "global_step" in df.columns else "_step")
    if step_col not in df.columns:
        raise InputError(f"{path}: no step column {step_col!r}{did_you_mean(step_col, [str(c) for c in df.columns])}")
    if step_col == "_step" and not options.get("budget_unit"):
        notes.append(f"{path.name}: budgets are W&B's _step (one per wandb.log call), not env steps; pass "
                     f"--option step_column=… for another column")
    present = {str(c) for c in df.columns if not str(c).startswith("_")}
    tag, kind = _choose(wanted, present, str(path), options.get("tag") is not None)
    steps, values = [], []
    line_of = (lambda i: f"line {i + 2}") if isinstance(df[tag].iloc[0] if len(df) else "", str) else \
        (lambda i: f"row {i + 1}")
    for i, (s, v) in enumerate(zip(df[step_col], df[tag])):
        value = _number(v, f"{path}: {line_of(i)}, column {tag!r}")
        if value is None:
            continue
        if s is None or (isinstance(s, float) and math.isnan(s)) or (isinstance(s, str) and not s.strip()):
            raise InputError(f"{path}: {line_of(i)}, column {step_col!r}: empty step beside a {tag} value")
        steps.append(_step(s, f"{path}: {line_of(i)}, column {step_col!r}"))
        values.append(value)
    if not steps:
        raise InputError(f"{path}: column {tag!r} holds no value")
    run_name = name or path.name.split(".")[0]
    return reader.rows(_ids(run_name, options, pattern, str(path), known), np.asarray(steps), np.asarray(values), kind,
                       str(path))


def _drop_index(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns[:1] if str(c) in _INDEX_COLUMNS])


def _meta(parts, paths, files, options, notes, wanted) -> ScoreTable:
    frame, kind = finish(parts, str(paths[0]))
    unit = options.get("budget_unit") or "env_steps"
    if kind == "train" and any(t in ("charts/episodic_return", "rollout/ep_rew_mean") for t, _ in wanted):
        notes.append(TRAIN_NOTE)
    meta = ScoreMeta(budget_unit=unit, score_kind=kind, source=", ".join(str(p) for p in paths), notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(files[0]), line_offset=1)


def import_wandb(paths: list[Path], **options) -> ScoreTable:
    """Import W&B panel exports, runs tables and run histories (see the module docstring).

    Returns:
        One row per (algorithm, task, run, step) (panel, history; at ``budgets`` when given) or per run
        (runs table, at its ``global_step`` or option ``budget``).
    """
    check_options(options, OPTIONS, "wandb importer")
    wanted, pattern = tag_list(options), compile_run_from(options)
    reader = Reader(options, "wandb importer")
    files = expand(paths, lambda f: f.name.lower().endswith((".csv", ".parquet")), "W&B exports (.csv, .parquet)")
    parts, notes = [], []
    for path in files:
        df, _ = _read_table(path)
        shape = wandb_shape(df.columns)
        if shape == "history":
            df = _drop_index(df)
        if shape == "panel":
            parts += _panel(path, df, options, reader, pattern, wanted)
        elif shape == "runs":
            parts += _runs_table(path, df, options, reader, pattern, wanted, notes)
        elif shape == "history":
            parts.append(_history(path, df, options, reader, pattern, wanted, notes))
        elif shape == "openrlbenchmark-summary":
            raise InputError(_SUMMARY_REFUSED.format(path=path))
        else:
            raise InputError(f"{path}: not a W&B export (expected a panel's Step + '<run> - <metric>' columns, a runs "
                             f"table with Name, or a history with _step and _runtime); header: "
                             f"{', '.join(map(str, df.columns[:6]))}")
    notes += reader.notes(options.get("budget_unit") or "env_steps")
    return _meta(parts, paths, files, options, notes, wanted)


_SUMMARY_REFUSED = ("{path}: an openrlbenchmark result table (mean ± std per environment) holds no runs, which an "
                    "audit needs; import its per-run cache instead: rlaudit import openrlbenchmark "
                    "<openrlbenchmark>/dataset/<entity>/<project>")


def _run_json(path: Path) -> dict:
    """The ``config`` of the run whose ``run_df.csv`` is ``path`` (``run.json`` beside it), values unwrapped."""
    side = path.parent / "run.json"
    if not side.is_file():
        raise InputError(f"{path}: no run.json beside it (openrlbenchmark caches each run as run_df.csv + run.json)")
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{side}: not readable JSON ({str(exc).splitlines()[0]})") from None
    config = data.get("config", data.get("_attrs", {}).get("config")) if isinstance(data, dict) else None
    if isinstance(config, str):  # W&B's raw attributes keep the config as a JSON string
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            config = None
    if not isinstance(config, dict):
        raise InputError(f"{side}: no 'config' object (expected the W&B run's attributes, as openrlbenchmark saves them)")
    return {k: (v.get("value") if isinstance(v, dict) and "value" in v else v) for k, v in config.items()}


def import_openrlbenchmark(paths: list[Path], **options) -> ScoreTable:
    """Import openrlbenchmark's per-run cache (``<run id>/run_df.csv`` + ``run.json``; see the module docstring).

    Returns:
        One row per (algorithm, task, run, step), or per budget with ``budgets``.
    """
    check_options(options, OPENRLBENCHMARK_OPTIONS, "openrlbenchmark importer")
    wanted, pattern = tag_list(options), compile_run_from(options)
    reader = Reader(options, "openrlbenchmark importer")
    algo_key, task_key = options.get("algorithm_key", "exp_name"), options.get("task_key", "env_id")
    files = expand(paths, lambda f: f.name in ("run_df.csv", "run_df.parquet"),
                   "openrlbenchmark runs (<run id>/run_df.csv with run.json)")
    parts, notes = [], []
    for path in files:
        df, _ = _read_table(path)
        if wandb_shape(df.columns) == "openrlbenchmark-summary":
            raise InputError(_SUMMARY_REFUSED.format(path=path))
        df = _drop_index(df)
        if wandb_shape(df.columns) != "history":
            raise InputError(f"{path}: not an openrlbenchmark run history (expected _step, _runtime and metric columns)")
        config = _run_json(path)
        for key in (algo_key, task_key):
            if key not in config and not options.get("algorithm" if key == algo_key else "task"):
                raise InputError(f"{path.parent / 'run.json'}: config has no {key!r}"
                                 f"{did_you_mean(key, [str(k) for k in config])}; pass --option "
                                 f"{'algorithm' if key == algo_key else 'task'}_key=… or --"
                                 f"{'algorithm' if key == algo_key else 'task'}")
        known = {"algorithm": config.get(algo_key), "task": config.get(task_key),
                 "run": str(config["seed"]) if config.get("seed") is not None else path.parent.name}
        parts.append(_history(path, df, options, reader, pattern, wanted, notes, known, name=path.parent.name))
    notes += reader.notes(options.get("budget_unit") or "env_steps")
    return _meta(parts, paths, files, options, notes, wanted)
