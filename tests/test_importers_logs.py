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
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "missing column 'run'")
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
