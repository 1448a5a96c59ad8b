"""Type and range checks of a protocol's hyperparameters and ``policy_kwargs``, before anything trains.

Generic over the registry: the expected type of a hyperparameter is read from the algorithm class's
constructor annotations (following ``**kwargs`` up the MRO, see
:func:`~rlaudit.algorithms.contract.keyword_parameters`), so SB3 classes, the DQN family, later additions
and plugins are all checked the same way. A parameter without an annotation is checked against the type of
its default. ``policy_kwargs`` are checked against the SB3 policy class's constructor the same way. On top
of types, :data:`RANGES` states the valid range of common stable-baselines3 hyperparameters (a negative
``n_steps`` is an ``int`` but no less wrong).

A protocol is TOML: it can hold numbers, strings, booleans, arrays and tables, never a class or a function.
rlaudit does not import names written in a protocol, so a parameter that wants a class (``activation_fn``,
``replay_buffer_class``) cannot be set from a protocol and is refused here rather than by the constructor on
every run of the sweep.
"""

from __future__ import annotations

import collections.abc
import inspect
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from rlaudit.algorithms.contract import NOT_HYPERPARAMS, keyword_parameters
from rlaudit.errors import InputError, did_you_mean

# Valid values of common stable-baselines3 hyperparameters, where the annotation alone (``int``, ``float``)
# allows nonsense. Applied to numbers only: ``learning_rate`` may also be a schedule, ``ent_coef`` "auto".
RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    **{name: ("at least 1", lambda v: v >= 1) for name in (
        "n_steps", "batch_size", "n_epochs", "buffer_size", "target_update_interval", "n_quantiles", "n_critics",
        "policy_delay", "n_envs", "train_freq", "n_atoms", "n_cosines", "n_tau_samples")},
    **{name: ("at least 0", lambda v: v >= 0) for name in (
        "learning_starts", "ent_coef", "vf_coef", "target_policy_noise", "target_noise_clip", "action_noise_std")},
    **{name: ("in [0, 1]", lambda v: 0 <= v <= 1) for name in (
        "gamma", "gae_lambda", "tau", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps",
        "prioritized_alpha", "prioritized_beta")},
    **{name: ("greater than 0", lambda v: v > 0) for name in (
        "learning_rate", "clip_range", "clip_range_vf", "max_grad_norm", "target_kl", "learning_rate_critic")},
    "gradient_steps": ("-1 (as many as env steps) or at least 0", lambda v: v >= -1),
}

# Hyperparameters for which ``inf`` (TOML ``inf``) means "none": no gradient clipping.
INFINITE_OK = frozenset({"max_grad_norm"})

# Constructor parameters of an SB3 policy that rlaudit (SB3) fills in, not the protocol.
POLICY_PLUMBING = frozenset({"self", "observation_space", "action_space", "lr_schedule"})

# ``policy_kwargs`` tables handed to a class the policy builds: key -> (the policy parameter naming that
# class, the class's parameters that SB3 fills in). SB3 passes the learning rate to the optimizer itself, so
# an ``lr`` here would be given twice.
NESTED_KWARGS: dict[str, tuple[str, frozenset[str]]] = {
    "optimizer_kwargs": ("optimizer_class", frozenset({"self", "params", "lr"})),
    "features_extractor_kwargs": ("features_extractor_class", frozenset({"self", "observation_space"})),
}


def annotated_parameters(cls: type, exclude: frozenset[str] = NOT_HYPERPARAMS
                         ) -> tuple[dict[str, inspect.Parameter], bool]:
    """:func:`~rlaudit.algorithms.contract.keyword_parameters` with string annotations evaluated."""
    params, closed = keyword_parameters(cls, exclude)
    return {name: _resolved(p, klass) for name, (p, klass) in params.items()}, closed


def _resolved(p: inspect.Parameter, klass: type) -> inspect.Parameter:
    """``p`` with a string annotation (``from __future__ import annotations``) evaluated where possible."""
    ann = p.annotation
    if isinstance(ann, str):
        namespace = {**vars(typing), **vars(sys.modules.get(klass.__module__, types.ModuleType("m")))}
        try:
            ann = eval(ann, namespace)  # noqa: S307 - an annotation of an installed class, not user text
        except Exception:  # noqa: BLE001 - a name only imported under TYPE_CHECKING: leave it unchecked
            ann = Any
    return p.replace(annotation=ann)


def accepts(annotation: Any, value: Any) -> bool:
    """Whether a TOML ``value`` can be the value of a parameter annotated ``annotation``.

    Unknown typing constructs accept anything (the constructor has the last word); ``type[...]`` and
    callables accept nothing, since TOML cannot hold them.
    """
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, (typing.TypeVar,
                                                                                             typing.ForwardRef)):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(accepts(a, value) for a in args)
    if origin is typing.Literal:
        return value in args
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin is type or annotation is type or origin is collections.abc.Callable:
        return False
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        return isinstance(value, list) and all(accepts(args[0], v) for v in value) if args else isinstance(value, list)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(accepts(args[0], v) for v in value)
        return not args or (len(args) == len(value) and all(accepts(a, v) for a, v in zip(args, value)))
    if origin in (dict, collections.abc.Mapping):
        return isinstance(value, dict) and (not args or all(accepts(args[0], k) and accepts(args[1], v)
                                                             for k, v in value.items()))
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def describe(annotation: Any) -> str:
    """``int | None`` -> ``"an integer"``: the values a protocol can write for ``annotation``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        parts = [describe(a) for a in args if a is not type(None)]
        parts = [p for p in dict.fromkeys(parts) if p]
        return " or ".join(parts)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is type or annotation is type:
        return ""  # cannot be written in TOML; said separately
    if origin is collections.abc.Callable:
        return ""
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "an array",
             tuple: "an array", dict: "a table"}
    if annotation in names:
        return names[annotation]
    if origin in (list, collections.abc.Sequence, tuple):
        inner = describe(args[0]) if args and args[0] is not Ellipsis else ""
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return "an array [" + ", ".join(describe(a) or "?" for a in args) + "]"
        return "an array" + (f" of {_plural(inner)}" if inner else "")
    if origin in (dict, collections.abc.Mapping):
        return "a table" + (f" of {_plural(describe(args[1]))}" if args and describe(args[1]) else "")
    return getattr(annotation, "__name__", str(annotation))


def _plural(what: str) -> str:
    for one, many in (("an array", "arrays"), ("a table", "tables")):
        if what.startswith(one):
            return many + what[len(one):]
    return {"an integer": "integers", "a number": "numbers", "a string": "strings",
            "true or false": "booleans"}.get(what, what)


def _expected(p: inspect.Parameter) -> Any:
    """The annotation to check against; without one, the type of the default (numbers: any number)."""
    if p.annotation is not inspect.Parameter.empty:
        return p.annotation
    d = p.default
    if isinstance(d, bool):
        return bool
    if isinstance(d, (int, float)):
        return float | list  # unannotated numbers: schedules as lists stay the learner's business
    return inspect.Parameter.empty


def _check_type(name: str, p: inspect.Parameter, value: Any, where: str, owner: str) -> None:
    at = f"{where}.{name}"
    if isinstance(value, float) and not math.isfinite(value) and not (value == math.inf and name in INFINITE_OK):
        raise InputError(f"{at}: must be a finite number for {owner}, got {value!r}")
    expected = _expected(p)
    if not accepts(expected, value):
        what = describe(expected)
        if not what:
            raise InputError(f"{at}: {owner} expects a Python class or function here, which a protocol cannot "
                             f"give (got {value!r}); leave it at its default")
        raise InputError(f"{at}: expected {what} for {owner}, got {value!r}")


def _check_range(name: str, value: Any, where: str, owner: str) -> None:
    if name == "net_arch":
        _check_net_arch(value, where, owner)
        return
    if name == "ent_coef" and isinstance(value, str):
        _check_ent_coef(value, where, owner)
        return
    rule = RANGES.get(name)
    if rule is None:
        return
    numbers = [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
    if name == "train_freq" and isinstance(value, list) and value and isinstance(value[0], int):
        numbers = [value[0]]  # (frequency, unit)
    for v in numbers:
        if not rule[1](v):
            raise InputError(f"{where}.{name}: must be {rule[0]} for {owner}, got {value!r}")


def _check_net_arch(value: Any, where: str, owner: str) -> None:
    """Layer sizes of ``net_arch`` (``[64, 64]`` or ``{pi = [64], vf = [64]}``) must be positive integers: torch
    refuses a layer of -1 units, and one of 0 units trains a network that outputs constants."""
    layers = [v for part in value.values() for v in (part if isinstance(part, list) else [part])] \
        if isinstance(value, dict) else value if isinstance(value, list) else []
    bad = next((v for v in layers if isinstance(v, bool) or not isinstance(v, int) or v < 1), None)
    if bad is not None:
        raise InputError(f"{where}.net_arch: layer sizes must be integers of at least 1 for {owner}, got {bad!r} "
                         f"in {value!r}")


def _check_ent_coef(value: str, where: str, owner: str) -> None:
    """A string ``ent_coef`` (SAC, TQC, CrossQ): ``"auto"`` (learned, from 1.0), ``"auto_<initial value>"``
    with an initial value above 0, or a number written as a string. SB3 finds out only when the model is built,
    with ``float()`` of the part after ``_``."""
    text = value[len("auto_"):] if value.startswith("auto_") else value
    try:
        number = float(text) if value != "auto" else 1.0
    except ValueError:
        number = math.nan
    least_ok = 0.0 if text is value else math.ulp(0.0)  # the initial value of a learned coefficient must be > 0
    if not (math.isfinite(number) and number >= least_ok):
        raise InputError(f"{where}.ent_coef: {value!r} is not an entropy coefficient for {owner}; write 'auto', "
                         f"'auto_<initial value above 0>' (e.g. 'auto_0.1') or a number of at least 0")


def _check_nested_kwargs(name: str, value: Any, params: Mapping[str, inspect.Parameter], where: str,
                         owner: str) -> None:
    """Keys of ``optimizer_kwargs`` / ``features_extractor_kwargs`` against the class they are passed to (the
    policy's default ``optimizer_class`` / ``features_extractor_class``: a protocol cannot name another)."""
    if name not in NESTED_KWARGS or not isinstance(value, dict) or not value:
        return
    class_param, plumbing = NESTED_KWARGS[name]
    target = params[class_param].default if class_param in params else None
    if not isinstance(target, type):
        return
    known, closed = annotated_parameters(target, exclude=plumbing)
    for key, v in value.items():
        if key not in known:
            if not closed:
                continue
            why = "; SB3 sets the learning rate itself (use the 'learning_rate' hyperparameter)" if key == "lr" else \
                (f"; known keys: {', '.join(sorted(known))}" if known else "; it takes none")
            raise InputError(f"{where}.{name}: unknown key {key!r} for {target.__name__} ({owner})"
                             f"{did_you_mean(key, known)}{why}")
        _check_type(key, known[key], v, f"{where}.{name}", f"{target.__name__} ({owner})")


def check_combinations(cls: type, hp: Mapping[str, Any], where: str, owner: str) -> None:
    """Constraints between hyperparameters that SB3 asserts only when the model is built (on every run).

    Advantage normalisation (``normalize_advantage``, PPO's default) divides by the standard deviation of a
    minibatch and of the rollout, which a single sample does not have: SB3 asserts ``batch_size > 1`` and
    ``n_steps * n_envs > 1`` (rlaudit trains on one environment, so ``n_steps >= 2``).

    Args:
        cls: the algorithm class.
        hp: the effective hyperparameters (class defaults, registry defaults, then the protocol's).
        where: e.g. ``"quickstart.toml: algorithms[2].hyperparams"``.
        owner: the algorithm's registry name, for messages.
    """
    params, _ = annotated_parameters(cls)
    if "normalize_advantage" not in params or hp.get("normalize_advantage") is not True:
        return
    for name in ("batch_size", "n_steps"):
        v = hp.get(name)
        if name in params and isinstance(v, int) and not isinstance(v, bool) and v < 2:
            raise InputError(f"{where}.{name}: must be at least 2 for {owner!r} with normalize_advantage = true "
                             f"(normalising the advantages of a single sample gives NaN; SB3 refuses it when "
                             f"each run starts), got {v}; or set normalize_advantage = false")


def check_types(cls: type, hp: Mapping[str, Any], where: str, owner: str) -> None:
    """Check each hyperparameter's value against the annotation of ``cls``'s constructor (names are
    checked by the registry), and ``policy`` against the class's ``policy_aliases``.

    Args:
        cls: the algorithm class.
        hp: hyperparameters as written in the protocol.
        where: e.g. ``"quickstart.toml: algorithms[2].hyperparams"``.
        owner: the algorithm's registry name, for messages.

    Raises:
        InputError: ``"<where>.<name>: expected <type> for '<owner>', got …"``.
    """
    params, _ = annotated_parameters(cls)
    for name, value in hp.items():
        if name in params:
            _check_type(name, params[name], value, where, repr(owner))
    aliases = getattr(cls, "policy_aliases", None)
    policy = hp.get("policy")
    if isinstance(aliases, Mapping) and aliases and isinstance(policy, str) and policy not in aliases:
        raise InputError(f"{where}.policy: {policy!r} is not a policy of {owner!r}{did_you_mean(policy, aliases)}; "
                         f"expected one of {', '.join(sorted(aliases))}")


def check_ranges(hp: Mapping[str, Any], where: str, owner: str) -> None:
    """Check well-typed values against :data:`RANGES` (after the class's own ``validate_hyperparams``, whose
    messages are more specific)."""
    for name, value in hp.items():
        _check_range(name, value, where, repr(owner))


def check_hyperparams(cls: type, hp: Mapping[str, Any], where: str, owner: str) -> None:
    """:func:`check_types` then :func:`check_ranges`."""
    check_types(cls, hp, where, owner)
    check_ranges(hp, where, owner)


def check_policy_kwargs(cls: type, policy: Any, policy_kwargs: Mapping[str, Any], where: str, owner: str) -> None:
    """Check ``policy_kwargs`` names and values against the SB3 policy class that will receive them.

    Args:
        cls: the algorithm class (an SB3 algorithm; learners take no ``policy_kwargs``).
        policy: the ``policy`` hyperparameter (``None``: the default ``MlpPolicy``).
        policy_kwargs: as written in the protocol.
        where: e.g. ``"quickstart.toml: algorithms[2].policy_kwargs"``.
        owner: the algorithm's registry name, for messages.

    Raises:
        InputError: naming ``where`` and the key.
    """
    aliases = getattr(cls, "policy_aliases", None)
    if not policy_kwargs or not isinstance(aliases, Mapping) or not aliases:
        return
    policy_cls = aliases.get(policy if isinstance(policy, str) else "MlpPolicy") or next(iter(aliases.values()))
    params, closed = annotated_parameters(policy_cls, exclude=POLICY_PLUMBING)
    if "features_extractor" in policy_kwargs and "features_extractor_class" in params:
        from rlaudit.algorithms.networks import check_features_extractor, features_extractor_class

        check_features_extractor(policy_kwargs, where)
        # its keyword arguments are checked against the named class, not the policy's default one
        params = {**params, "features_extractor_class": params["features_extractor_class"].replace(
            default=features_extractor_class(policy_kwargs["features_extractor"], where))}
    for name, value in policy_kwargs.items():
        if name == "features_extractor" and "features_extractor_class" in params:
            continue
        if name not in params:
            if not closed:
                continue
            raise InputError(f"{where}: unknown key {name!r} for the {policy_cls.__name__} of {owner!r}"
                             f"{did_you_mean(name, params)}; known keys: {', '.join(sorted(params))}")
        _check_type(name, params[name], value, where, f"the {policy_cls.__name__} of {owner!r}")
        _check_range(name, value, where, f"the {policy_cls.__name__} of {owner!r}")
        _check_nested_kwargs(name, value, params, where, f"the {policy_cls.__name__} of {owner!r}")

