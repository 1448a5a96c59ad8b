"""The JAX backend: pgx's MinAtar against the ``minatar`` package, the JAX CartPole against gymnasium's, the
agents' maths, training end to end through the driver and the store, determinism, failures, and validation.
Skipped with a reason when the ``jax`` extra is not installed (``make test`` installs it). Kept to tiny networks
and a few hundred steps: compile time dominates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlaudit.errors import InputError
from rlaudit.run.backends.jax import configure_jax, missing_dependency

pytestmark = pytest.mark.skipif(missing_dependency() is not None, reason=str(missing_dependency()))

if missing_dependency() is None:
    configure_jax()
    import jax
    import jax.numpy as jnp


PROTOCOL = """
schema_version = 1
name = "jax-tiny"
seeds = {seeds}
backend = "jax"

[regimes]
low = {low}
high = {high}

[[tasks]]
id = "MinAtar/Breakout-v1"
suite = "minatar"
kwargs = {{ use_minimal_action_set = false }}

[[algorithms]]
name = "{algo}"
hyperparams = {{ learning_starts = 100, buffer_size = 1000, batch_size = 8, target_update_interval = 100, exploration_fraction = 0.5{extra} }}
policy_kwargs = {{ net_arch = [16] }}

[evaluation]
n_eval_episodes = 2
epsilon = 0.05
max_episode_steps = 200
"""


def _protocol(tmp_path, algo="DQN", extra="", seeds=2, low=300, high=600, name="p.toml"):
    path = tmp_path / name
    path.write_text(PROTOCOL.format(algo=algo, extra=extra, seeds=seeds, low=low, high=high))
    return path


def _plan(path):
    from rlaudit.protocol import check_runnable, load_protocol, plan

    protocol = load_protocol(path)
    check_runnable(protocol)
    return plan(protocol)


def _train(specs):
    from rlaudit.run.backends import execute_batch

    records = []
    outcomes = execute_batch(specs, records.append)
    return records, outcomes


# ------------------------------------------------------------------------------------------ environment
@pytest.mark.parametrize("game", ["breakout", "space_invaders"])
def test_pgx_minatar_matches_the_minatar_package_step_for_step(game):
    """Sticky actions off, all 6 actions, random actions over several episodes: same observations, rewards and
    terminations. Breakout's only randomness is the ball's start (2 ways): pgx's is matched to minatar's by key."""
    from minatar import Environment

    from rlaudit.run.backends.jax.minatar import pgx_game

    env = pgx_game(game)
    step, init = jax.jit(env.step), jax.jit(env.init)
    ref = Environment(game, sticky_action_prob=0.0)
    ref.seed(3)
    rng = np.random.default_rng(0)
    key = jax.random.PRNGKey(0)
    steps, episodes = 0, 0
    while steps < 300:
        _episode, episodes = episodes, episodes + 1
        ref.reset()
        for k in range(16):  # a pgx start equal to minatar's
            state = init(jax.random.fold_in(key, 1000 * _episode + k))
            if np.array_equal(np.asarray(state.observation), ref.state()):
                break
        else:
            pytest.fail("no pgx start matches minatar's")
        done = False
        while not done:
            action = int(rng.integers(6))
            reward, done = ref.act(action)
            state = step(state, action, jax.random.fold_in(key, steps))
            steps += 1
            assert np.array_equal(np.asarray(state.observation), ref.state()), f"observation differs at step {steps}"
            assert float(state.rewards[0]) == reward and bool(state.terminated) == done, f"step {steps}"
    assert episodes >= 2


def _invaders_player_np(obs: np.ndarray) -> int:
    """A scripted SpaceInvaders player on the full action set: step out of an enemy bullet's column, else walk
    to the nearest alien column and fire (returns ~14 a game, so the episode lengths vary)."""
    cannon = int(np.argmax(obs[9, :, 0]))
    if obs[4:9, cannon, 5].any():
        return 1 if cannon > 0 and not obs[4:9, cannon - 1, 5].any() else 3
    cols = np.nonzero(obs[:, :, 1].any(axis=0))[0]
    if cols.size == 0:
        return 5
    target = cols[np.argmin(np.abs(cols - cannon))]
    return 3 if cannon < target else 1 if cannon > target else 5


def _invaders_player_jax(obs):
    """:func:`_invaders_player_np` in JAX."""
    cannon = jnp.argmax(obs[9, :, 0])
    has = obs[:, :, 1].any(axis=0)
    target = jnp.argmin(jnp.where(has, jnp.abs(jnp.arange(10) - cannon), 99))
    walk = jnp.where(has.any(), jnp.where(cannon < target, 3, jnp.where(cannon > target, 1, 5)), 5)
    left_ok = (cannon > 0) & ~obs[4:9, jnp.maximum(cannon - 1, 0), 5].any()
    return jnp.where(obs[4:9, cannon, 5].any(), jnp.where(left_ok, 1, 3), walk)


@pytest.mark.slow
def test_sticky_spaceinvaders_has_the_minatar_packages_distribution_of_returns():
    """With sticky actions on (0.1), the two environments draw their own coins, so they agree only in
    distribution. A scripted player's returns and episode lengths on pgx's SpaceInvaders with rlaudit's sticky
    actions are compared with the ``minatar`` package's. Measured 2026-12-03 (seeded, so the same numbers each
    run): 3,000 package episodes, return 14.54 ± 4.83, length 127.7; 1,930 pgx episodes, 14.64 ± 4.82, 129.9;
    Welch p 0.47 for the returns and 0.26 for the lengths, KS p 0.93. ~40 CPU-s, so slow-marked. The default suite
    covers the path step for step with sticky actions off, and the sticky rule on its own."""
    from scipy import stats

    from rlaudit.run.backends.jax.config import agent_config
    from rlaudit.run.backends.jax.minatar import MinAtarEnv
    from rlaudit.run.envs import make_env
    from rlaudit.run.spec import AlgoSpec, RunSpec, TaskSpec

    task = TaskSpec("MinAtar/SpaceInvaders-v1", "minatar", (("use_minimal_action_set", False),), None)
    ref = make_env(task, seed=0)  # the SB3 path's training environment
    ref_returns, ref_lengths, obs = [], [], ref.reset(seed=0)[0]
    ret, length = 0.0, 0
    while len(ref_returns) < 3000:
        obs, reward, terminated, truncated, _ = ref.step(_invaders_player_np(obs))
        ret, length = ret + reward, length + 1
        if terminated or truncated:
            ref_returns.append(ret)
            ref_lengths.append(length)
            (obs, _), ret, length = ref.reset(), 0.0, 0
    cfg = agent_config(RunSpec("r", "h", task, AlgoSpec("DQN", "x", (), (("net_arch", [8]),), "jax"), 0, (100,)))
    assert cfg.sticky_action_prob == 0.1
    env = MinAtarEnv(cfg)

    def play(carry, key):
        state, obs, ret, length = carry
        state, obs, tr = env.step(state, _invaders_player_jax(obs), key)
        ret, length = ret + tr.reward, length + 1
        return (state, obs, jnp.where(tr.done, 0.0, ret), jnp.where(tr.done, 0, length)), (tr.done, ret, length)

    def stream(key):
        k0, k1 = jax.random.split(key)
        state, obs = env.reset(k0)
        return jax.lax.scan(play, (state, obs, 0.0, 0), jax.random.split(k1, 4000))[1]

    done, returns, lengths = map(np.asarray, jax.jit(jax.vmap(stream))(jax.random.split(jax.random.PRNGKey(1), 64)))
    returns, lengths = returns[done], lengths[done]
    assert returns.size > 1500
    assert stats.ttest_ind(ref_returns, returns, equal_var=False).pvalue > 0.01
    assert stats.ttest_ind(ref_lengths, lengths, equal_var=False).pvalue > 0.01
    assert stats.ks_2samp(ref_returns, returns).pvalue > 0.01


def test_sticky_actions_are_remembered_across_episodes_as_minatar_does():
    """With sticky probability 1 every step repeats the remembered action; the wrapper keeps it across a reset
    (pgx's own sticky action restarts at 0, the minatar package's does not)."""
    from rlaudit.run.backends.jax.config import AgentConfig
    from rlaudit.run.backends.jax.minatar import MinAtarEnv

    cfg = _config(sticky_action_prob=1.0, max_episode_steps=3)
    env = MinAtarEnv(cfg)
    state, _ = env.reset(jax.random.PRNGKey(0))
    state = state._replace(last_action=jnp.int32(3))
    step = jax.jit(env.step)
    for i in range(5):  # crosses the cap of 3 (an episode end)
        state, _, tr = step(state, jnp.int32(1), jax.random.PRNGKey(i))
        assert int(state.last_action) == 3
        assert bool(tr.done) == (i == 2) and bool(tr.timeout) == (i == 2)
    assert isinstance(cfg, AgentConfig)
    env0 = MinAtarEnv(_config(sticky_action_prob=0.0, max_episode_steps=3))
    state, _ = env0.reset(jax.random.PRNGKey(0))
    step0 = jax.jit(env0.step)
    for i, action in enumerate([5, 2, 4, 1]):  # the full set: index = action id; the third step ends the episode
        state, _, tr = step0(state, jnp.int32(action), jax.random.PRNGKey(i))
        assert int(state.last_action) == action and int(state.episode_steps) == (i + 1) % 3


def _balancing_action(obs, rng) -> int:
    """A cart-pole controller that keeps the pole up for 500 steps (one action in ten uniform)."""
    if rng.random() < 0.1:
        return int(rng.integers(2))
    return int(obs[2] + 0.5 * obs[3] + 0.05 * obs[0] + 0.1 * obs[1] > 0)


def test_jax_cartpole_matches_gymnasium_step_for_step():
    """gymnasium's CartPole-v1 (its TimeLimit included) against the JAX one over 8 episodes, the same actions:

    - uniform random actions, gymnasium started from the JAX episode's first state and left to run: rewards,
      terminations and observations agree along whole episodes (within 1e-3: float32 rounding, gymnasium steps
      float64, amplified by the unstable dynamics; measured ~3e-4 at worst on theta_dot over 20,000 steps);
    - a balancing controller up to the 500-step limit (episodes 4 and 8), gymnasium set to the JAX state before
      every step (open loop the two would part: a 1e-7 difference grows ~e^4 a second): truncations at 500.

    Every step, gymnasium stepped from the JAX state gives its observation to float32 rounding (~1 ulp)."""
    import gymnasium

    from rlaudit.run.backends.jax.envs import make_env

    env = make_env(_cartpole_config())
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    ref, probe = gymnasium.make("CartPole-v1"), gymnasium.make("CartPole-v1").unwrapped
    rng = np.random.default_rng(0)
    state, obs = reset(jax.random.PRNGKey(0))
    ref.reset(seed=0)
    ref.unwrapped.state = np.asarray(obs, np.float64)
    one_step, along, lengths, t = 0.0, 0.0, [], 0
    while len(lengths) < 8:
        balance = len(lengths) % 4 == 3
        action = _balancing_action(np.asarray(obs), rng) if balance else int(rng.integers(2))
        probe.reset(seed=0)
        probe.state = np.asarray(state.physics, np.float64)
        probe_obs, *_ = probe.step(action)
        if balance:
            ref.unwrapped.state = np.asarray(state.physics, np.float64)
        ref_obs, reward, terminated, truncated, _ = ref.step(action)
        state, obs, tr = step(state, jnp.int32(action), jax.random.PRNGKey(t + 1))
        t += 1
        one_step = max(one_step, float(np.abs(np.asarray(tr.next_obs) - probe_obs).max()))
        along = max(along, float(np.abs(np.asarray(tr.next_obs) - ref_obs).max()))
        assert (float(tr.reward), bool(tr.done), bool(tr.timeout)) == (reward, terminated or truncated,
                                                                       truncated and not terminated), f"step {t}"
        if terminated or truncated:
            lengths.append((ref._elapsed_steps, truncated))
            ref.reset()
            ref.unwrapped.state = np.asarray(obs, np.float64)
    assert [n for n, truncated in lengths if truncated] == [500, 500] and sum(n for n, _ in lengths) == t > 1000
    assert one_step <= 5e-7, one_step
    assert along <= 1e-3, along


def _config(**over):
    from rlaudit.run.backends.jax.config import agent_config
    from rlaudit.run.spec import AlgoSpec, RunSpec, TaskSpec

    name = over.pop("_name", "DQNFamily")
    task_over = {k: over.pop(k) for k in ("sticky_action_prob",) if k in over}
    cap = over.pop("max_episode_steps", None)
    pk = over.pop("policy_kwargs", {"net_arch": [8]})
    task = TaskSpec("MinAtar/Breakout-v1", "minatar", tuple(sorted({"use_minimal_action_set": False, **task_over}.items())),
                    cap)
    hp = {"buffer_size": 64, "batch_size": 4, **over}
    algo = AlgoSpec(name, "x", tuple(sorted(hp.items())), tuple(sorted(pk.items())), "jax")
    return agent_config(RunSpec("r", "h", task, algo, 0, (100,)))


def _cartpole_config():
    from rlaudit.run.backends.jax.config import agent_config
    from rlaudit.run.spec import AlgoSpec, RunSpec, TaskSpec

    algo = AlgoSpec("DQN", "x", (("batch_size", 4), ("buffer_size", 64)), (("net_arch", [8]),), "jax")
    return agent_config(RunSpec("r", "h", TaskSpec("CartPole-v1", "gymnasium", ()), algo, 0, (100,)))


# ------------------------------------------------------------------------------------------ maths
def test_the_replays_agree_with_the_sb3_buffers_on_one_stream_of_transitions(monkeypatch):
    """Dopamine's Rainbow replay (3-step returns, prioritized replay with alpha 0.5) on both backends, fed one
    stream of MinAtar-shaped transitions (episodes that terminate or time out; the ring of 64 wraps twice), and
    read after every transition with the same uniform draws: the same sampled indices, observations, n-step
    returns, discounts, cut flags and next observations, the same importance weights, and the same priorities
    after the same updates. (The training-step check of tests/test_backend_equivalence.py starts from one batch;
    this one checks how the batch is made.)"""
    from gymnasium import spaces

    from rlaudit.algorithms.dqn_family import PrioritizedNStepReplayBuffer
    from rlaudit.run.backends.jax import replay

    cfg = _config(_name="DopamineRainbow", n_steps=3, prioritized=True, per_alpha=0.5, per_beta=0.5, batch_size=8)
    shape, n = cfg.obs_shape, cfg.buffer_size
    ref = PrioritizedNStepReplayBuffer(n, spaces.Box(0, 1, shape, bool), spaces.Discrete(6), device="cpu",
                                       n_steps=3, gamma=cfg.gamma, alpha=0.5, eps=cfg.per_eps)
    buf = replay.empty(cfg)
    add = jax.jit(lambda b, *a: replay.add(cfg, b, *a))
    sample = jax.jit(lambda b, k: replay.sample(cfg, b, k, jnp.float32(0.5)))
    update = jax.jit(lambda b, i, e: replay.update_priorities(cfg, b, i, e))
    rng = np.random.default_rng(0)
    error_of = rng.exponential(size=n).astype(np.float32)  # one error per slot: a repeated index gets one value
    leaves = 1 << (n - 1).bit_length()
    obs, ends = rng.random(shape) < 0.3, {"terminated": 0, "truncated": 0}
    for t in range(150):
        next_obs = rng.random(shape) < 0.3
        action, reward, end = int(rng.integers(6)), float(rng.integers(0, 2)), rng.random()
        terminated, truncated = end < 0.08, 0.08 <= end < 0.12
        ends["terminated"] += terminated
        ends["truncated"] += truncated
        ref.add(obs[None], next_obs[None], np.array([action]), np.array([reward]),
                np.array([terminated or truncated]), [{"TimeLimit.truncated": truncated}])
        buf = add(buf, jnp.asarray(obs), jnp.int32(action), jnp.float32(reward), jnp.asarray(next_obs),
                  jnp.bool_(terminated or truncated), jnp.bool_(truncated))
        obs = rng.random(shape) < 0.3 if terminated or truncated else next_obs
        if t < 8:
            continue
        key = jax.random.PRNGKey(t)
        batch = sample(buf, key)
        uniforms = np.asarray(jax.random.uniform(key, (cfg.batch_size,)), np.float64)
        monkeypatch.setattr(np.random, "random", lambda size, u=uniforms: u)
        theirs = ref.sample_prioritized(cfg.batch_size, 0.5)
        np.testing.assert_array_equal(np.asarray(batch.indices), theirs.indices)
        np.testing.assert_allclose(np.asarray(batch.weights), theirs.weights, rtol=1e-5)
        s = theirs.samples
        np.testing.assert_array_equal(np.asarray(batch.obs), s.observations.numpy().astype(bool))
        np.testing.assert_array_equal(np.asarray(batch.actions), s.actions.numpy().ravel())
        np.testing.assert_allclose(np.asarray(batch.rewards), s.rewards.numpy().ravel(), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(batch.discounts), s.discounts.numpy().ravel(), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(batch.dones), s.dones.numpy().ravel())
        np.testing.assert_array_equal(np.asarray(batch.next_obs), s.next_observations.numpy().astype(bool))
        errors = error_of[theirs.indices] * (1.0 + t / 50)
        ref.update_priorities(theirs.indices, errors)
        buf = update(buf, batch.indices, jnp.asarray(errors))
        np.testing.assert_allclose(np.asarray(buf.tree)[leaves:leaves + n], ref.tree.get(np.arange(n)), rtol=1e-6)
        assert float(buf.max_priority) == pytest.approx(ref.max_priority, rel=1e-6)
    assert ends["terminated"] > 5 and ends["truncated"] > 3  # both kinds of episode end were exercised


def test_categorical_projection_and_quantile_loss_match_the_torch_built_ins():
    import torch

    from rlaudit.algorithms.dqn_components import categorical_projection, quantile_huber_loss
    from rlaudit.run.backends.jax import agent

    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(11), size=5).astype(np.float32)
    rewards, dones = rng.normal(size=5).astype(np.float32), np.array([0, 1, 0, 0, 1], np.float32)
    disc = np.full(5, 0.97, np.float32)
    atoms = np.linspace(-3, 3, 11, dtype=np.float32)
    mine = agent.categorical_projection(jnp.asarray(probs), jnp.asarray(rewards), jnp.asarray(dones),
                                        jnp.asarray(disc), jnp.asarray(atoms))
    ref = categorical_projection(torch.tensor(probs), torch.tensor(rewards)[:, None], torch.tensor(dones)[:, None],
                                 torch.tensor(disc)[:, None], torch.tensor(atoms))
    np.testing.assert_allclose(np.asarray(mine), ref.numpy(), atol=1e-6)
    q, taus, targets = (rng.normal(size=(5, 7)).astype(np.float32), rng.uniform(size=(5, 7)).astype(np.float32),
                        rng.normal(size=(5, 9)).astype(np.float32))
    mine = agent.quantile_huber_loss(jnp.asarray(q), jnp.asarray(taus), jnp.asarray(targets), 1.0)
    ref = quantile_huber_loss(torch.tensor(q), torch.tensor(taus), torch.tensor(targets), 1.0)
    np.testing.assert_allclose(np.asarray(mine), ref.numpy(), rtol=1e-5)


@pytest.mark.parametrize("loss,double", [("huber", False), ("mse", True)])
def test_expected_value_targets_and_losses(loss, double):
    """Target ``r + gamma^k (1 - d) Q_target(s', a*)``, ``a*`` the target's argmax or (double) the online one's;
    SB3's Huber or ``(q - y)^2``; the PER signal is the TD error ``q - y``."""
    from rlaudit.run.backends.jax import agent, networks, replay

    cfg = _config(loss=loss, double=double, dueling=True, policy_kwargs={"net_arch": [8]})
    online, target = (jax.jit(lambda k: networks.init_params(cfg, k))(jax.random.PRNGKey(i)) for i in (0, 1))
    rng = np.random.default_rng(2)
    obs = jnp.asarray(rng.integers(0, 2, (4, 10, 10, 4)).astype(bool))
    nxt = jnp.asarray(rng.integers(0, 2, (4, 10, 10, 4)).astype(bool))
    batch = replay.Batch(obs, jnp.array([0, 5, 2, 3]), jnp.array([1.0, 0.0, -1.0, 2.0]), nxt,
                         jnp.array([0.0, 1.0, 0.0, 0.0]), jnp.array([0.99, 0.99, 0.9801, 0.99]), jnp.arange(4),
                         jnp.ones(4))
    loss_value, signal = jax.jit(lambda p, t, b: agent._elementwise_loss(cfg, p, t, b, jax.random.PRNGKey(0)))(
        online, target, batch)
    q = lambda p, o: np.asarray(jax.jit(lambda p, o: networks.distribution(cfg, p, o)[..., 0])(p, o))  # noqa: E731
    q_next_t, q_next_o, q_now = q(target, nxt), q(online, nxt), q(online, obs)
    best = (q_next_o if double else q_next_t).argmax(axis=1)
    y = np.array([1.0, 0.0, -1.0, 2.0]) + np.array([1, 0, 1, 1]) * np.array([0.99, 0.99, 0.9801, 0.99]) \
        * q_next_t[np.arange(4), best]
    err = q_now[np.arange(4), [0, 5, 2, 3]] - y
    expected = err**2 if loss == "mse" else np.where(np.abs(err) <= 1, 0.5 * err**2, np.abs(err) - 0.5)
    np.testing.assert_allclose(np.asarray(signal), err, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(loss_value), expected, rtol=1e-5, atol=1e-6)


def test_exploration_schedules_are_sb3s_and_dopamines():
    from rlaudit.run.backends.jax import agent

    lin = _config(exploration_fraction=0.1, exploration_final_eps=0.05, exploration_initial_eps=1.0)
    assert float(agent.epsilon(lin, jnp.float32(0), jnp.float32(1000))) == 1.0
    assert float(agent.epsilon(lin, jnp.float32(50), jnp.float32(1000))) == pytest.approx(0.525)
    assert float(agent.epsilon(lin, jnp.float32(101), jnp.float32(1000))) == pytest.approx(0.05)
    dop = _config(exploration_schedule="dopamine", epsilon_decay_steps=250, learning_starts=100,
                  exploration_final_eps=0.01)
    values = [float(agent.epsilon(dop, jnp.float32(t), jnp.float32(1000))) for t in (0, 100, 225, 350, 900)]
    assert values == pytest.approx([1.0, 1.0, 0.505, 0.01, 0.01])


def test_minatar_network_is_one_conv_and_glorot_bounds():
    from rlaudit.run.backends.jax import networks

    cfg = _config(policy_kwargs={"features_extractor": "minatar", "net_arch": []})
    params = jax.jit(lambda k: networks.init_params(cfg, k))(jax.random.PRNGKey(0))
    assert params["conv"]["w"].shape == (3, 3, 4, 16) and params["head"]["w"].shape == (1600, 6)
    bound = (6 / (9 * 4 + 9 * 16)) ** 0.5
    assert float(jnp.abs(params["conv"]["w"]).max()) <= bound and float(jnp.abs(params["conv"]["w"]).max()) > 0.9 * bound
    assert float(jnp.abs(params["head"]["b"]).max()) == 0.0
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 10, 10, 4))
    ref = jax.lax.conv_general_dilated(x, params["conv"]["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(networks.conv3x3_same(x, params["conv"]["w"])), np.asarray(ref), atol=1e-5)
    obs = jnp.zeros((3, 10, 10, 4), bool).at[1, 0, 0, 0].set(True)
    out = jax.jit(lambda p, o: networks.distribution(cfg, p, o))(params, obs)
    assert out.shape == (3, 6, 1)
    diff = np.asarray(out[1] - out[0])
    assert np.abs(diff).max() > 0 and np.array_equal(np.asarray(out[0]), np.asarray(out[2]))


# ------------------------------------------------------------------------------------------ training
def test_dqn_trains_a_batch_of_seeds_and_is_deterministic(tmp_path):
    """Two seeds vmapped: an evaluation per budget each, the same numbers on a second run, and seed 1's numbers
    do not depend on its batch (trained first beside seed 2 instead of second beside seed 0, it gives the same
    records). Batches of two throughout: a batch of another size is another compiled program (~10 CPU-s)."""
    specs = _plan(_protocol(tmp_path, seeds=3)).runs
    assert [s.seed for s in specs] == [0, 1, 2] and {s.algorithm.backend for s in specs} == {"jax"}
    records, outcomes = _train(specs[:2])
    assert [o.env_steps for o in outcomes] == [600, 600]
    by_run = {(r.run_id, r.env_steps): (r.returns, r.lengths) for r in records}
    assert sorted(by_run) == sorted((s.run_id, b) for s in specs[:2] for b in (300, 600))
    again, _ = _train(specs[:2])
    assert {(r.run_id, r.env_steps): (r.returns, r.lengths) for r in again} == by_run
    moved, _ = _train(specs[1:])
    assert {(r.run_id, r.env_steps): (r.returns, r.lengths) for r in moved if r.run_id == specs[1].run_id} == \
        {k: v for k, v in by_run.items() if k[0] == specs[1].run_id}


CARTPOLE = """
schema_version = 1
name = "jax-cartpole"
seeds = 2
backend = "jax"

[regimes]
low = 1000
high = 2000

[[tasks]]
id = "{task}"
suite = "gymnasium"

[[algorithms]]
name = "DQN"
hyperparams = {{ learning_starts = 200, buffer_size = 2000, batch_size = 16, target_update_interval = 100, exploration_fraction = 0.5 }}
policy_kwargs = {{ net_arch = [16] }}

[evaluation]
n_eval_episodes = 2
"""


def test_dqn_on_jax_cartpole_runs_through_rlaudit_run_and_is_deterministic(tmp_path, monkeypatch):
    """`rlaudit run` of a jax-backend protocol on CartPole-v1 (DQN, 2 seeds in one batch, 2,000 steps): both runs
    done with an evaluation at each budget (gymnasium's CartPole, greedy), and a second store from the same
    protocol has the same numbers."""
    import sqlite3

    from click.testing import CliRunner

    from rlaudit.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # measured steps/s stay out of the user's cache
    path = tmp_path / "cartpole.toml"
    path.write_text(CARTPOLE.format(task="CartPole-v1"))
    evaluations = []
    for store in (tmp_path / "a.sqlite", tmp_path / "b.sqlite"):
        result = CliRunner().invoke(main, ["run", str(path), "--store", str(store), "--workers", "1"])
        assert result.exit_code == 0, result.output
        assert "2 done, 0 failed, 0 skipped" in result.stderr, result.stderr
        con = sqlite3.connect(store)
        evaluations.append(con.execute("SELECT run_id, env_steps, returns, lengths FROM evaluations "
                                       "ORDER BY run_id, env_steps").fetchall())
        con.close()
    assert [(run_id.split("__")[2], steps) for run_id, steps, *_ in evaluations[0]] == \
        [("0", 1000), ("0", 2000), ("1", 1000), ("1", 2000)], evaluations[0]
    assert evaluations[0] == evaluations[1]
    # each run says where JAX trained it: the driver's fingerprint carries JAX's devices (here the CPU)
    con = sqlite3.connect(tmp_path / "a.sqlite")
    fingerprint = json.loads(con.execute("SELECT value FROM meta WHERE key = 'machine'").fetchone()[0])
    con.close()
    assert fingerprint["jax_devices"] == "cpu" and fingerprint["jax"] and fingerprint["torch"]
    status = CliRunner().invoke(main, ["status", str(tmp_path / "a.sqlite")])
    assert f"jax {fingerprint['jax']} on cpu" in " ".join(status.output.split()), status.output


def test_a_run_trained_on_an_accelerator_names_it(monkeypatch):
    """What a GPU machine's driver records (the device machine's H200, faked here): the fingerprint's JAX devices,
    shown by the compute line and kept apart from the same CPU's own rates when a plan is priced."""
    import jax

    from rlaudit.run import machine
    from rlaudit.run.backends import get_backend, machine_facts
    from rlaudit.run.backends.jax import jax_facts
    from rlaudit.store.export import _machine_text

    class Device:
        platform, device_kind = "gpu", "NVIDIA H200"

    monkeypatch.setattr(jax, "devices", lambda *a: [Device(), Device()])
    facts = jax_facts()
    assert facts["jax_devices"] == "gpu NVIDIA H200" and facts["jax"] == jax.__version__
    assert get_backend("jax").machine_facts() == facts and machine_facts([]) == {}
    cpu = {"cpu_model": "Intel(R) Xeon(R) Processor", "cpu_flags": "avx2", "machine": "x86_64", "torch": "2.11.0"}
    assert machine.cpu_identity({**cpu, "jax_devices": "cpu"}) == machine.cpu_identity(cpu) == \
        "Intel(R) Xeon(R) Processor (avx2)"
    assert machine.cpu_identity({**cpu, **facts}) == "Intel(R) Xeon(R) Processor (avx2) with gpu NVIDIA H200"
    assert _machine_text(json.dumps({**cpu, **facts})).endswith(f"torch 2.11.0, jax {jax.__version__} on gpu NVIDIA H200")


def test_validate_refuses_a_gymnasium_task_the_jax_backend_does_not_implement(tmp_path):
    """Acrobot-v1 on backend jax: exit 2, one line naming the task, what the backend runs and who can."""
    from click.testing import CliRunner

    from rlaudit.cli import main

    path = tmp_path / "acrobot.toml"
    path.write_text(CARTPOLE.format(task="Acrobot-v1"))
    result = CliRunner().invoke(main, ["validate", str(path), "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {path}: tasks[0]: the jax backend does not implement gymnasium "
                                    "'Acrobot-v1'; it runs minatar MinAtar/Asterix-v0, MinAtar/Asterix-v1, ")
    assert result.output.endswith(", MinAtar/SpaceInvaders-v1; gymnasium CartPole-v1; backends that can: sb3\n")


@pytest.mark.parametrize("change,message", [
    (("net_arch = [16]", "net_arch = [16], features_extractor = 'minatar'"),
     "algorithms[0].policy_kwargs.features_extractor: 'minatar' does not fit gymnasium 'CartPole-v1' (its "
     "observations take 'flatten'); backends that can: sb3"),
    (('suite = "gymnasium"', 'suite = "gymnasium"\nkwargs = { sutton_barto_reward = true }'),
     "tasks[0].kwargs.sutton_barto_reward: not implemented by the jax backend's CartPole-v1 (it takes no kwargs); "
     "backends that can: sb3"),
])
def test_validate_refuses_what_the_jax_cartpole_does_not_implement(tmp_path, change, message):
    from rlaudit.protocol import check_runnable, load_protocol

    path = tmp_path / "cartpole.toml"
    path.write_text(CARTPOLE.format(task="CartPole-v1").replace(*change))
    with pytest.raises(InputError) as err:
        check_runnable(load_protocol(path))
    assert message in str(err.value)


# One compiled program per case, ~10-20 CPU-s each: plain DQN trains in the determinism test, the C51 head (as
# Dopamine's Rainbow: with prioritized replay and 3-step returns) in the driver test below, QR-DQN's head in the
# DQNFamily case (with every component), the expected-value losses in test_expected_value_targets_and_losses.
@pytest.mark.parametrize("algo,extra", [
    ("IQN", ", n_tau = 4, n_tau_target = 4, n_tau_act = 4, n_cos = 8, iqn_post_layers = 0"),
    ("DQNFamily", ", distributional = 'qr', n_quantiles = 8, double = true, dueling = true, prioritized = true, "
                  "n_steps = 3, max_grad_norm = inf, exploration_schedule = 'dopamine', epsilon_decay_steps = 200"),
])
def test_every_agent_trains_and_evaluates(tmp_path, algo, extra):
    p = _plan(_protocol(tmp_path, algo=algo, extra=extra, seeds=2, low=200, high=400))
    records, outcomes = _train(p.runs)
    assert all(o.env_steps == 400 for o in outcomes)
    assert len(records) == 4 and all(len(r.returns) == 2 and all(np.isfinite(r.returns)) for r in records)


RAINBOW = """
[[algorithms]]
name = "DopamineRainbow"
hyperparams = { learning_starts = 100, buffer_size = 1000, batch_size = 8, target_update_interval = 100, exploration_fraction = 0.5, n_atoms = 11, per_beta_anneal = false, adam_eps = 3.125e-4 }
policy_kwargs = { net_arch = [16] }
"""
"""A second entry for two-batch sweeps: Dopamine's Rainbow (the C51 head, prioritized replay, n-step returns)."""


def test_sweep_through_the_driver_and_store_resumes_and_survives_a_failed_batch(tmp_path, monkeypatch):
    """`rlaudit run` with backend jax: two batches (DQN, Dopamine's Rainbow); Rainbow's program fails to build (as
    a compile failure would), DQN's runs finish; the store has DQN's evaluations and Rainbow's runs failed with
    the error; a second run retries only Rainbow, which trains (the C51 head, prioritized replay, n-step)."""
    from rlaudit.run import driver
    from rlaudit.run.backends.jax import training
    from rlaudit.run.executors import LocalExecutor
    from rlaudit.store.export import export_table, store_status

    text = _protocol(tmp_path).read_text() + RAINBOW
    path = tmp_path / "two.toml"
    path.write_text(text)
    real = training.program

    def failing(cfg):
        if cfg.distributional == "c51":
            raise RuntimeError("XlaRuntimeError: simulated compile failure")
        return real(cfg)

    monkeypatch.setattr(training, "program", failing)
    store = tmp_path / "store.sqlite"
    with pytest.raises(Exception, match="2 of 4 runs failed"):
        driver.run_plan(_plan(path), store, LocalExecutor(workers=1))
    status = store_status(store).set_index("algorithm")
    assert (status.loc["DQN", "done"], status.loc["DopamineRainbow", "failed"]) == (2, 2)
    from rlaudit.store.export import failures

    errors = dict(failures(store))
    assert all("simulated compile failure" in e and "whole batch failed" in e for e in errors.values())
    monkeypatch.setattr(training, "program", real)
    summary = driver.run_plan(_plan(path), store, LocalExecutor(workers=1))
    assert summary.skipped == 2 and summary.done == 2
    scores = export_table(store).frame
    rainbow = scores[scores.algorithm == "DopamineRainbow"]
    assert len(rainbow) == 4 and np.isfinite(rainbow.score).all()
    # a seed batch's CPU time is shared equally by its runs
    from rlaudit.store import compute_used

    used = compute_used(store)
    assert used["backends"] == {"jax": 4} and used["runs_timed"] == 4 and used["cpu_hours"] > 0
    import sqlite3

    con = sqlite3.connect(store)
    per_batch = con.execute("SELECT algorithm, count(DISTINCT cpu_time) FROM runs GROUP BY algorithm").fetchall()
    con.close()
    assert dict(per_batch) == {"DQN": 1, "DopamineRainbow": 1}


def test_a_batch_that_fails_to_compile_in_a_worker_process_fails_its_runs_and_the_sweep_goes_on(tmp_path, monkeypatch):
    """The process executor (one worker; a run timeout puts the runs in worker processes): Rainbow's program fails
    to build in the worker, its two runs are recorded failed with the error, and the same worker goes on to
    train DQN's batch."""
    from rlaudit.run import driver, executors
    from rlaudit.store.export import failures, store_status
    from tests import worker_hooks

    path = tmp_path / "two.toml"
    path.write_text(_protocol(tmp_path).read_text() + RAINBOW)
    monkeypatch.setattr(executors, "_worker_main", worker_hooks.failing_c51_worker)
    store = tmp_path / "store.sqlite"
    with pytest.raises(Exception, match="2 of 4 runs failed"):
        driver.run_plan(_plan(path), store, executors.LocalExecutor(workers=1, run_timeout=3600))
    status = store_status(store).set_index("algorithm")
    assert (status.loc["DQN", "done"], status.loc["DopamineRainbow", "failed"]) == (2, 2)
    errors = dict(failures(store))
    assert len(errors) == 2 and all(worker_hooks.SIMULATED_COMPILE_FAILURE in e and "whole batch failed" in e
                                    for e in errors.values()), errors
    import sqlite3

    con = sqlite3.connect(store)
    workers = {w for (w,) in con.execute("SELECT worker FROM runs")}
    con.close()
    assert workers == {"w1"}  # the worker that saw the failure trained the next batch


def test_a_killed_driver_with_a_batch_in_flight_resumes(tmp_path):
    """SIGKILL `rlaudit run` once the batch's two runs are `running` in the store (inline: the batch trains in the
    driver); the next `rlaudit run` retries both, and they finish with their evaluations."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys

    from click.testing import CliRunner

    from rlaudit.cli import main
    from tests.test_run import _statuses, stop_when

    path = _protocol(tmp_path)
    store = tmp_path / "store.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "rlaudit", "run", str(path), "--store", str(store), "--workers",
                             "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    stop_when(proc, lambda: sorted(_statuses(store).values()) == ["running", "running"])
    assert proc.returncode == -signal.SIGKILL
    assert sorted(_statuses(store).values()) == ["running", "running"]
    result = CliRunner().invoke(main, ["run", str(path), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "2 done, 0 failed, 0 skipped" in result.stderr, result.stderr
    con = sqlite3.connect(store)
    runs = con.execute("SELECT status, attempts FROM runs").fetchall()
    evals = con.execute("SELECT run_id, env_steps FROM evaluations ORDER BY run_id, env_steps").fetchall()
    con.close()
    assert runs == [("done", 2), ("done", 2)]
    assert [steps for _, steps in evals] == [300, 600, 300, 600]


# ------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("change,message", [
    (("DQN", "NoisyDQN"), "algorithms[0].backend: NoisyDQN has no 'jax' backend; backends that can run it: sb3"),
    (("DQN", "PPO"), "PPO has no 'jax' backend; backends that can run it: sb3"),
    (('backend = "jax"', 'backend = "jaxx"'), "backend: unknown backend 'jaxx' (did you mean 'jax'?)"),
    (("exploration_fraction = 0.5", "exploration_fraction = 0.5, optimize_memory_usage = true"),
     "optimize_memory_usage: only False on the jax backend"),
    (("exploration_fraction = 0.5", "exploration_fraction = 0.5, replay_buffer_class = 'x'"),
     "replay_buffer_class: not implemented by the jax backend for 'DQN'; backends that can: sb3"),
    (('id = "MinAtar/Breakout-v1"\nsuite = "minatar"\nkwargs = { use_minimal_action_set = false }',
      'id = "CartPole-v0"'),
     "tasks[0]: the jax backend does not implement gymnasium 'CartPole-v0' (did you mean 'CartPole-v1'?); it runs "
     "minatar MinAtar/Asterix-v0, "),
    (("use_minimal_action_set = false", "difficulty_ramping = false"), "pgx's MinAtar always ramps"),
    (("net_arch = [16]", "net_arch = [16], features_extractor = 'minatr'"),
     "unknown extractor 'minatr' (did you mean 'minatar'?)"),
    (("epsilon = 0.05", "epsilon = 0.05\ndeterministic = false"), "the jax backend evaluates greedily"),
])
def test_validate_refuses_what_the_jax_backend_cannot_run(tmp_path, change, message):
    from rlaudit.protocol import check_runnable, load_protocol

    path = _protocol(tmp_path)
    path.write_text(path.read_text().replace(*change))
    with pytest.raises(InputError) as err:
        check_runnable(load_protocol(path))
    assert message in str(err.value)


def test_validate_gives_the_plans_cost_on_each_backend(tmp_path):
    """A MinAtar DQN protocol on jax is also costed on sb3, and the same one on sb3 is costed on jax."""
    from click.testing import CliRunner

    from rlaudit.cli import main

    on_jax = _protocol(tmp_path)
    on_sb3 = tmp_path / "sb3.toml"
    on_sb3.write_text(on_jax.read_text().replace('backend = "jax"\n', ""))
    for path, used, other in ((on_jax, "jax", "sb3"), (on_sb3, "sb3", "jax")):
        result = CliRunner().invoke(main, ["validate", str(path), "--store", str(tmp_path / "none.sqlite")])
        assert result.exit_code == 0, result.output
        assert f" on backend {used}, " in result.output and " CPU-seconds (steps/s: " in result.output
        assert f"  on backend {other}: about " in result.output, result.output


def test_one_entry_cannot_mix_backends_across_its_regimes(tmp_path):
    from rlaudit.protocol import load_protocol

    path = tmp_path / "mixed.toml"
    path.write_text(PROTOCOL.format(algo="DQN", extra="", seeds=2, low=300, high=600).replace(
        "[evaluation]", '[algorithms.regimes.high]\nbackend = "sb3"\n\n[evaluation]'))
    with pytest.raises(InputError, match=r"algorithms\[0\]\.regimes\.high\.backend: one algorithm entry cannot mix "
                                         r"backends"):
        load_protocol(path)


def test_registry_lists_backends_and_protocol_hash_keeps_old_protocols():
    from rlaudit.algorithms import get_spec
    from rlaudit.protocol import load_protocol

    assert get_spec("C51").backends == ("sb3", "jax") and get_spec("Rainbow").backends == ("sb3",)
    assert get_spec("PPO").backends == ("sb3",)
    from rlaudit.store.export import stored_protocol_hash

    # a protocol without `backend` hashes as before the key existed: its recorded store still takes it
    quick = load_protocol("protocols/quickstart.toml")
    assert all(a.backend == "sb3" for a in quick.algorithms)
    assert quick.hash == stored_protocol_hash("sweeps/quickstart/store.sqlite")


def test_the_budget_bench_measures_each_entry_and_stops_at_its_deadline(tmp_path, capsys):
    """bench/bench_jax_budget.py (the GPU note of the flagship's report) on CPU: a rate and a compile time per
    entry, the JSON rewritten as it goes, entries past the deadline listed as not measured, bad labels refused."""
    import importlib
    import json
    import sys
    from pathlib import Path

    bench_dir = str(Path(__file__).resolve().parents[1] / "bench")
    sys.path.insert(0, bench_dir)
    try:
        bench = importlib.import_module("bench_jax_budget")
    finally:
        sys.path.remove(bench_dir)
    out = tmp_path / "r.json"
    protocol = str(Path(bench_dir).parent / "protocols/dqn-family-minatar.toml")
    args = ["--protocol", protocol, "--algorithms", "DQN", "--seeds", "2,3",
            "--warmup", "200", "--min-seconds", "0.05", "--json", str(out)]
    assert bench.main([*args, "--deadline", "1e9"]) == 0
    result = json.loads(out.read_text())
    assert [(e["algorithm"], e["seeds"]) for e in result["entries"]] == [("DQN", 2), ("DQN", 3)]
    for e in result["entries"]:
        assert e["compile_s"] > 0 and e["timed_s"] >= 0.05 and e["timed_steps_per_seed"] >= 2_000
        assert e["steps_per_s_all_seeds"] == pytest.approx(e["steps_per_s_per_seed"] * e["seeds"])
    assert bench.main([*args, "--deadline", "0"]) == 0
    assert all("steps_per_s_per_seed" not in e for e in json.loads(out.read_text())["entries"])
    assert "Not measured (deadline): DQN at S = 2, DQN at S = 3" in bench.note(json.loads(out.read_text()))
    capsys.readouterr()
    log = tmp_path / "run.log"
    log.write_text("training 2 of 2 runs\n")
    assert bench.main(["--note", str(out), str(tmp_path / "notes.toml"), "--end-to-end", str(log), "rlaudit run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no finished run" in err and not (tmp_path / "notes.toml").exists()
    assert bench.main(["--protocol", protocol, "--algorithms", "DQM"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no algorithm entry labelled 'DQM'" in err
