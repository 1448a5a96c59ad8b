"""Tidy CSV / Parquet (the native format, passed through) and generic wide CSV tables copied from papers.

A *wide* CSV has id columns named after the tidy key (``algorithm``/``method``/``agent``,
``task``/``game``/``env``, ``run``/``seed``, ``budget``/``steps``/``frames``) and one column per value of the
key named by ``pivot``: with ``pivot="algorithm"`` the header ``game,DER,SPR`` means one row per game and
one score column per algorithm. Keys without a column come from options (``run`` defaults to ``0``,
``budget`` to ``0`` with unit ``final``). Empty cells are missing scores (left out and counted in
``meta.notes``); any other non-numeric cell is an error naming line and column.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from rlaudit.errors import InputError
from rlaudit.importers._common import check_options, decode_utf8, opt_int, parse_count, read_bytes
from rlaudit.io import check_csv_table, csv_rows, has_suffix
from rlaudit.scores import COLUMNS, KEY, ScoreMeta, ScoreTable, key_line, read_scores

ALIASES = {
    "algorithm": ("algorithm", "method", "agent", "algo"),
    "task": ("task", "game", "env", "environment"),
    "run": ("run", "seed"),
    "budget": ("budget", "steps", "frames", "env_steps"),
}
TIDY_OPTIONS = {
    "run_column": "column holding the run id when it is not 'run' (default: 'seed' when there is no 'run')",
    "strict": "refuse rows with an empty score (default: read as missing, left out and counted)",
}

WIDE_OPTIONS = {
    "pivot": "which key the value columns hold: algorithm (default), task, run or budget",
    "algorithm": "algorithm name when no column holds it",
    "task": "task name when no column holds it",
    "run": "run id when no column holds it (default 0)",
    "budget": "budget when no column holds it (default 0, unit 'final')",
    "budget_unit": "unit of the budget",
    "normalized": "normalisation already applied to the scores (e.g. atari)",
    "score_kind": "eval (default) or train",
}


def import_tidy(paths: list[Path], **options) -> ScoreTable:
    """Read one tidy ``.csv``/``.parquet`` (several are concatenated; their metadata must agree)."""
    check_options(options, TIDY_OPTIONS, "tidy importer")
    strict = str(options.get("strict", False)).lower() in ("1", "true", "yes")
    tables = [read_scores(p, run_column=options.get("run_column"), strict=strict) for p in paths]
    if len(tables) == 1:
        return tables[0]
    first = tables[0].meta
    for p, t in zip(paths[1:], tables[1:]):
        if (t.meta.budget_unit, t.meta.score_kind, t.meta.normalized) != (first.budget_unit, first.score_kind,
                                                                           first.normalized):
            raise InputError(f"{p}: metadata (budget unit, score kind, normalisation) differs from {paths[0]}")
    frame = pd.concat([t.frame.assign(_file=i) for i, t in enumerate(tables)], ignore_index=True)
    dup = frame.duplicated(list(KEY), keep=False)
    if dup.any():  # each file was checked alone: the copies are in different files
        key = tuple(frame.loc[dup, list(KEY)].iloc[0])
        i, j = sorted(frame.loc[dup & (frame[list(KEY)] == list(key)).all(axis=1), "_file"])[:2]
        alg, task, run, budget = key
        raise InputError(f"{paths[j]}: line {key_line(paths[j], key)}: row ({alg}, {task}, run {run}, budget "
                         f"{budget}) is also in {paths[i]}, line {key_line(paths[i], key)}; each (algorithm, task, "
                         f"run, budget) may come from one file only")
    return ScoreTable.from_frame(frame.drop(columns="_file"), first, where=", ".join(map(str, paths)), line_offset=1)


def import_wide(paths: list[Path], **options) -> ScoreTable:
    """Read wide CSV tables: one value column per ``pivot`` key value (see the module docstring)."""
    check_options(options, WIDE_OPTIONS, "wide importer")
    pivot = options.get("pivot", "algorithm")
    if pivot not in ALIASES:
        raise InputError(f"wide importer: option 'pivot' must be one of {', '.join(ALIASES)}, got {pivot!r}")
    rows, n_empty, has_budget = [], 0, pivot == "budget"
    budget_default = opt_int(options, "budget", None, "wide importer", minimum=0)
    for path in paths:
        path = Path(path)
        if path.is_dir():
            raise InputError(f"{path}: is a directory; the wide importer reads CSV files")
        text = decode_utf8(read_bytes(path), path, "CSV text file")
        sep = "\t" if has_suffix(path, ".tsv", ".tsv.gz") else ","
        check_csv_table(csv_rows(io.StringIO(text), sep=sep, comment="#"), str(path), named=True)
        try:
            df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, comment="#", sep=sep)
        except pd.errors.EmptyDataError:
            raise InputError(f"{path}: empty file, expected a CSV table") from None
        except pd.errors.ParserError as exc:
            raise InputError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
        n_comment = next((i for i, line in enumerate(text.splitlines()) if not line.startswith("#")), 0)
        id_cols: dict[str, str] = {}
        for col in df.columns:
            for key, names in ALIASES.items():
                if key != pivot and col.strip().lower() in names and key not in id_cols:
                    id_cols[key] = col
        has_budget = has_budget or "budget" in id_cols
        value_cols = [c for c in df.columns if c not in id_cols.values()]
        if not value_cols:
            raise InputError(f"{path}: no value columns (every column is an id column: {', '.join(df.columns)})")
        for key in ("algorithm", "task"):
            if key != pivot and key not in id_cols and not options.get(key):
                raise InputError(f"{path}: no {key} column (one of {', '.join(ALIASES[key])}) and no {key!r} option")
        for i, rec in enumerate(df.to_dict("records")):
            line = i + 2 + n_comment
            ids = {}
            for key in ("algorithm", "task", "run", "budget"):
                if key == pivot:
                    continue
                if key in id_cols:
                    v = rec[id_cols[key]].strip()
                    if not v:
                        raise InputError(f"{path}: line {line}, column {id_cols[key]!r}: empty {key}")
                    ids[key] = v
                elif key == "budget":
                    ids[key] = budget_default if budget_default is not None else 0
                else:
                    ids[key] = str(options.get(key, "0"))
            if "budget" in ids and isinstance(ids["budget"], str):
                ids["budget"] = parse_count(ids["budget"], f"{path}: line {line}, column {id_cols['budget']!r}")
            for col in value_cols:
                cell = rec[col].strip()
                if cell == "":
                    n_empty += 1
                    continue
                try:
                    score = float(cell)
                except ValueError:
                    raise InputError(f"{path}: line {line}, column {col!r}: {cell!r} is not a number") from None
                if not math.isfinite(score):
                    raise InputError(f"{path}: line {line}, column {col!r}: {cell!r} is not a finite number")
                key_val = col.strip()
                if pivot == "budget":
                    key_val = parse_count(key_val, f"{path}: column header {col!r}")
                row = dict(ids)
                row[pivot] = key_val
                row["score"] = score
                rows.append(row)
    if not rows:
        raise InputError(f"{paths[0]}: no scores (every value cell is empty)")
    frame = pd.DataFrame(rows)[list(COLUMNS)]
    has_budget = has_budget or budget_default is not None
    unit = options.get("budget_unit") or ("env_steps" if has_budget else "final")
    notes = [f"{n_empty} empty cell(s) read as missing scores"] if n_empty else []
    meta = ScoreMeta(budget_unit=unit, score_kind=options.get("score_kind", "eval"),
                     source=", ".join(str(p) for p in paths), normalized=options.get("normalized", ""),
                     notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(paths[0]), line_offset=1)

