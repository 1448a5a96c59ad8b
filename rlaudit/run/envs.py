"""Build training and evaluation environments for a task, per suite.

Suites:

- ``gymnasium``: ``gymnasium.make(id, **kwargs)`` (classic control, Box2D where installed, MuJoCo, …).
- ``atari``: ale-py with the standard preprocessing (Machado et al., 2018): sticky actions 0.25, no-op
  reset (up to 30), frame skip 4 with max-pooling, 84×84 greyscale, frame stack 4 (channel-last). Training
  episodes end on life loss and rewards are clipped to their sign; *evaluation* episodes are full games
  with raw rewards. ``kwargs`` may set ``repeat_action_probability``, ``full_action_space``, ``noop_max``,
  ``frame_skip``, ``screen_size``, ``terminal_on_life_loss``, ``clip_reward``.
- ``minatar``: MinAtar's gymnasium ids (``MinAtar/Breakout-v1``) with the boolean observation as uint8
  0/1 in a ``Box(0, 1)``: stable-baselines3 stores it as such in the replay buffer (a quarter of float32's
  memory and copying) and casts it to float in the policy's preprocessing, giving the same numbers as a
  float32 observation (the high of 1, not 255, keeps it from being taken for an image and scaled).

``max_episode_steps`` counts agent steps (after frame skip on Atari: 27 000 = the usual 108 000 frames); a task
without it (and without ``evaluation.max_episode_steps``) has no cap beyond the environment's own (MinAtar's
ids register none, so its episodes end by themselves, as in Dopamine's MinAtar runs).

``clip_reward = [low, high]`` in a ``gymnasium`` or ``minatar`` task's ``kwargs`` clips the *training*
environment's rewards to that interval (Dopamine's runner clips the reward the agent learns from to [-1, 1]);
evaluation returns stay unclipped. (Atari's ``clip_reward`` is a boolean: sign clipping, as before.)
"""

from __future__ import annotations

import collections

import gymnasium
import numpy as np

from rlaudit.errors import InputError, did_you_mean
from rlaudit.run.spec import TaskSpec

SUITES: tuple[str, ...] = ("gymnasium", "atari", "minatar")
"""Supported environment suites."""

ATARI_DEFAULTS = {"repeat_action_probability": 0.25, "full_action_space": False, "noop_max": 30,
                  "frame_skip": 4, "screen_size": 84, "frame_stack": 4}
"""Standard Atari settings; each may be overridden in a task's ``kwargs``."""

_registered: set[str] = set()


def register_suite(suite: str) -> None:
    """Make the suite's environment ids known to gymnasium (ale-py and MinAtar register on demand)."""
    if suite in _registered:
        return
    if suite == "atari":
        import ale_py

        gymnasium.register_envs(ale_py)
    elif suite == "minatar":
        import minatar.gym

        if not any(k.startswith("MinAtar/") for k in gymnasium.registry):
            minatar.gym.register_envs()
    _registered.add(suite)


def suite_ids(suite: str) -> list[str]:
    """Environment ids available in ``suite``."""
    register_suite(suite)
    ids = list(gymnasium.registry)
    if suite == "atari":
        return [i for i in ids if i.startswith("ALE/")]
    if suite == "minatar":
        return [i for i in ids if i.startswith("MinAtar/")]
    return [i for i in ids if not i.startswith(("ALE/", "MinAtar/"))]


def check_task(task: TaskSpec, where: str) -> None:
    """Raise :class:`InputError` if the suite or id is unknown (did-you-mean over the suite's ids)."""
    if task.suite not in SUITES:
        raise InputError(f"{where}.suite: unknown suite {task.suite!r}{did_you_mean(task.suite, SUITES)}; "
                         f"choose from {', '.join(SUITES)}")
    ids = suite_ids(task.suite)
    if task.id not in ids:
        hint = did_you_mean(task.id, ids)
        if not hint:
            other = [s for s in SUITES if s != task.suite and task.id in suite_ids(s)]
            hint = f" (it is in suite {other[0]!r})" if other else ""
        raise InputError(f"{where}.id: unknown {task.suite} environment {task.id!r}{hint}")


def action_space_of(task: TaskSpec) -> gymnasium.Space:
    """The task's action space (builds the environment once, without stepping it)."""
    env = make_env(task, seed=0)
    try:
        return env.action_space
    finally:
        env.close()


def make_env(task: TaskSpec, seed: int, evaluation: bool = False) -> gymnasium.Env:
    """Build one environment for ``task``.

    Args:
        task: the task.
        seed: seeds the action space; episodes are seeded by whoever calls ``reset``.
        evaluation: build the evaluation variant (Atari: full games, raw rewards).

    Returns:
        A gymnasium environment (stable-baselines3 wraps it in its own vectorised env).
    """
    register_suite(task.suite)
    kwargs = task.kwargs_dict
    limit = {"max_episode_steps": task.max_episode_steps} if task.max_episode_steps else {}
    clip = None if task.suite == "atari" else reward_clip(kwargs.pop("clip_reward", None), task.id)
    if task.suite == "atari":
        env = _make_atari(task.id, kwargs, evaluation, task.max_episode_steps)
    elif task.suite == "minatar":
        env = _BoolToUint8(gymnasium.make(task.id, **limit, **kwargs))
    else:
        env = gymnasium.make(task.id, **limit, **kwargs)
    if clip is not None and not evaluation:
        env = gymnasium.wrappers.ClipReward(env, *clip)
    env.action_space.seed(seed)
    return env


def reward_clip(value, task_id: str) -> tuple[float, float] | None:
    """The ``clip_reward`` kwarg of a non-Atari task: ``[low, high]`` with low < high, or absent / ``false``.

    Raises:
        InputError: anything else, naming the task.
    """
    if value is None or value is False:
        return None
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) and value[0] < value[1])
    if not ok:
        raise InputError(f"task {task_id!r}: kwargs.clip_reward must be [low, high] with low < high (e.g. [-1, 1], "
                         f"Dopamine's training-reward clip), got {value!r}")
    return float(value[0]), float(value[1])


def _make_atari(env_id: str, kwargs: dict, evaluation: bool, max_episode_steps: int | None) -> gymnasium.Env:
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    opts = {**ATARI_DEFAULTS, **kwargs}
    env = gymnasium.make(env_id, frameskip=1, repeat_action_probability=opts.pop("repeat_action_probability"),
                         full_action_space=opts.pop("full_action_space"),
                         **{k: v for k, v in opts.items() if k not in ATARI_DEFAULTS
                            and k not in ("terminal_on_life_loss", "clip_reward")})
    env = AtariWrapper(env, noop_max=opts["noop_max"], frame_skip=opts["frame_skip"],
                       screen_size=opts["screen_size"],
                       terminal_on_life_loss=False if evaluation else opts.get("terminal_on_life_loss", True),
                       clip_reward=False if evaluation else opts.get("clip_reward", True))
    if max_episode_steps:
        env = gymnasium.wrappers.TimeLimit(env, max_episode_steps)
    return _FrameStackLast(env, opts["frame_stack"])


class _BoolToUint8(gymnasium.ObservationWrapper):
    """MinAtar observations are bool; stable-baselines3 wants a numeric ``Box`` (uint8 0/1 here)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Box(0, 1, env.observation_space.shape, np.uint8)

    def observation(self, obs):
        return obs.view(np.uint8) if obs.dtype == np.bool_ else np.asarray(obs, dtype=np.uint8)


class _FrameStackLast(gymnasium.Wrapper):
    """Stack the last ``n`` frames on the channel axis, ``(84, 84, 1)`` -> ``(84, 84, n)`` (as SB3's
    ``VecFrameStack``), so that one gymnasium env serves both training and evaluation."""

    def __init__(self, env: gymnasium.Env, n: int):
        super().__init__(env)
        self.n = n
        self.frames: collections.deque = collections.deque(maxlen=n)
        low = np.repeat(env.observation_space.low, n, axis=-1)
        high = np.repeat(env.observation_space.high, n, axis=-1)
        self.observation_space = gymnasium.spaces.Box(low, high, dtype=env.observation_space.dtype)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.n):
            self.frames.append(obs)
        return np.concatenate(self.frames, axis=-1), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return np.concatenate(self.frames, axis=-1), reward, terminated, truncated, info
