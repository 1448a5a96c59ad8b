"""The DQN family on stable-baselines3's DQN machinery: Double, Dueling, PER, n-step, C51, QR, IQN, noisy nets.

One class, :class:`DQNFamily`, composes the components through hyperparameters instead of one class per
combination (``DQNFamily(double=True, dueling=True, prioritized=True, n_steps=3, distributional="c51",
noisy=True)`` is Rainbow). The registry exposes the canonical members as names:

===================  ===================================  ================================================
registry name        class and defaults                   component
===================  ===================================  ================================================
``DQN``              :class:`DQN` (SB3's, + settings)     Mnih et al. (2015)
``DQNFamily``        :class:`DQNFamily`                   all components off (= DQN), switch them on
``DoubleDQN``        ``DQNFamily(double=True)``           van Hasselt et al. (2016)
``DuelingDQN``       ``DQNFamily(dueling=True)``          Wang et al. (2016)
``PrioritizedDQN``   ``DQNFamily(prioritized=True)``      Schaul et al. (2016), proportional variant
``QRDQN``            :class:`QRDQN` (sb3-contrib)         Dabney et al. (2018a), ``n_quantiles`` exposed
``C51``              ``distributional="c51"``             Bellemare et al. (2017)
``IQN``              ``distributional="iqn"``             Dabney et al. (2018b)
``NoisyDQN``         ``noisy=True``, ε = 0                Fortunato et al. (2018)
``Rainbow``          C51 + 3-step + PER + dueling +       Hessel et al. (2018)
                     double + noisy, ε = 0
``DopamineRainbow``  C51 + 3-step + PER                   Castro et al. (2018)
===================  ===================================  ================================================

The defining computations are pure functions tested on hand-built batches: :func:`q_learning_target`
(max or double target), :func:`dueling_combine`, :class:`SumTree`, :func:`importance_weights` and
:func:`annealed_beta` here; the distributional and noisy ones in :mod:`rlaudit.algorithms.dqn_components`.

Every class here also takes the published-settings hyperparameters of :mod:`rlaudit.algorithms.dqn_settings`
(``adam_eps``, ``exploration_schedule = "dopamine"`` with ``epsilon_decay_steps``, ``loss = "mse"`` for the
expected-value heads, ``max_grad_norm = inf``), and builds the MinAtar network of
:mod:`rlaudit.algorithms.networks` when ``policy_kwargs.features_extractor = "minatar"``.

Everything runs on the CPU at MinAtar scale; the prioritized buffer's sum tree is vectorised over the
batch (``O(batch * log capacity)`` numpy work per sample and per priority update).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import sb3_contrib
import stable_baselines3
import torch as th
from stable_baselines3.common.buffers import NStepReplayBuffer, ReplayBuffer
from stable_baselines3.common.torch_layers import NatureCNN, create_mlp
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.dqn.policies import DQNPolicy, QNetwork
from torch import nn
from torch.nn import functional as F

from rlaudit.algorithms.dqn_components import (
    DISTRIBUTIONAL,
    ComponentQNetwork,
    categorical_loss,
    categorical_projection,
    dueling_combine,
    midpoint_taus,
    quantile_huber_loss,
)
from rlaudit.algorithms.dqn_settings import PublishedSettings, check_published_settings, optimizer_step, td_loss
from rlaudit.errors import did_you_mean

# --- the defining mathematics ------------------------------------------------------------------------


def q_learning_target(
    rewards: th.Tensor,
    dones: th.Tensor,
    discounts: th.Tensor | float,
    next_q_target: th.Tensor,
    next_q_online: th.Tensor | None = None,
) -> th.Tensor:
    """One-step (or n-step) Q-learning target.

    With ``next_q_online`` given this is the double-Q target: the online network selects the argmax action
    and the target network evaluates it, ``r + γ (1 - d) Q_target(s', argmax_a Q_online(s', a))``;
    without it, the DQN target ``r + γ (1 - d) max_a Q_target(s', a)``.

    Args:
        rewards: shape ``(batch, 1)``.
        dones: shape ``(batch, 1)``; 1.0 where the episode terminated (not truncated).
        discounts: scalar γ or shape ``(batch, 1)`` (γ^n for n-step returns).
        next_q_target: target-network values at the next observations, shape ``(batch, n_actions)``.
        next_q_online: online-network values at the next observations, shape ``(batch, n_actions)``.

    Returns:
        Targets, shape ``(batch, 1)``.
    """
    if next_q_online is None:
        next_q, _ = next_q_target.max(dim=1)
    else:
        best = next_q_online.argmax(dim=1, keepdim=True)
        next_q = next_q_target.gather(1, best).squeeze(1)
    return rewards + (1 - dones) * discounts * next_q.reshape(-1, 1)


def importance_weights(probabilities: np.ndarray, n_stored: int, beta: float) -> np.ndarray:
    """Importance-sampling weights ``w_i = (N P(i))^-β``, normalised by the largest weight in the batch.

    Normalising by the batch maximum (as Dopamine does) keeps every weight in ``(0, 1]`` so that the
    weights only ever scale the update down (Schaul et al. 2016, sec. 3.4).

    Args:
        probabilities: sampling probabilities of the batch, shape ``(batch,)``, all > 0.
        n_stored: transitions in the buffer (``N``).
        beta: exponent in ``[0, 1]``; 1 fully compensates the non-uniform sampling.

    Returns:
        Weights, shape ``(batch,)``, with maximum exactly 1.
    """
    weights = (n_stored * np.asarray(probabilities, dtype=np.float64)) ** (-beta)
    return weights / weights.max()


def annealed_beta(beta0: float, progress: float, anneal: bool = True) -> float:
    """β annealed linearly from ``beta0`` at the start of training to 1 at its end.

    Args:
        beta0: initial exponent.
        progress: fraction of the training budget done, clipped to ``[0, 1]``.
        anneal: ``False`` keeps β at ``beta0`` (Dopamine's fixed 0.5).
    """
    if not anneal:
        return beta0
    progress = min(max(progress, 0.0), 1.0)
    return beta0 + (1.0 - beta0) * progress


def check_per_params(alpha: float, beta: float, eps: float) -> None:
    """Raise ``ValueError`` for α < 0, β outside [0, 1] or ε <= 0."""
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not alpha >= 0:
        raise ValueError(f"per_alpha must be a number >= 0 (0 = uniform sampling), got {alpha!r}")
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not 0 <= beta <= 1:
        raise ValueError(f"per_beta must be a number in [0, 1], got {beta!r}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"per_eps must be a number > 0, got {eps!r}")


class SumTree:
    """A binary sum tree over ``capacity`` non-negative priorities, vectorised over batches.

    Leaves hold the priorities; every inner node holds the sum of its children, so the root is the total
    and a prefix-sum search finds the leaf that a uniform draw in ``[0, total)`` falls into in
    ``O(log capacity)``: leaf ``i`` is found with probability ``p_i / total``.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._leaves = 1 << max(0, (self.capacity - 1).bit_length())
        self._depth = self._leaves.bit_length() - 1
        self._tree = np.zeros(2 * self._leaves, dtype=np.float64)  # node 1 is the root

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self._tree[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """Priorities at ``indices``, shape ``(batch,)``."""
        return self._tree[np.asarray(indices) + self._leaves]

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities at ``indices`` (later entries win for repeated indices) and refresh the sums."""
        indices = np.asarray(indices, dtype=np.int64).ravel()
        priorities = np.asarray(priorities, dtype=np.float64).ravel()
        if np.any(priorities < 0) or not np.all(np.isfinite(priorities)):
            raise ValueError("priorities must be finite and >= 0")
        tree = self._tree
        nodes = indices + self._leaves
        tree[nodes] = priorities
        # All leaves sit at one depth, so each pass refreshes one level from the level below; repeated
        # parents are written twice with the same sum, which is cheaper than de-duplicating them.
        for _ in range(self._depth):
            nodes = nodes // 2
            left = 2 * nodes
            tree[nodes] = tree[left] + tree[left + 1]

    def update_one(self, index: int, priority: float) -> None:
        """Set one priority (the per-step path: scalar work, no numpy calls per tree level)."""
        if not (priority >= 0 and np.isfinite(priority)):
            raise ValueError("priorities must be finite and >= 0")
        tree = self._tree
        node = int(index) + self._leaves
        tree[node] = priority
        node //= 2
        while node >= 1:
            tree[node] = tree[2 * node] + tree[2 * node + 1]
            node //= 2

    def find(self, values: np.ndarray) -> np.ndarray:
        """Leaf indices whose prefix-sum interval contains each value in ``[0, total)``, shape ``(batch,)``."""
        tree = self._tree
        values = np.array(values, dtype=np.float64)
        nodes = np.ones(values.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * nodes
            left_sum = tree[left]
            # Never step into an empty right subtree (possible only through rounding at the very end).
            go_right = (values >= left_sum) & (tree[left + 1] > 0)
            values -= left_sum * go_right
            nodes = left + go_right
        return np.minimum(nodes - self._leaves, self.capacity - 1)


class PrioritizedSamples(NamedTuple):
    """A prioritized batch: the transitions, their buffer indices and their importance weights."""

    samples: ReplayBufferSamples
    indices: np.ndarray
    weights: np.ndarray


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) on SB3's replay buffer.

    Transition ``i`` is sampled with probability ``p_i^α / Σ_k p_k^α``; ``p_i = |δ_i| + ε`` after its TD
    error ``δ_i`` is computed, and new transitions enter with the largest priority seen so far. Sampling
    is stratified: the total is cut into ``batch`` equal segments and one value is drawn uniformly in
    each. Single environment only (``n_envs == 1``).

    Args:
        alpha: prioritisation exponent, >= 0 (0 = uniform).
        eps: added to ``|δ|`` so that no transition gets zero probability, > 0.
    """

    def __init__(self, *args: Any, alpha: float = 0.6, eps: float = 1e-6, **kwargs: Any) -> None:
        check_per_params(alpha, 0.0, eps)
        super().__init__(*args, **kwargs)
        if self.n_envs != 1:
            raise ValueError(f"prioritized replay supports a single environment, got n_envs={self.n_envs}")
        if self.optimize_memory_usage:
            raise ValueError("prioritized replay does not support optimize_memory_usage=True")
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.tree = SumTree(self.buffer_size)
        self.max_priority = 1.0

    def add(self, *args: Any, **kwargs: Any) -> None:
        index = self.pos
        super().add(*args, **kwargs)
        self.tree.update_one(index, self.max_priority**self.alpha)

    def sample_prioritized(self, batch_size: int, beta: float, env: Any = None) -> PrioritizedSamples:
        """Draw a stratified prioritized batch with importance weights for exponent ``beta``."""
        n_stored = self.size()
        total = self.tree.total
        values = (np.arange(batch_size) + np.random.random(batch_size)) * (total / batch_size)
        indices = np.minimum(self.tree.find(values), n_stored - 1)
        probabilities = self.tree.get(indices) / total
        weights = importance_weights(probabilities, n_stored, beta)
        return PrioritizedSamples(self._get_samples(indices, env=env), indices, weights)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set ``p_i = |δ_i| + ε`` for the sampled ``indices`` from their new TD errors ``δ``, shape ``(batch,)``."""
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(indices, priorities**self.alpha)


class PrioritizedNStepReplayBuffer(PrioritizedReplayBuffer, NStepReplayBuffer):
    """Prioritized replay whose samples carry SB3's n-step returns (``n_steps``, ``gamma``)."""


# --- dueling networks ----------------------------------------------------------------------------------


class DuelingQNetwork(QNetwork):
    """Q-network with a shared trunk and value / advantage heads combined by :func:`dueling_combine`.

    The trunk is the features extractor (``Flatten`` for MLPs, the Nature CNN — three convolutions and a
    512-unit layer — for images) followed by the ``net_arch`` hidden layers; each stream adds its own
    ``stream_arch`` hidden layers (default none) and a linear output.

    Note:
        Wang et al. split the streams right after the convolutions, each with its own 512-unit layer.
        Here SB3's Nature CNN keeps its 512-unit layer in the shared trunk; ``stream_arch = [512]`` in
        ``policy_kwargs`` adds a 512-unit layer to each stream on top of it.
    """

    def __init__(self, *args: Any, stream_arch: list[int] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream_arch = list(stream_arch or [])
        trunk_dim = self.net_arch[-1] if self.net_arch else self.features_dim
        self.q_net = nn.Sequential(*create_mlp(self.features_dim, -1, self.net_arch, self.activation_fn))
        n_actions = int(self.action_space.n)
        self.value_stream = nn.Sequential(*create_mlp(trunk_dim, 1, self.stream_arch, self.activation_fn))
        self.advantage_stream = nn.Sequential(*create_mlp(trunk_dim, n_actions, self.stream_arch, self.activation_fn))

    def forward(self, obs: th.Tensor) -> th.Tensor:
        hidden = self.q_net(self.extract_features(obs, self.features_extractor))
        return dueling_combine(self.value_stream(hidden), self.advantage_stream(hidden))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "stream_arch": self.stream_arch}


class FamilyPolicy(DQNPolicy):
    """SB3's DQN policy with the family's Q-networks.

    Policy kwargs: ``dueling`` and ``stream_arch`` (:class:`DuelingQNetwork`); ``components``, a dict of
    :class:`~rlaudit.algorithms.dqn_components.ComponentQNetwork` arguments (distributional head, noisy
    layers), which :class:`DQNFamily` fills from its hyperparameters. Without components the Q-network is
    SB3's (or the dueling one), so the plain variants stay bit-for-bit those of issue 6.
    """

    def __init__(
        self,
        *args: Any,
        dueling: bool = False,
        stream_arch: list[int] | None = None,
        components: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        self.dueling = bool(dueling)
        self.stream_arch = list(stream_arch or [])
        self.components = dict(components or {})
        super().__init__(*args, **kwargs)

    def make_q_net(self) -> QNetwork:
        if not self.dueling and not self.components:
            return super().make_q_net()
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        if self.components:
            return ComponentQNetwork(
                **net_args, dueling=self.dueling, stream_arch=self.stream_arch, **self.components
            ).to(self.device)
        return DuelingQNetwork(**net_args, stream_arch=self.stream_arch).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(),
            "dueling": self.dueling, "stream_arch": self.stream_arch, "components": self.components,
        }


class FamilyCnnPolicy(FamilyPolicy):
    """:class:`FamilyPolicy` with the Nature CNN trunk, for image observations."""

    def __init__(self, *args: Any, features_extractor_class: type = NatureCNN, **kwargs: Any):
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


# --- the algorithms ------------------------------------------------------------------------------------


class DQN(PublishedSettings, stable_baselines3.DQN):
    """stable-baselines3's DQN with the published-settings hyperparameters of :mod:`rlaudit.algorithms.dqn_settings`.

    With the defaults (``loss = "huber"``, SB3's linear schedule, torch's Adam ε) it is SB3's DQN, bit for bit
    (tested).

    Args:
        loss: ``"huber"`` (SB3's smooth L1, the default) or ``"mse"`` (the squared TD error, Dopamine's
            ``loss_type = 'mse'``).
        adam_eps, exploration_schedule, epsilon_decay_steps: see
            :class:`~rlaudit.algorithms.dqn_settings.PublishedSettings`.
    """

    def __init__(self, policy: Any, env: Any, loss: str = "huber", **kwargs: Any) -> None:
        check_published_settings({"loss": loss})
        self.loss = loss
        super().__init__(policy, env, **kwargs)

    @staticmethod
    def validate_hyperparams(hp: dict[str, Any]) -> None:
        """Raise ``ValueError`` for invalid published-settings values."""
        check_published_settings(hp)

    def _expected_value_loss(self, replay_data: ReplayBufferSamples, discounts: th.Tensor | float,
                             double: bool = False, reduction: str = "mean") -> tuple[th.Tensor, th.Tensor]:
        """The TD loss of a batch (:func:`~rlaudit.algorithms.dqn_settings.td_loss`) and its TD errors
        ``Q(s, a) - target``, shape ``(batch, 1)``."""
        with th.no_grad():
            next_q_target = self.q_net_target(replay_data.next_observations)
            next_q_online = self.q_net(replay_data.next_observations) if double else None
            target_q_values = q_learning_target(replay_data.rewards, replay_data.dones, discounts, next_q_target,
                                                next_q_online)
        current_q_values = th.gather(self.q_net(replay_data.observations), dim=1, index=replay_data.actions.long())
        return td_loss(current_q_values, target_q_values, self.loss, reduction), current_q_values - target_q_values

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self.loss == "huber" and math.isfinite(self.max_grad_norm):
            super().train(gradient_steps, batch_size)  # SB3's own update
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        for _ in range(gradient_steps):
            replay_data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma
            loss, _ = self._expected_value_loss(replay_data, discounts)
            optimizer_step(self, loss)
            losses.append(loss.item())
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", np.mean(losses))


class DQNFamily(DQN):
    """SB3's DQN with composable Double-Q, dueling, prioritized replay, n-step, distributional and noisy parts.

    Every argument of :class:`stable_baselines3.DQN` is accepted (``n_steps`` gives n-step returns, also
    with prioritized replay). With all components off the update is SB3's DQN update, bit for bit.

    Args:
        double: use the double-Q target (online network selects, target network evaluates); with a
            distributional head the online network's mean picks the next action.
        dueling: use a dueling Q-network (value and mean-subtracted advantage streams).
        prioritized: use proportional prioritized replay with importance-sampling weights on the loss and
            priorities ``|δ| + per_eps`` from the new TD errors (with a distributional head: from the
            per-sample loss, as Rainbow). Schaul et al. also divide the learning rate by 4; set
            ``learning_rate`` yourself if you want that.
        per_alpha: prioritisation exponent α >= 0.
        per_beta: initial importance-sampling exponent β in [0, 1], annealed linearly to 1 over the
            ``total_timesteps`` of the ``learn`` call (unless ``per_beta_anneal = false``).
        per_beta_anneal: anneal β to 1 (the default, Schaul et al.); ``False`` keeps it at ``per_beta``
            (Dopamine: 0.5).
        per_eps: ε > 0 added to ``|δ|``.
        distributional: ``"none"`` (expected Q-values, Huber loss), ``"c51"`` (categorical over
            ``n_atoms`` atoms on ``[v_min, v_max]``, cross-entropy to the projected target; Bellemare et al.
            2017), ``"qr"`` (``n_quantiles`` fixed quantiles; Dabney et al. 2018a) or ``"iqn"`` (implicit
            quantiles; Dabney et al. 2018b). Actions are greedy with respect to the distribution's mean.
        n_atoms: C51 atoms (51 in the paper), >= 2.
        v_min: lower end of the C51 support.
        v_max: upper end of the C51 support, > ``v_min``.
        n_quantiles: QR quantiles (200 in the paper).
        n_tau: IQN quantile samples ``N`` for the online network in the loss (64 in the paper).
        n_tau_target: IQN samples ``N'`` for the target network (64).
        n_tau_act: IQN samples ``K`` averaged for the greedy action (32); evaluation uses ``K`` evenly
            spaced levels instead of draws, so it is deterministic.
        n_cos: IQN cosine features (64).
        cos_start: index ``i`` of the first cosine feature ``cos(π i τ)``: 0, the IQN paper's (its first feature
            is the constant 1), or 1, Dopamine's (``i = 1 .. n_cos``).
        iqn_post_layers: hidden layers (of ``net_arch``) after the IQN merge, which run once per sampled
            τ. 1 is the paper's layout (merge before the last hidden layer); 0 merges after the last
            hidden layer, so that only the linear head runs per τ (much cheaper with wide MLPs).
        kappa: Huber threshold κ > 0 of the quantile loss (QR, IQN).
        noisy: factorised-Gaussian noisy linear layers (Fortunato et al. 2018). Noise is drawn anew for
            every environment step while acting and for every gradient step (online and target network
            independently); evaluation uses the mean weights. Set ε-greedy off yourself
            (``exploration_initial_eps = exploration_final_eps = 0``); the registered ``NoisyDQN`` and
            ``Rainbow`` do.
        noisy_sigma0: initial noise scale σ0 (0.5).
    """

    policy_aliases = {"MlpPolicy": FamilyPolicy, "CnnPolicy": FamilyCnnPolicy}  # noqa: RUF012

    def __init__(
        self,
        policy: Any,
        env: Any,
        double: bool = False,
        dueling: bool = False,
        prioritized: bool = False,
        per_alpha: float = 0.6,
        per_beta: float = 0.4,
        per_eps: float = 1e-6,
        per_beta_anneal: bool = True,
        distributional: str = "none",
        n_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        n_quantiles: int = 200,
        n_tau: int = 64,
        n_tau_target: int = 64,
        n_tau_act: int = 32,
        n_cos: int = 64,
        cos_start: int = 0,
        iqn_post_layers: int = 1,
        kappa: float = 1.0,
        noisy: bool = False,
        noisy_sigma0: float = 0.5,
        **kwargs: Any,
    ) -> None:
        components = dict(
            distributional=distributional, n_atoms=n_atoms, v_min=v_min, v_max=v_max, n_quantiles=n_quantiles,
            n_tau=n_tau, n_tau_target=n_tau_target, n_tau_act=n_tau_act, n_cos=n_cos, cos_start=cos_start, iqn_post_layers=iqn_post_layers, kappa=kappa,
            noisy=noisy, noisy_sigma0=noisy_sigma0,
        )
        self.validate_hyperparams(dict(per_alpha=per_alpha, per_beta=per_beta, per_eps=per_eps, **components, **kwargs))
        self.double = bool(double)
        self.dueling = bool(dueling)
        self.prioritized = bool(prioritized)
        self.per_alpha = float(per_alpha)
        self.per_beta = float(per_beta)
        self.per_eps = float(per_eps)
        self.per_beta_anneal = bool(per_beta_anneal)
        self.distributional = distributional
        self.n_atoms, self.v_min, self.v_max, self.n_quantiles = int(n_atoms), float(v_min), float(v_max), int(n_quantiles)
        self.n_tau, self.n_tau_target, self.n_tau_act, self.n_cos = int(n_tau), int(n_tau_target), int(n_tau_act), int(n_cos)
        self.cos_start = int(cos_start)
        self.iqn_post_layers = int(iqn_post_layers)
        self.kappa = float(kappa)
        self.noisy, self.noisy_sigma0 = bool(noisy), float(noisy_sigma0)
        policy_kwargs = dict(kwargs.pop("policy_kwargs", None) or {})
        if dueling or self.uses_components:
            if not isinstance(policy, str) and not issubclass(policy, FamilyPolicy):
                raise ValueError(
                    "dueling, distributional and noisy need policy 'MlpPolicy' or 'CnnPolicy' (rlaudit's FamilyPolicy)"
                )
        if dueling:
            policy_kwargs["dueling"] = True
        if self.uses_components:
            policy_kwargs["components"] = dict(
                distributional=self.distributional, n_atoms=self.n_atoms, v_min=self.v_min, v_max=self.v_max,
                n_quantiles=self.n_quantiles, n_cos=self.n_cos, cos_start=self.cos_start, n_tau_act=self.n_tau_act,
                iqn_post_layers=self.iqn_post_layers,
                noisy=self.noisy, noisy_sigma0=self.noisy_sigma0,
            )
        if prioritized and kwargs.get("replay_buffer_class") is not None:
            raise ValueError("prioritized=True brings its own replay buffer; do not set replay_buffer_class")
        super().__init__(policy, env, policy_kwargs=policy_kwargs or None, **kwargs)

    @property
    def uses_components(self) -> bool:
        """Whether the Q-network is a :class:`ComponentQNetwork` (distributional head or noisy layers)."""
        return self.distributional != "none" or self.noisy

    @staticmethod
    def validate_hyperparams(hp: dict[str, Any]) -> None:
        """Raise ``ValueError`` for invalid prioritized-replay, n-step, distributional, noisy or published settings."""
        check_per_params(hp.get("per_alpha", 0.6), hp.get("per_beta", 0.4), hp.get("per_eps", 1e-6))
        check_published_settings(hp)
        if hp.get("loss", "huber") != "huber" and hp.get("distributional", "none") != "none":
            raise ValueError(f"loss = {hp['loss']!r} applies to expected-value heads only; distributional = "
                             f"{hp['distributional']!r} has its own loss (leave loss unset)")
        counts = {"iqn_post_layers": 0, "n_steps": 1, "n_atoms": 2, "n_quantiles": 1, "n_tau": 1, "n_tau_target": 1, "n_tau_act": 1, "n_cos": 1}
        for name, least in counts.items():
            value = hp.get(name, least)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if hp.get("cos_start", 0) not in (0, 1) or isinstance(hp.get("cos_start", 0), bool):
            raise ValueError(f"cos_start must be 0 (the IQN paper's features) or 1 (Dopamine's), got "
                             f"{hp['cos_start']!r}")
        distributional = hp.get("distributional", "none")
        if distributional not in DISTRIBUTIONAL:
            raise ValueError(
                f"distributional must be one of {', '.join(map(repr, DISTRIBUTIONAL))}, got {distributional!r}"
                f"{did_you_mean(str(distributional), DISTRIBUTIONAL)}"
            )
        v_min, v_max = hp.get("v_min", -10.0), hp.get("v_max", 10.0)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (v_min, v_max)) or not v_min < v_max:
            raise ValueError(f"v_min < v_max must be finite numbers, got v_min={v_min!r}, v_max={v_max!r}")
        for name in ("kappa", "noisy_sigma0"):
            value = hp.get(name, 1.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")

    def _setup_model(self) -> None:
        if self.prioritized:
            kwargs = {"alpha": self.per_alpha, "eps": self.per_eps}
            if self.n_steps > 1:
                self.replay_buffer_class = PrioritizedNStepReplayBuffer
                kwargs.update(n_steps=self.n_steps, gamma=self.gamma)
            else:
                self.replay_buffer_class = PrioritizedReplayBuffer
            self.replay_buffer_kwargs = {**self.replay_buffer_kwargs, **kwargs}
            # SB3 warns that n_steps is ignored with a custom buffer; ours already received it above.
            n_steps, self.n_steps = self.n_steps, 1
            try:
                super()._setup_model()
            finally:
                self.n_steps = n_steps
        else:
            super()._setup_model()

    def current_beta(self) -> float:
        """β at the current point of training (annealed from ``per_beta`` to 1, or fixed at ``per_beta``)."""
        return annealed_beta(self.per_beta, 1.0 - self._current_progress_remaining, self.per_beta_anneal)

    def _sample_action(self, *args: Any, **kwargs: Any) -> Any:
        if not self.noisy:
            return super()._sample_action(*args, **kwargs)
        # Fortunato et al., Algorithm 1: fresh noise for every action taken while training.
        self.q_net.reset_noise()
        self.q_net.set_stochastic(True)
        try:
            return super()._sample_action(*args, **kwargs)
        finally:
            self.q_net.set_stochastic(False)

    def _distributional_loss(self, replay_data: ReplayBufferSamples, discounts: th.Tensor | float) -> th.Tensor:
        """Per-sample loss of the distributional head, shape ``(batch,)``."""
        batch = replay_data.rewards.shape[0]
        rows = th.arange(batch, device=self.device)
        actions = replay_data.actions.long().reshape(-1)
        online, target_net = self.q_net, self.q_net_target
        with th.no_grad():
            if self.distributional == "iqn":
                taus = th.rand(batch, self.n_tau_target + self.n_tau_act, device=self.device)
                if self.double:
                    next_out = target_net.distribution(replay_data.next_observations, taus[:, : self.n_tau_target])
                    next_q = online.q_values(online.distribution(replay_data.next_observations, taus[:, self.n_tau_target :]))
                else:
                    # One pass of the target network gives both the N' target samples and the K for the argmax.
                    out = target_net.distribution(replay_data.next_observations, taus)
                    next_out, next_q = out[:, :, : self.n_tau_target], out[:, :, self.n_tau_target :].mean(dim=2)
            else:
                next_out = target_net.distribution(replay_data.next_observations)
                next_q = online(replay_data.next_observations) if self.double else target_net.q_values(next_out)
            best = next_q.argmax(dim=1)
            if self.distributional == "c51":
                next_probs = F.softmax(next_out[rows, best], dim=1)
                target = categorical_projection(next_probs, replay_data.rewards, replay_data.dones, discounts, online.support)
            else:
                target = replay_data.rewards + (1 - replay_data.dones) * discounts * next_out[rows, best]
        if self.distributional == "c51":
            return categorical_loss(online.distribution(replay_data.observations)[rows, actions], target)
        if self.distributional == "qr":
            taus = midpoint_taus(self.n_quantiles, 1, self.device).reshape(-1)
            return quantile_huber_loss(online.distribution(replay_data.observations)[rows, actions], taus, target, self.kappa)
        taus = th.rand(batch, self.n_tau, device=self.device)
        quantiles = online.distribution(replay_data.observations, taus)[rows, actions]
        return quantile_huber_loss(quantiles, taus, target, self.kappa)

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        if self.uses_components:
            self.q_net.set_stochastic(True)
            self.q_net_target.set_stochastic(True)
        try:
            for _ in range(gradient_steps):
                if self.noisy:
                    # Fortunato et al.: independent noise for the online and the target network at every update.
                    self.q_net.reset_noise()
                    self.q_net_target.reset_noise()
                losses.append(self._gradient_step(batch_size))
        finally:
            if self.uses_components:
                self.q_net.set_stochastic(False)
                self.q_net_target.set_stochastic(False)

        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", np.mean(losses))
        if self.prioritized:
            self.logger.record("train/per_beta", self.current_beta())

    def _gradient_step(self, batch_size: int) -> float:
        """One sampled batch, one optimiser step; returns the loss."""
        if self.prioritized:
            batch = self.replay_buffer.sample_prioritized(batch_size, self.current_beta(), env=self._vec_normalize_env)
            replay_data = batch.samples
        else:
            replay_data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        if self.distributional != "none":
            elementwise = self._distributional_loss(replay_data, discounts)
            # Rainbow: the per-sample loss (KL / quantile loss) is the priority, not a TD error.
            priorities = elementwise
        else:
            loss, priorities = self._expected_value_loss(replay_data, discounts, self.double,
                                                         "none" if self.prioritized else "mean")
            elementwise = loss.reshape(-1)

        if self.prioritized:
            weights = th.as_tensor(batch.weights, dtype=elementwise.dtype, device=self.device)
            loss = (weights * elementwise).mean()
            self.replay_buffer.update_priorities(batch.indices, priorities.detach().cpu().numpy().ravel())
        elif self.distributional != "none":
            loss = elementwise.mean()

        optimizer_step(self, loss)
        return loss.item()


class QRDQN(PublishedSettings, sb3_contrib.QRDQN):
    """sb3-contrib's QR-DQN with the number of quantiles and the published settings as hyperparameters.

    ``n_quantiles = 200`` is the original setting (Dabney et al. 2018) and sb3-contrib's default; the
    quantile head's cost grows with it (about 15x DQN's wall time on MinAtar with an MLP at 200), so
    protocols at scale may choose fewer and say so.

    Args:
        n_quantiles: number of quantiles of the return distribution (>= 1).
        adam_eps, exploration_schedule, epsilon_decay_steps: see
            :class:`~rlaudit.algorithms.dqn_settings.PublishedSettings`.
    """

    def __init__(self, policy: Any, env: Any, n_quantiles: int = 200, **kwargs: Any) -> None:
        if not isinstance(n_quantiles, int) or isinstance(n_quantiles, bool) or n_quantiles < 1:
            raise ValueError(f"n_quantiles must be an integer >= 1, got {n_quantiles!r}")
        policy_kwargs = dict(kwargs.pop("policy_kwargs", None) or {})
        if policy_kwargs.get("n_quantiles", n_quantiles) != n_quantiles:
            raise ValueError("n_quantiles is given both as a hyperparameter and in policy_kwargs")
        policy_kwargs["n_quantiles"] = n_quantiles
        self.n_quantiles = n_quantiles
        super().__init__(policy, env, policy_kwargs=policy_kwargs, **kwargs)

    @staticmethod
    def validate_hyperparams(hp: dict[str, Any]) -> None:
        """Raise ``ValueError`` for an invalid ``n_quantiles`` or published-settings value."""
        n = hp.get("n_quantiles", 200)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_quantiles must be an integer >= 1, got {n!r}")
        check_published_settings(hp)


__all__ = [
    "DQN",
    "DQNFamily",
    "DuelingQNetwork",
    "FamilyCnnPolicy",
    "FamilyPolicy",
    "PrioritizedNStepReplayBuffer",
    "PrioritizedReplayBuffer",
    "PrioritizedSamples",
    "QRDQN",
    "SumTree",
    "annealed_beta",
    "check_per_params",
    "dueling_combine",
    "importance_weights",
    "q_learning_target",
]
