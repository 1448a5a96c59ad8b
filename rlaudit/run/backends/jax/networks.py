"""The DQN family's Q-networks as pure functions of a parameter pytree (no flax).

Layout, as the SB3 built-ins (``stable_baselines3.dqn.policies.QNetwork``, ``ComponentQNetwork``,
sb3-contrib's ``QuantileNetwork``): features extractor -> hidden layers ``net_arch`` (ReLU) -> linear head of
``n_actions * n_out`` outputs, or with ``dueling`` a value stream (``n_out``) and an advantage stream
(``n_actions * n_out``), each with its own ``stream_arch`` hidden layers, combined per atom / quantile as
``V + A - mean_a A``. For IQN the cosine embedding ``ReLU(Linear(cos(pi i tau)))``, ``i = cos_start .. cos_start + n_cos - 1``,
multiplies the hidden activations before the last ``iqn_post_layers`` hidden layers.

Features extractors (``policy_kwargs.features_extractor``):

- ``flatten`` (default): the observation flattened in C order (SB3's ``FlattenExtractor``). Every
  linear layer starts as torch's ``nn.Linear`` does (SB3 keeps torch's initialisation for DQN): weights and
  biases uniform in ``±1/sqrt(fan_in)``.
- ``minatar``: the 'minatar' network of Obando-Ceron & Castro (2021), ``networks_new.py`` with ``net_conf =
  'minatar'`` at JohanSamir/revisiting_rainbow@64ec8c8 (flax.linen): one 2-D convolution of 16 filters, 3x3,
  stride 1, SAME padding, ReLU, flatten (1,600 features), then the head(s) directly. Every kernel is
  Glorot-uniform (the convolution's fans are those of a 3x3 kernel: ``9 C`` in, ``144`` out) and every bias 0
  (flax's defaults). (An older revision applied a 3x3x3 kernel to an unbatched ``(1, 10, 10, C)`` array, the
  same 2-D convolution numerically but with the 3x3x3 fans in its Glorot bound; the newest revision is the one
  implemented.)

Shapes: ``obs`` is ``(batch, *obs_shape)``: MinAtar's ``(batch, 10, 10, C)`` (bool), CartPole's ``(batch, 4)``
(float32; ``flatten`` only); outputs are ``(batch, n_actions, n_out)``, IQN's
``(batch, n_actions, n_tau)``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from rlaudit.run.backends.jax.config import AgentConfig

CONV_FILTERS = 16


def _linear(key, n_in: int, n_out: int, glorot: bool) -> dict:
    kw, kb = jax.random.split(key)
    if glorot:
        bound = math.sqrt(6.0 / (n_in + n_out))
        return {"w": jax.random.uniform(kw, (n_in, n_out), jnp.float32, -bound, bound),
                "b": jnp.zeros((n_out,), jnp.float32)}
    bound = 1.0 / math.sqrt(n_in)
    return {"w": jax.random.uniform(kw, (n_in, n_out), jnp.float32, -bound, bound),
            "b": jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)}


def _mlp(key, n_in: int, widths: tuple[int, ...], glorot: bool) -> list:
    layers = []
    for width in widths:
        key, sub = jax.random.split(key)
        layers.append(_linear(sub, n_in, width, glorot))
        n_in = width
    return layers


def _split(cfg: AgentConfig) -> int:
    """Hidden layers before the IQN merge (all of them for the other heads)."""
    if cfg.distributional == "iqn":
        return max(0, len(cfg.net_arch) - cfg.iqn_post_layers)
    return len(cfg.net_arch)


def features_dim(cfg: AgentConfig) -> int:
    """Width of the features extractor's output."""
    if cfg.features_extractor == "minatar":
        h, w, _ = cfg.obs_shape
        return h * w * CONV_FILTERS
    return math.prod(cfg.obs_shape)


def init_params(cfg: AgentConfig, key: jax.Array) -> dict:
    """A fresh parameter pytree for ``cfg``'s network."""
    glorot = cfg.features_extractor == "minatar"
    keys = iter(jax.random.split(key, 8))
    params: dict = {}
    n_in = features_dim(cfg)
    if cfg.features_extractor == "minatar":
        c = cfg.obs_shape[2]
        bound = math.sqrt(6.0 / (9 * c + 9 * CONV_FILTERS))
        params["conv"] = {"w": jax.random.uniform(next(keys), (3, 3, c, CONV_FILTERS), jnp.float32, -bound, bound),
                          "b": jnp.zeros((CONV_FILTERS,), jnp.float32)}
    split = _split(cfg)
    params["pre"] = _mlp(next(keys), n_in, cfg.net_arch[:split], glorot)
    merged = cfg.net_arch[split - 1] if split else n_in
    if cfg.distributional == "iqn":
        params["tau"] = _linear(next(keys), cfg.n_cos, merged, glorot)
    params["post"] = _mlp(next(keys), merged, cfg.net_arch[split:], glorot)
    hidden = cfg.net_arch[-1] if cfg.net_arch else n_in
    n_out = cfg.n_out
    if cfg.dueling:
        value = _mlp(next(keys), hidden, cfg.stream_arch, glorot)
        advantage = _mlp(next(keys), hidden, cfg.stream_arch, glorot)
        last = cfg.stream_arch[-1] if cfg.stream_arch else hidden
        params["value"] = value + [_linear(next(keys), last, n_out, glorot)]
        params["advantage"] = advantage + [_linear(next(keys), last, cfg.n_actions * n_out, glorot)]
    else:
        params["head"] = _linear(next(keys), hidden, cfg.n_actions * n_out, glorot)
    return params


def _dense(layer: dict, x: jax.Array) -> jax.Array:
    return x @ layer["w"] + layer["b"]


def _hidden(layers: list, x: jax.Array) -> jax.Array:
    for layer in layers:
        x = jax.nn.relu(_dense(layer, x))
    return x


def _stream(layers: list, x: jax.Array) -> jax.Array:
    return _dense(layers[-1], _hidden(layers[:-1], x))


def _features(cfg: AgentConfig, params: dict, obs: jax.Array) -> jax.Array:
    x = obs.astype(jnp.float32)
    if cfg.features_extractor == "minatar":
        x = jax.nn.relu(conv3x3_same(x, params["conv"]["w"]) + params["conv"]["b"])
    return x.reshape((x.shape[0], -1))


def conv3x3_same(x: jax.Array, w: jax.Array) -> jax.Array:
    """A 3x3 convolution, stride 1, SAME (zero) padding, as one matrix product over the nine shifted copies of
    the input (``lax.conv`` under ``vmap`` over seeds becomes a grouped convolution, several times slower on the
    CPU). ``x`` ``(batch, H, W, C)``, ``w`` ``(3, 3, C, F)`` (HWIO, cross-correlation as ``lax.conv``); returns
    ``(batch, H, W, F)``."""
    _, h, wd, c = x.shape
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    patches = jnp.concatenate([padded[:, i:i + h, j:j + wd, :] for i in range(3) for j in range(3)], axis=-1)
    return patches @ w.reshape(9 * c, -1)


def _heads(cfg: AgentConfig, params: dict, hidden: jax.Array) -> jax.Array:
    """``(batch, n_actions, n_out)`` from the last hidden activations."""
    n_out = cfg.n_out
    if not cfg.dueling:
        return _dense(params["head"], hidden).reshape((-1, cfg.n_actions, n_out))
    value = _stream(params["value"], hidden).reshape((-1, 1, n_out))
    advantage = _stream(params["advantage"], hidden).reshape((-1, cfg.n_actions, n_out))
    return value + advantage - advantage.mean(axis=1, keepdims=True)


def cosine_features(taus: jax.Array, n_cos: int, start: int = 0) -> jax.Array:
    """``cos(pi i tau)``, ``i = start .. start + n_cos - 1``: shape ``taus.shape + (n_cos,)`` (rlaudit's IQN
    embedding; ``start`` 0 is the IQN paper's, 1 Dopamine's)."""
    i = jnp.arange(start, start + n_cos, dtype=jnp.float32)
    if start == 1:  # Dopamine's order, (i pi) tau, as the SB3 built-in (rlaudit.algorithms.dqn_components)
        return jnp.cos(i * jnp.pi * taus[..., None])
    return jnp.cos(jnp.pi * taus[..., None] * i)


def distribution(cfg: AgentConfig, params: dict, obs: jax.Array, taus: jax.Array | None = None) -> jax.Array:
    """Per-action outputs: C51 logits, QR quantiles, IQN quantiles at ``taus`` ``(batch, n_tau)``, or Q-values
    (``n_out = 1``); shape ``(batch, n_actions, n)``."""
    hidden = _hidden(params["pre"], _features(cfg, params, obs))
    if cfg.distributional != "iqn":
        return _heads(cfg, params, _hidden(params["post"], hidden))
    batch, n_tau = taus.shape
    embedding = jax.nn.relu(_dense(params["tau"], cosine_features(taus, cfg.n_cos, cfg.cos_start)))  # (batch, n_tau, d)
    merged = (hidden[:, None, :] * embedding).reshape((batch * n_tau, -1))
    out = _heads(cfg, params, _hidden(params["post"], merged)).reshape((batch, n_tau, cfg.n_actions))
    return out.transpose((0, 2, 1))


def support(cfg: AgentConfig) -> jax.Array:
    """C51's atoms, ``n_atoms`` evenly spaced on ``[v_min, v_max]``."""
    return jnp.linspace(cfg.v_min, cfg.v_max, cfg.n_atoms, dtype=jnp.float32)


def q_values(cfg: AgentConfig, outputs: jax.Array) -> jax.Array:
    """Mean of the return distribution per action, ``(batch, n_actions)``."""
    if cfg.distributional == "c51":
        return (jax.nn.softmax(outputs, axis=2) * support(cfg)).sum(axis=2)
    return outputs.mean(axis=2)


def midpoint_taus(n: int, batch: int) -> jax.Array:
    """``(k + 0.5) / n``, shape ``(batch, n)``."""
    return jnp.broadcast_to((jnp.arange(n, dtype=jnp.float32) + 0.5) / n, (batch, n))


def greedy_q(cfg: AgentConfig, params: dict, obs: jax.Array) -> jax.Array:
    """Q-values the greedy action is taken on (IQN: the mean over ``n_tau_act`` midpoint levels, as the SB3
    built-in acts and evaluates), ``(batch, n_actions)``."""
    taus = midpoint_taus(cfg.n_tau_act, obs.shape[0]) if cfg.distributional == "iqn" else None
    return q_values(cfg, distribution(cfg, params, obs, taus))
