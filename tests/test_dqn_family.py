"""The DQN family: each component's defining mathematics on hand-built batches, composition, learning."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from rlaudit.algorithms import get_spec, make_agent
from rlaudit.algorithms import dqn_components as comp
from rlaudit.algorithms import dqn_family as fam
from rlaudit.algorithms.dqn_family import (
    DQNFamily,
    DuelingQNetwork,
    FamilyCnnPolicy,
    PrioritizedNStepReplayBuffer,
    PrioritizedReplayBuffer,
    SumTree,
    annealed_beta,
    dueling_combine,
    importance_weights,
    q_learning_target,
)
from rlaudit.errors import InputError
from rlaudit.testing import evaluate

# --- Double Q ------------------------------------------------------------------------------------------

# Three transitions, three actions. Rows 0 and 2: online and target argmax agree; row 1: they differ.
NEXT_Q_TARGET = th.tensor([[1.0, 5.0, 2.0], [4.0, 0.0, 3.0], [0.0, 1.0, 9.0]])
NEXT_Q_ONLINE = th.tensor([[0.0, 7.0, 1.0], [1.0, 2.0, 8.0], [3.0, 2.0, 4.0]])
REWARDS = th.tensor([[1.0], [0.5], [-1.0]])
DONES = th.tensor([[0.0], [0.0], [1.0]])


def test_dqn_target_is_max_over_target_network():
    target = q_learning_target(REWARDS, DONES, 0.5, NEXT_Q_TARGET)
    assert target.tolist() == [[1.0 + 0.5 * 5.0], [0.5 + 0.5 * 4.0], [-1.0]]


def test_double_target_differs_from_max_exactly_where_argmaxes_differ():
    max_target = q_learning_target(REWARDS, DONES, 0.5, NEXT_Q_TARGET)
    double = q_learning_target(REWARDS, DONES, 0.5, NEXT_Q_TARGET, NEXT_Q_ONLINE)
    # Row 1: online picks action 2, target evaluates it at 3.0 instead of its own max 4.0.
    assert double.tolist() == [[3.5], [0.5 + 0.5 * 3.0], [-1.0]]
    differs = (double != max_target).squeeze(1)
    argmax_differs = NEXT_Q_ONLINE.argmax(1) != NEXT_Q_TARGET.argmax(1)
    # Row 2 is terminal: nothing is bootstrapped, so the targets agree although the argmaxes would not.
    assert differs.tolist() == [False, True, False]
    assert (differs == (argmax_differs & (DONES.squeeze(1) == 0))).all()


def test_nstep_discounts_per_transition():
    target = q_learning_target(REWARDS, th.zeros(3, 1), th.tensor([[0.25], [0.5], [1.0]]), NEXT_Q_TARGET)
    assert target.tolist() == [[1.0 + 0.25 * 5.0], [0.5 + 0.5 * 4.0], [-1.0 + 9.0]]


def test_double_flag_feeds_online_values_into_the_target(monkeypatch):
    seen = []
    real = fam.q_learning_target

    def spy(rewards, dones, discounts, next_q_target, next_q_online=None):
        seen.append(next_q_online is not None)
        return real(rewards, dones, discounts, next_q_target, next_q_online)

    monkeypatch.setattr(fam, "q_learning_target", spy)
    for double in (False, True):
        agent = make_agent("DQNFamily", gym.make("CartPole-v1"), {"double": double, "learning_starts": 16, "batch_size": 8}, seed=0)
        agent.train(24)
    assert seen and seen[: seen.index(True)] == [False] * seen.index(True) and all(seen[seen.index(True):])


# --- Dueling -------------------------------------------------------------------------------------------


def test_dueling_combination_subtracts_mean_advantage():
    value = th.tensor([[2.0], [-1.0]])
    advantage = th.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    q = dueling_combine(value, advantage)
    assert q.tolist() == [[1.0, 2.0, 3.0], [-3.0, -3.0, 3.0]]
    # Identifiability: the mean over actions of Q is V, and A's offset does not matter.
    assert th.equal(q.mean(1, keepdim=True), value)
    assert th.equal(dueling_combine(value, advantage + 10.0), q)


def test_dueling_network_mlp_streams():
    agent = make_agent("DuelingDQN", gym.make("CartPole-v1"), {}, seed=0, policy_kwargs={"net_arch": [16, 8]})
    net = agent.model.q_net
    assert isinstance(net, DuelingQNetwork)
    assert net.value_stream[-1].out_features == 1 and net.advantage_stream[-1].out_features == 2
    obs = th.randn(5, 4)
    hidden = net.q_net(net.extract_features(obs, net.features_extractor))
    expected = dueling_combine(net.value_stream(hidden), net.advantage_stream(hidden))
    assert th.equal(net(obs), expected)
    assert isinstance(agent.model.q_net_target, DuelingQNetwork)


def test_dueling_cnn_variant_uses_nature_trunk():
    from stable_baselines3.common.torch_layers import NatureCNN

    obs_space = gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8)
    policy = FamilyCnnPolicy(obs_space, gym.spaces.Discrete(6), lambda _: 1e-4, dueling=True, stream_arch=[32])
    assert isinstance(policy.q_net, DuelingQNetwork)
    assert isinstance(policy.q_net.features_extractor, NatureCNN)
    assert [m.out_features for m in policy.q_net.value_stream if isinstance(m, th.nn.Linear)] == [32, 1]
    q = policy.q_net(th.zeros(2, 4, 84, 84))
    assert q.shape == (2, 6)


# --- Prioritized replay: sum tree, sampling, IS weights, β, priorities ------------------------------------


def test_sum_tree_sums_and_prefix_search():
    tree = SumTree(5)  # not a power of two: 8 leaves, 3 unused
    tree.update(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 0.0]))
    assert tree.total == 10.0
    # Prefix intervals: [0,1) -> 0, [1,3) -> 1, [3,6) -> 2, [6,10) -> 3; index 4 has zero mass.
    values = np.array([0.0, 0.999, 1.0, 2.5, 3.0, 5.999, 6.0, 9.999])
    assert tree.find(values).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    tree.update(np.array([1, 1]), np.array([5.0, 0.5]))  # repeated index: the later value wins
    assert tree.total == 8.5 and tree.get(np.array([1])).tolist() == [0.5]
    tree.update_one(4, 1.5)
    assert tree.total == 10.0 and tree.find(np.array([9.9])).tolist() == [4]
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.update(np.array([0]), np.array([-1.0]))


def test_sum_tree_sampling_frequencies_match_priorities():
    priorities = np.array([1.0, 2.0, 3.0, 4.0, 0.0, 10.0])
    tree = SumTree(6)
    tree.update(np.arange(6), priorities)
    rng = np.random.default_rng(0)
    n = 200_000
    counts = np.bincount(tree.find(rng.random(n) * tree.total), minlength=6)
    p = priorities / priorities.sum()
    # Each count is Binomial(n, p_i): stay within 4 standard errors (a false alarm has odds ~1e-4).
    stderr = np.sqrt(n * p * (1 - p))
    assert counts[4] == 0
    assert np.all(np.abs(counts - n * p) <= 4 * stderr + 1e-9), (counts, n * p)


def _filled_buffer(alpha: float, n: int = 8, **kwargs) -> PrioritizedReplayBuffer:
    obs_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    buf = (PrioritizedNStepReplayBuffer if "n_steps" in kwargs else PrioritizedReplayBuffer)(
        16, obs_space, gym.spaces.Discrete(2), device="cpu", alpha=alpha, **kwargs
    )
    for i in range(n):
        o = np.full((1, 2), i, dtype=np.float32)
        buf.add(o, o + 1, np.array([i % 2]), np.array([float(i)]), np.array([False]), [{}])
    return buf


def test_per_buffer_priorities_from_td_errors_and_max_priority_for_new():
    buf = _filled_buffer(alpha=0.5)
    assert buf.tree.get(np.arange(8)).tolist() == [1.0] * 8  # new transitions: max priority (1)^α
    buf.update_priorities(np.array([0, 3]), np.array([-3.0, 0.0]))
    leaves = buf.tree.get(np.array([0, 3]))
    assert leaves[0] == pytest.approx((3.0 + 1e-6) ** 0.5, rel=1e-12)
    assert leaves[1] == pytest.approx(1e-6**0.5, rel=1e-12)
    assert buf.max_priority == 3.0 + 1e-6
    o = np.zeros((1, 2), dtype=np.float32)
    buf.add(o, o, np.array([0]), np.array([0.0]), np.array([False]), [{}])
    assert buf.tree.get(np.array([8]))[0] == pytest.approx((3.0 + 1e-6) ** 0.5, rel=1e-12)


def test_per_buffer_sampling_follows_priorities_to_the_alpha():
    buf = _filled_buffer(alpha=0.5, n=4)
    buf.update_priorities(np.arange(4), np.array([1.0, 4.0, 9.0, 0.0]))
    np.random.seed(0)
    counts = np.zeros(16)
    n_batches, batch = 2_000, 32
    for _ in range(n_batches):
        idx = buf.sample_prioritized(batch, beta=0.4).indices
        counts += np.bincount(idx, minlength=16)
    p = np.sqrt(np.array([1.0, 4.0, 9.0, 0.0]) + 1e-6)
    p /= p.sum()
    n = n_batches * batch
    assert counts[4:].sum() == 0  # never past the stored transitions
    # Stratified sampling has *less* variance than multinomial, so the binomial bound is conservative.
    assert np.all(np.abs(counts[:4] - n * p) <= 4 * np.sqrt(n * p * (1 - p)) + 1)


def test_importance_weights_normalised_by_max():
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    w = importance_weights(probs, n_stored=4, beta=0.5)
    assert w.max() == 1.0
    np.testing.assert_allclose(w, np.sqrt(0.1 / probs), rtol=1e-15)
    assert importance_weights(probs, 4, beta=0.0).tolist() == [1.0] * 4
    np.testing.assert_allclose(importance_weights(probs, 4, beta=1.0), [1.0, 0.5, 1 / 3, 0.25], rtol=1e-15)


def test_sampled_weights_match_sampling_probabilities():
    buf = _filled_buffer(alpha=1.0, n=4)
    buf.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]) - 1e-6)
    np.random.seed(1)
    batch = buf.sample_prioritized(8, beta=1.0)
    probs = np.array([1.0, 2.0, 3.0, 4.0])[batch.indices] / 10.0
    np.testing.assert_allclose(batch.weights, probs.min() / probs, rtol=1e-9)


def test_beta_annealed_linearly_to_one():
    assert annealed_beta(0.4, 0.0) == 0.4
    assert annealed_beta(0.4, 0.5) == pytest.approx(0.7, abs=1e-15)
    assert annealed_beta(0.4, 1.0) == 1.0
    assert annealed_beta(0.4, 1.7) == 1.0 and annealed_beta(0.4, -1) == 0.4
    agent = make_agent("PrioritizedDQN", gym.make("CartPole-v1"), {"learning_starts": 16, "batch_size": 8}, seed=0)
    assert agent.model.current_beta() == 0.4
    agent.train(50)
    assert agent.model.current_beta() == 1.0


@pytest.mark.parametrize(
    ("hp", "message"),
    [
        ({"per_alpha": -0.1}, r"per_alpha must be a number >= 0"),
        ({"per_beta": -0.01}, r"per_beta must be a number in \[0, 1\], got -0.01"),
        ({"per_beta": 1.5}, r"per_beta must be a number in \[0, 1\], got 1.5"),
        ({"per_eps": 0.0}, r"per_eps must be a number > 0"),
        ({"n_steps": 0}, r"n_steps must be an integer >= 1"),
    ],
)
def test_invalid_per_parameters_rejected(hp, message):
    with pytest.raises(InputError, match=r"p.toml: algorithms\[0\]: PrioritizedDQN: " + message):
        get_spec("PrioritizedDQN").check_hyperparams(hp, "p.toml: algorithms[0]")
    with pytest.raises(ValueError, match=message):
        DQNFamily("MlpPolicy", gym.make("CartPole-v1"), prioritized=True, **hp)
    if "per_alpha" in hp:
        with pytest.raises(ValueError, match=message):
            _filled_buffer(alpha=hp["per_alpha"])


def test_per_rejects_several_envs_and_own_buffer():
    with pytest.raises(ValueError, match="single environment, got n_envs=2"):
        PrioritizedReplayBuffer(8, gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), n_envs=2)
    from stable_baselines3.common.buffers import ReplayBuffer

    with pytest.raises(ValueError, match="prioritized=True brings its own replay buffer"):
        DQNFamily("MlpPolicy", gym.make("CartPole-v1"), prioritized=True, replay_buffer_class=ReplayBuffer)


def test_per_with_nstep_samples_carry_discounts():
    buf = _filled_buffer(alpha=0.6, n=8, n_steps=3, gamma=0.5)
    np.random.seed(0)
    batch = buf.sample_prioritized(4, beta=0.4)
    assert batch.samples.discounts is not None
    # Away from the buffer's end every transition has 3 steps: γ^3; rewards are i, i+1, i+2 discounted.
    for j, i in enumerate(batch.indices):
        if i <= 4:
            assert batch.samples.discounts[j].item() == 0.125
            assert batch.samples.rewards[j].item() == pytest.approx(i + 0.5 * (i + 1) + 0.25 * (i + 2))


# --- composition and equivalence with SB3 ---------------------------------------------------------------


def test_all_components_off_is_sb3_dqn_bit_for_bit():
    from stable_baselines3 import DQN

    hp = {"learning_starts": 32, "batch_size": 16, "train_freq": 1, "target_update_interval": 50}
    results = []
    for name in ("DQN", "DQNFamily"):
        agent = make_agent(name, gym.make("CartPole-v1"), hp, seed=7, policy_kwargs={"net_arch": [16]})
        agent.train(200)
        results.append([p.detach().clone() for p in agent.model.policy.parameters()])
    assert type(agent.model) is DQNFamily and isinstance(agent.model, DQN)
    assert all(th.equal(a, b) for a, b in zip(*results))


def test_components_compose_through_hyperparameters():
    agent = make_agent(
        "DQNFamily",
        gym.make("CartPole-v1"),
        {"double": True, "dueling": True, "prioritized": True, "n_steps": 3, "learning_starts": 16, "batch_size": 8},
        seed=0,
    )
    model = agent.model
    assert model.double and isinstance(model.q_net, DuelingQNetwork)
    assert isinstance(model.replay_buffer, PrioritizedNStepReplayBuffer) and model.replay_buffer.n_steps == 3
    agent.train(60)
    params = agent.get_params()
    assert params["double"] and params["dueling"] and params["prioritized"] and params["n_steps"] == 3


def test_qrdqn_quantiles_are_a_hyperparameter():
    agent = make_agent("QRDQN", gym.make("CartPole-v1"), {"n_quantiles": 7}, seed=0)
    assert agent.model.policy.n_quantiles == 7
    assert get_spec("QRDQN").hyperparameters()["n_quantiles"] == 200  # the original setting by default
    with pytest.raises(InputError, match="n_quantiles must be an integer >= 1"):
        get_spec("QRDQN").check_hyperparams({"n_quantiles": 0}, "p.toml")


# --- C51: projection and loss --------------------------------------------------------------------------------

SUPPORT3 = th.tensor([-1.0, 0.0, 1.0])  # Δz = 1


def test_categorical_projection_hand_computed():
    probs = th.tensor([[0.25, 0.25, 0.5], [0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])
    rewards = th.tensor([[0.5], [-2.0], [0.25]])
    dones = th.tensor([[0.0], [1.0], [0.0]])
    discounts = th.tensor([[0.5], [0.5], [1.0]])
    m = comp.categorical_projection(probs, rewards, dones, discounts, SUPPORT3)
    # Row 0: Tz = 0.5 + 0.5 z = [0, 0.5, 1]: 0.25 -> z=0; 0.25 split 1/2-1/2 between z=0 and z=1; 0.5 -> z=1.
    # Row 1: terminal, Tz = -2 for every atom, clipped to v_min: all mass on z=-1.
    # Row 2: Tz_0 = 0.25 - 1 = -0.75: 3/4 to z=-1, 1/4 to z=0.
    assert m.tolist() == [[0.0, 0.375, 0.625], [1.0, 0.0, 0.0], [0.75, 0.25, 0.0]]


def _projection_reference(probs, rewards, dones, gamma, support):
    """Bellemare et al.'s Algorithm 1 with floor/ceil, one atom at a time (the textbook form)."""
    v_min, v_max, n = float(support[0]), float(support[-1]), len(support)
    dz = (v_max - v_min) / (n - 1)
    out = np.zeros_like(probs)
    for b in range(probs.shape[0]):
        for j in range(n):
            tz = min(max(rewards[b] + (1 - dones[b]) * gamma * support[j], v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = int(np.floor(pos)), int(np.ceil(pos))
            if lo == hi:
                out[b, lo] += probs[b, j]
            else:
                out[b, lo] += probs[b, j] * (hi - pos)
                out[b, hi] += probs[b, j] * (pos - lo)
    return out


def test_categorical_projection_matches_textbook_algorithm():
    rng = np.random.default_rng(0)
    support = np.linspace(-10, 10, 51)
    probs = rng.dirichlet(np.ones(51), size=16)
    rewards, dones = rng.normal(0, 3, 16), (rng.random(16) < 0.3).astype(float)
    expected = _projection_reference(probs, rewards, dones, 0.99, support)
    got = comp.categorical_projection(th.tensor(probs), th.tensor(rewards).reshape(-1, 1), th.tensor(dones).reshape(-1, 1),
                                     0.99, th.tensor(support))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(got.sum(1).numpy(), 1.0, atol=1e-12)


def test_categorical_loss_is_cross_entropy():
    target = th.tensor([[0.0, 0.375, 0.625]])
    assert comp.categorical_loss(th.zeros(1, 3), target).item() == pytest.approx(np.log(3), abs=1e-6)
    logits = th.log(th.tensor([[0.5, 0.25, 0.25]]))
    assert comp.categorical_loss(logits, target).item() == pytest.approx(-(0.375 + 0.625) * np.log(0.25), abs=1e-6)


# --- quantile Huber loss, cosine features --------------------------------------------------------------------


def test_quantile_huber_loss_hand_computed():
    quantiles, taus, targets = th.tensor([[0.0, 2.0]]), th.tensor([0.25, 0.75]), th.tensor([[1.0, 0.5]])
    # θ=0, τ=1/4: δ = [1, 0.5] >= 0, Huber [0.5, 0.125], weight 1/4 -> mean 0.078125.
    # θ=2, τ=3/4: δ = [-1, -1.5] < 0, Huber [0.5, 1.0] (linear past κ=1), weight 1/4 -> mean 0.1875.
    assert comp.quantile_huber_loss(quantiles, taus, targets).tolist() == [0.265625]
    # κ = 2: every δ is in the quadratic zone, and the loss is divided by κ.
    assert comp.quantile_huber_loss(quantiles, taus, targets, kappa=2.0).tolist() == [0.140625]
    # Per-sample levels (IQN) give the same numbers as shared ones (QR-DQN).
    per_sample = comp.quantile_huber_loss(quantiles.repeat(2, 1), taus.repeat(2, 1), targets.repeat(2, 1))
    assert per_sample.tolist() == [0.265625, 0.265625]


def test_quantile_huber_loss_is_minimised_at_the_quantile():
    # With a small κ the loss is the pinball loss: its minimiser over θ is the τ-quantile of the targets.
    targets = th.arange(1.0, 11.0).reshape(1, -1)  # 1..10
    grid = th.linspace(0, 11, 1101)
    losses = th.stack([comp.quantile_huber_loss(th.tensor([[g]]), th.tensor([0.3]), targets, kappa=1e-3) for g in grid])
    best = grid[losses.reshape(-1).argmin()].item()
    assert 3.0 <= best <= 4.0  # any point between the 3rd and 4th order statistics is a 0.3-quantile


def test_cosine_features():
    feats = comp.cosine_features(th.tensor([[0.0, 0.5]]), 3)
    np.testing.assert_allclose(feats.numpy(), [[[1.0, 1.0, 1.0], [1.0, 0.0, -1.0]]], atol=1e-7)


# --- noisy layer -----------------------------------------------------------------------------------------------


def test_factorised_noise_transform():
    assert comp.factorised_noise(th.tensor([-4.0, 0.0, 9.0])).tolist() == [-2.0, 0.0, 3.0]


def test_noisy_linear_init_shapes_and_output():
    th.manual_seed(0)
    layer = comp.NoisyLinear(4, 3, sigma0=0.5)
    assert layer.weight_mu.shape == (3, 4) and layer.bias_mu.shape == (3,)
    assert th.all(layer.weight_mu.abs() <= 0.5) and th.all(layer.bias_mu.abs() <= 0.5)  # U(-1/√4, 1/√4)
    assert th.all(layer.weight_sigma == 0.25) and th.all(layer.bias_sigma == 0.25)  # σ0/√p
    x = th.randn(5, 4)
    mean_out = x @ layer.weight_mu.T + layer.bias_mu
    layer.reset_noise()
    assert th.allclose(layer(x), mean_out)  # noise off: the mean weights
    layer.noise_enabled = True
    eps_w = th.outer(layer.eps_out, layer.eps_in)
    expected = x @ (layer.weight_mu + 0.25 * eps_w).T + layer.bias_mu + 0.25 * layer.eps_out
    assert th.allclose(layer(x), expected, atol=1e-6)
    before = layer(x)
    layer.reset_noise()
    assert not th.allclose(layer(x), before)


def test_noisy_linear_noise_statistics():
    th.manual_seed(1)
    layer = comp.NoisyLinear(50, 40)
    eps_in, eps_w = [], []
    for _ in range(2_000):
        layer.reset_noise()
        eps_in.append(layer.eps_in.clone())
        eps_w.append(th.outer(layer.eps_out, layer.eps_in))
    eps_in, eps_w = th.stack(eps_in), th.stack(eps_w)
    # f(x) = sgn(x)√|x| with x ~ N(0, 1): mean 0, E f² = E|x| = √(2/π); ε_w = f(a) f(b) has variance 2/π.
    assert abs(eps_in.mean().item()) < 0.01
    assert eps_in.pow(2).mean().item() == pytest.approx(np.sqrt(2 / np.pi), abs=0.01)
    assert eps_w.var().item() == pytest.approx(2 / np.pi, abs=0.01)
    assert eps_w.shape == (2_000, 40, 50)


def test_noise_is_redrawn_per_action_and_per_update_and_off_in_evaluation(monkeypatch):
    calls = []
    real = comp.ComponentQNetwork.reset_noise

    def spy(self):
        calls.append(self)
        real(self)

    monkeypatch.setattr(comp.ComponentQNetwork, "reset_noise", spy)
    hp = {"learning_starts": 20, "batch_size": 8, "train_freq": 1, "gradient_steps": 1, "buffer_size": 500}
    agent = make_agent("NoisyDQN", gym.make("CartPole-v1"), hp, seed=0, policy_kwargs={"net_arch": [16]})
    model = agent.model
    assert model.exploration_rate == 0.0 and model.exploration_initial_eps == 0.0
    agent.train(60)
    online = sum(c is model.q_net for c in calls)
    target = sum(c is model.q_net_target for c in calls)
    assert target == model._n_updates > 0
    assert online == 60 + model._n_updates  # one draw per action taken, one per gradient step
    assert all(not layer.noise_enabled for layer in model.q_net.noisy_layers)
    obs = gym.make("CartPole-v1").reset(seed=0)[0]
    actions = {int(agent.predict(obs, deterministic=True)) for _ in range(5)}
    assert len(actions) == 1  # evaluation uses the mean weights: no randomness


# --- the composed Q-network --------------------------------------------------------------------------------------


def _component_net(**kwargs) -> comp.ComponentQNetwork:
    from stable_baselines3.common.torch_layers import FlattenExtractor

    obs_space = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
    return comp.ComponentQNetwork(obs_space, gym.spaces.Discrete(3), FlattenExtractor(obs_space), 4,
                                 net_arch=[8, 8], **kwargs)


def test_c51_network_acts_greedily_on_the_mean():
    th.manual_seed(0)
    net = _component_net(distributional="c51", n_atoms=5, v_min=-2.0, v_max=2.0)
    obs = th.randn(6, 4)
    logits = net.distribution(obs)
    assert logits.shape == (6, 3, 5)
    mean = (th.softmax(logits, 2) * th.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])).sum(2)
    assert th.allclose(net(obs), mean)
    assert th.equal(net._predict(obs), mean.argmax(1))


def test_dueling_noisy_c51_network_combines_per_atom():
    th.manual_seed(0)
    net = _component_net(distributional="c51", n_atoms=5, dueling=True, noisy=True)
    assert len(net.noisy_layers) == 4  # two hidden layers, value and advantage outputs
    obs = th.randn(2, 4)
    hidden = net.q_net(obs)
    value, advantage = net.value_stream(hidden).reshape(2, 1, 5), net.advantage_stream(hidden).reshape(2, 3, 5)
    assert th.allclose(net.distribution(obs), dueling_combine(value, advantage))
    net.reset_noise()  # one draw for the whole network, split over the layers
    eps = [th.cat([layer.eps_in, layer.eps_out]) for layer in net.noisy_layers]
    assert all(th.all(e != 0) for e in eps) and not th.equal(eps[0][:8], eps[1][:8])


def test_iqn_network_shapes_and_deterministic_evaluation():
    th.manual_seed(0)
    net = _component_net(distributional="iqn", n_cos=16, n_tau_act=4)
    obs = th.randn(2, 4)
    taus = th.tensor([[0.1, 0.5, 0.9], [0.5, 0.5, 0.5]])
    out = net.distribution(obs, taus)
    assert out.shape == (2, 3, 3)
    assert th.equal(out[1, :, 0], out[1, :, 1])  # the same level gives the same quantile value
    # Evaluation: the mean over K evenly spaced levels, no random draws.
    expected = net.distribution(obs, th.tensor([[0.125, 0.375, 0.625, 0.875]] * 2)).mean(2)
    state = th.random.get_rng_state()
    assert th.allclose(net(obs), expected)
    assert th.equal(th.random.get_rng_state(), state)


def test_c51_and_qr_losses_wired_to_the_networks():
    hp = {"learning_starts": 16, "batch_size": 8, "buffer_size": 200, "gamma": 0.9}
    for distributional in ("c51", "qr"):
        agent = make_agent("DQNFamily", gym.make("CartPole-v1"),
                           {**hp, "distributional": distributional, "n_atoms": 11, "n_quantiles": 4},
                           seed=0, policy_kwargs={"net_arch": [8]})
        model = agent.model
        agent.train(40)
        batch = model.replay_buffer.sample(8)
        rows, actions = th.arange(8), batch.actions.long().reshape(-1)
        with th.no_grad():
            next_out = model.q_net_target.distribution(batch.next_observations)
            best = model.q_net_target.q_values(next_out).argmax(1)
            if distributional == "c51":
                target = comp.categorical_projection(th.softmax(next_out[rows, best], 1), batch.rewards, batch.dones,
                                                    0.9, model.q_net.support)
                expected = comp.categorical_loss(model.q_net.distribution(batch.observations)[rows, actions], target)
            else:
                target = batch.rewards + 0.9 * (1 - batch.dones) * next_out[rows, best]
                expected = comp.quantile_huber_loss(model.q_net.distribution(batch.observations)[rows, actions],
                                                   th.tensor([0.125, 0.375, 0.625, 0.875]), target)
            got = model._distributional_loss(batch, 0.9)
        assert th.allclose(got, expected), distributional


def test_rainbow_and_dopamine_rainbow_compose():
    hp = {"learning_starts": 16, "batch_size": 8, "buffer_size": 500}
    rainbow = make_agent("Rainbow", gym.make("CartPole-v1"), hp, seed=0, policy_kwargs={"net_arch": [16]}).model
    net = rainbow.q_net
    assert isinstance(net, comp.ComponentQNetwork) and net.distributional == "c51" and net.n_atoms == 51
    assert net.dueling and net.noisy and net.noisy_layers and rainbow.double
    assert isinstance(rainbow.replay_buffer, PrioritizedNStepReplayBuffer) and rainbow.replay_buffer.n_steps == 3
    assert rainbow.replay_buffer.alpha == 0.5 and rainbow.exploration_final_eps == 0.0
    dopamine = make_agent("DopamineRainbow", gym.make("CartPole-v1"), hp, seed=0, policy_kwargs={"net_arch": [16]}).model
    net = dopamine.q_net
    assert net.distributional == "c51" and not net.dueling and not net.noisy_layers and not dopamine.double
    assert isinstance(dopamine.replay_buffer, PrioritizedNStepReplayBuffer) and dopamine.replay_buffer.n_steps == 3
    assert dopamine.exploration_final_eps > 0
    for name in ("Rainbow", "DopamineRainbow"):
        make_agent(name, gym.make("CartPole-v1"), hp, seed=0, policy_kwargs={"net_arch": [16]}).train(60)


def test_priorities_come_from_the_distributional_loss(monkeypatch):
    seen = []
    real = PrioritizedReplayBuffer.update_priorities

    def spy(self, indices, td_errors):
        seen.append(np.asarray(td_errors).copy())
        real(self, indices, td_errors)

    monkeypatch.setattr(PrioritizedReplayBuffer, "update_priorities", spy)
    agent = make_agent("DopamineRainbow", gym.make("CartPole-v1"), {"learning_starts": 16, "batch_size": 8}, seed=0)
    agent.train(30)
    assert seen and all(np.all(s >= 0) for s in seen)  # cross-entropies, not signed TD errors


@pytest.mark.parametrize(
    ("hp", "message"),
    [
        ({"distributional": "c52"}, r"distributional must be one of 'none', 'c51', 'qr', 'iqn', got 'c52' \(did you mean 'c51'\?\)"),
        ({"n_atoms": 1}, r"n_atoms must be an integer >= 2, got 1"),
        ({"v_min": 1.0, "v_max": 1.0}, r"v_min < v_max must be finite numbers"),
        ({"n_tau": 0}, r"n_tau must be an integer >= 1"),
        ({"kappa": 0.0}, r"kappa must be a number > 0"),
        ({"noisy_sigma0": -1.0}, r"noisy_sigma0 must be a number > 0"),
    ],
)
def test_invalid_component_parameters_rejected(hp, message):
    with pytest.raises(InputError, match=r"p.toml: C51: " + message):
        get_spec("C51").check_hyperparams(hp, "p.toml")


# --- learning ---------------------------------------------------------------------------------------------

# CartPole, RL-Zoo's DQN settings with a smaller network and buffer. A uniformly random policy scores
# about 22; the threshold asks for several times that, averaged over seeds (returns capped at 200 steps).
LEARN_HP = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=20_000, learning_starts=500, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04,
)
VARIANTS = [
    ("DQN", {}),
    ("DoubleDQN", {}),
    ("DuelingDQN", {}),
    ("PrioritizedDQN", {}),
    ("QRDQN", {"n_quantiles": 25}),
    ("DQNFamily", {"double": True, "dueling": True, "prioritized": True, "n_steps": 3}),
    ("C51", {"v_min": 0.0, "v_max": 100.0}),
    ("IQN", {}),
    ("NoisyDQN", {"exploration_final_eps": 0.0}),  # LEARN_HP's ε would override the registered 0
    ("Rainbow", {"v_min": 0.0, "v_max": 100.0, "exploration_final_eps": 0.0}),
    ("DopamineRainbow", {"v_min": 0.0, "v_max": 100.0}),
]
RANDOM_RETURN = 22.0
LEARN_BUDGET = 3_000
# Noisy nets explore by their weight noise alone (ε = 0), which takes longer to settle at σ0 = 0.5 on
# CartPole: measured NoisyDQN 33.0 at 3k steps (σ0 = 0.1: 83.5).
LEARN_BUDGETS = {"NoisyDQN": 6_000}
LEARN_SEEDS = [0, 1]
# Mean over 2 seeds x 3 evaluation episodes (capped at 200 steps); random play scores ~22. Measured
# (2026-11-30): DQN 134.5, Double 187.7, Dueling 145.5, PER 144.2, QR-DQN-25 150.0, Double+Dueling+PER+3-step 159.8;
# (2026-12-01): C51 145.0, IQN 157.8, NoisyDQN 111.0 (6k steps), Rainbow 118.3, DopamineRainbow 172.7.
LEARN_THRESHOLD = 60.0


def _mean_return(name: str, extra: dict, budget: int, seeds: list[int]) -> float:
    returns = []
    for seed in seeds:
        agent = make_agent(name, gym.make("CartPole-v1"), {**LEARN_HP, **extra}, seed=seed, policy_kwargs={"net_arch": [64, 64]})
        agent.train(budget)
        returns.extend(evaluate(agent, gym.make("CartPole-v1"), n_episodes=3, seed=1_000 + seed))
    return float(np.mean(returns))


@pytest.mark.parametrize(("name", "extra"), VARIANTS, ids=[v[0] if v[0] != "DQNFamily" else "Double+Dueling+PER+3step" for v in VARIANTS])
def test_variant_learns_cartpole(name, extra):
    assert RANDOM_RETURN * 2.5 < LEARN_THRESHOLD
    assert _mean_return(name, extra, budget=LEARN_BUDGETS.get(name, LEARN_BUDGET), seeds=LEARN_SEEDS) >= LEARN_THRESHOLD


@pytest.mark.slow
@pytest.mark.parametrize(("name", "extra"), VARIANTS, ids=[v[0] if v[0] != "DQNFamily" else "Double+Dueling+PER+3step" for v in VARIANTS])
def test_variant_learns_cartpole_full(name, extra):
    # 5 seeds x 3 episodes at 10k steps. Measured (2026-11-30): DQN 98.5, every other variant >= 100;
    # CartPole DQN is not monotone in the budget (DQN scored 134.5 at 3k on 2 seeds), hence the margin.
    assert _mean_return(name, extra, budget=10_000, seeds=[0, 1, 2, 3, 4]) >= 75.0


# --- the MinAtar protocol ------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
MINATAR_PROTOCOL = REPO / "protocols" / "dqn-family-minatar-250k.toml"


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"


def _smoke_protocol(path: Path) -> Path:
    """The MinAtar protocol shrunk to one game, one seed and a few hundred steps; algorithms unchanged."""
    doc = tomllib.loads(MINATAR_PROTOCOL.read_text())
    lines = ["schema_version = 1", 'name = "dqn-family-minatar-smoke"', "seeds = 1", "[budget]", 'unit = "env_steps"',
             "[regimes]", "low = 150", "high = 300",
             "[[tasks]]", 'id = "MinAtar/Breakout-v1"', 'suite = "minatar"']
    for algo in doc["algorithms"]:
        hp = {**algo["hyperparams"], "buffer_size": 1_000, "learning_starts": 100, "target_update_interval": 50}
        lines += ["[[algorithms]]", f"name = {_toml_value(algo['name'])}", f"label = {_toml_value(algo.get('label', algo['name']))}",
                  f"hyperparams = {_toml_value(hp)}", f"policy_kwargs = {_toml_value(algo['policy_kwargs'])}"]
    lines += ["[evaluation]", "n_eval_episodes = 1", "deterministic = true", "max_episode_steps = 100"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_minatar_protocol_validates():
    from click.testing import CliRunner

    from rlaudit.cli import main

    result = CliRunner().invoke(main, ["validate", str(MINATAR_PROTOCOL)])
    assert result.exit_code == 0, result.output
    assert "plan: 125 runs (125 nested, 0 separate), 31,250,000 env steps in total" in result.output
    doc = tomllib.loads(MINATAR_PROTOCOL.read_text())
    assert [a["name"] for a in doc["algorithms"]] == ["DQN", "C51", "QRDQN", "IQN", "DopamineRainbow"]
    assert len(doc["tasks"]) == 5 and doc["seeds"] >= 5
    assert doc["regimes"] == {"low": 100_000, "high": 250_000}
    # Each comparison changes only components: the shared hyperparameters are identical across entries.
    own = {"n_quantiles", "n_atoms", "v_min", "v_max", "n_tau", "n_tau_target", "n_tau_act", "iqn_post_layers",
           "n_steps", "per_alpha", "per_beta"}
    shared = [{k: v for k, v in a["hyperparams"].items() if k not in own} for a in doc["algorithms"]]
    assert all(s == shared[0] for s in shared)
    # Every claim names algorithms of the protocol by label.
    labels = {a.get("label", a["name"]) for a in doc["algorithms"]}
    assert all(c["better"] in labels and c["worse"] in labels for c in doc["claims"])


def test_minatar_protocol_smoke_run(tmp_path):
    from click.testing import CliRunner

    from rlaudit.cli import main

    protocol = _smoke_protocol(tmp_path / "smoke.toml")
    store = tmp_path / "store.sqlite"
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "scores.csv"
    result = CliRunner().invoke(main, ["export", str(store), "-o", str(out)])
    assert result.exit_code == 0, result.output
    import pandas as pd

    scores = pd.read_csv(out, comment="#")
    assert set(scores["algorithm"]) == {"DQN", "C51", "QR-DQN", "IQN", "Rainbow (Dopamine)"}
    assert set(scores["budget"]) >= {150, 300}


def test_iqn_cosine_features_start_at_0_or_dopamines_1():
    """``cos(pi i tau)`` for ``i = 0 .. n - 1`` (the paper's; the first feature is 1) or ``1 .. n`` (Dopamine's),
    the same in the SB3 built-in and the JAX backend; any other start is refused."""
    from rlaudit.algorithms.dqn_components import cosine_features

    taus = th.tensor([[0.25, 0.5]])
    paper, dopamine = cosine_features(taus, 3), cosine_features(taus, 3, start=1)
    assert th.allclose(paper[0, 0], th.tensor([1.0, math.cos(math.pi / 4), math.cos(math.pi / 2)]), atol=1e-6)
    assert th.allclose(dopamine[0, 1], th.tensor([math.cos(math.pi / 2), math.cos(math.pi), math.cos(1.5 * math.pi)]),
                       atol=1e-6)
    net = _component_net(distributional="iqn", n_cos=3, n_tau_act=2, cos_start=1)
    assert net._get_constructor_parameters()["cos_start"] == 1
    with pytest.raises(ValueError, match="cos_start must be 0 .* or 1"):
        DQNFamily.validate_hyperparams({"distributional": "iqn", "cos_start": 2})
    jax_networks = pytest.importorskip("rlaudit.run.backends.jax.networks")
    np.testing.assert_allclose(np.asarray(jax_networks.cosine_features(taus.numpy(), 3, 1)), dopamine.numpy(), atol=1e-6)
