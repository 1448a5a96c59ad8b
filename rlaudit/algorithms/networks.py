"""Built-in SB3 features extractors, named in a protocol as ``policy_kwargs.features_extractor = "NAME"``.

A protocol is TOML and cannot name a Python class, so ``features_extractor_class`` is out of its reach; this
small registry maps names to extractor classes (``"module:attr"``, imported on use), with did-you-mean for
unknown names. :func:`resolve_policy_kwargs` turns the name into SB3's ``features_extractor_class`` when an
agent is built; :func:`check_features_extractor` validates it beforehand.

``"minatar"``: the network of Obando-Ceron & Castro (2021), JohanSamir/revisiting_rainbow ``networks_new.py``
at 64ec8c888669c67faf4c181727f1eddfb0f56a42 (flax.linen, the newest revision) with ``net_conf = 'minatar'`` and
``hidden_layer = 0`` (every agent's MinAtar config): one convolution of 16 filters, 3x3, stride 1, SAME padding
on the 10x10xC observation (as float), ReLU, flatten (1,600 features, flax's height-width-channel order), then
the algorithm's linear head(s) directly (write ``net_arch = []``). Kernels are Glorot (Xavier) uniform and
biases zero everywhere, heads included (:func:`glorot_init`, applied by the DQN family's classes); the
convolution's fans are its own, fan_in 9 C and fan_out 9 * 16 (bound ``sqrt(6 / (9 (C + 16)))``, 0.1826 for
Breakout's C = 4).

Older revisions (flax.nn, e.g. @521a3c29c524177f239ae64912174292b95d24cd) applied ``nn.Conv`` with
``kernel_size=(3, 3, 3)`` to a ``(1, 10, 10, C)`` array: flax.nn takes an input with ``len(kernel_size) + 1``
dimensions for one example, so that is a 3-D convolution over ``(1, 10, 10)`` whose depth axis only ever meets
the kernel's middle slice - the same function, but initialised with the 3x3x3 receptive field (a bound
sqrt(3) smaller). The revision that produced the paper's figures is unknown; rlaudit implements the newest
(``MinAtarNetwork.INIT_RECEPTIVE_FIELD = 9``), and a subclass with 27 gives the older initialisation.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from rlaudit.errors import InputError, did_you_mean

FEATURES_EXTRACTORS: dict[str, str] = {
    "minatar": "rlaudit.algorithms.networks:MinAtarNetwork",
}
"""Built-in features extractors: protocol name -> ``"module:attr"``."""


class MinAtarNetwork(BaseFeaturesExtractor):
    """The published MinAtar torso: Conv(16, 3x3, stride 1, SAME) + ReLU + flatten, on channel-last input.

    Args:
        observation_space: a ``Box`` of shape ``(height, width, channels)`` (MinAtar: ``(10, 10, C)``).
        n_filters: convolution filters (16).
    """

    INIT_RECEPTIVE_FIELD = 9
    """Receptive field used for the convolution's Glorot bound: 9, the 3x3 kernel of the newest revision (27 for
    the older flax.nn revisions' 3x3x3 kernel; see the module doc)."""

    def __init__(self, observation_space: spaces.Box, n_filters: int = 16) -> None:
        shape = tuple(observation_space.shape)
        if len(shape) != 3:
            raise ValueError(f"the 'minatar' features extractor needs (height, width, channels) observations, "
                             f"got shape {shape}")
        height, width, channels = shape
        super().__init__(observation_space, features_dim=height * width * int(n_filters))
        self.conv = nn.Conv2d(channels, int(n_filters), kernel_size=3, stride=1, padding=1)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        x = self.conv(observations.float().permute(0, 3, 1, 2))  # (batch, H, W, C) -> (batch, C, H, W)
        return th.relu(x).permute(0, 2, 3, 1).flatten(1)  # flax's (H, W, C) flatten order


def glorot_bound(fan_in: int, fan_out: int) -> float:
    """Glorot-uniform bound ``sqrt(6 / (fan_in + fan_out))``."""
    return math.sqrt(6.0 / (fan_in + fan_out))


def glorot_init(module: nn.Module) -> None:
    """Glorot-uniform kernels and zero biases for every ``nn.Linear`` and ``nn.Conv2d`` in ``module``.

    A convolution inside a :class:`MinAtarNetwork` uses that class's receptive field
    (:attr:`MinAtarNetwork.INIT_RECEPTIVE_FIELD`) for its fans; other convolutions their own kernel size.
    Noisy layers keep their own initialisation. Draws from torch's global generator (seeded with the run).
    """
    fields = {id(m.conv): m.INIT_RECEPTIVE_FIELD for m in module.modules() if isinstance(m, MinAtarNetwork)}
    for m in module.modules():
        if isinstance(m, nn.Linear):
            bound = glorot_bound(m.in_features, m.out_features)
        elif isinstance(m, nn.Conv2d):
            field = fields.get(id(m), m.kernel_size[0] * m.kernel_size[1])
            bound = glorot_bound(field * m.in_channels, field * m.out_channels)
        else:
            continue
        with th.no_grad():
            m.weight.uniform_(-bound, bound)
            if m.bias is not None:
                m.bias.zero_()


def features_extractor_class(name: Any, where: str) -> type:
    """The extractor class registered as ``name``.

    Raises:
        InputError: ``"<where>: unknown features extractor 'x' (did you mean ...); built-in: minatar"``.
    """
    if not isinstance(name, str) or name not in FEATURES_EXTRACTORS:
        raise InputError(f"{where}: unknown features extractor {name!r}{did_you_mean(str(name), FEATURES_EXTRACTORS)}; "
                         f"built-in: {', '.join(FEATURES_EXTRACTORS)}")
    module, _, attr = FEATURES_EXTRACTORS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def check_features_extractor(policy_kwargs: Mapping[str, Any], where: str) -> None:
    """Check ``policy_kwargs.features_extractor`` (a built-in name) without building anything.

    Raises:
        InputError: unknown name, or given together with ``features_extractor_class``.
    """
    if "features_extractor" not in policy_kwargs:
        return
    features_extractor_class(policy_kwargs["features_extractor"], f"{where}.features_extractor")
    if "features_extractor_class" in policy_kwargs:
        raise InputError(f"{where}: give features_extractor (a built-in name) or features_extractor_class, not both")


def resolve_policy_kwargs(policy_kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``policy_kwargs`` with ``features_extractor = "NAME"`` replaced by SB3's ``features_extractor_class``."""
    pk = dict(policy_kwargs)
    if "features_extractor" in pk:
        check_features_extractor(pk, where)
        pk["features_extractor_class"] = features_extractor_class(pk.pop("features_extractor"), where)
    return pk


__all__ = [
    "FEATURES_EXTRACTORS",
    "MinAtarNetwork",
    "check_features_extractor",
    "features_extractor_class",
    "glorot_bound",
    "glorot_init",
    "resolve_policy_kwargs",
]
