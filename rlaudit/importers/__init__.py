"""Importers: published score formats -> the tidy :class:`~rlaudit.scores.ScoreTable`.

Each format has a module; :data:`IMPORTERS` maps the format name to its entry point (imported on use).
:func:`import_path` converts paths. A published protocol's ``[data]`` section is checked and loaded by
:mod:`rlaudit.importers.data_section`; ``rlaudit.sources`` wraps tables as audit sources.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from rlaudit.errors import InputError, did_you_mean
from rlaudit.importers._common import content_sha256  # noqa: F401 (public: how protocols state sha256)
from rlaudit.scores import ScoreTable


@dataclass(frozen=True)
class ImporterSpec:
    """One registered format."""

    entry: str
    """``"module:function"`` taking ``(paths: list[Path], **options) -> ScoreTable``."""
    summary: str
    """One line for ``rlaudit import --help``."""
    options: str
    """``"module:OPTIONS"``, the dict of accepted options with one-line descriptions."""


IMPORTERS: dict[str, ImporterSpec] = {
    "dopamine": ImporterSpec("rlaudit.importers.dopamine:import_dopamine",
                             "Dopamine baseline curves (<game>.json[.gz], _CNN, _Impala); runs from record order",
                             "rlaudit.importers.dopamine:OPTIONS"),
    "rliable": ImporterSpec("rlaudit.importers.rliable_sets:import_rliable",
                            "rliable score sets: {task: [runs]}, {budget: {task: …}}, {algorithm: {task: …}}, records",
                            "rlaudit.importers.rliable_sets:OPTIONS"),
    "zoo": ImporterSpec("rlaudit.importers.zoo:import_zoo",
                        "SB3 EvalCallback / RL Zoo logs (logs/<algo>/<env>_<id>/evaluations.npz)",
                        "rlaudit.importers.zoo:OPTIONS"),
    "curves": ImporterSpec("rlaudit.importers.curves:import_curves",
                           "per-seed curves [{task, method, seed, xs, ys}] (DreamerV3), read at budgets",
                           "rlaudit.importers.curves:OPTIONS"),
    "tensorboard": ImporterSpec("rlaudit.importers.tensorboard:import_tensorboard",
                                "TensorBoard event logs of SB3 / RL Zoo / CleanRL runs (events.out.tfevents.*)",
                                "rlaudit.importers.tensorboard:OPTIONS"),
    "wandb": ImporterSpec("rlaudit.importers.wandb:import_wandb",
                          "W&B exports: a panel's CSV (Step, '<run> - <metric>'), the runs table (Name, config, "
                          "summary), a run's history() saved as CSV/Parquet",
                          "rlaudit.importers.wandb:OPTIONS"),
    "openrlbenchmark": ImporterSpec("rlaudit.importers.wandb:import_openrlbenchmark",
                                    "openrlbenchmark's per-run cache: dataset/<entity>/<project>/<run>/run_df.csv + "
                                    "run.json", "rlaudit.importers.wandb:OPENRLBENCHMARK_OPTIONS"),
    "tidy": ImporterSpec("rlaudit.importers.tables:import_tidy", "tidy CSV / Parquet (the native format)",
                         "rlaudit.importers.tables:TIDY_OPTIONS"),
    "wide": ImporterSpec("rlaudit.importers.tables:import_wide",
                         "wide CSV copied from a paper: one score column per algorithm (or --pivot key)",
                         "rlaudit.importers.tables:WIDE_OPTIONS"),
}


def _load(ref: str):
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)


def importer_options(fmt: str) -> dict[str, str]:
    """Accepted options of format ``fmt`` (name -> description)."""
    return _load(importer_spec(fmt, "format").options)


def importer_spec(fmt: str, where: str) -> ImporterSpec:
    """The registered format ``fmt``; an unknown name raises :class:`InputError` naming ``where``."""
    if fmt not in IMPORTERS:
        raise InputError(f"{where}: unknown format {fmt!r}{did_you_mean(fmt, IMPORTERS)}; "
                         f"known formats: {', '.join(IMPORTERS)}")
    return IMPORTERS[fmt]


def import_path(fmt: str | None, paths, **options) -> ScoreTable:
    """Import ``paths`` (files or folders) with importer ``fmt`` (``None``: sniff from the first path).

    Args:
        fmt: a key of :data:`IMPORTERS`, or ``None``.
        paths: one path or a list of paths.
        **options: importer options (see each module's ``OPTIONS``).

    Returns:
        The validated :class:`ScoreTable`.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("no input paths given")
    for p in paths:
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
    if fmt is None:
        from rlaudit.importers.sniff import sniff

        fmt = sniff(paths[0])
    return _load(importer_spec(fmt, "--format").entry)(paths, **options)
