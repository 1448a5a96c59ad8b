"""Hostile-user probes, round 2 (issue 21, first section): inputs that used to give wrong data or lose files
with exit status 0. Each test fails without its fix."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys

import gymnasium
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import import_path
from rlaudit.protocol import load_protocol, plan
from rlaudit.protocol.plan import run_id
from rlaudit.scores import read_scores
from rlaudit.stats.normalize import parse_normalization
from rlaudit.store import open_readonly

from test_robustness import one_line_error
from test_algorithms import clean_registry  # noqa: F401 - a fixture
from test_run import _CrashingCartPole, _Sink

# ------------------------------------------------------------------------------------------- run ids

COLLIDING = """
schema_version = 1
name = "collide"
seeds = [0, 1]
[regimes]
low = 100
"0__nested" = { budget = 200, mode = "separate" }
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
label = "X"
[[algorithms]]
name = "PPO"
label = "X__1"
"""


def test_run_ids_of_parts_holding_the_separator_do_not_collide(tmp_path):
    """Label ``X`` at seed 1, regime ``0__nested`` and label ``X__1`` at seed 0, nested, were one id."""
    path = tmp_path / "c.toml"
    path.write_text(COLLIDING)
    runs = plan(load_protocol(path)).runs
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids) == 8
    by_parts = {(r.algorithm.label, r.seed, r.regime): r.run_id for r in runs}
    assert by_parts[("X", 1, "0__nested")] != by_parts[("X__1", 0, "nested")]
    assert by_parts[("X__1", 0, "nested")] == "CartPole-v1___X%5F%5F1__0__nested"
    assert by_parts[("X", 1, "0__nested")] == "CartPole-v1__X__1___0%5F%5Fnested"
    # every escaped id splits back into its four parts
    assert all(len(i.split("__")) == 4 for i in ids)
    assert run_id("a_", "b", 0, "r") != run_id("a", "_b", 0, "r")


def test_distinct_runs_never_share_an_id():
    """Every task, label and regime of up to three of the tokens ``_``, ``a``, ``%5F``: the plain ``__`` join
    collides many times over (``a_`` + ``b`` against ``a`` + ``_b``); the escaped ids never."""
    import itertools

    parts = ["".join(p) for n in range(4) for p in itertools.product(["_", "a", "%5F"], repeat=n)]
    ids = [run_id(t, lab, seed, reg) for t, lab, reg in itertools.product(parts, repeat=3) for seed in (0, 1)]
    assert len(set(ids)) == len(ids) == len(parts) ** 3 * 2


def test_ordinary_run_ids_are_unchanged_so_recorded_stores_resume():
    """The committed stores were planned with the old ids; every id the planner makes for them still matches."""
    for name in ("quickstart", "dqn-family-minatar-250k"):
        con = open_readonly(f"sweeps/{name}/store.sqlite")
        stored = {r[0] for r in con.execute("SELECT run_id FROM runs")}
        con.close()
        planned = {r.run_id for r in plan(load_protocol(f"protocols/{name}.toml")).runs}
        assert planned == stored
    assert run_id("MinAtar/Breakout-v1", "DQN (Adam)", 3, "nested") == "MinAtar/Breakout-v1__DQN (Adam)__3__nested"
    assert run_id("T", "50%_run", 0, "low_1") == "T__50%_run__0__low_1"  # '%' and single '_' kept as they were


def test_two_runs_with_one_id_are_refused_naming_both(tmp_path):
    from rlaudit.protocol.plan import check_unique_runs

    path = tmp_path / "c.toml"
    path.write_text(COLLIDING)
    runs = plan(load_protocol(path)).runs
    twin = dataclasses.replace(runs[1], run_id=runs[0].run_id)
    with pytest.raises(InputError, match=r"c\.toml: two runs would share the id 'CartPole-v1__X__0__nested' "
                                         r"\(task 'CartPole-v1', algorithm 'X', seed 0, regime 'nested'; "
                                         r".*regime '0__nested'\)"):
        check_unique_runs([runs[0], twin], str(path))


def test_validate_and_run_of_separator_labels_keep_every_run(tmp_path):
    """End to end: the store holds one row per planned run (it held 3 of 4 before)."""
    path = tmp_path / "c.toml"
    path.write_text(COLLIDING.replace("seeds = [0, 1]", "seeds = [0, 1]\n[evaluation]\nn_eval_episodes = 1")
                    .replace('name = "PPO"\n', 'name = "PPO"\nhyperparams = { n_steps = 32, batch_size = 32, '
                                               'n_epochs = 1 }\n'))
    store = tmp_path / "s.sqlite"
    r = CliRunner().invoke(main, ["run", str(path), "--store", str(store), "--workers", "1",
                                  "--only", "regime=nested,regime=0__nested"])
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(store)
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs WHERE status='done'").fetchone() == (8, 8)
    con.close()


# ----------------------------------------------------------------------------------------- CSV shape

@pytest.mark.parametrize("text,message", [
    ("game,DQN,Rainbow\nPong,1,2,\nBreakout,3,4,\n",
     r"w\.csv: line 2: 4 fields, but the header has 3 columns \(the line ends in a separator\?\)"),
    ("game,DQN,DQN\nPong,1,2\n", r"w\.csv: line 1: column 'DQN' appears twice in the header \(columns 2 and 3\)"),
    ("# from table 2\ngame,DQN,Rainbow\nPong,1,2\nBreakout,3\n", r"w\.csv: line 4: 2 fields, but the header has 3"),
    ("game,DQN,Rainbow,\nPong,1,2,\n", r"w\.csv: line 1: column 4 of the header has no name \(the header ends in a"),
    ("game,,Rainbow\nPong,1,2\n", r"w\.csv: line 1: column 2 of the header has no name$"),
])
def test_wide_refuses_ragged_rows_and_duplicate_headers(tmp_path, text, message):
    (tmp_path / "w.csv").write_text(text)
    with pytest.raises(InputError, match=message):
        import_path("wide", [tmp_path / "w.csv"])


def test_wide_comment_lines_and_inline_comments_still_read(tmp_path):
    (tmp_path / "w.csv").write_text("# table 2\ngame,DQN,Rainbow\nPong,1,2  # rerun\n\nBreakout,3,\n")
    f = import_path("wide", [tmp_path / "w.csv"]).frame
    assert sorted(zip(f["algorithm"], f["task"], f["score"])) == [("DQN", "Breakout", 3.0), ("DQN", "Pong", 1.0),
                                                                  ("Rainbow", "Pong", 2.0)]


@pytest.mark.parametrize("text,message", [
    ("algorithm,task,run,budget,score,score\nPPO,C,0,1,1.0,2.0\n",
     r"t\.csv: line 2: column 'score' appears twice in the header \(columns 5 and 6\)"),
    ("algorithm,task,run,budget,score\nPPO,C,0,1,1.0,\nPPO,C,1,1,2.0,\n", r"t\.csv: line 3: 6 fields"),
])
def test_tidy_csv_refuses_duplicate_columns_and_ragged_rows(tmp_path, text, message):
    (tmp_path / "t.csv").write_text("# rlaudit.budget_unit: \"env_steps\"\n" + text)
    with pytest.raises(InputError, match=message):
        read_scores(tmp_path / "t.csv")


def test_minmax_reference_file_refuses_a_duplicate_column(tmp_path):
    (tmp_path / "refs.csv").write_text("task,low,high,low\na,0,1,5\n")
    with pytest.raises(InputError, match=r"refs\.csv: line 1: column 'low' appears twice"):
        parse_normalization(f"minmax:{tmp_path / 'refs.csv'}")


# ------------------------------------------------------------------------------------ budget overflow

def test_dopamine_budget_past_int64_is_refused_not_wrapped(tmp_path):
    recs = [{"Iteration": i, "Value": 1.0, "Agent": "DQN"} for i in (0, 1, 2 * 10**13)]
    (tmp_path / "pong.json").write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"pong\.json: record 3: budget 20,000,000,000,001,000,000 = \(Iteration "
                                         r"20,000,000,000,000 \+ 1\) x 1,000,000 frames is larger than"):
        import_path("dopamine", [tmp_path / "pong.json"])
    recs[-1]["Iteration"] = 2 * 10**19  # past int64 before any multiplication
    (tmp_path / "pong.json").write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"record 3: 'Iteration' 20000000000000000000 is larger than 2\^63 - 1"):
        import_path("dopamine", [tmp_path / "pong.json"])


def test_budgets_options_past_int64_are_refused(tmp_path):
    recs = [{"Iteration": i, "Value": 1.0, "Agent": "DQN"} for i in range(3)]
    (tmp_path / "pong.json").write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"option 'budgets': '1e19' is out of range: at most 9,223,372,036,854,775,807"):
        import_path("dopamine", [tmp_path / "pong.json"], budgets="1M,1e19")
    recs = [{"game": "Pong", "seed": 0, "iteration": 10**13, "HNS": 0.5}]
    (tmp_path / "der.json").write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"der\.json: record 1: budget 10,000,000,000,001,000,000 = \(iteration"):
        import_path("rliable", [tmp_path / "der.json"], layout="records", budget_per_iteration="1M")


def test_a_timestamp_budget_column_is_refused(tmp_path):
    frame = pd.DataFrame({"algorithm": ["PPO"], "task": ["C"], "run": ["0"],
                          "budget": pd.to_datetime(["2026-01-01"]), "score": [1.0]})
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"t\.parquet: column 'budget' holds datetime64\[.*\] values, expected "
                                         r"numbers"):
        read_scores(tmp_path / "t.parquet")
    frame["budget"], frame["score"] = [100], [True]
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"column 'score' holds bool values"):
        read_scores(tmp_path / "t.parquet")


# --------------------------------------------------------------------------------- minmax references

@pytest.mark.parametrize("refs", ["task,low,high\nPong,10,-5\n", "task,low,high\nPong,3,3\n"])
def test_minmax_low_above_or_equal_to_high_is_refused(tmp_path, refs):
    (tmp_path / "refs.csv").write_text(refs)
    with pytest.raises(InputError, match=r"refs\.csv:2: low (\(10\) is above high \(-5\)|and high are equal)"):
        parse_normalization(f"minmax:{tmp_path / 'refs.csv'}")
    with pytest.raises(InputError, match=r"references\.Pong: low"):
        parse_normalization({"method": "minmax", "references": {"Pong": [10, -5] if "10" in refs else [3, 3]}})


# ------------------------------------------------------------------------------ sys.exit in a run

class _ExitingCartPole(_CrashingCartPole):
    """Calls ``sys.exit(0)`` mid-training, as a careless plugin's ``learn()`` might."""

    raises: BaseException = SystemExit(0)

    def step(self, action):
        self.n += 1
        if self.n > 40:
            raise self.raises
        return self.env.step(action)


class _InterruptingCartPole(_ExitingCartPole):
    raises = KeyboardInterrupt()


gymnasium.register("RlauditTest/Exit-v0", entry_point=_ExitingCartPole)
gymnasium.register("RlauditTest/Interrupt-v0", entry_point=_InterruptingCartPole)
gymnasium.register("RlauditTest/ExitOnMake-v0", entry_point=lambda **kw: sys.exit(0))

EXITING = """
schema_version = 1
name = "exits"
seeds = 1
[regimes]
high = 64
[[tasks]]
id = "{bad}"
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
hyperparams = {{ n_steps = 32, batch_size = 32, n_epochs = 1 }}
[evaluation]
n_eval_episodes = 1
"""


def test_sys_exit_from_run_code_is_a_failed_run(tmp_path):
    """Before: ``run`` ended with exit 0, no summary, and the run left ``running``."""
    path = tmp_path / "e.toml"
    path.write_text(EXITING.format(bad="RlauditTest/Exit-v0"))
    store = tmp_path / "s.sqlite"
    r = CliRunner().invoke(main, ["run", str(path), "--store", str(store), "--workers", "1"])
    assert r.exit_code == 1, r.output
    assert "1 of 2 runs failed" in r.stderr
    con = sqlite3.connect(store)
    rows = dict(con.execute("SELECT task, status FROM runs"))
    error, = con.execute("SELECT error FROM runs WHERE status='failed'").fetchone()
    con.close()
    assert rows == {"RlauditTest/Exit-v0": "failed", "CartPole-v1": "done"}
    assert ("RunExited: RlauditTest/Exit-v0__PPO__0__nested: the algorithm or environment code called sys.exit(0)"
            in error)


def test_keyboard_interrupt_raised_by_run_code_in_a_pool_worker_fails_that_run(tmp_path):
    """Pool workers ignore SIGINT, so a KeyboardInterrupt there is the run's own: before, it killed the worker."""
    from rlaudit.run.executors import LocalExecutor

    path = tmp_path / "e.toml"
    path.write_text(EXITING.format(bad="RlauditTest/Interrupt-v0"))
    bad, good = plan(load_protocol(path)).runs
    # "module:id" makes the spawned worker import this file, which registers the environment
    bad = dataclasses.replace(bad, task=dataclasses.replace(bad.task, id=f"{__name__}:RlauditTest/Interrupt-v0"))
    sink = _Sink()
    LocalExecutor(workers=2).run([bad, good], sink)
    failed = [e for e in sink.events if e[0] == "failed"]
    assert [e[1] for e in failed] == [bad.run_id] and failed[0][2].rstrip().endswith("KeyboardInterrupt")
    assert [e[1] for e in sink.events if e[0] == "finished"] == [good.run_id]


# ------------------------------------------------------------------------------- report and audit folders

AUDIT_JSON = "reports/quickstart/audit.json"


def _report(*args):
    return CliRunner().invoke(main, ["report", AUDIT_JSON, "--format", "json", *args])


@pytest.mark.parametrize("name,content,message", [
    ("index.html", "my home page", "index.html there was not written by rlaudit and would be overwritten"),
    ("notes.txt", "mine", "the folder holds files and no earlier rlaudit report"),
])
def test_report_refuses_a_folder_of_other_files_unless_forced(tmp_path, name, content, message):
    user = tmp_path / "site"
    user.mkdir()
    (user / name).write_text(content)
    line = one_line_error(_report("-o", str(user)))
    assert f"site: {message}" in line and "--force" in line
    assert sorted(p.name for p in user.iterdir()) == [name]
    assert _report("-o", str(user), "--force").exit_code == 0
    assert (user / name).read_text() == content and (user / "audit.json").is_file()


def test_report_replaces_an_earlier_report_recognised_by_any_of_its_files(tmp_path):
    from rlaudit.io import check_output_dir
    from rlaudit.report import OUTPUT_FILES

    out = tmp_path / "r"
    assert _report("-o", str(out)).exit_code == 0
    assert _report("-o", str(out)).exit_code == 0
    assert (out / "notes.txt").write_text("kept") and _report("-o", str(out)).exit_code == 0
    for name in ("index.html", "report.md", "tables.tex"):  # every committed report is recognised by each file
        only = tmp_path / name
        only.mkdir()
        (only / name).write_bytes((_repo() / "reports/quickstart" / name).read_bytes())
        check_output_dir(only, OUTPUT_FILES.values())


def test_report_refuses_an_empty_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "" would have meant this folder
    line = one_line_error(CliRunner().invoke(main, ["report", f"{_repo()}/{AUDIT_JSON}", "--format", "json", "-o", ""]))
    assert "-o: empty path" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", ["/", "/tmp/../"])
def test_the_file_system_root_is_refused_as_an_output_folder(out):
    """Checked on the function the commands call first, so that a regression cannot write into ``/``."""
    from rlaudit.io import check_output_dir

    with pytest.raises(InputError, match=r"^-o /(tmp/\.\./)?: the root of the file system; give a folder of its own$"):
        check_output_dir(out, ("audit.json",))
    with pytest.raises(InputError, match="the root of the file system"):
        check_output_dir(out, ("audit.json",), "--out", force=True, folder=False)


def _repo():
    from pathlib import Path

    return Path(__file__).resolve().parents[1]


def test_audit_out_refuses_to_overwrite_a_foreign_audit_json(tmp_path, monkeypatch):
    (tmp_path / "audit.json").write_text('{"mine": 1}')
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # where --out "" would have written
    args = ["audit", f"{_repo()}/sweeps/quickstart/scores.csv", "--reps", "6000", "-q", "--out"]
    line = one_line_error(CliRunner().invoke(main, [*args, str(tmp_path)]))
    assert "audit.json there was not written by rlaudit and would be overwritten" in line
    assert (tmp_path / "audit.json").read_text() == '{"mine": 1}'
    assert "--out: empty path" in one_line_error(CliRunner().invoke(main, [*args, ""]))
    assert list((tmp_path / "cwd").iterdir()) == []
    r = CliRunner().invoke(main, [*args, str(tmp_path), "--force"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, [*args, str(tmp_path)])  # now rlaudit's own: replaced without --force
    assert r.exit_code == 0, r.output


# ----------------------------------------------------------------------------------- store identity

STORE_TOML = """
schema_version = 1
name = "ids"
seeds = 1
[regimes]
high = 64
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
"""


def _foreign_sqlite(path, app_id=0):
    """Another application's database that happens to use rlaudit's table names (rollback journal)."""
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); CREATE TABLE runs (x);"
                      "CREATE TABLE evaluations (y); CREATE TABLE protocols (z); CREATE TABLE regimes (w);"
                      "INSERT INTO meta VALUES ('schema_version', '1');")
    con.execute(f"PRAGMA application_id = {app_id}")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("app_id,why", [(0, "its meta table lacks created, protocol_hash, rlaudit"),
                                        (0x47504B47, "its application id is 0x47504b47, rlaudit's is 0x726c6175")])
def test_another_applications_sqlite_file_is_refused_unchanged(tmp_path, app_id, why):
    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML)
    db = tmp_path / "app.db"
    before = _foreign_sqlite(db, app_id)
    commands = [["run", str(proto), "--store", str(db)], ["validate", str(proto), "--store", str(db)],
                ["status", str(db)], ["export", str(db), "-o", str(tmp_path / "x.csv")],
                ["audit", str(db), "--out", str(tmp_path)]]
    for args in commands:
        line = one_line_error(CliRunner().invoke(main, args))
        assert f"app.db: an SQLite file but not an rlaudit store ({why})" in line, args
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "p.toml"]  # no -wal, -shm, x.csv, audit.json


def test_a_new_store_carries_rlaudits_application_id_and_old_stores_are_still_read(tmp_path):
    from rlaudit.store import Store
    from rlaudit.store.sqlite import APPLICATION_ID

    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML)
    pl = plan(load_protocol(proto))
    Store.open_for_run(tmp_path / "s.sqlite", pl.protocol).close()
    con = sqlite3.connect(tmp_path / "s.sqlite")
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    con.close()
    con = open_readonly("sweeps/dqn-family-minatar-250k/store.sqlite")  # recorded before the application id: meta says
    assert con.execute("PRAGMA application_id").fetchone()[0] == 0
    con.close()


def test_readers_leave_no_wal_or_shm_files(tmp_path):
    import shutil

    shutil.copy("sweeps/quickstart/store.sqlite", tmp_path / "store.sqlite")
    for args in (["status", str(tmp_path / "store.sqlite")],
                 ["export", str(tmp_path / "store.sqlite"), "-o", str(tmp_path / "out" / "s.csv")]):
        assert CliRunner().invoke(main, args).exit_code == 0
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["store.sqlite"], args
    con = open_readonly(tmp_path / "store.sqlite")
    assert (tmp_path / "store.sqlite-shm").exists()  # while open: SQLite's own
    con.close()
    assert not (tmp_path / "store.sqlite-shm").exists() and not (tmp_path / "store.sqlite-wal").exists()


# ------------------------------------------------------------------------------ atomic store creation

def test_a_store_appears_only_complete(tmp_path, monkeypatch):
    """The store path appears by one link of a finished file; a driver killed before it leaves no store."""
    import os

    from rlaudit.store import Store
    from rlaudit.store import sqlite as store_sqlite

    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML)
    pl = plan(load_protocol(proto))
    path = tmp_path / "s.sqlite"
    seen = []
    real_link = os.link

    def link(src, dst):
        assert not path.exists()
        con = sqlite3.connect(src)
        seen.append((con.execute("PRAGMA application_id").fetchone()[0],
                     con.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]))
        con.close()
        real_link(src, dst)

    monkeypatch.setattr(store_sqlite.os, "link", link)
    Store.open_for_run(path, pl.protocol).close()
    assert seen == [(store_sqlite.APPLICATION_ID, 5)]
    path.unlink()

    def killed(fd):
        raise KeyboardInterrupt  # as a SIGKILL at that moment: the complete file is not yet in place

    monkeypatch.setattr(store_sqlite.os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        Store.open_for_run(path, pl.protocol)
    assert not path.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["p.toml"]  # the temporary file is gone too


def test_atomic_writes_give_the_permissions_of_a_plain_write(tmp_path):
    """A written output is readable as one open(path, "w") would leave it (0o666 less the umask), and a replaced
    file keeps its own mode: the temporary file of an atomic write must not make outputs private (0o600)."""
    import os
    import stat

    from rlaudit.io import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.json", "{}")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644
        os.umask(0o027)
        atomic_write_text(tmp_path / "group.json", "{}")
        assert stat.S_IMODE((tmp_path / "group.json").stat().st_mode) == 0o640
        (tmp_path / "new.json").chmod(0o604)
        atomic_write_text(tmp_path / "new.json", "[]")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o604
        assert (tmp_path / "new.json").read_text() == "[]"
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["group.json", "new.json"]  # no temporary file left


def test_an_empty_store_file_is_refused_with_a_hint_and_new_store_replaces_it(tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML)
    store = tmp_path / "s.sqlite"
    store.write_bytes(b"")
    line = one_line_error(CliRunner().invoke(main, ["validate", str(proto), "--store", str(store)]))
    assert "s.sqlite: an empty file (0 bytes), not a store" in line and "--new-store" in line
    assert "an empty file (0 bytes)" in one_line_error(CliRunner().invoke(main, ["status", str(store)]))
    r = CliRunner().invoke(main, ["run", str(proto), "--store", str(store), "--new-store", "--dry-run"])
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------------------- Ray auth token

PRIVATE_RAY = """
import os, ray
from rlaudit.run.ray_executor import RayExecutor
ex = RayExecutor()
ex._owns_ray = ex._connect(ray)
assert ex._owns_ray and os.environ["RAY_AUTH_MODE"] == "token" and os.environ["RAY_AUTH_TOKEN"]
assert ray.get(ray.remote(lambda: 2).remote()) == 2
session = ray._private.worker._global_node.get_session_dir_path()
assert os.path.isdir(session)
ex._shutdown(ray, ex._owns_ray)
assert not os.path.exists(session), session
assert not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} & set(os.environ), os.environ
print("ok")
"""


def test_a_private_ray_instance_leaves_no_auth_token_and_no_session_files(tmp_path):
    """Before: ``--executor ray`` without ``--address`` wrote ``~/.ray/auth_token``, which turns token
    authentication on for every later ``ray start --head``, whose drivers then get ``InvalidAuthToken``; and
    it left its session folder (logs, sockets) under ``/tmp/ray``."""
    import os
    import subprocess
    import sys

    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(_repo()), RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", PRIVATE_RAY], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
    assert not (tmp_path / ".ray" / "auth_token").exists()


def test_a_plugin_module_calling_sys_exit_on_import_is_one_line(clean_registry, tmp_path, monkeypatch):
    """Before: ``validate`` of a protocol naming it ended with exit status 0 and printed nothing."""
    (tmp_path / "exiting_plugin.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    clean_registry.register("Exiting", "exiting_plugin:Learner", source="plugin exiting (test)")
    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML.replace('name = "PPO"', 'name = "Exiting"'))
    line = one_line_error(CliRunner().invoke(main, ["validate", str(proto), "--store", str(tmp_path / "s.sqlite")]))
    assert ("algorithm 'Exiting' from plugin exiting (test): cannot import 'exiting_plugin:Learner': SystemExit: 0"
            in line)


def test_an_environment_exiting_while_validate_builds_it_is_one_line(tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(STORE_TOML.replace('id = "CartPole-v1"', 'id = "RlauditTest/ExitOnMake-v0"'))
    line = one_line_error(CliRunner().invoke(main, ["validate", str(proto), "--store", str(tmp_path / "s.sqlite")]))
    assert "tasks[0]: cannot build 'RlauditTest/ExitOnMake-v0' with kwargs {}: SystemExit: 0" in line


def test_a_cluster_refusing_the_token_is_explained_in_one_line(monkeypatch):
    """What a driver met after an earlier private instance wrote ``~/.ray/auth_token``: Ray's message alone
    does not say why the cluster wants a token."""
    ray = pytest.importorskip("ray")
    from ray.exceptions import AuthenticationError

    from rlaudit.run import ray_executor

    def refuse(**kwargs):
        raise AuthenticationError("Invalid or missing authentication token")

    monkeypatch.setattr(ray_executor, "check_reachable", lambda address: None)  # no cluster to answer here
    monkeypatch.setattr(ray, "init", refuse)
    ex = ray_executor.RayExecutor(address="127.0.0.1:6390")
    with pytest.raises(InputError, match=r"^--address 127\.0\.0\.1:6390: the cluster refused this driver's "
                                         r"authentication token \(Invalid or missing authentication token\); "
                                         r"'ray start --head' requires a token whenever ~/\.ray/auth_token "
                                         r"exists .*RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH.*RAY_AUTH_MODE=disabled$"):
        ex._connect(ray)
