"""Conformance kit for algorithm authors: does an algorithm work with rlaudit's run engine?

Modelled on scikit-learn's ``check_estimator``. ``check_algorithm(name_or_class)`` runs every check on
CartPole-v1 (discrete actions) or Pendulum-v1 (continuous) at a tiny budget and raises
``AssertionError`` listing the checks that failed::

    from rlaudit.testing import check_algorithm
    check_algorithm("MyAlgo")                      # a registered name (built-in or plugin); prints a line on success
    check_algorithm(MyLearner, hyperparams={"learning_rate": 1e-3})   # or the class itself

In pytest, one test per check (``parametrize_with_checks``)::

    from rlaudit.testing import parametrize_with_checks

    @parametrize_with_checks(["MyAlgo"])
    def test_rlaudit_conformance(algorithm, check):
        check(algorithm)

The checks (:data:`CHECKS`): construction from protocol hyperparameters, training with the per-step
callback (called after every step, counting from 1; returning ``False`` stops training), evaluation
(actions in the action space), same seed -> same evaluation returns, ``get_params`` round-trips, and a
bad hyperparameter name gives a clear :class:`~rlaudit.errors.InputError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlaudit.algorithms import AlgorithmSpec, get_spec, make_agent
from rlaudit.errors import InputError

DISCRETE_ENV = "CartPole-v1"
CONTINUOUS_ENV = "Pendulum-v1"
EVAL_SEED = 12_345
MAX_EVAL_STEPS = 200


@dataclass(frozen=True)
class Subject:
    """What the checks run on: an algorithm and the settings to exercise it with.

    Attributes:
        spec: the algorithm's registry spec (an unregistered class gets an ad-hoc one).
        hyperparams: hyperparameters as a protocol would give them (keep the budget tiny).
        policy_kwargs: SB3 ``policy_kwargs``.
        total_timesteps: training budget of each check.
        env_id: gymnasium id; default CartPole-v1 for discrete actions, Pendulum-v1 otherwise.
        seed: construction seed.
    """

    spec: AlgorithmSpec
    hyperparams: Mapping[str, Any] = field(default_factory=dict)
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    total_timesteps: int = 200
    env_id: str | None = None
    seed: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    def make_env(self):
        import gymnasium as gym

        if self.env_id is not None:
            return gym.make(self.env_id)
        return gym.make(DISCRETE_ENV if "discrete" in self.spec.action_spaces else CONTINUOUS_ENV)

    def make_agent(self, hyperparams: Mapping[str, Any] | None = None, policy_kwargs: Mapping[str, Any] | None = None):
        hp = dict(self.hyperparams if hyperparams is None else hyperparams)
        pk = dict(self.policy_kwargs if policy_kwargs is None else policy_kwargs)
        return make_agent(self.spec, self.make_env(), hp, self.seed, pk or None)


def _spec_for(name_or_class: str | type | AlgorithmSpec) -> AlgorithmSpec:
    if isinstance(name_or_class, AlgorithmSpec):
        return name_or_class
    if isinstance(name_or_class, str):
        return get_spec(name_or_class)
    cls = name_or_class
    spec = AlgorithmSpec(
        name=cls.__name__,
        entry_point=f"{cls.__module__}:{cls.__qualname__}",
        source=f"class {cls.__module__}.{cls.__qualname__}",
    )
    # Classes defined inside functions cannot be re-imported; classify the object itself.
    from rlaudit.algorithms.adapter import algorithm_kind

    spec._kind = algorithm_kind(cls)
    spec._cls = cls
    spec._action_spaces = frozenset(getattr(cls, "rlaudit_action_spaces", ("discrete", "box")))
    spec._description = cls.__name__
    spec._defaults = dict(getattr(cls, "rlaudit_defaults", {}) or {})
    return spec


def evaluate(agent: Any, env: Any, n_episodes: int = 2, seed: int = EVAL_SEED) -> list[float]:
    """Undiscounted returns of ``n_episodes`` deterministic episodes (capped at ``MAX_EVAL_STEPS`` steps).

    Raises:
        AssertionError: an action outside ``env.action_space``.
    """
    returns = []
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=seed + episode)
        total = 0.0
        for _ in range(MAX_EVAL_STEPS):
            action = np.asarray(agent.predict(obs, deterministic=True))
            # Compare in the space's own dtype (SB3 returns float32 boxes as float32, integers as int64).
            action = action.item() if action.dtype.kind in "iu" and action.shape == () else action
            candidate = action.astype(env.action_space.dtype) if isinstance(action, np.ndarray) else action
            assert env.action_space.contains(candidate), (
                f"predict returned {action!r}, outside the action space {env.action_space}"
            )
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        returns.append(total)
    return returns


# --- the checks ----------------------------------------------------------------------------------------


def check_construction(s: Subject) -> None:
    """Hyperparameters pass the registry's check; construction works; ``get_params`` is plain JSON data."""
    s.spec.check_hyperparams(dict(s.hyperparams), where=f"{s.name} hyperparams")
    agent = s.make_agent()
    params = agent.get_params()
    assert isinstance(params, dict), f"get_params() returned {type(params).__name__}, expected dict"
    json.dumps(params)


def check_training_callback(s: Subject) -> None:
    """``train`` calls ``on_step`` after every step (1, 2, 3, ...) up to the budget; ``False`` stops it."""
    agent = s.make_agent()
    seen: list[int] = []
    agent.train(s.total_timesteps, lambda n: seen.append(int(n)))
    assert seen, "on_step was never called"
    assert seen[0] == 1, f"first on_step count is {seen[0]}, expected 1"
    assert all(b == a + 1 for a, b in zip(seen, seen[1:])), "on_step counts are not 1, 2, 3, ... (one call per step)"
    assert seen[-1] >= s.total_timesteps, f"training stopped at {seen[-1]} < {s.total_timesteps} steps"

    stop_at = max(1, s.total_timesteps // 4)
    agent = s.make_agent()
    seen = []

    def stop(n: int) -> bool:
        seen.append(int(n))
        return n < stop_at

    agent.train(s.total_timesteps, stop)
    assert seen[-1] == stop_at, f"on_step returned False at step {stop_at} but training went on to {seen[-1]}"


def check_evaluation(s: Subject) -> None:
    """After training, ``predict`` gives valid actions for a whole episode."""
    agent = s.make_agent()
    agent.train(s.total_timesteps)
    returns = evaluate(agent, s.make_env(), n_episodes=1)
    assert np.isfinite(returns).all(), f"non-finite evaluation return {returns}"


def check_same_seed_same_returns(s: Subject) -> None:
    """Two agents built with the same seed and trained alike give bit-identical evaluation returns."""
    results = []
    for _ in range(2):
        agent = s.make_agent()
        agent.train(s.total_timesteps)
        results.append(evaluate(agent, s.make_env(), n_episodes=2))
    assert results[0] == results[1], f"same seed, different evaluation returns: {results[0]} vs {results[1]}"


def check_get_params_round_trip(s: Subject) -> None:
    """Building from ``get_params()`` gives an agent with the same ``get_params()``."""
    params = s.make_agent().get_params()
    again = dict(params)
    policy_kwargs = again.pop("policy_kwargs", None) or {}
    rebuilt = s.make_agent(hyperparams=again, policy_kwargs=policy_kwargs).get_params()
    assert rebuilt == params, f"get_params() does not round-trip: {params} -> {rebuilt}"


def check_bad_hyperparameter(s: Subject) -> None:
    """A misspelt hyperparameter is rejected with an :class:`InputError` naming it and the algorithm."""
    bad = "learning_rat_e"
    for attempt in (
        lambda: s.spec.check_hyperparams({bad: 1}, where="protocol.toml: algorithms[0].hyperparams"),
        lambda: s.make_agent(hyperparams={**s.hyperparams, bad: 1}),
    ):
        try:
            attempt()
        except InputError as exc:
            message = str(exc)
            assert bad in message and s.name in message, f"error does not name {bad!r} and {s.name!r}: {message}"
            assert "\n" not in message, f"error is not one line: {message!r}"
        else:
            raise AssertionError(f"hyperparameter {bad!r} was accepted")


CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_construction,
    check_training_callback,
    check_evaluation,
    check_same_seed_same_returns,
    check_get_params_round_trip,
    check_bad_hyperparameter,
)
"""Every conformance check, in the order ``check_algorithm`` runs them."""


def make_subject(
    name_or_class: str | type | AlgorithmSpec,
    hyperparams: Mapping[str, Any] | None = None,
    policy_kwargs: Mapping[str, Any] | None = None,
    total_timesteps: int = 200,
    env_id: str | None = None,
) -> Subject:
    """Resolve an algorithm (registered name, spec or class) into a :class:`Subject` for the checks."""
    return Subject(
        _spec_for(name_or_class), dict(hyperparams or {}), dict(policy_kwargs or {}), int(total_timesteps), env_id
    )


def check_algorithm(
    name_or_class: str | type | AlgorithmSpec,
    hyperparams: Mapping[str, Any] | None = None,
    policy_kwargs: Mapping[str, Any] | None = None,
    total_timesteps: int = 200,
    env_id: str | None = None,
    quiet: bool = False,
) -> str:
    """Run every conformance check on an algorithm.

    Args:
        name_or_class: a registered name, an :class:`AlgorithmSpec`, or the class itself (SB3 algorithm
            or learner).
        hyperparams: protocol hyperparameters to build it with (keep the budget tiny: e.g. PPO
            ``n_steps = 64``).
        policy_kwargs: SB3 ``policy_kwargs`` (e.g. small ``net_arch``).
        total_timesteps: training budget of each check.
        env_id: gymnasium id; default CartPole-v1 (discrete) or Pendulum-v1 (continuous).
        quiet: do not print the line saying that every check passed.

    Returns:
        That line: ``"MyAlgo passes all 6 conformance checks on CartPole-v1 (check_construction, …)"``.

    Raises:
        AssertionError: listing every failed check and why.
    """
    subject = make_subject(name_or_class, hyperparams, policy_kwargs, total_timesteps, env_id)
    failures = []
    for check in CHECKS:
        try:
            check(subject)
        except Exception as exc:  # noqa: BLE001 - every failure is collected and reported
            failures.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
    if failures:
        raise AssertionError(f"{subject.name} fails {len(failures)} conformance check(s):\n  " + "\n  ".join(failures))
    env = subject.env_id or (DISCRETE_ENV if "discrete" in subject.spec.action_spaces else CONTINUOUS_ENV)
    line = (f"{subject.name} passes all {len(CHECKS)} conformance checks on {env} "
            f"({', '.join(check.__name__ for check in CHECKS)})")
    if not quiet:  # silence on success reads as "did anything run?"
        print(line)
    return line


def parametrize_with_checks(
    algorithms: Iterable[str | type | Subject],
    **subject_kwargs: Any,
):
    """A ``pytest.mark.parametrize`` over (algorithm, check) pairs, one test per check.

    Args:
        algorithms: registered names, classes or ready :class:`Subject` objects.
        **subject_kwargs: passed to :func:`make_subject` for names and classes (``hyperparams``, ...).

    Returns:
        A decorator for a test taking ``algorithm`` (a :class:`Subject`) and ``check`` (call it on the
        subject).
    """
    import pytest

    params = []
    for algorithm in algorithms:
        subject = algorithm if isinstance(algorithm, Subject) else make_subject(algorithm, **subject_kwargs)
        for check in CHECKS:
            params.append(pytest.param(subject, check, id=f"{subject.name}-{check.__name__}"))
    return pytest.mark.parametrize(("algorithm", "check"), params)


__all__ = [
    "CHECKS",
    "Subject",
    "check_algorithm",
    "evaluate",
    "make_subject",
    "parametrize_with_checks",
]
