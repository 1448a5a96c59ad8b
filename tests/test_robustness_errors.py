"""Hostile-user probes, round 2 (issue 21): inputs that gave a traceback or a misleading message now give one
line naming what and where (file, line, key, flag), a non-zero exit, and nothing partial."""

from __future__ import annotations

import json
import os
import sqlite3
import warnings

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.protocol import load_protocol, plan
from tests.test_robustness import STORE_PROTOCOL, filled_store, one_line_error
from tests.test_run import stored_evaluations

DEEP = 3000
"""Past Python's recursion limit (1,000), so that a parser, checker or hash that recurses fails."""


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def pl(tmp_path):
    path = tmp_path / "rb.toml"
    path.write_text(STORE_PROTOCOL)
    return plan(load_protocol(path))


# ----------------------------------------------------------------------------------- deep nesting

@pytest.mark.parametrize("tail", [
    "x = " + "[" * DEEP + "]" * DEEP,
    "x = " + "{a = " * DEEP + "1" + "}" * DEEP,
    # dotted tables inside a key the loader accepts: parsed without recursion, then hashed
    "[[tasks]]\nid = 'CartPole-v1'\n[tasks.kwargs." + ".".join(["a"] * DEEP) + "]",
], ids=["arrays", "inline-tables", "dotted-tables"])
def test_deeply_nested_protocol_is_one_line_naming_the_file(tmp_path, tail):
    path = tmp_path / "deep.toml"
    path.write_text("schema_version = 1\nname = 'deep'\nseeds = 1\n[regimes]\nlow = 100\n"
                    "[[algorithms]]\nname = 'PPO'\n" + tail + "\n")
    line = one_line_error(invoke("validate", path))
    assert str(path) in line and "nested more than" in line


def test_nesting_within_the_limit_is_still_read(tmp_path):
    from rlaudit.io import MAX_NESTING, loads_nested

    ok = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert loads_nested(json.loads, ok, "x") is not None
    with pytest.raises(InputError, match="x: arrays or tables nested more than"):
        loads_nested(json.loads, "[" + ok + "]", "x")


def test_deeply_nested_claims_file_and_audit_json(tmp_path):
    claims = tmp_path / "claims.toml"
    claims.write_text("claims = " + "[" * DEEP + "]" * DEEP + "\n")
    scores = tmp_path / "s.csv"
    scores.write_text("algorithm,task,run,budget,score\nA,t,0,1,1\nB,t,0,1,2\n")
    assert str(claims) in one_line_error(invoke("audit", scores, "--claims", claims, "--out", tmp_path))
    deep = tmp_path / "audit.json"
    deep.write_text('{"schema_version": 1, "x": ' + "[" * DEEP + "]" * DEEP + "}")
    assert str(deep) in one_line_error(invoke("report", deep, "-o", tmp_path / "rep"))
    assert not (tmp_path / "rep").exists()
    published = tmp_path / "dqn.json"
    published.write_text("[" * DEEP + "]" * DEEP)
    assert str(published) in one_line_error(invoke("import", "rliable", published, "-o", tmp_path / "o.csv"))


# ----------------------------------------------------------------------------------- stores

def test_store_schema_version_that_is_not_an_integer(tmp_path, pl):
    path = filled_store(tmp_path / "s.sqlite", pl)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='two' WHERE key='schema_version'")
    con.commit()
    con.close()
    for command in ("status", "export", "audit"):
        extra = {"export": ["-o", tmp_path / "e.csv"], "audit": ["--out", tmp_path]}.get(command, [])
        line = one_line_error(invoke(command, path, *extra))
        assert str(path) in line and "'two'" in line, line


def test_status_leaves_no_wal_or_shm_beside_the_store(tmp_path, pl):
    path = filled_store(tmp_path / "s.sqlite", pl)
    before = sorted(os.listdir(tmp_path))
    digest = path.read_bytes()
    for command in ("status", "export"):
        out = tmp_path / "out" / "s.csv"
        result = invoke(command, path, *(["-o", out] if command == "export" else []))
        assert result.exit_code == 0, result.output
        assert sorted(os.listdir(tmp_path)) == sorted(before + ["out"] * (command == "export"))
    assert path.read_bytes() == digest


def test_a_reader_beside_a_live_writer_removes_nothing(tmp_path, pl):
    from rlaudit.store import open_readonly

    path = filled_store(tmp_path / "s.sqlite", pl)
    writer = sqlite3.connect(path)
    writer.execute("INSERT INTO meta(key, value) VALUES ('probe', 'x')")
    writer.commit()  # the commit is in the WAL only, until the writer closes
    con = open_readonly(path)
    assert con.execute("SELECT value FROM meta WHERE key='probe'").fetchone()[0] == "x"
    con.close()
    assert os.path.exists(f"{path}-wal") and os.path.exists(f"{path}-shm")
    writer.close()
    con = open_readonly(path)
    assert con.execute("SELECT value FROM meta WHERE key='probe'").fetchone()[0] == "x"
    con.close()


# ----------------------------------------------------------------------------------- score-file metadata

def _parquet_with_meta(path, stored: bytes):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"algorithm": ["A", "B"], "task": ["t", "t"], "run": ["0", "0"], "budget": [1, 1],
                      "score": [1.0, 2.0]})
    pq.write_table(table.replace_schema_metadata({b"rlaudit": stored}), path)
    return path


@pytest.mark.parametrize("stored", [b"[1, 2]", b"not json", b'{"notes": 5}', b'{"budget_unit": 5}',
                                    b'{"notes": [1]}', b'{"source": {}}', b"\xff"])
def test_parquet_metadata_of_the_wrong_shape_is_one_line(tmp_path, stored):
    path = _parquet_with_meta(tmp_path / "s.parquet", stored)
    line = one_line_error(invoke("audit", path, "--out", tmp_path))
    assert str(path) in line
    assert not (tmp_path / "audit.json").exists()


@pytest.mark.parametrize("header", ["# rlaudit.notes: 5", "# rlaudit.score_kind: []", "# rlaudit.source: {}",
                                    "# rlaudit.notes: " + "[" * DEEP + "]" * DEEP])
def test_csv_metadata_of_the_wrong_shape_is_one_line(tmp_path, header):
    path = tmp_path / "s.csv"
    path.write_text(header + "\nalgorithm,task,run,budget,score\nA,t,0,1,1\nB,t,0,1,2\n")
    assert str(path) in one_line_error(invoke("audit", path, "--out", tmp_path))


# ----------------------------------------------------------------------------------- numbers

@pytest.mark.parametrize("seed", ["NaN", "Infinity", "-Infinity"])
def test_rliable_record_seed_that_is_not_finite(tmp_path, seed):
    path = tmp_path / "DER.json"
    path.write_text('[{"game": "Pong", "seed": ' + seed + ', "HNS": 0.5}]')
    line = one_line_error(invoke("import", "rliable", path, "--budget", "100k", "-o", tmp_path / "o.csv"))
    assert line.startswith(f"error: {path}: record 1: needs a 'seed'")
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("value", ["1e400", "1e999999999", "9" * 400, "1e19"])
def test_counts_past_int64_are_out_of_range_not_a_traceback(tmp_path, value):
    from rlaudit.importers._common import parse_count

    with pytest.raises(InputError, match=r"^where: .* is out of range: at most 9,223,372,036,854,775,807"):
        parse_count(value, "where")
    scores = tmp_path / "s.csv"
    scores.write_text("algorithm,task,run,budget,score\nA,t,0,1,1\nB,t,0,1,2\n")
    assert "--budgets: " in one_line_error(invoke("audit", scores, "--budgets", value, "--out", tmp_path))
    published = tmp_path / "pong.json"
    published.write_text('{"Pong": [1.0, 2.0]}')
    line = one_line_error(invoke("import", "rliable", published, "--budget", value, "-o", tmp_path / "o.csv"))
    assert "option 'budget'" in line and "out of range" in line
    wide = tmp_path / "wide.csv"
    wide.write_text(f"game,budget,DQN\nPong,{value},1.0\n")
    line = one_line_error(invoke("import", "wide", wide, "-o", tmp_path / "o.csv"))
    assert line.startswith(f"error: {wide}: line 2") and "out of range" in line


def test_counts_are_parsed_exactly():
    from rlaudit.importers._common import parse_count
    from rlaudit.scores import BUDGET_MAX

    assert parse_count("9007199254740993", "") == 9007199254740993  # 2^53 + 1: a float would drop the 1
    assert parse_count(str(BUDGET_MAX), "") == BUDGET_MAX
    assert parse_count("1.5M", "") == 1_500_000 and parse_count("2e5", "") == 200_000
    with pytest.raises(InputError, match="expected a whole number"):
        parse_count("1e-400", "")


@pytest.mark.parametrize("budget", ["100000000000000000000", "9" * 400])
def test_rerun_budgets_out_of_range_are_named_so(budget):
    from rlaudit.protocol.rerun import parse_budgets

    with pytest.raises(InputError, match=r"^--budgets: .* is out of range: a budget is at most"):
        parse_budgets(budget)


def test_rerun_of_a_huge_budget_gets_a_usable_exact_regime_name(tmp_path):
    from rlaudit.protocol.rerun import budget_name

    assert budget_name(10**18) == "1000000000G"
    assert budget_name(1_234_567) == "1234.567k" and budget_name(1_234_568) == "1234.568k"  # not both 1234.57k
    result = invoke("validate", "protocols/published/dopamine-atari-200m.toml", "--suite", "minatar",
                    "--budgets", "1000000000000000000")
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------------------------- evaluations.npz headers

def _npz_claiming(path, n_steps: int, data_bytes: int):
    import io
    import zipfile

    import numpy as np

    def npy(shape, descr):
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
        return buf.getvalue() + b"\0" * data_bytes

    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("timesteps.npy", npy((n_steps,), "<i8"))
        archive.writestr("results.npy", npy((10, 1), "<f8"))
    return path


@pytest.mark.parametrize("n_steps, message", [
    (10**12, "array 'timesteps' claims shape (1000000000000,) (1,000,000,000,000 values), more than 50,000,000"),
    (1000, "array 'timesteps' claims shape (1000,) (8,000 bytes) but the archive holds 80 bytes for it"),
])
def test_npz_header_claiming_more_than_it_holds_is_refused_before_allocating(tmp_path, n_steps, message):
    import resource

    path = _npz_claiming(tmp_path / "logs" / "ppo" / "CartPole-v1_1" / "evaluations.npz", n_steps, 80)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = one_line_error(invoke("import", "zoo", tmp_path / "logs", "-o", tmp_path / "o.csv"))
    assert line.startswith(f"error: {path}: {message}")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: nothing big allocated


# ----------------------------------------------------------------------------------- report of a bad audit.json

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "audit.json")


def _changed_audit(tmp_path, change) -> str:
    with open(GOLDEN, encoding="utf-8") as fh:
        doc = json.load(fh)
    change(doc)
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda d: d["data"]["algorithms"].append("C51"), "data.algorithms lists 'C51' twice"),
    (lambda d: d["data"]["tasks"].append("Pong"), "data.tasks lists 'Pong' twice"),
    (lambda d: d["data"]["design"][2].pop("n_runs"), "data.design[2] lacks key 'n_runs'"),
    (lambda d: d["data"]["design"][0].pop("algorithm"), "data.design[0] lacks key 'algorithm'"),
    (lambda d: d["data"]["design"][0].update(n_runs="8"), "data.design[0].n_runs is '8', expected an integer"),
    (lambda d: d["settings"].update(confidence="95%"), "settings.confidence is '95%', expected a number"),
    (lambda d: d["settings"].update(reps=[1]), "settings.reps is [1], expected an integer"),
    (lambda d: d["settings"].update(metrics="iqm"), "settings.metrics is 'iqm', expected a list of strings"),
    (lambda d: d["settings"].update(budgets_of_interest=["10M"]),
     "settings.budgets_of_interest is ['10M'], expected a list of integers"),
], ids=["dup-algorithm", "dup-task", "design-n_runs", "design-algorithm", "design-type", "confidence", "reps",
        "metrics", "budgets_of_interest"])
def test_report_of_a_malformed_audit_json_is_one_line(tmp_path, change, message):
    path = _changed_audit(tmp_path, change)
    line = one_line_error(invoke("report", path, "-o", tmp_path / "rep"))
    assert line == f"error: {path}: {message}"
    assert not (tmp_path / "rep").exists()


# ----------------------------------------------------------------------------------- huge scores, normalisation

def _scores(tmp_path, value: str, name: str = "s.csv"):
    path = tmp_path / name
    path.write_text("algorithm,task,run,budget,score\n" + "".join(
        f"{a},{t},{r},100,{value if (a, r) == ('A', 0) else 1.0}\n" for a in "AB" for t in "tu" for r in (0, 1)))
    return path


@pytest.mark.parametrize("value", ["1.7e308", "-1.7e308", "1e200"])
def test_finite_scores_too_large_to_average_are_one_line(tmp_path, value):
    path = _scores(tmp_path, value)
    line = one_line_error(invoke("audit", path, "--out", tmp_path))
    assert line.startswith(f"error: {path}: score {float(value):.4g} of A on t (run 0, budget 100) is too large "
                           f"for the bootstrap")
    assert not (tmp_path / "audit.json").exists()


def test_scores_at_the_magnitude_limit_are_audited_without_overflow(tmp_path):
    from rlaudit.audit.engine import SCORE_LIMIT as limit
    path = tmp_path / "s.csv"
    path.write_text("algorithm,task,run,budget,score\n" + "".join(
        f"{a},{t},{r},100,{float(sign * limit)!r}\n" for a, sign0 in (("A", 1), ("B", -1)) for t in "tu" for r in (0, 1)
        for sign in [sign0 * (1 if r == 0 or t == "u" else -1)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow anywhere in the bootstrap fails the test
        result = invoke("audit", path, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert all(o["diff_se"] is not None and o["diff_se"] > 0 for o in doc["orderings"])


@pytest.mark.parametrize("spec, remedy", [("divide:1e-320", "a larger divisor"),
                                          ("minmax:refs.csv", "other reference scores")])
def test_a_normalisation_that_overflows_names_the_option_not_the_file(tmp_path, spec, remedy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "refs.csv").write_text("task,low,high\nt,0,1e-320\nu,0,1e-320\n")
    path = _scores(tmp_path, "2.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's "overflow encountered in divide" fails the test
        result = invoke("audit", path, "--normalize", spec, "--out", tmp_path)
    line = one_line_error(result)
    assert line == (f"error: --normalize: normalising the score 2 of A on t (run 0, budget 100) overflows to "
                    f"infinity; choose {remedy}")
    assert "RuntimeWarning" not in result.output



# ----------------------------------------------------------------------------------- misleading messages

@pytest.mark.parametrize("alpha", ["1e-300", "5e-324", "1e-9"])
def test_a_tiny_alpha_is_blamed_on_alpha_in_one_short_line(tmp_path, alpha):
    import re

    from rlaudit.audit import AuditSettings, _check_alpha
    from rlaudit.audit.engine import select
    from rlaudit.scores import read_scores

    path = _scores(tmp_path, "2.0")
    line = one_line_error(invoke("audit", path, "--alpha", alpha, "--out", tmp_path))
    assert line.startswith(f"error: --alpha: alpha = {float(alpha):g} needs ") and len(line) < 200, line
    suggested = float(re.search(r"use an alpha of (\S+) or more", line).group(1))
    table = read_scores(path)
    sel = select(table, AuditSettings(), (), str(path))
    _check_alpha(sel, 4, AuditSettings(alpha=suggested))  # the advice works
    with pytest.raises(InputError):
        _check_alpha(sel, 4, AuditSettings(alpha=suggested / 2))  # and is not far from the limit


TIDY_ROWS = "A,t,0,100,1.0\nA,t,1,100,2.0\nB,t,0,100,1.5\nB,t,1,100,2.5\n"


def test_rows_ending_in_a_comma_are_named_as_such_not_as_bad_budgets(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("# rlaudit.budget_unit: \"frames\"\nalgorithm,task,run,budget,score\n"
                    + TIDY_ROWS.replace("\n", ",\n"))
    for argv in (["audit", path, "--out", tmp_path], ["import", "tidy", path, "-o", tmp_path / "o.csv"]):
        line = one_line_error(invoke(*argv))
        assert line == (f"error: {path}: line 3: 6 fields, but the header has 5 columns (the line ends in a "
                        f"separator?); every row needs one value per column")
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_duplicates_across_two_tidy_files_name_each_file_and_line(tmp_path, suffix):
    from rlaudit.scores import ScoreTable, read_scores, write_scores

    first = tmp_path / "first.csv"
    first.write_text("algorithm,task,run,budget,score\n" + TIDY_ROWS)
    second = tmp_path / f"second{suffix}"
    csv = tmp_path / "second.csv"
    csv.write_text("algorithm,task,run,budget,score\nC,t,0,100,1\nC,t,1,100,2\nB,t,1,100,9\n")
    if suffix == ".parquet":  # written sorted: B's row comes first
        write_scores(ScoreTable.from_frame(read_scores(csv).frame), second)
    line = one_line_error(invoke("import", "tidy", first, second, "-o", tmp_path / "o.csv"))
    where = "line 4" if suffix == ".csv" else "line 1"
    assert line == (f"error: {second}: {where}: row (B, t, run 1, budget 100) is also in {first}, line 5; each "
                    f"(algorithm, task, run, budget) may come from one file only")
    assert not (tmp_path / "o.csv").exists()


# ----------------------------------------------------------------------------------- Ray

@pytest.mark.parametrize("env, message", [
    ('{"working_dir": 5}', "`working_dir` must be a string"),
    ('{"env_vars": {"A": 1}}', "runtime_env['env_vars'] must be of type Dict[str, str]"),
    ('{"pip": 5}', "runtime_env['pip'] must be of type str or List[str]"),
    ('{"config": {"setup_timeout_seconds": "x"}}', "setup_timeout_seconds must be of type int"),
])
def test_wrongly_typed_runtime_env_field_is_one_line_before_ray_starts(tmp_path, env, message):
    pytest.importorskip("ray")
    from rlaudit.run.ray_executor import RayExecutor

    with pytest.raises(InputError) as exc:
        RayExecutor(runtime_env=env)
    assert str(exc.value).startswith(f"runtime_env: {message}") and "\n" not in str(exc.value)
    path = tmp_path / "env.json"
    path.write_text(env)
    with pytest.raises(InputError, match=f"^runtime_env file {path}: "):
        RayExecutor(runtime_env=str(path))
    with pytest.raises(InputError, match="^runtime_env: "):
        RayExecutor(runtime_env=json.loads(env))


@pytest.mark.timeout(400)
def test_ray_inbox_actor_killed_mid_sweep_records_the_runs_failed(tmp_path):
    """SIGKILL the driver's inbox actor once a run has stored an evaluation: every unfinished run is recorded
    failed, the summary is printed, the exit status is 1, and no traceback is shown."""
    import signal
    import subprocess
    import time

    pytest.importorskip("ray")
    from tests.ray_cluster import BIN, LoopbackCluster, loopback_unavailable

    why_not = loopback_unavailable()
    if why_not is not None:
        pytest.skip(f"loopback Ray cluster: {why_not}")
    store = tmp_path / "store.sqlite"
    sweep = os.path.join(os.path.dirname(__file__), "data", "ray_sweep.toml")
    with LoopbackCluster(node_cpus=(2,)) as cluster:
        proc = cluster.popen([str(BIN / "rlaudit"), "run", sweep, "--store", str(store), "--executor", "ray",
                              "--address", cluster.address], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        killed = False
        try:
            deadline = time.monotonic() + 240
            while not killed and proc.poll() is None and time.monotonic() < deadline:
                inbox = list(cluster.task_pids("_Inbox"))
                if inbox and stored_evaluations(store):
                    os.kill(inbox[0], signal.SIGKILL)
                    killed = True
                time.sleep(0.05)
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert killed, err
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    error_lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(error_lines) == 1 and "runs failed" in error_lines[0], err
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    statuses = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    errors = [e for (e,) in con.execute("SELECT error FROM runs WHERE status='failed'")]
    con.close()
    assert set(statuses.values()) <= {"done", "failed"} and "failed" in statuses.values(), statuses
    assert all("event inbox (a Ray actor) died mid-sweep" in e for e in errors), errors
    assert " failed" in err and "done" in err  # the summary


def test_deep_yaml_runtime_env_is_one_line(tmp_path):
    pytest.importorskip("yaml")
    from rlaudit.run.ray_executor import load_runtime_env

    path = tmp_path / "env.yaml"
    path.write_text("a: " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(InputError, match=f"^runtime_env file {path}: arrays or tables nested more than"):
        load_runtime_env(str(path))


@pytest.mark.parametrize("flag, value", [("--gamma", "1e400"), ("--min-effect", "1e400"), ("--alpha", "-inf"),
                                         ("--gamma", "nan")])
def test_infinite_audit_settings_are_refused(tmp_path, flag, value):
    path = _scores(tmp_path, "2.0")
    line = one_line_error(invoke("audit", path, flag, value, "--out", tmp_path))
    assert line.startswith(f"error: {flag}: must be a finite number, got ")
    assert not (tmp_path / "audit.json").exists()


def test_infinite_audit_setting_in_a_protocol_names_the_key(tmp_path):
    from rlaudit.audit.settings import AuditSettings

    with pytest.raises(InputError, match=r"^p.toml: audit.gamma: must be a finite number, got inf"):
        AuditSettings.from_section({"gamma": float("inf")}, "p.toml").check()
