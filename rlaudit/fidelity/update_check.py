"""One training step of a built-in against Dopamine's on the same parameters and the same batches.

The seed-level comparison (:func:`rlaudit.fidelity.compare_stores`) asks whether two implementations score alike;
this check asks whether they *compute* alike, deterministically and in seconds: the built-in and Dopamine's agent
(built by the harness exactly as for a reference run) start from the same parameters (the built-in's
initialisation, copied into Dopamine's flax layout) and a target network of their own (the online parameters
plus noise), and take ``n`` consecutive steps on the same ``n`` batches (MinAtar-like: sparse boolean
observations, rewards in {0, 1} or n-step sums, 10 % terminal, prioritized sampling probabilities where the
agent uses prioritized replay). Compared:

- the **gradient** of the first batch's loss (ours: the parameters' ``.grad`` after the built-in's ``train``;
  Dopamine's: the step of ``optax.sgd(1.0)`` put in place of its Adam), as the largest absolute difference over
  each tensor relative to that tensor's largest Dopamine gradient;
- the **parameters after each Adam step** (each agent's own optimiser, learning rate and eps), as the largest
  absolute difference in units of the learning rate (one Adam step moves a parameter by about one learning rate);
- for prioritized replay, the **new priorities** (Dopamine's ``sqrt(loss + 1e-10)``, the built-in's
  ``(loss + per_eps) ** 0.5`` with ``per_eps`` 1e-6, a declared deviation; compared relative to their size).

Replay sampling, exploration and the environment loop are not part of it (the seed-level comparison covers
them). IQN's quantile levels, which Dopamine draws inside its compiled train step from per-sample keys, are
recomputed from the agent's key in the reference's interpreter (:mod:`rlaudit.fidelity.dopamine_update`) and
fed to the built-in's ``torch.rand``.

:func:`check_backend_updates` runs the same check between rlaudit's own two backends (the SB3 built-in against
the JAX program, IQN included: the JAX side's sampled levels are fed to the SB3 side), in this interpreter.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

CHECKED = ("DQN", "C51", "QRDQN", "IQN", "DopamineRainbow")
"""Built-ins this check covers against Dopamine."""

GRAD_TOLERANCE = 1e-4
"""Largest relative gradient difference that counts as the same update (float32 rounding measured 3e-7 - 5e-5;
the largest is Dopamine's ``1e-10`` inside its importance weights, at most 5e-5 at the batches' smallest
sampling probability 1e-6; a real difference is of order 1, IQN's cosine argument rounded in another order
gave 2.7e-4)."""
PARAMS_TOLERANCE = 0.01
"""Largest parameter difference after the Adam steps, in learning rates (measured: at most 3e-4)."""
PRIORITY_TOLERANCE = 1e-4
"""Largest relative difference of the new priorities (measured: 5e-7)."""


@dataclass(frozen=True)
class UpdateCheck:
    """What one algorithm's check measured."""

    algorithm: str
    task: str
    n_steps: int
    grad_rel: float
    """Largest |ours - Dopamine's| gradient difference over the tensors, relative to each tensor's largest
    Dopamine gradient."""
    params_lr: tuple[float, ...]
    """Largest |ours - Dopamine's| parameter difference after each Adam step, in learning rates."""
    priorities_rel: float | None
    """Largest relative difference of the new priorities (prioritized replay), else ``None``."""
    loss: float
    """The built-in's loss on the first batch (for reading)."""

    @property
    def agrees(self) -> bool:
        """Whether every difference is within its tolerance (float32 rounding)."""
        return (self.grad_rel < GRAD_TOLERANCE and max(self.params_lr) < PARAMS_TOLERANCE
                and (self.priorities_rel is None or self.priorities_rel < PRIORITY_TOLERANCE))

    def line(self) -> str:
        """One line for the terminal."""
        prio = "" if self.priorities_rel is None else f", priorities {self.priorities_rel:.1e}"
        return (f"{self.algorithm} on {self.task}, {self.n_steps} steps: gradient {self.grad_rel:.1e} of the largest, "
                f"parameters {max(self.params_lr):.1e} learning rates{prio}: "
                f"{'the same update' if self.agrees else 'DIFFERENT updates'}")


def _networks(agent):
    """(online, target) torch modules of a built-in DQN-family agent, and its head's layout."""
    policy = agent.policy
    if hasattr(policy, "quantile_net"):  # sb3-contrib's QR-DQN: outputs viewed as (n_quantiles, n_actions)
        return policy.quantile_net, policy.quantile_net_target, "quantile-major"
    return policy.q_net, policy.q_net_target, "action-major"


def _layers(net):
    """(convolution, head, IQN's tau embedding or ``None``) of a 'minatar' network with a linear head."""
    import torch.nn as nn

    tau = net.tau_embedding[0] if hasattr(net, "tau_embedding") else None
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear) and m is not tau]
    if len(convs) != 1 or len(linears) != 1:
        raise ValueError(f"the update check covers the 'minatar' network with a linear head (net_arch = []), got "
                         f"{len(convs)} convolution(s) and {len(linears)} linear layer(s)")
    return convs[0], linears[0], tau


def _head_order(n_actions: int, layout: str, n_out: int) -> np.ndarray:
    """Row ``r`` of our head's weight for flax column ``c`` (flax: ``(action, atom)`` row-major)."""
    cols = np.arange(n_actions * n_out)
    a, j = cols // n_out, cols % n_out
    return j * n_actions + a if layout == "quantile-major" else cols


def _as_flax(net, layout: str, n_actions: int, value) -> dict[str, np.ndarray]:
    """``value(parameter)`` (a numpy array) of every parameter, in the flax layout."""
    conv, head, tau = _layers(net)
    order = _head_order(n_actions, layout, head.out_features // n_actions)
    out = {"Conv_0/kernel": value(conv.weight).transpose(2, 3, 1, 0).copy(), "Conv_0/bias": value(conv.bias).copy(),
           "Dense_0/kernel": value(head.weight)[order].T.copy(), "Dense_0/bias": value(head.bias)[order].copy()}
    if tau is not None:
        out.update({"Tau_0/kernel": value(tau.weight).T.copy(), "Tau_0/bias": value(tau.bias).copy()})
    return out


def to_flax(net, layout: str, n_actions: int) -> dict[str, np.ndarray]:
    """The torch network's parameters as ``{"Conv_0/kernel": (3, 3, C, 16), ..., "Dense_0/bias": ...}`` (IQN's
    embedding as ``Tau_0``)."""
    return _as_flax(net, layout, n_actions, lambda t: t.detach().numpy())


def grads_to_flax(net, layout: str, n_actions: int) -> dict[str, np.ndarray]:
    """The parameters' ``.grad`` in the same layout as :func:`to_flax`."""
    return _as_flax(net, layout, n_actions, lambda t: t.grad.numpy())


def load_flax(net, layout: str, n_actions: int, params: dict[str, np.ndarray]) -> None:
    """Copy flax-layout ``params`` into the torch network."""
    import torch as th

    conv, head, tau = _layers(net)
    order = _head_order(n_actions, layout, head.out_features // n_actions)
    weight, bias = np.empty_like(head.weight.detach().numpy()), np.empty_like(head.bias.detach().numpy())
    weight[order], bias[order] = params["Dense_0/kernel"].T, params["Dense_0/bias"]
    pairs = [(conv.weight, params["Conv_0/kernel"].transpose(3, 2, 0, 1)), (conv.bias, params["Conv_0/bias"]),
             (head.weight, weight), (head.bias, bias)]
    if tau is not None:
        pairs += [(tau.weight, params["Tau_0/kernel"].T), (tau.bias, params["Tau_0/bias"])]
    with th.no_grad():
        for tensor, value in pairs:
            tensor.copy_(th.as_tensor(np.ascontiguousarray(value)))


def make_batches(rng: np.random.Generator, n: int, obs_shape: tuple[int, ...], n_actions: int, n_step_rewards: bool,
                 batch_size: int = 32) -> list[dict[str, np.ndarray]]:
    """``n`` MinAtar-like batches (see the module doc)."""
    batches = []
    for _ in range(n):
        rewards = rng.choice([0.0, 1.0, 1.99, 2.9701] if n_step_rewards else [0.0, 1.0], size=batch_size,
                             p=[0.7, 0.1, 0.1, 0.1] if n_step_rewards else [0.8, 0.2])
        batches.append({"states": (rng.random((batch_size, *obs_shape)) < 0.05).astype(np.float32),
                        "next_states": (rng.random((batch_size, *obs_shape)) < 0.05).astype(np.float32),
                        "actions": rng.integers(0, n_actions, batch_size).astype(np.int32),
                        "rewards": rewards.astype(np.float32),
                        "terminals": (rng.random(batch_size) < 0.1).astype(np.float32),
                        "probabilities": rng.uniform(1e-6, 1e-4, batch_size).astype(np.float32)})
    return batches


def _builtin_steps(agent, batches, online, target, draws=None):
    """Our side: the built-in's own ``train`` on each batch; returns (first gradient, params after each step,
    priorities after each step, first loss). ``draws``: per step, the arrays ``torch.rand`` returns in turn (IQN's
    sampled levels, so that another implementation's can be used)."""
    import torch as th
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    from rlaudit.algorithms.dqn_family import PrioritizedSamples, importance_weights

    net, target_net, layout = _networks(agent)
    n_actions = int(agent.action_space.n)
    load_flax(net, layout, n_actions, online)
    load_flax(target_net, layout, n_actions, target)
    agent.set_logger(configure(None, []))
    n_steps = int(getattr(agent, "n_steps", 1) or 1)
    discount = agent.gamma ** n_steps
    prioritized = bool(getattr(agent, "prioritized", False))
    captured, losses = [], []
    current: dict = {}

    def samples() -> ReplayBufferSamples:
        b = current["batch"]
        col = lambda x: th.as_tensor(x).reshape(-1, 1)  # noqa: E731 - SB3's (batch, 1) columns
        return ReplayBufferSamples(th.as_tensor(b["states"]), col(b["actions"]).long(), th.as_tensor(b["next_states"]),
                                   col(b["terminals"]), col(b["rewards"]),
                                   th.full((len(b["actions"]), 1), discount, dtype=th.float32))

    buffer = agent.replay_buffer
    buffer.sample = lambda *a, **k: samples()
    if prioritized:
        def sample_prioritized(batch_size, beta, env=None):
            p = current["batch"]["probabilities"].astype(np.float64)
            # N only scales every weight alike, and the batch's largest normalises it away
            return PrioritizedSamples(samples(), np.arange(batch_size), importance_weights(p, 50_000, beta))

        buffer.sample_prioritized = sample_prioritized
        buffer.update_priorities = lambda idx, errors: captured.append(
            (np.abs(np.asarray(errors, dtype=np.float64)) + buffer.eps) ** agent.per_alpha)
    after, grad = [], None
    real_rand, queue = th.rand, []

    def rand(*shape, **kwargs):
        if not queue:
            return real_rand(*shape, **kwargs)
        value = queue.pop(0)
        if tuple(value.shape) != tuple(shape):
            raise ValueError(f"torch.rand{tuple(shape)} drawn where {value.shape} was given")
        return th.as_tensor(np.array(value))

    for k, b in enumerate(batches):
        current["batch"] = b
        queue[:] = list(draws[k]) if draws else []
        th.rand = rand
        try:
            agent.train(gradient_steps=1, batch_size=len(b["actions"]))
        finally:
            th.rand = real_rand
        if queue:
            raise ValueError(f"{len(queue)} given draw(s) not used by the built-in's step")
        losses.append(agent.logger.name_to_value["train/loss"])
        if grad is None:
            grad = grads_to_flax(net, layout, n_actions)
        after.append(to_flax(net, layout, n_actions))
    return grad, after, captured, losses[0]


def record_text(results: Sequence[UpdateCheck], reference_version: str, protocol: str, date: str) -> str:
    """What the status file records for one algorithm's checks on the protocol's tasks
    (:func:`rlaudit.fidelity.status.record_update`): "the same update" only when every task's agrees."""
    verdict = "the same update" if all(r.agrees for r in results) else "DIFFERENT updates"
    parts = []
    for r in results:
        prio = "" if r.priorities_rel is None else f", priorities {r.priorities_rel:.1e}"
        parts.append(f"{r.task}: gradient {r.grad_rel:.1e} of the largest, parameters {max(r.params_lr):.1e} "
                     f"learning rates after {r.n_steps} Adam steps{prio}")
    return f"{verdict} as {reference_version}: {'; '.join(parts)} ({protocol}, {date})"


def check_updates(protocol_path: str | Path, algorithms: list[str], task: str | None = None, n_steps: int = 3,
                  seed: int = 0) -> list[UpdateCheck]:
    """Run the check for the protocol entries of ``algorithms`` (names or labels) on ``task`` (default: the
    protocol's first), the reference's side of all of them in one interpreter.

    Raises:
        InputError: an algorithm the check does not cover, or that the protocol does not name; the reference
            not installed.
        RuntimeError: the reference interpreter failed (its stderr's tail).
    """
    from rlaudit.fidelity.references import get_reference, worker_environment
    from rlaudit.protocol import load_protocol

    protocol = load_protocol(protocol_path)
    chosen = [_entry(protocol, protocol_path, algorithm, CHECKED, "the update check") for algorithm in algorithms]
    reference = get_reference("dopamine")
    reference.version()  # not installed: one line with the fix
    starts = [_start(protocol, entry, task or protocol.tasks[0].id, n_steps, seed) for entry in chosen]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, st in enumerate(starts):
            inp, out = Path(tmp) / f"in{i}.npz", Path(tmp) / f"out{i}.npz"
            np.savez(inp, **_reference_input(st, n_steps))
            paths += [str(inp), str(out)]
        done = subprocess.run([reference.python(), "-m", "rlaudit.fidelity.dopamine_update", *paths],
                              capture_output=True, text=True, env=worker_environment(), timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"the reference's update failed: {done.stderr[-2000:]}")
        theirs = [_from_reference(st, dict(np.load(paths[2 * i + 1]))) for i, st in enumerate(starts)]
    results = []
    for st, t in zip(starts, theirs, strict=True):
        # IQN: the built-in draws the quantile levels Dopamine drew
        draws = [[t[f"levels_next_{k}"], t[f"levels_cur_{k}"]] for k in range(n_steps)] if _is_iqn(st) else None
        ours = _builtin_steps(st.agent, st.batches, st.online, st.target, draws=draws)
        results.append(_compare(st.spec, ours, t, n_steps, task or protocol.tasks[0].id))
    return results


def _entry(protocol, protocol_path, algorithm: str, covered: tuple[str, ...], check: str):
    """The protocol's entry named or labelled ``algorithm``, if ``check`` covers its algorithm."""
    from rlaudit.errors import InputError

    entries = [a for a in protocol.algorithms if algorithm in (a.name, a.label)]
    if not entries:
        raise InputError(f"{protocol_path}: no algorithm {algorithm!r} "
                         f"({', '.join(a.label for a in protocol.algorithms)})")
    if entries[0].name not in covered:
        raise InputError(f"{algorithm}: {check} covers {', '.join(covered)}")
    return entries[0]


def _is_iqn(st) -> bool:
    return getattr(st.agent, "distributional", "none") == "iqn"


# The reference's IQN network names its layers in call order: the embedding (Dense_0), then the head (Dense_1).
_IQN_NAMES = {"Tau_0": "Dense_0", "Dense_0": "Dense_1"}


def _rename(key: str, names: dict[str, str]) -> str:
    head, _, rest = key.partition("/")
    if "/" in rest:  # "<prefix>/<layer>/<name>"
        layer, _, name = rest.partition("/")
        return f"{head}/{names.get(layer, layer)}/{name}"
    return f"{names.get(head, head)}/{rest}" if rest else key


def _reference_input(st, n_steps: int) -> dict:
    """The reference's input arrays (:mod:`rlaudit.fidelity.dopamine_update`) for one check."""
    names = _IQN_NAMES if _is_iqn(st) else {}
    arrays = {"spec": np.array(st.spec.to_json()), "n": np.array(n_steps),
              **{f"online/{_rename(k, names)}": v for k, v in st.online.items()},
              **{f"target/{_rename(k, names)}": v for k, v in st.target.items()}}
    for k, b in enumerate(st.batches):
        arrays.update({f"{key}_{k}": v for key, v in b.items()})
    return arrays


def _from_reference(st, theirs: dict) -> dict:
    """The reference's output with its layer names mapped back to :func:`to_flax`'s."""
    if not _is_iqn(st):
        return theirs
    back = {v: k for k, v in _IQN_NAMES.items()}
    return {_rename(k, back): v for k, v in theirs.items()}


class _Start(NamedTuple):
    spec: object
    agent: object
    online: dict
    target: dict
    batches: list


def _start(protocol, entry, task: str, n_steps: int, seed: int) -> _Start:
    """The built-in for ``entry``'s first run on ``task``, the starting parameters (its initialisation; the
    target: those plus N(0, 0.01) noise, flax layout) and the batches."""
    from rlaudit.algorithms import make_agent
    from rlaudit.protocol import plan
    from rlaudit.run.envs import make_env

    spec = plan(protocol).select({"algo": [entry.label], "task": [task]})[0]
    env = make_env(spec.task, spec.seed)
    agent = make_agent(entry.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                       spec.algorithm.policy_kwargs_dict or None).model
    net, _, layout = _networks(agent)
    n_actions = int(env.action_space.n)
    rng = np.random.default_rng(seed)
    online = to_flax(net, layout, n_actions)
    target = {k: (v + rng.normal(0, 0.01, v.shape)).astype(np.float32) for k, v in online.items()}
    batches = make_batches(rng, n_steps, tuple(env.observation_space.shape), n_actions,
                           n_step_rewards=int(getattr(agent, "n_steps", 1) or 1) > 1)
    return _Start(spec, agent, online, target, batches)


def _compare(spec, ours, theirs: dict, n_steps: int, task: str) -> UpdateCheck:
    grad, after, priorities, loss = ours
    grad_rel = max(float(np.abs(grad[k] - theirs[f"grad/{k}"]).max() / max(np.abs(theirs[f"grad/{k}"]).max(), 1e-30))
                   for k in grad)
    lr = float(spec.algorithm.hyperparams_dict["learning_rate"])
    params_lr = tuple(max(float(np.abs(after[i][k] - theirs[f"adam_{i}/{k}"]).max()) for k in after[i]) / lr
                      for i in range(n_steps))
    priorities_rel = None
    if priorities:
        if "priorities_0" not in theirs:
            priorities_rel = float("inf")  # the reference did not update priorities at all
        else:
            priorities_rel = max(float(np.abs(priorities[i] - theirs[f"priorities_{i}"]).max()
                                       / np.abs(theirs[f"priorities_{i}"]).max()) for i in range(n_steps))
    return UpdateCheck(spec.algorithm.name, task, n_steps, grad_rel, params_lr, priorities_rel, float(loss))


BACKEND_CHECKED = ("DQN", "C51", "QRDQN", "IQN", "DopamineRainbow")
"""Built-ins whose JAX backend the backend check covers (IQN included: the JAX side's sampled levels are fed to the
SB3 side)."""


def _jax_steps(spec, batches, online, target):
    """The JAX backend's ``gradient_step`` on each batch (its replay sample replaced by the batch); returns (first
    gradient, params after each step, priorities after each step, IQN's sampled levels per step)."""
    from rlaudit.run.backends.jax import configure_jax

    configure_jax()
    import jax
    import jax.numpy as jnp
    import optax

    from rlaudit.algorithms.dqn_family import importance_weights
    from rlaudit.run.backends.jax import agent as jagent
    from rlaudit.run.backends.jax import replay
    from rlaudit.run.backends.jax.config import agent_config

    cfg = agent_config(spec)

    def tree(flax: dict) -> dict:
        params = {"conv": {"w": jnp.asarray(flax["Conv_0/kernel"]), "b": jnp.asarray(flax["Conv_0/bias"])},
                  "pre": [], "post": [],
                  "head": {"w": jnp.asarray(flax["Dense_0/kernel"]), "b": jnp.asarray(flax["Dense_0/bias"])}}
        if "Tau_0/kernel" in flax:
            params["tau"] = {"w": jnp.asarray(flax["Tau_0/kernel"]), "b": jnp.asarray(flax["Tau_0/bias"])}
        return params

    def flat(params: dict) -> dict:
        out = {"Conv_0/kernel": params["conv"]["w"], "Conv_0/bias": params["conv"]["b"],
               "Dense_0/kernel": params["head"]["w"], "Dense_0/bias": params["head"]["b"]}
        if "tau" in params:
            out.update({"Tau_0/kernel": params["tau"]["w"], "Tau_0/bias": params["tau"]["b"]})
        return {k: np.asarray(v) for k, v in out.items()}

    template = jagent.init_learner(cfg, jax.random.PRNGKey(0))
    beta = jnp.float32(cfg.per_beta)
    current, captured = {}, []

    def sample(cfg_, buf, key, beta_):
        b = current["batch"]
        weights = (importance_weights(b["probabilities"].astype(np.float64), 50_000, float(beta_)) if cfg.prioritized
                   else np.ones(len(b["actions"])))
        return replay.Batch(jnp.asarray(b["states"] > 0), jnp.asarray(b["actions"]), jnp.asarray(b["rewards"]),
                            jnp.asarray(b["next_states"] > 0), jnp.asarray(b["terminals"]),
                            jnp.full(len(b["actions"]), cfg.gamma ** cfg.n_steps, jnp.float32),
                            jnp.arange(len(b["actions"]), dtype=jnp.int32), jnp.asarray(weights, jnp.float32))

    def update_priorities(cfg_, buf, indices, errors):
        captured.append((np.abs(np.asarray(errors, dtype=np.float64)) + cfg.per_eps) ** cfg.per_alpha)
        return buf

    def levels(key) -> list[np.ndarray]:
        """IQN's draws inside ``gradient_step(key)``, in the SB3 side's order (next-state levels, then current)."""
        _, k_loss = jax.random.split(key)
        k_next, k_cur = jax.random.split(k_loss)
        b = cfg.batch_size
        return [np.asarray(jax.random.uniform(k_next, (b, cfg.n_tau_target + cfg.n_tau_act))),
                np.asarray(jax.random.uniform(k_cur, (b, cfg.n_tau)))]

    saved = replay.sample, replay.update_priorities, jagent.optimizer
    replay.sample, replay.update_priorities = sample, update_priorities
    try:
        keys = jax.random.split(jax.random.PRNGKey(1), len(batches))
        draws = [levels(k) if cfg.distributional == "iqn" else [] for k in keys]
        current["batch"] = batches[0]
        jagent.optimizer = lambda cfg_: optax.sgd(1.0)
        start = tree(online)
        learner = jagent.Learner(start, tree(target), optax.sgd(1.0).init(start), template.buffer)
        stepped = flat(jagent.gradient_step(cfg, learner, keys[0], beta).params)
        grad = {k: v - stepped[k] for k, v in flat(start).items()}
        jagent.optimizer = saved[2]
        captured.clear()
        learner = jagent.Learner(start, tree(target), jagent.optimizer(cfg).init(start), template.buffer)
        after = []
        for k, b in enumerate(batches):
            current["batch"] = b
            learner = jagent.gradient_step(cfg, learner, keys[k], beta)
            after.append(flat(learner.params))
    finally:
        replay.sample, replay.update_priorities, jagent.optimizer = saved
    return grad, after, captured, draws


def check_backend_updates(protocol_path: str | Path, algorithms: list[str], task: str | None = None,
                          n_steps: int = 3, seed: int = 0) -> list[UpdateCheck]:
    """The same check between rlaudit's two backends: the SB3 built-in against the JAX backend's program, from the
    same parameters on the same batches (IQN with the JAX side's sampled levels fed to the SB3 side).

    Raises:
        InputError: an algorithm the JAX backend does not run, or that the protocol does not name; JAX not
            installed.
    """
    from rlaudit.errors import InputError
    from rlaudit.protocol import load_protocol
    from rlaudit.run.backends.jax import missing_dependency

    protocol = load_protocol(protocol_path)
    chosen = [_entry(protocol, protocol_path, algorithm, BACKEND_CHECKED, "the backend check")
              for algorithm in algorithms]
    missing = missing_dependency()
    if missing:
        raise InputError(f"the backend check needs the JAX backend: {missing}")
    the_task = task or protocol.tasks[0].id
    results = []
    for entry in chosen:
        st = _start(protocol, entry, the_task, n_steps, seed)
        jax_grad, jax_after, jax_priorities, draws = _jax_steps(st.spec, st.batches, st.online, st.target)
        ours = _builtin_steps(st.agent, st.batches, st.online, st.target, draws=draws)
        theirs = {**{f"grad/{k}": v for k, v in jax_grad.items()},
                  **{f"adam_{i}/{k}": v for i, a in enumerate(jax_after) for k, v in a.items()},
                  **{f"priorities_{i}": p for i, p in enumerate(jax_priorities)}}
        results.append(_compare(st.spec, ours, theirs, n_steps, the_task))
    return results
