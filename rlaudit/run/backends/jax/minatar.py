"""MinAtar in JAX: pgx's games with the ``minatar`` package's sticky actions, action sets and episode cap.

Registered in :mod:`.envs` for the five games, ``-v0`` and ``-v1`` (:class:`MinAtarEnv` is a :class:`.envs.JaxEnv`).

pgx (``pgx.minatar``) reimplements the five MinAtar games step for step (tested against the ``minatar`` package
with sticky actions off: observations, rewards and terminations agree). Two things differ from the ``minatar``
package and are done here instead of by pgx:

- **Sticky actions.** pgx draws the sticky coin itself but forgets the remembered action at every episode start
  (its ``_last_action`` is part of the state ``init`` returns); the ``minatar`` package keeps it across episodes
  (``Environment.last_action`` is never reset). pgx runs with ``sticky_action_prob = 0`` and this wrapper
  repeats the previous action with probability ``sticky_action_prob``, remembering it across episodes.
- **Action sets.** pgx's own minimal sets are the same as the ``minatar`` package's; the wrapper maps the
  agent's action index through the set read from the ``minatar`` package (or plays all 6 actions) and
  remembers the *mapped* action for stickiness, as ``minatar`` does.

Episodes reset automatically. An episode reaching ``max_episode_steps`` is *truncated* (gymnasium's
``TimeLimit``): its last transition is stored with ``done = 0`` and its real next observation, as
stable-baselines3 stores time-outs. Difficulty ramping is always on (MinAtar's default; pgx has no switch).
``clip_reward = [low, high]`` (a task kwarg) clips the rewards the agent learns from, as Dopamine's runner.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlaudit.run.backends.jax.config import AgentConfig
from rlaudit.run.backends.jax.envs import Transition

_CLASSES = {"asterix": "pgx.minatar.asterix:MinAtarAsterix", "breakout": "pgx.minatar.breakout:MinAtarBreakout",
            "freeway": "pgx.minatar.freeway:MinAtarFreeway", "seaquest": "pgx.minatar.seaquest:MinAtarSeaquest",
            "space_invaders": "pgx.minatar.space_invaders:MinAtarSpaceInvaders"}


class EnvState(NamedTuple):
    """One environment's state (one seed)."""

    game: object
    """pgx state of the current episode."""
    last_action: jax.Array
    """Full-set id of the previous action (sticky actions), kept across episodes; 0 at the start."""
    episode_steps: jax.Array
    """Agent steps of the current episode (for ``max_episode_steps``)."""


def pgx_game(game: str):
    """pgx's MinAtar environment for ``game`` with all 6 actions and no sticky actions of its own."""
    import importlib

    module, attr = _CLASSES[game].split(":")
    return getattr(importlib.import_module(module), attr)(use_minimal_action_set=False, sticky_action_prob=0.0)


class MinAtarEnv:
    """``reset`` / ``step`` of one environment as pure JAX functions (vmap them over seeds)."""

    def __init__(self, cfg: AgentConfig):
        self.env = pgx_game(cfg.game)
        self.actions = jnp.asarray(cfg.minimal_actions if cfg.minimal_actions else tuple(range(6)), jnp.int32)
        self.sticky = float(cfg.sticky_action_prob)
        self.cap = cfg.max_episode_steps
        self.clip = cfg.clip_reward

    def reset(self, key: jax.Array) -> tuple[EnvState, jax.Array]:
        """A first episode: its state and observation."""
        game = self.env.init(key)
        return EnvState(game, jnp.int32(0), jnp.int32(0)), game.observation

    def step(self, state: EnvState, action: jax.Array, key: jax.Array) -> tuple[EnvState, jax.Array, Transition]:
        """Play action index ``action``; a finished episode is replaced by a new one.

        Returns:
            ``(state, observation to act on next, transition for the buffer)``.
        """
        k_sticky, k_step, k_reset = jax.random.split(key, 3)
        chosen = self.actions[action]
        full_action = jnp.where(jax.random.uniform(k_sticky) < self.sticky, state.last_action, chosen)
        game = self.env.step(state.game, full_action, k_step)
        steps = state.episode_steps + 1
        terminated = game.terminated
        timeout = (~terminated) & (steps >= self.cap) if self.cap else jnp.bool_(False)
        done = terminated | timeout
        fresh = self.env.init(k_reset)
        game_next = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh, game)
        state = EnvState(game_next, full_action.astype(jnp.int32), jnp.where(done, 0, steps).astype(jnp.int32))
        reward = game.rewards[0]
        if self.clip is not None:  # training rewards only (evaluations play the minatar package's env)
            reward = jnp.clip(reward, self.clip[0], self.clip[1])
        transition = Transition(game.observation, reward, done, timeout)
        return state, game_next.observation, transition
