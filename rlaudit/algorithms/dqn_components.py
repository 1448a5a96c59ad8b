"""Distributional and noisy-net components of the DQN family: the maths, the layer and the Q-network.

Pure functions, each tested on hand-built batches:

- :func:`categorical_projection` — C51's projection of the Bellman-updated distribution onto the fixed
  support (Bellemare et al. 2017, Algorithm 1), written as Dopamine writes it: every target atom ``Tz_j``
  (clipped to ``[v_min, v_max]``) gives its mass to its two neighbouring support atoms in proportion to
  ``1 - |Tz_j - z_i| / Δz``.
- :func:`categorical_loss` — cross-entropy of the projected target against the predicted distribution.
- :func:`quantile_huber_loss` — the quantile Huber loss of QR-DQN and IQN (Dabney et al. 2018a, 2018b).
- :func:`cosine_features` — IQN's embedding of quantile levels, ``cos(π i τ)`` for ``i = start .. start + n_cos - 1``.
- :func:`factorised_noise` — ``f(x) = sgn(x) sqrt(|x|)`` of factorised Gaussian noise (Fortunato et al. 2018).

:class:`NoisyLinear` is the factorised-Gaussian noisy layer; :class:`ComponentQNetwork` is the Q-network
that composes dueling streams, noisy layers and a distributional head (``"c51"``, ``"qr"``, ``"iqn"`` or
``"none"``). Its ``forward`` always returns the *mean* of the return distribution per action, shape
``(batch, n_actions)``, so SB3's greedy ``argmax`` acts on the mean.

Stochastic parts (noise in the weights, sampled quantile levels for IQN) are switched on only while the
agent acts for training or updates (:meth:`ComponentQNetwork.set_stochastic`). Otherwise — evaluation,
``predict(deterministic=True)`` — the noisy layers use their mean weights (as Dopamine's ``eval_mode``) and
IQN averages over ``n_tau_act`` evenly spaced levels ``(k + 0.5) / K`` instead of sampled ones, so a greedy
evaluation draws no random numbers at all.
"""

from __future__ import annotations

import math
from typing import Any

import torch as th
from stable_baselines3.dqn.policies import QNetwork
from torch import nn
from torch.nn import functional as F

DISTRIBUTIONAL = ("none", "c51", "qr", "iqn")
"""Values of the ``distributional`` hyperparameter."""


# --- the defining mathematics ------------------------------------------------------------------------


def categorical_projection(
    next_probs: th.Tensor,
    rewards: th.Tensor,
    dones: th.Tensor,
    discounts: th.Tensor | float,
    support: th.Tensor,
) -> th.Tensor:
    """Project ``r + γ (1 - d) z`` with probabilities ``next_probs`` onto ``support`` (C51's target).

    Args:
        next_probs: target distribution at the next state and chosen action, shape ``(batch, n_atoms)``.
        rewards: shape ``(batch, 1)``.
        dones: shape ``(batch, 1)``; 1.0 where the episode terminated.
        discounts: scalar γ or shape ``(batch, 1)`` (γ^n for n-step returns).
        support: the atoms ``z``, evenly spaced from ``v_min`` to ``v_max``, shape ``(n_atoms,)``.

    Returns:
        Projected probabilities on ``support``, shape ``(batch, n_atoms)``; each row sums to 1.
    """
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (support.numel() - 1)
    target_atoms = (rewards + (1 - dones) * discounts * support.reshape(1, -1)).clamp(v_min, v_max)
    # weight[b, i, j] = [1 - |Tz_j - z_i| / Δz] clipped to [0, 1]: atom j's share that lands on atom i.
    distance = (target_atoms.unsqueeze(1) - support.reshape(1, -1, 1)).abs() / delta
    weight = (1 - distance).clamp(0, 1)
    return (weight * next_probs.unsqueeze(1)).sum(dim=2)


def categorical_loss(logits: th.Tensor, target_probs: th.Tensor) -> th.Tensor:
    """Cross-entropy ``-Σ_i m_i log p_i`` of target probabilities ``m`` against ``softmax(logits)``.

    Args:
        logits: predicted logits at the taken action, shape ``(batch, n_atoms)``.
        target_probs: projected target, shape ``(batch, n_atoms)``.

    Returns:
        Per-sample loss, shape ``(batch,)``.
    """
    return -(target_probs * F.log_softmax(logits, dim=1)).sum(dim=1)


def quantile_huber_loss(quantiles: th.Tensor, taus: th.Tensor, targets: th.Tensor, kappa: float = 1.0) -> th.Tensor:
    """Quantile Huber loss ``Σ_i mean_j |τ_i - 1{δ_ij < 0}| L_κ(δ_ij) / κ`` with ``δ_ij = target_j - θ_i``.

    ``L_κ`` is the Huber loss (``δ²/2`` for ``|δ| <= κ``, else ``κ (|δ| - κ/2)``); the sum over the
    predicted quantiles and the mean over the target samples is IQN's eq. 3 (QR-DQN's loss with fixed
    ``τ_i = (2i + 1) / 2N``).

    Args:
        quantiles: predicted quantile values θ at the taken action, shape ``(batch, n_tau)``.
        taus: their quantile levels in (0, 1), shape ``(batch, n_tau)`` or ``(n_tau,)``.
        targets: target samples, shape ``(batch, n_target)``.
        kappa: Huber threshold κ > 0.

    Returns:
        Per-sample loss, shape ``(batch,)``.
    """
    delta = targets.unsqueeze(1) - quantiles.unsqueeze(2)  # (batch, n_tau, n_target)
    abs_delta = delta.abs()
    huber = th.where(abs_delta <= kappa, 0.5 * delta**2, kappa * (abs_delta - 0.5 * kappa))
    taus = taus.reshape(-1, quantiles.shape[1], 1) if taus.dim() == 2 else taus.reshape(1, -1, 1)
    weight = (taus - (delta.detach() < 0).to(delta.dtype)).abs()
    return (weight * huber / kappa).mean(dim=2).sum(dim=1)


def cosine_features(taus: th.Tensor, n_cos: int, start: int = 0) -> th.Tensor:
    """IQN's cosine features ``cos(π i τ)``, ``i = start .. start + n_cos - 1`` (Dabney et al. 2018b, eq. 4:
    ``start = 0``, whose first feature is the constant 1; Dopamine's agents: ``start = 1``).

    Args:
        taus: quantile levels, shape ``(batch, n_tau)``.
        n_cos: number of features.
        start: the first ``i``.

    Returns:
        Shape ``(batch, n_tau, n_cos)``.
    """
    i = th.arange(start, start + n_cos, dtype=taus.dtype, device=taus.device)
    if start == 1:
        # Dopamine's features in Dopamine's order, (i pi) tau: float32 rounds the argument (up to 64 pi) otherwise,
        # and the quantile loss's indicator turns that into gradient differences of ~3e-4 (docs/fidelity.md)
        return th.cos(i * math.pi * taus.unsqueeze(-1))
    return th.cos(math.pi * taus.unsqueeze(-1) * i)


def factorised_noise(x: th.Tensor) -> th.Tensor:
    """``f(x) = sgn(x) sqrt(|x|)`` applied to standard-normal draws (Fortunato et al. 2018, eq. 11)."""
    return x.sign() * x.abs().sqrt()


def midpoint_taus(n: int, batch: int, device: Any = None) -> th.Tensor:
    """Evenly spaced quantile levels ``(k + 0.5) / n``, shape ``(batch, n)`` (QR-DQN's fixed levels)."""
    return ((th.arange(n, dtype=th.float32, device=device) + 0.5) / n).expand(batch, n)


def dueling_combine(value: th.Tensor, advantage: th.Tensor) -> th.Tensor:
    """Combine the streams as ``Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')`` (Wang et al. 2016, eq. 9).

    Also per atom or quantile: ``value`` of shape ``(batch, 1, n)`` and ``advantage`` of shape
    ``(batch, n_actions, n)`` give ``(batch, n_actions, n)``.

    Args:
        value: shape ``(batch, 1)``.
        advantage: shape ``(batch, n_actions)``.

    Returns:
        Q-values, shape ``(batch, n_actions)``.
    """
    return value + advantage - advantage.mean(dim=1, keepdim=True)


# --- noisy layer -------------------------------------------------------------------------------------------


class NoisyLinear(nn.Module):
    """Linear layer with factorised Gaussian noise, ``y = (μ_w + σ_w ⊙ ε_w) x + μ_b + σ_b ⊙ ε_b``.

    ``ε_w = f(ε_out) f(ε_in)^T`` and ``ε_b = f(ε_out)`` from ``in + out`` standard-normal draws
    (:func:`factorised_noise`). Initialisation as Fortunato et al. (sec. 3.2): ``μ ~ U(-1/√p, 1/√p)`` and
    ``σ = σ0 / √p`` with ``p`` the number of inputs. The noise is drawn anew by :meth:`reset_noise` and is
    applied only while :attr:`noise_enabled` is set; otherwise the layer uses its mean weights.

    Args:
        in_features: inputs ``p``.
        out_features: outputs ``q``.
        sigma0: initial noise scale σ0 (0.5 in the paper).
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        self.in_features, self.out_features, self.sigma0 = int(in_features), int(out_features), float(sigma0)
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(th.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(th.full((out_features, in_features), sigma0 * bound))
        self.bias_mu = nn.Parameter(th.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(th.full((out_features,), sigma0 * bound))
        self.register_buffer("eps_in", th.zeros(in_features))
        self.register_buffer("eps_out", th.zeros(out_features))
        self.noise_enabled = False

    def reset_noise(self) -> None:
        """Draw new ``ε_in``, ``ε_out`` from the global torch generator (seeded with the run)."""
        self.eps_in.copy_(factorised_noise(th.randn(self.in_features, device=self.eps_in.device)))
        self.eps_out.copy_(factorised_noise(th.randn(self.out_features, device=self.eps_out.device)))

    def forward(self, x: th.Tensor) -> th.Tensor:
        if not self.noise_enabled:
            return F.linear(x, self.weight_mu, self.bias_mu)
        # (σ_w ⊙ ε_out ε_in^T) x = ε_out ⊙ (σ_w (ε_in ⊙ x)): two matrix products instead of building the
        # noisy weight matrix at every call (the per-step cost of acting with batch 1).
        noise = F.linear(x * self.eps_in, self.weight_sigma, self.bias_sigma)
        return F.linear(x, self.weight_mu, self.bias_mu) + self.eps_out * noise

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, sigma0={self.sigma0}"


def _mlp(in_dim: int, out_dim: int, arch: list[int], activation: type[nn.Module], linear: Any) -> list[nn.Module]:
    """Hidden layers ``arch`` with activations, then a linear output (none when ``out_dim < 0``)."""
    layers: list[nn.Module] = []
    for width in arch:
        layers += [linear(in_dim, width), activation()]
        in_dim = width
    if out_dim >= 0:
        layers.append(linear(in_dim, out_dim))
    return layers


# --- the Q-network -------------------------------------------------------------------------------------------


class ComponentQNetwork(QNetwork):
    """Q-network with optional dueling streams, noisy layers and a distributional head.

    Layout: features extractor → hidden layers ``net_arch`` → head(s). With ``dueling`` the head is a value
    stream (``n_out`` outputs) and an advantage stream (``n_actions × n_out``), combined per atom or
    quantile by :func:`dueling_combine` (as in Rainbow, on the logits for
    C51). ``n_out`` is ``n_atoms`` (C51), ``n_quantiles`` (QR) or 1 (IQN, none). With ``noisy`` every linear
    layer after the features extractor is a :class:`NoisyLinear`. For IQN the quantile embedding
    ``ReLU(Linear(cosine_features(τ)))`` multiplies the hidden activations before the last
    ``iqn_post_layers`` hidden layers (default 1: the paper merges after the convolutions, before the
    512-unit layer; 0 merges after the last hidden layer, so only the linear head runs once per τ).

    Args:
        distributional: ``"none"``, ``"c51"``, ``"qr"`` or ``"iqn"``.
        n_atoms: C51 atoms.
        v_min, v_max: C51 support bounds.
        n_quantiles: QR-DQN quantiles.
        n_cos: IQN cosine features.
        cos_start: the first cosine feature's index (0: the IQN paper's; 1: Dopamine's).
        n_tau_act: IQN quantile samples ``K`` averaged for the greedy action.
        iqn_post_layers: hidden layers of ``net_arch`` after the IQN merge.
        dueling: value and advantage streams.
        stream_arch: hidden layers of each dueling stream.
        noisy: factorised-Gaussian noisy linear layers.
        noisy_sigma0: their σ0.
    """

    def __init__(
        self,
        *args: Any,
        distributional: str = "none",
        n_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        n_quantiles: int = 200,
        n_cos: int = 64,
        cos_start: int = 0,
        n_tau_act: int = 32,
        iqn_post_layers: int = 1,
        dueling: bool = False,
        stream_arch: list[int] | None = None,
        noisy: bool = False,
        noisy_sigma0: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.distributional = distributional
        self.n_atoms, self.v_min, self.v_max = int(n_atoms), float(v_min), float(v_max)
        self.n_quantiles, self.n_cos, self.n_tau_act = int(n_quantiles), int(n_cos), int(n_tau_act)
        self.cos_start = int(cos_start)
        self.iqn_post_layers = int(iqn_post_layers)
        self.dueling, self.stream_arch = bool(dueling), list(stream_arch or [])
        self.noisy, self.noisy_sigma0 = bool(noisy), float(noisy_sigma0)
        self.n_out = {"c51": self.n_atoms, "qr": self.n_quantiles}.get(distributional, 1)
        self.n_actions = int(self.action_space.n)
        self.stochastic = False
        self.register_buffer("support", th.linspace(self.v_min, self.v_max, self.n_atoms))

        def linear(n_in: int, n_out: int) -> nn.Module:
            return NoisyLinear(n_in, n_out, self.noisy_sigma0) if self.noisy else nn.Linear(n_in, n_out)

        act = self.activation_fn
        # The hidden layers after the IQN merge run once per (sample, τ): they set IQN's cost.
        split = max(0, len(self.net_arch) - self.iqn_post_layers) if distributional == "iqn" else len(self.net_arch)
        self.q_net = nn.Sequential(*_mlp(self.features_dim, -1, self.net_arch[:split], act, linear))
        merged = self.net_arch[split - 1] if split else self.features_dim
        if distributional == "iqn":
            self.tau_embedding = nn.Sequential(nn.Linear(self.n_cos, merged), nn.ReLU())
        self.post = nn.Sequential(*_mlp(merged, -1, self.net_arch[split:], act, linear))
        hidden = self.net_arch[-1] if self.net_arch else self.features_dim
        if self.dueling:
            self.value_stream = nn.Sequential(*_mlp(hidden, self.n_out, self.stream_arch, act, linear))
            self.advantage_stream = nn.Sequential(
                *_mlp(hidden, self.n_actions * self.n_out, self.stream_arch, act, linear)
            )
        else:
            self.head = nn.Sequential(*_mlp(hidden, self.n_actions * self.n_out, [], act, linear))
        self.noisy_layers = [m for m in self.modules() if isinstance(m, NoisyLinear)]
        self._n_noise = sum(layer.in_features + layer.out_features for layer in self.noisy_layers)

    def set_stochastic(self, on: bool) -> None:
        """Switch noise (noisy layers) and sampled quantile levels (IQN) on for acting/updating, or off."""
        self.stochastic = bool(on)
        for layer in self.noisy_layers:
            layer.noise_enabled = self.stochastic

    def reset_noise(self) -> None:
        """Draw new noise in every noisy layer (one generator call for all: this runs at every step)."""
        if not self.noisy_layers:
            return
        draws = factorised_noise(th.randn(self._n_noise, device=self.support.device))
        start = 0
        for layer in self.noisy_layers:
            for name in ("eps_in", "eps_out"):
                buffer = layer._buffers[name]
                buffer.copy_(draws[start : start + buffer.numel()])
                start += buffer.numel()

    def _heads(self, hidden: th.Tensor) -> th.Tensor:
        if not self.dueling:
            return self.head(hidden).reshape(-1, self.n_actions, self.n_out)
        value = self.value_stream(hidden).reshape(-1, 1, self.n_out)
        advantage = self.advantage_stream(hidden).reshape(-1, self.n_actions, self.n_out)
        return dueling_combine(value, advantage)

    def distribution(self, obs: th.Tensor, taus: th.Tensor | None = None) -> th.Tensor:
        """Per-action outputs, shape ``(batch, n_actions, n)``.

        C51: logits over the ``n_atoms`` atoms; QR: the ``n_quantiles`` quantile values; IQN: the quantile
        values at ``taus`` (shape ``(batch, n_tau)``, required); none: the Q-values (``n = 1``).
        """
        hidden = self.q_net(self.extract_features(obs, self.features_extractor))
        if self.distributional != "iqn":
            return self._heads(self.post(hidden) if len(self.post) else hidden)
        batch, n_tau = taus.shape
        embedding = self.tau_embedding(cosine_features(taus, self.n_cos, self.cos_start))  # (batch, n_tau, d)
        merged = (hidden.unsqueeze(1) * embedding).reshape(batch * n_tau, -1)
        out = self._heads(self.post(merged)).reshape(batch, n_tau, self.n_actions)
        return out.transpose(1, 2)

    def act_taus(self, batch: int) -> th.Tensor:
        """IQN levels for the greedy action: ``n_tau_act`` uniform draws when stochastic, else midpoints."""
        if self.stochastic:
            return th.rand(batch, self.n_tau_act, device=self.support.device)
        return midpoint_taus(self.n_tau_act, batch, self.support.device)

    def q_values(self, outputs: th.Tensor) -> th.Tensor:
        """Mean of the return distribution per action from :meth:`distribution`'s outputs, ``(batch, n_actions)``."""
        if self.distributional == "c51":
            return (F.softmax(outputs, dim=2) * self.support).sum(dim=2)
        return outputs.mean(dim=2)

    def forward(self, obs: th.Tensor) -> th.Tensor:
        taus = self.act_taus(obs.shape[0]) if self.distributional == "iqn" else None
        return self.q_values(self.distribution(obs, taus))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(),
            "distributional": self.distributional, "n_atoms": self.n_atoms, "v_min": self.v_min,
            "v_max": self.v_max, "n_quantiles": self.n_quantiles, "n_cos": self.n_cos, "cos_start": self.cos_start,
            "n_tau_act": self.n_tau_act, "iqn_post_layers": self.iqn_post_layers, "dueling": self.dueling, "stream_arch": self.stream_arch,
            "noisy": self.noisy, "noisy_sigma0": self.noisy_sigma0,
        }


__all__ = [
    "DISTRIBUTIONAL",
    "ComponentQNetwork",
    "NoisyLinear",
    "categorical_loss",
    "categorical_projection",
    "cosine_features",
    "dueling_combine",
    "factorised_noise",
    "midpoint_taus",
    "quantile_huber_loss",
]
