"""The algorithm registry: name -> :class:`AlgorithmSpec`, built-ins plus plugins found by entry point.

Modelled on Gymnasium's registry: a dict of specs whose entry points are ``"module:attr"`` strings imported
only when used (:meth:`AlgorithmSpec.load`), did-you-mean suggestions for unknown names, and a warning
when a name is registered twice.

Third-party packages add algorithms through the ``rlaudit.algorithms`` entry-point group in their own
``pyproject.toml``::

    [project.entry-points."rlaudit.algorithms"]
    MyPPO = "my_package.algos:MyPPO"

Discovery reads installed packages' metadata once, on first use of the registry; a plugin's module is
imported only when one of its algorithms is loaded (a protocol uses it, ``rlaudit algorithms show`` or
``rlaudit algorithms`` lists it). A plugin that fails to import raises :class:`~rlaudit.errors.InputError`
naming the package and the entry point, and affects no other algorithm.

Name clashes are resolved deterministically: a built-in always wins over a plugin; between plugins the
distribution whose normalised name sorts first wins. Both cases emit a :class:`RegistryWarning` naming
both sources. An explicit second :func:`register` call for a name replaces the first, with a warning.
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

# NOT_HYPERPARAMS is re-exported: it was defined here before rlaudit.algorithms.contract existed.
from rlaudit.algorithms.contract import NOT_HYPERPARAMS  # noqa: F401
from rlaudit.algorithms.contract import ACTION_SPACES, algorithm_kind, constructor_params
from rlaudit.algorithms.contract import kind_of_space as _kind_of_space
from rlaudit.errors import InputError, did_you_mean

ENTRY_POINT_GROUP = "rlaudit.algorithms"
KINDS = ("sb3", "learner")

class RegistryWarning(UserWarning):
    """A name registered twice, or claimed by two packages."""


class AlgorithmSpec:
    """One registered algorithm.

    Built-ins give every field up front. A plugin's spec knows only its name, entry point and source
    until it is loaded; ``kind``, ``action_spaces``, ``defaults`` and ``description`` then come from the
    class (class attributes ``rlaudit_action_spaces``, ``rlaudit_defaults``, ``rlaudit_description`` or
    the first docstring line; see ``docs/plugins.md``), and reading them loads it.

    Attributes:
        name: registry name used in protocols (``[[algorithms]] name``) and on the command line.
        entry_point: ``"module:attr"`` of the algorithm class; imported only by :meth:`load`.
        kind: ``"sb3"`` (a stable-baselines3 ``BaseAlgorithm`` subclass) or ``"learner"`` (the learner
            protocol of :mod:`rlaudit.algorithms.adapter`).
        action_spaces: action-space kinds supported, a subset of ``ACTION_SPACES``.
        defaults: rlaudit's hyperparameter defaults, applied on top of the class's keyword defaults.
        description: one line for ``rlaudit algorithms``.
        source: ``"built-in"`` or ``"plugin <distribution> (<name> = <entry point>)"``.
        backends: the training backends that implement it (:mod:`rlaudit.run.backends`), the default
            (``"sb3"``, which runs every algorithm) first; plugins run on ``sb3``.
    """

    def __init__(
        self,
        name: str,
        entry_point: str,
        kind: str | None = None,
        action_spaces: frozenset[str] | None = None,
        defaults: dict[str, Any] | None = None,
        description: str | None = None,
        source: str = "built-in",
        backends: tuple[str, ...] = ("sb3",),
    ) -> None:
        self.name = name
        self.entry_point = entry_point
        self.source = source
        self.backends = tuple(backends)
        self._kind = kind
        self._action_spaces = action_spaces
        self._defaults = dict(defaults or {})
        self._description = description
        self._cls: type | None = None

    def __repr__(self) -> str:
        return f"AlgorithmSpec(name={self.name!r}, entry_point={self.entry_point!r}, source={self.source!r})"

    @property
    def kind(self) -> str:
        if self._kind is None:
            self.load()
        return self._kind

    @property
    def action_spaces(self) -> frozenset[str]:
        if self._action_spaces is None:
            self.load()
        return self._action_spaces

    @property
    def description(self) -> str:
        if self._description is None:
            self.load()
        return self._description

    @property
    def defaults(self) -> dict[str, Any]:
        if self.is_plugin and self._cls is None:
            self.load()
        return dict(self._defaults)

    @property
    def is_plugin(self) -> bool:
        """Whether the spec came from an installed package's entry point."""
        return self.source != "built-in"

    def load(self) -> type:
        """Import and return the algorithm class, checking that it is one of the two supported kinds.

        Raises:
            InputError: the module or attribute cannot be imported (naming package and entry point), or the
                class is neither an SB3 algorithm nor a learner (naming what is missing).
        """
        if self._cls is not None:
            return self._cls
        module_name, _, attr = self.entry_point.partition(":")
        who = f"algorithm {self.name!r} from {self.source}"
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import-time failure of third-party code
            # is reported; a module that calls sys.exit(0) on import would otherwise end the command with
            # exit status 0 and no word
            raise InputError(
                f"{who}: cannot import {self.entry_point!r}: {type(exc).__name__}: {exc}"
            ) from None
        if not attr or not inspect.isclass(obj):
            raise InputError(f"{who}: entry point {self.entry_point!r} must name a class ('module:Class')")
        kind = algorithm_kind(obj, who)
        if self._action_spaces is None:
            spaces = getattr(obj, "rlaudit_action_spaces", ACTION_SPACES)
            bad = sorted(set(spaces) - set(ACTION_SPACES))
            if bad:
                raise InputError(f"{who}: rlaudit_action_spaces has unknown kinds {bad}; expected {list(ACTION_SPACES)}")
            self._action_spaces = frozenset(spaces)
        if self._kind is None:
            self._kind = kind
        if self._description is None:
            doc = getattr(obj, "rlaudit_description", None) or (inspect.getdoc(obj) or "").strip().split("\n")[0]
            self._description = doc or obj.__name__
        if self.is_plugin and not self._defaults:
            self._defaults = dict(getattr(obj, "rlaudit_defaults", {}) or {})
        self._cls = obj
        return obj

    def hyperparameters(self) -> dict[str, Any]:
        """All keyword hyperparameters with their effective defaults (class defaults, then ``defaults``).

        Loads the class. Parameters without a default are reported as ``inspect.Parameter.empty``.
        """
        params = constructor_params(self.load())
        return {**params, **self.defaults}

    def check_hyperparams(self, hp: Mapping[str, Any], where: str) -> None:
        """Reject unknown hyperparameter names, and values of the wrong type or out of range.

        Types come from the constructor's annotations (:mod:`rlaudit.algorithms.hyperparams`).

        Args:
            hp: hyperparameters as written in the protocol (``[[algorithms]] hyperparams``).
            where: where they were written, e.g. ``"quickstart.toml: algorithms[2].hyperparams"``.

        Raises:
            InputError: naming ``where``, the hyperparameter and (for typos) the closest valid names.
        """
        cls = self.load()
        known = constructor_params(cls)
        for name, value in hp.items():
            if name == "policy_kwargs":
                raise InputError(f"{where}: 'policy_kwargs' is a field of its own, not a hyperparameter of {self.name!r}")
            if name not in known:
                raise InputError(
                    f"{where}: unknown hyperparameter {name!r} for algorithm {self.name!r}"
                    f"{did_you_mean(name, known)}"
                )
        from rlaudit.algorithms.hyperparams import check_combinations, check_ranges, check_types

        check_types(cls, hp, where, self.name)
        validate = getattr(cls, "validate_hyperparams", None)
        if callable(validate):
            try:
                validate({**self.defaults, **hp})
            except ValueError as exc:
                raise InputError(f"{where}: {self.name}: {exc}") from None
        check_ranges(hp, where, self.name)
        check_combinations(cls, {**known, **self.defaults, **hp}, where, self.name)

    def supports(self, action_space: Any) -> bool:
        """Whether the algorithm handles ``action_space`` (a :class:`gymnasium.spaces.Space`)."""
        return _kind_of_space(action_space) in self.action_spaces


_REGISTRY: dict[str, AlgorithmSpec] = {}
_PLUGINS_LOADED = False


def register(
    name: str,
    entry_point: str,
    *,
    kind: str | None = None,
    action_spaces: Iterable[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    description: str | None = None,
    source: str = "built-in",
    backends: Iterable[str] = ("sb3",),
) -> AlgorithmSpec:
    """Register an algorithm under ``name``; a second registration replaces the first with a warning.

    Args:
        name: registry name.
        entry_point: ``"module:Class"``, imported only when used.
        kind: ``"sb3"`` or ``"learner"``; ``None`` to detect it when loaded.
        action_spaces: kinds from ``ACTION_SPACES``; ``None`` to read them from the class when loaded.
        defaults: rlaudit's hyperparameter defaults on top of the class's keyword defaults.
        description: one line; ``None`` to use the class docstring's first line.
        source: ``"built-in"`` or ``"plugin <distribution> (<entry point>)"``.
        backends: training backends implementing it (``"sb3"`` runs every algorithm; ``"jax"`` only the
            names :mod:`rlaudit.run.backends.jax` implements).

    Returns:
        The new spec.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    spaces = None if action_spaces is None else frozenset(action_spaces)
    if spaces is not None and not spaces <= set(ACTION_SPACES):
        raise ValueError(f"unknown action spaces {sorted(spaces - set(ACTION_SPACES))}")
    spec = AlgorithmSpec(
        name=name,
        entry_point=entry_point,
        kind=kind,
        action_spaces=spaces,
        defaults=dict(defaults or {}),
        description=description,
        source=source,
        backends=tuple(backends),
    )
    if name in _REGISTRY:
        old = _REGISTRY[name]
        warnings.warn(
            f"algorithm {name!r} registered twice: {entry_point!r} ({source}) replaces "
            f"{old.entry_point!r} ({old.source})",
            RegistryWarning,
            stacklevel=2,
        )
    _REGISTRY[name] = spec
    return spec


def _canonical_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def discover_plugins(entry_points: Iterable[Any] | None = None) -> list[AlgorithmSpec]:
    """Register every ``rlaudit.algorithms`` entry point of the installed packages (metadata only).

    Clashes: a built-in name is never replaced by a plugin; when two distributions claim a name, the one
    whose normalised distribution name sorts first wins. Each clash emits one :class:`RegistryWarning`
    naming both.

    Args:
        entry_points: for tests; defaults to ``importlib.metadata.entry_points(group=...)``.

    Returns:
        The specs registered.
    """
    if entry_points is None:
        from importlib.metadata import entry_points as _eps

        entry_points = _eps(group=ENTRY_POINT_GROUP)
    found = []
    for ep in entry_points:
        dist = getattr(getattr(ep, "dist", None), "name", None) or "<unknown distribution>"
        found.append((_canonical_dist(dist), dist, ep))
    found.sort(key=lambda t: (t[0], t[2].name, t[2].value))
    added: list[AlgorithmSpec] = []
    for _, dist, ep in found:
        source = f"plugin {dist} ({ep.name} = {ep.value})"
        old = _REGISTRY.get(ep.name)
        if old is not None:
            if old.source == source:
                continue
            kept = "built-in" if not old.is_plugin else "the first distribution by name"
            warnings.warn(
                f"algorithm {ep.name!r} is registered by {old.source} and by {source}; "
                f"using {old.source} ({kept} wins)",
                RegistryWarning,
                stacklevel=2,
            )
            continue
        spec = AlgorithmSpec(name=ep.name, entry_point=ep.value, source=source)
        _REGISTRY[ep.name] = spec
        added.append(spec)
    return added


def _ensure_plugins() -> None:
    global _PLUGINS_LOADED
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        discover_plugins()


def get_spec(name: str) -> AlgorithmSpec:
    """Return the spec registered as ``name``.

    Raises:
        InputError: unknown name, with did-you-mean suggestions.
    """
    _ensure_plugins()
    if isinstance(name, AlgorithmSpec):
        return name
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown algorithm {name!r}{did_you_mean(name, _REGISTRY)}; `rlaudit algorithms` lists them"
        ) from None


def list_specs() -> list[AlgorithmSpec]:
    """All registered specs: built-ins in registration order, then plugins sorted by name."""
    _ensure_plugins()
    specs = list(_REGISTRY.values())
    return [s for s in specs if not s.is_plugin] + sorted((s for s in specs if s.is_plugin), key=lambda s: s.name)


# --- built-ins ------------------------------------------------------------------------------------------
_ALL = ACTION_SPACES
_BOX = ("box",)
_DISCRETE = ("discrete",)

_BUILTINS: list[tuple[str, str, tuple[str, ...], dict[str, Any], str]] = [
    ("PPO", "stable_baselines3:PPO", _ALL, {}, "Proximal Policy Optimization (stable-baselines3)"),
    ("A2C", "stable_baselines3:A2C", _ALL, {}, "Advantage Actor-Critic (stable-baselines3)"),
    ("DQN", "rlaudit.algorithms.dqn_family:DQN", _DISCRETE, {},
     "Deep Q-Network (stable-baselines3's, with Adam eps, Dopamine's epsilon schedule and MSE loss as options)"),
    ("SAC", "stable_baselines3:SAC", _BOX, {}, "Soft Actor-Critic (stable-baselines3)"),
    ("TD3", "stable_baselines3:TD3", _BOX, {}, "Twin Delayed DDPG (stable-baselines3)"),
    ("DDPG", "stable_baselines3:DDPG", _BOX, {}, "Deep Deterministic Policy Gradient (stable-baselines3)"),
    ("TRPO", "sb3_contrib:TRPO", _ALL, {}, "Trust Region Policy Optimization (sb3-contrib)"),
    ("TQC", "sb3_contrib:TQC", _BOX, {}, "Truncated Quantile Critics (sb3-contrib)"),
    ("ARS", "sb3_contrib:ARS", ("discrete", "box"), {}, "Augmented Random Search (sb3-contrib)"),
    ("CrossQ", "sb3_contrib:CrossQ", _BOX, {}, "CrossQ (sb3-contrib)"),
    # The DQN family (rlaudit.algorithms.dqn_family): one class, components switched by hyperparameters.
    (
        "DQNFamily",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {},
        "DQN with composable components: double, dueling, prioritized, n_steps (rlaudit)",
    ),
    (
        "DoubleDQN",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"double": True},
        "Double DQN: online net selects, target net evaluates (van Hasselt et al. 2016; rlaudit)",
    ),
    (
        "DuelingDQN",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"dueling": True},
        "Dueling DQN: value + mean-subtracted advantage streams (Wang et al. 2016; rlaudit)",
    ),
    (
        "PrioritizedDQN",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"prioritized": True},
        "DQN with proportional prioritized replay (Schaul et al. 2016; rlaudit)",
    ),
    (
        "QRDQN",
        "rlaudit.algorithms.dqn_family:QRDQN",
        _DISCRETE,
        {},
        "Quantile-regression DQN (Dabney et al. 2018; sb3-contrib), n_quantiles as a hyperparameter",
    ),
    (
        "C51",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"distributional": "c51"},
        "Categorical DQN, 51 atoms on [v_min, v_max] (Bellemare et al. 2017; rlaudit)",
    ),
    (
        "IQN",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"distributional": "iqn"},
        "Implicit quantile networks, N = N' = 64, K = 32 (Dabney et al. 2018; rlaudit)",
    ),
    (
        "NoisyDQN",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"noisy": True, "exploration_initial_eps": 0.0, "exploration_final_eps": 0.0},
        "DQN with factorised-Gaussian noisy layers instead of epsilon-greedy (Fortunato et al. 2018; rlaudit)",
    ),
    (
        "Rainbow",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {
            "distributional": "c51", "n_steps": 3, "prioritized": True, "per_alpha": 0.5, "per_beta": 0.4,
            "dueling": True, "double": True, "noisy": True,
            "exploration_initial_eps": 0.0, "exploration_final_eps": 0.0,
        },
        "Rainbow: C51 + 3-step + PER + dueling + double + noisy (Hessel et al. 2018; rlaudit)",
    ),
    (
        "DopamineRainbow",
        "rlaudit.algorithms.dqn_family:DQNFamily",
        _DISCRETE,
        {"distributional": "c51", "n_steps": 3, "prioritized": True, "per_alpha": 0.5, "per_beta": 0.5},
        "Dopamine's Rainbow: C51 + 3-step + PER, epsilon-greedy (Castro et al. 2018; rlaudit)",
    ),
]


JAX_BACKEND_ALGORITHMS: frozenset[str] = frozenset(
    {"DQN", "DQNFamily", "DoubleDQN", "DuelingDQN", "PrioritizedDQN", "QRDQN", "C51", "IQN", "DopamineRainbow"})
"""Built-ins the ``jax`` backend also implements (:mod:`rlaudit.run.backends.jax`): the DQN family without
noisy nets."""


def _register_builtins() -> None:
    for name, ep, spaces, defaults, desc in _BUILTINS:
        kind = "sb3"
        backends = ("sb3", "jax") if name in JAX_BACKEND_ALGORITHMS else ("sb3",)
        register(name, ep, kind=kind, action_spaces=spaces, defaults=defaults, description=desc, backends=backends)


_register_builtins()
