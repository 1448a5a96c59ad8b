"""The run store: one SQLite file per sweep, written only by the driver.

Schema version history (bump :data:`SCHEMA_VERSION` and add a line for every change):

- 1 (2026-11-30): tables ``meta``, ``protocols``, ``regimes``, ``runs``, ``evaluations``.
- 2 (2026-12-01): ``evaluations.checksum``, the SHA-256 of each record's content, verified on every read
  (a bit flip inside a stored evaluation is an error, not a silently different score). Version-1 stores are
  read as they are, with a note that their records are unverified; ``rlaudit run`` on a version-1 store
  migrates it in one transaction (adds the column, checksums the records already there).
- 3 (2026-12-02): ``runs.cpu_time``, the CPU seconds of the process that trained the run (all its threads,
  environments and evaluations included; a JAX seed batch's divided equally among its runs), and
  ``runs.machine``, the ``meta`` key (``machine`` or ``machine_also_<hash>``) of the fingerprint of the driver
  that recorded the run. Both are NULL for runs recorded before (``rlaudit run`` migrates a version-2 store by
  adding the columns) and where not measured.

``meta`` holds, besides the schema version and protocol: the library versions, and (from 2026-12-01, no
schema change) ``machine``, the fingerprint of what decides bit-equality of a rerun
(:mod:`rlaudit.run.machine`), plus ``machine_also_<hash>`` for each other machine a driver resumed the store
on. Stores without it read as before; ``scripts/replay_run.py`` then cannot tell whether a machine matches.
From 2026-12-02 (no schema change): a store accepts another protocol that plans every one of its finished runs
identically (the run's ``spec`` without its protocol hash: seeds, tasks or algorithms added, settings changed
where nothing has finished), keeps those runs, replans its unfinished runs that the new protocol plans
otherwise, takes the new protocol's hash and records ``meta.protocol_changed_<UTC time>`` = ``{"from": old hash,
"to": new hash, "kept": n, "replanned": m}``. The kept runs' ``spec`` keep the hash they were planned under.
From 2026-12-04 (no schema change): a run resumed from a checkpoint written on another machine (``rlaudit run
--resume-on-any-machine``) names the ``meta`` keys of every machine it trained on in ``runs.machine``, joined
by ``+`` in training order (``machine_also_3f2a…+machine``); each is recorded in ``meta``.

Readers (``status``, ``export``, ``audit``, ``report``) open the file read-only through SQLite's URI
(``mode=ro``), so a store in a read-only folder or on a read-only mount can be read; when SQLite cannot
create the WAL index there either, the file is opened ``immutable=1`` (nothing can be writing a store whose
folder nobody can write).

Identity: a store carries ``PRAGMA application_id`` = :data:`APPLICATION_ID` in its header, written when it is
created. Stores created before that (application id 0) are recognised by the keys rlaudit writes into
``meta`` (:data:`META_SIGNATURE`). Every command checks the identity before it touches a file, so another
application's SQLite file is refused unchanged (never switched to WAL, never migrated). A new store is built
under a temporary name and linked into place complete, so a driver killed at any moment leaves either no
store or a whole one, never an empty file.

Durability: WAL journal, ``synchronous=FULL``, one transaction per event (a run started, an evaluation, a
run finished or failed), so a killed driver loses at most the event in flight. Each finished run is also
checkpointed from the WAL into the main file, so a copy of ``store.sqlite`` without its ``-wal`` (what git
commits) holds every finished run. A run's evaluations count
only once the run is ``done``; a run found ``running`` when a driver starts was interrupted and restarts from
scratch, its partial evaluations deleted in the same transaction. One writer: ``rlaudit run`` holds an
exclusive ``flock`` on the store file for its whole life; a second one is refused.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import socket
import sqlite3
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rlaudit.errors import InputError, WriteFailed

SCHEMA_VERSION = 3
"""Version of the store schema written by this rlaudit (history in the module docstring)."""

APPLICATION_ID = 0x726C6175
"""``PRAGMA application_id`` of a store (the bytes ``rlau``), set when the store is created."""

META_SIGNATURE: frozenset[str] = frozenset({"schema_version", "created", "protocol_hash", "rlaudit"})
"""``meta`` keys every rlaudit store holds: how a store created before :data:`APPLICATION_ID` is recognised."""

_TABLES = frozenset({"meta", "runs", "evaluations", "protocols", "regimes"})

STATUSES: tuple[str, ...] = ("pending", "running", "done", "failed")
"""Run states. ``running`` in a store that no driver holds means the driver was interrupted."""

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE protocols (
    hash        TEXT PRIMARY KEY,   -- hash of the run-defining content (Protocol.hash)
    name        TEXT NOT NULL,
    path        TEXT NOT NULL,      -- file the text was read from
    text        TEXT NOT NULL,      -- full text of the protocol file, latest seen with this hash
    text_sha256 TEXT NOT NULL,
    added       TEXT NOT NULL,
    updated     TEXT NOT NULL
);
CREATE TABLE regimes (
    name       TEXT PRIMARY KEY,
    budget     INTEGER NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('nested', 'separate')),  -- the regime_kind (name kept on disk)
    run_regime TEXT NOT NULL        -- regime part of the ids of the runs that serve this budget
);
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,   -- task__label__seed__regime (rlaudit.protocol.plan.run_id)
    task        TEXT NOT NULL,
    algorithm   TEXT NOT NULL,      -- registry name
    label       TEXT NOT NULL,      -- name in the score table
    seed        INTEGER NOT NULL,
    regime      TEXT NOT NULL,      -- 'nested' or the separate regime's name
    regime_kind TEXT NOT NULL CHECK (regime_kind IN ('nested', 'separate')),
    budgets     TEXT NOT NULL,      -- JSON list of evaluation budgets, ascending
    spec        TEXT NOT NULL,      -- JSON of the RunSpec
    status      TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    worker      TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    started     TEXT,
    finished    TEXT,
    wall_time   REAL,               -- seconds, start to finish
    env_steps   INTEGER,            -- env steps trained
    error       TEXT,               -- traceback of the last failure
    cpu_time    REAL,               -- CPU seconds of the process that trained it (NULL: not measured)
    machine     TEXT                -- meta key of the recording driver's machine fingerprint
);
CREATE TABLE evaluations (
    run_id    TEXT NOT NULL REFERENCES runs(run_id),
    env_steps INTEGER NOT NULL,     -- training env steps when evaluated
    returns   TEXT NOT NULL,        -- JSON list, one return per episode
    lengths   TEXT NOT NULL,        -- JSON list, one length per episode
    wall_time REAL NOT NULL,        -- seconds since the run started
    checksum  TEXT NOT NULL,        -- record_checksum() of the five fields above (schema 2)
    PRIMARY KEY (run_id, env_steps)
);
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _machine_key(con, text: str, new_store_ok: bool = False) -> str:
    """The ``meta`` key of the machine fingerprint ``text`` (canonical JSON), recorded if it is not yet:
    ``machine`` for the store's first writer (with ``new_store_ok``, when a store without runs has none yet),
    else ``machine_also_<sha256[:12]>``."""
    row = con.execute("SELECT value FROM meta WHERE key='machine'").fetchone()
    if row is not None and row[0] == text:
        return "machine"
    # A store with runs but no fingerprint was written by an older rlaudit on an unknown machine.
    fresh = new_store_ok and row is None and con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    key = "machine" if fresh else f"machine_also_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    con.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, text))
    return key


def library_versions() -> dict[str, str]:
    """Versions recorded in ``meta``: rlaudit, SB3, torch, gymnasium, ale-py, Python, host."""
    from importlib import metadata

    from rlaudit import __version__

    out = {"rlaudit": __version__, "python": platform.python_version(), "host": socket.gethostname(),
           "platform": platform.platform()}
    for dist in ("stable-baselines3", "sb3-contrib", "torch", "gymnasium", "ale-py", "minatar", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def record_checksum(run_id: str, env_steps: int, returns: str, lengths: str, wall_time: float) -> str:
    """SHA-256 of one evaluation record as stored (the JSON texts exactly as written, ``wall_time`` by repr)."""
    content = "\x1f".join((run_id, str(int(env_steps)), returns, lengths, repr(float(wall_time))))
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=30, isolation_level=None)  # explicit transactions only
    con.row_factory = sqlite3.Row
    return con


# Open failures that mean "SQLite could not create the -wal/-shm files beside the store", not a bad file.
_CANNOT_OPEN = {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR}


class _ReaderConnection(sqlite3.Connection):
    """A read-only connection that takes away, on close, the ``-wal`` / ``-shm`` files its opening created.

    SQLite creates both beside a WAL-mode file for any reader, and a read-only connection cannot remove
    them. On close, when no ``rlaudit run`` holds the store, a plain connection is opened and closed: SQLite's
    own last-connection cleanup then checkpoints the (empty) WAL and deletes both files, but only if no other
    connection still uses them. The store's content is not changed.
    """

    store_path: Path | None = None
    new_side_files: tuple[Path, ...] = ()

    def close(self) -> None:
        super().close()
        if self.store_path is None or not any(p.exists() for p in self.new_side_files):
            return
        if lock_holder(self.store_path):
            return  # a driver is writing: the files are its own
        try:
            con = sqlite3.connect(str(self.store_path), timeout=1)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            pass  # the files stay, which is harmless


def connect_readonly(path: Path, opener=sqlite3.connect) -> sqlite3.Connection:
    """Open ``path`` read-only: ``mode=ro`` first, ``immutable=1`` when the WAL index cannot be created.

    ``opener`` is :func:`sqlite3.connect` (a parameter so that a test can make ``mode=ro`` fail the way a
    read-only folder does for a non-root user). Side files the opening creates are removed on ``close()``
    (see :class:`_ReaderConnection`).
    """
    uri = Path(os.path.abspath(path)).as_uri()
    side = tuple(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm"))
    new_side = tuple(p for p in side if not p.exists())
    for query in ("mode=ro", "immutable=1"):
        con = opener(f"{uri}?{query}", uri=True, timeout=30, isolation_level=None, factory=_ReaderConnection)
        if isinstance(con, _ReaderConnection):
            con.store_path, con.new_side_files = Path(path), new_side
        con.row_factory = sqlite3.Row
        try:
            # The first read opens the file and, in WAL mode, the -shm index: that is where a read-only
            # folder fails (SQLITE_CANTOPEN / SQLITE_READONLY_CANTINIT).
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return con
        except sqlite3.OperationalError as exc:
            con.close()
            if query == "immutable=1" or (getattr(exc, "sqlite_errorcode", 0) & 0xFF) not in _CANNOT_OPEN:
                raise
    raise AssertionError("unreachable")


def check_store_file(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """Open an existing store and check that it is an intact rlaudit store of a readable version.

    Args:
        path: the store file.
        readonly: open through :func:`connect_readonly` (readers), else read-write (the driver's checks).

    Raises:
        InputError: unreadable, not SQLite, corrupted, not an rlaudit store, or a newer schema.
    """
    where = str(path)
    try:
        empty = path.stat().st_size == 0
    except OSError as exc:
        raise InputError(f"{where}: cannot open the store ({exc.strerror})") from None
    if empty:
        raise InputError(f"{where}: an empty file (0 bytes), not a store; a store is never empty, so this is "
                         f"not one rlaudit made whole (delete it, or start again with --new-store)")
    try:
        con = connect_readonly(path) if readonly else _connect(path)
        ok = con.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            con.close()
            raise InputError(f"{where}: the store file is corrupted (SQLite integrity check: {ok}); "
                             f"restore a backup or start again with --new-store")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.OperationalError as exc:
        # Opening failed (permissions, a missing folder, a lock): the file may be perfectly fine, so no
        # advice to start again.
        raise InputError(f"{where}: cannot open the store ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{where}: not a readable rlaudit store ({exc}); the file is corrupted or not SQLite "
                         f"(start again with --new-store)") from None
    foreign = _not_a_store(con, tables)
    if foreign:
        con.close()
        raise InputError(f"{where}: an SQLite file but not an rlaudit store ({foreign}); rlaudit leaves it "
                         f"unchanged")
    row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    try:
        version = int(row[0]) if row else -1
    except (TypeError, ValueError):
        con.close()
        raise InputError(f"{where}: store schema version {row[0]!r} is not a whole number; the store's meta "
                         f"table is damaged or the file is not an rlaudit store") from None
    if version > SCHEMA_VERSION:
        con.close()
        raise InputError(f"{where}: store schema version {version} is newer than this rlaudit reads "
                         f"({SCHEMA_VERSION}); upgrade rlaudit")
    if version < 1:
        con.close()
        raise InputError(f"{where}: store has no schema version; not an rlaudit store")
    return con


def _not_a_store(con: sqlite3.Connection, tables: set[str]) -> str | None:
    """Why the open SQLite file is not an rlaudit store, in words; ``None`` when it is one."""
    app_id = con.execute("PRAGMA application_id").fetchone()[0]
    if app_id == APPLICATION_ID:
        return None
    if app_id != 0:
        return f"its application id is {app_id:#010x}, rlaudit's is {APPLICATION_ID:#010x}"
    if not _TABLES <= tables:
        return f"tables: {', '.join(sorted(tables)) or 'none'}"
    keys = {r[0] for r in con.execute("SELECT key FROM meta")}
    if not META_SIGNATURE <= keys:
        return f"its meta table lacks {', '.join(sorted(META_SIGNATURE - keys))}"
    return None


def check_writable(path: Path) -> None:
    """Raise :class:`InputError` unless a store can be created or updated at ``path``."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; give a store file path like sweeps/NAME/store.sqlite")
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write the store here ({probe} is not a writable directory)")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write the store here ({parent} is not a writable directory)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{path}: the store file is not writable")


@dataclass(frozen=True)
class Adoption:
    """What taking a store over for another protocol keeps and replans (:func:`_adoption`)."""

    old_hash: str
    """The hash of the store's protocol until now."""
    kept: int
    """Finished runs the new protocol plans identically (kept)."""
    replanned: tuple[str, ...]
    """Unfinished runs the new protocol plans otherwise or not at all (deleted, then planned afresh)."""
    refusal: str = ""
    """Why the store cannot be taken over (a finished run the new protocol does not plan identically)."""


def _spec_content(text: str) -> dict:
    """A run spec without the protocol hash it was planned under, read through :class:`RunSpec` so that a spec
    stored before a field existed compares with that field's default."""
    from rlaudit.run.spec import RunSpec

    try:
        d = json.loads(RunSpec.from_json(text).to_json())
    except (KeyError, TypeError, ValueError):  # a spec this rlaudit cannot read: compared as written
        d = json.loads(text)
    d.pop("protocol_hash", None)
    return d


def _first_difference(a, b, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else key)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: {json.dumps(a, default=str)} recorded, {json.dumps(b, default=str)} planned"


def _adoption(con: sqlite3.Connection, protocol, old_hash: str) -> Adoption:
    """Whether ``protocol`` (of the store's protocol name) may take over a store of the protocol ``old_hash``:
    every finished run must be a run of ``protocol``, planned identically (same task, algorithm and settings,
    seed, budgets, evaluation; a run is defined by its spec, not by the file that planned it). Unfinished runs
    that ``protocol`` plans otherwise are replanned."""
    from rlaudit.protocol import plan

    planned = {r.run_id: _spec_content(r.to_json()) for r in plan(protocol).runs}
    kept, replanned = 0, []
    for run_id, status, spec in con.execute("SELECT run_id, status, spec FROM runs ORDER BY run_id"):
        same = planned.get(run_id) == _spec_content(spec)
        if status != "done":
            if not same:
                replanned.append(run_id)
            continue
        if run_id not in planned:
            return Adoption(old_hash, 0, (), f"its finished run {run_id} is not planned by this file")
        if not same:
            return Adoption(old_hash, 0, (), f"its finished run {run_id} is planned otherwise by this file ("
                            f"{_first_difference(_spec_content(spec), planned[run_id])})")
        kept += 1
    return Adoption(old_hash, kept, tuple(replanned))


def takeover(path: str | os.PathLike, protocol) -> Adoption | None:
    """What ``rlaudit run`` would keep and replan when ``protocol`` takes the store at ``path`` over (read-only);
    ``None`` when the store is absent, another protocol's (it is refused then), or already ``protocol``'s."""
    path = Path(path)
    if not path.exists():
        return None
    con = check_store_file(path, readonly=True)
    try:
        adoption = _protocol_change(con, protocol)[2]
    finally:
        con.close()
    return None if adoption is None or adoption.refusal else adoption


def _protocol_change(con: sqlite3.Connection, protocol) -> tuple[str | None, str | None, Adoption | None]:
    """The store's protocol (hash, name) and, when its hash is not ``protocol``'s, whether ``protocol`` may take
    the store over (refused outright under another name)."""
    row = con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()
    name = con.execute("SELECT value FROM meta WHERE key='protocol_name'").fetchone()
    old_hash, old_name = (row[0] if row else None), (name[0] if name else None)
    if old_hash is None or old_hash == protocol.hash:
        return old_hash, old_name, None
    if old_name != protocol.name:
        return old_hash, old_name, Adoption(old_hash, 0, (), f"another name ({protocol.name!r})")
    return old_hash, old_name, _adoption(con, protocol, old_hash)


def _check_protocol(path: Path, con: sqlite3.Connection, protocol) -> Adoption | None:
    """Close ``con`` after reading whether ``protocol`` may write the store (``None``: it is its own); a store of
    another protocol that it may not take over is refused, naming the first run that stands in the way."""
    try:
        old_hash, old_name, adoption = _protocol_change(con, protocol)
    finally:
        con.close()
    if adoption is not None and adoption.refusal:
        raise InputError(f"{path}: this store holds runs of another protocol ({old_name or '?'}, hash "
                         f"{old_hash[:12]}), not of {protocol.path} (hash {protocol.hash[:12]}): {adoption.refusal}; "
                         f"use another --store, or --new-store to move the old store aside and start again")
    return adoption


def lock_holder(path: Path) -> bool:
    """Whether some process holds the run lock of the store at ``path``."""
    if not path.exists():
        return False
    with open(path, "rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


class Store:
    """A store opened for writing by one driver (holds the run lock until :meth:`close`)."""

    def __init__(self, path: Path, con: sqlite3.Connection, lock_fh):
        self.path = path
        self.con = con
        self._lock_fh = lock_fh
        self.adopted: Adoption | None = None
        self.machine_key: str | None = None
        """The ``meta`` key of this driver's machine fingerprint (``None``: not recorded)."""
        """Set when this opening made the store another protocol's (:meth:`open_for_run`)."""

    # ------------------------------------------------------------------------------------------ opening
    @classmethod
    def open_for_run(cls, path: str | os.PathLike, protocol, new_store: bool = False, check_only: bool = False,
                     machine: dict[str, str] | None = None, busy_ok: bool = False) -> Store | None:
        """Open (or create) the store of ``protocol`` at ``path`` for a driver.

        A store of another protocol becomes ``protocol``'s when ``protocol`` plans every finished run of it
        identically (:func:`_adoption`: seeds, tasks or algorithms added, settings changed only where nothing
        has finished), so that a sweep grows without training again; :attr:`adopted` then says what was kept.

        Args:
            path: the store file.
            protocol: the :class:`~rlaudit.protocol.schema.Protocol` being run.
            new_store: if a store of another protocol (or a corrupted file) is at ``path``, move it aside to
                ``<path>.<UTC time>.bak`` and start a new one.
            check_only: run every check (writable, lock, corruption, protocol hash) and return ``None``
                without creating or changing anything.
            busy_ok: with ``check_only``, a store another driver is writing is checked read-only instead of
                refused (``rlaudit validate`` of a live sweep).
            machine: the driver's machine fingerprint (:func:`rlaudit.run.machine.machine_fingerprint`),
                recorded as ``meta.machine`` in a new store; a store resumed on a machine with another
                fingerprint (or one created before fingerprints were recorded) gets it as
                ``meta.machine_also_<hash>``, so that a reader knows its runs may come from several machines.

        Raises:
            InputError: unwritable path, a store of another protocol, a corrupted file, or another
                ``rlaudit run`` holding the store.
        """
        path = Path(path)
        check_writable(path)
        adoption: Adoption | None = None
        if path.exists():
            if lock_holder(path):
                if check_only and busy_ok:
                    _check_protocol(path, check_store_file(path, readonly=True), protocol)
                    return None
                raise InputError(f"{path}: another 'rlaudit run' is writing this store; wait for it to finish "
                                 f"(or stop it) before running again")
            try:
                adoption = _check_protocol(path, check_store_file(path), protocol)
            except InputError:
                if not new_store:
                    raise
                if not check_only:
                    _move_aside(path)
        if check_only:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _create_store(path, protocol)
        con = _connect(path)
        lock_fh = open(path, "rb")
        try:
            fcntl.flock(lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_fh.close()
            con.close()
            raise InputError(f"{path}: another 'rlaudit run' is writing this store") from None
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        store = cls(path, con, lock_fh)
        store._migrate()
        if adoption is not None:
            store._adopt(protocol, adoption)
        if machine is not None:
            store._record_machine(machine)
        return store

    def _adopt(self, protocol, adoption: Adoption) -> None:
        """Make the store ``protocol``'s (see :func:`_adoption`): its unfinished runs that the protocol plans
        otherwise or not at all are deleted (the driver plans them afresh), ``meta.protocol_hash`` becomes
        ``protocol``'s, and ``meta.protocol_changed_<UTC time>`` records the change."""
        with self.transaction() as con:
            for run_id in adoption.replanned:
                con.execute("DELETE FROM evaluations WHERE run_id=?", (run_id,))
                con.execute("DELETE FROM runs WHERE run_id=?", (run_id,))
            con.execute("UPDATE meta SET value=? WHERE key='protocol_hash'", (protocol.hash,))
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('protocol_name', ?)", (protocol.name,))
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                        (f"protocol_changed_{_now()}",
                         json.dumps({"from": adoption.old_hash, "to": protocol.hash, "kept": adoption.kept,
                                     "replanned": len(adoption.replanned)})))
        self.adopted = adoption

    def _record_machine(self, machine: dict[str, str]) -> None:
        """Record the driver's fingerprint: ``machine`` when none is recorded yet in a new store, else
        ``machine_also_<sha256[:12]>`` when it differs from the recorded one."""
        with self.transaction() as con:
            self.machine_key = _machine_key(con, json.dumps(machine, sort_keys=True), new_store_ok=True)

    def _migrate(self) -> None:
        """Bring an older store to :data:`SCHEMA_VERSION` in one transaction (see the history above)."""
        with self.transaction() as con:
            version = int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
            if version < 2:
                con.execute("ALTER TABLE evaluations ADD COLUMN checksum TEXT NOT NULL DEFAULT ''")
                rows = con.execute("SELECT run_id, env_steps, returns, lengths, wall_time FROM evaluations").fetchall()
                con.executemany("UPDATE evaluations SET checksum=? WHERE run_id=? AND env_steps=?",
                                [(record_checksum(*r), r[0], r[1]) for r in rows])
            if version < 3:
                have = {row[1] for row in con.execute("PRAGMA table_info(runs)")}
                for column, kind in (("cpu_time", "REAL"), ("machine", "TEXT")):
                    if column not in have:
                        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
            if version < SCHEMA_VERSION:
                con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
                con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                            (f"migrated_from_{version}", _now()))

    # ------------------------------------------------------------------------------------------ writes
    def transaction(self):
        """Context manager: ``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error).

        A failed write (disk full, I/O error) raises :class:`~rlaudit.errors.WriteFailed`: the
        transaction is rolled back, so the store keeps every event committed before it.
        """
        return _Transaction(self.con, self.path)

    def sync_plan(self, plan) -> None:
        """Record the protocol text, the regimes and every planned run (new runs as ``pending``)."""
        import hashlib

        p = plan.protocol
        now = _now()
        with self.transaction() as con:
            con.execute("INSERT INTO protocols(hash, name, path, text, text_sha256, added, updated) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(hash) DO UPDATE SET text=excluded.text, "
                        "path=excluded.path, name=excluded.name, text_sha256=excluded.text_sha256, "
                        "updated=excluded.updated",
                        (p.hash, p.name, p.path, p.text, hashlib.sha256(p.text.encode()).hexdigest(), now, now))
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_argv', ?)", (json.dumps(sys.argv),))
            con.executemany("INSERT OR REPLACE INTO regimes(name, budget, kind, run_regime) VALUES (?, ?, ?, ?)",
                            [(lb.regime, lb.budget, lb.regime_kind, lb.run_regime) for lb in plan.labels])
            con.executemany(
                "INSERT OR IGNORE INTO runs(run_id, task, algorithm, label, seed, regime, regime_kind, budgets, "
                "spec, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                [(r.run_id, r.task.id, r.algorithm.name, r.algorithm.label, r.seed, r.regime, r.regime_kind,
                  json.dumps(list(r.budgets)), r.to_json()) for r in plan.runs])

    def reset_unfinished(self, run_ids: Iterable[str] | None = None) -> int:
        """Make interrupted (``running``) and ``failed`` runs ``pending`` again, deleting their evaluations.

        Args:
            run_ids: restrict to these runs (default: all).

        Returns:
            Number of runs reset.
        """
        rows = self.con.execute("SELECT run_id FROM runs WHERE status IN ('running', 'failed')").fetchall()
        ids = [r[0] for r in rows]
        if run_ids is not None:
            keep = set(run_ids)
            ids = [i for i in ids if i in keep]
        with self.transaction() as con:
            for rid in ids:
                con.execute("DELETE FROM evaluations WHERE run_id=?", (rid,))
                con.execute("UPDATE runs SET status='pending', worker=NULL WHERE run_id=?", (rid,))
        return len(ids)

    def started(self, run_id: str, worker: str) -> None:
        """Mark ``run_id`` running on ``worker``; earlier partial evaluations of it are deleted."""
        with self.transaction() as con:
            con.execute("DELETE FROM evaluations WHERE run_id=?", (run_id,))
            con.execute("UPDATE runs SET status='running', worker=?, started=?, finished=NULL, error=NULL, "
                        "attempts=attempts+1 WHERE run_id=?", (worker, _now(), run_id))

    def record(self, rec) -> None:
        """Store one :class:`~rlaudit.run.spec.EvalRecord`."""
        fields = (rec.run_id, int(rec.env_steps), json.dumps([float(x) for x in rec.returns]),
                  json.dumps([int(x) for x in rec.lengths]), float(rec.wall_time))
        with self.transaction() as con:
            con.execute("INSERT OR REPLACE INTO evaluations(run_id, env_steps, returns, lengths, wall_time, checksum) "
                        "VALUES (?, ?, ?, ?, ?, ?)", (*fields, record_checksum(*fields)))

    def finished(self, result) -> None:
        """Mark a run done; a run that trained on several machines (:attr:`RunResult.trained_on`) names each
        one's ``meta`` key in ``runs.machine``, joined by ``+`` in training order."""
        with self.transaction() as con:
            cpu = getattr(result, "cpu_time", None)
            machine = self.machine_key
            if getattr(result, "trained_on", None) and machine is not None:
                machine = "+".join(_machine_key(con, text) for text, _ in result.trained_on)
            con.execute("UPDATE runs SET status='done', finished=?, wall_time=?, env_steps=?, cpu_time=?, machine=? "
                        "WHERE run_id=?", (_now(), float(result.wall_time), int(result.env_steps),
                                           None if cpu is None else float(cpu), machine, result.run_id))
        # the main file alone now holds every finished run: a copy of the store taken without its -wal (git
        # ignores it; a checkout recovered from a stopped sitting lacks it) loses no finished run
        self.con.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def failed(self, run_id: str, error: str) -> None:
        """Mark a run failed with its traceback (its partial evaluations stay, for diagnosis only)."""
        with self.transaction() as con:
            con.execute("UPDATE runs SET status='failed', finished=?, error=? WHERE run_id=?",
                        (_now(), error, run_id))

    def restarted(self, run_id: str, reason: str) -> None:
        """Discard a run's partial evaluations; it will start again."""
        with self.transaction() as con:
            con.execute("DELETE FROM evaluations WHERE run_id=?", (run_id,))
            con.execute("UPDATE runs SET status='pending', error=? WHERE run_id=?", (f"restarted: {reason}", run_id))

    def statuses(self) -> dict[str, str]:
        """``run_id -> status``."""
        return {r[0]: r[1] for r in self.con.execute("SELECT run_id, status FROM runs")}

    def close(self) -> None:
        """Checkpoint the WAL into the main file, close, release the lock."""
        try:
            self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.DatabaseError:
            pass
        self.con.close()
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None


class _Transaction:
    def __init__(self, con: sqlite3.Connection, path: Path):
        self.con = con
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            if self.con.in_transaction:  # left open by a Ctrl-C that landed between BEGIN and the block
                self.con.execute("ROLLBACK")
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._write_error(exc) from None
        return self.con

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.con.execute("COMMIT")
                return
            except sqlite3.OperationalError as commit_exc:
                exc_type, exc = type(commit_exc), commit_exc
        try:
            if self.con.in_transaction:
                self.con.execute("ROLLBACK")
        except sqlite3.DatabaseError:
            pass  # SQLite rolls a failed transaction back itself when the journal cannot be written
        if issubclass(exc_type, sqlite3.OperationalError):
            raise self._write_error(exc) from None

    def _write_error(self, exc: sqlite3.OperationalError) -> WriteFailed:
        return WriteFailed(f"{self.path}: cannot write the store ({exc}); everything stored before this "
                               f"event is kept; free some space (or fix the error) and run again to resume")


def _create_store(path: Path, protocol) -> None:
    """Create a complete, empty store at ``path``: built under a temporary name, then linked into place.

    Raises:
        InputError: another process created ``path`` meanwhile.
        WriteFailed: the file system refused (disk full, I/O error); nothing is left at ``path``.
    """
    meta = {"schema_version": str(SCHEMA_VERSION), "created": _now(), "argv": json.dumps(sys.argv),
            "protocol_hash": protocol.hash, "protocol_name": protocol.name, **library_versions()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
    try:
        tmp.unlink(missing_ok=True)
        con = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            con.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    con.execute(stmt)
            con.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(meta.items()))
            con.execute("COMMIT")
        finally:
            con.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # unlike a rename, never replaces a store another driver created meanwhile
        except FileExistsError:
            raise InputError(f"{path}: another 'rlaudit run' created this store at the same moment; run again "
                             f"once it is done") from None
        except OSError:  # a file system without hard links
            os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except (sqlite3.OperationalError, OSError) as exc:
        raise WriteFailed(f"{path}: cannot create the store ({exc}); free some space (or fix the error) and "
                          f"run again") from None
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)


def _move_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}.{stamp}.bak")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(path) + suffix)
        if src.exists():
            os.replace(src, Path(str(dest) + suffix))
    return dest


def open_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """Open an existing store for reading (``status``, ``export``, ``audit``, ``report``), never writing it.

    Raises:
        InputError: missing, unreadable, corrupted, or not an rlaudit store.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such store")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a store file (.sqlite)")
    return check_store_file(path, readonly=True)


def schema_version(con: sqlite3.Connection) -> int:
    """Schema version of an open store (checked by :func:`check_store_file`)."""
    return int(con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
