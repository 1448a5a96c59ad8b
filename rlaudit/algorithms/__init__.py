"""Algorithm registry, plugins and the DQN family.

``get_spec(name)`` / ``list_specs()`` read the registry (:mod:`rlaudit.algorithms.registry`: built-ins and
packages registering through the ``rlaudit.algorithms`` entry-point group); ``make_agent`` builds any
registered algorithm behind the :class:`~rlaudit.algorithms.adapter.Agent` interface that the run engine
drives (:mod:`rlaudit.algorithms.adapter` documents the learner protocol for non-SB3 code). The DQN-family
built-ins live in :mod:`rlaudit.algorithms.dqn_family` and import torch only when used.
"""

from rlaudit.algorithms.registry import (
    ACTION_SPACES,
    ENTRY_POINT_GROUP,
    AlgorithmSpec,
    RegistryWarning,
    get_spec,
    list_specs,
    register,
)


def make_agent(name_or_spec, env, hyperparams=None, seed=0, policy_kwargs=None):
    """Construct a registered algorithm on ``env``; see :func:`rlaudit.algorithms.adapter.make_agent`."""
    from rlaudit.algorithms.adapter import make_agent as _make_agent

    return _make_agent(name_or_spec, env, hyperparams, seed, policy_kwargs)


__all__ = [
    "ACTION_SPACES",
    "ENTRY_POINT_GROUP",
    "AlgorithmSpec",
    "RegistryWarning",
    "get_spec",
    "list_specs",
    "make_agent",
    "register",
]
