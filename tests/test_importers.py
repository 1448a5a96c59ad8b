"""Importers: real shared files, run recovery and resampling properties, a real SB3 EvalCallback log, bad inputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import IMPORTERS, import_path
from rlaudit.importers.curves import resample
from rlaudit.importers.dopamine import recover_runs
from rlaudit.importers.sniff import sniff
from rlaudit.scores import read_scores


def _records(path: Path):
    return json.loads(gzip.decompress(path.read_bytes()))


# ------------------------------------------------------------------------------------ Dopamine (real)

def test_dopamine_legacy_runs_are_the_contiguous_blocks(shared_data):
    path = shared_data / "dopamine/atari/pong.json.gz"
    table = import_path("dopamine", [path])
    f = table.frame
    assert table.meta.score_kind == "train" and table.meta.budget_unit == "frames"
    assert sorted(f["algorithm"].unique()) == sorted(["DQN", "C51", "Rainbow", "IQN", "Quantile (JAX)",
                                                      "DQN (Adam + MSE in JAX)"])
    assert len(f) == 6 * 5 * 199 and f["budget"].min() == 1_000_000 and f["budget"].max() == 199_000_000
    recs = [r for r in _records(path) if r["Agent"] == "Rainbow"]
    for k in range(5):
        block = recs[k * 199:(k + 1) * 199]
        got = f[(f["algorithm"] == "Rainbow") & (f["run"] == str(k))].sort_values("budget")
        assert got["score"].tolist() == [r["Value"] for r in block]
        assert got["budget"].tolist() == [(r["Iteration"] + 1) * 1_000_000 for r in block]


def test_dopamine_iteration_major_positions_and_missing_last_iteration(shared_data):
    path = shared_data / "dopamine/atari/atlantis_Impala.json.gz"
    table = import_path("dopamine", [path])
    f = table.frame
    recs = [r for r in _records(path) if r["Agent"] == "QR-DQN"]
    # iteration 7, position 3 -> run 3
    at7 = [r["Value"] for r in recs if r["Iteration"] == 7]
    assert f[(f["algorithm"] == "QR-DQN") & (f["budget"] == 8_000_000) & (f["run"] == "3")]["score"].item() == at7[3]
    # iteration 199 has 4 of 5 records: left out (run identity ambiguous), and said so
    assert f[(f["algorithm"] == "QR-DQN")]["budget"].max() == 199_000_000
    assert len(f[(f["algorithm"] == "DQN") & (f["budget"] == 200_000_000)]) == 5
    assert any("QR-DQN" in n and "iteration 199 has 4 of 5 records" in n for n in table.meta.notes)


def test_dopamine_budgets_read_last_iteration_within_staleness(shared_data):
    path = shared_data / "dopamine/atari/montezumarevenge_CNN.json.gz"
    table = import_path("dopamine", [path], budgets=[10_000_000, 100_000_000], n_runs=5)
    f = table.frame
    qr = f[f["algorithm"] == "QR-DQN"]
    assert qr["budget"].unique().tolist() == [10_000_000]  # the series is ambiguous from iteration 56 on
    assert len(f[(f["algorithm"] == "DQN") & (f["budget"] == 100_000_000)]) == 5
    assert any("iteration 56 has 4 of 5 records" in n for n in table.meta.notes)
    # legacy: 200M is read at the last iteration (198, i.e. 199M frames), 1M frames stale
    legacy = import_path("dopamine", [shared_data / "dopamine/atari/pong.json.gz"], budgets=["200M"])
    dqn = [r["Value"] for r in _records(shared_data / "dopamine/atari/pong.json.gz") if r["Agent"] == "DQN"]
    got = legacy.frame[(legacy.frame["algorithm"] == "DQN")].sort_values("run")["score"].tolist()
    assert got == [dqn[k * 199 + 198] for k in range(5)]


def test_dopamine_folder_variant_and_label(shared_data, tmp_path):
    for name in ("pong.json.gz", "pong_CNN.json.gz", "pong_Impala.json.gz", "pong.vg.json"):
        (tmp_path / name).write_bytes((shared_data / "dopamine/atari" / name).read_bytes())
    assert import_path("dopamine", [tmp_path]).tasks == ["pong"]
    cnn = import_path("dopamine", [tmp_path], variant="CNN")
    assert "QR-DQN" in cnn.algorithms and "Quantile (JAX)" not in cnn.algorithms
    both = import_path("dopamine", [tmp_path], variant="all", label="agent+variant")
    assert {"Rainbow (CNN)", "Rainbow (Impala)", "Rainbow (legacy)"} <= set(both.algorithms)


def test_dopamine_mujoco_float_iterations(shared_data):
    """MuJoCo SAC: run-major, every 10th iteration kept, 'Iteration' an int then a float (3190.0)."""
    path = shared_data / "dopamine/mujoco/ant.json"
    table = import_path("dopamine", [path], budget_per_iteration=1000, budget_unit="env_steps")
    recs = json.loads(path.read_text())
    f = table.frame
    assert len(f) == 1600 and sorted(f["run"].unique()) == ["0", "1", "2", "3", "4"]
    last = f[f["budget"] == 3_191_000].sort_values("run")["score"].tolist()
    assert last == [recs[k * 320 + 319]["Value"] for k in range(5)]


# ------------------------------------------------------------------------- run recovery (properties)

@st.composite
def dopamine_orders(draw):
    n_runs = draw(st.integers(1, 5))
    n_it = draw(st.integers(1, 8))
    layout = draw(st.sampled_from(["run-major", "iteration-major"]))
    if layout == "run-major":
        truth = [(r, i) for r in range(n_runs) for i in range(n_it)]
    else:
        truth = [(r, i) for i in range(n_it) for r in range(n_runs)]
    deleted = draw(st.sets(st.integers(0, len(truth) - 1), max_size=len(truth) - 1))
    kept = [t for j, t in enumerate(truth) if j not in deleted]
    return n_runs, kept, bool(deleted)


@settings(max_examples=400, deadline=None)
@given(dopamine_orders())
def test_recovered_runs_never_mix_two_true_runs(case):
    n_runs, kept, any_deleted = case
    its = np.array([i for _, i in kept])
    true_run = np.array([r for r, _ in kept])
    try:
        rec = recover_runs(its, n_runs=n_runs)
    except InputError as exc:
        assert any_deleted, f"refused an intact layout: {exc}"
        return
    assigned = rec.run >= 0
    pairs = set(zip(rec.run[assigned].tolist(), true_run[assigned].tolist()))
    assert len({a for a, _ in pairs}) == len(pairs), "a recovered run holds records of two true runs"
    assert len({b for _, b in pairs}) == len(pairs), "a true run was split over two recovered runs"
    if not any_deleted:
        assert assigned.all() and rec.n_runs == n_runs
        assert (rec.run == true_run).all()


def test_recover_runs_refuses_unsplittable_orders():
    with pytest.raises(InputError, match="record 4"):  # repeats (iteration-major) and a restart (run-major)
        recover_runs(np.array([0, 0, 1, 0, 1]), where="f.json: agent 'DQN'")
    with pytest.raises(InputError, match="cannot be split into 3 runs"):
        recover_runs(np.array([0, 1, 2, 0, 1, 2]), n_runs=3)
    with pytest.raises(InputError, match="iteration 1 has 1 of 2 records"):
        recover_runs(np.array([0, 0, 1, 2, 2]), n_runs=2, on_missing="error")
    rec = recover_runs(np.array([0, 1, 3, 0, 1, 2, 3]), n_runs=2)  # run 0 lacks iteration 2: reported
    assert rec.run.tolist() == [0, 0, 0, 1, 1, 1, 1] and "iteration(s) 2" in rec.notes[0]


def test_dopamine_file_with_one_agent_short_of_a_run_is_refused(tmp_path):
    """n_runs is inferred from the whole file: agent B's 2 blocks cannot be 3 runs (one missing or merged)."""
    recs = [{"Iteration": i, "Value": float(k), "Agent": "A"} for k in range(3) for i in range(4)]
    recs += [{"Iteration": i, "Value": float(k), "Agent": "B"} for k in range(2) for i in range(4)]
    path = tmp_path / "game.json"
    path.write_text(json.dumps(recs))
    with pytest.raises(InputError, match=r"game.json: agent 'B': record order cannot be split into 3 runs.*record\(s\) 13, 17"):
        import_path("dopamine", [path])
    table = import_path("dopamine", [path], agents=["A"])
    assert sorted(table.frame["run"].unique()) == ["0", "1", "2"]


# ------------------------------------------------------------------------------ curves resampling

def test_resample_exact_values():
    xs = np.array([0.0, 10.0, 20.0, 40.0])
    ys = np.array([1.0, np.nan, 3.0, 7.0])
    b = np.array([5, 10, 20, 30, 40, 41])
    np.testing.assert_array_equal(resample(xs, ys, b, "last", max_staleness=10), [1.0, 1.0, 3.0, 3.0, 7.0, 7.0])
    np.testing.assert_array_equal(resample(xs, ys, b, "last", max_staleness=5), [1.0, np.nan, 3.0, np.nan, 7.0, 7.0])
    np.testing.assert_array_equal(resample(xs, ys, b, "linear"), [1.5, 2.0, 3.0, 5.0, 7.0, np.nan])
    np.testing.assert_array_equal(resample(xs, ys, np.array([-1]), "last"), [np.nan])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.one_of(st.floats(-1e3, 1e3), st.just(float("nan")))),
                min_size=1, max_size=30),
       st.lists(st.integers(0, 1100), min_size=1, max_size=10), st.integers(0, 200))
def test_resample_matches_brute_force(points, budgets, stale):
    points = sorted(points, key=lambda p: p[0])
    xs = np.array([p[0] for p in points], dtype=float)
    ys = np.array([p[1] for p in points], dtype=float)
    got_last = resample(xs, ys, np.array(budgets), "last", max_staleness=stale)
    got_lin = resample(xs, ys, np.array(budgets), "linear")
    fin = [(x, y) for x, y in zip(xs, ys) if np.isfinite(y)]
    for k, b in enumerate(budgets):
        before = [(x, y) for x, y in fin if x <= b]
        want = before[-1][1] if before and b - before[-1][0] <= stale else np.nan
        np.testing.assert_equal(got_last[k], want)
        if not fin or b < fin[0][0] or b > fin[-1][0]:
            assert np.isnan(got_lin[k])
        else:
            lo = [y for x, y in fin if x <= b]
            hi = [y for x, y in fin if x >= b]
            assert min(lo[-1], hi[0]) - 1e-9 <= got_lin[k] <= max(lo[-1], hi[0]) + 1e-9


def test_curves_real_dreamerv3_file(shared_data):
    path = shared_data / "dreamerv3_scores/atari100k-ppo_fixhp.json.gz"
    table = import_path("curves", [path], budgets=[400_000], max_staleness=20_000)
    run = next(r for r in _records(path) if r["task"] == "atari_pong" and r["seed"] == 1)
    xs, ys = np.array(run["xs"], float), np.array([np.nan if y is None else y for y in run["ys"]], float)
    ok = np.isfinite(ys) & (xs <= 400_000)
    want = ys[ok][-1] if 400_000 - xs[ok][-1] <= 20_000 else None
    got = table.frame[(table.frame["task"] == "atari_pong") & (table.frame["run"] == "1")]["score"]
    assert (got.item() if want is not None else None) == want
    assert table.meta.budget_unit == "frames" and table.algorithms == ["ppo_fixhp"]
    assert any("last point at or before" in n for n in table.meta.notes)


# -------------------------------------------------------------------------------- rliable (real)

def test_rliable_task_sets_budget_sets_records_and_algorithms(shared_data):
    der = import_path("rliable", [shared_data / "atari100k/DER.json"], budget="100k", budget_unit="agent_steps")
    raw = json.loads((shared_data / "atari100k/DER.json").read_text())
    got = der.frame[der.frame["task"] == "Pong"].sort_values("run", key=lambda s: s.astype(int))["score"].tolist()
    assert got == raw["Pong"] and der.budgets == [100_000] and der.algorithms == ["DER"]

    dmc = import_path("rliable", [shared_data / "rliable/dm_control/DrQ.json"])
    assert dmc.budgets == [100_000, 500_000] and len(dmc.frame) == 2 * 6 * 10

    curl = import_path("rliable", [shared_data / "atari100k/CURL_10_evals.json"], algorithm="CURL")
    assert curl.meta.normalized == "atari" and len(curl.frame) == 2600

    # DER curves: iteration 9 (budget (9 + 1) * 10k agent steps) equals the final-score file, run by run
    curves = import_path("rliable", [shared_data / "atari100k/DER/Pong.json"], budget_per_iteration=10_000)
    last = curves.frame[curves.frame["budget"] == 100_000].sort_values("run", key=lambda s: s.astype(int))
    np.testing.assert_allclose(last["score"].to_numpy(), raw["Pong"], rtol=1e-9)  # curves file: 10 digits

    procgen = import_path("rliable", [shared_data / "rliable/procgen/procgen_data.json"])
    assert len(procgen.algorithms) == 6 and len(procgen.tasks) == 16 and procgen.meta.budget_unit == "final"

    ale = import_path("rliable", [shared_data / "rliable/ALE/atari_200m_scores.json"], budget="200M",
                      budget_unit="frames")
    assert len(ale.algorithms) == 8 and len(ale.frame[ale.frame["algorithm"] == "M-IQN"]) == 55 * 3


# ------------------------------------------------------------------- SB3 EvalCallback logs (real run)

def test_zoo_logs_from_a_real_evalcallback_run(tmp_path):
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    for seed in (1, 2):
        run_dir = tmp_path / "logs" / "ppo" / f"CartPole-v1_{seed}"
        eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=100 + seed)
        cb = EvalCallback(eval_env, eval_freq=128, n_eval_episodes=2, log_path=str(run_dir), verbose=0)
        model = PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=1, seed=seed, device="cpu",
                    policy_kwargs={"net_arch": [16]})
        model.learn(384, callback=cb)
    table = import_path("zoo", [tmp_path / "logs"])
    assert table.algorithms == ["ppo"] and table.tasks == ["CartPole-v1"]
    assert sorted(table.frame["run"].unique()) == ["1", "2"]
    npz = np.load(tmp_path / "logs/ppo/CartPole-v1_2/evaluations.npz")
    got = table.frame[table.frame["run"] == "2"].sort_values("budget")
    assert got["budget"].tolist() == npz["timesteps"].tolist() == [128, 256, 384]
    assert got["score"].tolist() == npz["results"].mean(axis=1).tolist()
    assert sniff(tmp_path / "logs") == "zoo"


# -------------------------------------------------------------------------------- tables and CLI

def test_wide_csv_and_tidy_round_trip(tmp_path):
    wide = tmp_path / "table.csv"
    wide.write_text("game,DER,SPR\nPong,-19.5,-5.4\nBoxing,0.2,\n")
    table = import_path("wide", [wide], budget="100k", budget_unit="agent_steps")
    f = table.frame
    assert len(f) == 3 and f[(f["algorithm"] == "SPR") & (f["task"] == "Pong")]["score"].item() == -5.4
    assert "1 empty cell" in table.meta.notes[0] and table.budgets == [100_000]
    out = tmp_path / "scores.parquet"
    r = CliRunner().invoke(main, ["import", "wide", str(wide), "--budget", "100k", "-o", str(out)])
    assert r.exit_code == 0, r.output
    back = read_scores(out)
    pd.testing.assert_frame_equal(back.frame, f)
    assert import_path(None, [out]).frame.equals(back.frame)
    by_budget = tmp_path / "curve.csv"
    by_budget.write_text("# copied from Table 3\ntask,seed,100k,500k\nwalker_walk,0,300.5,900\nwalker_walk,1,250,850.25\n")
    t = import_path("wide", [by_budget], pivot="budget", algorithm="DrQ")
    assert t.budgets == [100_000, 500_000] and t.meta.budget_unit == "env_steps"
    assert t.frame[(t.frame["run"] == "1") & (t.frame["budget"] == 500_000)]["score"].item() == 850.25


def test_import_cli_writes_parquet(shared_data, tmp_path):
    out = tmp_path / "dmc.csv"
    r = CliRunner().invoke(main, ["import", "rliable", str(shared_data / "rliable/dm_control/SLAC.json"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    t = read_scores(out)
    assert t.budgets == [100_000, 500_000] and t.meta.budget_unit == "env_steps"
    assert set(IMPORTERS) == {"dopamine", "rliable", "zoo", "curves", "tensorboard", "wandb", "openrlbenchmark", "tidy",
                              "wide"}


def _bad_inputs(tmp: Path) -> dict[str, tuple[str, list[str], str]]:
    """name -> (format, paths, text the error line must contain)."""
    (tmp / "trunc.json").write_text('[{"Iteration": 0, "Value": 1.0, "Agent": "DQN"}, {"Iter')
    (tmp / "notjson.json").write_text("this is not json\n")
    (tmp / "key.json").write_text(json.dumps([{"Iteration": 0, "Value": 1.0, "Agent": "DQN", "Seed": 3}]))
    (tmp / "type.json").write_text(json.dumps({"Pong": [1.0, "high"]}))
    (tmp / "order.json").write_text(json.dumps([{"Iteration": i, "Value": 1.0, "Agent": "DQN"}
                                                for i in (0, 0, 1, 0, 1)]))
    np.savez(tmp / "empty.npz")
    (tmp / "noresults").mkdir()
    np.savez(tmp / "noresults/evaluations.npz", timesteps=np.array([1, 2]))
    (tmp / "nan.json").write_text('[{"task": "t", "method": "m", "seed": 0, "xs": [1, 2], "ys": [NaN, null]}]')
    (tmp / "nothing").mkdir()
    (tmp / "nothing/readme.txt").write_text("hello")
    (tmp / "wide.csv").write_text("game,DER\nPong,1.0\nBoxing,n/a\n")
    return {
        "truncated": ("dopamine", ["trunc.json"], "trunc.json: truncated JSON (the text ends early) at line 1"),
        "non-json": ("rliable", ["notjson.json"], "notjson.json: not valid JSON at line 1 column 1"),
        "unexpected key": ("dopamine", ["key.json"], "key.json: record 1: unexpected key 'Seed'"),
        "unexpected type": ("rliable", ["type.json"], "type.json: task 'Pong', run 1: expected a finite number"),
        "unsplittable": ("dopamine", ["order.json"], "order.json: agent 'DQN': record order cannot be split"),
        "empty npz": ("zoo", ["empty.npz"], "empty.npz: empty .npz file"),
        "npz without results": ("zoo", ["noresults"], "evaluations.npz: no 'results' array"),
        "all-NaN curve": ("curves", ["nan.json"], "nan.json: run #0 (task t, seed 0): all 2 values of 'ys' are NaN"),
        "no recognised files": ("auto", ["nothing"], "nothing: no recognised score files"),
        "non-numeric wide cell": ("wide", ["wide.csv"], "wide.csv: line 3, column 'DER': 'n/a' is not a number"),
    }


def test_bad_inputs_fail_with_one_line_exit_2_and_no_output(tmp_path):
    cases = _bad_inputs(tmp_path)
    for name, (fmt, paths, expect) in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '_')}.parquet"
        r = CliRunner().invoke(main, ["import", fmt, *[str(tmp_path / p) for p in paths], "-o", str(out)])
        assert r.exit_code == 2, (name, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, r.output)
        assert expect in lines[0], (name, lines[0])
        assert "Traceback" not in r.output and not out.exists(), name
    assert not list(tmp_path.glob(".out-*"))  # no temporary file left behind


@pytest.mark.slow
def test_zoo_logs_from_a_real_rl_zoo3_run(tmp_path):
    """RL Zoo's own training script (``python -m rl_zoo3.train``), two short CartPole runs (~20 s each)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("rl_zoo3")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for seed in (3, 4):
        subprocess.run([sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "-n", "1024",
                        "--eval-freq", "512", "--eval-episodes", "2", "--n-eval-envs", "1", "-f", "logs",
                        "--seed", str(seed), "--num-threads", "1", "--device", "cpu", "-params", "n_envs:1",
                        "n_steps:256"], cwd=tmp_path, env=env, check=True, capture_output=True)
    table = import_path(None, [tmp_path / "logs"])
    assert table.algorithms == ["ppo"] and table.tasks == ["CartPole-v1"]
    assert sorted(table.frame["run"].unique()) == ["1", "2"]
    npz = np.load(tmp_path / "logs/ppo/CartPole-v1_1/evaluations.npz")
    got = table.frame[table.frame["run"] == "1"].sort_values("budget")
    assert got["budget"].tolist() == npz["timesteps"].tolist()
    assert got["score"].tolist() == npz["results"].mean(axis=1).tolist()
