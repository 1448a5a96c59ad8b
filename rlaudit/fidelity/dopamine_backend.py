"""Dopamine's JAX agents as the fidelity harness's reference (runs in the reference interpreter only).

What is Dopamine's and what is ours. The agents are dopamine-rl's own classes, unchanged: ``JaxDQNAgent``,
``JaxRainbowAgent`` (C51 and Dopamine's Rainbow), ``JaxQuantileAgent``, ``JaxImplicitQuantileAgent`` — their
action selection, replay buffer (``dopamine.jax.replay_memory``), n-step accumulator, prioritized sampling,
losses, target computation and projection, optimiser (optax Adam from ``create_optimizer``) and update
schedule. Ours, written for this harness because dopamine-rl ships Atari networks and an Atari runner only:

- the networks, in flax linen, after JohanSamir/revisiting_rainbow ``networks_new.py`` at 64ec8c8 with
  ``net_conf = 'minatar'`` and ``hidden_layer = 0``: the state ``(10, 10, C, 1)`` is squeezed to
  ``(10, 10, C)`` and convolved by ``nn.Conv(16, kernel_size=(3, 3))`` with SAME padding and Xavier-uniform
  kernels (see :mod:`rlaudit.algorithms.networks`), ReLU, flattened to 1,600 features, then the head: ``Dense(num_actions)`` (DQN), ``Dense(num_actions * num_atoms)``
  with softmax over atoms (C51 / Rainbow; Q = Σ support · p), ``Dense(num_actions * num_atoms)`` quantiles
  (QR-DQN; Q = mean), or for IQN the quantile embedding ``ReLU(Dense(1600)(cos(π i τ)))``, ``i = 1 .. n``
  (Dopamine's), multiplied into the features, then ``Dense(num_actions)``. Every kernel Xavier uniform, every
  bias zero (flax's default). With ``net_arch = [...]`` and no ``features_extractor`` the torso is a flatten and
  Xavier-uniform ``Dense`` + ReLU layers (for small test tasks such as CartPole);
- the loop that drives the agent (``begin_episode`` / ``step``, as Dopamine's runner, uncapped unless the task
  sets ``max_episode_steps``) on rlaudit's environment (:func:`rlaudit.run.envs.make_env`), so that both sides
  see the same observations, sticky actions and action set. At an episode's end it stores the last transition
  itself instead of calling ``end_episode``, whose replay accumulator in dopamine-rl 4.1.2 loses that transition
  and flags the one before it as terminal (:meth:`DopamineAgent._end_episode`; harness revision 2);
- the replay scheme a prioritized agent was built with, which dopamine-rl 4.1.2's base constructor resets to
  'uniform' (google/dopamine#230; set back after construction, from 2026-12-02, before any reference run of a
  prioritized agent was recorded: the runs of uniform-replay agents are unchanged, so the revision stays 2);
- the greedy action for evaluation (argmax of the online network's Q-values; IQN averages
  ``num_quantile_samples`` sampled levels, as Dopamine's ``select_action``, from a key of its own), evaluated
  by rlaudit's :func:`~rlaudit.run.runner.evaluate` with the run's episodes, ε and step cap.

Settings are translated by :func:`rlaudit.fidelity.dopamine_settings.dopamine_config` (which refuses any setting
Dopamine cannot run) and given through gin (``create_optimizer``, ``ReplayBuffer``) and the agents' arguments.
Seeds: the agent's ``seed`` (parameters, exploration, its samplers) and NumPy's global generator are the run's
seed; the training environment's first reset is seeded with it too.
"""

from __future__ import annotations

import functools
import inspect

import gin
import jax
from absl import logging as absl_logging
import jax.numpy as jnp
import numpy as np
from dopamine.discrete_domains import atari_lib
from dopamine.jax.agents.dqn import dqn_agent
from dopamine.jax.agents.implicit_quantile import implicit_quantile_agent
from dopamine.jax.agents.quantile import quantile_agent
from dopamine.jax.agents.rainbow import rainbow_agent
from flax import linen as nn

from rlaudit.fidelity.dopamine_settings import dopamine_config

_XAVIER = nn.initializers.xavier_uniform()

# dopamine-rl's DQN agent passes priority=None to its uniform sampler at every step, which logs a warning each
# time ("Got kwargs {'priority': None} to `UniformDistribution.add`, ignoring..."): harmless, and 100k lines a run.
absl_logging.set_verbosity(absl_logging.ERROR)


def _torso(x: jnp.ndarray, torso: str, hidden: tuple[int, ...]) -> jnp.ndarray:
    """State ``(*obs_shape, 1)`` -> feature vector."""
    x = x.astype(jnp.float32)
    if torso == "minatar":
        x = jnp.squeeze(x, 3)  # (10, 10, C): linen takes it for one unbatched example
        x = nn.Conv(features=16, kernel_size=(3, 3), strides=(1, 1), padding="SAME", kernel_init=_XAVIER)(x)
        x = nn.relu(x)
    x = x.reshape(-1)
    for width in hidden:
        x = nn.relu(nn.Dense(features=width, kernel_init=_XAVIER)(x))
    return x


def _atom_logits(module: nn.Module, x: jnp.ndarray) -> jnp.ndarray:
    """Torso, then one linear layer to ``(num_actions, num_atoms)`` (called inside ``module``'s compact call)."""
    x = nn.Dense(features=module.num_actions * module.num_atoms, kernel_init=_XAVIER)(_torso(x, module.torso, module.hidden))
    return x.reshape((module.num_actions, module.num_atoms))


class MinAtarDQNNetwork(nn.Module):
    num_actions: int
    torso: str = "minatar"
    hidden: tuple[int, ...] = ()

    @nn.compact
    def __call__(self, x):
        q_values = nn.Dense(features=self.num_actions, kernel_init=_XAVIER)(_torso(x, self.torso, self.hidden))
        return atari_lib.DQNNetworkType(q_values)


class MinAtarRainbowNetwork(nn.Module):
    num_actions: int
    num_atoms: int
    torso: str = "minatar"
    hidden: tuple[int, ...] = ()

    @nn.compact
    def __call__(self, x, support):
        logits = _atom_logits(self, x)
        probabilities = nn.softmax(logits)
        q_values = jnp.sum(support * probabilities, axis=1)
        return atari_lib.RainbowNetworkType(q_values, logits, probabilities)


class MinAtarQuantileNetwork(nn.Module):
    num_actions: int
    num_atoms: int
    torso: str = "minatar"
    hidden: tuple[int, ...] = ()

    @nn.compact
    def __call__(self, x):
        logits = _atom_logits(self, x)
        return atari_lib.RainbowNetworkType(jnp.mean(logits, axis=1), logits, nn.softmax(logits))


class MinAtarImplicitQuantileNetwork(nn.Module):
    num_actions: int
    quantile_embedding_dim: int
    torso: str = "minatar"
    hidden: tuple[int, ...] = ()

    @nn.compact
    def __call__(self, x, num_quantiles, rng):
        x = _torso(x, self.torso, self.hidden)
        state_tiled = jnp.tile(x, [num_quantiles, 1])
        quantiles = jax.random.uniform(rng, shape=[num_quantiles, 1])
        embedding = jnp.tile(quantiles, [1, self.quantile_embedding_dim])
        embedding = jnp.arange(1, self.quantile_embedding_dim + 1, 1).astype(jnp.float32) * jnp.pi * embedding
        embedding = nn.relu(nn.Dense(features=x.shape[-1], kernel_init=_XAVIER)(jnp.cos(embedding)))
        quantile_values = nn.Dense(features=self.num_actions, kernel_init=_XAVIER)(state_tiled * embedding)
        return atari_lib.ImplicitQuantileNetworkType(quantile_values, quantiles)


_AGENTS = {
    "JaxDQNAgent": (dqn_agent.JaxDQNAgent, MinAtarDQNNetwork),
    "JaxRainbowAgent": (rainbow_agent.JaxRainbowAgent, MinAtarRainbowNetwork),
    "JaxQuantileAgent": (quantile_agent.JaxQuantileAgent, MinAtarQuantileNetwork),
    "JaxImplicitQuantileAgent": (implicit_quantile_agent.JaxImplicitQuantileAgent, MinAtarImplicitQuantileNetwork),
}


class DopamineAgent:
    """A Dopamine agent behind the interface :func:`rlaudit.run.runner.execute_run` drives.

    Args:
        spec: the run (:class:`~rlaudit.run.spec.RunSpec`).
        env: its training environment.
    """

    kind = "reference"

    def __init__(self, spec, env) -> None:
        cfg = dopamine_config(spec.algorithm.name, spec.algorithm.hyperparams_dict, spec.algorithm.policy_kwargs_dict,
                              where=spec.run_id)
        self.config = cfg
        self.env = env
        self.seed = int(spec.seed)
        gin.clear_config()
        gin.bind_parameter("create_optimizer.name", "adam")
        gin.bind_parameter("create_optimizer.learning_rate", cfg["optimizer"]["learning_rate"])
        gin.bind_parameter("create_optimizer.eps", cfg["optimizer"]["eps"])
        gin.bind_parameter("ReplayBuffer.max_capacity", cfg["replay"]["max_capacity"])
        gin.bind_parameter("ReplayBuffer.batch_size", cfg["replay"]["batch_size"])
        # Stored uncompressed: the same transitions, without packing each one and unpacking every sampled batch
        # (a MinAtar observation is at most 1 kB; 100k of them fit in memory).
        gin.bind_parameter("ReplayBuffer.compress", False)
        # the sum tree of Rainbow's (and C51's) sampler; priorities are sqrt(loss) with exponent 1
        gin.bind_parameter("PrioritizedSamplingDistribution.max_capacity", cfg["replay"]["max_capacity"])
        cls, network = _AGENTS[cfg["agent"]]
        net = functools.partial(network, torso=cfg["network"]["torso"], hidden=tuple(cfg["network"]["hidden"]))
        if "quantile_embedding_dim" in cfg["network"]:
            cfg["kwargs"]["quantile_embedding_dim"] = cfg["network"]["quantile_embedding_dim"]
        kwargs = dict(cfg["kwargs"])
        accepted = inspect.signature(cls.__init__).parameters
        if "replay_scheme" in accepted and "replay_scheme" not in kwargs:
            kwargs["replay_scheme"] = "uniform"
        np.random.seed(self.seed)
        self.agent = cls(num_actions=int(env.action_space.n), observation_shape=tuple(env.observation_space.shape),
                         observation_dtype=jnp.float32, stack_size=1, network=net, seed=self.seed, **kwargs)
        if "replay_scheme" in kwargs:
            # dopamine-rl 4.1.2's JaxDQNAgent.__init__ sets _replay_scheme = 'uniform' after JaxRainbowAgent and
            # JaxQuantileAgent have set theirs (google/dopamine#230): a 'prioritized' agent would store every
            # transition at priority 1, never update a priority and leave its loss unweighted, i.e. train with
            # uniform replay. Both agents build the prioritized sampler whatever the scheme, and the replay is
            # empty here, so setting the scheme back gives the agent its constructor's meaning.
            self.agent._replay_scheme = kwargs["replay_scheme"]
        self._support = getattr(self.agent, "_support", None)
        self._eval_key = jax.random.PRNGKey(self.seed + 1)
        self._greedy = jax.jit(self._greedy_fn(cfg["agent"]))

    def _greedy_fn(self, agent: str):
        net = self.agent.network_def
        if agent == "JaxRainbowAgent":
            support = self._support
            return lambda params, state, key: jnp.argmax(net.apply(params, state, support).q_values)
        if agent == "JaxImplicitQuantileAgent":
            k = self.agent.num_quantile_samples
            return lambda params, state, key: jnp.argmax(
                jnp.mean(net.apply(params, state, num_quantiles=k, rng=key).quantile_values, axis=0))
        return lambda params, state, key: jnp.argmax(net.apply(params, state).q_values)

    def train(self, total_timesteps: int, on_step=None) -> None:
        """Dopamine's runner loop for ``total_timesteps`` env steps, calling ``on_step(n)`` after each."""
        env, agent = self.env, self.agent
        obs, _ = env.reset(seed=self.seed)
        action = agent.begin_episode(obs)
        for t in range(1, int(total_timesteps) + 1):
            obs, reward, terminated, truncated, _ = env.step(int(action))
            if on_step is not None and on_step(t) is False:
                return
            if terminated or truncated:
                self._end_episode(float(reward), obs, bool(terminated))
                obs, _ = env.reset()
                action = agent.begin_episode(obs)
            else:
                action = agent.step(float(reward), obs)

    def _end_episode(self, reward: float, final_obs, terminated: bool) -> None:
        """Store the episode's last transition as Dopamine 3's replay did, not as ``end_episode`` does in 4.1.2.

        dopamine-rl 4.1.2's ``TransitionAccumulator`` reads a transition's terminal flag from the element *after*
        it and drops the element that ``end_episode`` stores: the agent's last transition (o_T, a_T, r_T) never
        reaches the replay, and the one before it, (o_T-1, a_T-1, r_T-1, o_T), is stored as terminal
        (google/dopamine#228). Dopamine 3's ``OutOfGraphReplayBuffer``, which the published MinAtar runs used,
        stores (o_T, a_T, r_T) with the terminal flag. Storing the last transition as a non-terminal one and then
        the final observation as the terminal element makes the accumulator emit exactly that: every transition
        once, the terminal flag on the last, n-step returns cut at the episode's end; a truncated episode (not
        terminal) stores its last transition bootstrapping from the final observation (the accumulator then
        drops the n - 1 before it when n > 1, as it does for every truncation). The replay's sampling, the
        losses and the update schedule are Dopamine's, unchanged; ``_train_step`` is not called here, as in
        ``end_episode``. Measured effect on DQN at 100k steps (docs/fidelity.md): SpaceInvaders 8.65 -> about
        20, against the built-in's 25.
        """
        agent = self.agent
        agent._store_transition(agent._observation, agent.action, reward, False)
        agent._store_transition(np.reshape(final_obs, agent.observation_shape), 0, 0.0, terminated, episode_end=True)

    def predict(self, obs, deterministic: bool = True) -> int:
        """The greedy action of the online network for one observation."""
        state = np.asarray(obs, dtype=np.float32).reshape(self.agent.observation_shape + (1,))
        self._eval_key, key = jax.random.split(self._eval_key)
        return int(self._greedy(self.agent.online_params, state, key))


def build_agent(spec, env) -> DopamineAgent:
    """The backend entry point named in :data:`rlaudit.fidelity.references.REFERENCES`."""
    return DopamineAgent(spec, env)


__all__ = ["DopamineAgent", "build_agent"]
