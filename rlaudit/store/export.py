"""Read a store: the tidy score table, the run status, what the store records about its protocol.

Every SQL query that reads a store lives here or in :mod:`rlaudit.store.sqlite`; other stages call these
functions (``rlaudit.sources`` turns a store into an audit source).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from rlaudit.errors import InputError
from rlaudit.run.spec import RunSpec, is_timed_out
from rlaudit.scores import ScoreMeta, ScoreTable
from rlaudit.store.notes import read_notes
from rlaudit.store.sqlite import lock_holder, open_readonly, record_checksum, schema_version

EVAL_PROTOCOLS: tuple[str, ...] = ("final", "max")
"""How a run's score at a budget is read: ``final`` = the evaluation at that budget; ``max`` = the best
evaluation up to that budget (inflates results; offered so that an audit can show by how much)."""


UNVERIFIED_NOTE = ("the store was written with schema version 1, before evaluations carried checksums: its "
                   "records cannot be verified (running 'rlaudit run' on it again adds the checksums)")


def _evaluations(con, path: Path) -> pd.DataFrame:
    """Evaluations of ``done`` runs, each record's checksum verified (schema 2 on).

    Raises:
        InputError: naming the first record whose content does not match its checksum.
    """
    checked = schema_version(con) >= 2
    rows = con.execute("SELECT e.run_id, e.env_steps, e.returns, e.lengths, e.wall_time"
                       + (", e.checksum" if checked else "") + " FROM evaluations e JOIN runs r USING (run_id) "
                       "WHERE r.status = 'done' ORDER BY e.run_id, e.env_steps").fetchall()
    out = []
    for r in rows:
        if checked:
            _verify(r, path)
        try:
            mean = float(np.mean(json.loads(r[2])))
        except (ValueError, TypeError) as exc:
            raise InputError(f"{path}: the evaluation of run {r[0]} at {r[1]} env steps is unreadable ({exc}); "
                             f"the store is damaged") from None
        out.append((r[0], int(r[1]), mean))
    return pd.DataFrame(out, columns=["run_id", "env_steps", "mean_return"])


def _verify(row, path: Path) -> None:
    """Raise when an evaluation row ``(run_id, env_steps, returns, lengths, wall_time, checksum)`` was altered."""
    if record_checksum(*row[:5]) != row[5]:
        raise InputError(f"{path}: the evaluation of run {row[0]} at {row[1]} env steps does not match its "
                         f"checksum: the store was changed or damaged after it was written; restore a backup "
                         f"or rerun that run")


def run_evaluations(path: str | os.PathLike, run_id: str) -> dict[int, tuple[list, list]]:
    """``env_steps -> (returns, lengths)`` of one run as stored, each record's checksum verified (schema 2 on)."""
    path = Path(path)
    con = open_readonly(path)
    try:
        checked = schema_version(con) >= 2
        rows = con.execute("SELECT run_id, env_steps, returns, lengths, wall_time" + (", checksum" if checked else "")
                           + " FROM evaluations WHERE run_id = ? ORDER BY env_steps", (run_id,)).fetchall()
    finally:
        con.close()
    out = {}
    for r in rows:
        if checked:
            _verify(r, path)
        out[int(r[1])] = (json.loads(r[2]), json.loads(r[3]))
    return out


def export_table(path: str | os.PathLike, eval_protocol: str = "final") -> ScoreTable:
    """The store's finished runs as a tidy :class:`ScoreTable`, one row per (algorithm, task, seed, regime).

    A run's score at a budget is the mean return over its evaluation episodes at that budget (``final``),
    or the largest such mean among its evaluations up to that budget (``max``). Only ``done`` runs count.

    Args:
        path: the store.
        eval_protocol: ``final`` or ``max``.

    Returns:
        Columns ``algorithm, task, run, budget, score, score_kind, regime, regime_kind, eval_protocol``.

    Raises:
        InputError: bad store, unknown protocol, or no finished run yet.
    """
    if eval_protocol not in EVAL_PROTOCOLS:
        raise InputError(f"--protocol: {eval_protocol!r} is not one of {', '.join(EVAL_PROTOCOLS)}")
    path = Path(path)
    con = open_readonly(path)
    try:
        regimes = con.execute("SELECT name, budget, kind AS regime_kind, run_regime FROM regimes ORDER BY budget").fetchall()
        runs = {r["run_id"]: r for r in con.execute(
            "SELECT run_id, task, label, seed, regime, status FROM runs")}
        evals = _evaluations(con, path)
        verified = schema_version(con) >= 2
    finally:
        con.close()
    done = [r for r in runs.values() if r["status"] == "done"]
    if not done:
        counts = _count(runs.values())
        raise InputError(f"{path}: no finished run yet ({counts}); run 'rlaudit run' first")
    by_run = {rid: g for rid, g in evals.groupby("run_id", sort=False)}
    rows = []
    overshoot: dict[str, int] = {}
    for r in sorted(done, key=lambda r: r["run_id"]):
        g = by_run.get(r["run_id"])
        for name, budget, regime_kind, run_regime in regimes:
            if r["regime"] != run_regime:
                continue
            if g is None:
                raise InputError(f"{path}: run {r['run_id']} is marked done but has no evaluation; the store "
                                 f"is inconsistent")
            at = g[g["env_steps"] >= budget]
            if at.empty:
                raise InputError(f"{path}: run {r['run_id']} is marked done but has no evaluation at budget "
                                 f"{budget}; the store is inconsistent")
            final_steps = int(at["env_steps"].iloc[0])
            if final_steps > budget:
                overshoot[r["label"]] = max(overshoot.get(r["label"], 0), final_steps - budget)
            if eval_protocol == "final":
                score = float(at["mean_return"].iloc[0])
            else:
                score = float(g.loc[g["env_steps"] <= final_steps, "mean_return"].max())
            rows.append((r["label"], r["task"], str(r["seed"]), int(budget), score, "eval", name, regime_kind,
                         eval_protocol))
    frame = pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score", "score_kind", "regime",
                                        "regime_kind", "eval_protocol"])
    notes = [f"scores are mean returns over each evaluation's episodes; eval protocol '{eval_protocol}'"
             + (" (best evaluation up to each budget: inflates results)" if eval_protocol == "max" else "")]
    nested = [(n, b) for n, b, k, _ in regimes if k == "nested"]
    if len(nested) > 1:
        top = nested[-1][1]
        notes.append(f"nested budgets {', '.join(str(b) for _, b in nested[:-1])} are anytime readings of runs "
                     f"trained (schedules included) for {top} env steps, not runs trained for those budgets")
    sep = [(n, b) for n, b, k, _ in regimes if k == "separate"]
    if sep:
        notes.append("separate regimes " + ", ".join(f"{n} ({b})" for n, b in sep)
                     + " are runs trained for that budget")
    for label, extra in sorted(overshoot.items()):
        notes.append(f"{label} trains in whole rollouts: its evaluation at a budget came up to {extra} env steps "
                     f"after it (the steps actually trained are in the store)")
    if not verified:
        notes.append(UNVERIFIED_NOTE)
    missing = len(runs) - len(done)
    if missing:
        notes.append(f"{missing} of {len(runs)} runs are not finished ({_count(runs.values())}) and are left out")
    notes.extend(read_notes(path))
    meta = ScoreMeta(budget_unit="env_steps", score_kind="eval", source=str(path), notes=tuple(notes),
                     runs_planned=len(runs), runs_finished=len(done))
    return ScoreTable.from_frame(frame, meta, where=str(path), line_offset=1)


def _count(runs) -> str:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs"


def store_status(path: str | os.PathLike) -> pd.DataFrame:
    """Runs per (algorithm, task, regime) by status.

    ``running`` is reported as ``interrupted`` when no driver holds the store, and a failed run stopped at its
    wall-time limit (:func:`~rlaudit.run.spec.is_timed_out`) as ``timed_out``.

    Returns:
        Columns ``algorithm, task, regime, done, running, interrupted, failed, timed_out, pending, total``.
    """
    path = Path(path)
    con = open_readonly(path)
    try:
        rows = con.execute("SELECT label, task, regime, status, error FROM runs").fetchall()
    finally:
        con.close()
    live = lock_holder(path)
    cols = ["done", "running", "interrupted", "failed", "timed_out", "pending"]

    def shown(status: str, error: str | None) -> str:
        if status == "running" and not live:
            return "interrupted"
        return "timed_out" if status == "failed" and is_timed_out(error) else status

    df = pd.DataFrame([(r[0], r[1], r[2], shown(r[3], r[4])) for r in rows],
                      columns=["algorithm", "task", "regime", "status"])
    if df.empty:
        return pd.DataFrame(columns=["algorithm", "task", "regime", *cols, "total"])
    out = (df.groupby(["algorithm", "task", "regime"], sort=True)["status"].value_counts().unstack(fill_value=0)
           .reindex(columns=cols, fill_value=0).reset_index())
    out["total"] = out[cols].sum(axis=1)
    out.columns.name = None
    return out


def failures(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``(run_id, last line of the traceback)`` of every failed run."""
    con = open_readonly(path)
    try:
        rows = con.execute("SELECT run_id, error FROM runs WHERE status='failed' ORDER BY run_id").fetchall()
    finally:
        con.close()
    return [(r[0], ((r[1] or "").strip().splitlines() or [""])[-1]) for r in rows]


def stored_protocol_text(path: str | os.PathLike) -> tuple[str, str]:
    """``(text, original path)`` of the protocol the store was made from (latest text with its hash)."""
    con = open_readonly(path)
    try:
        h = con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()
        row = con.execute("SELECT text, path FROM protocols WHERE hash=?", (h[0] if h else "",)).fetchone()
    finally:
        con.close()
    if row is None:
        raise InputError(f"{path}: the store has no protocol recorded")
    return row[0], row[1]


def stored_protocol_hash(path: str | os.PathLike) -> str | None:
    """Hash of the protocol the store was made for (``None`` when the store does not say)."""
    con = open_readonly(path)
    try:
        row = con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()
    finally:
        con.close()
    return row[0] if row else None


def done_run_ids(path: str | os.PathLike) -> set[str]:
    """Ids of the store's finished runs."""
    con = open_readonly(path)
    try:
        return {r[0] for r in con.execute("SELECT run_id FROM runs WHERE status='done'")}
    finally:
        con.close()


def stored_machines(path: str | os.PathLike) -> tuple[dict[str, str] | None, list[dict[str, str]]]:
    """The machine fingerprints a store records: ``(first writer's or None, those of later writers)``.

    ``None`` when the store predates fingerprints (``meta.machine`` absent); the list holds the fingerprints
    of drivers that resumed the store on another machine (``meta.machine_also_*``), whose runs may be among
    the store's (runs do not say which machine trained them).

    Raises:
        InputError: bad store, or a recorded fingerprint that is not a JSON object.
    """
    con = open_readonly(path)
    try:
        rows = con.execute("SELECT key, value FROM meta WHERE key = 'machine' OR key LIKE 'machine_also_%' "
                           "ORDER BY key").fetchall()
    finally:
        con.close()
    found: dict[str, dict[str, str]] = {}
    for key, value in rows:
        try:
            fingerprint = json.loads(value)
        except ValueError:
            fingerprint = None
        if not isinstance(fingerprint, dict):
            raise InputError(f"{path}: meta.{key} is not a machine fingerprint (a JSON object); the store is damaged")
        found[key] = {str(k): str(v) for k, v in fingerprint.items()}
    return found.pop("machine", None), list(found.values())


def run_machines(path: str | os.PathLike, run_id: str) -> list[str] | None:
    """The ``meta`` keys of the machines that trained ``run_id``, in order (several for a run resumed from a
    checkpoint written on another machine); ``None`` where the store does not record it."""
    con = open_readonly(path)
    try:
        if "machine" not in {row[1] for row in con.execute("PRAGMA table_info(runs)")}:
            return None
        row = con.execute("SELECT machine FROM runs WHERE run_id=?", (run_id,)).fetchone()
    finally:
        con.close()
    return row[0].split("+") if row and row[0] else None


def compute_used(path: str | os.PathLike) -> dict:
    """What training the store's finished runs took, for a report to state.

    Returns:
        ``{"runs": n, "wall_hours": h, "cpu_hours": h or None, "runs_timed": k, "backends": {backend: runs},
        "machines": [{"machine": text, "runs": n}]}``: ``cpu_hours`` sums ``runs.cpu_time`` over the ``runs_timed``
        runs that have one (schema 3; older runs count in ``wall_hours`` only); a machine is the recording driver's
        fingerprint in short (CPU model, architecture, torch), or ``A then B`` for a run resumed from a checkpoint
        written on another machine; runs from before schema 3 do not say theirs (the fingerprints the store
        records are named then).
    """
    con = open_readonly(path)
    try:
        have = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
        extra = ", cpu_time, machine" if {"cpu_time", "machine"} <= have else ", NULL, NULL"
        rows = con.execute(f"SELECT spec, wall_time{extra} FROM runs WHERE status='done'").fetchall()
        meta = dict(con.execute("SELECT key, value FROM meta WHERE key = 'machine' OR key LIKE 'machine_also_%'"))
    finally:
        con.close()
    backends: dict[str, int] = {}
    machines: dict[str, int] = {}
    drivers = list(dict.fromkeys(_machine_text(v) for v in meta.values()))
    unknown = (f"not recorded per run (this store's drivers ran on {' or '.join(drivers)})" if drivers
               else "not recorded")
    cpu = [float(r[2]) for r in rows if r[2] is not None]
    for spec, _, _, key in rows:
        try:
            backend = json.loads(spec).get("algorithm", {}).get("backend") or "sb3"
        except (ValueError, AttributeError):
            backend = "unknown"
        backends[backend] = backends.get(backend, 0) + 1
        where = " then ".join(_machine_text(meta.get(k)) for k in key.split("+")) if key else unknown
        machines[where] = machines.get(where, 0) + 1
    return {"runs": len(rows), "wall_hours": sum(float(r[1] or 0.0) for r in rows) / 3600,
            "cpu_hours": sum(cpu) / 3600 if cpu else None, "runs_timed": len(cpu), "backends": backends,
            "machines": [{"machine": m, "runs": n} for m, n in machines.items()]}


def timed_runs(path: str | os.PathLike) -> list[tuple[RunSpec, int, float, str | None]]:
    """``(spec, env_steps, cpu_time, cpu)`` of each finished run of the store that recorded its CPU seconds
    (schema 3; none from an older store); ``cpu`` is the recording driver's CPU
    (:func:`~rlaudit.run.machine.cpu_identity`; ``None`` where the store did not record its machine).
    Read-only: a store a driver is writing can be read."""
    con = open_readonly(path)
    try:
        if "cpu_time" not in {row[1] for row in con.execute("PRAGMA table_info(runs)")}:
            return []
        rows = con.execute("SELECT r.spec, r.env_steps, r.cpu_time, m.value FROM runs r LEFT JOIN meta m "
                           "ON m.key = r.machine WHERE r.status='done' AND r.cpu_time > 0 "
                           "AND r.env_steps > 0").fetchall()
    finally:
        con.close()
    return [(RunSpec.from_json(spec), int(steps), float(cpu), _cpu(machine))
            for spec, steps, cpu, machine in rows]


def _fingerprint(text: str | None) -> dict | None:
    """A recorded machine fingerprint (``meta`` value), or ``None`` where there is none or it does not parse."""
    try:
        f = json.loads(text or "")
    except ValueError:
        return None
    return f if isinstance(f, dict) else None


def _cpu(fingerprint: str | None) -> str | None:
    from rlaudit.run.machine import cpu_identity

    f = _fingerprint(fingerprint)
    return None if f is None else cpu_identity(f)


def _machine_text(fingerprint: str | None) -> str:
    f = _fingerprint(fingerprint)
    if f is None:
        return "not recorded"
    jax = f", jax {f['jax']} on {f['jax_devices']}" if f.get("jax_devices") else ""
    cpu = f"{f.get('cpu_model', '?')} ({f.get('machine', '?')}, {f.get('cpu_flags', '?')})"
    return f"{cpu}, torch {f.get('torch', '?')}{jax}"
