"""Guess the importer of a path from its name and, for JSON, from the shape of its first record."""

from __future__ import annotations

from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.importers._common import load_json
from rlaudit.io import has_suffix

TIDY_COLUMNS = {"algorithm", "task", "run", "budget", "score"}


def sniff(path: Path) -> str:
    """Return the importer name for ``path``.

    Raises:
        InputError: when no format is recognised or several fit; the message asks for ``--format``.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        kinds = set()
        files = [f for f in path.rglob("*") if f.is_file()]
        if any(f.name == "evaluations.npz" for f in files):
            kinds.add("zoo")
        if any("tfevents" in f.name for f in files):
            kinds.add("tensorboard")
        orb = any(f.name in ("run_df.csv", "run_df.parquet") for f in files)
        if orb:
            kinds.add("openrlbenchmark")
        elif not kinds:
            csvs = sorted(f for f in files if f.name.lower().endswith(".csv"))
            if csvs and _sniff_log_table(csvs[0]):
                kinds.add(_sniff_log_table(csvs[0]))
        jsons = sorted(f for f in files if has_suffix(f, ".json", ".json.gz") and ".vg." not in f.name.lower()
                       and not f.name.endswith(".meta.json") and not (orb and f.name == "run.json")
                       and f.name.lower() not in ("manifest.json",))
        if jsons:
            kinds.add(_sniff_json(jsons[0]))
        if not kinds:
            raise InputError(f"{path}: no recognised score files in this folder (expected evaluations.npz, TensorBoard "
                             "event files, openrlbenchmark run_df.csv, W&B exports, Dopamine or rliable .json, curve "
                             ".json.gz)")
        if len(kinds) > 1:
            raise InputError(f"{path}: the folder holds several formats ({', '.join(sorted(kinds))}); pass --format")
        return kinds.pop()
    name = path.name.lower()
    if "tfevents" in name:
        return "tensorboard"
    if name.endswith(".npz"):
        return "zoo"
    if name.endswith(".parquet"):
        return _sniff_log_table(path) or "tidy"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
        from rlaudit.importers._common import iter_content

        # The first chunk is enough to recognise a header; never inflate a whole file to sniff it.
        chunks = iter_content(path)
        head = next(chunks, b"").decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()
        chunks.close()
        header = next((line for line in head if not line.startswith("#")), "")
        cols = {c.strip().lower() for c in header.split("\t" if name.endswith((".tsv", ".tsv.gz")) else ",")}
        if TIDY_COLUMNS <= cols:
            return "tidy"
        return _sniff_log_table(path) or "wide"
    if name.endswith((".json", ".json.gz")):
        return _sniff_json(path)
    raise InputError(f"{path}: cannot tell the format from the name; pass --format "
                     "(dopamine, rliable, zoo, curves, tensorboard, wandb, openrlbenchmark, tidy, wide)")


def _sniff_log_table(path: Path) -> str | None:
    """``wandb`` or ``openrlbenchmark`` when the CSV / Parquet header is one of theirs, else ``None``."""
    import csv

    from rlaudit.importers._common import iter_content
    from rlaudit.importers.wandb import wandb_shape

    if path.name.lower().endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            cols, head = pq.read_schema(path).names, ""
        except Exception:  # not readable: the importer that reads it says why
            return None
    else:
        chunks = iter_content(path)
        head = next(chunks, b"").decode("utf-8", errors="replace")
        chunks.close()
        cols = next(csv.reader(head.splitlines()[:1]), [])
    shape = wandb_shape(cols)
    if shape == "openrlbenchmark-summary":
        # A leading unnamed column is the index of any pandas frame saved as CSV: only "mean ± std" cells say
        # it is openrlbenchmark's result table.
        return "openrlbenchmark" if "±" in head else None
    if shape is None:
        return None
    return "openrlbenchmark" if path.name in ("run_df.csv", "run_df.parquet") else "wandb"


def _sniff_json(path: Path) -> str:
    data = load_json(path)
    if isinstance(data, dict):
        return "rliable"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        keys = set(data[0])
        if {"Iteration", "Value", "Agent"} <= keys:
            return "dopamine"
        if {"xs", "ys"} <= keys:
            return "curves"
        if keys & {"game", "task"} and keys & {"HNS", "eval_average_return"}:
            return "rliable"
    raise InputError(f"{path}: JSON of an unrecognised shape; pass --format (dopamine, rliable, curves)")
