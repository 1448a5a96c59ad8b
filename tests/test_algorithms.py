"""Algorithm registry, make_agent adapter, learner protocol and the conformance kit over every built-in."""

from __future__ import annotations

import sys
import types
import warnings

import gymnasium as gym
import numpy as np
import pytest

from rlaudit.algorithms import ACTION_SPACES, get_spec, list_specs, make_agent, register
from rlaudit.algorithms import registry
from rlaudit.algorithms.registry import RegistryWarning, discover_plugins
from rlaudit.errors import InputError
from rlaudit.testing import Subject, check_algorithm, make_subject, parametrize_with_checks

BUILTINS = [
    "PPO", "A2C", "DQN", "SAC", "TD3", "DDPG", "TRPO", "TQC", "ARS", "CrossQ",
    "DQNFamily", "DoubleDQN", "DuelingDQN", "PrioritizedDQN", "QRDQN",
    "C51", "IQN", "NoisyDQN", "Rainbow", "DopamineRainbow",
]

# Tiny settings so that each conformance check trains in well under a second or two.
_OFF = {"learning_starts": 50, "batch_size": 32, "buffer_size": 1_000}
_SMALL = {"net_arch": [32, 32]}
CONFORMANCE = {
    "PPO": ({"n_steps": 64, "batch_size": 32, "n_epochs": 2}, _SMALL),
    "A2C": ({"n_steps": 8}, _SMALL),
    "TRPO": ({"n_steps": 64, "batch_size": 32}, _SMALL),
    "ARS": ({"n_delta": 2}, _SMALL),
    "DQN": (_OFF, _SMALL),
    "DQNFamily": ({**_OFF, "double": True, "dueling": True, "prioritized": True, "n_steps": 3}, _SMALL),
    "DoubleDQN": (_OFF, _SMALL),
    "DuelingDQN": (_OFF, _SMALL),
    "PrioritizedDQN": (_OFF, _SMALL),
    "QRDQN": ({**_OFF, "n_quantiles": 10}, _SMALL),
    "C51": (_OFF, _SMALL),
    "IQN": ({**_OFF, "n_tau": 8, "n_tau_target": 8, "n_tau_act": 4}, _SMALL),
    "NoisyDQN": (_OFF, _SMALL),
    "Rainbow": (_OFF, _SMALL),
    "DopamineRainbow": (_OFF, _SMALL),
    "SAC": (_OFF, _SMALL),
    "TD3": (_OFF, _SMALL),
    "DDPG": (_OFF, _SMALL),
    "TQC": ({**_OFF, "top_quantiles_to_drop_per_net": 1}, {**_SMALL, "n_quantiles": 5, "n_critics": 2}),
    "CrossQ": (_OFF, {"net_arch": {"pi": [32, 32], "qf": [32, 32]}}),
}


@pytest.fixture
def clean_registry():
    """Let a test register and discover algorithms without leaking them into other tests."""
    saved = dict(registry._REGISTRY)
    saved_flag = registry._PLUGINS_LOADED
    yield registry
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    registry._PLUGINS_LOADED = saved_flag


# --- registry -------------------------------------------------------------------------------------------


def test_builtins_registered_with_sources_and_action_spaces():
    names = [s.name for s in list_specs()]
    assert names[: len(BUILTINS)] == BUILTINS
    assert set(CONFORMANCE) == set(BUILTINS)
    assert get_spec("PPO").entry_point == "stable_baselines3:PPO"
    assert get_spec("PPO").action_spaces == frozenset(ACTION_SPACES)
    assert get_spec("DQN").action_spaces == frozenset({"discrete"})
    assert get_spec("SAC").action_spaces == frozenset({"box"})
    assert get_spec("DoubleDQN").defaults == {"double": True}
    assert all(s.source == "built-in" and s.kind == "sb3" for s in list_specs() if s.name in BUILTINS)


def test_unknown_name_suggests():
    with pytest.raises(InputError, match=r"unknown algorithm 'PP0' \(did you mean 'PPO'\?\)"):
        get_spec("PP0")
    with pytest.raises(InputError, match=r"did you mean 'DoubleDQN'"):
        get_spec("DoubleDQM")


def test_supports_action_space():
    assert get_spec("DQN").supports(gym.spaces.Discrete(3))
    assert not get_spec("DQN").supports(gym.spaces.Box(-1, 1, (2,)))
    assert get_spec("SAC").supports(gym.spaces.Box(-1, 1, (2,)))
    assert get_spec("PPO").supports(gym.spaces.MultiDiscrete([2, 3]))
    assert get_spec("PPO").supports(gym.spaces.MultiBinary(4))


def test_check_hyperparams_names_where_and_suggests():
    where = "p.toml: algorithms[1].hyperparams"
    get_spec("PPO").check_hyperparams({"learning_rate": 1e-3, "n_steps": 64}, where)
    with pytest.raises(InputError) as exc:
        get_spec("PPO").check_hyperparams({"learning_rat": 1e-3}, where)
    assert str(exc.value) == (
        f"{where}: unknown hyperparameter 'learning_rat' for algorithm 'PPO' (did you mean 'learning_rate'?)"
    )
    with pytest.raises(InputError, match=r"hyperparams\.double: expected true or false"):
        get_spec("DQNFamily").check_hyperparams({"double": "yes"}, where)
    with pytest.raises(InputError, match="expected a number"):
        get_spec("DQN").check_hyperparams({"gamma": True}, where)
    with pytest.raises(InputError, match=r"hyperparams\.learning_rate: expected a number for 'PPO', got '3e-4'"):
        get_spec("PPO").check_hyperparams({"learning_rate": "3e-4"}, where)
    get_spec("DQN").check_hyperparams({"train_freq": [4, "step"]}, where)  # SB3 takes (n, unit) too
    with pytest.raises(InputError, match="'policy_kwargs' is a field of its own"):
        get_spec("DQN").check_hyperparams({"policy_kwargs": {}}, where)
    # Plumbing is not a hyperparameter.
    with pytest.raises(InputError, match="unknown hyperparameter 'seed'"):
        get_spec("DQN").check_hyperparams({"seed": 3}, where)


def test_register_twice_warns(clean_registry):
    register("Mine", "stable_baselines3:PPO", kind="sb3", action_spaces=["discrete"])
    with pytest.warns(RegistryWarning, match=r"'Mine' registered twice: 'stable_baselines3:A2C' .* replaces 'stable_baselines3:PPO'"):
        register("Mine", "stable_baselines3:A2C")
    assert get_spec("Mine").entry_point == "stable_baselines3:A2C"


# --- plugins through (fake) entry points; the real package is tested in test_plugins.py --------------------


def _ep(name: str, value: str, dist: str):
    return types.SimpleNamespace(name=name, value=value, dist=types.SimpleNamespace(name=dist))


def test_plugin_that_does_not_import_names_package_and_entry_point(clean_registry):
    discover_plugins([_ep("Broken", "no_such_module_xyz:Algo", "broken-plugin")])
    spec = get_spec("Broken")  # discovery reads metadata only: no import yet
    assert spec.is_plugin
    with pytest.raises(InputError) as exc:
        spec.load()
    assert str(exc.value) == (
        "algorithm 'Broken' from plugin broken-plugin (Broken = no_such_module_xyz:Algo): cannot import "
        "'no_such_module_xyz:Algo': ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )
    # The other algorithms are unaffected.
    agent = make_agent("DQN", gym.make("CartPole-v1"), {"learning_starts": 10}, seed=0)
    agent.train(20)


def test_plugin_class_neither_sb3_nor_learner_says_what_is_missing(clean_registry):
    discover_plugins([_ep("NotAnAlgo", "collections:OrderedDict", "odd-plugin")])
    with pytest.raises(InputError) as exc:
        get_spec("NotAnAlgo").load()
    msg = str(exc.value)
    assert "from plugin odd-plugin (NotAnAlgo = collections:OrderedDict)" in msg
    assert "is neither a stable-baselines3 BaseAlgorithm subclass nor a learner: missing learn, predict, " \
        "get_params, __init__ argument 'env', __init__ argument 'seed'" in msg


def test_plugin_entry_point_not_a_class(clean_registry):
    discover_plugins([_ep("Fn", "os.path:join", "fn-plugin")])
    with pytest.raises(InputError, match=r"entry point 'os.path:join' must name a class"):
        get_spec("Fn").load()


@pytest.mark.parametrize("order", [0, 1])
def test_two_packages_same_name_warns_and_first_distribution_wins(clean_registry, order):
    eps = [_ep("Twin", "stable_baselines3:A2C", "zeta-rl"), _ep("Twin", "stable_baselines3:PPO", "Alpha_RL")]
    if order:
        eps.reverse()
    with pytest.warns(RegistryWarning) as rec:
        discover_plugins(eps)
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "plugin Alpha_RL (Twin = stable_baselines3:PPO)" in msg and "plugin zeta-rl (Twin = stable_baselines3:A2C)" in msg
    assert get_spec("Twin").entry_point == "stable_baselines3:PPO"


def test_plugin_cannot_replace_builtin(clean_registry):
    with pytest.warns(RegistryWarning, match=r"'PPO' is registered by built-in and by plugin evil .*built-in wins"):
        discover_plugins([_ep("PPO", "stable_baselines3:A2C", "evil")])
    assert get_spec("PPO").entry_point == "stable_baselines3:PPO"


def test_plugin_metadata_from_class_attributes(clean_registry, monkeypatch):
    module = types.ModuleType("tiny_rl_plugin")
    module.TinyLearner = TinyLearner
    monkeypatch.setitem(sys.modules, "tiny_rl_plugin", module)
    discover_plugins([_ep("Tiny", "tiny_rl_plugin:TinyLearner", "tiny")])
    spec = get_spec("Tiny")
    assert spec.kind == "learner"
    assert spec.action_spaces == frozenset({"discrete"})
    assert spec.description == "Always pushes the same way (test learner)."
    assert spec.defaults == {"action": 1}


# --- make_agent -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "env_id", "hp"),
    [
        ("PPO", "CartPole-v1", {"n_steps": 32, "batch_size": 16, "n_epochs": 1}),
        ("A2C", "CartPole-v1", {}),
        ("DQN", "CartPole-v1", {"learning_starts": 20}),
        ("SAC", "Pendulum-v1", {"learning_starts": 20}),
        ("TD3", "Pendulum-v1", {"learning_starts": 20}),
    ],
)
def test_make_agent_trains_with_per_step_callback(name, env_id, hp):
    env = gym.make(env_id)
    agent = make_agent(name, env, hp, seed=3, policy_kwargs={"net_arch": [16]})
    seen = []
    agent.train(40, seen.append)
    assert seen[:3] == [1, 2, 3] and seen[-1] >= 40
    assert np.all(np.diff(seen) == 1)
    action = agent.predict(env.reset(seed=0)[0])
    assert env.action_space.contains(np.asarray(action).astype(env.action_space.dtype) if env_id == "Pendulum-v1" else int(action))
    params = agent.get_params()
    assert params["policy"] == "MlpPolicy" and params["policy_kwargs"] == {"net_arch": [16]}
    assert params["device"] == "cpu"


def test_make_agent_rejects_unsupported_action_space():
    with pytest.raises(InputError, match=r"algorithm 'DQN' does not support box action spaces \(supports discrete\)"):
        make_agent("DQN", gym.make("Pendulum-v1"), {}, seed=0)


def test_make_agent_turns_constructor_errors_into_input_errors():
    with pytest.raises(InputError, match=r"algorithm 'PrioritizedDQN' hyperparams: PrioritizedDQN: per_beta must be a number in \[0, 1\], got 1.5"):
        make_agent("PrioritizedDQN", gym.make("CartPole-v1"), {"per_beta": 1.5}, seed=0)


def test_default_policy_is_cnn_for_images():
    from rlaudit.algorithms.adapter import _default_policy
    from stable_baselines3 import DQN

    image = gym.spaces.Box(0, 255, (84, 84, 4), dtype=np.uint8)
    flat = gym.spaces.Box(0.0, 1.0, (10, 10, 4), dtype=np.float32)
    minatar = gym.spaces.Box(0, 1, (10, 10, 4), dtype=np.uint8)  # rlaudit's MinAtar observation: not an image
    assert _default_policy(DQN, image) == "CnnPolicy"
    assert _default_policy(DQN, flat) == "MlpPolicy"
    assert _default_policy(DQN, minatar) == "MlpPolicy"


# --- the learner protocol -----------------------------------------------------------------------------------


class TinyLearner:
    """Always pushes the same way (test learner)."""

    rlaudit_action_spaces = ("discrete",)
    rlaudit_defaults = {"action": 1}

    def __init__(self, env, *, seed: int, action: int = 0, noise: float = 0.0):
        self.env = env
        self.seed = seed
        self.action = action
        self.noise = noise

    def learn(self, total_timesteps, callback=None):
        rng = np.random.default_rng(self.seed)
        self.env.reset(seed=int(rng.integers(2**31)))
        for t in range(1, total_timesteps + 1):
            _, _, terminated, truncated, _ = self.env.step(self.action)
            if terminated or truncated:
                self.env.reset()
            if callback is not None and callback(t) is False:
                break
        return self

    def predict(self, obs, deterministic=True):
        return self.action

    def get_params(self):
        return {"action": self.action, "noise": self.noise}


def test_learner_through_make_agent():
    agent = make_agent(make_subject(TinyLearner).spec, gym.make("CartPole-v1"), {"noise": 0.5}, seed=1)
    seen = []
    agent.train(30, lambda n: seen.append(n) or n < 10)
    assert seen == list(range(1, 11))
    assert agent.get_params() == {"action": 1, "noise": 0.5}  # rlaudit_defaults applies
    assert agent.predict(np.zeros(4)) == 1
    with pytest.raises(InputError, match="policy_kwargs apply to stable-baselines3 algorithms only"):
        make_agent(make_subject(TinyLearner).spec, gym.make("CartPole-v1"), {}, seed=1, policy_kwargs={"a": 1})


def test_learner_with_var_kwargs_is_rejected():
    class Loose(TinyLearner):
        def __init__(self, env, *, seed, **kwargs):
            pass

    with pytest.raises(InputError, match=r"missing explicit keyword hyperparameters in __init__ \(found \*\*kwargs\)"):
        make_subject(Loose)


def test_conformance_kit_passes_learner_and_catches_a_nondeterministic_one():
    check_algorithm(TinyLearner, total_timesteps=50)

    class Moody(TinyLearner):
        """Ignores its seed."""

        draws = iter(range(10**6))

        def predict(self, obs, deterministic=True):
            return next(self.draws) % 2

    with pytest.raises(AssertionError, match=r"check_same_seed_same_returns: AssertionError: same seed, different evaluation returns"):
        check_algorithm(Moody, total_timesteps=20)


# --- conformance kit over every built-in ---------------------------------------------------------------------


def _subjects():
    for name in BUILTINS:
        hp, pk = CONFORMANCE[name]
        continuous = "box" in get_spec(name).action_spaces and "discrete" not in get_spec(name).action_spaces
        yield make_subject(name, hp, pk, total_timesteps=120 if continuous else 160)


@parametrize_with_checks(list(_subjects()))
def test_builtin_conformance(algorithm: Subject, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(algorithm)
