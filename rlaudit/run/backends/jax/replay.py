"""The replay buffer as a pytree of arrays: stable-baselines3's semantics, bit-packed observations.

One buffer per seed (vmap over seeds). As SB3's ``ReplayBuffer`` (``optimize_memory_usage = False``): a ring of
``buffer_size`` transitions ``(obs, action, reward, next_obs, done, timeout)``; uniform samples draw indices in
``[0, size)``; the TD target is cut only where an episode *terminated* (``done * (1 - timeout)``). With
``n_steps > 1``, SB3's ``NStepReplayBuffer``: the discounted return of up to ``n`` stored steps, stopping at
the first ``done`` (or time-out) inclusive, the next observation of the last one, the discount
``gamma ** (steps summed)``; the most recent transition counts as a time-out while its episode goes on, so that
no sum runs into the slot the next transition overwrites.

Prioritized replay is rlaudit's ``PrioritizedReplayBuffer``: proportional priorities ``p_i^alpha`` in a sum
tree (float32 here, float64 there), new transitions at the largest priority seen so far, stratified sampling
(one uniform draw in each of ``batch`` equal segments of the total), importance weights
``(N P(i))^-beta`` normalised by the batch's largest, priorities ``|delta| + per_eps`` after each update.

Boolean observations (MinAtar's, ``obs_dtype = "bool"``) are stored with ``packbits`` (8 cells a byte): 100k
transitions of Seaquest's 10x10x10 observations take 25 MB per seed instead of 200 MB. Float observations
(CartPole's, ``obs_dtype = "float32"``) are stored as they are.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlaudit.run.backends.jax.config import AgentConfig


class Buffer(NamedTuple):
    obs: jax.Array  # (capacity, packed) uint8 (bool observations), else (capacity, *obs_shape) float32
    next_obs: jax.Array  # as obs
    actions: jax.Array  # (capacity,) int32
    rewards: jax.Array  # (capacity,) float32
    dones: jax.Array  # (capacity,) bool
    timeouts: jax.Array  # (capacity,) bool
    pos: jax.Array  # () int32: next slot written
    full: jax.Array  # () bool
    tree: jax.Array  # (2 * leaves,) float32 sum tree of p^alpha (size 2 without prioritized replay)
    max_priority: jax.Array  # () float32


class Batch(NamedTuple):
    obs: jax.Array  # (batch, *obs_shape): bool (MinAtar's (10, 10, C)) or float32
    actions: jax.Array  # (batch,) int32
    rewards: jax.Array  # (batch,) float32, n-step returns
    next_obs: jax.Array
    dones: jax.Array  # (batch,) float32: 1 where the target is cut (terminated)
    discounts: jax.Array  # (batch,) float32: gamma ** steps summed
    indices: jax.Array  # (batch,) int32
    weights: jax.Array  # (batch,) float32 importance weights (1 without prioritized replay)


def _leaves(capacity: int) -> int:
    return 1 << max(0, (capacity - 1).bit_length())


def _n_cells(cfg: AgentConfig) -> int:
    return math.prod(cfg.obs_shape)


def empty(cfg: AgentConfig) -> Buffer:
    """An empty buffer for one seed."""
    n = cfg.buffer_size
    if cfg.obs_dtype == "bool":
        shape, dtype = (n, (_n_cells(cfg) + 7) // 8), jnp.uint8
    else:
        shape, dtype = (n, *cfg.obs_shape), jnp.float32
    tree = jnp.zeros((2 * _leaves(n),) if cfg.prioritized else (2,), jnp.float32)
    return Buffer(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((n,), jnp.int32),
                  jnp.zeros((n,), jnp.float32), jnp.zeros((n,), jnp.bool_), jnp.zeros((n,), jnp.bool_),
                  jnp.int32(0), jnp.bool_(False), tree, jnp.float32(1.0))


def pack(cfg: AgentConfig, obs: jax.Array) -> jax.Array:
    """One observation as stored: a boolean one as bytes, a float one as float32."""
    if cfg.obs_dtype == "bool":
        return jnp.packbits(obs.reshape(-1))
    return obs.astype(jnp.float32)


def unpack(cfg: AgentConfig, packed: jax.Array) -> jax.Array:
    """Stored observations back, ``(batch, *obs_shape)`` (bytes to booleans; floats as they are)."""
    if cfg.obs_dtype != "bool":
        return packed
    bits = jnp.unpackbits(packed, axis=-1, count=_n_cells(cfg))
    return bits.reshape(packed.shape[:-1] + cfg.obs_shape).astype(jnp.bool_)


def _tree_set(cfg: AgentConfig, tree: jax.Array, indices: jax.Array, values: jax.Array) -> jax.Array:
    """Set leaves ``indices`` to ``values`` and refresh their ancestors level by level (repeated parents get the
    same sum twice, as ``SumTree.update``)."""
    leaves = _leaves(cfg.buffer_size)
    nodes = indices + leaves
    tree = tree.at[nodes].set(values)
    for _ in range(leaves.bit_length() - 1):
        nodes = nodes // 2
        tree = tree.at[nodes].set(tree[2 * nodes] + tree[2 * nodes + 1])
    return tree


def _tree_find(cfg: AgentConfig, tree: jax.Array, values: jax.Array) -> jax.Array:
    leaves = _leaves(cfg.buffer_size)
    nodes = jnp.ones(values.shape, jnp.int32)
    for _ in range(leaves.bit_length() - 1):
        left = 2 * nodes
        left_sum = tree[left]
        go_right = (values >= left_sum) & (tree[left + 1] > 0)
        values = values - left_sum * go_right
        nodes = left + go_right.astype(jnp.int32)
    return jnp.minimum(nodes - leaves, cfg.buffer_size - 1)


def add(cfg: AgentConfig, buf: Buffer, obs, action, reward, next_obs, done, timeout) -> Buffer:
    """Store one transition at ``pos`` (the oldest is overwritten when full)."""
    i = buf.pos
    tree = buf.tree
    if cfg.prioritized:
        tree = _tree_set(cfg, tree, i[None], (buf.max_priority ** cfg.per_alpha)[None])
    pos = (i + 1) % cfg.buffer_size
    return buf._replace(obs=buf.obs.at[i].set(pack(cfg, obs)), next_obs=buf.next_obs.at[i].set(pack(cfg, next_obs)),
                        actions=buf.actions.at[i].set(action), rewards=buf.rewards.at[i].set(reward),
                        dones=buf.dones.at[i].set(done), timeouts=buf.timeouts.at[i].set(timeout), pos=pos,
                        full=buf.full | (pos == 0), tree=tree)


def size(cfg: AgentConfig, buf: Buffer) -> jax.Array:
    """Transitions stored."""
    return jnp.where(buf.full, cfg.buffer_size, buf.pos)


def sample(cfg: AgentConfig, buf: Buffer, key: jax.Array, beta: jax.Array) -> Batch:
    """A batch of ``batch_size`` transitions (uniform, or prioritized with importance exponent ``beta``)."""
    n_stored = size(cfg, buf)
    b = cfg.batch_size
    if cfg.prioritized:
        total = buf.tree[1]
        values = (jnp.arange(b, dtype=jnp.float32) + jax.random.uniform(key, (b,))) * (total / b)
        indices = jnp.minimum(_tree_find(cfg, buf.tree, values), n_stored - 1).astype(jnp.int32)
        probabilities = buf.tree[indices + _leaves(cfg.buffer_size)] / total
        weights = (n_stored * probabilities) ** (-beta)
        weights = weights / weights.max()
    else:
        indices = jax.random.randint(key, (b,), 0, n_stored, dtype=jnp.int32)
        weights = jnp.ones((b,), jnp.float32)
    if cfg.n_steps == 1:
        dones = (buf.dones[indices] & ~buf.timeouts[indices]).astype(jnp.float32)
        return Batch(unpack(cfg, buf.obs[indices]), buf.actions[indices], buf.rewards[indices],
                     unpack(cfg, buf.next_obs[indices]), dones, jnp.full((b,), cfg.gamma, jnp.float32), indices,
                     weights)
    n = cfg.n_steps
    last_valid = (buf.pos - 1) % cfg.buffer_size
    timeouts = buf.timeouts.at[last_valid].set(buf.timeouts[last_valid] | ~buf.dones[last_valid])
    seq = (indices[:, None] + jnp.arange(n)[None, :]) % cfg.buffer_size  # (batch, n)
    ended = buf.dones[seq] | timeouts[seq]
    first_end = jnp.where(ended.any(axis=1), ended.argmax(axis=1), n - 1)
    mask = jnp.arange(n)[None, :] <= first_end[:, None]
    discounts = cfg.gamma ** mask.sum(axis=1).astype(jnp.float32)
    returns = (buf.rewards[seq] * (cfg.gamma ** jnp.arange(n, dtype=jnp.float32))[None, :] * mask).sum(axis=1)
    last = (indices + first_end) % cfg.buffer_size
    dones = (buf.dones[last] & ~timeouts[last]).astype(jnp.float32)
    return Batch(unpack(cfg, buf.obs[indices]), buf.actions[indices], returns, unpack(cfg, buf.next_obs[last]),
                 dones, discounts.astype(jnp.float32), indices, weights)


def update_priorities(cfg: AgentConfig, buf: Buffer, indices: jax.Array, errors: jax.Array) -> Buffer:
    """``p_i = |errors_i| + per_eps`` for the sampled ``indices`` (for an index drawn twice, one of its two errors is kept)."""
    priorities = jnp.abs(errors) + cfg.per_eps
    tree = _tree_set(cfg, buf.tree, indices, priorities ** cfg.per_alpha)
    return buf._replace(tree=tree, max_priority=jnp.maximum(buf.max_priority, priorities.max()))
