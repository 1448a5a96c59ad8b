"""The published MinAtar settings on the SB3 backend: Adam's eps, Dopamine's epsilon schedule, the MSE loss,
no gradient clipping, fixed PER beta, the 'minatar' network and its initialisation, MinAtar's full action set
and uncapped episodes (issue 23, contract in docs/fidelity.md)."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from click.testing import CliRunner

from rlaudit.algorithms import make_agent
from rlaudit.algorithms.dqn_settings import dopamine_epsilon, td_loss
from rlaudit.algorithms.networks import MinAtarNetwork, glorot_init
from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.run.envs import make_env
from rlaudit.run.spec import TaskSpec

DQN_FAMILY = ("DQN", "DQNFamily", "DoubleDQN", "DuelingDQN", "PrioritizedDQN", "QRDQN", "C51", "IQN", "NoisyDQN",
              "Rainbow", "DopamineRainbow")
BREAKOUT = TaskSpec("MinAtar/Breakout-v1", "minatar")
BREAKOUT_FULL = TaskSpec("MinAtar/Breakout-v1", "minatar", (("use_minimal_action_set", False),))
MINATAR_NET = {"features_extractor": "minatar", "net_arch": []}
TINY = {"learning_starts": 50, "batch_size": 8, "buffer_size": 500, "train_freq": 1, "target_update_interval": 20}


def _cartpole():
    return gym.make("CartPole-v1")


# --- Dopamine's epsilon schedule ----------------------------------------------------------------------------

def test_dopamine_epsilon_values():
    # warm-up 1000, decay 250k, final 0.01: 1 until the end of the warm-up, 0.01 + 0.99 * 151/250 at 100k
    eps = [dopamine_epsilon(t, 250_000, 1_000, 0.01) for t in (0, 999, 1_000, 100_000, 251_000, 400_000)]
    assert eps[:3] == [1.0, 1.0, 1.0]
    assert eps[3] == pytest.approx(0.01 + 0.99 * 151_000 / 250_000, abs=1e-15)
    assert eps[3] == pytest.approx(0.60796, abs=1e-12)
    assert eps[4:] == [0.01, 0.01]


def test_dopamine_schedule_drives_the_agents_epsilon():
    hp = {**TINY, "learning_starts": 100, "exploration_schedule": "dopamine", "epsilon_decay_steps": 400,
          "exploration_final_eps": 0.05}
    seen = {}
    agent = make_agent("DQN", _cartpole(), hp, seed=0)
    agent.train(700, lambda n: seen.setdefault(n, agent.model.exploration_rate) is not None)
    # the callback after env step n sees the epsilon of the n-th action, taken after n - 1 steps: eps(n - 1)
    for n in (1, 100, 101, 301, 501, 600):
        assert seen[n] == pytest.approx(dopamine_epsilon(n - 1, 400, 100, 0.05), abs=1e-12), n
    assert seen[301] == pytest.approx(0.05 + 0.95 * 200 / 400)
    assert seen[1] == seen[101] == 1.0 and seen[501] == seen[600] == 0.05
    # SB3's linear schedule is progress-based: at the same step count it is elsewhere
    linear = make_agent("DQN", _cartpole(), {**TINY, "learning_starts": 100, "exploration_final_eps": 0.05}, seed=0)
    seen_linear = {}
    linear.train(700, lambda n: seen_linear.setdefault(n, linear.model.exploration_rate) is not None)
    assert seen_linear[301] != pytest.approx(seen[301])


@pytest.mark.parametrize("name", ["DQN", "C51", "QRDQN", "IQN", "DopamineRainbow"])
def test_dopamine_schedule_starts_at_one_for_every_family_member(name):
    agent = make_agent(name, _cartpole(), {**TINY, "exploration_schedule": "dopamine"}, seed=0)
    assert agent.model.exploration_rate == 1.0
    agent.train(120)
    final = agent.model.exploration_final_eps  # 0.05 (SB3), 0.01 (sb3-contrib's QR-DQN)
    assert agent.model.exploration_rate == pytest.approx(dopamine_epsilon(120, 250_000, 50, final))
    assert agent.model.exploration_rate == pytest.approx(final + (1 - final) * (250_000 + 50 - 120) / 250_000)


def test_no_random_warmup_acts_epsilon_greedily_from_the_first_step(monkeypatch):
    from stable_baselines3 import DQN as SB3DQN

    greedy = []
    real = SB3DQN.predict
    monkeypatch.setattr(SB3DQN, "predict", lambda self, *a, **k: greedy.append(1) or real(self, *a, **k))
    hp = {**TINY, "learning_starts": 100, "exploration_initial_eps": 0.01, "exploration_final_eps": 0.01}
    make_agent("Rainbow", _cartpole(), {**hp, "random_warmup": False}, seed=0).train(50)
    assert len(greedy) == 50  # every action from the policy, none from the uniform warm-up
    greedy.clear()
    make_agent("Rainbow", _cartpole(), hp, seed=0).train(50)
    assert greedy == []  # SB3: uniform actions until learning_starts
    agent = make_agent("DQN", _cartpole(), {**hp, "random_warmup": False}, seed=0)
    agent.train(60)
    assert agent.model.exploration_rate == 0.01 and agent.model._n_updates == 0  # learning still waits


# --- Adam's eps -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DQN_FAMILY)
def test_adam_eps_reaches_torchs_adam(name):
    agent = make_agent(name, _cartpole(), {**TINY, "adam_eps": 3.125e-4}, seed=0)
    opt = agent.model.policy.optimizer
    assert type(opt) is th.optim.Adam
    assert [g["eps"] for g in opt.param_groups] == [3.125e-4] * len(opt.param_groups)
    default = make_agent(name, _cartpole(), TINY, seed=0).model.policy.optimizer
    # torch's default, except sb3-contrib's QR-DQN: 0.01 / batch_size
    expected = 0.01 / TINY["batch_size"] if name == "QRDQN" else 1e-8
    assert [g["eps"] for g in default.param_groups] == [expected] * len(default.param_groups)


def test_adam_eps_changes_the_update():
    params = []
    for eps in (None, 3.125e-4):
        hp = {**TINY, **({"adam_eps": eps} if eps else {})}
        agent = make_agent("DQN", _cartpole(), hp, seed=3)
        agent.train(200)
        params.append(th.cat([p.detach().flatten() for p in agent.model.policy.q_net.parameters()]))
    assert not th.equal(*params)


def test_adam_eps_given_twice_is_refused():
    with pytest.raises(InputError, match="adam_eps is given both as a hyperparameter and in policy_kwargs"):
        make_agent("DQN", _cartpole(), {"adam_eps": 1e-4}, seed=0, policy_kwargs={"optimizer_kwargs": {"eps": 1e-3}})


# --- the loss and gradient clipping -------------------------------------------------------------------------

def test_td_loss_huber_and_mse_hand_computed():
    current = th.tensor([[0.0], [1.0], [5.0]])
    target = th.tensor([[0.5], [3.0], [5.0]])
    # Huber (delta 1): 0.125, 1.5, 0; squared: 0.25, 4, 0
    assert td_loss(current, target, "huber").item() == pytest.approx((0.125 + 1.5) / 3)
    assert td_loss(current, target, "mse").item() == pytest.approx(4.25 / 3)
    assert td_loss(current, target, "mse", "none").reshape(-1).tolist() == [0.25, 4.0, 0.0]


@pytest.mark.parametrize("name", ["DQN", "DQNFamily", "PrioritizedDQN"])
def test_mse_loss_is_what_the_update_minimises(name, monkeypatch):
    from rlaudit.algorithms import dqn_settings

    used = []
    real = dqn_settings.td_loss
    monkeypatch.setattr("rlaudit.algorithms.dqn_family.td_loss",
                        lambda c, t, loss, reduction="mean": used.append(loss) or real(c, t, loss, reduction))
    agent = make_agent(name, _cartpole(), {**TINY, "loss": "mse"}, seed=0)
    agent.train(80)
    assert used and set(used) == {"mse"}


def test_dqn_with_defaults_is_sb3_dqn_bit_for_bit():
    from stable_baselines3 import DQN as SB3DQN

    hp = {"learning_starts": 32, "batch_size": 16, "train_freq": 1, "target_update_interval": 50}
    ours = make_agent("DQN", _cartpole(), hp, seed=7, policy_kwargs={"net_arch": [16]})
    ours.train(200)
    theirs = SB3DQN("MlpPolicy", _cartpole(), seed=7, policy_kwargs={"net_arch": [16]}, device="cpu", **hp)
    theirs.learn(200)
    assert all(th.equal(a, b) for a, b in zip(ours.model.policy.parameters(), theirs.policy.parameters()))


@pytest.mark.parametrize("name", ["DQN", "C51", "QRDQN", "DopamineRainbow"])
def test_no_gradient_clipping_with_inf(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = make_agent(name, _cartpole(), {**TINY, "max_grad_norm": math.inf, "learning_rate": 1e-3}, seed=0)
        agent.train(200)
    assert all(th.isfinite(p).all() for p in agent.model.policy.parameters())


def test_inf_grad_norm_is_the_same_update_as_no_clipping(monkeypatch):
    # Clipping at inf multiplies by 1: the run with inf equals one whose clipping is removed altogether.
    runs = []
    for patch in (False, True):
        if patch:
            monkeypatch.setattr(th.nn.utils, "clip_grad_norm_", lambda *a, **k: th.tensor(0.0))
        agent = make_agent("DQNFamily", _cartpole(), {**TINY, "max_grad_norm": math.inf}, seed=1)
        agent.train(150)
        runs.append([p.detach().clone() for p in agent.model.policy.parameters()])
    assert all(th.equal(a, b) for a, b in zip(*runs))


def test_inf_max_grad_norm_validates_and_nan_does_not(tmp_path):
    from rlaudit.algorithms import get_spec

    get_spec("DQN").check_hyperparams({"max_grad_norm": math.inf}, "p.toml: algorithms[0].hyperparams")
    with pytest.raises(InputError, match=r"^p.toml: algorithms\[0\].hyperparams.max_grad_norm: must be a finite number"):
        get_spec("DQN").check_hyperparams({"max_grad_norm": math.nan}, "p.toml: algorithms[0].hyperparams")
    with pytest.raises(InputError, match=r"learning_rate: must be a finite number"):
        get_spec("DQN").check_hyperparams({"learning_rate": math.inf}, "p.toml: algorithms[0].hyperparams")


# --- fixed PER beta -----------------------------------------------------------------------------------------------

def test_per_beta_fixed_when_not_annealed():
    for anneal, expected_end in ((True, 1.0), (False, 0.5)):
        agent = make_agent("DopamineRainbow", _cartpole(), {**TINY, "per_beta_anneal": anneal}, seed=0)
        assert agent.model.current_beta() == 0.5
        agent.train(100)
        assert agent.model.current_beta() == pytest.approx(expected_end)


# --- validation: one line naming the field --------------------------------------------------------------------

@pytest.mark.parametrize(("name", "hp", "message"), [
    ("DQN", {"adam_eps": -1.0}, r"DQN: adam_eps must be a finite number > 0"),
    ("C51", {"adam_eps": 0.0}, r"C51: adam_eps must be a finite number > 0"),
    ("DQN", {"exploration_schedule": "dopamin"}, r"exploration_schedule must be one of 'linear', 'dopamine', got "
                                                 r"'dopamin' \(did you mean 'dopamine'\?\)"),
    ("QRDQN", {"epsilon_decay_steps": 0}, r"epsilon_decay_steps must be an integer >= 1, got 0"),
    ("NoisyDQN", {"exploration_schedule": "dopamine"}, r"exploration_initial_eps = 0.0 contradicts "
                                                       r"exploration_schedule = 'dopamine'"),
    ("DQN", {"loss": "l2"}, r"loss must be one of 'huber', 'mse', got 'l2'"),
    ("Rainbow", {"random_warmup": 0}, r"random_warmup: expected true or false"),
    ("C51", {"loss": "mse"}, r"loss = 'mse' applies to expected-value heads only; distributional = 'c51'"),
    ("DQN", {"max_grad_norm": 0.0}, r"hyperparams.max_grad_norm: must be greater than 0 for 'DQN', got 0.0"),
    ("DopamineRainbow", {"per_beta_anneal": "no"}, r"per_beta_anneal: expected true or false"),
])
def test_invalid_published_settings_are_one_line_naming_the_field(name, hp, message):
    from rlaudit.algorithms import get_spec

    with pytest.raises(InputError, match=message) as info:
        get_spec(name).check_hyperparams(hp, "p.toml: algorithms[0].hyperparams")
    assert "\n" not in str(info.value) and str(info.value).startswith("p.toml: algorithms[0].hyperparams")


def test_algorithms_show_lists_the_new_hyperparameters():
    for name, expected in (("DQN", ("adam_eps", "exploration_schedule", "epsilon_decay_steps", "loss",
                                    "random_warmup")),
                           ("DopamineRainbow", ("adam_eps", "exploration_schedule", "epsilon_decay_steps", "loss",
                                                "per_beta_anneal")),
                           ("QRDQN", ("adam_eps", "exploration_schedule", "epsilon_decay_steps"))):
        result = CliRunner().invoke(main, ["algorithms", "show", name])
        assert result.exit_code == 0, result.output
        for key in expected:
            assert f" {key} " in result.output, (name, key)
    import re

    assert re.search(r"\n    epsilon_decay_steps +250000\n", CliRunner().invoke(main, ["algorithms", "show", "DQN"]).output)


# --- the 'minatar' network ------------------------------------------------------------------------------------------

def _minatar_agent(name: str, hp: dict | None = None, task: TaskSpec = BREAKOUT_FULL, seed: int = 0):
    return make_agent(name, make_env(task, seed), {**TINY, **(hp or {})}, seed=seed, policy_kwargs=MINATAR_NET)


@pytest.mark.parametrize(("name", "n_params", "out"), [
    # conv 4*16*9 + 16 = 592; head 1600 x 6 (+6) for DQN, 1600 x 6*51 (+306) for C51, 1600 x 6*200 for QR-DQN
    ("DQN", 592 + 1600 * 6 + 6, (2, 6)),
    ("C51", 592 + 1600 * 306 + 306, (2, 6, 51)),
    ("QRDQN", 592 + 1600 * 1200 + 1200, (2, 200, 6)),  # sb3-contrib: (batch, quantiles, actions)
    ("DopamineRainbow", 592 + 1600 * 306 + 306, (2, 6, 51)),
])
def test_minatar_network_parameter_count_and_output_shape(name, n_params, out):
    agent = _minatar_agent(name)
    policy = agent.model.policy
    net = policy.quantile_net if name == "QRDQN" else policy.q_net
    assert isinstance(net.features_extractor, MinAtarNetwork)
    assert sum(p.numel() for p in net.parameters()) == n_params
    obs = th.as_tensor(np.stack([make_env(BREAKOUT_FULL, 0).reset(seed=s)[0] for s in (1, 2)]))
    with th.no_grad():
        features = net.features_extractor(obs.float())
        raw = net(obs) if name in ("DQN", "QRDQN") else net.distribution(obs)
    assert features.shape == (2, 1600)
    assert tuple(raw.shape) == out


def test_minatar_network_is_a_same_padded_3x3_convolution_on_channel_last_input():
    space = gym.spaces.Box(0, 1, (10, 10, 4), np.uint8)
    net = MinAtarNetwork(space)
    x = th.zeros(1, 10, 10, 4)
    x[0, 0, 0, 2] = 1.0  # one active cell in the corner, channel 2
    with th.no_grad():
        net.conv.bias.zero_()
        y = net(x).reshape(10, 10, 16)  # flax order: (height, width, channel)
        w = net.conv.weight  # (out, in, kh, kw)
        # output at (0,0) sees the input through the kernel's centre, at (1,1) through its top-left tap
        assert th.allclose(y[0, 0], th.relu(w[:, 2, 1, 1]))
        assert th.allclose(y[1, 1], th.relu(w[:, 2, 0, 0]))
        assert (y[3:, :] == 0).all() and (y[:, 3:] == 0).all()


@pytest.mark.parametrize("name", ["DQN", "C51", "QRDQN", "IQN", "DopamineRainbow"])
def test_minatar_network_glorot_uniform_init_everywhere(name):
    agent = _minatar_agent(name)
    policy = agent.model.policy
    net = policy.quantile_net if name == "QRDQN" else policy.q_net
    target = policy.quantile_net_target if name == "QRDQN" else policy.q_net_target
    conv = net.features_extractor.conv
    # revisiting_rainbow@64ec8c8: a 2-D 3x3 kernel, fan_in 9 * 4, fan_out 9 * 16
    conv_bound = math.sqrt(6 / (9 * 4 + 9 * 16))
    assert conv_bound == pytest.approx(0.182574, abs=1e-6)
    w = conv.weight.detach()
    assert w.abs().max() <= conv_bound and w.abs().max() > 0.95 * conv_bound
    assert (conv.bias == 0).all()
    linears = [m for m in net.modules() if isinstance(m, th.nn.Linear)]
    assert linears
    for layer in linears:
        bound = math.sqrt(6 / (layer.in_features + layer.out_features))
        assert layer.weight.abs().max() <= bound and layer.weight.abs().max() > 0.9 * bound
        assert (layer.bias == 0).all()
        # uniform on [-b, b]: variance b^2 / 3
        assert layer.weight.var().item() == pytest.approx(bound**2 / 3, rel=0.1)
    # the target network starts as a copy of the online one
    assert all(th.equal(a, b) for a, b in zip(net.state_dict().values(), target.state_dict().values()))


def test_older_revisions_3x3x3_initialisation_is_a_subclass_away():
    class OldMinAtarNetwork(MinAtarNetwork):
        INIT_RECEPTIVE_FIELD = 27

    th.manual_seed(0)
    net = OldMinAtarNetwork(gym.spaces.Box(0, 1, (10, 10, 4), np.uint8))
    glorot_init(net)
    bound = math.sqrt(6 / (27 * 4 + 27 * 16))
    assert bound == pytest.approx(0.105409, abs=1e-6)
    assert 0.95 * bound < net.conv.weight.abs().max() <= bound


def test_glorot_init_is_seeded():
    space = gym.spaces.Box(0, 1, (10, 10, 6), np.uint8)
    nets = []
    for _ in range(2):
        th.manual_seed(5)
        net = th.nn.Sequential(MinAtarNetwork(space), th.nn.Linear(1600, 6))
        glorot_init(net)
        nets.append(net)
    assert all(th.equal(a, b) for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values()))


def test_minatar_network_trains_on_minatar():
    agent = _minatar_agent("C51", {"adam_eps": 3.125e-4, "exploration_schedule": "dopamine",
                                   "max_grad_norm": math.inf, "v_min": -100.0, "v_max": 100.0})
    before = agent.model.q_net.head[0].weight.detach().clone()
    agent.train(200)
    assert not th.equal(before, agent.model.q_net.head[0].weight)


def test_unknown_features_extractor_is_one_line_naming_the_field():
    from rlaudit.algorithms.hyperparams import check_policy_kwargs
    from rlaudit.algorithms.dqn_family import DQN

    with pytest.raises(InputError, match=r"^p.toml: algorithms\[0\].policy_kwargs.features_extractor: unknown features "
                                         r"extractor 'minatr' \(did you mean 'minatar'\?\); built-in: minatar$"):
        check_policy_kwargs(DQN, None, {"features_extractor": "minatr"}, "p.toml: algorithms[0].policy_kwargs", "DQN")
    with pytest.raises(InputError, match="features_extractor: unknown features extractor"):
        make_agent("DQN", _cartpole(), {}, seed=0, policy_kwargs={"features_extractor": "nature"})
    check_policy_kwargs(DQN, None, MINATAR_NET, "p.toml: algorithms[0].policy_kwargs", "DQN")


# --- MinAtar's full action set and uncapped episodes -----------------------------------------------------------

def test_full_action_set_is_a_task_kwarg():
    assert make_env(BREAKOUT, 0).action_space.n == 3  # v1 ids: the minimal set
    env = make_env(BREAKOUT_FULL, 0)
    assert env.action_space.n == 6
    assert make_env(TaskSpec("MinAtar/SpaceInvaders-v1", "minatar", (("use_minimal_action_set", False),)),
                    0).action_space.n == 6
    # sticky actions are MinAtar's default 0.1
    assert env.unwrapped.game.sticky_action_prob == 0.1


def test_minatar_episodes_are_uncapped_without_max_episode_steps():
    env = make_env(BREAKOUT_FULL, 0)
    wrappers = []
    e = env
    while hasattr(e, "env"):
        wrappers.append(type(e).__name__)
        e = e.env
    assert "TimeLimit" not in wrappers
    capped = make_env(TaskSpec("MinAtar/Breakout-v1", "minatar", (), 3_000), 0)
    assert capped.spec.max_episode_steps == 3_000


# --- training-reward clipping ------------------------------------------------------------------------------------

def test_clip_reward_clips_training_rewards_only():
    task = TaskSpec("MinAtar/Seaquest-v1", "minatar", (("clip_reward", [-1, 1]), ("use_minimal_action_set", False)))
    train, evaluation = make_env(task, 0), make_env(task, 0, evaluation=True)
    assert type(train).__name__ == "ClipReward" and type(evaluation).__name__ != "ClipReward"
    assert train.action_space.n == 6
    # the wrapper's own reward function on a Seaquest surfacing bonus of +10
    assert train.reward(10.0) == 1.0 and train.reward(-3.0) == -1.0 and train.reward(0.5) == 0.5
    cart = make_env(TaskSpec("CartPole-v1", "gymnasium", (("clip_reward", [0, 0.5]),)), 0)
    cart.reset(seed=0)
    assert cart.step(0)[1] == 0.5  # CartPole's +1 clipped


@pytest.mark.parametrize("value", [[1, -1], [0], "yes", [True, 2]])
def test_bad_clip_reward_is_one_line(value):
    with pytest.raises(InputError, match=r"^task 'MinAtar/Breakout-v1': kwargs.clip_reward must be \[low, high\]"):
        make_env(TaskSpec("MinAtar/Breakout-v1", "minatar", (("clip_reward", value),)), 0)
