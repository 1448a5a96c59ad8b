"""The run function: train one run and evaluate it at each of its budgets — pure, no store access.

A run trains **once**, uninterrupted, to its largest budget (one ``learn(total_timesteps)`` call, so that
stable-baselines3's progress-based schedules — ε decay, learning-rate and clip-range schedules — are those
of a run of that length; a run resumed from a mid-run checkpoint, :mod:`rlaudit.run.checkpoint`, re-enters
``learn`` for the steps left, with the same schedules) and is evaluated from inside training, by a callback, when it passes each
smaller budget and every ``eval_every`` steps. The evaluation at the largest budget is made after
``learn`` returns, so it is exactly what a plain "learn, then evaluate" script measures.

Evaluations never disturb training: they use separate environments and run inside a saved-and-restored
torch / NumPy / ``random`` state, so a run evaluated at three budgets trains exactly as a run evaluated
only at the end (tested). Deterministic evaluations of stable-baselines3 agents play up to
:data:`MAX_EVAL_ENVS` episodes side by side, one batched ``predict`` per step; every episode draws from
its own seeded streams, so this gives the numbers of playing them one by one (tested).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable

import numpy as np

from rlaudit.run.checkpoint import Checkpoints, checkpointable, random_states, set_random_states
from rlaudit.run.envs import make_env
from rlaudit.run.spec import EvalRecord, EvalSpec, RunResult, RunSpec

PROGRESS_INTERVAL_S = 1.0
"""``progress`` is called at most this often."""

PROGRESS_CHECK_STEPS = 256
"""The clock is read for ``progress`` every this many env steps, not after every step."""


def set_single_thread() -> None:
    """One torch thread per run: workers share the cores, and results do not depend on the thread count."""
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # only settable before any parallel work
        torch.set_num_interop_threads(1)


class RunExited(RuntimeError):
    """Algorithm or environment code called ``sys.exit`` during a run: a failed run, not the end of the sweep."""


def execute_run(spec: RunSpec, emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None,
                build_agent: Callable[[RunSpec, object], object] | None = None,
                checkpoints: Checkpoints | None = None) -> RunResult:
    """Train ``spec`` to its largest budget and evaluate it at every evaluation point.

    Args:
        spec: the run.
        emit: called with each :class:`EvalRecord` as soon as it is made (in ascending ``env_steps``).
        progress: optional, called with the env-step count at most every :data:`PROGRESS_INTERVAL_S`.
        build_agent: ``(spec, training env) -> agent`` with ``train(total, on_step)``, ``predict(obs,
            deterministic)`` and ``kind``, for another implementation of ``spec``'s algorithm (the fidelity
            harness's reference, :mod:`rlaudit.fidelity`); default: the registered algorithm.
        checkpoints: where and how often to checkpoint the run (:mod:`rlaudit.run.checkpoint`); a checkpoint
            of ``spec`` found there is resumed: its evaluations are emitted again, then training goes on from
            it. ``None``: no checkpoints (and ``build_agent`` runs are never checkpointed).

    Returns:
        The :class:`RunResult`.

    Raises:
        Exception: whatever training raises; also :class:`FloatingPointError` when an evaluation return is
            not finite (a diverged run), and :class:`RunExited` when plugin code calls ``sys.exit`` (which
            would otherwise end the driver with exit status 0 and leave the run ``running``).
    """
    try:
        result = _execute_run(spec, emit, progress, build_agent, checkpoints)
    except SystemExit as exc:
        if checkpoints is not None:
            checkpoints.discard(spec)
        raise RunExited(f"{spec.run_id}: the algorithm or environment code called sys.exit({exc.code!r}) "
                        f"during the run") from exc
    except Exception:  # a failure is retried from scratch; a kill or Ctrl-C keeps the checkpoint
        if checkpoints is not None:
            checkpoints.discard(spec)
        raise
    if checkpoints is not None:
        checkpoints.discard(spec)
    return result


def _execute_run(spec: RunSpec, emit: Callable[[EvalRecord], None],
                 progress: Callable[[int], None] | None, build_agent=None,
                 checkpoints: Checkpoints | None = None) -> RunResult:
    t0, cpu0 = time.perf_counter(), time.process_time()
    if build_agent is not None:
        checkpoints = None
    resumed = checkpoints.load(spec) if checkpoints is not None else None
    made: list[EvalRecord] = []  # this run's evaluations so far (a checkpoint keeps them)
    if resumed is not None:
        env, agent, eval_envs = resumed["env"], resumed["agent"], resumed["eval_envs"]
        set_random_states(resumed["random"])
        t0, cpu0 = t0 - resumed["wall_s"], cpu0 - resumed["cpu_s"]
        start = resumed["env_steps"]
        trained_on = resumed["trained_on"]
        for rec in resumed["evaluations"]:
            made.append(rec)
            emit(rec)
        if progress is not None:
            progress(start)
    else:
        env, eval_envs, start, trained_on = make_env(spec.task, spec.seed), [], 0, None
    try:
        if resumed is None:
            if build_agent is not None:
                agent = build_agent(spec, env)
            else:
                from rlaudit.algorithms import make_agent

                agent = make_agent(spec.algorithm.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                                   policy_kwargs=spec.algorithm.policy_kwargs_dict or None)
                skip_redundant_mode_switches(agent)
                precompute_observation_checks(agent)
            eval_envs += make_eval_envs(spec.task, spec.eval.eval_seed, spec.eval.n_eval_episodes,
                                        can_batch(agent, spec.eval))
        total = spec.total_steps
        # the last one is made after training; a resumed run made those up to its checkpoint
        pending = [p for p in spec.eval_points() if start < p < total]
        # on_step runs after every env step: its fast path is one comparison with the next step at which
        # anything is due (an evaluation point, or a look at the clock for progress).
        state = {"steps": start, "next_report": time.monotonic() + PROGRESS_INTERVAL_S, "due": 0,
                 "next_checkpoint": time.monotonic() + (checkpoints.every if checkpoints else 0)}

        def evaluate_at(steps: int) -> None:
            returns, lengths = evaluate(agent, eval_envs, spec.eval, steps)
            if not all(math.isfinite(r) for r in returns):
                raise FloatingPointError(f"evaluation at {steps} env steps gave a non-finite return "
                                         f"({returns}); the run diverged")
            rec = EvalRecord(spec.run_id, steps, returns, lengths, time.perf_counter() - t0)
            made.append(rec)
            emit(rec)

        def on_step(steps: int) -> bool:
            state["steps"] = steps
            if steps < state["due"]:
                return True
            if pending and steps >= pending[0]:
                while pending and steps >= pending[0]:  # one evaluation even if a step passes two points
                    pending.pop(0)
                evaluate_at(steps)
            if progress is not None and time.monotonic() >= state["next_report"]:
                state["next_report"] = time.monotonic() + PROGRESS_INTERVAL_S
                progress(steps)
            check = steps + PROGRESS_CHECK_STEPS if progress is not None else math.inf
            state["due"] = min(pending[0] if pending else math.inf, check)
            return True

        def on_boundary(steps: int) -> None:
            """At an update boundary: save a checkpoint when one is due."""
            if time.monotonic() < state["next_checkpoint"] or steps in (start, total):
                return
            checkpoints.save(spec, {"env": env, "agent": agent, "eval_envs": eval_envs, "random": random_states(),
                                    "env_steps": steps, "evaluations": list(made), "trained_on": trained_on,
                                    "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0})
            state["next_checkpoint"] = time.monotonic() + checkpoints.every

        if checkpoints is not None and checkpointable(agent):
            agent.train(total, on_step, on_boundary)
        else:
            agent.train(total, on_step)
        steps = max(state["steps"], total)
        evaluate_at(steps)
        moved = tuple((m, int(k)) for m, k in trained_on) if trained_on and len(trained_on) > 1 else None
        return RunResult(spec.run_id, steps, time.perf_counter() - t0, time.process_time() - cpu0, trained_on=moved)
    finally:
        env.close()
        for e in eval_envs:
            e.close()


def _dqn_family_model(agent):
    """The SB3 model of a DQN-family agent (SB3's DQN and subclasses, sb3-contrib's QR-DQN), else ``None``."""
    from sb3_contrib import QRDQN
    from stable_baselines3 import DQN

    model = getattr(agent, "model", None)
    if getattr(agent, "kind", None) != "sb3" or not isinstance(model, (DQN, QRDQN)):
        return None
    return model


def skip_redundant_mode_switches(agent) -> None:
    """Make an SB3 policy's ``set_training_mode`` a no-op when the mode does not change.

    stable-baselines3 calls it before every action (``predict``) and every update, and each call walks
    all submodules (``nn.Module.train``): ~20 µs, a few per cent of a MinAtar DQN step. In the DQN family
    (SB3's DQN and subclasses, sb3-contrib's QR-DQN) only this method switches the policy's modes, so
    remembering the last one changes no number (tested). Other algorithms are left alone: CrossQ, for one,
    switches its batch-norm layers by other means.
    """
    model = _dqn_family_model(agent)
    if model is None:
        return
    policy = model.policy
    real = policy.set_training_mode
    last: list[bool | None] = [None]

    def set_training_mode(mode: bool) -> None:
        if last[0] is not mode:
            real(mode)
            last[0] = mode

    policy.set_training_mode = set_training_mode


def precompute_observation_checks(agent) -> None:
    """Answer once what stable-baselines3 re-derives at every action of a DQN-family agent.

    Each env step calls ``policy.predict``, which asks again whether the observation space is an image
    (``is_image_space``, ~30 µs, asked once more inside the network's ``extract_features``), walks the
    parameters to find the device and copies the observation. With a flat (non-image) ``Box`` observation
    space and ``Discrete`` actions the answers never change: the observation becomes a tensor of the same
    dtype and shape, the network reads it as ``obs.float()`` (what ``preprocess_obs`` returns for such a
    space), and the same layers run on the same values. No number changes (tested); about a tenth of a
    MinAtar DQN step is saved. Image spaces, other algorithms and other inputs keep SB3's own path.
    """
    from gymnasium import spaces
    from stable_baselines3.common.preprocessing import is_image_space

    model = _dqn_family_model(agent)
    if model is None:
        return
    policy = model.policy
    space = policy.observation_space
    if not isinstance(space, spaces.Box) or not isinstance(policy.action_space, spaces.Discrete) or is_image_space(space):
        return
    import torch as th

    shape, device, real = space.shape, policy.device, policy.predict

    def predict(observation, state=None, episode_start=None, deterministic=False):
        if not isinstance(observation, np.ndarray) or observation.shape[-len(shape):] != shape \
                or observation.ndim not in (len(shape), len(shape) + 1):
            return real(observation, state, episode_start, deterministic)  # SB3's checks and messages
        policy.set_training_mode(False)
        obs = th.as_tensor(observation.reshape((-1, *shape)), device=device)
        with th.no_grad():
            actions = policy._predict(obs, deterministic=deterministic)
        actions = actions.cpu().numpy().reshape(-1)
        return (actions if observation.ndim > len(shape) else actions.squeeze(axis=0)), state

    def extract_features(obs, features_extractor):
        return features_extractor(obs.float())

    policy.predict = predict
    for name in ("q_net", "q_net_target", "quantile_net", "quantile_net_target"):  # DQN's / QR-DQN's
        net = getattr(policy, name, None)
        if net is not None:
            net.extract_features = extract_features


def episode_seed(eval_seed: int, episode: int) -> int:
    """Reset seed of evaluation episode ``episode``: the same episodes at every budget of a run."""
    return _derived_seed(eval_seed, 0, episode)


def _derived_seed(*entropy: int) -> int:
    return int(np.random.SeedSequence(list(entropy)).generate_state(1)[0])


MAX_EVAL_ENVS = 16
"""At most this many evaluation episodes are played side by side (one batched ``predict`` per step)."""


def make_eval_envs(task, eval_seed: int, n_eval_episodes: int, batched: bool) -> list:
    """The evaluation environments of a run: one, or up to :data:`MAX_EVAL_ENVS` when ``batched``."""
    n = min(n_eval_episodes, MAX_EVAL_ENVS) if batched else 1
    return [make_env(task, eval_seed, evaluation=True) for _ in range(max(n, 1))]


def can_batch(agent, ev: EvalSpec) -> bool:
    """Whether evaluation episodes may be played side by side for ``agent``.

    Only stable-baselines3 agents and agents that say so (``batched_predict = True``: their ``predict`` takes a
    batch, as the JAX backend's greedy policies) evaluated deterministically: a greedy action depends on its
    own observation only, so an episode's numbers do not depend on which other episodes share its batch. A
    stochastic policy would draw its actions from one shared torch stream.
    """
    batches = getattr(agent, "kind", None) == "sb3" or getattr(agent, "batched_predict", False) is True
    return ev.deterministic and batches and ev.n_eval_episodes > 1


def evaluate(agent, env, ev: EvalSpec, steps: int = 0) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Play ``ev.n_eval_episodes`` episodes without touching the training random state.

    Episode ``i`` is reset with :func:`episode_seed` and draws its ε-greedy coins and random actions from
    its own streams seeded by ``(eval_seed, steps, i)``, so its numbers do not depend on the other
    episodes: playing ``k`` of them side by side (one batched ``predict`` per step, when ``env`` is a
    list of ``k`` environments and :func:`can_batch` allows it) gives the same returns as playing them one
    after another.

    Args:
        agent: an object with ``predict(obs, deterministic) -> action``.
        env: the evaluation environment (a gymnasium env), or a list of them to play episodes side by side.
        ev: evaluation settings.
        steps: training steps so far (seeds the ε-greedy and stochastic-policy draws; episodes are seeded
            by index).

    Returns:
        ``(returns, lengths)``, each of shape ``(n_eval_episodes,)``.
    """
    try:
        import torch
    except ImportError:  # a reference implementation's environment without torch (rlaudit.fidelity)
        torch = None

    envs = list(env) if isinstance(env, (list, tuple)) else [env]
    width = len(envs) if can_batch(agent, ev) else 1
    returns: list[float] = []
    lengths: list[int] = []
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        with torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext():
            # Stochastic evaluation draws depend on (eval seed, steps) only, never on earlier evaluations.
            if torch is not None:
                torch.manual_seed(_derived_seed(ev.eval_seed, 1, steps))
            for first in range(0, ev.n_eval_episodes, width):
                episodes = range(first, min(first + width, ev.n_eval_episodes))
                r, n = _play(agent, envs, ev, steps, episodes, batched=width > 1)
                returns += r
                lengths += n
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return tuple(returns), tuple(lengths)


def _play(agent, envs: list, ev: EvalSpec, steps: int, episodes: range,
          batched: bool) -> tuple[list[float], list[int]]:
    """Play ``episodes`` side by side on ``envs[0], envs[1], ...``; their returns and lengths, in order."""
    n = len(episodes)
    rngs, obs = [], []
    for j, i in enumerate(episodes):
        rngs.append(np.random.default_rng([ev.eval_seed, 2, steps, i]))
        envs[j].action_space.seed(_derived_seed(ev.eval_seed, 3, steps, i))
        obs.append(envs[j].reset(seed=episode_seed(ev.eval_seed, i))[0])
    totals, lengths = [0.0] * n, [0] * n
    active = list(range(n))
    while active:
        explore = [ev.epsilon > 0 and rngs[j].random() < ev.epsilon for j in active]
        if batched:
            greedy = agent.predict(np.stack([obs[j] for j in active]), deterministic=True)
        still = []
        for k, j in enumerate(active):
            if explore[k]:
                action = envs[j].action_space.sample()
            elif batched:
                action = greedy[k]
            else:
                action = agent.predict(obs[j], deterministic=ev.deterministic)
            obs[j], reward, terminated, truncated, _ = envs[j].step(action)
            totals[j] += float(reward)
            lengths[j] += 1
            if not (terminated or truncated):
                still.append(j)
        active = still
    return totals, lengths
