"""Imports of the formats researchers have: the tidy CSV's edge cases, TensorBoard event logs (SB3, CleanRL,
RL Zoo layouts), W&B exports and openrlbenchmark tables; and ``rlaudit audit --budgets`` suffixes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import import_path
from rlaudit.scores import read_scores


def invoke(args: list[str]):
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    return result.exit_code, result.stdout, result.stderr, result.exception


def assert_import_fails(tmp_path: Path, args: list[str], *fragments: str) -> str:
    """``rlaudit import ARGS -o out.csv``: exit 2, one ``error:`` line holding ``fragments``, nothing written."""
    out = tmp_path / "out.csv"
    code, stdout, stderr, exc = invoke(["import", *args, "-o", str(out)])
    assert code == 2, (code, stdout, stderr, exc)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stdout + stderr
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert not out.exists() and not Path(str(out) + ".meta.json").exists()
    return lines[0]


def import_ok(args: list[str], out: Path):
    code, stdout, stderr, exc = invoke(["import", *args, "-o", str(out)])
    assert code == 0, (stdout, stderr, exc)
    return read_scores(out), stderr


# ------------------------------------------------------------------------------------------- tidy CSV

TIDY = "algorithm,task,seed,budget,score\nA,x,0,100,1.0\nA,x,1,100,\nA,x,2,100,3.0\nB,x,0,100,0.5\n"


def test_tidy_seed_column_is_the_run(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace(",\n", ",2.0\n"))
    table, stderr = import_ok(["tidy", str(tmp_path / "s.csv")], tmp_path / "o.csv")
    assert sorted(table.frame["run"]) == ["0", "0", "1", "2"]
    assert "column 'seed' read as the run id" in stderr


def test_tidy_run_column_option(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace("seed", "trial").replace(",\n", ",2.0\n"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "missing column 'run'",
                        "pass --run-column NAME")
    table, _ = import_ok(["tidy", str(tmp_path / "s.csv"), "--run-column", "trial"], tmp_path / "o.csv")
    assert sorted(table.frame["run"]) == ["0", "0", "1", "2"]
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv"), "--run-column", "trail"],
                        "s.csv", "--run-column: no column 'trail' (did you mean 'trial'?)")


def test_tidy_empty_score_is_missing_unless_strict(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY)
    table, stderr = import_ok(["tidy", str(tmp_path / "s.csv")], tmp_path / "o.csv")
    assert len(table.frame) == 3 and "1" not in set(table.frame.loc[table.frame.algorithm == "A", "run"])
    assert "1 row(s) with an empty score read as missing and left out (line 3)" in stderr
    assert any("empty score" in n for n in table.meta.notes)
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv"), "--strict"],
                        "s.csv", "column 'score' is NaN or empty at line 3")


def test_tidy_text_nan_and_bad_other_columns_still_fail(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace("A,x,2,100,3.0", "A,x,2,100,nan"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "NaN or empty at line 4")
    (tmp_path / "s.csv").write_text(TIDY.replace("A,x,1,100,", "A,x,1,,"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "'budget' must hold integers",
                        "line 3")


def test_tidy_format_is_documented():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "importers.md").read_text()
    section = doc.split("## The tidy score table", 1)[1].split("\n## ", 1)[0]
    for column in ("algorithm", "task", "run", "budget", "score", "score_kind", "regime", "meta.json"):
        assert f"`{column}" in section or column in section, column


# ------------------------------------------------------------------------------------ audit --budgets

def test_audit_budgets_accept_suffixes(tmp_path):
    rng = np.random.default_rng(0)
    rows = [f"{a},{t},{r},{b},{rng.normal(m, 0.1):.4f}" for a, m in (("A", 1.0), ("B", 0.0)) for t in ("x", "y")
            for r in range(5) for b in (10_000, 20_000, 1_000_000)]
    (tmp_path / "s.csv").write_text("algorithm,task,run,budget,score\n" + "\n".join(rows) + "\n")
    code, stdout, stderr, exc = invoke(["audit", str(tmp_path / "s.csv"), "--reps", "1200", "--budgets", "10k,1M",
                                        "--out", str(tmp_path / "o")])
    assert code == 0, (stdout, stderr, exc)
    assert json.loads((tmp_path / "o" / "audit.json").read_text())["budgets"] == [10_000, 1_000_000]
    code, _, stderr, _ = invoke(["audit", str(tmp_path / "s.csv"), "--budgets", "10q", "--out", str(tmp_path / "p")])
    assert code == 2 and "--budgets: '10q' is not an integer budget" in stderr


# ------------------------------------------------------------------------------------------ TensorBoard

@pytest.fixture(scope="module")
def tb_logs(tmp_path_factory):
    """Real logs: SB3 PPO (2 seeds, RL Zoo layout) and DQN (plain SB3 layout) on CartPole with an
    EvalCallback that also writes evaluations.npz; a PPO run without one; a CleanRL-style SummaryWriter run."""
    import gymnasium as gym
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import EvalCallback
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("tb")

    def eval_cb(log_path):
        return EvalCallback(gym.make("CartPole-v1"), eval_freq=64, n_eval_episodes=2, log_path=str(log_path),
                            verbose=0)

    for seed in (1, 2):  # RL Zoo: --tensorboard-log tb -> tb/<env>/<PPO>_<n>
        model = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, n_epochs=1, seed=seed,
                    tensorboard_log=str(root / "zoo_tb" / "CartPole-v1"), verbose=0)
        model.learn(256, callback=eval_cb(root / "npz" / f"PPO_{seed}"))
    model = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_starts=50, seed=0,
                tensorboard_log=str(root / "sb3_tb"), verbose=0)
    model.learn(256, callback=eval_cb(root / "npz" / "DQN_1"))
    PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, n_epochs=1, seed=3,
        tensorboard_log=str(root / "noeval_tb"), verbose=0).learn(192)

    env, returns = gym.make("CartPole-v1"), []
    writer = SummaryWriter(str(root / "runs" / "CartPole-v1__ppo_clean__7__1700000000"))
    env.reset(seed=7)
    rng, ret = np.random.default_rng(7), 0.0
    for global_step in range(400):
        _, r, term, trunc, _ = env.step(int(rng.integers(2)))
        ret += r
        if term or trunc:
            writer.add_scalar("charts/episodic_return", ret, global_step)
            writer.add_scalar("charts/episodic_length", ret, global_step)
            returns.append((global_step, ret))
            ret = 0.0
            env.reset()
    writer.close()
    return root, returns


def _event_file(folder: Path) -> Path:
    (f,) = folder.glob("events.out.tfevents.*")
    return f


def test_tensorboard_rl_zoo_layout_matches_evaluations_npz(tb_logs, tmp_path):
    root, _ = tb_logs
    table, stderr = import_ok(["tensorboard", str(root / "zoo_tb")], tmp_path / "o.csv")
    f = table.frame
    assert set(f["algorithm"]) == {"PPO"} and set(f["task"]) == {"CartPole-v1"} and sorted(set(f["run"])) == ["1", "2"]
    assert table.meta.score_kind == "eval" and table.meta.budget_unit == "env_steps"
    assert "eval/mean_reward (eval) in 2 run(s)" in stderr
    for run in ("1", "2"):
        with np.load(root / "npz" / f"PPO_{run}" / "evaluations.npz") as npz:
            steps, means = npz["timesteps"], npz["results"].mean(axis=1)
        mine = f[f["run"] == run].sort_values("budget")
        assert mine["budget"].tolist() == steps.tolist()
        np.testing.assert_allclose(mine["score"], means, rtol=1e-6)  # TensorBoard stores float32


def test_tensorboard_sb3_layout_task_override_and_fallback_tag(tb_logs, tmp_path):
    root, _ = tb_logs
    table, _ = import_ok(["tensorboard", str(root / "sb3_tb")], tmp_path / "a.csv")
    assert set(table.frame["task"]) == {"sb3_tb"} and set(table.frame["algorithm"]) == {"DQN"}
    table, _ = import_ok(["tensorboard", str(root / "sb3_tb"), "--task", "CartPole-v1"], tmp_path / "b.csv")
    assert set(table.frame["task"]) == {"CartPole-v1"} and table.meta.score_kind == "eval"
    table, stderr = import_ok(["tensorboard", str(root / "noeval_tb"), "--task", "CartPole-v1"], tmp_path / "c.csv")
    assert table.meta.score_kind == "train" and "rollout/ep_rew_mean (train) in 1 run(s)" in stderr
    assert table.frame["budget"].tolist() == [64, 128, 192]


def test_tensorboard_mixed_kinds_keep_a_per_row_score_kind(tb_logs, tmp_path):
    root, _ = tb_logs
    table, _ = import_ok(["tensorboard", str(root / "zoo_tb"), str(root / "noeval_tb"), "--task", "CartPole-v1",
                          "--run-from", r"(?P<algorithm>zoo|noeval)_tb/.*_(?P<run>\d+)/"], tmp_path / "o.csv")
    kinds = table.frame.groupby("algorithm")["score_kind"].unique().to_dict()
    assert {k: list(v) for k, v in kinds.items()} == {"zoo": ["eval"], "noeval": ["train"]}
    assert table.meta.score_kind == "train"


def test_tensorboard_cleanrl_layout_and_budgets(tb_logs, tmp_path):
    root, returns = tb_logs
    table, stderr = import_ok(["auto", str(root / "runs")], tmp_path / "o.csv")
    f = table.frame
    assert (set(f["algorithm"]), set(f["task"]), set(f["run"])) == ({"ppo_clean"}, {"CartPole-v1"}, {"7"})
    assert table.meta.score_kind == "train" and "training episodes" in stderr
    assert list(zip(f["budget"], f["score"])) == [(s, r) for s, r in returns]
    table, _ = import_ok(["tensorboard", str(root / "runs"), "--budgets", "200,399", "--max-staleness", "400"],
                         tmp_path / "b.csv")
    want = [next(r for s, r in reversed(returns) if s <= b) for b in (200, 399)]
    assert table.frame["budget"].tolist() == [200, 399] and table.frame["score"].tolist() == want


def test_tensorboard_run_from_and_tag(tb_logs, tmp_path):
    root, returns = tb_logs
    table, _ = import_ok(["tensorboard", str(root / "runs"), "--tag", "charts/episodic_length", "--algorithm", "X",
                          "--run-from", r"__(\d+)__\d+/"], tmp_path / "o.csv")
    assert set(table.frame["algorithm"]) == {"X"} and set(table.frame["run"]) == {"7"}
    assert len(table.frame) == len(returns)


def test_tensorboard_truncated_file_reads_what_is_whole(tb_logs, tmp_path):
    root, returns = tb_logs
    run = tmp_path / "logs" / "CartPole-v1__ppo__1__1"
    run.mkdir(parents=True)
    data = _event_file(root / "runs" / "CartPole-v1__ppo_clean__7__1700000000").read_bytes()
    (run / "events.out.tfevents.1.host").write_bytes(data[: len(data) // 2])
    table, stderr = import_ok(["tensorboard", str(tmp_path / "logs")], tmp_path / "o.csv")
    assert "cut off" in stderr and len(table.frame) < len(returns)


def test_tensorboard_bad_inputs(tb_logs, tmp_path):
    root, _ = tb_logs
    src = _event_file(root / "runs" / "CartPole-v1__ppo_clean__7__1700000000")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    assert_import_fails(tmp_path, ["tensorboard", str(empty)], "empty", "no TensorBoard event files")
    run = tmp_path / "g" / "CartPole-v1__a__1__1"
    run.mkdir(parents=True)
    (run / "events.out.tfevents.1.h").write_bytes(b"this is not a TensorBoard file at all, just text\n" * 3)
    assert_import_fails(tmp_path, ["tensorboard", str(run / "events.out.tfevents.1.h")], "events.out.tfevents.1.h",
                        "not a TensorBoard event file")
    damaged = bytearray(src.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    run = tmp_path / "d" / "CartPole-v1__a__1__1"
    run.mkdir(parents=True)
    (run / src.name).write_bytes(bytes(damaged))
    assert_import_fails(tmp_path, ["tensorboard", str(run)], src.name, "corrupt record")
    assert_import_fails(tmp_path, ["tensorboard", str(root / "runs"), "--tag", "charts/episodic_retrun"],
                        src.name, "no scalar tag charts/episodic_retrun", "did you mean 'charts/episodic_return'")
    assert_import_fails(tmp_path, ["tensorboard", str(root / "runs"), "--run-from", "(unclosed"],
                        "--run-from", "not a regular expression")
    assert_import_fails(tmp_path, ["tensorboard", str(root / "runs"), "--run-from", "nomatch(\\d)"],
                        src.name, "does not match this path")
    odd = tmp_path / "odd" / "my run"
    odd.mkdir(parents=True)
    (odd / src.name).write_bytes(src.read_bytes())
    assert_import_fails(tmp_path, ["tensorboard", str(odd)], "cannot tell the algorithm", "--algorithm")
    twin = tmp_path / "twin" / "CartPole-v1__ppo_clean__7__1700000000"
    twin.mkdir(parents=True)
    (twin / src.name).write_bytes(src.read_bytes())
    assert_import_fails(tmp_path, ["tensorboard", str(root / "runs"), str(tmp_path / "twin")],
                        "run ppo_clean/CartPole-v1/7 also comes from")


# --------------------------------------------------------------------------------- W&B / openrlbenchmark

RUN_A, RUN_B = "CartPole-v1__ppo__1__1700000000", "CartPole-v1__dqn__2__1700000050"


def _panel_csv(path: Path, runs=(RUN_A, RUN_B), metric="charts/episodic_return") -> Path:
    """A panel's "Export CSV" as the W&B UI writes it: every field quoted, __MIN/__MAX beside each run."""
    header = ["Step"] + [f"{r} - {metric}{b}" for r in runs for b in ("", "__MIN", "__MAX")]
    rows = [["100", "10", "9", "11", "", "", ""], ["200", "20", "19", "21", "5", "5", "5"],
            ["300", "", "", "", "7.5", "7", "8"]]
    path.write_text("\n".join(",".join(f'"{c}"' for c in r[: len(header)]) for r in [header, *rows]) + "\n")
    return path


def test_wandb_panel_export(tmp_path):
    p = _panel_csv(tmp_path / "wandb_export_2026-01-01.csv")
    table, stderr = import_ok(["auto", str(p)], tmp_path / "o.csv")
    got = sorted(zip(table.frame["algorithm"], table.frame["run"], table.frame["budget"], table.frame["score"]))
    assert got == [("dqn", "2", 200, 5.0), ("dqn", "2", 300, 7.5), ("ppo", "1", 100, 10.0), ("ppo", "1", 200, 20.0)]
    assert set(table.frame["task"]) == {"CartPole-v1"} and table.meta.score_kind == "train"
    # plain W&B run names need the algorithm and task; the run is the name
    p2 = _panel_csv(tmp_path / "named.csv", runs=("ruby-sun-12", "dark-moon-3"), metric="eval/mean_reward")
    assert_import_fails(tmp_path, ["wandb", str(p2)], "named.csv", "cannot tell the algorithm of run 'ruby-sun-12'")
    table, _ = import_ok(["wandb", str(p2), "--algorithm", "PPO", "--task", "CartPole-v1"], tmp_path / "o2.csv")
    assert sorted(set(table.frame["run"])) == ["dark-moon-3", "ruby-sun-12"] and table.meta.score_kind == "eval"


def test_wandb_panel_bad_cells(tmp_path):
    p = _panel_csv(tmp_path / "p.csv")
    p.write_text(p.read_text().replace('"20","19"', '"twenty","19"'))
    assert_import_fails(tmp_path, ["wandb", str(p)], "p.csv", "line 3", f"column '{RUN_A} - charts/episodic_return'",
                        "'twenty' is not a number")
    p = _panel_csv(tmp_path / "p.csv")
    assert_import_fails(tmp_path, ["wandb", str(p), "--tag", "eval/mean_rewrd"], "p.csv", "no metric eval/mean_rewrd",
                        "charts/episodic_return")


RUNS_TABLE = ('"Name","State","Notes","User","Tags","Created","Runtime","Sweep","env_id","exp_name","seed",'
              '"total_timesteps","charts/episodic_return","global_step"\n'
              f'"{RUN_A}","finished","-","me","","2026-01-01T00:00:00.000Z","120","","CartPole-v1","ppo","1",'
              '"500000","480.5","499968"\n'
              '"ruby-sun-12","finished","-","me","","2026-01-01T00:00:00.000Z","120","","CartPole-v1","dqn","2",'
              '"500000","301","499968"\n'
              '"dark-moon-3","crashed","-","me","","2026-01-01T00:00:00.000Z","60","","CartPole-v1","dqn","3",'
              '"500000","","12000"\n')


def test_wandb_runs_table(tmp_path):
    (tmp_path / "runs.csv").write_text(RUNS_TABLE)
    table, stderr = import_ok(["auto", str(tmp_path / "runs.csv")], tmp_path / "o.csv")
    got = sorted(zip(table.frame["algorithm"], table.frame["task"], table.frame["run"], table.frame["budget"],
                     table.frame["score"]))
    assert got == [("dqn", "CartPole-v1", "2", 499968, 301.0), ("ppo", "CartPole-v1", "1", 499968, 480.5)]
    assert "1 run(s) without a charts/episodic_return value left out" in stderr and "1 crashed" in stderr
    table, _ = import_ok(["wandb", str(tmp_path / "runs.csv"), "--budget", "500k"], tmp_path / "o2.csv")
    assert set(table.frame["budget"]) == {500_000}
    (tmp_path / "runs.csv").write_text(RUNS_TABLE.replace('"301"', '"n/a"'))
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / "runs.csv")], "runs.csv", "line 3",
                        "'charts/episodic_return'", "'n/a' is not a number")
    (tmp_path / "runs.csv").write_text(RUNS_TABLE.replace('"dqn","2"', '"ppo","1"'))
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / "runs.csv")], "runs.csv: line 3",
                        "run ppo/CartPole-v1/1 also comes from", "line 2")


def _history(n: int = 6, seed: int = 0) -> pd.DataFrame:
    """A frame as ``wandb.Api().run(...).history()`` returns it: one row per log call, NaN where a key is absent."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        rows.append({"_step": 2 * i, "_runtime": 1.5 * i, "_timestamp": 1.7e9 + i, "global_step": 128 * (i + 1),
                     "losses/value_loss": float(rng.random()), "charts/episodic_return": np.nan})
        rows.append({"_step": 2 * i + 1, "_runtime": 1.5 * i + 0.1, "_timestamp": 1.7e9 + i + 0.1,
                     "global_step": 128 * (i + 1), "charts/episodic_return": float(10 * i + seed)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_wandb_history_file(tmp_path, suffix):
    hist = _history()
    p = tmp_path / f"{RUN_A}{suffix}"
    hist.to_csv(p) if suffix == ".csv" else hist.to_parquet(p)  # to_csv keeps the index, as people save it
    table, _ = import_ok(["auto", str(p)], tmp_path / "o.csv")
    assert table.frame["budget"].tolist() == [128 * (i + 1) for i in range(6)]
    assert table.frame["score"].tolist() == [10.0 * i for i in range(6)]
    assert (set(table.frame["algorithm"]), set(table.frame["run"])) == ({"ppo"}, {"1"})
    table, _ = import_ok(["wandb", str(p), "--budgets", "300,768", "--max-staleness", "200"], tmp_path / "b.csv")
    assert list(zip(table.frame["budget"], table.frame["score"])) == [(300, 10.0), (768, 50.0)]
    q = tmp_path / f"run-xyz{suffix}"
    h2 = hist.drop(columns="global_step")
    h2.to_csv(q) if suffix == ".csv" else h2.to_parquet(q)
    table, stderr = import_ok(["wandb", str(q), "--algorithm", "PPO", "--task", "CartPole-v1"], tmp_path / "c.csv")
    assert table.frame["budget"].tolist() == [2 * i + 1 for i in range(6)] and "not env steps" in stderr


def _orb_run(root: Path, run_id: str, seed: int, exp: str, wrapped: bool = False) -> Path:
    folder = root / "dataset" / "openrlbenchmark" / "cleanrl" / run_id
    folder.mkdir(parents=True)
    _history(seed=seed).to_csv(folder / "run_df.csv")  # CachedRun: self.run_df.to_csv(self.run_df_path)
    config = {"env_id": "CartPole-v1", "exp_name": exp, "seed": seed, "total_timesteps": 768}
    if wrapped:
        config = {k: {"desc": None, "value": v} for k, v in config.items()}
    (folder / "run.json").write_text(json.dumps({"id": run_id, "name": f"CartPole-v1__{exp}__{seed}__1",
                                                 "config": config, "state": "finished"}))
    return folder


def test_openrlbenchmark_cache(tmp_path):
    _orb_run(tmp_path, "3nhnaboz", 1, "ppo")
    _orb_run(tmp_path, "8fk2l1xq", 2, "ppo", wrapped=True)
    _orb_run(tmp_path, "a9s8d7f6", 1, "dqn")
    table, stderr = import_ok(["auto", str(tmp_path / "dataset")], tmp_path / "o.csv")
    f = table.frame
    assert sorted(set(zip(f["algorithm"], f["run"]))) == [("dqn", "1"), ("ppo", "1"), ("ppo", "2")]
    assert f[(f["algorithm"] == "ppo") & (f["run"] == "2")]["score"].tolist() == [10.0 * i + 2 for i in range(6)]
    assert table.meta.score_kind == "train"
    (tmp_path / "dataset" / "openrlbenchmark" / "cleanrl" / "a9s8d7f6" / "run.json").write_text('{"id": "a9"')
    assert_import_fails(tmp_path, ["openrlbenchmark", str(tmp_path / "dataset")], "a9s8d7f6", "run.json",
                        "not readable JSON")
    (tmp_path / "dataset" / "openrlbenchmark" / "cleanrl" / "a9s8d7f6" / "run.json").write_text(
        json.dumps({"config": {"env": "CartPole-v1", "exp_name": "dqn"}}))
    assert_import_fails(tmp_path, ["openrlbenchmark", str(tmp_path / "dataset")], "run.json",
                        "config has no 'env_id' (did you mean 'env'?)", "task_key")
    table, _ = import_ok(["openrlbenchmark", str(tmp_path / "dataset"), "--task", "CartPole"], tmp_path / "o2.csv")
    assert set(table.frame["task"]) == {"CartPole"} and len(set(zip(table.frame["algorithm"], table.frame["run"]))) == 3


def test_openrlbenchmark_result_table_is_refused(tmp_path):
    # rlops.py: result_table.to_csv(f"{output_filename}.csv"), one "mean ± std" cell per env and runset
    (tmp_path / "compare.csv").write_text(",CleanRL PPO,openai/baselines PPO2\n"
                                          "HalfCheetah-v2,2262.50 ± 1196.81,1428.55 ± 62.40\n")
    assert_import_fails(tmp_path, ["auto", str(tmp_path / "compare.csv")], "compare.csv", "holds no runs",
                        "rlaudit import openrlbenchmark")
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / "compare.csv")], "compare.csv", "holds no runs")


def test_not_a_wandb_export(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / "x.csv")], "x.csv", "not a W&B export")


def test_tensorboard_non_finite_value_names_tag_and_step(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "tb" / "PPO_1"
    writer = SummaryWriter(str(run))
    writer.add_scalar("eval/mean_reward", 3.0, 64)
    writer.add_scalar("eval/mean_reward", float("nan"), 128)
    writer.close()
    assert_import_fails(tmp_path, ["tensorboard", str(tmp_path / "tb"), "--task", "CartPole-v1"],
                        "events.out.tfevents", "tag 'eval/mean_reward' at step 128 is not finite")


def test_wandb_history_bad_cells(tmp_path):
    hist = _history()
    hist.loc[3, "charts/episodic_return"] = np.inf
    hist.to_csv(tmp_path / f"{RUN_A}.csv")
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / f"{RUN_A}.csv")], f"{RUN_A}.csv", "line 5",
                        "'charts/episodic_return'", "not a finite number")
    hist = _history()
    hist["global_step"] = hist["global_step"].astype(object)
    hist.loc[5, "global_step"] = -1
    hist.to_parquet(tmp_path / "h.parquet")
    assert_import_fails(tmp_path, ["wandb", str(tmp_path / "h.parquet"), "--algorithm", "A", "--task", "T"],
                        "h.parquet", "row 6", "'global_step'", "negative step -1")
