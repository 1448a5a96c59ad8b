"""The compiled, seed-vectorised training loop and the batch runner (one process, S seeds of one program).

Per env step ``t`` (``t`` steps done), for every seed at once (``vmap``), in stable-baselines3's order:

1. train (``gradient_steps`` updates) when a rollout of ``train_freq`` steps has just ended and
   ``t > learning_starts`` (SB3 trains after each rollout; an evaluation made at ``t`` comes before it, as the
   runner's callback does, and the update due at the last step is made before the final evaluation, as
   ``learn`` does before returning);
2. act: uniform before ``learning_starts``, else ε-greedy at ε(t);
3. step the environment, store the transition (a finished episode resets);
4. update the target network when ``t + 1`` is a multiple of ``target_update_interval``.

``t`` is shared by the seeds of a batch (one step counter, outside the ``vmap``), so the "train now?" and
"update the target now?" branches stay real branches (``lax.cond`` on an unbatched predicate) instead of
being computed for every step and masked. The loop between two evaluation points is one ``lax.fori_loop``
with traced bounds: one compilation per (configuration, number of seeds) serves every chunk length and every
budget; compiled programs are also kept on disk (JAX's persistent compilation cache under
``$XDG_CACHE_HOME/rlaudit/jax``), so a second process with the same configuration does not compile again.

Evaluations are those of the SB3 path, by the same code: :func:`rlaudit.run.runner.evaluate` on the task's
gymnasium environment (the ``minatar`` package, gymnasium's CartPole; same seeds, same ε, same step cap), with
the JAX network's greedy action; the training environment is the task's JAX one, from the registry of
:mod:`rlaudit.run.backends.jax.envs` (pgx's MinAtar, the JAX CartPole).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlaudit.run.backends.jax import agent, networks, replay
from rlaudit.run.backends.jax.config import AgentConfig
from rlaudit.run.backends.jax.envs import make_env
from rlaudit.run.spec import EvalRecord, RunResult, RunSpec

PROGRESS_S = 1.0
"""Chunks between evaluation points are cut so that ``progress`` hears from the batch about this often."""
FIRST_PIECE = 512
"""Steps of the first piece of a chunk (the rate is not known yet)."""
EVAL_WIDTH = 16
"""Evaluation batches are padded to this many observations (one compilation of the greedy policy)."""


class Carry(NamedTuple):
    """One seed's whole training state."""

    learner: agent.Learner
    env: object
    """The training environment's state (its own pytree)."""
    obs: jax.Array
    key: jax.Array


class Program:
    """The compiled functions of one :class:`AgentConfig` (shared by every batch with that configuration)."""

    def __init__(self, cfg: AgentConfig):
        self.cfg = cfg
        env = make_env(cfg)

        def init(seed_key: jax.Array) -> Carry:
            k_net, k_env, k_run = jax.random.split(seed_key, 3)
            state, obs = env.reset(k_env)
            return Carry(agent.init_learner(cfg, k_net), state, obs, k_run)

        def step(carry: Carry, t: jax.Array, total: jax.Array) -> Carry:
            key = jax.random.fold_in(carry.key, t)
            k_train, k_act, k_env = jax.random.split(key, 3)
            due = (t > 0) & (t % cfg.train_freq == 0) & (t > cfg.learning_starts)
            beta = agent.per_beta(cfg, t, total)
            learner = jax.lax.cond(due, lambda lr: agent.train(cfg, lr, k_train, beta), lambda lr: lr, carry.learner)

            def interact(args):
                learner, state, obs = args
                eps = agent.epsilon(cfg, t, total)
                action = agent.act(cfg, learner.params, obs, k_act, eps, t < cfg.learning_starts)
                state, next_obs, tr = env.step(state, action, k_env)
                buffer = replay.add(cfg, learner.buffer, obs, action, tr.reward, tr.next_obs, tr.done, tr.timeout)
                learner = learner._replace(buffer=buffer)
                learner = jax.lax.cond((t + 1) % cfg.target_update_interval == 0,
                                       lambda lr: agent.update_target(cfg, lr), lambda lr: lr, learner)
                return learner, state, next_obs

            learner, state, obs = jax.lax.cond(t < total, interact, lambda args: args,
                                               (learner, carry.env, carry.obs))
            return Carry(learner, state, obs, carry.key)

        vstep = jax.vmap(step, in_axes=(0, None, None))

        def run(carries: Carry, t0: jax.Array, t1: jax.Array, total: jax.Array) -> Carry:
            return jax.lax.fori_loop(t0, t1, lambda t, c: vstep(c, t, total), carries)

        def greedy(params, obs):
            return networks.greedy_q(cfg, params, obs).argmax(axis=1)

        def finite(params):
            leaves = jax.tree_util.tree_leaves(params)
            return functools.reduce(jnp.logical_and, [jnp.isfinite(x).reshape(x.shape[0], -1).all(axis=1)
                                                      for x in leaves])

        self.init = jax.jit(jax.vmap(init))
        self.run = jax.jit(run, donate_argnums=0)
        self.greedy = jax.jit(greedy)
        self.finite = jax.jit(finite)


@functools.lru_cache(maxsize=16)
def program(cfg: AgentConfig) -> Program:
    """The :class:`Program` of ``cfg`` (built once per process)."""
    return Program(cfg)


def seed_keys(seeds: Sequence[int]) -> jax.Array:
    """One PRNG key per run seed, shape ``(S, 2)``: the key of seed ``s`` is ``PRNGKey(s)`` whatever the batch."""
    return jnp.stack([jax.random.PRNGKey(int(s)) for s in seeds])


class GreedyPolicy:
    """One seed's greedy policy, as :func:`rlaudit.run.runner.evaluate` drives an agent: ``predict`` takes one
    observation or a batch (of up to :data:`EVAL_WIDTH`) and returns the action(s)."""

    batched_predict = True

    def __init__(self, prog: Program, params):
        self.prog, self.params = prog, params

    def predict(self, observation, deterministic: bool = True):
        obs = np.asarray(observation)
        single = obs.ndim == len(self.prog.cfg.obs_shape)
        x = obs[None] if single else obs
        out = []
        for start in range(0, x.shape[0], EVAL_WIDTH):
            part = x[start:start + EVAL_WIDTH]
            padded = np.zeros((EVAL_WIDTH, *part.shape[1:]), dtype=np.float32)
            padded[: part.shape[0]] = part
            out.append(np.asarray(self.prog.greedy(self.params, padded))[: part.shape[0]])
        actions = np.concatenate(out).astype(np.int64)
        return actions[0] if single else actions


def _seed_slice(tree, i: int):
    return jax.tree_util.tree_map(lambda x: x[i], tree)


def train_batch(specs: Sequence[RunSpec], cfg: AgentConfig, emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None) -> list:
    """Train the runs ``specs`` (same configuration, budgets and evaluation points; their own seeds) together.

    Returns:
        One :class:`RunResult` per run, or the error text of a run whose network diverged (non-finite
        parameters at an evaluation: recorded failed alone, the others go on).
    """
    from rlaudit.run.runner import evaluate, make_eval_envs

    t0, cpu0 = time.perf_counter(), time.process_time()
    prog = program(cfg)
    first = specs[0]
    total = first.total_steps
    carries = prog.init(seed_keys([s.seed for s in specs]))
    eval_envs = [make_eval_envs(s.task, s.eval.eval_seed, s.eval.n_eval_episodes, True) for s in specs]
    outcomes: list = [None] * len(specs)
    t, piece = 0, FIRST_PIECE
    try:
        for point in first.eval_points():
            while t < point:
                n = min(piece, point - t)
                started = time.perf_counter()
                carries = prog.run(carries, t, t + n, total)
                jax.block_until_ready(carries.key)
                took = time.perf_counter() - started
                t += n
                piece = max(FIRST_PIECE, min(1 << 20, int(n * PROGRESS_S / max(took, 1e-3))))
                if progress is not None:
                    progress(t)
            if point == total:  # the update due at the last step, before the final evaluation (SB3's learn)
                carries = prog.run(carries, total, total + 1, total)
            params = carries.learner.params
            finite = np.asarray(prog.finite(params))
            for i, spec in enumerate(specs):
                if outcomes[i] is not None:
                    continue
                if not finite[i]:
                    outcomes[i] = (f"FloatingPointError: {spec.run_id}: the network's parameters are not finite at "
                                   f"{point} env steps; the run diverged (the other runs of its batch went on)")
                    continue
                policy = GreedyPolicy(prog, _seed_slice(params, i))
                returns, lengths = evaluate(policy, eval_envs[i], spec.eval, point)
                if not all(math.isfinite(r) for r in returns):
                    outcomes[i] = f"FloatingPointError: evaluation at {point} env steps gave a non-finite return"
                    continue
                emit(EvalRecord(spec.run_id, point, returns, lengths, time.perf_counter() - t0))
    finally:
        for envs in eval_envs:
            for e in envs:
                e.close()
    wall, cpu = time.perf_counter() - t0, (time.process_time() - cpu0) / len(specs)
    return [o if o is not None else RunResult(s.run_id, total, wall, cpu) for s, o in zip(specs, outcomes)]
