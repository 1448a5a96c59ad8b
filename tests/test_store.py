"""The SQLite store: schema, meta, lock, resume semantics, hash refusal, export (exact values), status."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.protocol import parse_protocol, plan
from rlaudit.run.spec import EvalRecord, RunResult
from rlaudit.scores import read_scores
from rlaudit.sources import source_from_store
from rlaudit.store import SCHEMA_VERSION, Store, export_table, store_status

TEXT = """
schema_version = 1
name = "st"
title = "Store test"
citation = "Nobody (2026)"
seeds = 2
[regimes]
low = 100
high = 200
tuned = { budget = 150, mode = "separate" }
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
[[algorithms]]
name = "A2C"
[evaluation]
eval_every = 50
[[claims]]
better = "PPO"
worse = "A2C"
[audit]
metric = "mean"
"""


@pytest.fixture
def pl(tmp_path):
    path = tmp_path / "st.toml"
    path.write_text(TEXT)
    from rlaudit.protocol import load_protocol

    return plan(load_protocol(path))


def fill(store, spec, means: dict[int, float]) -> None:
    """Record a run whose evaluation at each step has two episodes with mean ``means[step]``."""
    store.started(spec.run_id, "w1")
    for steps, m in means.items():
        store.record(EvalRecord(spec.run_id, steps, (m - 1.0, m + 1.0), (10, 12), steps / 100))
    store.finished(RunResult(spec.run_id, max(means), 1.5))


def one_done_one_running(path, pl):
    """A store at ``path`` whose first run is done and whose second is running, one evaluation in."""
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    a, b = pl.runs[0], pl.runs[1]
    fill(store, a, {50: 1.0, 100: 2.0, 150: 3.0, 200: 4.0})
    store.started(b.run_id, "w2")
    store.record(EvalRecord(b.run_id, 50, (1.0,), (5,), 0.1))
    return store, a, b


def test_schema_meta_and_plan(tmp_path, pl):
    store = Store.open_for_run(tmp_path / "s.sqlite", pl.protocol)
    store.sync_plan(pl)
    store.close()
    con = sqlite3.connect(tmp_path / "s.sqlite")
    meta = dict(con.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    for key in ("rlaudit", "stable-baselines3", "torch", "gymnasium", "ale-py", "python", "host", "argv", "created"):
        assert key in meta
    assert meta["protocol_hash"] == pl.protocol.hash
    text, = con.execute("SELECT text FROM protocols").fetchone()
    assert text == TEXT
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    runs = con.execute("SELECT run_id, status, regime_kind FROM runs ORDER BY run_id").fetchall()
    assert len(runs) == 2 * 2 * 2 and {r[1] for r in runs} == {"pending"}
    assert ("CartPole-v1__A2C__0__tuned", "pending", "separate") in runs
    assert con.execute("SELECT name, budget, kind, run_regime FROM regimes ORDER BY budget").fetchall() == [
        ("low", 100, "nested", "nested"), ("tuned", 150, "separate", "tuned"), ("high", 200, "nested", "nested")]


def test_second_writer_is_refused(tmp_path, pl):
    first = Store.open_for_run(tmp_path / "s.sqlite", pl.protocol)
    try:
        with pytest.raises(InputError, match="another 'rlaudit run' is writing this store"):
            Store.open_for_run(tmp_path / "s.sqlite", pl.protocol)
        assert store_status(tmp_path / "s.sqlite").empty  # readers are fine while it runs
    finally:
        first.close()
    Store.open_for_run(tmp_path / "s.sqlite", pl.protocol).close()  # lock released on close


def test_validate_reads_a_store_being_written_and_says_how_far_it_is(tmp_path, pl):
    """`rlaudit validate` of a live sweep: checked read-only, not refused; it counts the finished runs. A store of
    another protocol is still refused while it is written."""
    path = tmp_path / "s.sqlite"
    writer = Store.open_for_run(path, pl.protocol)
    try:
        writer.sync_plan(pl)
        fill(writer, pl.runs[0], {50: 1.0, 100: 2.0, 150: 3.0, 200: 4.0})
        args = ["validate", str(pl.protocol.path), "--store", str(path), "--workers", "1"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if x.startswith("store: 1 of"))
        assert line.startswith(f"store: 1 of {len(pl.runs)} planned runs finished; the other {len(pl.runs) - 1} take "
                               "about ") and line.endswith("another 'rlaudit run' is writing it now (checked read-only)")
        other = tmp_path / "other.toml"
        other.write_text(TEXT.replace("eval_every = 50", "eval_every = 25"))  # the finished run planned otherwise
        refused = CliRunner().invoke(main, ["validate", str(other), "--store", str(path)])
        assert refused.exit_code == 2 and "holds runs of another protocol (st, hash" in refused.output
        assert f"its finished run {pl.runs[0].run_id} is planned otherwise by this file" in refused.output
        assert refused.output.count("\n") == 1
    finally:
        writer.close()


def test_resume_discards_partial_runs(tmp_path, pl):
    store, a, b = one_done_one_running(tmp_path / "s.sqlite", pl)
    store.con.close()  # the driver dies: no close(), no status update
    store._lock_fh.close()

    store = Store.open_for_run(tmp_path / "s.sqlite", pl.protocol)
    status = store_status(tmp_path / "s.sqlite")
    assert status["interrupted"].sum() == 0 and status["running"].sum() == 1  # we hold the lock again
    assert store.reset_unfinished() == 1
    st = store.statuses()
    assert st[a.run_id] == "done" and st[b.run_id] == "pending"
    n = store.con.execute("SELECT COUNT(*) FROM evaluations WHERE run_id=?", (b.run_id,)).fetchone()[0]
    assert n == 0
    store.close()


def test_hash_mismatch_refused_and_new_store_moves_aside(tmp_path, pl):
    store = Store.open_for_run(tmp_path / "s.sqlite", pl.protocol)
    store.sync_plan(pl)
    store.close()
    other = parse_protocol(TEXT.replace('name = "st"', 'name = "other"').replace("high = 200", "high = 300"),
                           "other.toml")
    with pytest.raises(InputError, match=r"holds runs of another protocol .*: another name \('other'\)"):
        Store.open_for_run(tmp_path / "s.sqlite", other)
    Store.open_for_run(tmp_path / "s.sqlite", other, new_store=True).close()
    backups = [p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")]
    assert len(backups) == 1
    con = sqlite3.connect(tmp_path / backups[0])
    assert con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()[0] == pl.protocol.hash


def test_another_protocol_takes_a_store_over_when_it_plans_the_finished_runs_identically(tmp_path, pl):
    """Seeds, tasks or algorithms added, or settings changed where nothing finished: the store is the new
    protocol's, its finished runs kept and its unfinished ones replanned; a finished run planned otherwise, or no
    longer planned, is another protocol (naming the run and the first difference)."""
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    done = [r for r in pl.runs if r.seed == 1 and r.algorithm.label == "PPO"]
    for r in done:
        fill(store, r, {b: 2.0 for b in r.budgets})
    store.close()
    before = export_table(path).frame

    # a seed more, and A2C (nothing finished) with another learning rate
    text = TEXT.replace("seeds = 2", "seeds = [0, 1, 3]").replace('name = "A2C"', 'name = "A2C"\nhyperparams = { learning_rate = 0.001 }')
    more = parse_protocol(text, "more.toml")
    store = Store.open_for_run(path, more)
    assert store.adopted.kept == len(done) and store.adopted.old_hash == pl.protocol.hash
    assert len(store.adopted.replanned) == sum(1 for r in pl.runs if r.algorithm.label == "A2C")
    store.sync_plan(plan(more))
    statuses = store.statuses()
    a2c = store.con.execute("SELECT spec FROM runs WHERE label='A2C' LIMIT 1").fetchone()[0]
    store.close()
    assert '"learning_rate", 0.001' in a2c
    assert {rid for rid, st in statuses.items() if st == "done"} == {r.run_id for r in done}
    assert set(statuses) == {r.run_id for r in plan(more).runs}
    assert export_table(path).frame.equals(before)
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()[0] == more.hash
    (changed,) = [json.loads(v) for k, v in con.execute("SELECT key, value FROM meta") if k.startswith("protocol_changed_")]
    con.close()
    assert changed == {"from": pl.protocol.hash, "to": more.hash, "kept": len(done),
                       "replanned": sum(1 for r in pl.runs if r.algorithm.label == "A2C")}

    refused = {
        "seeds = [0, 3]": "its finished run CartPole-v1__PPO__1__nested is not planned by this file",
        "high = 300": "its finished run CartPole-v1__PPO__1__nested is planned otherwise by this file (budgets[1]: "
                      "200 recorded, 300 planned)",
    }
    for change, message in refused.items():
        key = change.split(" =")[0]
        other = "\n".join(change if line.startswith(key + " =") else line for line in text.splitlines())
        with pytest.raises(InputError, match="holds runs of another protocol") as info:
            Store.open_for_run(path, parse_protocol(other, "other.toml"))
        assert message in str(info.value), str(info.value)
    Store.open_for_run(path, more).close()  # the grown protocol is the store's now


def test_corrupted_store(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    store.close()
    data = bytearray(path.read_bytes())
    data[0:16] = b"garbage garbage!"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="not a readable rlaudit store"):
        export_table(path)
    result = CliRunner().invoke(main, ["status", str(path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1


def test_export_final_and_max_exact(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    by_id = {r.run_id: r for r in pl.runs}
    fill(store, by_id["CartPole-v1__PPO__0__nested"], {50: 1.0, 100: 5.0, 150: 9.0, 200: 7.0})
    fill(store, by_id["CartPole-v1__PPO__0__tuned"], {50: 3.0, 100: 8.0, 150: 6.0})
    # a run that is still running must not appear
    store.started("CartPole-v1__A2C__0__nested", "w1")
    store.record(EvalRecord("CartPole-v1__A2C__0__nested", 100, (50.0,), (1,), 0.1))
    store.close()

    final = export_table(path).frame
    assert list(final.columns) == ["algorithm", "task", "run", "budget", "score", "score_kind", "regime",
                                   "regime_kind", "eval_protocol"]
    rows = {(r.budget, r.regime): (r.score, r.regime_kind, r.eval_protocol) for r in final.itertuples()}
    assert rows == {(100, "low"): (5.0, "nested", "final"), (150, "tuned"): (6.0, "separate", "final"),
                    (200, "high"): (7.0, "nested", "final")}
    assert set(final["algorithm"]) == {"PPO"} and set(final["score_kind"]) == {"eval"}

    mx = export_table(path, "max").frame
    rows = {(r.budget, r.regime): r.score for r in mx.itertuples()}
    assert rows == {(100, "low"): 5.0, (150, "tuned"): 8.0, (200, "high"): 9.0}
    assert set(mx["eval_protocol"]) == {"max"}

    table = export_table(path)
    assert any("anytime readings" in n for n in table.meta.notes)
    assert any("not finished" in n for n in table.meta.notes)


def test_export_cli_and_source(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    for r in pl.runs:
        steps = {50: 1.0, 100: 2.0, 150: 3.0, 200: 4.0} if r.regime == "nested" else {50: 1.0, 100: 1.5, 150: 2.5}
        fill(store, r, {k: v + r.seed for k, v in steps.items()})
    store.close()
    out = tmp_path / "scores.parquet"
    result = CliRunner().invoke(main, ["export", str(path), "-o", str(out), "--protocol", "max"])
    assert result.exit_code == 0, result.output
    t = read_scores(out)
    assert len(t.frame) == 2 * 2 * 3 and t.meta.score_kind == "eval"
    assert t.frame.loc[(t.frame["run"] == "1") & (t.frame["budget"] == 200), "score"].tolist() == [5.0, 5.0]

    src = source_from_store(path)
    assert src.protocol == "st" and src.title == "Store test" and src.citation == "Nobody (2026)"
    assert src.audit["metric"] == "mean"
    assert [c["better"] for c in src.claims] == ["PPO"]
    assert list(src.budget_labels) == [{"budget": 100, "regime": "low", "regime_kind": "nested"},
                                       {"budget": 150, "regime": "tuned", "regime_kind": "separate"},
                                       {"budget": 200, "regime": "high", "regime_kind": "nested"}]

    from rlaudit.sources import load_source

    assert load_source(path).table.frame.equals(src.table.frame)

    bad = CliRunner().invoke(main, ["export", str(path), "-o", str(tmp_path / "x.txt")])
    assert bad.exit_code == 2 and not (tmp_path / "x.txt").exists()


def test_export_with_no_finished_run(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    store.close()
    with pytest.raises(InputError, match="no finished run yet"):
        export_table(path)


def test_status_counts_and_failures(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    fill(store, pl.runs[0], {50: 1.0, 100: 1.0, 200: 1.0})
    store.started(pl.runs[1].run_id, "w1")
    store.failed(pl.runs[1].run_id, "Traceback (most recent call last):\n  ...\nValueError: boom")
    store.started(pl.runs[2].run_id, "w1")
    store.close()  # the running one is now 'interrupted' (nobody holds the lock)
    st = store_status(path)
    totals = st[["done", "running", "interrupted", "failed", "pending", "total"]].sum().tolist()
    assert totals == [1, 0, 1, 1, 5, 8]
    result = CliRunner().invoke(main, ["status", str(path)])
    assert result.exit_code == 0
    assert "ValueError: boom" in result.output
    assert "compute of the finished runs: " in result.output and "backend: sb3 (" in result.output
    con = sqlite3.connect(path)
    err, = con.execute("SELECT error FROM runs WHERE run_id=?", (pl.runs[1].run_id,)).fetchone()
    assert err.startswith("Traceback")
    assert json.loads(con.execute("SELECT returns FROM evaluations LIMIT 1").fetchone()[0]) == [0.0, 2.0]


def test_export_notes_steps_past_the_budget(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    fill(store, pl.runs[0], {50: 1.0, 100: 2.0, 150: 3.0, 256: 4.0})  # a rollout-based run overshoots 200
    store.close()
    table = export_table(path)
    assert table.frame.loc[table.frame["budget"] == 200, "score"].tolist() == [4.0]
    assert any("up to 56 env steps after it" in n for n in table.meta.notes)


# ----------------------------------------------------------------------------------- read-only stores

def _filled(tmp_path, pl):
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    for r in pl.runs:
        fill(store, r, {50: 1.0, 100: 2.0, 150: 3.0, 200: 4.0})
    store.close()
    return path


def test_readers_fall_back_to_immutable_when_the_wal_index_cannot_be_created(tmp_path, pl):
    """What a read-only folder does to a non-root user: ``mode=ro`` cannot create ``-shm`` (CANTOPEN).

    Tests run as root, whom folder permissions do not stop, so this injects the failure SQLite reports;
    ``tests/test_robustness.py`` checks a real read-only mount where mounting is allowed.
    """
    from rlaudit.store import sqlite as store_sqlite

    path = _filled(tmp_path, pl)
    tried = []

    def opener(database, **kw):
        tried.append(database.rpartition("?")[2])
        if database.endswith("mode=ro"):
            exc = sqlite3.OperationalError("unable to open database file")
            exc.sqlite_errorcode = sqlite3.SQLITE_CANTOPEN

            class Failing:
                row_factory = None

                def execute(self, *a):
                    raise exc

                def close(self):
                    pass
            return Failing()
        return sqlite3.connect(database, **kw)

    con = store_sqlite.connect_readonly(path, opener=opener)
    assert tried == ["mode=ro", "immutable=1"]
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == len(pl.runs)
    con.close()


def test_readers_never_write_the_store(tmp_path, pl):
    path = _filled(tmp_path, pl)
    from rlaudit.store import open_readonly

    con = open_readonly(path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        con.execute("DELETE FROM runs")
    con.close()


# ----------------------------------------------------------------------------------- checksums

def test_a_bit_flip_inside_an_evaluation_is_caught(tmp_path, pl):
    path = _filled(tmp_path, pl)
    con = sqlite3.connect(path)
    run_id, steps, returns = con.execute("SELECT run_id, env_steps, returns FROM evaluations "
                                         "ORDER BY run_id, env_steps LIMIT 1").fetchone()
    assert returns == "[0.0, 2.0]"
    con.execute("UPDATE evaluations SET returns=? WHERE run_id=? AND env_steps=?", ("[0.0, 3.0]", run_id, steps))
    con.commit()
    con.close()
    with pytest.raises(InputError, match=f"run {run_id} at {steps} env steps does not match its checksum"):
        export_table(path)
    result = CliRunner().invoke(main, ["export", str(path), "-o", str(tmp_path / "o.csv")])
    assert result.exit_code == 2 and "checksum" in result.output and not (tmp_path / "o.csv").exists()
    from rlaudit.store import run_evaluations

    with pytest.raises(InputError, match=f"run {run_id} at {steps} env steps does not match its checksum"):
        run_evaluations(path, run_id)  # the one-run reader (scripts/replay_run.py) verifies too
    other = next(r.run_id for r in pl.runs if r.run_id != run_id)
    assert run_evaluations(path, other)[100] == ([1.0, 3.0], [10, 12])


def _downgrade_to_v1(path) -> None:
    """Rewrite a store as schema 1 wrote it: no checksum column."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE ev1 (run_id TEXT NOT NULL REFERENCES runs(run_id), env_steps INTEGER NOT NULL,
                          returns TEXT NOT NULL, lengths TEXT NOT NULL, wall_time REAL NOT NULL,
                          PRIMARY KEY (run_id, env_steps));
        INSERT INTO ev1 SELECT run_id, env_steps, returns, lengths, wall_time FROM evaluations;
        DROP TABLE evaluations;
        ALTER TABLE ev1 RENAME TO evaluations;
        ALTER TABLE runs DROP COLUMN cpu_time;
        ALTER TABLE runs DROP COLUMN machine;
        UPDATE meta SET value='1' WHERE key='schema_version';
    """)
    con.commit()
    con.close()


def test_version_1_store_is_read_with_a_note_and_migrated_by_run(tmp_path, pl):
    from rlaudit.store.export import UNVERIFIED_NOTE

    path = _filled(tmp_path, pl)
    before = export_table(path).frame
    _downgrade_to_v1(path)
    old = export_table(path)
    assert old.frame.equals(before) and UNVERIFIED_NOTE in old.meta.notes

    Store.open_for_run(path, pl.protocol).close()  # what `rlaudit run` does first
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert con.execute("SELECT count(*) FROM evaluations WHERE checksum=''").fetchone()[0] == 0
    con.close()
    new = export_table(path)
    assert new.frame.equals(before) and UNVERIFIED_NOTE not in new.meta.notes


def test_runs_record_their_cpu_time_and_machine_and_a_version_2_store_is_migrated(tmp_path, pl):
    """Schema 3: ``runs.cpu_time`` and ``runs.machine``; :func:`compute_used` sums what the finished runs took and
    counts runs from before (NULL) in wall-clock time only."""
    from rlaudit.store import compute_used

    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, pl.protocol, machine={"cpu_model": "Test CPU", "machine": "x86_64",
                                                           "cpu_flags": "avx2", "torch": "2.13.0+cpu"})
    store.sync_plan(pl)
    first, second, *rest = pl.runs
    store.started(first.run_id, "w1")
    store.finished(RunResult(first.run_id, 200, 10.0, 7.2))
    store.close()
    used = compute_used(path)
    assert used["runs"] == 1 and used["runs_timed"] == 1 and used["cpu_hours"] == pytest.approx(7.2 / 3600)
    assert used["machines"] == [{"machine": "Test CPU (x86_64, avx2), torch 2.13.0+cpu", "runs": 1}]
    assert used["backends"] == {"sb3": 1}

    # a version-2 store (no columns): read with the runs counted in wall-clock time, migrated by the next run
    con = sqlite3.connect(path)
    con.executescript("ALTER TABLE runs DROP COLUMN cpu_time; ALTER TABLE runs DROP COLUMN machine; "
                      "UPDATE meta SET value='2' WHERE key='schema_version';")
    con.commit()
    con.close()
    old = compute_used(path)
    assert old["cpu_hours"] is None and old["runs_timed"] == 0 and old["wall_hours"] == pytest.approx(10 / 3600)
    assert old["machines"] == [{"machine": "not recorded per run (this store's drivers ran on Test CPU (x86_64, avx2), "
                                           "torch 2.13.0+cpu)", "runs": 1}]
    store = Store.open_for_run(path, pl.protocol)  # no fingerprint given: the run's machine stays NULL
    store.started(second.run_id, "w1")
    store.finished(RunResult(second.run_id, 200, 5.0, 4.0))
    store.close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.close()
    both = compute_used(path)
    assert both["runs"] == 2 and both["runs_timed"] == 1 and both["cpu_hours"] == pytest.approx(4.0 / 3600)
    assert both["wall_hours"] == pytest.approx(15 / 3600)


def test_an_incomplete_sweep_is_a_checklist_warning_in_the_verdict(tmp_path):
    """Auditing a store before its sweep finished says so in the verdict, with the counts; a finished one does not."""
    from rlaudit.protocol import load_protocol

    proto = tmp_path / "st3.toml"
    proto.write_text(TEXT.replace("seeds = 2", "seeds = 3").replace("[[claims]]\nbetter = \"PPO\"\nworse = \"A2C\"\n", ""))
    p3 = plan(load_protocol(proto))
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, p3.protocol)
    store.sync_plan(p3)
    later = []
    for r in p3.runs:
        means = {50: 1.0 + r.seed, 100: 2.0 + r.seed, 150: 3.0 + r.seed, 200: 4.0 + r.seed}
        if r.seed == 2:
            later.append((r, means))
        else:
            fill(store, r, means)
    store.close()
    assert export_table(path).meta.runs_planned == 12 and export_table(path).meta.runs_finished == 8

    def audit(out):
        result = CliRunner().invoke(main, ["report", str(path), "-o", str(tmp_path / out), "--format", "md,json",
                                           "--reps", "2000", "--reps-pairwise", "100"])
        assert result.exit_code == 0, result.output
        doc = json.loads((tmp_path / out / "audit.json").read_text())
        return [c for c in doc["checklist"] if c["id"] == "incomplete-sweep"], (tmp_path / out / "report.md").read_text()

    found, md = audit("a")
    assert [(c["severity"], c["details"]) for c in found] == [("warning", {"runs_planned": 12, "runs_finished": 8})]
    assert "the sweep is incomplete: 8 of 12 planned runs are finished and audited; 4 are not" in md.split("## 2.")[0]

    store = Store.open_for_run(path, p3.protocol)
    for r, means in later:
        fill(store, r, means)
    store.close()
    found, md = audit("b")
    assert found == [] and "sweep is incomplete" not in md
    # what the runs took (fill records no CPU time and no machine: as a store from before schema 3 reads)
    assert ("| Compute | 0.005 run-hours of wall-clock time over 12 runs (CPU time not recorded: runs from before "
            "store schema 3); backend: sb3 (12 runs); machine: not recorded (12 runs) |") in md
    from rlaudit.report.model import compute_text

    one = {"runs": 1, "runs_timed": 1, "cpu_hours": 0.5, "wall_hours": 0.5, "backends": {"sb3": 1},
           "machines": [{"machine": "A", "runs": 1}, {"machine": "B", "runs": 2}]}
    assert compute_text(one) == ("0.5 CPU-hours over 1 run (wall-clock 0.5 run-hours); backend: sb3 (1 run); "
                                 "machine: A (1 run); B (2 runs)")


def test_run_counts_in_score_metadata_are_checked():
    from rlaudit.scores import ScoreMeta

    with pytest.raises(InputError, match="runs_finished \\(3\\) exceeds runs_planned \\(2\\)"):
        ScoreMeta.from_dict({"runs_planned": 2, "runs_finished": 3}, "m.json")
    with pytest.raises(InputError, match="m.json: runs_planned must be a whole number >= 0, got -1"):
        ScoreMeta.from_dict({"runs_planned": -1}, "m.json")


def test_a_spec_stored_before_a_field_existed_compares_with_its_default(pl):
    """Runs recorded before ``algorithm.backend`` existed are runs of the "sb3" backend when a changed protocol
    takes their store over."""
    from rlaudit.store.sqlite import _spec_content

    spec = json.loads(pl.runs[0].to_json())
    assert spec["algorithm"].pop("backend") == "sb3"
    assert _spec_content(json.dumps(spec)) == _spec_content(pl.runs[0].to_json())
    spec["algorithm"]["backend"] = "jax"
    assert _spec_content(json.dumps(spec)) != _spec_content(pl.runs[0].to_json())


def test_the_main_file_alone_holds_every_finished_run(tmp_path, pl):
    """git commits store.sqlite without its -wal: a copy of the main file taken while the driver runs (no close(),
    no WAL checkpoint at exit) must still hold each finished run and its evaluations."""
    import shutil

    store, a, b = one_done_one_running(tmp_path / "s.sqlite", pl)
    assert (tmp_path / "s.sqlite-wal").exists()
    (tmp_path / "copy").mkdir()
    shutil.copy(tmp_path / "s.sqlite", tmp_path / "copy" / "s.sqlite")  # the main file only
    store.close()

    con = sqlite3.connect(tmp_path / "copy" / "s.sqlite")
    assert con.execute("SELECT status FROM runs WHERE run_id=?", (a.run_id,)).fetchone()[0] == "done"
    assert con.execute("SELECT COUNT(*) FROM evaluations WHERE run_id=?", (a.run_id,)).fetchone()[0] == 4
    con.close()


# ----------------------------------------------------------------------------------- sweep notes (<store>.notes.toml)

def test_notes_beside_a_store_reach_its_table_and_a_bad_notes_file_is_refused_in_one_line(tmp_path, pl):
    from rlaudit.store.notes import check_notes_file, notes_path, read_notes, set_note

    path = _filled(tmp_path, pl)
    (tmp_path / "notes.toml").write_text("the user's own file, not TOML at all [")  # never read as the notes
    assert read_notes(path) == () and notes_path(path) == tmp_path / "s.sqlite.notes.toml"
    plain = export_table(path).meta.notes
    set_note(notes_path(path), "z_gpu", 'measured "here"\n on a GPU \\ with ünicode')
    set_note(notes_path(path), "a_first", "first by key")
    set_note(notes_path(path), "z_gpu", 'measured "there" on a GPU \\ with ünicode')  # a key is replaced
    assert read_notes(path) == ("first by key", 'measured "there" on a GPU \\ with ünicode')
    assert export_table(path).meta.notes == (*plain, "first by key", 'measured "there" on a GPU \\ with ünicode')
    for bad, message in (("[notes\n", "cannot read the sweep's notes"), ("notes = 3\n", "'notes' must be a table"),
                         ("[notes]\ngpu = 3\n", "notes.gpu must be a non-empty string")):
        notes_path(path).write_text(bad)
        with pytest.raises(InputError, match=message):
            export_table(path)
        result = CliRunner().invoke(main, ["export", str(path), "-o", str(tmp_path / "o.csv")])
        assert result.exit_code == 2 and "s.sqlite.notes.toml" in result.output and result.output.count("\n") == 1
        assert not (tmp_path / "o.csv").exists()
        with pytest.raises(InputError, match=message):
            set_note(notes_path(path), "other", "text")
        with pytest.raises(InputError, match=message):
            check_notes_file(notes_path(path))
        assert notes_path(path).read_text() == bad
    check_notes_file(tmp_path / "new.notes.toml")  # none yet: writable
    for where, message in ((tmp_path / "no" / "n.toml", "its folder does not exist"), (tmp_path, "is a folder")):
        with pytest.raises(InputError, match=message):
            check_notes_file(where)


def test_the_flagship_gpu_note_is_the_one_its_recorded_measurement_gives():
    """sweeps/dqn-family-minatar/store.sqlite.notes.toml says what bench/results/bench_jax_budget-h200-*.json measured."""
    import importlib
    import sys
    from pathlib import Path

    from rlaudit.store.notes import read_notes

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "bench"))
    try:
        bench = importlib.import_module("bench_jax_budget")
    finally:
        sys.path.remove(str(repo / "bench"))
    result = json.loads((repo / "bench/results/bench_jax_budget-h200-2026-12-04.json").read_text())
    store = repo / "sweeps/dqn-family-minatar/store.sqlite"
    log = (repo / "bench/results/gpu-end-to-end-iqn-asterix-h200-2026-12-04.txt").read_text()
    e2e = bench.end_to_end(log)
    assert (e2e["algorithm"], e2e["runs"], e2e["steps_per_s_per_seed"]) == ("IQN", 5, 1237.0)
    assert e2e["seconds"] * e2e["steps_per_s_per_seed"] == pytest.approx(250_000, rel=1e-3)  # 250k steps a run
    text = bench.note(result, e2e, "rlaudit run bench/protocols/gpu-end-to-end-iqn-asterix.toml")
    assert text in read_notes(store)
    assert "1,237 env steps/s per seed, 86% of the rate above" in text
    iqn = next(e for e in result["entries"] if e["algorithm"] == "IQN" and e["seeds"] == 5)
    assert f"IQN {iqn['steps_per_s_per_seed']:,.0f}" in text and result["machine"]["device_kind"] in text
    assert bench.reach(iqn, 600) == int(iqn["steps_per_s_per_seed"] * (600 - iqn["compile_s"]))
    at_5 = [e for e in result["entries"] if e["seeds"] == 5]
    hours = 5 * sum(10**6 / e["steps_per_s_per_seed"] + e["compile_s"] for e in at_5) / 3600  # 5 tasks, 5 agents
    assert len(at_5) == 5 and f"takes about {hours:.1f} h on this GPU" in text and 4 < hours < 6
    docs = (repo / "docs/backends.md").read_text()
    table = "| 5: env steps/s per seed | " + " | ".join(f"{e['steps_per_s_per_seed']:,.0f}" for e in at_5) + " |"
    assert table in docs


def test_the_flagship_store_reruns_dopamines_200m_comparison_through_its_protocol_file(tmp_path, monkeypatch):
    """The committed flagship store's protocol is the file (same hash: [rerun_of] is not hashed), so its reports
    join Dopamine's 200M-frame audit: every rerun label maps to an agent of the published protocol's data. The
    store names the file relative to the repository; it is found from another folder too."""
    import tomllib
    from pathlib import Path

    from rlaudit.protocol import load_protocol
    from rlaudit.sources import store_protocol
    from rlaudit.store import stored_protocol_hash

    repo = Path(__file__).resolve().parents[1]
    store = repo / "sweeps/dqn-family-minatar/store.sqlite"
    current = load_protocol(repo / "protocols/dqn-family-minatar.toml")
    assert stored_protocol_hash(store) == current.hash
    monkeypatch.chdir(tmp_path)
    rerun_of = store_protocol(store).rerun_of
    assert rerun_of and rerun_of["suite"] == "minatar"
    assert sorted(rerun_of["agents"]) == sorted(a.label for a in current.algorithms)
    published = tomllib.loads((repo / rerun_of["protocol"]).read_text())
    names = {a.get("label") or a["published"] for a in published["rerun"]["agents"]} | {
        a["published"] for a in published["rerun"]["agents"]}
    assert set(rerun_of["agents"].values()) <= names
