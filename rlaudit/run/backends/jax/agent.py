"""Targets, losses, the gradient step, exploration: the DQN family's update in JAX, as the SB3 built-ins do it.

Each function is the JAX counterpart of one in :mod:`rlaudit.algorithms.dqn_family` /
:mod:`rlaudit.algorithms.dqn_components` (or sb3-contrib's QR-DQN), for one seed (the training loop vmaps
them over seeds):

- expected heads (DQN, Double, Dueling, PER): ``r + gamma^k (1 - d) Q_target(s', a*)`` with ``a*`` the target's
  argmax (double: the online network's); SB3's Huber loss (``smooth_l1``, beta 1) or ``loss = "mse"``
  (``(q - y)^2``, torch's ``mse_loss``); PER priorities from the TD error;
- C51: Dopamine's projection of the target distribution onto the support, cross-entropy loss;
- QR-DQN: quantile Huber loss at the fixed midpoints, summed over quantiles, averaged over target samples
  (sb3-contrib's, kappa = 1);
- IQN: ``n_tau`` sampled levels for the online network, ``n_tau_target`` for the target and ``n_tau_act`` for
  its argmax (one target pass for both without double), quantile Huber loss at threshold ``kappa``;
- distributional heads with PER: the per-sample loss is the priority (as Rainbow);
- the gradient's global norm clipped to ``max_grad_norm`` as ``torch.nn.utils.clip_grad_norm_`` does
  (factor ``max_norm / (norm + 1e-6)`` when below 1; ``inf``: none), then Adam (optax; torch's betas,
  ``adam_eps``, default torch's 1e-8);
- exploration: SB3's linear schedule from ``exploration_initial_eps`` to ``exploration_final_eps`` over
  ``exploration_fraction`` of the run, or Dopamine's ``linearly_decaying_epsilon`` (``exploration_schedule =
  "dopamine"``); uniform actions before ``learning_starts``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlaudit.run.backends.jax import networks, replay
from rlaudit.run.backends.jax.config import AgentConfig


class Learner(NamedTuple):
    """One seed's learning state."""

    params: dict
    target: dict
    opt_state: object
    buffer: replay.Buffer


def optimizer(cfg: AgentConfig) -> optax.GradientTransformation:
    """Adam with torch's defaults but ``adam_eps``."""
    return optax.adam(cfg.learning_rate, b1=0.9, b2=0.999, eps=cfg.adam_eps)


def init_learner(cfg: AgentConfig, key: jax.Array) -> Learner:
    params = networks.init_params(cfg, key)
    return Learner(params, params, optimizer(cfg).init(params), replay.empty(cfg))


def epsilon(cfg: AgentConfig, t: jax.Array, total: jax.Array) -> jax.Array:
    """Exploration rate for the action taken after ``t`` env steps of a run of ``total`` steps."""
    final, start = cfg.exploration_final_eps, cfg.exploration_initial_eps
    if cfg.exploration_schedule == "dopamine":
        decay, warmup = cfg.epsilon_decay_steps, cfg.learning_starts
        bonus = (1.0 - final) * (decay + warmup - t) / decay
        return final + jnp.clip(bonus, 0.0, 1.0 - final)
    done = t / total  # SB3's 1 - progress_remaining
    if cfg.exploration_fraction <= 0:
        return jnp.float32(final)
    return jnp.where(done > cfg.exploration_fraction, final, start + done * (final - start) / cfg.exploration_fraction)


def per_beta(cfg: AgentConfig, t: jax.Array, total: jax.Array) -> jax.Array:
    """PER's importance exponent at ``t`` of ``total`` steps: annealed linearly to 1, or fixed."""
    if not cfg.per_beta_anneal:
        return jnp.float32(cfg.per_beta)
    progress = jnp.clip(t / total, 0.0, 1.0)
    return cfg.per_beta + (1.0 - cfg.per_beta) * progress


def huber(x: jax.Array, kappa: float = 1.0) -> jax.Array:
    ax = jnp.abs(x)
    return jnp.where(ax <= kappa, 0.5 * x**2, kappa * (ax - 0.5 * kappa))


def categorical_projection(next_probs, rewards, dones, discounts, atoms) -> jax.Array:
    """C51's target on ``atoms``: every ``Tz_j`` (clipped) gives atom ``i`` the share ``1 - |Tz_j - z_i| / dz``
    (clipped to [0, 1]). ``next_probs`` ``(batch, n_atoms)``; the rest ``(batch,)``."""
    v_min, v_max = atoms[0], atoms[-1]
    delta = (v_max - v_min) / (atoms.shape[0] - 1)
    target = jnp.clip(rewards[:, None] + ((1 - dones) * discounts)[:, None] * atoms[None, :], v_min, v_max)
    distance = jnp.abs(target[:, None, :] - atoms[None, :, None]) / delta
    return ((1 - distance).clip(0, 1) * next_probs[:, None, :]).sum(axis=2)


def quantile_huber_loss(quantiles, taus, targets, kappa: float) -> jax.Array:
    """``sum_i mean_j |tau_i - 1{d_ij < 0}| L_kappa(d_ij) / kappa``, ``d_ij = target_j - theta_i``; per sample."""
    delta = targets[:, None, :] - quantiles[:, :, None]
    weight = jnp.abs(taus[..., None] - jax.lax.stop_gradient((delta < 0).astype(jnp.float32)))
    return (weight * huber(delta, kappa) / kappa).mean(axis=2).sum(axis=1)


def _elementwise_loss(cfg: AgentConfig, params, target_params, batch: replay.Batch, key) -> tuple[jax.Array, jax.Array]:
    """Per-sample loss and the PER priority signal, both ``(batch,)``."""
    b = batch.actions.shape[0]
    rows = jnp.arange(b)
    a = batch.actions
    sg = jax.lax.stop_gradient
    if cfg.distributional == "none":
        next_target = networks.distribution(cfg, target_params, batch.next_obs)[..., 0]
        if cfg.double:
            best = networks.distribution(cfg, params, batch.next_obs)[..., 0].argmax(axis=1)
            next_q = next_target[rows, best]
        else:
            next_q = next_target.max(axis=1)
        y = sg(batch.rewards + (1 - batch.dones) * batch.discounts * next_q)
        q = networks.distribution(cfg, params, batch.obs)[rows, a, 0]
        error = q - y
        loss = error**2 if cfg.loss == "mse" else huber(error)
        return loss, error
    if cfg.distributional == "iqn":
        k_next, k_cur = jax.random.split(key)
        taus = jax.random.uniform(k_next, (b, cfg.n_tau_target + cfg.n_tau_act))
        if cfg.double:
            next_out = networks.distribution(cfg, target_params, batch.next_obs, taus[:, : cfg.n_tau_target])
            next_q = networks.distribution(cfg, params, batch.next_obs, taus[:, cfg.n_tau_target:]).mean(axis=2)
        else:
            out = networks.distribution(cfg, target_params, batch.next_obs, taus)
            next_out, next_q = out[:, :, : cfg.n_tau_target], out[:, :, cfg.n_tau_target:].mean(axis=2)
        best = next_q.argmax(axis=1)
        target = sg(batch.rewards[:, None] + ((1 - batch.dones) * batch.discounts)[:, None] * next_out[rows, best])
        cur_taus = jax.random.uniform(k_cur, (b, cfg.n_tau))
        quantiles = networks.distribution(cfg, params, batch.obs, cur_taus)[rows, a]
        loss = quantile_huber_loss(quantiles, cur_taus, target, cfg.kappa)
        return loss, loss
    next_out = networks.distribution(cfg, target_params, batch.next_obs)
    if cfg.double:
        next_q = networks.q_values(cfg, networks.distribution(cfg, params, batch.next_obs))
    else:
        next_q = networks.q_values(cfg, next_out)
    best = next_q.argmax(axis=1)
    out = networks.distribution(cfg, params, batch.obs)[rows, a]
    if cfg.distributional == "c51":
        target = sg(categorical_projection(jax.nn.softmax(next_out[rows, best], axis=1), batch.rewards, batch.dones,
                                           batch.discounts, networks.support(cfg)))
        loss = -(target * jax.nn.log_softmax(out, axis=1)).sum(axis=1)
        return loss, loss
    target = sg(batch.rewards[:, None] + ((1 - batch.dones) * batch.discounts)[:, None] * next_out[rows, best])
    taus = (jnp.arange(cfg.n_quantiles, dtype=jnp.float32) + 0.5) / cfg.n_quantiles
    loss = quantile_huber_loss(out, jnp.broadcast_to(taus, out.shape), target, cfg.kappa)
    return loss, loss


def _clip(cfg: AgentConfig, grads):
    if cfg.max_grad_norm == float("inf"):
        return grads
    norm = optax.tree.norm(grads)
    factor = jnp.minimum(1.0, cfg.max_grad_norm / (norm + 1e-6))
    return jax.tree_util.tree_map(lambda g: g * factor, grads)


def gradient_step(cfg: AgentConfig, learner: Learner, key: jax.Array, beta: jax.Array) -> Learner:
    """Sample a batch, one Adam step on its loss, update the priorities (PER)."""
    k_sample, k_loss = jax.random.split(key)
    batch = replay.sample(cfg, learner.buffer, k_sample, beta)

    def loss_fn(params):
        elementwise, signal = _elementwise_loss(cfg, params, learner.target, batch, k_loss)
        return (batch.weights * elementwise).mean(), signal

    grads, signal = jax.grad(loss_fn, has_aux=True)(learner.params)
    updates, opt_state = optimizer(cfg).update(_clip(cfg, grads), learner.opt_state, learner.params)
    params = optax.apply_updates(learner.params, updates)
    buffer = learner.buffer
    if cfg.prioritized:
        buffer = replay.update_priorities(cfg, buffer, batch.indices, jax.lax.stop_gradient(signal))
    return Learner(params, learner.target, opt_state, buffer)


def train(cfg: AgentConfig, learner: Learner, key: jax.Array, beta: jax.Array) -> Learner:
    """``gradient_steps`` gradient steps (SB3's ``train``)."""
    if cfg.gradient_steps == 1:
        return gradient_step(cfg, learner, key, beta)
    keys = jax.random.split(key, cfg.gradient_steps)
    return jax.lax.fori_loop(0, cfg.gradient_steps, lambda i, lr: gradient_step(cfg, lr, keys[i], beta), learner)


def update_target(cfg: AgentConfig, learner: Learner) -> Learner:
    """Polyak update ``target <- tau * online + (1 - tau) * target`` (a copy at ``tau = 1``)."""
    if cfg.tau == 1.0:
        return learner._replace(target=learner.params)
    target = jax.tree_util.tree_map(lambda p, t: cfg.tau * p + (1 - cfg.tau) * t, learner.params, learner.target)
    return learner._replace(target=target)


def act(cfg: AgentConfig, params, obs: jax.Array, key: jax.Array, eps: jax.Array, uniform: jax.Array) -> jax.Array:
    """The training action for one observation: uniform when ``uniform`` (before ``learning_starts``) or with
    probability ``eps``, else greedy."""
    k_coin, k_action = jax.random.split(key)
    random_action = jax.random.randint(k_action, (), 0, cfg.n_actions, dtype=jnp.int32)
    greedy = networks.greedy_q(cfg, params, obs[None])[0].argmax().astype(jnp.int32)
    explore = uniform | (jax.random.uniform(k_coin) < eps)
    return jnp.where(explore, random_action, greedy)
