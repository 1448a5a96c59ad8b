"""The example plugin package, installed with pip, used through the registry, the CLI and `rlaudit run`.

The session fixture installs ``examples/rlaudit-plugin-example`` (copied to a temporary folder so the
build leaves nothing in the repository) with ``pip install --no-deps --no-build-isolation`` into the
running interpreter's environment and uninstalls it at the end: the same path a researcher takes.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from rlaudit.algorithms import get_spec, make_agent, registry
from rlaudit.testing import check_algorithm

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "rlaudit-plugin-example"
DIST = "rlaudit-plugin-example"
BIN = Path(sys.executable).parent


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def plugin_installed(tmp_path_factory):
    """pip-install the example plugin for the session; uninstall it afterwards (unless it was there)."""
    already = _pip("show", DIST).returncode == 0
    if not already:
        src = tmp_path_factory.mktemp("plugin") / "rlaudit-plugin-example"
        shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        done = _pip("install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(src))
        if done.returncode != 0:
            pytest.fail(f"pip install of the example plugin failed:\n{done.stdout}\n{done.stderr}")
    importlib.invalidate_caches()
    saved = dict(registry._REGISTRY)
    registry.discover_plugins()  # this process may have read the entry points before the install
    yield
    # Later tests in this session must not see algorithms whose package is gone.
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    if not already:
        _pip("uninstall", "-q", "-y", DIST)
        importlib.invalidate_caches()


def _rlaudit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([str(BIN / "rlaudit"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_entry_points_registered_lazily(plugin_installed):
    for name, kind in (("PolyakDQN", "sb3"), ("HillClimbing", "learner")):
        spec = get_spec(name)
        assert spec.source.startswith(f"plugin {DIST} ({name} = rlaudit_plugin_example.")
        assert spec.kind == kind
        assert spec.action_spaces == frozenset({"discrete"})
    assert get_spec("PolyakDQN").defaults == {"tau": 0.005, "target_update_interval": 1}


def _cli(*args: str):
    """Run the CLI in this process (its registry already discovered the installed plugins)."""
    from click.testing import CliRunner

    from rlaudit.cli import main

    return CliRunner().invoke(main, list(args))


def test_cli_lists_and_shows_plugins(plugin_installed):
    # A fresh process: discovery from the installed metadata, as a user sees it.
    listing = _rlaudit("algorithms")
    assert listing.returncode == 0, listing.stderr
    lines = {line.split()[0]: line for line in listing.stdout.splitlines()[1:]}
    assert "plugin rlaudit-plugin-example (HillClimbing = rlaudit_plugin_example.hill_climbing:HillClimbing)" in lines["HillClimbing"]
    assert lines["HillClimbing"].split()[1:3] == ["learner", "discrete"]
    assert lines["PolyakDQN"].split()[1:3] == ["sb3", "discrete"]
    assert "DQN" in lines and "QRDQN" in lines
    shown = _cli("algorithms", "show", "HillClimbing")
    assert shown.exit_code == 0, shown.output
    assert "entry point:   rlaudit_plugin_example.hill_climbing:HillClimbing" in shown.output
    assert "    noise_scale             0.5" in shown.output
    shown = _cli("algorithms", "show", "PolyakDQN")
    assert "  * tau                      0.005" in shown.output
    bad = _cli("algorithms", "show", "HillClimbin")
    assert bad.exit_code == 2
    assert bad.output.strip() == "error: unknown algorithm 'HillClimbin' (did you mean 'HillClimbing'?); `rlaudit algorithms` lists them"


def test_plugins_pass_the_conformance_kit(plugin_installed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_algorithm("HillClimbing", total_timesteps=150)
        check_algorithm("PolyakDQN", hyperparams={"learning_starts": 50, "buffer_size": 1_000},
                        policy_kwargs={"net_arch": [16]}, total_timesteps=120)


def test_plugin_learner_through_make_agent(plugin_installed):
    import gymnasium as gym

    agent = make_agent("HillClimbing", gym.make("CartPole-v1"), {"noise_scale": 0.3}, seed=0)
    agent.train(500)
    assert agent.get_params() == {"noise_scale": 0.3, "episodes_per_candidate": 1}


PROTOCOL = """
schema_version = 1
name = "plugin-smoke"
title = "Plugin smoke test: an SB3 plugin and a learner plugin next to DQN"
seeds = 2

[budget]
unit = "env_steps"

[regimes]
low = 300
high = 600

[[tasks]]
id = "CartPole-v1"
suite = "gymnasium"

[[algorithms]]
name = "HillClimbing"
hyperparams = { noise_scale = 0.5 }

[[algorithms]]
name = "PolyakDQN"
hyperparams = { learning_starts = 100, buffer_size = 2_000 }
policy_kwargs = { net_arch = [32] }

[evaluation]
n_eval_episodes = 2
deterministic = true
"""


def test_protocol_with_both_plugins_runs(plugin_installed, tmp_path):
    pytest.importorskip("rlaudit.cli.run_cmd", reason="`rlaudit run` (protocol engine) not available yet")
    protocol = tmp_path / "plugin-smoke.toml"
    protocol.write_text(PROTOCOL)
    store = tmp_path / "store.sqlite"
    ran = _rlaudit("run", str(protocol), "--store", str(store), "--workers", "1", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    exported = _rlaudit("export", str(store), "-o", str(tmp_path / "scores.csv"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    scores = pd.read_csv(tmp_path / "scores.csv", comment="#")
    assert set(scores["algorithm"]) == {"HillClimbing", "PolyakDQN"}
    assert set(scores["budget"]) >= {300, 600}
    assert scores.groupby("algorithm")["run"].nunique().to_dict() == {"HillClimbing": 2, "PolyakDQN": 2}
    assert scores["score"].notna().all()


def test_broken_plugin_does_not_break_the_cli(plugin_installed, tmp_path):
    """A second installed package whose entry point cannot import: listed as unloadable, the rest works."""
    pkg = tmp_path / "broken"
    (pkg / "src" / "broken_rl_plugin").mkdir(parents=True)
    (pkg / "src" / "broken_rl_plugin" / "__init__.py").write_text("raise ImportError('missing jax')\n")
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "broken-rl-plugin"\nversion = "0.0.1"\n'
        '[project.entry-points."rlaudit.algorithms"]\nBrokenAlgo = "broken_rl_plugin:Algo"\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    done = _pip("install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(pkg))
    assert done.returncode == 0, done.stderr
    saved = dict(registry._REGISTRY)
    try:
        importlib.invalidate_caches()
        registry.discover_plugins()
        listing = _cli("algorithms")
        assert listing.exit_code == 0, listing.output
        broken = next(line for line in listing.output.splitlines() if line.startswith("BrokenAlgo"))
        assert "cannot load" in broken and "ImportError: missing jax" in broken
        shown = _cli("algorithms", "show", "BrokenAlgo")
        assert shown.exit_code == 2
        assert shown.output.strip() == (
            "error: algorithm 'BrokenAlgo' from plugin broken-rl-plugin (BrokenAlgo = broken_rl_plugin:Algo): "
            "cannot import 'broken_rl_plugin:Algo': ImportError: missing jax"
        )
        assert _cli("algorithms", "show", "HillClimbing").exit_code == 0
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
        _pip("uninstall", "-q", "-y", "broken-rl-plugin")
