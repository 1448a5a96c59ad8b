"""Dopamine baseline curves (``baselines/atari/data/<game>.json``, ``_CNN``, ``_Impala``; ``.json.gz`` too).

Each file is a flat JSON array of ``{"Iteration", "Value", "Agent"}`` records with **no run field**: runs
are recovered from record order (:func:`recover_runs`).

- *run-major* (legacy ``<game>.json``, MuJoCo): each agent's records are contiguous blocks, one per run,
  each with increasing iterations. A new block starts wherever the iteration does not increase.
- *iteration-major* (``_CNN`` / ``_Impala``): for each iteration, one record per run; the position within
  the iteration's group is the run.

Budget: iteration ``i`` holds the mean return of the training episodes that ended during the ``i``-th
block of ``budget_per_iteration`` frames (1,000,000 frames = 250,000 agent steps at frame-skip 4), so
it is reported at budget ``(i + 1) * budget_per_iteration``: iteration 0 -> 1M frames, iteration 199 ->
200M frames. Values are training returns (``score_kind = "train"``). The game name is the file stem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError, format_rows
from rlaudit.importers._common import (check_budget, check_options, check_record, expand, load_json, opt_budgets,
                                       opt_int, strip_suffixes, track, type_name)
from rlaudit.importers.curves import resample, resample_rule_note
from rlaudit.scores import ScoreMeta, ScoreTable

VARIANTS = ("legacy", "CNN", "Impala", "all")
ON_MISSING = ("drop", "error")
RECORD_KEYS = ("Iteration", "Value", "Agent")

OPTIONS = {
    "variant": "which files of a folder to import: legacy (<game>.json), CNN, Impala or all (default legacy)",
    "n_runs": "runs per agent; a file whose record order does not split into this many runs is refused "
              "(default: the largest count found among the file's agents)",
    "on_missing": "iteration-major files: what to do from the first iteration that lacks a run's record: "
                  "drop (default; those records are left out and reported) or error",
    "budget_per_iteration": "budget of one iteration (default 1,000,000 frames)",
    "budget_unit": "unit of the budget (default frames)",
    "budgets": "read each run at these budgets (last iteration ending at or before; default: every iteration)",
    "max_staleness": "with budgets: how far before a budget the last iteration may end (default: one iteration)",
    "agents": "keep only these agents (list of exact Agent strings)",
    "label": "algorithm names: agent (default, the Agent string) or agent+variant ('Rainbow (CNN)'), "
             "to compare network variants in one table",
}
LABELS = ("agent", "agent+variant")


@dataclass(frozen=True)
class Recovery:
    """Runs recovered from one agent's record order."""

    run: np.ndarray
    """Shape ``(n_records,)``: run index of each record, ``-1`` for a record that is left out."""
    layout: str
    """``run-major`` or ``iteration-major``."""
    n_runs: int
    """Number of runs recovered."""
    notes: tuple[str, ...] = ()
    """Missing or left-out records, in words."""


def recover_runs(iterations: np.ndarray, n_runs: int | None = None, on_missing: str = "drop",
                 where: str = "records", positions: np.ndarray | None = None) -> Recovery:
    """Assign each record of one agent to a run, from record order alone.

    A recovered run never mixes records of two true runs: when the order cannot be split consistently
    the function raises instead of guessing.

    Args:
        iterations: shape ``(n_records,)``, the agent's ``Iteration`` values in file order.
        n_runs: expected number of runs (``None``: as many as the order shows).
        on_missing: iteration-major only: ``"drop"`` leaves out every record from the first iteration that
            has fewer than ``n_runs`` records (run identity is ambiguous from there), ``"error"`` raises.
        where: file and agent, for messages.
        positions: shape ``(n_records,)``, 1-based record positions in the file, for messages.

    Returns:
        A :class:`Recovery`.

    Raises:
        InputError: naming ``where`` and the record position where the order breaks.
    """
    it = np.asarray(iterations, dtype=np.int64)
    n = it.size
    pos = np.arange(1, n + 1) if positions is None else np.asarray(positions)
    if n == 0:
        raise InputError(f"{where}: no records")
    d = np.diff(it)
    repeats, restarts = np.flatnonzero(d == 0), np.flatnonzero(d < 0)
    if repeats.size and restarts.size:
        raise InputError(f"{where}: record order cannot be split into runs: iteration {it[repeats[0] + 1]} repeats "
                         f"at record {pos[repeats[0] + 1]} (iteration-major) but iteration goes back from "
                         f"{it[restarts[0]]} to {it[restarts[0] + 1]} at record {pos[restarts[0] + 1]} (run-major)")
    notes: list[str] = []
    if repeats.size:  # iteration-major: groups of equal iterations, position in group = run
        starts = np.flatnonzero(np.r_[True, d != 0])
        sizes = np.diff(np.r_[starts, n])
        expected = int(sizes.max()) if n_runs is None else n_runs
        too_big = np.flatnonzero(sizes > expected)
        if too_big.size:
            g = too_big[0]
            raise InputError(f"{where}: record order cannot be split into {expected} runs: iteration {it[starts[g]]} "
                             f"has {sizes[g]} records (records {pos[starts[g]]}–{pos[starts[g] + sizes[g] - 1]})")
        run = np.arange(n) - np.repeat(starts, sizes)
        short = np.flatnonzero(sizes < expected)
        if short.size:
            g = short[0]
            first = starts[g]
            msg = (f"iteration {it[first]} has {sizes[g]} of {expected} records (record {pos[first]}), so run "
                   f"identity is ambiguous from there")
            if on_missing == "error":
                raise InputError(f"{where}: {msg}")
            run[first:] = -1
            notes.append(f"{where}: {msg}; left out {n - first} records of iterations {it[first]}–{it[-1]}")
        gaps = _gaps(np.unique(it))
        if gaps:
            notes.append(f"{where}: no records for iteration(s) {gaps}")
        return Recovery(run, "iteration-major", expected, tuple(notes))
    # run-major (or a single run): a block per run, a new block wherever the iteration does not increase
    starts = np.flatnonzero(np.r_[True, d < 0])
    n_blocks = starts.size
    if n_runs is not None and n_blocks != n_runs:
        raise InputError(f"{where}: record order cannot be split into {n_runs} runs: it holds {n_blocks} "
                         f"increasing block(s) of iterations (starting at record(s) "
                         f"{format_rows(pos[starts].tolist())}); a run may be missing or two runs may have merged")
    run = np.repeat(np.arange(n_blocks), np.diff(np.r_[starts, n]))
    full = np.unique(it)
    for k, (a, b) in enumerate(zip(starts, np.r_[starts[1:], n])):
        missing = np.setdiff1d(full, it[a:b], assume_unique=True)
        if missing.size:
            notes.append(f"{where}: run {k} (records {pos[a]}–{pos[b - 1]}) has no record for iteration(s) "
                         f"{_ranges(missing)}")
    return Recovery(run, "run-major", n_blocks, tuple(notes))


def _ranges(values: np.ndarray) -> str:
    """``[3, 4, 5, 9]`` -> ``"3–5, 9"``."""
    values = np.asarray(values)
    if values.size == 0:
        return ""
    breaks = np.flatnonzero(np.diff(values) != 1)
    lo = np.r_[values[0], values[breaks + 1]]
    hi = np.r_[values[breaks], values[-1]]
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in zip(lo, hi)]
    return ", ".join(parts[:6]) + (f" and {len(parts) - 6} more ranges" if len(parts) > 6 else "")


def _gaps(unique_iterations: np.ndarray) -> str:
    full = np.arange(unique_iterations[0], unique_iterations[-1] + 1)
    return _ranges(np.setdiff1d(full, unique_iterations))


def variant_of(path: Path) -> str:
    """``pong_CNN.json.gz`` -> ``CNN``; ``pong.json`` -> ``legacy``."""
    stem = strip_suffixes(path)
    for v in ("CNN", "Impala"):
        if stem.endswith("_" + v):
            return v
    return "legacy"


def game_of(path: Path) -> str:
    """The game (task) name: the file stem without the variant suffix."""
    stem = strip_suffixes(path)
    for v in ("_CNN", "_Impala"):
        if stem.endswith(v):
            return stem[: -len(v)]
    return stem


def _is_data_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith((".json", ".json.gz")) and not name.endswith((".vg.json", ".vg.json.gz"))


def read_records(path: Path, content: bytes | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse a Dopamine file into ``(agents, iterations, values)``, each of shape ``(n_records,)``.

    Raises:
        InputError: naming the file and record position of the first bad record.
    """
    data = load_json(path, content)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON array of {{Iteration, Value, Agent}} records, "
                         f"got a {type_name(data)}")
    if not data:
        raise InputError(f"{path}: the array of records is empty")
    try:  # fast path: C-level passes over the records; the slow scan below only runs to name a bad record
        if set(map(type, data)) != {dict} or set(map(len, data)) != {3}:
            raise TypeError
        agents = [r["Agent"] for r in data]
        it_list = [r["Iteration"] for r in data]
        val_list = [r["Value"] for r in data]
        if (set(map(type, agents)) != {str} or not set(map(type, it_list)) <= {int, float}
                or not set(map(type, val_list)) <= {int, float}):
            raise TypeError
        its = np.array(it_list, dtype=np.float64)
        vals = np.array(val_list, dtype=np.float64)
        if not (np.all(np.isfinite(its)) and np.all(its == np.round(its)) and np.all(its >= 0)
                and np.all(its < 2.0**63) and np.all(np.isfinite(vals)) and all(agents)):
            raise TypeError
    except (TypeError, KeyError, ValueError):
        _find_bad_record(path, data)
        raise InputError(f"{path}: records are not {{Iteration, Value, Agent}} objects") from None
    return np.array(agents, dtype=object), its.astype(np.int64), vals


def _find_bad_record(path: Path, data: list) -> None:
    for i, r in enumerate(data, start=1):
        where = f"{path}: record {i}"
        check_record(r, RECORD_KEYS, where, "{Iteration, Value, Agent}")
        if not isinstance(r["Agent"], str) or not r["Agent"]:
            raise InputError(f"{where}: 'Agent' must be a non-empty string, got {type_name(r['Agent'])}")
        it = r["Iteration"]
        if isinstance(it, int) and not isinstance(it, bool) and it >= 2**63:  # before np.isfinite, which fails on it
            raise InputError(f"{where}: 'Iteration' {it!r} is larger than 2^63 - 1")
        if isinstance(it, bool) or not isinstance(it, (int, float)) or not np.isfinite(it) or it != int(it) or it < 0:
            raise InputError(f"{where}: 'Iteration' must be a whole number >= 0, got {it!r}")
        if it >= 2**63:
            raise InputError(f"{where}: 'Iteration' {it!r} is larger than 2^63 - 1")
        v = r["Value"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise InputError(f"{where}: 'Value' must be a finite number, got {v!r}")


def import_dopamine(paths: list[Path], **options) -> ScoreTable:
    """Import Dopamine baseline files (one game per file) into a tidy table.

    Args:
        paths: files or folders; a folder imports every game of ``options["variant"]``.
        **options: see :data:`OPTIONS`.

    Returns:
        Table with one row per (agent, game, run, budget); ``meta.score_kind = "train"``.
    """
    check_options(options, OPTIONS, "dopamine importer")
    variant = options.get("variant", "legacy")
    if variant not in VARIANTS:
        raise InputError(f"dopamine importer: option 'variant' must be one of {', '.join(VARIANTS)}, got {variant!r}")
    on_missing = options.get("on_missing", "drop")
    if on_missing not in ON_MISSING:
        raise InputError(f"dopamine importer: option 'on_missing' must be one of {', '.join(ON_MISSING)}, "
                         f"got {on_missing!r}")
    n_runs = opt_int(options, "n_runs", None, "dopamine importer", minimum=1)
    per_it = opt_int(options, "budget_per_iteration", 1_000_000, "dopamine importer", minimum=1)
    unit = options.get("budget_unit", "frames")
    budgets = opt_budgets(options, "budgets", "dopamine importer")
    max_staleness = opt_int(options, "max_staleness", per_it, "dopamine importer", minimum=0)
    label = options.get("label", "agent")
    if label not in LABELS:
        raise InputError(f"dopamine importer: option 'label' must be one of {', '.join(LABELS)}, got {label!r}")
    agents_keep = options.get("agents")
    if isinstance(agents_keep, str):  # from the command line: a comma-separated list
        agents_keep = [a.strip() for a in agents_keep.split(",") if a.strip()]
    if agents_keep is not None and (not isinstance(agents_keep, (list, tuple)) or not agents_keep):
        raise InputError("dopamine importer: option 'agents' must be a non-empty list of agent names")

    files = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files += [f for f in expand([p], _is_data_file, "Dopamine data files (<game>.json[.gz])")
                      if variant == "all" or variant_of(f) == variant]
            if not files:
                raise InputError(f"{p}: no Dopamine files of variant {variant!r} in this folder")
        else:
            files += expand([p], _is_data_file, "Dopamine data files")
    frames, notes = [], []
    found_agents: set[str] = set()
    tasks_seen: dict[str, Path] = {}
    for path in track(files, "importing Dopamine files"):
        task = game_of(path)
        suffix = f" ({variant_of(path)})" if label == "agent+variant" else ""
        key = (task, suffix)
        if key in tasks_seen:
            raise InputError(f"{path}: game {task!r} also comes from {tasks_seen[key]}; import one variant at a time "
                             "or use label = 'agent+variant'")
        tasks_seen[key] = path
        frame, file_notes, agents = _import_file(path, task, n_runs, on_missing, per_it, budgets, max_staleness, unit,
                                                 agents_keep, suffix)
        found_agents |= agents
        frames.append(frame)
        notes += file_notes
    if agents_keep is not None:
        absent = [a for a in agents_keep if a not in found_agents]
        if absent:
            from rlaudit.errors import did_you_mean
            raise InputError(f"dopamine importer: agent {absent[0]!r} is in no file{did_you_mean(absent[0], found_agents)}")
    frame = pd.concat(frames, ignore_index=True)
    if budgets is not None:
        notes.insert(0, resample_rule_note("last", max_staleness, unit))
    notes.insert(0, f"Dopamine iteration i is reported at budget (i + 1) * {per_it:,} {unit}; values are "
                    "training returns (mean return of the episodes that ended in that iteration)")
    meta = ScoreMeta(budget_unit=unit, score_kind="train", source=", ".join(str(p) for p in paths), notes=tuple(notes))
    return ScoreTable.from_frame(frame, meta, where=str(files[0]), line_offset=1)


def _import_file(path, task, n_runs, on_missing, per_it, budgets, max_staleness, unit, agents_keep, suffix=""):
    agents, its, vals = read_records(path)
    last = int(its.max())  # budgets are (iteration + 1) * per_it: computed exactly here, never wrapped in int64
    check_budget((last + 1) * per_it, f"{path}: record {int(np.argmax(its)) + 1}",
                 f"(Iteration {last:,} + 1) x {per_it:,} {unit}")
    order = list(dict.fromkeys(agents.tolist()))
    by_agent = {a: np.flatnonzero(agents == a) for a in order}
    if n_runs is None:  # infer from the whole file so that one agent's missing run is still caught
        n_runs = max(_count_runs(its[idx]) for idx in by_agent.values())
        if len(order) == 1:
            n_runs = None
    notes: list[str] = []
    names, runs, budget_parts, scores = [], [], [], []  # one entry per (agent, run) series
    for agent in order:
        if agents_keep is not None and agent not in agents_keep:
            continue
        idx = by_agent[agent]
        rec = recover_runs(its[idx], n_runs, on_missing, where=f"{path}: agent {agent!r}", positions=idx + 1)
        notes += rec.notes
        keep = rec.run >= 0
        run, it, val = rec.run[keep], its[idx][keep], vals[idx][keep]
        if budgets is None:
            names.append(np.full(run.size, agent + suffix, dtype=object))
            runs.append(run)
            budget_parts.append((it + 1) * per_it)
            scores.append(val)
            continue
        b = np.asarray(budgets, dtype=np.int64)
        short: dict[int, list[str]] = {}
        for r in np.unique(run):
            sel = run == r
            read = resample((it[sel] + 1) * per_it, val[sel], b, "last", max_staleness)
            ok = ~np.isnan(read)
            for budget in b[~ok]:
                short.setdefault(int(budget), []).append(str(r))
            names.append(np.full(int(ok.sum()), agent + suffix, dtype=object))
            runs.append(np.full(int(ok.sum()), r))
            budget_parts.append(b[ok])
            scores.append(read[ok])
        for budget, rs in short.items():
            notes.append(f"{path}: agent {agent!r}: run(s) {', '.join(rs)} have no iteration ending within "
                         f"{max_staleness:,} {unit} before budget {budget:,}")
    if not names:
        return pd.DataFrame(columns=["algorithm", "task", "run", "budget", "score"]), notes, set(order)
    run_all = np.concatenate(runs)
    frame = pd.DataFrame({"algorithm": np.concatenate(names), "task": np.full(run_all.size, task, dtype=object),
                          "run": run_all.astype(str).astype(object), "budget": np.concatenate(budget_parts),
                          "score": np.concatenate(scores)})
    return frame, notes, set(order)


def _count_runs(it: np.ndarray) -> int:
    d = np.diff(it)
    if np.any(d == 0):
        starts = np.flatnonzero(np.r_[True, d != 0])
        return int(np.diff(np.r_[starts, it.size]).max())
    return int(np.sum(d < 0)) + 1
