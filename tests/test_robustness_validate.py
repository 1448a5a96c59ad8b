"""Hostile-user probes, round 2 (issue 21): protocols that ``validate`` passed but no run could train, input
rlaudit refused although it is legitimate, and work too large to start without a word."""

from __future__ import annotations

import textwrap
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from tests.test_robustness import one_line_error

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
