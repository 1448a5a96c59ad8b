"""Settings shared by the DQN family's SB3 classes, so that a protocol can state Dopamine's published ones.

:class:`PublishedSettings` is a mixin for stable-baselines3's DQN machinery (rlaudit's ``DQN``, ``DQNFamily``
and ``QRDQN``) that adds three hyperparameters:

- ``adam_eps``: Adam's ε (when ``None``, the class's default: torch's 1e-8, or 0.01 / batch size for
  sb3-contrib's QR-DQN). Dopamine's MinAtar agents (Obando-Ceron &
  Castro 2021) use 3.125e-4 = 0.01 / batch size 32; at 100k steps C51's score moves 2x with this number alone
  (issue 23), so it is a first-class hyperparameter rather than a ``policy_kwargs.optimizer_kwargs`` entry.
- ``exploration_schedule``: ``"linear"`` (SB3's: ε from ``exploration_initial_eps`` to
  ``exploration_final_eps`` over the first ``exploration_fraction`` of the ``learn`` call) or
  ``"dopamine"`` (Dopamine's ``linearly_decaying_epsilon``: ε = 1 for the ``learning_starts`` warm-up steps,
  then linear to ``exploration_final_eps`` over ``epsilon_decay_steps`` steps, counted in env steps, so it
  does not depend on the run's length; :func:`dopamine_epsilon`).
- ``epsilon_decay_steps``: the decay length of the ``"dopamine"`` schedule (Dopamine's default 250,000).
- ``random_warmup``: ``False`` acts ε-greedily from the first step instead of uniformly until
  ``learning_starts`` (the published noisy Rainbow acts with ε = 0.01 from step 0).

and two behaviours:

- ``max_grad_norm = inf`` (TOML ``inf``) turns gradient clipping off (Dopamine clips nothing); the classes of
  this family skip the clipping call then, which changes no number (clipping at ``inf`` multiplies by 1).
- a Q-network whose features extractor is :class:`~rlaudit.algorithms.networks.MinAtarNetwork` gets
  Glorot-uniform kernels and zero biases in every layer, heads included, as flax's ``xavier_uniform`` in the
  published networks (:func:`~rlaudit.algorithms.networks.glorot_init`).

The ``loss`` hyperparameter (``"huber"`` or ``"mse"``, for expected-value heads) is declared by the classes
that have such a head (``DQN``, ``DQNFamily``); :func:`td_loss` computes it.
"""

from __future__ import annotations

import math
from typing import Any

import torch as th
from torch.nn import functional as F

EXPLORATION_SCHEDULES = ("linear", "dopamine")
"""Values of the ``exploration_schedule`` hyperparameter."""

LOSSES = ("huber", "mse")
"""Values of the ``loss`` hyperparameter (expected-value heads)."""


def dopamine_epsilon(step: int, decay_steps: int, warmup_steps: int, final_eps: float) -> float:
    """Dopamine's ``linearly_decaying_epsilon``: ε for the action taken after ``step`` env steps.

    ``final + clip((1 - final) * (decay + warmup - step) / decay, 0, 1 - final)``: 1 during the
    ``warmup_steps`` first steps, then linear from 1 to ``final_eps`` over ``decay_steps`` steps, then
    ``final_eps``.

    Args:
        step: env steps taken so far (Dopamine's ``training_steps``).
        decay_steps: length of the linear decay (Dopamine's ``epsilon_decay_period``), >= 1.
        warmup_steps: steps of uniform actions before the decay (Dopamine's ``min_replay_history``; here
            ``learning_starts``).
        final_eps: ε after the decay (Dopamine's ``epsilon_train``).
    """
    bonus = (1.0 - final_eps) * (decay_steps + warmup_steps - step) / decay_steps
    return final_eps + min(max(bonus, 0.0), 1.0 - final_eps)


def td_loss(current: th.Tensor, target: th.Tensor, loss: str, reduction: str = "mean") -> th.Tensor:
    """The regression loss of an expected-value head: SB3's smooth L1 (``"huber"``, δ = 1) or the squared error.

    ``"mse"`` is ``(target - current)²`` without a factor 1/2, as Dopamine's ``mse_loss`` (and
    revisiting_rainbow's ``dqn_agent_new.mse_loss``).

    Args:
        current: Q-values of the taken actions, shape ``(batch, 1)``.
        target: their targets, shape ``(batch, 1)``.
        loss: ``"huber"`` or ``"mse"``.
        reduction: ``"mean"`` (a scalar) or ``"none"`` (shape ``(batch, 1)``).
    """
    if loss == "mse":
        return F.mse_loss(current, target, reduction=reduction)
    return F.smooth_l1_loss(current, target, reduction=reduction)


def optimizer_step(model: Any, loss: th.Tensor) -> None:
    """Backpropagate ``loss`` and step ``model.policy.optimizer``, clipping the gradient's norm at
    ``model.max_grad_norm`` unless it is infinite."""
    model.policy.optimizer.zero_grad()
    loss.backward()
    if math.isfinite(model.max_grad_norm):
        th.nn.utils.clip_grad_norm_(model.policy.parameters(), model.max_grad_norm)
    model.policy.optimizer.step()


def check_published_settings(hp: dict[str, Any]) -> None:
    """Raise ``ValueError`` (one line naming the hyperparameter) for invalid published-settings values.

    Args:
        hp: the effective hyperparameters (registry defaults, then the protocol's); absent keys take the
            class defaults.
    """
    eps = hp.get("adam_eps")
    if eps is not None and (not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < math.inf):
        raise ValueError(f"adam_eps must be a finite number > 0 (or absent for torch's 1e-8), got {eps!r}")
    schedule = hp.get("exploration_schedule", "linear")
    if schedule not in EXPLORATION_SCHEDULES:
        from rlaudit.errors import did_you_mean

        raise ValueError(f"exploration_schedule must be one of {', '.join(map(repr, EXPLORATION_SCHEDULES))}, got "
                         f"{schedule!r}{did_you_mean(str(schedule), EXPLORATION_SCHEDULES)}")
    decay = hp.get("epsilon_decay_steps", 250_000)
    if not isinstance(decay, int) or isinstance(decay, bool) or decay < 1:
        raise ValueError(f"epsilon_decay_steps must be an integer >= 1, got {decay!r}")
    initial = hp.get("exploration_initial_eps", 1.0)
    if schedule == "dopamine" and initial != 1.0:
        raise ValueError(f"exploration_initial_eps = {initial!r} contradicts exploration_schedule = 'dopamine', "
                         f"which starts at epsilon 1 (drop exploration_initial_eps, or use the 'linear' schedule)")
    warmup = hp.get("random_warmup", True)
    if not isinstance(warmup, bool):
        raise ValueError(f"random_warmup must be true or false, got {warmup!r}")
    loss = hp.get("loss", "huber")
    if loss not in LOSSES:
        from rlaudit.errors import did_you_mean

        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))}, got {loss!r}"
                         f"{did_you_mean(str(loss), LOSSES)}")


class PublishedSettings:
    """Mixin for SB3's DQN-style algorithms: ``adam_eps``, ``exploration_schedule``, ``epsilon_decay_steps``.

    Put it before the SB3 class in the bases (``class DQN(PublishedSettings, stable_baselines3.DQN)``).

    Args:
        adam_eps: Adam's ε (``None``: the class's default: torch's 1e-8 for DQN and its family, sb3-contrib's
            0.01 / ``batch_size`` for QR-DQN). Also settable as ``policy_kwargs.optimizer_kwargs.eps``, not both.
        exploration_schedule: ``"linear"`` (SB3's, the default) or ``"dopamine"`` (:func:`dopamine_epsilon`
            with ``learning_starts`` as the warm-up; ``exploration_fraction`` is then unused and
            ``exploration_initial_eps`` must stay 1).
        epsilon_decay_steps: decay length of the ``"dopamine"`` schedule in env steps (250,000).
        random_warmup: act uniformly at random until ``learning_starts`` (SB3's behaviour, the default);
            ``False`` acts ε-greedily from the first step (learning still starts after ``learning_starts``), as
            the published noisy Rainbow, whose ε is a constant 0.01 (write ``exploration_initial_eps =
            exploration_final_eps = 0.01``).
    """

    def __init__(
        self,
        *args: Any,
        adam_eps: float | None = None,
        exploration_schedule: str = "linear",
        epsilon_decay_steps: int = 250_000,
        random_warmup: bool = True,
        **kwargs: Any,
    ) -> None:
        check_published_settings({"adam_eps": adam_eps, "exploration_schedule": exploration_schedule,
                                  "epsilon_decay_steps": epsilon_decay_steps,
                                  **{k: kwargs[k] for k in ("exploration_initial_eps",) if k in kwargs}})
        self.adam_eps = None if adam_eps is None else float(adam_eps)
        # SB3 keeps its schedule *function* in ``exploration_schedule``; the hyperparameter's value lives here.
        self.exploration_schedule_name = exploration_schedule
        self.epsilon_decay_steps = int(epsilon_decay_steps)
        self.random_warmup = bool(random_warmup)
        if self.adam_eps is not None:
            policy_kwargs = dict(kwargs.pop("policy_kwargs", None) or {})
            optimizer_kwargs = dict(policy_kwargs.get("optimizer_kwargs") or {})
            if "eps" in optimizer_kwargs and optimizer_kwargs["eps"] != self.adam_eps:
                raise ValueError("adam_eps is given both as a hyperparameter and in policy_kwargs.optimizer_kwargs.eps")
            optimizer_kwargs["eps"] = self.adam_eps
            policy_kwargs["optimizer_kwargs"] = optimizer_kwargs
            # sb3-contrib's QR-DQN replaces optimizer_kwargs with its own eps unless the class is named
            policy_kwargs.setdefault("optimizer_class", th.optim.Adam)
            kwargs["policy_kwargs"] = policy_kwargs
        super().__init__(*args, **kwargs)

    def _q_networks(self) -> tuple[Any, Any]:
        """The online and target Q-networks (DQN's ``q_net``, QR-DQN's ``quantile_net``)."""
        if hasattr(self, "quantile_net"):
            return self.quantile_net, self.quantile_net_target
        return self.q_net, self.q_net_target

    def _setup_model(self) -> None:
        super()._setup_model()
        from rlaudit.algorithms.networks import MinAtarNetwork, glorot_init

        online, target = self._q_networks()
        extractor = getattr(online, "features_extractor", None)
        if isinstance(extractor, MinAtarNetwork):
            glorot_init(online)
            target.load_state_dict(online.state_dict())
        if self.exploration_schedule_name == "dopamine":
            self.exploration_rate = self.current_epsilon()

    def current_epsilon(self) -> float:
        """ε for the next training action under the ``"dopamine"`` schedule."""
        return dopamine_epsilon(self.num_timesteps, self.epsilon_decay_steps, self.learning_starts,
                                self.exploration_final_eps)

    def _sample_action(self, learning_starts: int, *args: Any, **kwargs: Any) -> Any:
        # SB3 acts uniformly while num_timesteps < learning_starts; without the random warm-up it never does.
        return super()._sample_action(learning_starts if self.random_warmup else 0, *args, **kwargs)

    def _on_step(self) -> None:
        super()._on_step()
        if self.exploration_schedule_name == "dopamine":
            self.exploration_rate = self.current_epsilon()
            self.logger.record("rollout/exploration_rate", self.exploration_rate)


__all__ = [
    "EXPLORATION_SCHEDULES",
    "LOSSES",
    "PublishedSettings",
    "check_published_settings",
    "dopamine_epsilon",
    "optimizer_step",
    "td_loss",
]
