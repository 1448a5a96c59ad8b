"""The one data contract: the tidy score table.

Everything that leaves the run stage or an importer is a :class:`ScoreTable`: a pandas frame with one row
per (algorithm, task, run, budget) and a raw ``score``, plus :class:`ScoreMeta` (budget unit, score kind,
source, normalisation already applied).

Required columns (in this order):

=============  =========  ===========================================================================
column         dtype      meaning
=============  =========  ===========================================================================
``algorithm``  str        algorithm name as the user writes it (``"DQN"``, ``"Rainbow"``)
``task``       str        task / environment / game (``"Pong"``, ``"CartPole-v1"``)
``run``        str        run or seed id, unique within (algorithm, task)
``budget``     int64      the ordered scale at which the comparison is made, in ``meta.budget_unit``
``score``      float64    raw (unnormalised unless ``meta.normalized``) score of that run at that budget
=============  =========  ===========================================================================

Optional columns, carried through when present: ``score_kind`` (per-row ``eval``/``train``, overrides
``meta.score_kind``), ``regime`` (regime name of a rerun), ``regime_kind`` (``nested`` = an anytime
reading of a run tuned for the largest budget; ``separate`` = a run trained *for* that budget),
``eval_protocol`` (``final`` or ``max``), ``source`` (which source a row comes from when one table holds
several, e.g. ``published`` / ``rerun`` in the joined audit; absent = one source, ``meta.source``).

``budget`` is any ordered scale: environment steps or frames most often, but also offline dataset size,
network size, number of training tasks or inference samples. The unit names it and every output labels it.

On disk: Parquet keeps ``meta`` in the schema's key-value metadata (key ``rlaudit``); a CSV is a plain table
(``pandas.read_csv`` reads it as is) with ``meta`` in a JSON sidecar ``<file>.meta.json``. CSVs written
before the sidecar keep ``meta`` in leading comment lines ``# rlaudit.<field>: <value>``; both are read.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError, did_you_mean, format_rows
from rlaudit.io import atomic_path, check_csv_table, csv_rows, existing_file, loads_nested

COLUMNS: tuple[str, ...] = ("algorithm", "task", "run", "budget", "score")
"""Required columns, in canonical order."""

OPTIONAL_COLUMNS: tuple[str, ...] = ("score_kind", "regime", "regime_kind", "eval_protocol", "source")
"""Optional columns carried through when present."""

NA_WORDS: tuple[str, ...] = ("", "nan", "NaN", "-nan", "-NaN", "NA", "N/A", "n/a", "null", "NULL", "None", "<NA>")
"""Missing-value words read as NaN in the numeric columns (``budget``, ``score``) of a CSV, and only there: an
algorithm, task or run may be named ``None`` or ``NA`` (pandas' default would read such names as missing)."""

SCORE_KINDS: tuple[str, ...] = ("eval", "train")
KEY: tuple[str, ...] = ("algorithm", "task", "run", "budget")
"""Columns that identify a row; duplicates are an error."""
BUDGET_MAX = 2**63 - 1
"""Largest budget a table holds (``int64``); larger ones are refused, never wrapped."""


def exact_whole(number: str, scale: int = 1) -> int | None:
    """``number`` (a decimal numeral such as ``"1.5"`` or ``"2e5"``) times ``scale``, exactly, as an ``int``;
    ``None`` when that is not a whole number. No float is involved, so ``"9007199254740993"`` stays exact.

    Raises:
        OverflowError: the value is past :data:`BUDGET_MAX` in magnitude (judged from the exponent first, so
            that ``"1e400"`` or ``"1e999999999"`` costs nothing).
        ValueError: ``number`` is not a decimal numeral.
    """
    import decimal
    from fractions import Fraction

    try:
        d = decimal.Decimal(number)
    except decimal.InvalidOperation:
        raise ValueError(f"not a number: {number!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a finite number: {number!r}")
    if d == 0:
        return 0
    if d.adjusted() + len(str(abs(scale))) - 1 > len(str(BUDGET_MAX)):
        raise OverflowError(number)
    if d.adjusted() < -len(str(BUDGET_MAX)):  # a nonzero value this small is no whole number
        return None
    value = Fraction(d) * scale
    if value.denominator != 1:
        return None
    if abs(value) > BUDGET_MAX:
        raise OverflowError(number)
    return int(value)


_META_KEY = b"rlaudit"


@dataclass(frozen=True)
class ScoreMeta:
    """Metadata that travels with a score table."""

    budget_unit: str = "env_steps"
    """Unit of ``budget``: ``env_steps``, ``frames``, ``agent_steps``, ``iterations``, ``samples``, …"""
    score_kind: str = "eval"
    """``eval`` (separate evaluation episodes) or ``train`` (returns logged during training)."""
    source: str = ""
    """Where the scores come from: a file, a protocol, a paper."""
    normalized: str = ""
    """Normalisation already applied to ``score`` (``""`` = raw scores, else e.g. ``"atari"``)."""
    notes: tuple[str, ...] = ()
    """Free-text provenance notes added by importers (missing records, resampling rule, …)."""
    runs_planned: int = 0
    """For a run store: runs its protocol plans (``0``: not a store)."""
    runs_finished: int = 0
    """For a run store: runs finished (``done``), the only ones in the table."""

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        d = dataclasses.asdict(self)
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "metadata") -> ScoreMeta:
        """Build from a plain dict, rejecting unknown keys and wrongly typed values with a clear message."""
        if not isinstance(d, dict):
            raise InputError(f"{where}: score metadata must be an object of fields, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            k = sorted(unknown, key=str)[0]
            raise InputError(f"{where}: unknown score metadata field {k!r}{did_you_mean(str(k), names)}")
        d = dict(d)
        for f in dataclasses.fields(cls):
            value = d.get(f.name, "")
            if isinstance(f.default, str) and not isinstance(value, str):
                raise InputError(f"{where}: score metadata field {f.name!r} must be a string, got {value!r}")
        if "notes" in d:
            if not isinstance(d["notes"], (list, tuple)) or not all(isinstance(n, str) for n in d["notes"]):
                raise InputError(f"{where}: score metadata field 'notes' must be a list of strings, "
                                 f"got {d['notes']!r}")
            d["notes"] = tuple(d["notes"])
        meta = cls(**d)
        meta.check(where)
        return meta

    def check(self, where: str = "metadata") -> None:
        """Raise :class:`InputError` if a field holds an impossible value."""
        if self.score_kind not in SCORE_KINDS:
            raise InputError(f"{where}: score kind {self.score_kind!r} is not one of {', '.join(SCORE_KINDS)}")
        if not self.budget_unit:
            raise InputError(f"{where}: budget unit is empty")
        for name in ("runs_planned", "runs_finished"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(f"{where}: {name} must be a whole number >= 0, got {value!r}")
        if self.runs_finished > self.runs_planned:
            raise InputError(f"{where}: runs_finished ({self.runs_finished}) exceeds runs_planned ({self.runs_planned})")


@dataclass(frozen=True)
class ScoreTable:
    """A validated tidy score table: ``frame`` (see module docstring) plus ``meta``.

    Construct through :meth:`from_frame` (validates) rather than directly.
    """

    frame: pd.DataFrame = field(repr=False)
    """Validated frame with the required columns first, sorted by (algorithm, task, budget, run)."""
    meta: ScoreMeta = ScoreMeta()
    """Metadata: budget unit, score kind, source, normalisation."""

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, meta: ScoreMeta | None = None, where: str = "scores",
                   line_offset: int = 2, leave_out: np.ndarray | None = None) -> ScoreTable:
        """Validate ``frame`` and return a :class:`ScoreTable`.

        Args:
            frame: one row per (algorithm, task, run, budget), columns as in the module docstring.
            meta: metadata; defaults to :class:`ScoreMeta` ().
            where: file name or description used in error messages.
            line_offset: number added to a 0-based row index to give the line a user sees in ``where``
                (2 for a CSV with one header line; 1 for "row N" of a non-text source).
            leave_out: rows with a missing score to leave out (see :func:`validate_frame`).
        """
        meta = meta or ScoreMeta()
        meta.check(where)
        return cls(validate_frame(frame, where, line_offset, leave_out), meta)

    @property
    def algorithms(self) -> list[str]:
        """Algorithm names, in order of first appearance."""
        return [str(a) for a in pd.unique(self.frame["algorithm"])]

    @property
    def tasks(self) -> list[str]:
        """Task names, sorted."""
        return sorted(self.frame["task"].unique())

    @property
    def budgets(self) -> list[int]:
        """Budgets present in the table, ascending."""
        return sorted(int(b) for b in self.frame["budget"].unique())

    def at_budget(self, budget: int) -> pd.DataFrame:
        """Rows at ``budget`` only."""
        return self.frame[self.frame["budget"] == budget]

    def score_matrix(self, algorithm: str, budget: int, tasks: list[str] | None = None) -> list[np.ndarray]:
        """Scores of ``algorithm`` at ``budget`` as one 1-D array per task (runs may differ per task).

        Returns:
            A list, aligned with ``tasks`` (default :attr:`tasks`), of arrays of shape ``(n_runs_task,)``.
        """
        tasks = self.tasks if tasks is None else tasks
        sub = self.frame[(self.frame["algorithm"] == algorithm) & (self.frame["budget"] == budget)]
        by_task = {t: g["score"].to_numpy(dtype=np.float64) for t, g in sub.groupby("task", sort=False)}
        return [by_task.get(t, np.empty(0)) for t in tasks]

    def with_frame(self, frame: pd.DataFrame, **meta_changes) -> ScoreTable:
        """A new table with ``frame`` (validated) and ``meta`` fields replaced by ``meta_changes``."""
        return ScoreTable.from_frame(frame, dataclasses.replace(self.meta, **meta_changes), where=self.meta.source
                                     or "scores")


def _refuse_unicode_twins(names: pd.Series, column: str, where: str, lines) -> None:
    """Refuse two spellings of one name that differ only in Unicode normalisation (``Café`` typed as one
    code point or as ``e`` + combining accent): they look the same in every report but would count twice."""
    first: dict[str, str] = {}
    for name in names.unique():
        key = unicodedata.normalize("NFC", name)
        if key in first and first[key] != name:
            raise InputError(f"{where}: {column} {name!r} at line {lines(names == name)} and {first[key]!r} at line "
                             f"{lines(names == first[key])} differ only in Unicode normalisation (NFC / NFD); "
                             f"write them the same way")
        first.setdefault(key, name)


def validate_frame(frame: pd.DataFrame, where: str = "scores", line_offset: int = 2,
                   leave_out: np.ndarray | None = None) -> pd.DataFrame:
    """Check and coerce a frame to the contract; raise :class:`InputError` naming file, rows and columns.

    Args:
        leave_out: optional boolean mask, shape ``(len(frame),)``: rows whose score is missing (an empty CSV
            cell). Their other columns are checked; they are not duplicates of anything and are left out.

    Returns a new frame: required columns first (``algorithm``, ``task``, ``run`` as str; ``budget`` int64;
    ``score`` float64), then known optional columns, sorted by (algorithm, task, budget, run).
    """
    if frame is None or len(frame.columns) == 0 or len(frame) == 0:
        raise InputError(f"{where}: no score rows (the file is empty)")
    cols = [str(c) for c in frame.columns]
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        extra = [c for c in cols if c not in COLUMNS and c not in OPTIONAL_COLUMNS]
        hints = "".join(did_you_mean(m, extra) for m in missing[:1])
        raise InputError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(repr(m) for m in missing)}{hints}; expected columns "
                         f"{', '.join(COLUMNS)}")
    df = frame.copy()
    df.columns = cols
    df = df.reset_index(drop=True)
    lines = lambda mask: format_rows((np.flatnonzero(np.asarray(mask)) + line_offset).tolist())  # noqa: E731

    for c in ("algorithm", "task", "run"):
        nulls = df[c].isna()
        if nulls.any():
            raise InputError(f"{where}: empty {c!r} at line {lines(nulls)}")
        df[c] = df[c].map(_id_str)
        blank = df[c].str.strip() == ""
        if blank.any():
            raise InputError(f"{where}: empty {c!r} at line {lines(blank)}")
    for c in ("algorithm", "task"):
        _refuse_unicode_twins(df[c], c, where, lines)

    for c in ("budget", "score"):  # a timestamp would be read as its count of micro- or nanoseconds
        if df[c].dtype.kind not in "iufO":
            raise InputError(f"{where}: column {c!r} holds {df[c].dtype} values, expected numbers"
                             + (" (env steps, frames or samples)" if c == "budget" else ""))
    budget = pd.to_numeric(df["budget"], errors="coerce")
    bad = budget.isna() | ~np.isfinite(budget.astype(float)) | (budget.astype(float) != np.round(budget.astype(float)))
    if bad.any():
        raise InputError(f"{where}: column 'budget' must hold integers; bad value at line {lines(bad)}")
    # Checked before the int64 cast, which would wrap 2**63 and above to negative budgets without a word.
    as_float = budget.astype(float)
    # Exact for integer columns: a float compare would also refuse 2**63 - 1 itself.
    if budget.dtype.kind == "i":
        big = pd.Series(False, index=budget.index)
    elif budget.dtype.kind == "u":
        big = budget > np.uint64(BUDGET_MAX)
    else:
        big = as_float >= 2.0**63
    if big.any():
        raise InputError(f"{where}: column 'budget' is larger than {BUDGET_MAX:,} (2^63 - 1) at line {lines(big)}")
    negative = as_float < 0
    if negative.any():
        raise InputError(f"{where}: column 'budget' is negative at line {lines(negative)}; budgets count "
                         f"steps, frames or samples from 0")
    df["budget"] = budget.astype(np.int64)

    score = pd.to_numeric(df["score"], errors="coerce")
    nonnum = score.isna() & df["score"].notna() & ~df["score"].astype(str).str.strip().str.lower().isin(["nan"])
    if nonnum.any():
        raise InputError(f"{where}: column 'score' is not numeric at line {lines(nonnum)}")
    skip = np.zeros(len(df), dtype=bool) if leave_out is None else np.asarray(leave_out, dtype=bool)
    nan = score.isna() & ~skip
    if nan.any():
        raise InputError(f"{where}: column 'score' is NaN or empty at line {lines(nan)}")
    if skip.all():
        raise InputError(f"{where}: no scores (every score cell is empty)")
    inf = ~np.isfinite(score.to_numpy(dtype=float)) & ~skip
    if inf.any():
        raise InputError(f"{where}: column 'score' is infinite at line {lines(inf)}")
    df["score"] = score.astype(np.float64)

    if "score_kind" in df.columns:
        kinds = df["score_kind"].astype(str)
        bad = ~kinds.isin(SCORE_KINDS)
        if bad.any():
            raise InputError(f"{where}: column 'score_kind' must be eval or train; bad value at line {lines(bad)}")
        df["score_kind"] = kinds

    if "source" in df.columns:
        blank = df["source"].isna() | (df["source"].astype(str).str.strip() == "")
        if blank.any():
            raise InputError(f"{where}: empty 'source' at line {lines(blank)}")
        df["source"] = df["source"].astype(str)

    dup = df.duplicated(list(KEY), keep=False) & ~skip
    if skip.any():
        dup[~skip] = df[~skip].duplicated(list(KEY), keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise InputError(f"{where}: duplicate (algorithm, task, run, budget) rows at line {lines(dup)} "
                         f"(e.g. {first['algorithm']}, {first['task']}, run {first['run']}, budget {first['budget']})")

    keep = list(COLUMNS) + [c for c in OPTIONAL_COLUMNS if c in df.columns]
    df = df.loc[~skip, keep].sort_values(["algorithm", "task", "budget", "run"], kind="stable").reset_index(drop=True)
    return df


def _id_str(v) -> str:
    """Identifier cell -> str; integral floats (``3.0`` from CSV) become ``"3"``."""
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    return str(v)


# ----------------------------------------------------------------------------------------------- I/O

def read_scores(path: str | os.PathLike, meta: ScoreMeta | None = None, run_column: str | None = None,
                strict: bool = False) -> ScoreTable:
    """Read a tidy table from ``.csv`` / ``.csv.gz`` / ``.parquet`` (the format in ``docs/importers.md``).

    Metadata stored in the file (Parquet key-value metadata, the CSV's ``.meta.json`` sidecar, or the
    older leading ``# rlaudit.*`` comment lines) is used unless ``meta`` is given, which overrides it.

    Args:
        run_column: the column that holds the run id when it is not named ``run``; without it a ``seed``
            column is read as ``run`` when there is no ``run`` column.
        strict: a CSV row with an empty score cell is an error; by default it is a missing score, left
            out and counted in ``meta.notes`` (as the wide importer does).
    """
    path = existing_file(path, "score file (.csv, .csv.gz, .tsv or .parquet)")
    frame, file_meta, line_offset, notes, empty = _read_frame(path, run_column, strict)
    return ScoreTable.from_frame(frame, _noted(meta or file_meta, notes), str(path), line_offset=line_offset,
                                 leave_out=empty)


def key_line(path: str | os.PathLike, key: tuple) -> int | None:
    """Line (CSV) or row (Parquet) of the score file ``path`` that holds ``key`` = (algorithm, task, run, budget),
    as :func:`read_scores` numbers them in messages; ``None`` when no row has it."""
    frame, _, line_offset, _, _ = _read_frame(Path(path))
    keys = pd.DataFrame({c: frame[c].map(_id_str) for c in ("algorithm", "task", "run")})
    keys["budget"] = pd.to_numeric(frame["budget"], errors="coerce")
    hit = np.flatnonzero(((keys[["algorithm", "task", "run"]] == list(key[:3])).all(axis=1)
                          & (keys["budget"] == key[3])).to_numpy())
    return int(hit[0]) + line_offset if hit.size else None


def _read_frame(path: Path, run_column: str | None = None, strict: bool = False):
    """``(frame as read, metadata stored in the file, line_offset, notes, empty)`` of a tidy score file (not
    validated): ``notes`` say how the run column was found and which empty scores were left out; ``empty`` is
    the mask of rows with an empty score cell (``None`` when there are none or ``strict``)."""
    where = str(path)
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise InputError(f"{where}: not a readable Parquet file ({_first_line(exc)})") from None
        stored = (table.schema.metadata or {}).get(_META_KEY)
        file_meta = ScoreMeta.from_dict(_parquet_meta(stored, where), where) if stored else ScoreMeta(source=where)
        frame, notes = _run_column(table.to_pandas(), where, run_column)
        return frame, file_meta, 1, notes, None
    if suffixes.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
        header, n_comment = _read_csv_meta(path)
        meta_where = where
        if not header:
            header, meta_where = _read_sidecar(path), str(sidecar_path(path))
        file_meta = ScoreMeta.from_dict(header, meta_where) if header else ScoreMeta(source=where)
        ids = {c: str for c in ("algorithm", "task", "run", "seed", run_column) if c}
        # pandas' NA words only in the numeric columns: an algorithm may be named "None" or "NA".
        frame = _read_csv(path, where, check_shape=True, skiprows=n_comment, dtype=ids, keep_default_na=False,
                          na_values={"budget": list(NA_WORDS), "score": list(NA_WORDS)})
        frame, notes = _run_column(frame, where, run_column)
        empty = None
        if not strict and "score" in frame.columns and frame["score"].isna().any():
            raw = _read_csv(path, where, skiprows=n_comment, dtype=str, keep_default_na=False)
            if "score" in raw.columns and len(raw) == len(frame):
                empty = (raw["score"].str.strip() == "").to_numpy()
                lines = format_rows((np.flatnonzero(empty) + 2 + n_comment).tolist())
                notes.append(f"{int(empty.sum())} row(s) with an empty score read as missing and left out "
                             f"(line {lines}); --strict refuses them")
        return frame, file_meta, 2 + n_comment, notes, empty
    raise InputError(f"{where}: unknown score file type {path.suffix!r}; expected .csv, .csv.gz, .tsv or .parquet")


def _read_csv(path: Path, where: str, check_shape: bool = False, **kwargs) -> pd.DataFrame:
    """``pd.read_csv`` of a tidy CSV / TSV with every failure as one :class:`InputError`; ``check_shape`` first
    refuses duplicate header names and ragged rows (:func:`_check_csv_shape`)."""
    sep = "\t" if path.name.lower().endswith((".tsv", ".tsv.gz")) else ","
    try:
        if check_shape:
            _check_csv_shape(path, sep, kwargs.get("skiprows", 0))
        return pd.read_csv(path, comment=None, sep=sep, **kwargs)
    except pd.errors.EmptyDataError:
        raise InputError(f"{where}: no score rows (the file is empty)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{where}: not a readable CSV file ({_first_line(exc)})") from None
    except (EOFError, OSError, zlib.error) as exc:  # gzip: truncated stream, bad header or CRC
        raise InputError(f"{where}: truncated or corrupt gzip data ({_first_line(exc)})") from None


def _run_column(frame: pd.DataFrame, where: str, run_column: str | None) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` with its run ids in ``run``: from ``run_column``, or from ``seed`` when ``run`` is absent."""
    cols = [str(c) for c in frame.columns]
    if run_column and run_column != "run":
        if run_column not in cols:
            raise InputError(f"{where}: --run-column: no column {run_column!r}{did_you_mean(run_column, cols)} "
                             f"(columns: {', '.join(cols)})")
        if "run" in cols:
            raise InputError(f"{where}: --run-column {run_column}: the file also has a 'run' column; rename one")
        return frame.rename(columns={run_column: "run"}), [f"column {run_column!r} read as the run id"]
    if "run" not in cols and "seed" in cols:
        return frame.rename(columns={"seed": "run"}), ["column 'seed' read as the run id"]
    if "run" not in cols and all(c in cols for c in COLUMNS if c != "run"):
        raise InputError(f"{where}: missing column 'run' (the run or seed id); rename the column that holds it to "
                         f"'run' or pass --run-column NAME")
    return frame, []


def _noted(meta: ScoreMeta, notes: list[str]) -> ScoreMeta:
    return dataclasses.replace(meta, notes=meta.notes + tuple(notes)) if notes else meta


def write_scores(table: ScoreTable, path: str | os.PathLike) -> Path:
    """Write ``table`` atomically to ``.csv`` or ``.parquet`` (chosen by suffix), metadata included."""
    path = Path(path)
    meta_json = json.dumps(table.meta.to_dict(), sort_keys=True)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrow = pa.Table.from_pandas(table.frame, preserve_index=False)
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), _META_KEY: meta_json.encode()})
        with atomic_path(path) as tmp:
            pq.write_table(arrow, tmp)
        return path
    if path.suffix.lower() == ".csv":
        # A plain table (no comment lines) so that pandas.read_csv reads it; the metadata goes beside it.
        with atomic_path(sidecar_path(path)) as side, atomic_path(path) as tmp:
            side.write_text(json.dumps(table.meta.to_dict(), sort_keys=True, indent=1) + "\n", encoding="utf-8")
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                table.frame.to_csv(fh, index=False, float_format="%.17g")
        return path
    raise InputError(f"{path}: unknown output type {path.suffix!r}; expected .csv or .parquet")


def sidecar_path(path: str | os.PathLike) -> Path:
    """Where a CSV's metadata lives: ``scores.csv`` -> ``scores.csv.meta.json``."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def _read_sidecar(path: Path) -> dict:
    """The metadata dict in ``<path>.meta.json`` (``{}`` when there is none)."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{side}: cannot read the metadata of {path.name} ({_first_line(exc)})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{side}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); it holds "
                         f"the metadata of {path.name}") from None
    if not isinstance(data, dict):
        raise InputError(f"{side}: expected a JSON object of score metadata (budget_unit, score_kind, …)")
    return data


def _check_csv_shape(path: Path, sep: str, n_comment: int) -> None:
    """Refuse duplicate header names and ragged rows before pandas reads (and silently mangles) them."""
    import gzip

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        for _ in range(n_comment):
            fh.readline()
        check_csv_table(csv_rows(fh, sep, first_line=n_comment + 1), str(path))


def _parquet_meta(stored: bytes, where: str) -> dict:
    """The ``rlaudit`` key of a Parquet schema's metadata, parsed (JSON)."""
    try:
        return loads_nested(json.loads, stored.decode("utf-8"), where)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{where}: the Parquet metadata key 'rlaudit' is not JSON ({exc}); rewrite the file "
                         f"with rlaudit import tidy, or drop that key") from None


def _read_csv_meta(path: Path) -> tuple[dict, int]:
    """Parse leading ``# rlaudit.<field>: <json>`` lines; return (meta dict, number of comment lines)."""
    import gzip

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    meta: dict = {}
    n = 0
    try:
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                n += 1
                body = line[1:].strip()
                if body.startswith("rlaudit.") and ":" in body:
                    k, v = body[len("rlaudit."):].split(":", 1)
                    try:
                        meta[k.strip()] = loads_nested(json.loads, v.strip(), f"{path}: line {n}")
                    except json.JSONDecodeError:
                        meta[k.strip()] = v.strip()
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({_first_line(exc)})") from None
    except (EOFError, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip data ({_first_line(exc)})") from None
    return meta, n


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
