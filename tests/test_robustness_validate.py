"""Hostile-user probes, round 2 (issue 21): protocols that ``validate`` passed but no run could train, input
rlaudit refused although it is legitimate, and work too large to start without a word."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from tests.test_robustness import one_line_error

REPO = Path(__file__).resolve().parent.parent

HEAD = """
schema_version = 1
name = "v21"
seeds = 1
[regimes]
low = 100
[[tasks]]
id = "{task}"
"""


def validate(tmp_path: Path, body: str, task: str = "CartPole-v1"):
    path = tmp_path / "p.toml"
    path.write_text(textwrap.dedent(HEAD.format(task=task)) + textwrap.dedent(body))
    return CliRunner().invoke(main, ["validate", str(path), "--store", str(tmp_path / "s.sqlite")])


# ------------------------------------------------------------------ validate said valid, every run failed
@pytest.mark.parametrize("body, task, expected", [
    ('[[algorithms]]\nname = "PPO"\nlabel = "   "\n', "CartPole-v1", "algorithms[0].label: '   ' is blank"),
    ('[[algorithms]]\nname = "PPO"\nhyperparams = {batch_size = 1}\n', "CartPole-v1",
     "algorithms[0].hyperparams.batch_size: must be at least 2 for 'PPO' with normalize_advantage = true"),
    ('[[algorithms]]\nname = "PPO"\nhyperparams = {n_steps = 1}\n', "CartPole-v1",
     "algorithms[0].hyperparams.n_steps: must be at least 2 for 'PPO' with normalize_advantage = true"),
    ('[[algorithms]]\nname = "PPO"\n[algorithms.regimes.low]\nhyperparams = {n_steps = 1}\n', "CartPole-v1",
     "algorithms[0].regimes.low.hyperparams.n_steps: must be at least 2"),
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {net_arch = [-1]}\n', "CartPole-v1",
     "algorithms[0].policy_kwargs.net_arch: layer sizes must be integers of at least 1"),
    ('[[algorithms]]\nname = "DQN"\npolicy_kwargs = {net_arch = [64, 0]}\n', "CartPole-v1",
     "algorithms[0].policy_kwargs.net_arch: layer sizes must be integers of at least 1 for the DQNPolicy"),
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {net_arch = {pi = [64], vf = [0]}}\n', "CartPole-v1",
     "got 0 in {'pi': [64], 'vf': [0]}"),
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {optimizer_kwargs = {epss = 1e-5}}\n', "CartPole-v1",
     "algorithms[0].policy_kwargs.optimizer_kwargs: unknown key 'epss' for Adam (the ActorCriticPolicy of "
     "'PPO') (did you mean 'eps'?)"),
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {optimizer_kwargs = {lr = 1e-3}}\n', "CartPole-v1",
     "SB3 sets the learning rate itself"),
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {features_extractor_kwargs = {features_dim = 8}}\n',
     "CartPole-v1", "unknown key 'features_dim' for FlattenExtractor"),
    ('[[algorithms]]\nname = "SAC"\nhyperparams = {ent_coef = "auto_x"}\n', "Pendulum-v1",
     "algorithms[0].hyperparams.ent_coef: 'auto_x' is not an entropy coefficient for 'SAC'"),
    ('[[algorithms]]\nname = "SAC"\nhyperparams = {ent_coef = "auto_0"}\n', "Pendulum-v1",
     "'auto_0' is not an entropy coefficient"),
    ('[[algorithms]]\nname = "PPO"\n[evaluation]\nn_eval_episodes = 1_000_000_000_000\n', "CartPole-v1",
     "evaluation.n_eval_episodes: must be at most 100,000, got 1,000,000,000,000"),
])
def test_validate_refuses_what_every_run_would_fail_on(tmp_path, body, task, expected):
    line = one_line_error(validate(tmp_path, body, task))
    assert expected in line and str(tmp_path / "p.toml") in line


@pytest.mark.parametrize("body, task", [
    ('[[algorithms]]\nname = "PPO"\nhyperparams = {batch_size = 1, normalize_advantage = false}\n', "CartPole-v1"),
    ('[[algorithms]]\nname = "PPO"\nhyperparams = {n_steps = 2, batch_size = 2}\n', "CartPole-v1"),
    ('[[algorithms]]\nname = "A2C"\nhyperparams = {n_steps = 1}\n', "CartPole-v1"),  # no normalisation by default
    ('[[algorithms]]\nname = "Rainbow"\nhyperparams = {n_steps = 1}\n', "CartPole-v1"),  # n-step returns, not PPO's
    ('[[algorithms]]\nname = "PPO"\npolicy_kwargs = {net_arch = {pi = [64], vf = [64]}, optimizer_kwargs = '
     '{eps = 1e-5, weight_decay = 0.0, betas = [0.9, 0.99]}}\n', "CartPole-v1"),
    ('[[algorithms]]\nname = "SAC"\nhyperparams = {ent_coef = "auto_0.1"}\n', "Pendulum-v1"),
    ('[[algorithms]]\nname = "SAC"\nhyperparams = {ent_coef = "auto"}\n', "Pendulum-v1"),
    ('[[algorithms]]\nname = "SAC"\nhyperparams = {ent_coef = "0.05"}\n', "Pendulum-v1"),
])
def test_validate_still_accepts_the_valid_neighbours(tmp_path, body, task):
    result = validate(tmp_path, body, task)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "valid"


def test_estimate_counts_the_evaluations(tmp_path):
    """10^5 episodes of up to 500 steps at one budget: hours of evaluation, not "about 0 s"."""
    result = validate(tmp_path, '[[algorithms]]\nname = "PPO"\n[evaluation]\nn_eval_episodes = 100_000\n')
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("estimate:"))
    assert " h " in line and "evaluation episodes counted at their time limit" in line, line


# ------------------------------------------------------------------------------------ per-run wall-time limit
TIMEOUT_PLUGIN = Path(__file__).parent / "data" / "timeout_plugin"
SLEEPY = """
schema_version = 1
name = "sleepy"
seeds = 2
{timeout}
[regimes]
low = 50
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "SleepyLearner"
[evaluation]
n_eval_episodes = 1
"""


def _rlaudit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter that sees the test plugin (its entry point stays out of this process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TIMEOUT_PLUGIN), str(REPO)]), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlaudit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("where", ["flag", "protocol"])
def test_a_learner_that_never_returns_times_out_and_the_sweep_goes_on(tmp_path, where):
    """Seed 0's learn() sleeps for an hour: stopped at the limit, recorded timed out; seed 1 finishes."""
    protocol = tmp_path / "sleepy.toml"
    # "flag": the flag's 10 s must win over the protocol's hour
    protocol.write_text(SLEEPY.format(timeout="run_timeout = 10" if where == "protocol" else "run_timeout = 3600"))
    store = tmp_path / "s.sqlite"
    flag = ["--run-timeout", "10"] if where == "flag" else []
    t0 = time.monotonic()
    done = _rlaudit("run", str(protocol), "--store", str(store), "--workers", "1", *flag, cwd=tmp_path)
    assert time.monotonic() - t0 < 240, "the sleeping run was not stopped"
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "1 done, 1 failed (1 timed out)" in done.stderr
    con = sqlite3.connect(store)
    rows = dict(con.execute("SELECT seed, status || ' ' || coalesce(error, '') FROM runs").fetchall())
    n_evals = con.execute("SELECT count(*) FROM evaluations WHERE run_id LIKE '%__0__%'").fetchone()[0]
    con.close()
    assert rows[1] == "done " and n_evals == 0
    assert rows[0].startswith("failed RunTimedOut: CartPole-v1__SleepyLearner__0__nested ran past the run "
                              "timeout of 10 s"), rows[0]
    status = _rlaudit("status", str(store), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "timed_out" in status.stdout and "timed out: CartPole-v1__SleepyLearner__0__nested" in status.stdout
    from rlaudit.store import store_status

    st = store_status(store).iloc[0]
    assert (st["done"], st["failed"], st["timed_out"], st["total"]) == (1, 0, 1, 2)


@pytest.mark.parametrize("args, text, expected", [
    (["--run-timeout", "0"], "", "error: --run-timeout: must be a number of seconds above 0"),
    (["--run-timeout", "nan"], "", "error: --run-timeout: must be a number of seconds above 0"),
    ([], 'run_timeout = "1h"', "run_timeout: must be a number of seconds above 0 (e.g. 3600 for an hour), got '1h'"),
    ([], "run_timeout = -1", "run_timeout: must be a number of seconds above 0"),
])
def test_bad_run_timeouts_are_refused_before_anything_runs(tmp_path, args, text, expected):
    protocol = tmp_path / "p.toml"
    protocol.write_text(text + "\n" + textwrap.dedent(HEAD.format(task="CartPole-v1"))
                        + '[[algorithms]]\nname = "PPO"\n')
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(tmp_path / "s.sqlite"), *args])
    assert expected in one_line_error(result)
    assert not (tmp_path / "s.sqlite").exists()


def test_run_timeout_is_shown_and_does_not_change_the_hash(tmp_path):
    from rlaudit.protocol import load_protocol

    body = '[[algorithms]]\nname = "PPO"\n'
    plain = tmp_path / "a.toml"
    plain.write_text(textwrap.dedent(HEAD.format(task="CartPole-v1")) + body)
    timed = tmp_path / "b.toml"
    timed.write_text("run_timeout = 90\n" + textwrap.dedent(HEAD.format(task="CartPole-v1")) + body)
    assert load_protocol(timed).run_timeout == 90.0 and load_protocol(plain).run_timeout is None
    assert load_protocol(timed).hash == load_protocol(plain).hash  # a store made without it resumes with it
    result = CliRunner().invoke(main, ["validate", str(timed), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 0, result.output
    assert "  run timeout: 1 min 30 s per run" in result.output


# -------------------------------------------------------------------------------- legitimate input refused
TIDY = "algorithm,task,run,budget,score\n" + "".join(
    f"{a},T{t},{r},100,{s}\n" for a, base in (("A", 1.0), ("B", 2.0)) for t in range(2) for r, s in
    enumerate((base, base + 0.5, base + 0.25)))


def test_protocol_and_claims_files_with_a_utf8_bom_load(tmp_path):
    """Windows editors save UTF-8 with a byte-order mark: protocols, claims and reference files must load."""
    body = '[[algorithms]]\nname = "PPO"\n[[algorithms]]\nname = "A2C"\n'
    path = tmp_path / "p.toml"
    path.write_text("\ufeff" + textwrap.dedent(HEAD.format(task="CartPole-v1")) + body, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 0 and result.output.splitlines()[-1] == "valid", result.output

    from rlaudit.audit.claims import load_claims_file

    claims = tmp_path / "claims.toml"
    claims.write_text('\ufeff[[claims]]\nbetter = "B"\nworse = "A"\n', encoding="utf-8")
    assert [(c.better, c.worse) for c in load_claims_file(claims)] == [("B", "A")]
    refs = tmp_path / "refs.csv"
    refs.write_text("\ufefftask,low,high\nT0,0,10\nT1,0,20\n", encoding="utf-8")
    scores = tmp_path / "scores.csv"
    scores.write_text("\ufeff" + TIDY, encoding="utf-8")
    done = CliRunner().invoke(main, ["audit", str(scores), "--claims", str(claims), "--normalize",
                                     f"minmax:{refs}", "--reps", "400", "--reps-pairwise", "100",
                                     "--out", str(tmp_path / "a"), "-q"])
    assert done.exit_code == 0, done.output
    assert '"minmax"' in (tmp_path / "a" / "audit.json").read_text()


@pytest.mark.parametrize("names", [("None", "NA"), ("NaN", "null"), ("N/A", "nan")])
def test_rlaudit_reads_back_its_own_export_of_algorithms_named_like_missing_values(tmp_path, names):
    from rlaudit.protocol import load_protocol, plan
    from rlaudit.scores import read_scores
    from tests.test_robustness import filled_store

    body = "".join(f'[[algorithms]]\nname = "PPO"\nlabel = "{n}"\n' for n in names)
    path = tmp_path / "p.toml"
    path.write_text(textwrap.dedent(HEAD.format(task="CartPole-v1")).replace("seeds = 1", "seeds = 3") + body)
    filled_store(tmp_path / "s.sqlite", plan(load_protocol(path)))
    for out in ("out.csv", "out.parquet"):
        export = CliRunner().invoke(main, ["export", str(tmp_path / "s.sqlite"), "-o", str(tmp_path / out)])
        assert export.exit_code == 0, export.output
        assert sorted(read_scores(tmp_path / out).algorithms) == sorted(names)
    audit = CliRunner().invoke(main, ["audit", str(tmp_path / "out.csv"), "--reps", "400", "--reps-pairwise", "100",
                                      "--out", str(tmp_path / "a"), "-q"])
    assert audit.exit_code == 0, audit.output


def test_missing_scores_are_still_missing(tmp_path):
    """Only the label columns keep NA words as names; an empty or NA score is still refused by line."""
    path = tmp_path / "s.csv"
    path.write_text("algorithm,task,run,budget,score\nNone,T,0,100,1.0\nNone,T,1,100,NA\n")
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path)]))
    assert "column 'score' is NaN or empty at line 3" in line


@pytest.mark.parametrize("name", ["scores.TSV", "scores.Tsv", "scores.tsv.GZ"])
def test_an_upper_case_tsv_suffix_is_tab_separated(tmp_path, name):
    import gzip

    from rlaudit.importers.sniff import sniff
    from rlaudit.sources import load_source

    text = TIDY.replace(",", "\t")
    path = tmp_path / name
    if name.lower().endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    table = load_source(path).table
    assert table.algorithms == ["A", "B"] and len(table.frame) == 12
    assert sniff(path) == "tidy"


def test_wide_tsv_is_tab_separated(tmp_path):
    from rlaudit.importers.tables import import_wide

    path = tmp_path / "wide.TSV"
    path.write_text("task\trun\tDQN\tC51\nPong\t0\t1.5\t2.5\nPong\t1\t1.0\t3.0\n")
    table = import_wide([path])
    assert set(table.algorithms) == {"C51", "DQN"}
    assert sorted(table.frame["score"]) == [1.0, 1.5, 2.5, 3.0]


NFC, NFD = unicodedata.normalize("NFC", "Café"), unicodedata.normalize("NFD", "Café")


def test_labels_equal_after_unicode_normalisation_are_duplicates(tmp_path):
    assert NFC != NFD
    body = f'[[algorithms]]\nname = "PPO"\nlabel = "{NFC}"\n[[algorithms]]\nname = "A2C"\nlabel = "{NFD}"\n'
    line = one_line_error(validate(tmp_path, body))
    assert "algorithms: label" in line and "is used twice" in line and "equal after Unicode normalisation" in line


def test_score_names_equal_after_unicode_normalisation_are_refused(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(TIDY.replace("A,T0,0", f"{NFC},T0,0").replace("A,", f"{NFD},"), encoding="utf-8")
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path)]))
    assert "differ only in Unicode normalisation (NFC / NFD)" in line and "at line 2" in line


# -------------------------------------------------------------------------------------------- scale guards
def _grid(n_algorithms: int, n_tasks: int, n_runs: int, n_budgets: int):
    """A tidy table of the given shape (scores Gamma-distributed, growing with the algorithm index)."""
    import numpy as np
    import pandas as pd

    from rlaudit.scores import ScoreMeta, ScoreTable

    rng = np.random.default_rng(0)
    a, t, r, b = np.meshgrid(np.arange(n_algorithms), np.arange(n_tasks), np.arange(n_runs), np.arange(n_budgets),
                             indexing="ij")
    frame = pd.DataFrame({"algorithm": np.char.add("A", a.ravel().astype(str)),
                          "task": np.char.add("T", t.ravel().astype(str)), "run": r.ravel().astype(str),
                          "budget": (b.ravel() + 1) * 1000, "score": rng.gamma(2.0, 1.0, a.size) * (1 + a.ravel())})
    return ScoreTable(frame, ScoreMeta())  # valid by construction; whoever reads it back validates it


def test_the_estimate_counts_tests_and_replicates_as_the_audit_does():
    """5 algorithms x 40 budgets: 10 pairs x (40 orderings + 39 changes) = 790 tests, 20 x 790 / 0.05 replicates."""
    from rlaudit.audit import AuditSettings, audit_cost

    cost = audit_cost(_grid(5, 1, 2, 40), AuditSettings())
    assert (cost.n_tests, cost.reps, cost.n_scores) == (790, 316_000, 400)
    assert audit_cost(_grid(5, 1, 2, 40), AuditSettings(), n_budgets=2).n_tests == 30  # 10 x 2 + 10 x 1


def test_the_default_audit_of_a_million_rows_is_refused_in_one_line_with_the_way_out(tmp_path):
    from rlaudit.scores import write_scores

    path = write_scores(_grid(5, 50, 100, 40), tmp_path / "big.parquet")
    t0 = time.monotonic()
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path), "--out", str(tmp_path / "out")]))
    assert time.monotonic() - t0 < 120
    assert "this audit is estimated at about" in line and "more than the 5 min limit" in line
    assert "5 algorithms x 40 budgets make 790 tests, so 316,000 replicates (20 m / alpha) of 1,000,000 scores" in line
    assert "of the 40 budgets (--budgets)" in line and "RLAUDIT_AUDIT_MAX_SECONDS=" in line
    assert not (tmp_path / "out").exists()


def test_the_time_limit_applies_and_is_checked(tmp_path, monkeypatch):
    path = tmp_path / "s.csv"
    path.write_text(TIDY)
    monkeypatch.setenv("RLAUDIT_AUDIT_MAX_SECONDS", "0.001")
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path), "--out", str(tmp_path / "out")]))
    assert "more than the 0 s limit" in line and "2 algorithms x 1 budget make 1 test, so" in line
    monkeypatch.setenv("RLAUDIT_AUDIT_MAX_SECONDS", "soon")
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path), "--out", str(tmp_path / "out")]))
    assert line == "error: RLAUDIT_AUDIT_MAX_SECONDS: 'soon' is not a number"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("reps", ["1000000000", "10_000_000"])
def test_reps_pairwise_has_a_memory_guard(tmp_path, reps):
    path = tmp_path / "s.csv"
    path.write_text(TIDY)
    t0 = time.monotonic()
    line = one_line_error(CliRunner().invoke(main, ["audit", str(path), "--reps-pairwise", reps,
                                                    "--out", str(tmp_path / "out")]))
    assert time.monotonic() - t0 < 30
    assert line.startswith(f"error: --reps-pairwise: {int(reps):,} replicates need ")
    assert "more than the 4 GiB limit; use at most 5,315,553 (default 2000)" in line


def test_a_long_audit_says_what_it_will_do_and_shows_its_stages(tmp_path):
    """Work above the progress threshold: the estimate first, then one line per stage when not a terminal."""
    from rlaudit.scores import write_scores

    path = write_scores(_grid(3, 10, 10, 2), tmp_path / "s.csv")
    result = CliRunner().invoke(main, ["audit", str(path), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("audit: ")]
    assert lines[0].startswith("audit: 9 tests, 50,000 replicates of 600 scores; estimated at most about "), lines
    assert "audit: bootstrap aggregates (3 steps)" in lines and "audit: error-controlled orderings (4 steps)" in lines


def test_json_importers_read_a_file_with_a_utf8_bom(tmp_path):
    """An rliable score set ``{task: [score x runs]}`` saved with a BOM (json.loads alone refuses it)."""
    from rlaudit.importers import import_path
    from rlaudit.importers.sniff import sniff

    path = tmp_path / "DER.json"
    path.write_text('\ufeff{"Pong": [1.0, 2.0, 3.0], "Breakout": [4.0, 5.0, 6.0]}', encoding="utf-8")
    assert sniff(path) == "rliable"
    table = import_path(None, path)
    assert table.tasks == ["Breakout", "Pong"] and table.algorithms == ["DER"]


def test_sniffing_sees_a_tidy_header_behind_a_bom(tmp_path):
    from rlaudit.importers.sniff import sniff

    path = tmp_path / "s.csv"
    path.write_text("\ufeff" + TIDY, encoding="utf-8")
    assert sniff(path) == "tidy"
