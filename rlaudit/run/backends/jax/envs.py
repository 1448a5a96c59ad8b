"""The JAX backend's environment interface and its registry: which tasks it trains on, and how to build them.

An environment behind the interface is a class built from the run's :class:`~.config.AgentConfig` whose
``reset`` and ``step`` are pure JAX functions of one environment (the training loop vmaps them over seeds and
compiles them into the loop, see :class:`JaxEnv`). The registry maps a task, ``(suite, id)`` as a protocol
names it, to an :class:`EnvSpec`: the class as a ``"module:attr"`` string (imported when a program is built,
so that ``validate`` never imports JAX), the check of the task's ``kwargs`` and the settings the compiled
program is built from (observation shape and dtype, number of actions, episode cap), both computed without
JAX. Registered here:

- the five MinAtar games, ``-v0`` and ``-v1`` (suite ``minatar``): pgx's games with the ``minatar`` package's
  sticky actions and action sets (:mod:`.minatar`);
- gymnasium's ``CartPole-v1`` (suite ``gymnasium``): gymnasium's cart-pole written in JAX (:mod:`.cartpole`).

To add an environment: write a class with ``reset`` / ``step`` as :class:`JaxEnv` says, a ``settings``
function giving its :data:`ENV_FIELDS` and a ``check`` function for its ``kwargs``, and :func:`register` an
:class:`EnvSpec` per task id. Evaluations never play the JAX environment (they play the task's gymnasium
environment, as on the SB3 backend), so only the training environment needs writing.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from rlaudit.errors import InputError, did_you_mean

if TYPE_CHECKING:
    import jax

    from rlaudit.run.backends.jax.config import AgentConfig
    from rlaudit.run.spec import TaskSpec


class Transition(NamedTuple):
    """What one step gives the replay buffer (one environment; leading seed axis under ``vmap``)."""

    next_obs: jax.Array
    """Observation after the step (the real last one when the episode ended), shape ``obs_shape``."""
    reward: jax.Array
    """The reward the agent learns from, float32 ``()``."""
    done: jax.Array
    """The episode ended (terminated or truncated), as SB3's ``dones``, bool ``()``."""
    timeout: jax.Array
    """It ended by the episode cap only (gymnasium's ``TimeLimit`` truncation, not a termination), bool ``()``."""


class JaxEnv(Protocol):
    """One training environment as pure JAX functions; built as ``Class(cfg)`` from the run's ``AgentConfig``.

    ``state`` is any pytree (the environment's own); ``obs`` has shape ``cfg.obs_shape`` and dtype
    ``cfg.obs_dtype``; ``action`` is an int32 index in ``[0, cfg.n_actions)``. Episodes reset automatically:
    ``step`` returns the observation to act on next (a new episode's first one after an episode ended) and
    the transition with the real last observation. Both are traced once into the compiled loop, so no Python
    control flow on traced values, and every random draw comes from ``key``.
    """

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        """A first episode: ``(state, observation)``."""

    def step(self, state: Any, action: jax.Array, key: jax.Array) -> tuple[Any, jax.Array, Transition]:
        """Play ``action``: ``(state, observation to act on next, transition for the buffer)``."""


ENV_FIELDS = ("game", "minimal_actions", "sticky_action_prob", "max_episode_steps", "clip_reward", "n_actions",
              "obs_shape", "obs_dtype")
"""The :class:`~.config.AgentConfig` fields an environment's ``settings`` gives (see their docstrings there)."""

OBS_DTYPES = ("bool", "float32")
"""Observation dtypes the replay buffer stores: ``bool`` bit-packed (8 cells a byte), ``float32`` as is."""


@dataclass(frozen=True)
class EnvSpec:
    """One task the JAX backend trains on."""

    suite: str
    """The task's suite, as a protocol names it (``minatar``, ``gymnasium``)."""
    id: str
    """The task's gymnasium id (``MinAtar/Breakout-v1``, ``CartPole-v1``)."""
    entry_point: str
    """``"module:attr"`` of the :class:`JaxEnv` class, imported when a program is built."""
    settings: Callable[[TaskSpec], dict]
    """The task's :data:`ENV_FIELDS` (no JAX)."""
    check: Callable[[TaskSpec, str, str], None]
    """Refuses what the environment does not implement: ``check(task, where, can)`` raises
    :class:`InputError` at ``where``, ending with ``can`` (the backends that can run it)."""
    extractors: tuple[str, ...] = ("flatten",)
    """``policy_kwargs.features_extractor`` values its observations fit."""
    source: str = ""
    """Where the environment comes from, for messages (``pgx``)."""


ENVS: dict[tuple[str, str], EnvSpec] = {}
"""The registry: ``(suite, id)`` -> :class:`EnvSpec`."""


def register(spec: EnvSpec) -> None:
    """Add ``spec`` to :data:`ENVS` (a warning when its task is registered already; the new one wins)."""
    key = (spec.suite, spec.id)
    if key in ENVS:
        warnings.warn(f"jax backend: environment {spec.suite} {spec.id!r} registered twice; the new one wins",
                      stacklevel=2)
    ENVS[key] = spec


def env_spec(task) -> EnvSpec | None:
    """The :class:`EnvSpec` of ``task`` (a :class:`~rlaudit.run.spec.TaskSpec` or protocol task), or ``None``."""
    return ENVS.get((task.suite, task.id))


def runnable() -> str:
    """The tasks the JAX backend trains on, one phrase per suite: ``minatar MinAtar/Asterix-v0, …``."""
    by_suite: dict[str, list[str]] = {}
    for suite, task_id in ENVS:
        by_suite.setdefault(suite, []).append(task_id)
    return "; ".join(f"{suite} {', '.join(ids)}" for suite, ids in by_suite.items())


def check_task(task, where: str, can: str) -> None:
    """Refuse a task no environment is registered for, in one line naming those that are, then the task's
    ``kwargs`` as its environment checks them."""
    spec = env_spec(task)
    if spec is None:
        hint = did_you_mean(task.id, [i for s, i in ENVS if s == task.suite])
        raise InputError(f"{where}: the jax backend does not implement {task.suite} {task.id!r}{hint}; it runs "
                         f"{runnable()}{can}")
    spec.check(task, where, can)


def settings(task) -> dict:
    """The :data:`ENV_FIELDS` of ``task`` (a :class:`~rlaudit.run.spec.TaskSpec`), plus ``suite`` and ``task_id``."""
    spec = env_spec(task)
    if spec is None:
        raise InputError(f"the jax backend does not implement {task.suite} {task.id!r}; it runs {runnable()}")
    values = spec.settings(task)
    assert set(values) == set(ENV_FIELDS) and values["obs_dtype"] in OBS_DTYPES, (spec.id, sorted(values))
    return {"suite": task.suite, "task_id": task.id, **values}


def make_env(cfg: AgentConfig) -> JaxEnv:
    """Build the training environment of ``cfg`` (its registered class, imported now)."""
    spec = ENVS[(cfg.suite, cfg.task_id)]
    module, attr = spec.entry_point.split(":")
    return getattr(importlib.import_module(module), attr)(cfg)


# ------------------------------------------------------------------------------------------ MinAtar (pgx)
GAMES: dict[str, str] = {
    "MinAtar/Asterix-v0": "asterix", "MinAtar/Asterix-v1": "asterix",
    "MinAtar/Breakout-v0": "breakout", "MinAtar/Breakout-v1": "breakout",
    "MinAtar/Freeway-v0": "freeway", "MinAtar/Freeway-v1": "freeway",
    "MinAtar/Seaquest-v0": "seaquest", "MinAtar/Seaquest-v1": "seaquest",
    "MinAtar/SpaceInvaders-v0": "space_invaders", "MinAtar/SpaceInvaders-v1": "space_invaders",
}
"""MinAtar gymnasium ids -> game (pgx ``minatar-<game>``). ``-v0`` has the full 6-action set, ``-v1`` the
minimal one, as in the ``minatar`` package's registration."""

MINATAR_KWARGS = ("use_minimal_action_set", "sticky_action_prob", "difficulty_ramping", "clip_reward")
"""MinAtar options the JAX environment implements (``difficulty_ramping`` only at its default, true;
``clip_reward = [low, high]`` clips the training rewards, as Dopamine's runner, never the evaluation's)."""

OBS_CHANNELS = {"asterix": 4, "breakout": 4, "freeway": 7, "seaquest": 10, "space_invaders": 6}
"""Observation channels per game (observations are 10 x 10 x channels, boolean)."""


def check_minatar(task, where: str, can: str) -> None:
    """MinAtar's ``kwargs`` as pgx and the wrapper implement them."""
    for key, value in task.kwargs.items():
        if key not in MINATAR_KWARGS:
            raise InputError(f"{where}.kwargs.{key}: not implemented by the jax backend's MinAtar (pgx){can}")
        if key == "difficulty_ramping" and value is not True:
            raise InputError(f"{where}.kwargs.difficulty_ramping: pgx's MinAtar always ramps the difficulty{can}")
        if key == "sticky_action_prob" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                            or not 0 <= value <= 1):
            raise InputError(f"{where}.kwargs.sticky_action_prob: expected a probability in [0, 1], got {value!r}")
        if key == "clip_reward" and value is not False and not (isinstance(value, list) and len(value) == 2
                                         and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 and math.isfinite(v) for v in value) and value[0] < value[1]):
            raise InputError(f"{where}.kwargs.clip_reward: expected [low, high] with low < high (e.g. [-1, 1]), "
                             f"got {value!r}")
        if key == "use_minimal_action_set" and not isinstance(value, bool):
            raise InputError(f"{where}.kwargs.use_minimal_action_set: expected true or false, got {value!r}")


def minimal_action_set(game: str) -> tuple[int, ...]:
    """The game's minimal action set as the ``minatar`` package defines it (full-set action ids)."""
    env = importlib.import_module(f"minatar.environments.{game}").Env()
    return tuple(int(a) for a in env.minimal_action_set())


def uses_minimal_actions(task) -> bool:
    """Whether ``task`` (a :class:`~rlaudit.run.spec.TaskSpec`) plays the minimal action set: its kwargs, else
    its id's registration (``-v1``: minimal, ``-v0``: full)."""
    kwargs = task.kwargs_dict
    if "use_minimal_action_set" in kwargs:
        return bool(kwargs["use_minimal_action_set"])
    return task.id.endswith("-v1")


def minatar_settings(task) -> dict:
    """A MinAtar task's settings: the action set, sticky actions (0.1 unless given), the task's cap (MinAtar's
    ids register none), the training-reward clip, bool ``(10, 10, C)`` observations."""
    game = GAMES[task.id]
    kwargs = task.kwargs_dict
    minimal = minimal_action_set(game) if uses_minimal_actions(task) else None
    clip = kwargs.get("clip_reward")
    return dict(game=game, minimal_actions=minimal, sticky_action_prob=float(kwargs.get("sticky_action_prob", 0.1)),
                max_episode_steps=task.max_episode_steps,
                clip_reward=tuple(float(v) for v in clip) if clip not in (None, False) else None,
                n_actions=len(minimal) if minimal else 6, obs_shape=(10, 10, OBS_CHANNELS[game]), obs_dtype="bool")


for _task_id in GAMES:
    register(EnvSpec("minatar", _task_id, "rlaudit.run.backends.jax.minatar:MinAtarEnv", minatar_settings,
                     check_minatar, extractors=("flatten", "minatar"), source="pgx"))


# ------------------------------------------------------------------------------------------ classic control
CARTPOLE_MAX_EPISODE_STEPS = 500
"""``CartPole-v1``'s ``TimeLimit`` in gymnasium's registration."""


def check_cartpole(task, where: str, can: str) -> None:
    """``CartPole-v1`` as registered: no ``kwargs`` (``sutton_barto_reward``, ``render_mode``: not implemented)."""
    if task.kwargs:
        raise InputError(f"{where}.kwargs.{next(iter(task.kwargs))}: not implemented by the jax backend's "
                         f"CartPole-v1 (it takes no kwargs){can}")


def cartpole_settings(task) -> dict:
    """``CartPole-v1``: 2 actions, float32 ``(4,)`` observations, the task's cap or the registration's 500."""
    return dict(game=None, minimal_actions=None, sticky_action_prob=0.0,
                max_episode_steps=task.max_episode_steps or CARTPOLE_MAX_EPISODE_STEPS, clip_reward=None,
                n_actions=2, obs_shape=(4,), obs_dtype="float32")


register(EnvSpec("gymnasium", "CartPole-v1", "rlaudit.run.backends.jax.cartpole:CartPoleEnv", cartpole_settings,
                 check_cartpole, source="rlaudit's JAX port of gymnasium's cart-pole"))
