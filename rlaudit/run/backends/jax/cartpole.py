"""gymnasium's ``CartPole-v1`` in JAX (a :class:`.envs.JaxEnv`, registered in :mod:`.envs`).

The dynamics are ``gymnasium.envs.classic_control.cartpole.CartPoleEnv``'s (gymnasium 1.x; the cart-pole of
Barto, Sutton and Anderson, 1983), operation for operation: gravity 9.8, cart mass 1.0, pole mass 0.1, half
pole length 0.5, force ±10 (action 1 pushes right, 0 left), explicit Euler steps of ``tau = 0.02`` s; the
episode *terminates* when ``|x| > 2.4`` or ``|theta| > 12°`` (``12 * 2 * pi / 360`` rad); reward 1 for every
step, the terminating one included (``sutton_barto_reward = False``); ``CartPole-v1``'s ``TimeLimit`` of 500
steps (or the task's ``max_episode_steps``) *truncates* it: its last transition is stored with ``timeout``, as
stable-baselines3 stores ``TimeLimit.truncated``. Episodes reset automatically (:class:`.envs.JaxEnv`).

Differences from gymnasium, all in training only (evaluations play gymnasium's environment itself):

- **Float32.** gymnasium steps a float64 state (NumPy float64 scalars, Python-float constants) and returns
  it cast to float32; here the state, the constants (gymnasium's float64 values rounded once) and every
  operation are float32, as JAX computes without ``jax_enable_x64`` (a process-wide switch the rest of the
  backend does not want). One step from the same state gives gymnasium's observation to ~1 ulp (2.4e-7
  at most, measured); along an episode the unstable dynamics amplify the rounding (2.6e-4 at worst over
  20,000 random-action steps, where a NumPy float32 port of gymnasium's step drifts by 1.4e-4), and open loop
  over hundreds of steps the float32 and float64 trajectories part. A termination can differ only when
  ``x`` or ``theta`` ends a step within that rounding of its threshold (none did in the 20,000 steps).
- **The initial state's draw.** Uniform in ``[-0.05, 0.05)`` for each of the four variables, as gymnasium's,
  but drawn from the step's JAX key, not from the environment's NumPy generator: the same seed does not give
  gymnasium's starting states.
- No ``render_mode``, no ``sutton_barto_reward``, no reset bounds (``options``): a task that sets a kwarg is
  refused by ``validate``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlaudit.run.backends.jax.config import AgentConfig
from rlaudit.run.backends.jax.envs import Transition

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5
"""Half the pole's length, as gymnasium's ``length``."""
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
"""Seconds between state updates."""
THETA_THRESHOLD_RADIANS = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
RESET_BOUND = 0.05
"""Initial state uniform in ``[-RESET_BOUND, RESET_BOUND)`` per variable."""


class CartPoleState(NamedTuple):
    """One environment's state (one seed)."""

    physics: jax.Array
    """``(x, x_dot, theta, theta_dot)``, float32 ``(4,)``; also the observation."""
    episode_steps: jax.Array
    """Agent steps of the current episode (for ``max_episode_steps``)."""


def _f32(value: float) -> jax.Array:
    """gymnasium's float64 constant rounded once to float32."""
    return jnp.float32(value)


def dynamics(physics: jax.Array, action: jax.Array) -> jax.Array:
    """One Euler step of gymnasium's equations, float32 (the same operations in the same order)."""
    x, x_dot, theta, theta_dot = physics[0], physics[1], physics[2], physics[3]
    force = jnp.where(action == 1, _f32(FORCE_MAG), _f32(-FORCE_MAG))
    costheta = jnp.cos(theta)
    sintheta = jnp.sin(theta)
    temp = (force + _f32(POLEMASS_LENGTH) * jnp.square(theta_dot) * sintheta) / _f32(TOTAL_MASS)
    thetaacc = (_f32(GRAVITY) * sintheta - costheta * temp) / (
        _f32(LENGTH) * (_f32(4.0 / 3.0) - _f32(MASSPOLE) * jnp.square(costheta) / _f32(TOTAL_MASS)))
    xacc = temp - _f32(POLEMASS_LENGTH) * thetaacc * costheta / _f32(TOTAL_MASS)
    tau = _f32(TAU)
    return jnp.stack([x + tau * x_dot, x_dot + tau * xacc, theta + tau * theta_dot, theta_dot + tau * thetaacc])


def terminated(physics: jax.Array) -> jax.Array:
    """The cart left ``[-2.4, 2.4]`` or the pole ``[-12°, 12°]`` (gymnasium's strict comparisons)."""
    x, theta = physics[0], physics[2]
    x_max, theta_max = _f32(X_THRESHOLD), _f32(THETA_THRESHOLD_RADIANS)
    return (x < -x_max) | (x > x_max) | (theta < -theta_max) | (theta > theta_max)


class CartPoleEnv:
    """``reset`` / ``step`` of one ``CartPole-v1`` as pure JAX functions (vmap them over seeds)."""

    def __init__(self, cfg: AgentConfig):
        self.cap = cfg.max_episode_steps

    def reset(self, key: jax.Array) -> tuple[CartPoleState, jax.Array]:
        """A first episode: its state and observation."""
        physics = jax.random.uniform(key, (4,), jnp.float32, -RESET_BOUND, RESET_BOUND)
        return CartPoleState(physics, jnp.int32(0)), physics

    def step(self, state: CartPoleState, action: jax.Array,
             key: jax.Array) -> tuple[CartPoleState, jax.Array, Transition]:
        """Push left (0) or right (1); a finished episode is replaced by a new one drawn from ``key``.

        Returns:
            ``(state, observation to act on next, transition for the buffer)``.
        """
        physics = dynamics(state.physics, action)
        steps = state.episode_steps + 1
        ended = terminated(physics)
        timeout = (~ended) & (steps >= self.cap) if self.cap else jnp.bool_(False)
        done = ended | timeout
        fresh, _ = self.reset(key)
        state = CartPoleState(jnp.where(done, fresh.physics, physics), jnp.where(done, 0, steps).astype(jnp.int32))
        transition = Transition(physics, jnp.float32(1.0), done, timeout)
        return state, state.physics, transition
