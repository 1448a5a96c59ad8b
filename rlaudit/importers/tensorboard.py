"""TensorBoard event logs (``events.out.tfevents.*``) written by Stable-Baselines3, RL Zoo and CleanRL.

Files are read one at a time with TensorBoard's own record reader
(``tensorboard.backend.event_processing.event_file_loader.RawEventFileLoader``, which streams records); only
the points of the wanted tags are kept, so memory grows with the points imported, never with a folder's
size. (Chosen by measurement: ``bench/bench_tensorboard_import.py``, figures in ``docs/importers.md``.)

Tag. Per run, the first tag of ``tag`` (comma-separated) that the run logged is read. The default list, in
order: ``eval/mean_reward`` (SB3 / RL Zoo ``EvalCallback``: mean return of separate evaluation episodes,
``score_kind = eval``), ``charts/episodic_return`` (CleanRL: the return of each *training* episode as it
ends, ``train``) and ``rollout/ep_rew_mean`` (SB3: mean return of the last 100 training episodes, ``train``,
only a fallback). A run without any of them is an error naming its file and the tags it has.

Algorithm, task, run, from the run folder (the folder holding the event file):

- ``<task>__<algorithm>__<seed>__<time>`` (CleanRL ``runs/{env_id}__{exp_name}__{seed}__{time}``, also RL Zoo
  with ``--track``): as named, run = seed;
- ``<name>_<n>`` (SB3 ``tensorboard_log=DIR`` writes ``DIR/<tb_log_name>_<n>``, ``tb_log_name`` defaulting to
  the class name ``PPO``; RL Zoo ``--tensorboard-log DIR`` writes ``DIR/<env>/<PPO>_<n>``): algorithm = name,
  run = n, task = the folder above (RL Zoo: the env id; plain SB3: ``DIR``'s name, so pass ``task``);
- any other folder: run = the folder's name; ``algorithm`` and ``task`` must be given.

Options ``algorithm`` and ``task`` override the layout; ``run_from`` is a regular expression searched in each
event file's path whose named groups ``algorithm`` / ``task`` / ``run`` (or its first group: the run)
override it too. Budget = the event step (SB3 ``num_timesteps``, CleanRL ``global_step``: env steps); several
values at one step (CleanRL: two environments ending an episode at the same step) are averaged. With
``budgets`` each run is read at those budgets by the resampling rule of :mod:`rlaudit.importers.curves`.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from rlaudit.errors import InputError, did_you_mean
from rlaudit.importers._common import check_options, expand
from rlaudit.importers._logs import (CLEANRL_RUN, READ_OPTIONS, TRAIN_NOTE, Reader, apply_run_from, compile_run_from,
                                     finish, tag_list)
from rlaudit.scores import ScoreMeta, ScoreTable

OPTIONS = {
    "tag": "scalar tag(s), comma-separated, first found per run wins (default: eval/mean_reward, "
           "charts/episodic_return, rollout/ep_rew_mean)",
    "score_kind": "eval or train for tags outside the default list (default: eval for eval/..., else train)",
    "algorithm": "algorithm name (default: from the run folder's name)",
    "task": "task name (default: from the run folder's name or the folder above it)",
    "run_from": "regular expression searched in each event file's path; groups algorithm/task/run (or group 1 = run)",
    **READ_OPTIONS,
}
_SB3 = re.compile(r"^(?P<algorithm>.+)_(?P<run>\d+)$")


def is_event_file(path: Path) -> bool:
    """True for a TensorBoard event file name (``events.out.tfevents.<time>.<host>...``)."""
    return "tfevents" in path.name and not path.name.endswith(".meta.json")


def parse_layout(event_file: Path) -> tuple[str | None, str | None, str]:
    """``(algorithm, task, run)`` from the run folder's name (see the module docstring); ``None`` = unknown."""
    run_dir = event_file.parent
    m = CLEANRL_RUN.match(run_dir.name)
    if m:
        return m.group("algorithm"), m.group("task"), m.group("run")
    m = _SB3.match(run_dir.name)
    if m:
        return m.group("algorithm"), run_dir.parent.name or None, m.group("run")
    return None, None, run_dir.name


class _LoaderLog(logging.Handler):
    """Collects what TensorBoard's loader reports about a record it stopped at (it logs, never raises)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.stops: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Truncated record in"):
            self.stops.append(str(record.args[-1]) if record.args else record.getMessage())


def read_scalars(path: Path, tags: set[str]) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], set[str], str]:
    """Stream one event file; return the points of ``tags``, every scalar tag seen, and a note ('' if none).

    Returns:
        ``({tag: (steps (n,), values (n,))}, all scalar tags, note)``: points in file order.

    Raises:
        InputError: not an event file, a corrupt record (checksum), a record that is not an Event, a
            non-finite value or a negative step, naming the file, the record and the tag.
    """
    from google.protobuf.message import DecodeError
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tb_logging, tensor_util

    points: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    seen: set[str] = set()
    log = _LoaderLog()
    logger = tb_logging.get_logger()
    old_level = logger.level
    logger.addHandler(log)
    logger.setLevel(logging.DEBUG)
    n_records = 0
    try:
        for n_records, raw in enumerate(RawEventFileLoader(str(path)).Load(), start=1):
            try:
                event = event_pb2.Event.FromString(raw)
            except DecodeError:
                raise InputError(f"{path}: record {n_records} is not a TensorBoard event; not an event file?") from None
            if n_records == 1 and not event.file_version:
                raise InputError(f"{path}: not a TensorBoard event file (its first record has no file_version)")
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = float(value.simple_value)
                elif kind == "tensor" and value.metadata.plugin_data.plugin_name in ("scalars", ""):
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "fiu":
                        continue
                    number = float(array.reshape(()))
                else:
                    continue
                seen.add(value.tag)
                if value.tag not in tags:
                    continue
                if not np.isfinite(number):
                    raise InputError(f"{path}: tag {value.tag!r} at step {event.step} is not finite ({number}); "
                                     f"record {n_records}")
                if event.step < 0:
                    raise InputError(f"{path}: tag {value.tag!r}: negative step {event.step} at record {n_records}")
                steps, values = points[value.tag]
                steps.append(int(event.step))
                values.append(number)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        logger.removeHandler(log)
        logger.setLevel(old_level)
    note = ""
    if log.stops:
        stop = log.stops[0]
        if "crc32" in stop or n_records == 0:
            what = "a corrupt record (checksum mismatch)" if n_records else "no readable record"
            raise InputError(f"{path}: not a TensorBoard event file or damaged: {what} after {n_records} "
                             f"record(s)")
        note = f"{path}: the last record is cut off (a run stopped while writing); the {n_records} before it are read"
    if n_records == 0:
        raise InputError(f"{path}: empty event file (no records)")
    return {t: (np.asarray(s, dtype=np.int64), np.asarray(v, dtype=np.float64)) for t, (s, v) in points.items()}, \
        seen, note


def _identify(path: Path, options: dict, pattern: re.Pattern | None) -> tuple[str, str, str]:
    algo, task, run = parse_layout(path)
    ids = apply_run_from(pattern, path.as_posix(), {"algorithm": algo, "task": task, "run": run}, str(path),
                         "this path")
    algo, task = options.get("algorithm") or ids["algorithm"], options.get("task") or ids["task"]
    for key, value in (("algorithm", algo), ("task", task)):
        if not value:
            raise InputError(f"{path}: cannot tell the {key} from the folder layout ({path.parent.name!r} is neither "
                             f"<env>__<exp>__<seed>__<time> nor <name>_<n>); pass --{key} or --run-from")
    return str(algo), str(task), str(ids["run"])


def import_tensorboard(paths: list[Path], **options) -> ScoreTable:
    """Import TensorBoard event logs, one file at a time (see the module docstring).

    Args:
        paths: event files, or folders searched recursively for ``*tfevents*`` files.
        **options: see :data:`OPTIONS`.

    Returns:
        One row per (algorithm, task, run, step) (or per budget with ``budgets``), ``budget_unit`` from
        the option (default ``env_steps``); a per-row ``score_kind`` column when kinds differ.
    """
    check_options(options, OPTIONS, "tensorboard importer")
    wanted = tag_list(options)
    pattern = compile_run_from(options)
    reader = Reader(options, "tensorboard importer")
    files = expand(paths, is_event_file, "TensorBoard event files (events.out.tfevents.*)")

    # One run = one run folder; its event files (a restarted writer adds one) are read in name order.
    by_run: dict[tuple[str, str, str], list[Path]] = {}
    folder_of: dict[tuple[str, str, str], Path] = {}
    for path in files:
        key = _identify(path, options, pattern)
        if key in folder_of and folder_of[key] != path.parent:
            raise InputError(f"{path}: run {'/'.join(key)} also comes from {folder_of[key]}; pass --run-from to "
                             f"tell the runs apart")
        folder_of[key] = path.parent
        by_run.setdefault(key, []).append(path)

    tag_names = {t for t, _ in wanted}
    parts, notes, n_by_tag, n_overwritten = [], [], defaultdict(int), 0
    for key, run_files in by_run.items():
        merged: dict[str, dict[int, list[float]]] = defaultdict(dict)
        seen: set[str] = set()
        for path in sorted(run_files):
            points, tags, note = read_scalars(path, tag_names)
            seen |= tags
            if note:
                notes.append(note)
            for tag, (steps, values) in points.items():
                fresh: dict[int, list[float]] = defaultdict(list)
                for s, v in zip(steps.tolist(), values.tolist()):
                    fresh[s].append(v)
                n_overwritten += sum(1 for s in fresh if s in merged[tag])
                merged[tag].update(fresh)
        chosen = next(((t, k) for t, k in wanted if merged.get(t)), None)
        if chosen is None:
            asked = ", ".join(t for t, _ in wanted)
            hint = did_you_mean(wanted[0][0], sorted(seen)) if options.get("tag") else ""
            raise InputError(f"{run_files[0]}: no scalar tag {asked}{hint} in this run; its tags: "
                             f"{', '.join(sorted(seen)) or 'none'} (pass --tag)")
        tag, kind = chosen
        n_by_tag[tag] += 1
        steps = np.array([s for s, vs in merged[tag].items() for _ in vs], dtype=np.int64)
        values = np.array([v for vs in merged[tag].values() for v in vs], dtype=np.float64)
        parts.append(reader.rows(key, steps, values, kind, str(run_files[0].parent)))
    unit = options.get("budget_unit") or "env_steps"
    frame, kind = finish(parts, str(paths[0]))
    notes.insert(0, "tags read: " + ", ".join(f"{t} ({k}) in {n_by_tag[t]} run(s)" for t, k in wanted if n_by_tag[t]))
    if any(k == "train" for t, k in wanted if n_by_tag[t]):
        notes.append(TRAIN_NOTE)
    if n_overwritten:
        notes.append(f"{n_overwritten} step(s) logged again in a later event file of the same run: the later value is read")
    notes += reader.notes(unit)
    meta = ScoreMeta(budget_unit=unit, score_kind=kind, source=", ".join(str(p) for p in paths), notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(files[0]), line_offset=1)
