"""A built-in's protocol settings as the arguments of Dopamine's JAX agent of the same algorithm.

Pure (no JAX import), so that ``rlaudit fidelity`` checks before anything starts that the reference can run
exactly the protocol's settings: every hyperparameter either has a Dopamine counterpart (mapped here) or is
at a value Dopamine's agent has built in (checked here); anything else is refused with one line naming it,
rather than silently compared with different settings.

Mapping (rlaudit -> Dopamine): ``gamma`` -> ``gamma``; ``n_steps`` -> ``update_horizon``;
``learning_starts`` -> ``min_replay_history``; ``train_freq`` -> ``update_period``;
``target_update_interval`` -> ``target_update_period``; ``exploration_final_eps`` -> ``epsilon_train``;
``epsilon_decay_steps`` -> ``epsilon_decay_period`` (``exploration_schedule`` must be ``"dopamine"``: Dopamine
has no other); ``learning_rate`` / ``adam_eps`` -> ``create_optimizer.learning_rate`` / ``eps`` (Adam);
``buffer_size`` / ``batch_size`` -> ``ReplayBuffer.max_capacity`` / ``batch_size``; ``loss`` -> DQN's
``loss_type``; ``n_atoms``, ``v_min``, ``v_max`` -> C51's ``num_atoms``, ``vmin``, ``vmax``;
``prioritized`` -> ``replay_scheme``; ``n_quantiles`` -> QR-DQN's ``num_atoms``; ``kappa``; IQN's ``n_tau``,
``n_tau_target``, ``n_tau_act``, ``n_cos`` -> ``num_tau_samples``, ``num_tau_prime_samples``,
``num_quantile_samples``, ``quantile_embedding_dim``. Built in: no gradient clipping
(``max_grad_norm = inf``), one gradient step per update, PER with α = 0.5 (priorities √loss) and a fixed
β = 0.5, no double / dueling / noisy parts, IQN's cosine features from ``i = 1`` (``cos_start = 1``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlaudit.errors import InputError

AGENTS = {"DQN": "JaxDQNAgent", "C51": "JaxRainbowAgent", "DopamineRainbow": "JaxRainbowAgent",
          "QRDQN": "JaxQuantileAgent", "IQN": "JaxImplicitQuantileAgent"}
"""Built-in registry name -> the Dopamine agent class that implements it."""

# The registry's defaults of each built-in that matter here (rlaudit.algorithms.registry).
_BUILTIN = {"C51": {"distributional": "c51"}, "IQN": {"distributional": "iqn"},
            "DopamineRainbow": {"distributional": "c51", "n_steps": 3, "prioritized": True, "per_alpha": 0.5,
                                "per_beta": 0.5}}

# Class defaults that differ from Dopamine's and must be set explicitly by the protocol, or that Dopamine
# fixes (name -> (rlaudit's default, the only value Dopamine can run, why)).
_FIXED = {
    "max_grad_norm": (10, math.inf, "Dopamine does not clip gradients; write max_grad_norm = inf"),
    "gradient_steps": (1, 1, "Dopamine makes one gradient step per update"),
    "double": (False, False, "Dopamine's agents have no double-Q target"),
    "dueling": (False, False, "Dopamine's agents have no dueling head"),
    "noisy": (False, False, "Dopamine's agents (here) have no noisy layers"),
    "exploration_schedule": ("linear", "dopamine", "Dopamine only has its linearly_decaying_epsilon; write "
                             "exploration_schedule = \"dopamine\""),
    "tau": (1.0, 1.0, "Dopamine copies the target network (tau = 1)"),
    "random_warmup": (True, True, "Dopamine's agents act with epsilon 1 during the warm-up"),
}
_PER_FIXED = {"per_alpha": (0.6, 0.5, "Dopamine's priorities are sqrt(loss), i.e. alpha 0.5"),
              "per_beta": (0.4, 0.5, "Dopamine's importance weights use beta 0.5"),
              "per_beta_anneal": (True, False, "Dopamine keeps beta fixed; write per_beta_anneal = false")}

_IQN_FIXED = {"cos_start": (0, 1, "Dopamine's cosine features are cos(pi i tau) for i = 1 .. n_cos; write "
                                 "cos_start = 1")}

_MAPPED = {"gamma", "n_steps", "learning_starts", "train_freq", "target_update_interval", "exploration_final_eps",
           "epsilon_decay_steps", "learning_rate", "adam_eps", "buffer_size", "batch_size", "loss", "n_atoms",
           "v_min", "v_max", "prioritized", "n_quantiles", "kappa", "n_tau", "n_tau_target", "n_tau_act", "n_cos",
           "distributional", "exploration_initial_eps", "exploration_fraction", "per_eps", "policy", "seed"}
# exploration_fraction: unused by the "dopamine" schedule; per_eps: Dopamine adds 1e-10 inside the sqrt
# instead (a difference below any loss value that matters).


def dopamine_config(name: str, hyperparams: Mapping[str, Any], policy_kwargs: Mapping[str, Any],
                    where: str = "") -> dict[str, Any]:
    """The Dopamine agent and its arguments for built-in ``name`` with the protocol's settings.

    Args:
        name: the built-in's registry name (a key of :data:`AGENTS`).
        hyperparams: the protocol entry's hyperparameters (the registry's defaults for ``name`` apply below).
        policy_kwargs: its ``policy_kwargs``: ``{features_extractor = "minatar", net_arch = []}`` (the published
            network) or ``{net_arch = [...]}`` (an MLP, for small test tasks).
        where: prefix of error messages.

    Returns:
        ``{"agent": class name, "kwargs": {...}, "optimizer": {...}, "replay": {...}, "network": {...}}``.

    Raises:
        InputError: a setting Dopamine's agent cannot run, naming it and why.
    """
    at = f"{where}: " if where else ""
    if name not in AGENTS:
        raise InputError(f"{at}Dopamine has no agent for {name!r}; it has {', '.join(AGENTS)}")
    hp = {**_BUILTIN.get(name, {}), **hyperparams}
    fixed = dict(_FIXED)
    if hp.get("prioritized"):
        fixed.update(_PER_FIXED)
    if name == "IQN":
        fixed.update(_IQN_FIXED)
    for key, (default, needed, why) in fixed.items():
        value = hp.get(key, default)
        if value != needed:
            raise InputError(f"{at}hyperparams.{key} = {value!r} cannot be run by Dopamine's {AGENTS[name]} ({why})")
    unknown = sorted(set(hp) - _MAPPED - set(fixed))
    if unknown:
        raise InputError(f"{at}hyperparams.{unknown[0]} has no counterpart in Dopamine's {AGENTS[name]}; remove it "
                         f"or add it to rlaudit.fidelity.dopamine_settings")
    if hp.get("exploration_initial_eps", 1.0) != 1.0:
        raise InputError(f"{at}hyperparams.exploration_initial_eps must be 1 for Dopamine's schedule")
    train_freq = hp.get("train_freq", 4)
    if not isinstance(train_freq, int):
        raise InputError(f"{at}hyperparams.train_freq = {train_freq!r}: Dopamine updates every N env steps; give "
                         f"an integer")
    network = _network(policy_kwargs, at)
    kwargs: dict[str, Any] = {
        "gamma": float(hp.get("gamma", 0.99)),
        "update_horizon": int(hp.get("n_steps", 1)),
        "min_replay_history": int(hp.get("learning_starts", 100)),
        "update_period": int(train_freq),
        "target_update_period": int(hp.get("target_update_interval", 10_000)),
        "epsilon_train": float(hp.get("exploration_final_eps", 0.05)),
        "epsilon_decay_period": int(hp.get("epsilon_decay_steps", 250_000)),
    }
    optimizer = {"learning_rate": float(hp.get("learning_rate", 1e-4)),
                 "eps": float(hp["adam_eps"]) if hp.get("adam_eps") is not None else 1e-8}
    replay = {"max_capacity": int(hp.get("buffer_size", 1_000_000)), "batch_size": int(hp.get("batch_size", 32))}
    distributional = hp.get("distributional", "none")
    if name == "DQN":
        kwargs["loss_type"] = hp.get("loss", "huber")
    elif hp.get("loss", "huber") != "huber":
        raise InputError(f"{at}hyperparams.loss applies to DQN only")
    if name in ("C51", "DopamineRainbow"):
        if distributional != "c51":
            raise InputError(f"{at}hyperparams.distributional must stay 'c51' for {name}")
        v_min, v_max = float(hp.get("v_min", -10.0)), float(hp.get("v_max", 10.0))
        kwargs.update(num_atoms=int(hp.get("n_atoms", 51)), vmin=v_min, vmax=v_max,
                      replay_scheme="prioritized" if hp.get("prioritized") else "uniform")
    elif name == "QRDQN":
        kwargs.update(num_atoms=int(hp.get("n_quantiles", 200)), kappa=float(hp.get("kappa", 1.0)),
                      replay_scheme="prioritized" if hp.get("prioritized") else "uniform")
    elif name == "IQN":
        kwargs.update(kappa=float(hp.get("kappa", 1.0)), num_tau_samples=int(hp.get("n_tau", 64)),
                      num_tau_prime_samples=int(hp.get("n_tau_target", 64)),
                      num_quantile_samples=int(hp.get("n_tau_act", 32)))
        network["quantile_embedding_dim"] = int(hp.get("n_cos", 64))
    return {"agent": AGENTS[name], "kwargs": kwargs, "optimizer": optimizer, "replay": replay, "network": network}


def _network(policy_kwargs: Mapping[str, Any], at: str) -> dict[str, Any]:
    pk = dict(policy_kwargs)
    extractor = pk.pop("features_extractor", None)
    net_arch = pk.pop("net_arch", [64, 64] if extractor is None else [])
    if pk:
        raise InputError(f"{at}policy_kwargs.{sorted(pk)[0]} has no counterpart in the Dopamine reference's network")
    if extractor not in (None, "minatar"):
        raise InputError(f"{at}policy_kwargs.features_extractor = {extractor!r}: the Dopamine reference has the "
                         f"'minatar' network only")
    if not isinstance(net_arch, list) or not all(isinstance(n, int) for n in net_arch):
        raise InputError(f"{at}policy_kwargs.net_arch = {net_arch!r}: give a list of layer sizes")
    return {"torso": extractor or "flatten", "hidden": list(net_arch)}


__all__ = ["AGENTS", "dopamine_config"]
