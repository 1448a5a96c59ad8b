"""Build and drive any registered algorithm through one small interface, :class:`Agent`.

rlaudit accepts two kinds of algorithm class.

**SB3 algorithms** — any subclass of :class:`stable_baselines3.common.base_class.BaseAlgorithm` (PPO, DQN,
sb3-contrib's algorithms, your own subclass). rlaudit constructs it as
``cls(policy, env, seed=seed, policy_kwargs=..., device="cpu", verbose=0, **hyperparams)``, trains it with
one ``learn(total_timesteps, callback=...)`` call and evaluates with ``predict(obs, deterministic=...)``.

**Learners** — any class that follows the *learner protocol*, so that non-SB3 code (a JAX agent, a
CleanRL-style script wrapped as a class) can be audited. Modelled on scikit-learn's estimator contract:

``__init__(self, env, *, seed, **hyperparams)``
    Every hyperparameter is an explicit keyword argument with a default (no ``**kwargs``); ``seed`` is
    required and all randomness (network initialisation, exploration, replay sampling, the env's resets)
    must derive from it, so that the same seed gives bit-identical results. ``__init__`` only stores its
    arguments (as attributes of the same names) — no training, no heavy work — so construction from a
    protocol's hyperparameters is cheap and ``get_params`` round-trips. ``env`` is a ``gymnasium.Env``.
``learn(self, total_timesteps, callback=None)``
    Train for ``total_timesteps`` environment steps in one call. After **every** environment step call
    ``callback(num_timesteps)`` (steps taken so far, counting from 1) when a callback is given; if it
    returns ``False``, stop and return. rlaudit evaluates at its budgets from inside this callback, so
    ``predict`` must work there and must not disturb training. Returns ``self``.
``predict(self, obs, deterministic=True)``
    The action for one observation (not a batch), as the env's ``step`` accepts it.
``get_params(self)``
    The hyperparameters as a dict of plain values (numbers, strings, bools, lists, dicts) such that
    ``cls(env, seed=seed, **learner.get_params())`` builds an identical learner. Excludes ``env`` and ``seed``.

Optional class attributes describe a plugin in the registry: ``rlaudit_action_spaces`` (e.g.
``("discrete",)``; default: all), ``rlaudit_description`` (default: first docstring line) and
``rlaudit_defaults`` (rlaudit-side default hyperparameters). ``rlaudit.testing.check_algorithm`` checks
all of this.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from rlaudit.algorithms.contract import LEARNER_METHODS, algorithm_kind, constructor_params
from rlaudit.algorithms.contract import kind_of_space as _kind_of_space
from rlaudit.algorithms.registry import AlgorithmSpec, get_spec
from rlaudit.errors import InputError

__all__ = ["LEARNER_METHODS", "Agent", "algorithm_kind", "constructor_params", "make_agent"]

def _plain(value: Any) -> Any:
    """Make a hyperparameter value JSON-friendly (tuples -> lists, classes/functions -> 'module:name')."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if inspect.isclass(value) or inspect.isfunction(value):
        return f"{value.__module__}:{value.__qualname__}"
    return repr(value)


class _StopTraining(Exception):
    """Raised from the callback when an algorithm keeps stepping after being told to stop."""


def _sb3_callback(on_step: Callable[[int], bool | None], on_boundary: Callable[[int], None] | None = None):
    """Wrap ``on_step(num_timesteps)`` as an SB3 ``BaseCallback``.

    Returning ``False`` stops SB3's own algorithms at once; a few (sb3-contrib's ARS, which evaluates
    whole candidate policies) ignore it, so a call after a stop raises :class:`_StopTraining`, which
    :meth:`Agent.train` catches. ``on_boundary(num_timesteps)``, when given, is called at the start of each
    rollout (in SB3's off-policy loop: after the last transition was stored and the last update made).
    """
    from stable_baselines3.common.callbacks import BaseCallback

    class StepCallback(BaseCallback):
        stopped = False

        def _on_step(self) -> bool:
            if self.stopped:
                raise _StopTraining
            self.stopped = on_step(self.num_timesteps) is False
            return not self.stopped

        def _on_rollout_start(self) -> None:
            if on_boundary is not None:
                on_boundary(self.num_timesteps)

    return StepCallback()


class Agent:
    """A constructed algorithm (either kind) behind one interface.

    Attributes:
        spec: the registry spec it was built from.
        model: the SB3 algorithm or the learner instance.
        seed: the construction seed.
    """

    def __init__(self, spec: AlgorithmSpec, model: Any, params: dict[str, Any], seed: int) -> None:
        self.spec = spec
        self.model = model
        self.seed = seed
        self._params = params

    @property
    def kind(self) -> str:
        """``"sb3"`` or ``"learner"``."""
        return self.spec.kind

    def train(self, total_timesteps: int, on_step: Callable[[int], bool | None] | None = None,
              on_boundary: Callable[[int], None] | None = None) -> None:
        """Train in one ``learn`` call to ``total_timesteps`` steps in all.

        An SB3 model restored from a checkpoint (:mod:`rlaudit.run.checkpoint`) has taken steps already: it
        learns the steps left with ``reset_num_timesteps=False``, which keeps its schedules on the total.

        Args:
            total_timesteps: environment steps to train for, counted from the start of the run.
            on_step: called with the number of steps taken so far after every environment step;
                returning ``False`` stops training early.
            on_boundary: SB3 algorithms only: called with the steps taken so far at the start of each rollout.
        """
        if self.kind == "sb3":
            callback = _sb3_callback(on_step or (lambda steps: True), on_boundary) \
                if on_step is not None or on_boundary is not None else None
            done = int(self.model.num_timesteps)
            try:
                self.model.learn(total_timesteps=int(total_timesteps) - done, callback=callback, progress_bar=False,
                                 reset_num_timesteps=done == 0)
            except _StopTraining:
                pass
        else:
            self.model.learn(int(total_timesteps), callback=on_step)

    def predict(self, obs: Any, deterministic: bool = True) -> Any:
        """The action for ``obs`` (one observation, or a batch for SB3 vectorised envs)."""
        if self.kind == "sb3":
            action, _ = self.model.predict(obs, deterministic=deterministic)
            return action
        return self.model.predict(obs, deterministic=deterministic)

    def get_params(self) -> dict[str, Any]:
        """The complete hyperparameters as plain values, including ``policy_kwargs`` for SB3 algorithms.

        ``make_agent(spec, env, hyperparams=p, policy_kwargs=p.pop("policy_kwargs", None), seed=...)``
        rebuilds an identical agent.
        """
        if self.kind == "learner":
            return _plain(dict(self.model.get_params()))
        return _plain(self._params)


def _default_policy(cls: type, observation_space: Any) -> str:
    from gymnasium import spaces
    from stable_baselines3.common.preprocessing import is_image_space

    aliases = getattr(cls, "policy_aliases", {}) or {}
    if isinstance(observation_space, spaces.Dict) and "MultiInputPolicy" in aliases:
        return "MultiInputPolicy"
    if is_image_space(observation_space, check_channels=False) and "CnnPolicy" in aliases:
        return "CnnPolicy"
    return "MlpPolicy"


def _spaces_of(env: Any) -> tuple[Any, Any]:
    return env.observation_space, env.action_space


def make_agent(
    name_or_spec: str | AlgorithmSpec,
    env: Any,
    hyperparams: Mapping[str, Any] | None = None,
    seed: int = 0,
    policy_kwargs: Mapping[str, Any] | None = None,
) -> Agent:
    """Construct a registered algorithm on ``env``, seeded.

    Args:
        name_or_spec: registry name or spec.
        env: a ``gymnasium.Env`` (either kind) or an SB3 ``VecEnv`` (SB3 algorithms only).
        hyperparams: protocol hyperparameters; checked against the class's keyword arguments. The spec's
            ``defaults`` apply underneath. ``policy`` picks the SB3 policy (default: ``CnnPolicy`` for image
            observations, ``MlpPolicy`` otherwise).
        seed: construction seed (network initialisation, exploration, replay sampling).
        policy_kwargs: SB3 ``policy_kwargs`` (SB3 algorithms only).

    Sets torch to one thread (parallel runs share the cores) and places SB3 models on the CPU unless
    ``hyperparams["device"]`` says otherwise.

    Returns:
        The :class:`Agent`.

    Raises:
        InputError: unknown algorithm or hyperparameter, unsupported action space, or a constructor that
            rejects the hyperparameters (its message is passed on).
    """
    import torch

    torch.set_num_threads(1)
    spec = get_spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    hyperparams = dict(hyperparams or {})
    where = f"algorithm {spec.name!r}"
    spec.check_hyperparams(hyperparams, where=f"{where} hyperparams")
    cls = spec.load()
    _, action_space = _spaces_of(env)
    if not spec.supports(action_space):
        raise InputError(
            f"{where} does not support {_kind_of_space(action_space)} action spaces "
            f"(supports {', '.join(sorted(spec.action_spaces))})"
        )
    known = constructor_params(cls)
    params = {k: v for k, v in known.items() if v is not inspect.Parameter.empty}
    params.update(spec.defaults)
    params.update(hyperparams)
    if spec.kind == "learner":
        if policy_kwargs:
            raise InputError(f"{where}: policy_kwargs apply to stable-baselines3 algorithms only; use hyperparams")
        if hasattr(env, "num_envs"):
            raise InputError(f"{where}: a learner takes a gymnasium.Env, not a vectorised env")
        # The learner's own keyword defaults stay its business: pass only what rlaudit or the protocol sets.
        given = {**spec.defaults, **hyperparams}
        model = _construct(where, cls, env=env, seed=seed, **given)
        return Agent(spec, model, given, seed)
    params.setdefault("policy", None)
    if params["policy"] is None or params["policy"] is inspect.Parameter.empty:
        params["policy"] = _default_policy(cls, env.observation_space)
    params.setdefault("device", "cpu")
    if params.get("device") == "auto":
        params["device"] = "cpu"
    pk = dict(policy_kwargs or {})
    from rlaudit.algorithms.networks import resolve_policy_kwargs

    # A copy (some algorithms, A2C, write their own entries into the dict they are given), with a built-in
    # features extractor's name turned into its class.
    built = resolve_policy_kwargs(pk, f"{where} policy_kwargs")
    model = _construct(where, cls, env=env, seed=int(seed), policy_kwargs=built or None, verbose=0, **params)
    return Agent(spec, model, {**params, "policy_kwargs": pk}, seed)


def _construct(where: str, cls: type, **kwargs: Any) -> Any:
    try:
        return cls(**kwargs)
    except (ValueError, TypeError, AssertionError, KeyError) as exc:
        raise InputError(f"{where}: cannot construct {cls.__name__}: {type(exc).__name__}: {exc}") from None
