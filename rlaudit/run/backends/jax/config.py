"""What the JAX backend runs, checked without importing JAX: hyperparameters, network, task and evaluation.

The JAX agents take the hyperparameter names of the SB3 built-ins they reimplement, with the same meaning and
the same defaults (read from the SB3 class and the registry entry, so that one protocol entry switches
backend by adding ``backend = "jax"``), plus the names of ``/docs/backends.md``'s shared table (``adam_eps``,
``exploration_schedule``, ``epsilon_decay_steps``, ``loss``, ``per_beta_anneal``). Whatever the JAX backend
does not implement is refused by ``rlaudit validate`` with the backends that can run it; nothing is accepted
and silently ignored.

:func:`agent_config` turns a run's settings into :class:`AgentConfig`, the frozen (hashable) description the
compiled program is built from: two runs with equal configs share one compiled program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from rlaudit.errors import InputError, did_you_mean
from rlaudit.run.backends.jax import envs

# name -> (accepted Python types, allowed values or None, what to write in a message)
_FLOAT = ((int, float), None, "a number")
_INT = ((int,), None, "an integer")
_BOOL = ((bool,), None, "true or false")
HYPERPARAMS: dict[str, tuple[tuple[type, ...], tuple | None, str]] = {
    "learning_rate": _FLOAT, "buffer_size": _INT, "learning_starts": _INT, "batch_size": _INT, "tau": _FLOAT,
    "gamma": _FLOAT, "train_freq": _INT, "gradient_steps": _INT, "target_update_interval": _INT,
    "exploration_fraction": _FLOAT, "exploration_initial_eps": _FLOAT, "exploration_final_eps": _FLOAT,
    "max_grad_norm": ((int, float, type(None)), None, "a number (inf or absent for QR-DQN: no clipping)"),
    "n_steps": _INT,
    # the shared names of the published MinAtar settings (both backends)
    "adam_eps": ((int, float, type(None)), None, "a number"),
    "exploration_schedule": ((str,), ("linear", "dopamine"), "'linear' or 'dopamine'"),
    "epsilon_decay_steps": _INT,
    "loss": ((str,), ("huber", "mse"), "'huber' or 'mse'"),
    "per_beta_anneal": _BOOL,
    # the DQN family's components
    "double": _BOOL, "dueling": _BOOL, "prioritized": _BOOL, "per_alpha": _FLOAT, "per_beta": _FLOAT,
    "per_eps": _FLOAT, "distributional": ((str,), ("none", "c51", "qr", "iqn"), "'none', 'c51', 'qr' or 'iqn'"),
    "n_atoms": _INT, "v_min": _FLOAT, "v_max": _FLOAT, "n_quantiles": _INT, "n_tau": _INT, "n_tau_target": _INT,
    "n_tau_act": _INT, "n_cos": _INT, "cos_start": ((int,), (0, 1), "0 or 1"), "iqn_post_layers": _INT,
    "kappa": _FLOAT,
    # accepted at the values the JAX backend implements (their SB3 defaults), refused otherwise
    "policy": ((str,), ("MlpPolicy",), "'MlpPolicy'"), "optimize_memory_usage": _BOOL, "noisy": _BOOL,
    "noisy_sigma0": _FLOAT, "device": ((str,), None, "a string"),
}
"""Hyperparameters the JAX backend reads. Others of the SB3 classes (``replay_buffer_class``, …) are refused."""

FIXED: dict[str, tuple[Any, str]] = {
    "optimize_memory_usage": (False, "the replay buffer stores bit-packed observations instead"),
    "noisy": (False, "noisy nets are not implemented in JAX"),
}
"""Hyperparameters accepted only at one value, and why."""

CONTRACT_DEFAULTS: dict[str, Any] = {"adam_eps": None, "exploration_schedule": "linear",
                                     "epsilon_decay_steps": 250_000, "loss": "huber", "per_beta_anneal": True}
"""Defaults of the shared names where the SB3 class does not (yet) define them (the same values)."""

FAMILY_DEFAULTS: dict[str, Any] = {"double": False, "dueling": False, "prioritized": False, "per_alpha": 0.6,
                                   "per_beta": 0.4, "per_eps": 1e-6, "distributional": "none", "n_atoms": 51,
                                   "v_min": -10.0, "v_max": 10.0, "n_quantiles": 200, "n_tau": 64,
                                   "n_tau_target": 64, "n_tau_act": 32, "n_cos": 64, "cos_start": 0, "iqn_post_layers": 1,
                                   "kappa": 1.0, "noisy": False, "noisy_sigma0": 0.5}
"""The DQN family's component defaults (``DQNFamily``'s), for SB3 classes that lack a component (``DQN``:
all off; ``QRDQN``: ``distributional = "qr"``)."""

POLICY_KWARGS = ("net_arch", "features_extractor", "stream_arch")
"""``policy_kwargs`` keys the JAX networks read."""

FEATURES_EXTRACTORS = ("flatten", "minatar")
"""``policy_kwargs.features_extractor``: ``flatten`` (SB3's default for vector observations) or ``minatar``
(one 16-filter 3x3 convolution, stride 1, SAME padding, ReLU, flatten: the 'minatar' network of Obando-Ceron
& Castro 2021; Glorot-uniform kernels, zero biases, in every layer)."""

DEFAULT_NET_ARCH = (64, 64)
"""SB3's DQN / QR-DQN ``MlpPolicy`` default hidden layers."""


@dataclass(frozen=True)
class AgentConfig:
    """Everything the compiled JAX program depends on (hashable: equal configs share a compiled program).

    Names and meanings are those of the SB3 hyperparameters (see ``DQNFamily`` and ``stable_baselines3.DQN``);
    the run's length, seeds and evaluation points are arguments of the program, not part of it.
    """

    suite: str
    task_id: str
    """The task (``suite``, gymnasium id): its training environment is the one registered in :mod:`.envs`."""
    game: str | None
    """pgx MinAtar game (``breakout``, …); ``None`` for the other suites."""
    minimal_actions: tuple[int, ...] | None
    """MinAtar: the game's minimal action set (full-set action ids), or ``None`` for the full 6-action set."""
    sticky_action_prob: float
    """MinAtar's sticky-action probability (0.1); 0 for the other suites."""
    max_episode_steps: int | None
    """Episode cap in agent steps (``None``: none); a capped episode is truncated, not terminated."""
    clip_reward: tuple[float, float] | None
    """Training rewards are clipped to this interval before the agent stores them (``None``: not clipped)."""
    n_actions: int
    """Discrete actions the networks score (action indices ``0 .. n_actions - 1``)."""
    obs_shape: tuple[int, ...]
    """One observation's shape: MinAtar's ``(10, 10, C)``, CartPole's ``(4,)``."""
    obs_dtype: str
    """``bool`` (bit-packed in the replay buffer) or ``float32`` (stored as is)."""
    net_arch: tuple[int, ...]
    features_extractor: str
    stream_arch: tuple[int, ...]
    learning_rate: float
    adam_eps: float
    buffer_size: int
    learning_starts: int
    batch_size: int
    tau: float
    gamma: float
    train_freq: int
    gradient_steps: int
    target_update_interval: int
    exploration_schedule: str
    exploration_fraction: float
    exploration_initial_eps: float
    exploration_final_eps: float
    epsilon_decay_steps: int
    max_grad_norm: float
    """``inf``: no clipping."""
    loss: str
    n_steps: int
    double: bool
    dueling: bool
    prioritized: bool
    per_alpha: float
    per_beta: float
    per_eps: float
    per_beta_anneal: bool
    distributional: str
    n_atoms: int
    v_min: float
    v_max: float
    n_quantiles: int
    n_tau: int
    n_tau_target: int
    n_tau_act: int
    n_cos: int
    cos_start: int
    iqn_post_layers: int
    kappa: float

    @property
    def n_out(self) -> int:
        """Outputs per action: atoms (C51), quantiles (QR) or 1."""
        return {"c51": self.n_atoms, "qr": self.n_quantiles}.get(self.distributional, 1)


def effective_hyperparams(spec, hp: dict) -> dict:
    """The run's hyperparameters: the SB3 class's keyword defaults, the DQN-family and shared-name defaults
    where the class lacks them, the registry entry's defaults, then the protocol's ``hp``."""
    from rlaudit.algorithms.contract import constructor_params

    class_defaults = {k: v for k, v in constructor_params(spec.load()).items() if k in HYPERPARAMS}
    base = {**CONTRACT_DEFAULTS, **FAMILY_DEFAULTS}
    if spec.name == "QRDQN":
        base["distributional"] = "qr"
    return {**base, **class_defaults, **spec.defaults, **hp}


def accepted_names(spec) -> set[str]:
    """Hyperparameters of ``spec`` on the jax backend: those of its SB3 class that the JAX agents implement,
    and the shared names (:data:`CONTRACT_DEFAULTS`), so that an entry takes the same names on both backends."""
    from rlaudit.algorithms.contract import constructor_params

    return ({n for n in constructor_params(spec.load()) if n in HYPERPARAMS} | set(CONTRACT_DEFAULTS))


def check_hyperparams(spec, hp: dict, where: str) -> None:
    """Refuse a hyperparameter the JAX backend does not implement, or a value of the wrong type or range.

    Raises:
        InputError: ``"<where>.<name>: …"``, naming the backends that can run what is refused.
    """
    from rlaudit.algorithms.hyperparams import check_ranges

    others = [b for b in spec.backends if b != "jax"]
    can = f"; backends that can: {', '.join(others)}" if others else ""
    from rlaudit.algorithms.contract import constructor_params

    sb3_names = set(constructor_params(spec.load()))
    names = accepted_names(spec)
    for name, value in hp.items():
        if name == "policy_kwargs":
            raise InputError(f"{where}: 'policy_kwargs' is a field of its own, not a hyperparameter of {spec.name!r}")
        if name not in names:
            if name in sb3_names:
                raise InputError(f"{where}.{name}: not implemented by the jax backend for {spec.name!r}{can}")
            raise InputError(f"{where}: unknown hyperparameter {name!r} for algorithm {spec.name!r}"
                             f"{did_you_mean(name, sorted(names))}")
        types, allowed, what = HYPERPARAMS[name]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise InputError(f"{where}.{name}: expected {what} for {spec.name!r} (jax backend), got {value!r}")
        if allowed is not None and value not in allowed:
            raise InputError(f"{where}.{name}: expected {what} for {spec.name!r} (jax backend), got {value!r}"
                             f"{did_you_mean(str(value), allowed)}")
        if isinstance(value, float) and math.isnan(value) or (isinstance(value, float) and math.isinf(value)
                                                              and name != "max_grad_norm"):
            raise InputError(f"{where}.{name}: must be a finite number for {spec.name!r}, got {value!r}")
        if name in FIXED and value != FIXED[name][0]:
            raise InputError(f"{where}.{name}: only {FIXED[name][0]!r} on the jax backend ({FIXED[name][1]}){can}")
    eff = effective_hyperparams(spec, hp)
    if eff.get("noisy"):
        raise InputError(f"{where}: {spec.name} uses noisy nets, which the jax backend does not implement{can}")
    if eff.get("gradient_steps", 1) < 1:
        raise InputError(f"{where}.gradient_steps: must be at least 1 on the jax backend (-1, as many as env steps, "
                         f"is an SB3 option){can}, got {eff['gradient_steps']!r}")
    if eff.get("epsilon_decay_steps", 1) < 1:
        raise InputError(f"{where}.epsilon_decay_steps: must be at least 1, got {eff['epsilon_decay_steps']!r}")
    adam_eps = eff.get("adam_eps")
    if adam_eps is not None and not adam_eps > 0:
        raise InputError(f"{where}.adam_eps: must be greater than 0, got {adam_eps!r}")
    if eff["loss"] == "mse" and eff["distributional"] != "none":
        raise InputError(f"{where}.loss: 'mse' is for the expected-value heads only; {spec.name} is "
                         f"distributional = {eff['distributional']!r}")
    check_ranges({k: v for k, v in hp.items() if not (k == "max_grad_norm" and v is None)}, where, repr(spec.name))
    validate = getattr(spec.load(), "validate_hyperparams", None)
    if callable(validate):
        try:
            validate({**spec.defaults, **hp})
        except ValueError as exc:
            raise InputError(f"{where}: {spec.name}: {exc}") from None


def check_policy_kwargs(spec, pk: dict, hp: dict, where: str) -> None:
    """``policy_kwargs`` the JAX networks read: ``net_arch``, ``features_extractor``, ``stream_arch``."""
    from rlaudit.algorithms.hyperparams import _check_net_arch

    others = [b for b in spec.backends if b != "jax"]
    can = f"; backends that can: {', '.join(others)}" if others else ""
    for key, value in pk.items():
        if key not in POLICY_KWARGS:
            raise InputError(f"{where}: {key!r} is not implemented by the jax backend{did_you_mean(key, POLICY_KWARGS)}"
                             f" (it reads {', '.join(POLICY_KWARGS)}){can}")
        if key in ("net_arch", "stream_arch"):
            if not isinstance(value, list):
                raise InputError(f"{where}.{key}: expected an array of layer sizes, got {value!r}")
            _check_net_arch(value, where, f"{spec.name!r} (jax backend)")
        elif not isinstance(value, str) or value not in FEATURES_EXTRACTORS:
            raise InputError(f"{where}.features_extractor: unknown extractor {value!r}"
                             f"{did_you_mean(str(value), FEATURES_EXTRACTORS)}; built-ins: {', '.join(FEATURES_EXTRACTORS)}")
    if "stream_arch" in pk and not effective_hyperparams(spec, hp).get("dueling"):
        raise InputError(f"{where}.stream_arch: only for dueling networks (dueling = true)")


def check_task(task, where: str, spec) -> None:
    """Refuse a task the JAX backend has no environment for (one line naming those it has), or task ``kwargs``
    its environment does not implement (:func:`.envs.check_task`)."""
    others = [b for b in spec.backends if b != "jax"]
    envs.check_task(task, where, f"; backends that can: {', '.join(others)}" if others else "")


def check_features_extractor(task, pk: dict, where: str, spec) -> None:
    """Refuse a features extractor that does not fit the task's observations (``minatar`` needs MinAtar's
    10 x 10 x C images)."""
    env = envs.env_spec(task)
    extractor = pk.get("features_extractor", "flatten")
    if env is not None and extractor not in env.extractors:
        others = [b for b in spec.backends if b != "jax"]
        can = f"; backends that can: {', '.join(others)}" if others else ""
        raise InputError(f"{where}.features_extractor: {extractor!r} does not fit {task.suite} {task.id!r} "
                         f"(its observations take {', '.join(repr(e) for e in env.extractors)}){can}")


def check_evaluation(evaluation, where: str, spec) -> None:
    """Greedy evaluations only (SB3's stochastic DQN evaluation is ε-greedy at the training ε, which the JAX
    backend does not keep)."""
    if not evaluation.deterministic:
        others = [b for b in spec.backends if b != "jax"]
        raise InputError(f"{where}: the jax backend evaluates greedily (evaluation.deterministic = true; use "
                         f"evaluation.epsilon for ε-greedy evaluations); backends that can: {', '.join(others)}")


def agent_config(spec) -> AgentConfig:
    """The :class:`AgentConfig` of run ``spec`` (a :class:`~rlaudit.run.spec.RunSpec`)."""
    from rlaudit.algorithms import get_spec

    aspec = get_spec(spec.algorithm.name)
    hp = effective_hyperparams(aspec, spec.algorithm.hyperparams_dict)
    pk = spec.algorithm.policy_kwargs_dict
    train_freq = hp["train_freq"]
    if isinstance(train_freq, (list, tuple)):
        train_freq = train_freq[0]
    max_grad_norm = hp.get("max_grad_norm")
    values = dict(
        **envs.settings(spec.task),
        net_arch=tuple(pk.get("net_arch", DEFAULT_NET_ARCH)),
        features_extractor=pk.get("features_extractor", "flatten"), stream_arch=tuple(pk.get("stream_arch", ())),
        learning_rate=float(hp["learning_rate"]),
        adam_eps=1e-8 if hp.get("adam_eps") is None else float(hp["adam_eps"]),
        max_grad_norm=math.inf if max_grad_norm is None else float(max_grad_norm),
        train_freq=int(train_freq),
    )
    for f in fields(AgentConfig):
        if f.name not in values:
            values[f.name] = hp[f.name]
    for name in ("buffer_size", "learning_starts", "batch_size", "gradient_steps", "target_update_interval",
                 "epsilon_decay_steps", "n_steps", "n_atoms", "n_quantiles", "n_tau", "n_tau_target", "n_tau_act",
                 "n_cos", "cos_start", "iqn_post_layers"):
        values[name] = int(values[name])
    for name in ("tau", "gamma", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps",
                 "per_alpha", "per_beta", "per_eps", "v_min", "v_max", "kappa"):
        values[name] = float(values[name])
    for name in ("double", "dueling", "prioritized", "per_beta_anneal"):
        values[name] = bool(values[name])
    return AgentConfig(**values)
