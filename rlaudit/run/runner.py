"""The run function: train one run and evaluate it at each of its budgets — pure, no store access.

A run trains **once**, uninterrupted, to its largest budget (one ``learn(total_timesteps)`` call, so that
stable-baselines3's progress-based schedules — ε decay, learning-rate and clip-range schedules — are those
of a run of that length) and is evaluated from inside training, by a callback, when it passes each
smaller budget and every ``eval_every`` steps. The evaluation at the largest budget is made after
``learn`` returns, so it is exactly what a plain "learn, then evaluate" script measures.

Evaluations never disturb training: they use a separate environment and run inside a saved-and-restored
torch / NumPy / ``random`` state, so a run evaluated at three budgets trains exactly as a run evaluated
only at the end (tested).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable

import numpy as np

from rlaudit.run.envs import make_env
from rlaudit.run.spec import EvalRecord, EvalSpec, RunResult, RunSpec

PROGRESS_INTERVAL_S = 1.0
"""``progress`` is called at most this often."""


def set_single_thread() -> None:
    """One torch thread per run: workers share the cores, and results do not depend on the thread count."""
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # only settable before any parallel work
        torch.set_num_interop_threads(1)


def execute_run(spec: RunSpec, emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None) -> RunResult:
    """Train ``spec`` to its largest budget and evaluate it at every evaluation point.

    Args:
        spec: the run.
        emit: called with each :class:`EvalRecord` as soon as it is made (in ascending ``env_steps``).
        progress: optional, called with the env-step count at most every :data:`PROGRESS_INTERVAL_S`.

    Returns:
        The :class:`RunResult`.

    Raises:
        Exception: whatever training raises; also :class:`FloatingPointError` when an evaluation return is
            not finite (a diverged run).
    """
    from rlaudit.algorithms import make_agent

    t0 = time.perf_counter()
    env = make_env(spec.task, spec.seed)
    eval_env = make_env(spec.task, spec.eval.eval_seed, evaluation=True)
    try:
        agent = make_agent(spec.algorithm.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                           policy_kwargs=spec.algorithm.policy_kwargs_dict or None)
        total = spec.total_steps
        pending = [p for p in spec.eval_points() if p < total]  # the last one is made after training
        state = {"steps": 0, "next_report": time.monotonic() + PROGRESS_INTERVAL_S}

        def evaluate_at(steps: int) -> None:
            returns, lengths = evaluate(agent, eval_env, spec.eval, steps)
            if not all(math.isfinite(r) for r in returns):
                raise FloatingPointError(f"evaluation at {steps} env steps gave a non-finite return "
                                         f"({returns}); the run diverged")
            emit(EvalRecord(spec.run_id, steps, returns, lengths, time.perf_counter() - t0))

        def on_step(steps: int) -> bool:
            state["steps"] = steps
            if pending and steps >= pending[0]:
                while pending and steps >= pending[0]:  # one evaluation even if a step passes two points
                    pending.pop(0)
                evaluate_at(steps)
            if progress is not None and time.monotonic() >= state["next_report"]:
                state["next_report"] = time.monotonic() + PROGRESS_INTERVAL_S
                progress(steps)
            return True

        agent.train(total, on_step)
        steps = max(state["steps"], total)
        evaluate_at(steps)
        return RunResult(spec.run_id, steps, time.perf_counter() - t0)
    finally:
        env.close()
        eval_env.close()


def episode_seed(eval_seed: int, episode: int) -> int:
    """Reset seed of evaluation episode ``episode``: the same episodes at every budget of a run."""
    return _derived_seed(eval_seed, 0, episode)


def _derived_seed(*entropy: int) -> int:
    return int(np.random.SeedSequence(list(entropy)).generate_state(1)[0])


def evaluate(agent, env, ev: EvalSpec, steps: int = 0) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Play ``ev.n_eval_episodes`` episodes on ``env`` without touching the training random state.

    Args:
        agent: an object with ``predict(obs, deterministic) -> action``.
        env: the evaluation environment (a gymnasium env).
        ev: evaluation settings.
        steps: training steps so far (only seeds stochastic evaluation; episodes are seeded by index).

    Returns:
        ``(returns, lengths)``, each of shape ``(n_eval_episodes,)``.
    """
    import torch

    returns: list[float] = []
    lengths: list[int] = []
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        with torch.random.fork_rng(devices=[]):
            # Stochastic evaluation draws depend on (eval seed, steps) only, never on earlier evaluations.
            torch.manual_seed(_derived_seed(ev.eval_seed, 1, steps))
            rng = np.random.default_rng([ev.eval_seed, 2, steps])
            env.action_space.seed(_derived_seed(ev.eval_seed, 3, steps))
            for i in range(ev.n_eval_episodes):
                obs, _ = env.reset(seed=episode_seed(ev.eval_seed, i))
                total, length, done = 0.0, 0, False
                while not done:
                    if ev.epsilon > 0 and rng.random() < ev.epsilon:
                        action = env.action_space.sample()
                    else:
                        action = agent.predict(obs, deterministic=ev.deterministic)
                    obs, reward, terminated, truncated, _ = env.step(action)
                    total += float(reward)
                    length += 1
                    done = terminated or truncated
                returns.append(total)
                lengths.append(length)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return tuple(returns), tuple(lengths)
