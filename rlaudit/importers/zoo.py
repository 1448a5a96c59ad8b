"""Stable-Baselines3 ``EvalCallback`` logs (``evaluations.npz``), in RL Zoo's layout ``logs/<algo>/<env>_<id>/``.

Each ``evaluations.npz`` holds ``timesteps`` (shape ``(n_evals,)``), ``results`` (shape
``(n_evals, n_episodes)``, episode returns) and ``ep_lengths``. One row per evaluation: budget =
``timesteps`` (environment steps), score = mean return over the evaluation episodes, score kind ``eval``.
Algorithm and task come from the path (``<algo>/<env>_<id>``), the run from ``<id>``; options override
them for a file outside that layout.
"""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError
from rlaudit.importers._common import check_options, expand
from rlaudit.scores import BUDGET_MAX, ScoreMeta, ScoreTable

FILE_NAME = "evaluations.npz"
OPTIONS = {
    "algorithm": "algorithm name (default: the folder above the run folder)",
    "task": "task name (default: the run folder without its _<id> suffix)",
    "run": "run id (default: the _<id> suffix of the run folder)",
}
_RUN_DIR = re.compile(r"^(?P<env>.+)_(?P<id>\d+)$")
MAX_VALUES = 50_000_000
"""Most values one array of an ``evaluations.npz`` may hold (400 MB of float64): EvalCallback logs hold
n_evals x n_episodes, thousands; an array header claiming more is refused before anything is allocated."""


def parse_run_dir(npz: Path) -> tuple[str, str, str]:
    """``logs/ppo/CartPole-v1_3/evaluations.npz`` -> ``("ppo", "CartPole-v1", "3")``."""
    run_dir = npz.parent
    m = _RUN_DIR.match(run_dir.name)
    if m:
        return run_dir.parent.name, m.group("env"), m.group("id")
    return run_dir.parent.name, run_dir.name, "0"


def read_evaluations(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read ``(timesteps (n_evals,), mean score (n_evals,))`` from one ``evaluations.npz``.

    Raises:
        InputError: for an unreadable/empty file or missing/ill-shaped arrays, naming the file.
    """
    if not zipfile.is_zipfile(path):
        raise InputError(f"{path}: not an .npz file (expected EvalCallback's evaluations.npz)")
    try:
        _check_array_sizes(path)
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise InputError(f"{path}: not a readable .npz file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    if not arrays:
        raise InputError(f"{path}: empty .npz file (no arrays); expected EvalCallback's timesteps and results")
    if "results" not in arrays:
        raise InputError(f"{path}: no 'results' array (found {', '.join(sorted(arrays))}); expected EvalCallback's "
                         "evaluations.npz")
    if "timesteps" not in arrays:
        raise InputError(f"{path}: no 'timesteps' array; expected EvalCallback's evaluations.npz")
    results, steps = arrays["results"], arrays["timesteps"]
    if results.dtype.kind not in "fiu" or steps.dtype.kind not in "fiu":
        raise InputError(f"{path}: 'results' and 'timesteps' must be numeric arrays")
    if results.ndim == 1:
        results = results[:, None]
    if results.ndim != 2 or steps.ndim != 1 or results.shape[0] != steps.shape[0]:
        raise InputError(f"{path}: 'results' has shape {results.shape} but 'timesteps' has shape {steps.shape}; "
                         "expected (n_evals, n_episodes) and (n_evals,)")
    if results.shape[0] == 0 or results.shape[1] == 0:
        raise InputError(f"{path}: 'results' is empty (shape {results.shape})")
    bad = ~np.isfinite(results)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputError(f"{path}: 'results'[{row}, {col}] is not finite ({results[row, col]})")
    # Before any cast: int64 would wrap 2**63 and above to negative steps, and a float would truncate.
    as_float = steps.astype(np.float64)
    if steps.dtype.kind == "f" and not np.all(np.isfinite(steps) & (steps == np.round(steps))):
        i = int(np.argmax(~(np.isfinite(steps) & (steps == np.round(steps)))))
        raise InputError(f"{path}: 'timesteps'[{i}] is not a whole number ({steps[i]})")
    if np.any(as_float < 0):
        i = int(np.argmax(as_float < 0))
        raise InputError(f"{path}: 'timesteps'[{i}] is negative ({steps[i]}); env steps count from 0")
    too_big = steps > np.uint64(BUDGET_MAX) if steps.dtype.kind == "u" else as_float >= 2.0**63
    if steps.dtype.kind != "i" and np.any(too_big):
        i = int(np.argmax(too_big))
        raise InputError(f"{path}: 'timesteps'[{i}] is larger than 2^63 - 1 ({steps[i]})")
    steps = steps.astype(np.int64)
    if np.any(np.diff(steps) <= 0):
        i = int(np.argmax(np.diff(steps) <= 0)) + 1
        raise InputError(f"{path}: 'timesteps' does not increase at evaluation {i} ({steps[i - 1]} then {steps[i]})")
    return steps, results.astype(np.float64).mean(axis=1)


def _check_array_sizes(path: Path) -> None:
    """Read each array's ``.npy`` header (shape, dtype) and refuse one that claims more values than
    :data:`MAX_VALUES` or more bytes than the archive holds for it, before NumPy allocates the array."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, _, dtype = read(fh)
                available = info.file_size - fh.tell()
            name = info.filename[:-len(".npy")]
            n_values = math.prod(shape)
            if n_values > MAX_VALUES:
                raise InputError(f"{path}: array {name!r} claims shape {shape} ({n_values:,} values), more than "
                                 f"{MAX_VALUES:,}; not an EvalCallback log")
            if n_values * dtype.itemsize > available:
                raise InputError(f"{path}: array {name!r} claims shape {shape} ({n_values * dtype.itemsize:,} "
                                 f"bytes) but the archive holds {available:,} bytes for it; the file is "
                                 f"truncated or damaged")


def import_zoo(paths: list[Path], **options) -> ScoreTable:
    """Import a tree of EvalCallback logs.

    Args:
        paths: ``evaluations.npz`` files or folders searched recursively for them.
        **options: see :data:`OPTIONS`.

    Returns:
        Table with one row per (algorithm, task, run, evaluation); ``budget_unit = "env_steps"``.
    """
    check_options(options, OPTIONS, "zoo importer")
    files = expand(paths, lambda f: f.name == FILE_NAME, f"SB3 evaluation logs ({FILE_NAME})")
    parts, origin = [], {}
    for path in files:
        algo, task, run = parse_run_dir(path)
        algo, task, run = options.get("algorithm", algo), options.get("task", task), str(options.get("run", run))
        if (algo, task, run) in origin:
            raise InputError(f"{path}: run {algo}/{task}/{run} also comes from {origin[algo, task, run]}")
        origin[algo, task, run] = path
        steps, score = read_evaluations(path)
        parts.append(pd.DataFrame({"algorithm": algo, "task": task, "run": run, "budget": steps, "score": score}))
    meta = ScoreMeta(budget_unit="env_steps", score_kind="eval", source=", ".join(str(p) for p in paths),
                     notes=("score = mean return over each evaluation's episodes (EvalCallback results)",))
    return ScoreTable.from_frame(pd.concat(parts, ignore_index=True), meta, where=str(files[0]), line_offset=1)
