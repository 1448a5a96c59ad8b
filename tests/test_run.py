"""The run engine: one uninterrupted run per nested budget set, determinism, failures, kill -9 and Ctrl-C.

Every training run here is tiny (a few hundred CartPole steps); the whole file is meant to take well under
two minutes on two busy cores.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.protocol import parse_protocol, plan
from rlaudit.run.envs import make_env
from rlaudit.run.runner import evaluate, execute_run
from rlaudit.run.spec import EvalSpec, RunSpec

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Runs record measured steps/s in the user's cache; tests keep theirs apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

HP = {"PPO": {"n_steps": 64, "batch_size": 32, "n_epochs": 2},
      "DQN": {"learning_starts": 64, "train_freq": 4, "target_update_interval": 100, "buffer_size": 2000,
              "exploration_fraction": 0.5}}


def spec_for(algo: str, budgets: tuple[int, ...], eval_every: int | None = None, seed: int = 3) -> RunSpec:
    text = f"""
schema_version = 1
name = "t"
seeds = [{seed}]
[regimes]
{chr(10).join(f"b{i} = {b}" for i, b in enumerate(budgets))}
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "{algo}"
hyperparams = {{ {", ".join(f"{k} = {v}" for k, v in HP[algo].items())} }}
[evaluation]
n_eval_episodes = 3
{f"eval_every = {eval_every}" if eval_every else ""}
"""
    return plan(parse_protocol(text, "t.toml")).runs[0]


def run_records(spec: RunSpec):
    records = []
    result = execute_run(spec, records.append)
    return records, result


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_nested_run_at_largest_budget_equals_single_run_and_plain_sb3(algo):
    """Evaluations from inside training change nothing: the nested run's evaluation at its largest budget is
    the evaluation of a run evaluated only at the end, and of a plain SB3 learn(total) + evaluate script."""
    nested, res = run_records(spec_for(algo, (128, 256, 512), eval_every=64))
    assert [r.env_steps for r in nested] == [64, 128, 192, 256, 320, 384, 448, 512]
    assert res.env_steps == 512
    single, _ = run_records(spec_for(algo, (512,)))
    assert len(single) == 1
    assert (nested[-1].env_steps, nested[-1].returns, nested[-1].lengths) == \
           (single[0].env_steps, single[0].returns, single[0].lengths)

    # the same experiment written as a plain stable-baselines3 script
    import stable_baselines3
    import torch

    from rlaudit.algorithms import get_spec

    torch.set_num_threads(1)
    spec = spec_for(algo, (512,))
    cls = getattr(stable_baselines3, algo)
    model = cls("MlpPolicy", make_env(spec.task, spec.seed), seed=spec.seed, device="cpu",
                **{**get_spec(algo).defaults, **HP[algo]})
    model.learn(512)

    class Plain:
        def predict(self, obs, deterministic=True):
            return model.predict(obs, deterministic=deterministic)[0]

    returns, lengths = evaluate(Plain(), make_env(spec.task, spec.eval.eval_seed, evaluation=True), spec.eval, 512)
    assert (returns, lengths) == (single[0].returns, single[0].lengths)


def test_same_spec_same_numbers():
    spec = spec_for("PPO", (192, 384))
    a, _ = run_records(spec)
    b, _ = run_records(spec)
    assert [(r.env_steps, r.returns, r.lengths) for r in a] == [(r.env_steps, r.returns, r.lengths) for r in b]
    other, _ = run_records(spec_for("PPO", (192, 384), seed=4))
    assert [r.returns for r in other] != [r.returns for r in a]  # the seed matters


def test_stochastic_and_epsilon_evaluation_do_not_disturb_training():
    import dataclasses

    base = spec_for("PPO", (256,))
    noisy = dataclasses.replace(base, eval=EvalSpec(3, False, 0.2, 64, base.eval.eval_seed))
    plain = dataclasses.replace(base, eval=EvalSpec(3, False, 0.2, None, base.eval.eval_seed))
    a, _ = run_records(noisy)
    b, _ = run_records(plain)
    assert a[-1].returns == b[-1].returns


def test_environment_suites_build():
    from rlaudit.run.spec import TaskSpec

    atari = make_env(TaskSpec("ALE/Pong-v5", "atari"), seed=0)
    obs, _ = atari.reset(seed=1)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert atari.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    minatar = make_env(TaskSpec("MinAtar/Breakout-v1", "minatar"), seed=0)
    obs, _ = minatar.reset(seed=1)
    # Bool -> uint8 0/1 (a quarter of float32's replay memory); SB3 casts it to float, never scales it.
    assert obs.dtype == np.uint8 and obs.shape == (10, 10, 4) and set(np.unique(obs)) <= {0, 1}
    assert minatar.observation_space.dtype == np.uint8 and minatar.observation_space.high.max() == 1
    limited = make_env(TaskSpec("CartPole-v1", max_episode_steps=7), seed=0)
    limited.reset(seed=0)
    n = 0
    while True:
        n += 1
        if any(limited.step(0)[2:4]) or n > 50:
            break
    assert n <= 7


# ------------------------------------------------------------------------------------ failures (in-process)

class _CrashingCartPole(gymnasium.Wrapper):
    def __init__(self, **kwargs):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.n = 0

    def step(self, action):
        self.n += 1
        if self.n > 150:
            raise RuntimeError("simulated environment crash")
        return self.env.step(action)


class _DyingCartPole(_CrashingCartPole):
    def step(self, action):
        self.n += 1
        if self.n > 150:
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
        return self.env.step(action)


gymnasium.register("RlauditTest/Crash-v0", entry_point=_CrashingCartPole)
gymnasium.register("RlauditTest/Die-v0", entry_point=_DyingCartPole)


class _Sink:
    def __init__(self):
        self.events = []

    def started(self, run_id, worker):
        self.events.append(("started", run_id))

    def record(self, rec):
        self.events.append(("record", rec.run_id))

    def finished(self, result):
        self.events.append(("finished", result.run_id))

    def failed(self, run_id, error):
        self.events.append(("failed", run_id, error))

    def restarted(self, run_id, reason):
        self.events.append(("restarted", run_id))


def test_pool_survives_a_worker_killed_mid_run():
    """A worker killed by a signal fails its run; a replacement worker takes the remaining runs."""
    import dataclasses

    from rlaudit.run.executors import LocalExecutor

    good = spec_for("PPO", (128,))
    # "module:id" makes the spawned worker import this file, which registers the dying environment
    dying = dataclasses.replace(good, run_id="dying", budgets=(512,),
                                task=dataclasses.replace(good.task, id=f"{__name__}:RlauditTest/Die-v0"))
    others = [dataclasses.replace(good, run_id=f"good{i}") for i in range(2)]
    sink = _Sink()
    LocalExecutor(workers=2).run([dying, *others], sink)
    failed = [e for e in sink.events if e[0] == "failed"]
    assert [e[1] for e in failed] == ["dying"] and "died (signal 9)" in failed[0][2]
    assert sorted(e[1] for e in sink.events if e[0] == "finished") == ["good0", "good1"]


class _TimedSink(_Sink):
    """Also notes when each run started and ended (monotonic seconds)."""

    def __init__(self):
        super().__init__()
        self.at: dict[tuple[str, str], float] = {}

    def started(self, run_id, worker):
        super().started(run_id, worker)
        self.at["started", run_id] = time.monotonic()

    def finished(self, result):
        super().finished(result)
        self.at["ended", result.run_id] = time.monotonic()

    def failed(self, run_id, error):
        super().failed(run_id, error)
        self.at["ended", run_id] = time.monotonic()


def test_a_batch_of_runs_gets_the_run_timeout_once_per_run(monkeypatch):
    """run_timeout 3 s. A batch of two runs trained together (as a JAX batch's seeds) that takes 4.5 s finishes:
    its limit is 6 s, not one run's 3 s. A batch of two that never ends is stopped at 6 s, each run recorded
    timed out with the batch's limit; a single run keeps its 3 s."""
    from rlaudit.run import backends, executors
    from tests import worker_hooks

    monkeypatch.setitem(backends.BACKENDS, worker_hooks.SLEEPING, "tests.worker_hooks:SleepingBackend")
    monkeypatch.setitem(backends._instances, worker_hooks.SLEEPING, worker_hooks.SleepingBackend())
    monkeypatch.setattr(executors, "_worker_main", worker_hooks.sleeping_backend_worker)
    fast = worker_hooks.sleeping_specs("fast", 2, sleep=4.5)
    stuck = worker_hooks.sleeping_specs("stuck", 2, sleep=3600)
    alone = worker_hooks.sleeping_specs("alone", 1, sleep=3600)
    sink = _TimedSink()
    executors.LocalExecutor(workers=3, run_timeout=3).run([*fast, *stuck, *alone], sink)
    assert sorted(e[1] for e in sink.events if e[0] == "finished") == ["fast0", "fast1"]
    errors = {e[1]: e[2] for e in sink.events if e[0] == "failed"}
    assert sorted(errors) == ["alone0", "stuck0", "stuck1"]
    assert errors["stuck1"].startswith("RunTimedOut: stuck1 ran past the run timeout of 3 s (6 s for its batch of 2 "
                                       "runs trained together); worker w"), errors["stuck1"]
    assert errors["alone0"].startswith("RunTimedOut: alone0 ran past the run timeout of 3 s; worker w")
    took = {r: sink.at["ended", r] - sink.at["started", r] for r in ("stuck0", "alone0")}
    assert 6 <= took["stuck0"] < 30 and 3 <= took["alone0"] < 6, took


def test_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text("""
schema_version = 1
name = "f"
seeds = 1
[regimes]
high = 256
[[tasks]]
id = "RlauditTest/Crash-v0"
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
hyperparams = { n_steps = 64, batch_size = 32, n_epochs = 1 }
[evaluation]
n_eval_episodes = 2
""")
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(main, ["run", str(path), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 1, result.output
    assert "1 of 2 runs failed" in result.stderr
    assert "RuntimeError: simulated environment crash" in result.stderr
    con = sqlite3.connect(store)
    rows = dict(con.execute("SELECT run_id, status FROM runs"))
    assert rows == {"RlauditTest/Crash-v0__PPO__0__nested": "failed", "CartPole-v1__PPO__0__nested": "done"}
    error, = con.execute("SELECT error FROM runs WHERE status='failed'").fetchone()
    assert error.startswith("Traceback") and "simulated environment crash" in error
    # the finished run says what it cost and where: CPU seconds of its process, the driver's machine fingerprint
    cpu, wall, machine = con.execute("SELECT cpu_time, wall_time, machine FROM runs WHERE status='done'").fetchone()
    assert 0 < cpu < 60 and wall > 0 and machine == "machine"
    assert con.execute("SELECT count(*) FROM meta WHERE key='machine'").fetchone()[0] == 1


# ------------------------------------------------------------------------------- kill -9 and Ctrl-C (subprocess)

SWEEP = """
schema_version = 1
name = "killme"
seeds = 2
[regimes]
low = 256
high = 640
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
hyperparams = { n_steps = 64, batch_size = 32, n_epochs = 2 }
[[algorithms]]
name = "DQN"
hyperparams = { learning_starts = 64, buffer_size = 2000 }
[evaluation]
n_eval_episodes = 3
eval_every = 128
"""


def _driver(protocol: Path, store: Path, workers: int, sigint_ignored: bool = False) -> subprocess.Popen:
    """``rlaudit run`` in a child process; ``sigint_ignored``: started as a non-interactive shell's background job
    is (SIGINT ignored on entry)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(protocol.parent / "cache")}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen([sys.executable, "-m", "rlaudit", "run", str(protocol), "--store", str(store),
                             "--workers", str(workers)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True, preexec_fn=ignore)


def _statuses(store: Path) -> dict[str, str]:
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return dict(con.execute("SELECT run_id, status FROM runs"))
        finally:
            con.close()
    except sqlite3.Error:
        return {}


def stored_evaluations(store: Path, timeout: float = 0.2) -> bool:
    """Whether the store at ``store`` (being written by a driver) holds an evaluation yet."""
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=timeout)
        try:
            return con.execute("SELECT count(*) FROM evaluations").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.Error:
        return False


def stop_when(proc: subprocess.Popen, ready, sig: int = signal.SIGKILL, timeout: float = 120.0) -> str:
    """Wait until ``ready()`` (failing if ``proc`` ends first or ``timeout`` seconds pass), send ``sig`` to ``proc``
    and wait for it to end; its stderr (when piped). The exit status is the caller's to check."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "timed out waiting to stop the driver"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return err or ""


def _wait_for(store: Path, proc: subprocess.Popen, done: int, timeout: float = 120.0) -> dict[str, str]:
    """Wait until ``done`` runs are finished and another one is running with an evaluation recorded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        st = _statuses(store)
        running = [r for r, s in st.items() if s == "running"]
        if sum(s == "done" for s in st.values()) >= done and running:
            con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            n = con.execute(f"SELECT COUNT(*) FROM evaluations WHERE run_id IN ({','.join('?' * len(running))})",
                            running).fetchone()[0]
            con.close()
            if n:
                return st
        time.sleep(0.05)
    raise AssertionError(f"timed out: {_statuses(store)}")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmd:
                out.append(int(d.name))
    return out


def _evaluations(store: Path) -> dict[str, list]:
    con = sqlite3.connect(store)
    rows = con.execute("SELECT e.run_id, e.env_steps, e.returns, e.lengths FROM evaluations e "
                       "JOIN runs r USING (run_id) ORDER BY e.run_id, e.env_steps").fetchall()
    statuses = dict(con.execute("SELECT run_id, status FROM runs"))
    con.close()
    out: dict[str, list] = {r: [] for r in statuses}
    for run_id, steps, returns, lengths in rows:
        out[run_id].append((steps, json.loads(returns), json.loads(lengths)))
    return out, statuses


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and SIGKILL")
def test_kill_9_then_resume_equals_uninterrupted(tmp_path):
    protocol = tmp_path / "killme.toml"
    protocol.write_text(SWEEP)
    store = tmp_path / "killed.sqlite"
    proc = _driver(protocol, store, workers=2)
    try:
        before = _wait_for(store, proc, done=1)
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert workers, "the driver had no worker processes"
    time.sleep(1.0)
    assert not [p for p in workers if Path(f"/proc/{p}").exists()
                and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]], \
        "workers outlived the killed driver"
    _, st = _evaluations(store)
    assert "running" in st.values()  # the kill interrupted runs (discarding partial records: test_store.py)
    done_before = {r for r, s in st.items() if s == "done"}
    assert done_before >= {r for r, s in before.items() if s == "done"}

    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert f"{len(done_before)} skipped" in result.stderr and "skipped" in result.stderr

    reference = tmp_path / "reference.sqlite"
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(reference), "--workers", "1"])
    assert result.exit_code == 0, result.output

    resumed, st_resumed = _evaluations(store)
    uninterrupted, st_reference = _evaluations(reference)
    assert set(st_resumed.values()) == {"done"} and set(st_reference.values()) == {"done"}
    assert resumed.keys() == uninterrupted.keys() and len(resumed) == 4
    for run_id in resumed:  # nothing lost, nothing duplicated, same numbers
        assert resumed[run_id] == uninterrupted[run_id], run_id
    con = sqlite3.connect(store)
    attempts = dict(con.execute("SELECT run_id, attempts FROM runs"))
    assert all(attempts[r] == 1 for r in done_before)  # finished runs were not retrained


def _interrupt_after_first_run(tmp_path, sigint_ignored: bool = False) -> tuple[Path, str]:
    """Start the kill-me sweep, send SIGINT once a run is done and another has an evaluation; ``(store, stderr)``
    after checking the exit status 130."""
    protocol = tmp_path / "killme.toml"
    protocol.write_text(SWEEP)
    store = tmp_path / "s.sqlite"
    proc = _driver(protocol, store, workers=1, sigint_ignored=sigint_ignored)
    err = stop_when(proc, lambda: bool(_wait_for(store, proc, done=1)), signal.SIGINT)
    assert proc.returncode == 130, err
    return store, err


def test_ctrl_c_keeps_finished_discards_unfinished(tmp_path):
    store, err = _interrupt_after_first_run(tmp_path)
    assert "interrupted" in err
    evals, st = _evaluations(store)
    assert "running" not in st.values()
    assert any(s == "done" for s in st.values())
    assert all(not evals[r] for r, s in st.items() if s != "done")
    assert all(evals[r] for r, s in st.items() if s == "done")


def test_minatar_uint8_observations_train_exactly_as_float32():
    """Storing MinAtar's 0/1 observations as uint8 changes memory and speed, not a single number."""
    import gymnasium
    import torch as th

    from rlaudit.algorithms import make_agent
    from rlaudit.run.spec import TaskSpec

    uint8_env = make_env(TaskSpec("MinAtar/Breakout-v1", "minatar"), seed=0)
    base = gymnasium.make("MinAtar/Breakout-v1")
    float_env = gymnasium.wrappers.TransformObservation(
        base, lambda o: o.astype(np.float32), gymnasium.spaces.Box(0.0, 1.0, base.observation_space.shape, np.float32))
    float_env.action_space.seed(0)
    hp = {"learning_starts": 100, "buffer_size": 1_000, "batch_size": 16, "train_freq": 1}
    params = []
    for env in (uint8_env, float_env):
        agent = make_agent("DQN", env, hp, seed=3, policy_kwargs={"net_arch": [32]})
        agent.train(400)
        params.append([p.detach().clone() for p in agent.model.policy.parameters()])
    assert agent.model.replay_buffer.observations.dtype == np.float32
    assert all(th.equal(a, b) for a, b in zip(*params))


def test_batched_evaluation_equals_one_episode_at_a_time():
    """Episodes played side by side (one batched predict per step) give the numbers of sequential play,
    ε-greedy coins included: each episode draws from its own streams."""
    from rlaudit.algorithms import make_agent
    from rlaudit.run.runner import can_batch
    from rlaudit.run.spec import TaskSpec

    task = TaskSpec("MinAtar/Breakout-v1", "minatar")
    agent = make_agent("DQN", make_env(task, 0), {"learning_starts": 100, "buffer_size": 1_000}, seed=0,
                       policy_kwargs={"net_arch": [32]})
    agent.train(300)
    calls = []
    predict = agent.predict

    def counting(obs, deterministic=True):
        calls.append(np.shape(obs))
        return predict(obs, deterministic)

    agent.predict = counting
    ev = EvalSpec(n_eval_episodes=5, deterministic=True, epsilon=0.2, eval_seed=77)
    assert can_batch(agent, ev)
    one = evaluate(agent, make_env(task, 77, evaluation=True), ev, steps=300)
    n_sequential = len(calls)
    calls.clear()
    batched = evaluate(agent, [make_env(task, 77, evaluation=True) for _ in range(3)], ev, steps=300)
    assert batched == one
    assert len(calls) < n_sequential and max(c[0] for c in calls) == 3  # really side by side, 3 at a time
    assert evaluate(agent, make_env(task, 77, evaluation=True), ev, steps=600) != one  # draws depend on steps


@pytest.mark.parametrize("name,extra", [
    ("DQN", {}),
    ("QRDQN", {"n_quantiles": 8}),
    ("IQN", {"n_tau": 4, "n_tau_target": 4, "n_tau_act": 4}),
])
def test_precomputed_observation_checks_change_no_number(name, extra):
    """The acting fast path (observation checks answered once) trains and acts exactly as SB3's own path."""
    import torch as th

    from rlaudit.algorithms import make_agent
    from rlaudit.run.runner import precompute_observation_checks
    from rlaudit.run.spec import TaskSpec

    task = TaskSpec("MinAtar/Breakout-v1", "minatar")
    hp = {"learning_starts": 100, "buffer_size": 1_000, "batch_size": 16, "train_freq": 1,
          "exploration_fraction": 0.1, **extra}
    probe = make_env(task, 5).reset(seed=5)[0]
    results = []
    for fast in (False, True):
        agent = make_agent(name, make_env(task, 0), hp, seed=3, policy_kwargs={"net_arch": [32]})
        if fast:
            precompute_observation_checks(agent)
            assert "predict" in vars(agent.model.policy)  # the fast path is really in place
        agent.train(500)
        policy = agent.model.policy
        acts = [policy.predict(probe, deterministic=True)[0], policy.predict(probe[None], deterministic=True)[0]]
        results.append(([p.detach().clone() for p in policy.parameters()], acts))
    (slow_params, slow_acts), (fast_params, fast_acts) = results
    assert all(th.equal(a, b) for a, b in zip(slow_params, fast_params))
    assert all(np.array_equal(a, b) and np.shape(a) == np.shape(b) for a, b in zip(slow_acts, fast_acts))
    with pytest.raises(ValueError, match="Error: Unexpected observation shape"):
        policy.predict(probe[:5], deterministic=True)  # a wrong shape still gets SB3's own message


def test_random_policy_reference_plays_the_evaluation_episodes_with_uniform_actions():
    from rlaudit.run.reference import random_policy_reference
    from rlaudit.run.runner import _derived_seed, episode_seed
    from rlaudit.run.spec import TaskSpec

    task, ev = TaskSpec("CartPole-v1", max_episode_steps=200), EvalSpec(eval_seed=7, n_eval_episodes=3)
    ref = random_policy_reference(task, ev, 6)
    # By hand: episode i is reset with the evaluation's episode seed and samples from its own action stream.
    expected = []
    for i in range(6):
        env = gymnasium.make("CartPole-v1", max_episode_steps=200)
        env.action_space.seed(_derived_seed(7, 3, 0, i))
        env.reset(seed=episode_seed(7, i))
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total, done = total + reward, terminated or truncated
        expected.append(total)
    assert ref.returns == tuple(expected) and ref.task == "CartPole-v1"
    assert len(set(expected)) > 1  # really random episodes, not one replayed
    assert ref.mean == pytest.approx(np.mean(expected))
    assert ref.sem == pytest.approx(np.std(expected, ddof=1) / np.sqrt(6))
    assert random_policy_reference(task, ev, 6) == ref  # same seed, same numbers
    assert random_policy_reference(task, EvalSpec(eval_seed=8), 6).returns != ref.returns
    with pytest.raises(ValueError, match="at least 1"):
        random_policy_reference(task, ev, 0)


def test_reference_scores_script_prints_a_normalization_table_the_audit_accepts(tmp_path):
    import tomllib

    from rlaudit.stats.normalize import parse_normalization
    from rlaudit.store import export_table

    store = REPO / "sweeps" / "quickstart" / "store.sqlite"
    script = [sys.executable, str(REPO / "scripts" / "reference_scores.py"), "protocols/quickstart.toml"]
    out = subprocess.run(script + ["--episodes", "3", "--store", str(store)], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    section = tomllib.loads(out.stdout)["normalization"]
    norm = parse_normalization(section, "printed")
    assert norm.source.startswith("low: the uniformly random policy's mean return over 3 episodes") \
        and "the best algorithm's mean score at 40000 env steps in this sweep" in norm.source
    frame = export_table(store).at_budget(40_000)
    for task in ("CartPole-v1", "Acrobot-v1"):
        best = frame[frame["task"] == task].pivot_table(index="algorithm", values="score", aggfunc="mean").max()
        assert norm.reference_for(task)[1] == pytest.approx(round(float(best.iloc[0]), 3))
    assert -500 <= norm.reference_for("Acrobot-v1")[0] < -400  # a random policy rarely swings up
    assert norm.low_is_random

    # --seeds: the high ends from those seeds' runs alone (a sweep recorded seed by seed fixes its scale early)
    out = subprocess.run(script + ["--episodes", "3", "--store", str(store), "--seeds", "0,2-3"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seeded = parse_normalization(tomllib.loads(out.stdout)["normalization"], "printed")
    assert "at 40000 env steps in this sweep's runs of seed(s) 0, 2, 3 (" in seeded.source \
        and seeded.source.endswith("--seeds 0,2-3)")
    few = frame[frame["run"].isin(["0", "2", "3"])]
    for task in ("CartPole-v1", "Acrobot-v1"):
        best = few[few["task"] == task].groupby("algorithm")["score"].mean().max()
        assert seeded.reference_for(task) == (norm.reference_for(task)[0], pytest.approx(round(float(best), 3)))
    assert seeded.reference_for("Acrobot-v1") != norm.reference_for("Acrobot-v1")  # fewer runs, another mean
    for bad, says in ((["--episodes", "0"], "--episodes: must be at least 1"),
                      (["--episodes", "abc"], "argument --episodes: invalid int value: 'abc'"),
                      (["--store", str(tmp_path / "none.sqlite")], "none.sqlite"),
                      (["--seeds", "0"], "--seeds: only with --store"),
                      (["--store", str(store), "--seeds", "x"], "--seeds: 'x' is not a seed"),
                      (["--store", str(store), "--seeds", "40"],
                       "no finished run of seed(s) 40 at budget 40000 for task(s) Acrobot-v1, CartPole-v1")):
        out = subprocess.run(script + bad, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and out.stdout == "" and says in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def _replay(store: Path, run_id: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(REPO / "scripts" / "replay_run.py"), str(store), run_id], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)


def test_replay_script_retrains_a_run_and_finds_a_changed_number(tmp_path):
    from rlaudit.store.sqlite import record_checksum

    protocol = tmp_path / "replay.toml"
    protocol.write_text(SWEEP.replace("seeds = 2", "seeds = 1").replace('[[algorithms]]\nname = "DQN"\n'
                                                                           'hyperparams = { learning_starts = 64, '
                                                                           'buffer_size = 2000 }\n', ""))
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    run_id = "CartPole-v1__PPO__0__nested"
    out = _replay(store, run_id)
    assert out.returncode == 0 and out.stdout.startswith(f"machine: matches the recorded one\n{run_id}: identical "
                                                         f"(5 evaluations"), out.stderr

    # One return moved by one, re-signed so that only a retrain can tell: the replay must say so.
    con = sqlite3.connect(store)
    steps, returns, lengths, wall = con.execute("SELECT env_steps, returns, lengths, wall_time FROM evaluations "
                                                "WHERE run_id=? ORDER BY env_steps LIMIT 1", (run_id,)).fetchone()
    moved = json.dumps([json.loads(returns)[0] + 1.0] + json.loads(returns)[1:])
    con.execute("UPDATE evaluations SET returns=?, checksum=? WHERE run_id=? AND env_steps=?",
                (moved, record_checksum(run_id, steps, moved, lengths, wall), run_id, steps))
    con.commit()
    con.close()
    out = _replay(store, run_id)
    assert out.returncode == 1 and f"{run_id}: DIFFERENT" in out.stdout
    assert f"at {steps} env steps: stored" in out.stdout

    out = _replay(store, "CartPole-v1__PPO__9__nested")
    assert out.returncode == 2 and out.stdout == "" and "no run 'CartPole-v1__PPO__9__nested'" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("run_id", ["Acrobot-v1__DQN__1__nested", "CartPole-v1__PPO__0__nested",
                                    "CartPole-v1__DQN__2__nested"])
def test_recorded_quickstart_runs_replay_bit_for_bit(run_id):
    """The committed quickstart record still comes out of today's code (~35 s per run); a registry default
    that moved would show here, since defaults are not part of the protocol hash."""
    out = _replay(REPO / "sweeps" / "quickstart" / "store.sqlite", run_id)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ctrl_c_reaches_a_driver_started_with_sigint_ignored(tmp_path):
    """A background job of a non-interactive shell (nohup, CI runners) inherits SIGINT ignored; `kill -INT` must
    still stop the sweep like Ctrl-C."""
    _, err = _interrupt_after_first_run(tmp_path, sigint_ignored=True)
    assert "interrupted" in err


_MALLOC_PATTERN = """
import ctypes, resource, sys
from rlaudit.run.allocator import keep_freed_memory
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, (ctypes.c_void_p,)
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
def step():  # an update's pattern: a few large tensors made, written and dropped
    blocks = [libc.malloc(12 * 2**20) for _ in range(3)]
    for b in blocks:
        ctypes.memset(b, 1, 12 * 2**20)
    for b in blocks:
        libc.free(b)
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _malloc_pattern(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _MALLOC_PATTERN, mode], env={**clean, **env}, capture_output=True,
                         text=True, check=True)
    kept, faults = out.stdout.split()
    return kept, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux's")
def test_keep_freed_memory_stops_page_faults_on_reallocated_blocks():
    """Ten rounds of three 12 MiB blocks written and freed: with glibc's defaults the heap is trimmed and the
    blocks mapped again each round (~90k page faults, each page zeroed by the kernel); after
    keep_freed_memory the same blocks are reused without one fault. A user's own MALLOC_TRIM_THRESHOLD_
    is left alone (the call sets nothing and says so)."""
    _, default = _malloc_pattern("default")
    kept, faults = _malloc_pattern("keep")
    assert kept == "True" and faults < 100, (kept, faults)
    assert default > 30_000, default
    user, faults = _malloc_pattern("keep", MALLOC_TRIM_THRESHOLD_="0")
    assert user == "False" and faults > 30_000, (user, faults)


@pytest.mark.parametrize("workers", [1, 2])
def test_executors_set_the_allocator_before_training(monkeypatch, workers):
    """The inline path (1 worker) and the pool's workers call keep_freed_memory before their first batch:
    a backend that checks it in its own process finishes every run."""
    from rlaudit.run import backends, executors
    from rlaudit.run.allocator import keep_freed_memory
    from tests import worker_hooks

    monkeypatch.setitem(backends.BACKENDS, worker_hooks.SLEEPING, "tests.worker_hooks:AllocatorProbeBackend")
    monkeypatch.setitem(backends._instances, worker_hooks.SLEEPING, worker_hooks.AllocatorProbeBackend())
    monkeypatch.setattr(executors, "_worker_main", worker_hooks.allocator_probe_worker)
    keep_freed_memory.cache_clear()  # this test process may have called it already
    sink = _TimedSink()
    executors.LocalExecutor(workers=workers).run([*worker_hooks.sleeping_specs("a", 1, sleep=0.0),
                                                  *worker_hooks.sleeping_specs("b", 1, sleep=0.0)], sink)
    assert sorted(e[1] for e in sink.events if e[0] == "finished") == ["a0", "b0"], sink.events
