"""What the command line says (issue 20): did-you-mean for commands, a score file named as a protocol, a
misspelt algorithm next to claims, the estimate's rate sources, progress when output is piped, a no-op
resume, and the plugin and conformance-kit messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main

REPO = Path(__file__).parents[1]
QUICKSTART = (REPO / "protocols" / "quickstart.toml").read_text()

TINY = """
schema_version = 1
name = "tiny"
seeds = [0, 1]
[regimes]
low = 256
high = 512
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
hyperparams = { n_steps = 64, batch_size = 32, n_epochs = 1 }
[evaluation]
n_eval_episodes = 2
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Runs record measured steps/s in the user's cache; tests keep theirs apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


# ------------------------------------------------------------------------------ commands and files
@pytest.mark.parametrize("typo, suggestion", [("audti", "'audit'"), ("valdate", "'validate'")])
def test_unknown_command_is_one_line_with_the_closest_command(typo, suggestion):
    res = _cli(typo)
    assert res.exit_code == 2
    assert res.output.startswith(f"error: no such command {typo!r} (did you mean {suggestion}")
    assert res.output.count("\n") == 1 and "Usage" not in res.output


def test_score_table_named_as_a_protocol_is_not_a_protocol_file(tmp_path):
    scores = tmp_path / "scores.csv"
    scores.write_text("algorithm,task,run,budget,score\nPPO,CartPole-v1,0,100,1.5\n")
    res = _cli("validate", str(scores))
    assert res.exit_code == 2
    assert res.output == (f"error: {scores}: not a protocol file (a protocol is a TOML file; this one does not parse "
                          f"as TOML); to audit scores, run 'rlaudit audit {scores}'\n")


def test_binary_store_and_other_toml_are_not_protocol_files(tmp_path):
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"SQLite format 3\x00\xf8\xff\x00")
    res = _cli("validate", str(store))
    assert res.exit_code == 2 and res.output.startswith(f"error: {store}: not a protocol file (")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    res = _cli("validate", str(pyproject))
    assert res.exit_code == 2 and res.output.startswith(f"error: {pyproject}: not a protocol file (top-level keys "
                                                        "project;")


def test_a_toml_protocol_with_a_syntax_error_still_says_so(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text(QUICKSTART + "\nbroken = \n")
    res = _cli("validate", str(bad))
    assert res.exit_code == 2 and res.output.startswith(f"error: {bad}: TOML syntax error")


def test_misspelt_algorithm_is_reported_before_the_claims_that_name_it(tmp_path):
    assert 'name = "DQN"' in QUICKSTART and 'worse = "DQN"' in QUICKSTART
    bad = tmp_path / "p.toml"
    bad.write_text(QUICKSTART.replace('name = "DQN"', 'name = "DQN2"'))
    res = _cli("validate", str(bad))
    assert res.exit_code == 2
    assert res.output.startswith(f"error: {bad}: algorithms[1].name: unknown algorithm 'DQN2' (did you mean 'DQN'"), \
        res.output


# ------------------------------------------------------------------------------ estimates and progress
def _run_piped(protocol: Path, store: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlaudit", "run", str(protocol), "--store", str(store),
                           "--workers", "1"], capture_output=True, text=True, env=env, timeout=300)


def test_piped_run_prints_a_plan_then_a_line_per_run_with_rate_and_eta_and_a_no_op_resume_says_so(tmp_path):
    protocol = tmp_path / "tiny.toml"
    protocol.write_text(TINY)
    store = tmp_path / "store.sqlite"
    first = _run_piped(protocol, store, tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("training 2 of 2 runs, 1,024 env steps; "
                                                                       "estimate about "))
    assert "(steps/s: reference rates, not measured on this machine)" in lines[header]
    done = [line for line in lines if " done   PPO CartPole-v1 seed " in line]
    assert [line.split("]")[0] for line in done] == ["[1/2", "[2/2"]
    assert all(header < lines.index(line) for line in done)
    for line in done:
        assert " steps/s, " in line and " steps/CPU-s)" in line and "; ETA " in line, line
    assert done[-1].endswith("; ETA 0 s")
    assert "1,024 env steps at " in lines[-1] and " CPU-hours, " in lines[-1] and " steps per CPU-second)" in lines[-1]

    again = _run_piped(protocol, store, tmp_path)
    assert again.returncode == 0, again.stderr
    last = again.stderr.splitlines()[-1]
    assert "0 env steps" not in last and "0 steps/s" not in last
    assert last.startswith("0 done, 0 failed, 2 skipped (already done) of 2 runs in ")
    assert "; nothing trained -> " in last
    assert "training " not in again.stderr  # nothing to train: no plan header

    protocol.write_text(TINY.replace("seeds = [0, 1]", "seeds = [0, 1, 2]"))  # a seed more: only it trains
    told = CliRunner().invoke(main, ["validate", str(protocol), "--store", str(store)])
    assert told.exit_code == 0, told.output
    assert (f"store: the protocol changed since {store} was written (hash " in told.output
            and "it plans the store's 2 finished run(s) identically, so 'rlaudit run' keeps them\nvalid" in told.output)
    grown = _run_piped(protocol, store, tmp_path)
    assert grown.returncode == 0, grown.stderr
    assert f"{store}: the protocol changed (hash " in grown.stderr
    assert "and plans its 2 finished run(s) identically: kept" in grown.stderr
    assert f"resuming {store}: 2 of 3 runs already done" in grown.stderr
    assert grown.stderr.splitlines()[-1].startswith("1 done, 0 failed, 2 skipped (already done) of 3 runs in ")


def test_terminal_progress_rows_show_each_run_steps_of_its_budget(tmp_path):
    """In a terminal, each running run's row reads ``steps done/budget`` as progress events arrive."""
    import io

    from rich.console import Console

    from rlaudit.protocol import parse_protocol, plan
    from rlaudit.run.driver import Driver, Summary

    specs = plan(parse_protocol(TINY, "tiny.toml")).runs
    console = Console(file=io.StringIO(), force_terminal=True, width=200)

    class Store:  # the driver's writes are not what this test looks at
        def __getattr__(self, name):
            return lambda *a, **k: None

    driver = Driver(Store(), specs, console, Summary())
    with driver:
        driver.started(specs[0].run_id, "w0")
        driver.progress(specs[0].run_id, 128)
        task = driver._progress.tasks[driver._worker_tasks["w0"]]
        assert task.fields["info"].endswith(f"128/{specs[0].total_steps:,} steps")
        assert (task.completed, task.total) == (128, specs[0].total_steps)


# ------------------------------------------------------------------------------ plugins and the conformance kit
def test_check_algorithm_says_so_when_every_check_passes(capsys):
    from rlaudit.testing import CHECKS, check_algorithm

    line = check_algorithm("PPO", hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1}, total_timesteps=64)
    assert line.startswith(f"PPO passes all {len(CHECKS)} conformance checks on CartPole-v1 (check_construction, ")
    assert capsys.readouterr().out == line + "\n"
    check_algorithm("PPO", hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1}, total_timesteps=64,
                    quiet=True)
    assert capsys.readouterr().out == ""


def test_plugin_that_cannot_import_names_the_protocol_file_and_field(tmp_path):
    from rlaudit.algorithms import registry

    saved = dict(registry._REGISTRY)
    try:
        registry.register("BrokenAlgo", "rlaudit_no_such_module:Algo", source="plugin broken-rl (BrokenAlgo = "
                          "rlaudit_no_such_module:Algo)")
        protocol = tmp_path / "p.toml"
        protocol.write_text(TINY.replace('name = "PPO"', 'name = "BrokenAlgo"').replace(
            "hyperparams = { n_steps = 64, batch_size = 32, n_epochs = 1 }", ""))
        res = _cli("validate", str(protocol))
        assert res.exit_code == 2
        assert res.output == (f"error: {protocol}: algorithms[0].name: algorithm 'BrokenAlgo' from plugin broken-rl "
                              "(BrokenAlgo = rlaudit_no_such_module:Algo): cannot import 'rlaudit_no_such_module:Algo': "
                              "ModuleNotFoundError: No module named 'rlaudit_no_such_module'\n")
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)


def test_package_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    """``license = { text = … }`` makes setuptools print a deprecation banner at every install; an SPDX
    string needs setuptools >= 77 (PEP 639), so the build requirement says so."""
    import tomllib

    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in doc["build-system"]["requires"]


def test_piped_progress_is_never_silent_for_long_while_runs_train(monkeypatch):
    """Piped, a run's progress events print a line (each running run's steps of its budget, then the ETA) once
    :data:`~rlaudit.run.driver.HEARTBEAT_S` has passed since the last line."""
    import io

    from rich.console import Console

    from rlaudit.protocol import parse_protocol, plan
    from rlaudit.run import driver as driver_mod

    specs = plan(parse_protocol(TINY, "tiny.toml")).runs

    class Store:
        def __getattr__(self, name):
            return lambda *a, **k: None

    out = io.StringIO()
    d = driver_mod.Driver(Store(), specs, Console(file=out, force_terminal=False, width=300), driver_mod.Summary())
    with d:
        d.started(specs[0].run_id, "w0")
        d.progress(specs[0].run_id, 64)
        assert out.getvalue() == ""  # within the interval: quiet
        monkeypatch.setattr(driver_mod, "HEARTBEAT_S", 0.0)
        d.progress(specs[0].run_id, 128)
    line = out.getvalue().strip()
    assert line.startswith(f"[0/2] running: PPO CartPole-v1 seed 0 [nested] 128/{specs[0].total_steps:,} steps; ETA ")


@pytest.mark.parametrize("summary,tail", [
    ({"done": 1, "env_steps": 2_000, "wall_time": 4.0, "checkpointed_steps": 1_500},
     "2,000 env steps at 500 steps/s, and 1,500 more kept in checkpoints for the next run -> s.sqlite"),
    ({"interrupted": 2, "resumable": 2, "wall_time": 4.0, "checkpointed_steps": 390_272},
     "no run finished; 390,272 env steps kept in checkpoints for the next run -> s.sqlite"),
    ({"skipped": 2, "wall_time": 0.1}, "nothing trained -> s.sqlite"),
])
def test_the_closing_summary_names_the_steps_that_interrupted_runs_kept_in_checkpoints(summary, tail):
    """A sitting stopped before any run finished still trained: its closing line says how many env steps the
    interrupted runs' checkpoints keep (past where they resumed), not "nothing trained"."""
    import io

    from rich.console import Console

    from rlaudit.run.driver import Summary, print_summary

    out = io.StringIO()
    print_summary(Summary(total=2, **summary), Console(file=out, force_terminal=False, width=400), "s.sqlite")
    assert out.getvalue().rstrip("\n").endswith("; " + tail), out.getvalue()


def test_kept_steps_counts_each_checkpoint_past_where_its_run_resumed(tmp_path):
    import json

    from rlaudit.run.checkpoint import this_machine
    from rlaudit.run.driver import kept_steps

    class Checkpoints:
        directory = tmp_path
        portable = False  # without --resume-on-any-machine, a checkpoint from another machine is not resumed

    here = this_machine()
    for run_id, steps, machine in [("a", 300_000, here), ("b", 120_000, here), ("c", 50_000, here),
                                   ("e", 80_000, "another machine")]:
        (tmp_path / f"{run_id}.json").write_text(json.dumps({"run_id": run_id, "env_steps": steps, "machine": machine}))
        (tmp_path / f"{run_id}.ckpt").write_bytes(b"")
    # a resumed at 250,000 (50,000 kept), b started from scratch (all kept), c not among the interrupted, d has none,
    # e's checkpoint is another machine's, which the next run does not resume
    assert kept_steps(dict.fromkeys(["a", "b", "d", "e"]), Checkpoints(), {"a": 250_000}) == 170_000
    assert kept_steps({"a": None}, Checkpoints(), {"a": 300_000}) == 0  # resumed and stopped before its next checkpoint


JAX_SWEEP = (REPO / "tests" / "data" / "jax_sweep.toml").read_text()
"""A protocol on backend jax: DQN, two seeds, MinAtar Breakout."""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_algorithm_the_backend_cannot_run_is_refused_with_the_backends_that_can(tmp_path, command):
    """NoisyDQN on backend jax: one line naming the algorithm, the backend and the backends that can run it."""
    from tests.test_robustness import one_line_error

    path = tmp_path / "p.toml"
    path.write_text(JAX_SWEEP.replace('name = "DQN"', 'name = "NoisyDQN"'))
    store = tmp_path / "s.sqlite"
    line = one_line_error(CliRunner().invoke(main, [command, str(path), "--store", str(store)]))
    assert line == f"error: {path}: algorithms[0].backend: NoisyDQN has no 'jax' backend; backends that can run it: sb3"
    assert not store.exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_the_jax_backend_without_the_jax_extra_names_the_install(tmp_path, command):
    """JAX not installed (simulated: jax, jaxlib, optax and pgx cannot be imported in a fresh interpreter): one line
    naming the fix, exit 2, no traceback, nothing written."""
    path = tmp_path / "p.toml"
    path.write_text(JAX_SWEEP)
    store = tmp_path / "s.sqlite"
    code = ("import sys; sys.modules.update(dict.fromkeys(('jax', 'jaxlib', 'optax', 'pgx'))); "
            "from rlaudit.cli import main; main(prog_name='rlaudit')")
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code, command, str(path), "--store", str(store)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {path}: algorithms[0].backend: the jax backend needs JAX: pip install 'rlaudit[jax]' (jax, jaxlib, "
        f"optax, pgx); missing here: jax, jaxlib, optax, pgx"], done.stderr
    assert not store.exists()
