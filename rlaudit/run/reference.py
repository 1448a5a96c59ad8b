"""Reference scores a protocol's own evaluation can measure: the uniformly random policy.

A min-max normalisation needs a low and a high reference per task. Suites without a published table
(MinAtar, most gymnasium tasks) can take the low end from the random policy, measured here on the very
evaluation a run gets (same environment factory, step limit and episode seeds as
:func:`rlaudit.run.runner.evaluate`), so "0" means "no better than chance" under the protocol's own rules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rlaudit.run.envs import make_env
from rlaudit.run.runner import evaluate
from rlaudit.run.spec import EvalSpec, TaskSpec


@dataclass(frozen=True)
class RandomReference:
    """Returns of the uniformly random policy on one task."""

    task: str
    """Task id."""
    returns: tuple[float, ...]
    """One return per episode, shape ``(n_episodes,)``."""

    @property
    def mean(self) -> float:
        """Mean return."""
        return float(np.mean(self.returns))

    @property
    def sem(self) -> float:
        """Standard error of the mean (0 for a single episode)."""
        n = len(self.returns)
        return float(np.std(self.returns, ddof=1) / np.sqrt(n)) if n > 1 else 0.0


class _NoPolicy:
    """Stands in for an agent whose every action is random (ε = 1): asked for an action, it is a bug."""

    kind = "random"

    def predict(self, obs, deterministic=True):
        raise AssertionError("the random policy was asked for a greedy action")


def random_policy_reference(task: TaskSpec, ev: EvalSpec, n_episodes: int) -> RandomReference:
    """Play ``n_episodes`` episodes of the uniformly random policy under evaluation settings ``ev``.

    The episodes are those an evaluation with ``ev.eval_seed`` would play (episode ``i`` is reset with the
    same seed), with every action drawn uniformly (ε = 1), so the numbers are reproducible and comparable
    with the runs' evaluations.

    Args:
        task: the task (its step limit and kwargs apply).
        ev: the runs' evaluation settings; only ``eval_seed`` is used, besides ε = 1.
        n_episodes: how many episodes (≥ 1).

    Returns:
        The :class:`RandomReference`.
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be at least 1, not {n_episodes}")
    env = make_env(task, ev.eval_seed, evaluation=True)
    try:
        returns, _ = evaluate(_NoPolicy(), env, replace(ev, n_eval_episodes=n_episodes, epsilon=1.0,
                                                        deterministic=True))
    finally:
        env.close()
    return RandomReference(task.id, returns)
