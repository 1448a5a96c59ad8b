"""The contract between rlaudit and an algorithm class: what kinds exist, which constructor keywords are
hyperparameters, which action spaces there are. A leaf module (no rlaudit imports but :mod:`rlaudit.errors`),
so that the registry (which describes algorithms) and the adapter (which drives them) both build on it
without importing each other. The learner protocol itself is documented in :mod:`rlaudit.algorithms.adapter`.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from rlaudit.errors import InputError

ACTION_SPACES: tuple[str, ...] = ("discrete", "box", "multi_discrete", "multi_binary")
"""Action-space kinds, by the name of the :mod:`gymnasium.spaces` class in snake case."""

# Constructor parameters that are plumbing, not hyperparameters: rlaudit supplies them (env, seed, the
# policy keyword arguments from the protocol's own field) or they only affect logging.
NOT_HYPERPARAMS = frozenset(
    {"self", "env", "seed", "policy_kwargs", "verbose", "tensorboard_log", "_init_setup_model", "stats_window_size"}
)


def kind_of_space(space: Any) -> str:
    """Snake-case name of a :mod:`gymnasium.spaces` class: ``Discrete`` -> ``"discrete"``."""
    name = type(space).__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


LEARNER_METHODS: tuple[str, ...] = ("learn", "predict", "get_params")
"""Methods a learner-protocol class must define."""


def _is_sb3(cls: type) -> bool:
    try:
        from stable_baselines3.common.base_class import BaseAlgorithm
    except ImportError:  # pragma: no cover - SB3 is a core dependency
        return False
    return issubclass(cls, BaseAlgorithm)


def algorithm_kind(cls: type, who: str = "") -> str:
    """Return ``"sb3"`` or ``"learner"`` for ``cls``.

    Raises:
        InputError: ``cls`` is neither; the message lists what the learner protocol is missing.
    """
    if _is_sb3(cls):
        return "sb3"
    missing = [m for m in LEARNER_METHODS if not callable(getattr(cls, m, None))]
    try:
        init_params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        init_params = {}
    for arg in ("env", "seed"):
        if arg not in init_params:
            missing.append(f"__init__ argument {arg!r}")
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in init_params.values()):
        missing.append("explicit keyword hyperparameters in __init__ (found **kwargs)")
    if missing:
        name = f"{cls.__module__}.{cls.__qualname__}"
        raise InputError(
            f"{who or name}: {name} is neither a stable-baselines3 BaseAlgorithm subclass nor a learner: "
            f"missing {', '.join(missing)} (see docs/plugins.md)"
        )
    return "learner"


def keyword_parameters(cls: type, exclude: frozenset[str] = NOT_HYPERPARAMS
                       ) -> tuple[dict[str, tuple[inspect.Parameter, type]], bool]:
    """Keyword parameters of ``cls.__init__`` with the class that declares each, and whether the list is closed.

    An SB3 subclass may add its own keywords and pass ``**kwargs`` on: the MRO is followed until a class's
    ``__init__`` takes no ``**kwargs`` (so DQNFamily lists DQN's hyperparameters too); the first
    declaration of a name wins. ``closed`` is false when every ``__init__`` up to ``object`` takes
    ``**kwargs``, i.e. any keyword may be accepted.
    """
    params: dict[str, tuple[inspect.Parameter, type]] = {}
    for klass in cls.__mro__:
        if klass is object:
            break
        if "__init__" not in vars(klass):
            continue
        try:
            sig = inspect.signature(klass.__init__)
        except (TypeError, ValueError):
            return params, False
        more = False
        for p in sig.parameters.values():
            if p.kind is p.VAR_KEYWORD:
                more = True
            elif p.name not in exclude and p.kind is not p.VAR_POSITIONAL:
                params.setdefault(p.name, (p, klass))
        if not more:
            return params, True
    return params, False


def constructor_params(cls: type) -> dict[str, Any]:
    """Keyword hyperparameters of ``cls.__init__`` and their defaults (``inspect.Parameter.empty`` if none).

    ``policy`` counts as a hyperparameter of SB3 algorithms; plumbing (``env``, ``seed``, ``verbose``,
    ``policy_kwargs``, logging) does not.
    """
    return {name: p.default for name, (p, _) in keyword_parameters(cls)[0].items()}
