"""A published protocol's ``[data]`` section: which importer, which files (path, url, sha256), options.

:func:`check_data_section` validates the table (the protocol loader calls it while reading a file);
:func:`load_data_section` verifies the files' checksums and imports them into one table.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path, PurePosixPath

import pandas as pd

from rlaudit.errors import InputError, did_you_mean
from rlaudit.importers import IMPORTERS, import_path, importer_options, importer_spec
from rlaudit.importers._common import content_sha256
from rlaudit.scores import ScoreMeta, ScoreTable

DATA_KEYS = {"format": "importer name", "options": "importer options (table)", "files": "array of file tables",
             "algorithms": "algorithms to audit (after 'rename'); each must be in the data, others are left out",
             "rename": "table {imported name = algorithm name}",
             "task_names": "'atari': every task name becomes its Atari-57 game (pong, atari_pong -> Pong), so that "
                           "sources spelling games differently share tasks"}
FILE_KEYS = {"path": "path relative to --data DIR or the fetch cache", "url": "download URL",
             "sha256": "SHA-256 of the file content (after gunzip for .gz paths)",
             "format": "importer of this file (default: [data].format)",
             "options": "importer options for this file only (merged over [data].options)"}
TASK_NAMES = ("atari",)
def cache_dir() -> Path:
    """The fetch cache: ``$RLAUDIT_CACHE`` or ``~/.cache/rlaudit``."""
    env = os.environ.get("RLAUDIT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rlaudit"


_SHA = re.compile(r"^[0-9a-f]{64}$")


def check_data_section(data: dict, where: str) -> None:
    """Validate a protocol's ``[data]`` table; raise :class:`InputError` naming ``where`` and the field."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: must be a table ([data])")
    for k in data:
        if k not in DATA_KEYS:
            raise InputError(f"{where}: unknown field {k!r}{did_you_mean(k, DATA_KEYS)}; expected {', '.join(DATA_KEYS)}")
    if "format" not in data:
        raise InputError(f"{where}: missing field 'format' (one of {', '.join(IMPORTERS)})")
    fmt = data["format"]
    if not isinstance(fmt, str):
        raise InputError(f"{where}: field 'format' must be a string")
    importer_spec(fmt, f"{where}: field 'format'")
    options = data.get("options", {})
    formats = {fmt} | {f.get("format") for f in data.get("files") or () if isinstance(f, dict) and "format" in f}
    for name in formats:
        if not isinstance(name, str):
            raise InputError(f"{where}: files: field 'format' must be a string")
        importer_spec(name, f"{where}: files: field 'format'")
    # [data].options apply to every file, so they must suit every format the files use.
    for name in sorted(formats):
        _check_opts(options, importer_options(name), f"{where}: options", name)
    _check_selection(data, where)
    files = data.get("files")
    if not isinstance(files, list) or not files:
        raise InputError(f"{where}: field 'files' must be a non-empty array of tables ([[data.files]])")
    seen = set()
    for i, f in enumerate(files):
        w = f"{where}: files[{i}]"
        if not isinstance(f, dict):
            raise InputError(f"{w}: must be a table with path, url, sha256")
        for k in f:
            if k not in FILE_KEYS:
                raise InputError(f"{w}: unknown field {k!r}{did_you_mean(k, FILE_KEYS)}")
        for k in ("path", "url", "sha256"):
            if not isinstance(f.get(k), str) or not f[k]:
                raise InputError(f"{w}: missing or empty string field {k!r}")
        _check_file_path(f["path"], w)
        if f["path"] in seen:
            raise InputError(f"{w}: path {f['path']!r} listed twice")
        seen.add(f["path"])
        if not f["url"].startswith(("https://", "http://")):
            raise InputError(f"{w}: 'url' must start with https:// or http://, got {f['url']!r}")
        if not _SHA.match(f["sha256"]):
            raise InputError(f"{w}: 'sha256' must be 64 lower-case hex digits")
        file_fmt = f.get("format", fmt)
        _check_opts(f.get("options", {}), importer_options(file_fmt), f"{w}: options", file_fmt)


def _check_selection(data: dict, where: str) -> None:
    """``algorithms``, ``rename`` and ``task_names`` of ``[data]``."""
    algorithms = data.get("algorithms")
    if algorithms is not None and (not isinstance(algorithms, list) or not algorithms
                                   or not all(isinstance(a, str) and a for a in algorithms)):
        raise InputError(f"{where}: field 'algorithms' must be a non-empty array of algorithm names")
    rename = data.get("rename", {})
    if not isinstance(rename, dict) or not all(isinstance(v, str) and v for v in rename.values()):
        raise InputError(f"{where}: field 'rename' must be a table {{imported name = \"algorithm name\"}}")
    task_names = data.get("task_names")
    if task_names is not None and task_names not in TASK_NAMES:
        raise InputError(f"{where}: field 'task_names' must be one of {', '.join(TASK_NAMES)}, got {task_names!r}")


def _check_file_path(path: str, where: str) -> None:
    """A ``[[data.files]] path``: a plain relative file path, so that ``cache/path`` stays in the cache."""
    p = PurePosixPath(path)
    if any(ord(c) < 32 or c == "\x7f" for c in path):
        raise InputError(f"{where}: 'path' holds a control character (e.g. NUL), got {path!r}")
    parts = path.split("/")
    if p.is_absolute() or "\\" in path or str(p) != path or not p.parts or any(x in (".", "..") for x in parts):
        raise InputError(f"{where}: 'path' must be a relative file path like 'dopamine/atari/pong.json.gz' "
                         f"(no '.', '..', empty parts or trailing '/'), got {path!r}")


def _check_opts(options, allowed: dict, where: str, fmt: str) -> None:
    if not isinstance(options, dict):
        raise InputError(f"{where} must be a table")
    for k in options:
        if k not in allowed:
            raise InputError(f"{where}: unknown option {k!r} for format {fmt!r}{did_you_mean(k, allowed)}")


def load_data_section(data: dict, where: str, data_dir: Path | None) -> ScoreTable:
    """Verify and import the files of a protocol's ``[data]`` section.

    Args:
        data: the ``[data]`` table (already checked by :func:`check_data_section`, checked again here).
        where: the protocol file, for messages.
        data_dir: folder the ``path`` fields are relative to; ``None`` = the fetch cache
            (``$RLAUDIT_CACHE`` or ``~/.cache/rlaudit``).

    Returns:
        One table. Files whose options differ are imported separately and concatenated; when some hold
        Atari human-normalised scores and others raw scores, the normalised ones are converted back to raw
        game scores with the Atari reference scores (reported in ``meta.notes``).
    """
    check_data_section(data, where)
    from rlaudit.importers._common import track

    protocol = where.split(": ")[0]  # `where` may be "file.toml: data"
    cached = data_dir is None
    base = cache_dir() if cached else Path(data_dir)
    if not base.is_dir():
        hint = f"run `rlaudit fetch {protocol}` or pass --data DIR" if cached else "pass the folder that holds the data"
        raise InputError(f"{base}: data folder does not exist ({hint})")
    groups: dict[str, tuple[dict, list[Path]]] = {}
    for f in track(data["files"], "verifying data files"):
        path = base / f["path"]
        if not path.is_file():
            hint = f"run `rlaudit fetch {protocol}`" if cached else f"is --data {base} the right folder?"
            raise InputError(f"{path}: file listed in {protocol} is missing ({hint})")
        actual = content_sha256(path)
        if actual != f["sha256"]:
            raise InputError(f"{path}: checksum mismatch: sha256 {actual[:16]}… but {protocol} expects "
                             f"{f['sha256'][:16]}… (not the published file)")
        opts = {**data.get("options", {}), **f.get("options", {})}
        fmt = f.get("format", data["format"])
        key = repr((fmt, sorted(opts.items())))
        groups.setdefault(key, (fmt, opts, []))[2].append(path)
    tables = [import_path(fmt, paths, **opts) for fmt, opts, paths in groups.values()]
    table = tables[0] if len(tables) == 1 else _combine(tables, where)
    table = _select(table, data, where)
    return ScoreTable(table.frame, dataclasses.replace(table.meta, source=protocol))


def _select(table: ScoreTable, data: dict, where: str) -> ScoreTable:
    """Apply ``rename``, ``task_names`` and ``algorithms`` of ``[data]`` to the imported table."""
    rename, keep, task_names = data.get("rename", {}), data.get("algorithms"), data.get("task_names")
    if not rename and keep is None and task_names is None:
        return table
    frame = table.frame.copy()
    present = set(frame["algorithm"].unique())
    for old in rename:
        if old not in present:
            raise InputError(f"{where}: rename: {old!r} is not an algorithm of the data{did_you_mean(old, present)} "
                             f"(present: {', '.join(sorted(present))})")
    frame["algorithm"] = frame["algorithm"].map(lambda a: rename.get(a, a))
    notes = list(table.meta.notes)
    if rename:  # the importers' notes above name the algorithms as imported
        notes.append("renamed by the protocol's data.rename: " + ", ".join(f"{k} -> {v}" for k, v in rename.items()))
    if keep is not None:
        names = set(frame["algorithm"].unique())
        for i, name in enumerate(keep):
            if name not in names:
                raise InputError(f"{where}: algorithms[{i}]: {name!r} is not in the data"
                                 f"{did_you_mean(name, names)} (present: {', '.join(sorted(names))})")
        left_out = sorted(names - set(keep))
        frame = frame[frame["algorithm"].isin(keep)]
        if left_out:
            notes.append(f"left out by the protocol's data.algorithms: {', '.join(left_out)}")
    if task_names == "atari":
        from rlaudit.stats.normalize import canonical_game

        games = {t: canonical_game(t) for t in frame["task"].unique()}
        unknown = sorted(t for t, g in games.items() if g is None)
        if unknown:
            raise InputError(f"{where}: task_names = 'atari': {', '.join(unknown[:5])} "
                             f"{'is' if len(unknown) == 1 else 'are'} not Atari-57 game names")
        frame["task"] = frame["task"].map(games)
    meta = dataclasses.replace(table.meta, notes=tuple(notes))
    return ScoreTable.from_frame(frame.reset_index(drop=True), meta, where=where, line_offset=1)


def _combine(tables: list[ScoreTable], where: str) -> ScoreTable:
    units = {t.meta.budget_unit for t in tables}
    kinds = {t.meta.score_kind for t in tables}
    if len(units) > 1:
        raise InputError(f"{where}: [data] files disagree on the budget unit ({', '.join(sorted(units))}); set "
                         "'budget_unit' in the file options")
    if len(kinds) > 1:
        # Sources of different score kinds (Dopamine's training returns beside evaluation curves): each row
        # keeps its own kind, so that the audit checklist reports the mix per algorithm.
        tables = [t if "score_kind" in t.frame.columns else
                  ScoreTable(t.frame.assign(score_kind=t.meta.score_kind), t.meta) for t in tables]
    norms = {t.meta.normalized for t in tables}
    notes: list[str] = []
    frames = []
    if len(norms) > 1:
        if norms != {"", "atari"}:
            raise InputError(f"{where}: [data] files mix normalisations {sorted(norms)} that cannot be reconciled")
        for t in tables:
            if t.meta.normalized == "atari":
                frames.append(_denormalize_atari(t, where))
                notes.append(f"{', '.join(sorted(t.algorithms))}: human-normalised scores converted back to raw "
                             "game scores with the Atari reference scores (raw = HNS · (human − random) + random)")
            else:
                frames.append(t.frame)
        normalized = ""
    else:
        frames = [t.frame for t in tables]
        normalized = norms.pop()
    for t in tables:
        notes += [n for n in t.meta.notes if n not in notes]
    meta = ScoreMeta(budget_unit=units.pop(), score_kind="train" if "train" in kinds else kinds.pop(), source=where,
                     normalized=normalized,
                     notes=tuple(notes))
    return ScoreTable.from_frame(pd.concat(frames, ignore_index=True), meta, where=where, line_offset=1)


def _denormalize_atari(table: ScoreTable, where: str) -> pd.DataFrame:
    """Human-normalised scores back to raw game scores: ``raw = hns * (human - random) + random``."""
    import numpy as np

    from rlaudit.stats.normalize import ATARI_REFERENCE, canonical_game

    frame = table.frame.copy()
    lows, highs = [], []
    for task in frame["task"]:
        game = canonical_game(task)
        if game not in ATARI_REFERENCE:
            raise InputError(f"{where}: no Atari reference scores for task {task!r}")
        low, high = ATARI_REFERENCE[game]
        lows.append(low)
        highs.append(high)
    lo, hi = np.asarray(lows, dtype=np.float64), np.asarray(highs, dtype=np.float64)
    frame["score"] = frame["score"].to_numpy(dtype=np.float64) * (hi - lo) + lo
    return frame
