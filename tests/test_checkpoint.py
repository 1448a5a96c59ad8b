"""Mid-run checkpoints (rlaudit.run.checkpoint): a run killed part-way resumes from its last checkpoint and gives
the numbers of a run never killed; what may not be resumed is not."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.protocol import parse_protocol, plan
from rlaudit.run.checkpoint import Checkpoints, checkpoint_dir
from rlaudit.run.runner import execute_run
from rlaudit.run.spec import RunSpec
from tests.test_run import stop_when, stored_evaluations

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Runs record measured steps/s in the user's cache; tests keep theirs apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


OFF_POLICY = "learning_starts = 200, train_freq = 4, target_update_interval = 100, buffer_size = 600, batch_size = 16"
HP = {"DQN": OFF_POLICY, "QRDQN": OFF_POLICY, "C51": OFF_POLICY, "IQN": OFF_POLICY,
      "DopamineRainbow": OFF_POLICY, "NoisyDQN": OFF_POLICY, "Rainbow": OFF_POLICY,
      "SAC": "learning_starts = 200, train_freq = 4, buffer_size = 600, batch_size = 16",
      "PPO": "n_steps = 64, batch_size = 32, n_epochs = 2"}


def spec_for(algo: str, task: str = "CartPole-v1", steps: int = 1200, every: int = 300) -> RunSpec:
    text = f"""
schema_version = 1
name = "t"
seeds = [4]
[regimes]
b = {steps}
[[tasks]]
id = "{task}"
{'suite = "minatar"' if task.startswith("MinAtar/") else ""}
[[algorithms]]
name = "{algo}"
hyperparams = {{ {HP[algo]} }}
policy_kwargs = {{ net_arch = [16] }}
[evaluation]
n_eval_episodes = 4
eval_every = {every}
"""
    return plan(parse_protocol(text, "t.toml")).runs[0]


class Killed(BaseException):
    """Stands for a SIGKILL or Ctrl-C: not an ``Exception``, so the run's checkpoint is kept."""


def numbers(records) -> list:
    return [(r.env_steps, r.returns, r.lengths) for r in records]


@pytest.fixture
def weights(monkeypatch) -> list:
    """A digest of the policy's parameters (networks, target networks) at each evaluation, in order: the returns
    of a barely trained policy may not move, its weights do."""
    import hashlib

    import rlaudit.run.runner as runner

    seen: list = []
    real = runner.evaluate

    def evaluate(agent, env, ev, steps=0):
        h = hashlib.sha256()
        for name, tensor in sorted(agent.model.policy.state_dict().items()):
            h.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
        seen.append((steps, h.hexdigest()))
        return real(agent, env, ev, steps)

    monkeypatch.setattr(runner, "evaluate", evaluate)
    return seen


def kill_at(spec: RunSpec, steps: int, checkpoints: Checkpoints, error: type[BaseException] = Killed) -> list:
    """Train ``spec`` with ``checkpoints`` and stop it by raising ``error`` at its evaluation at ``steps``."""
    made = []

    def emit(rec):
        made.append(rec)
        if rec.env_steps == steps:
            raise error("stop here")

    with pytest.raises(error):
        execute_run(spec, emit, checkpoints=checkpoints)
    return made


@pytest.mark.parametrize("algo,task,boundary", [
    ("DQN", "CartPole-v1", 896), ("QRDQN", "CartPole-v1", 896), ("C51", "CartPole-v1", 896),
    ("IQN", "CartPole-v1", 896), ("DopamineRainbow", "CartPole-v1", 896), ("NoisyDQN", "CartPole-v1", 896),
    ("Rainbow", "CartPole-v1", 896), ("SAC", "Pendulum-v1", 896), ("DQN", "MinAtar/SpaceInvaders-v1", 896)])
def test_a_run_killed_after_a_checkpoint_resumes_with_the_numbers_of_a_run_never_killed(tmp_path, weights, algo,
                                                                                         task, boundary):
    """Checkpoints at every update boundary (every 4th step); the run is killed at its evaluation
    at 900 steps, then run again: it starts from its last checkpoint (its first progress report says where),
    emits the evaluations at 300 and 600 again and goes on to the same evaluations and the same weights at each,
    bit for bit, as a run never stopped. MinAtar adds sticky actions remembered across episodes, in the training
    and the evaluation environments."""
    spec = spec_for(algo, task)
    plain = []
    execute_run(spec, plain.append)
    plain_weights = list(weights)
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0)
    weights.clear()
    before = kill_at(spec, 900, checkpoints)
    assert checkpoints.path(spec).exists()
    assert numbers(before) == numbers(plain)[:3]

    resumed, reports = [], []
    weights.clear()
    result = execute_run(spec, resumed.append, progress=reports.append, checkpoints=checkpoints)
    assert reports[0] == boundary  # it did resume, from the last boundary before the kill
    assert numbers(resumed) == numbers(plain)
    assert weights == plain_weights[2:]  # evaluated after the resume: at 900 (again) and 1200
    assert len({w for _, w in plain_weights}) == 4  # the weights moved between evaluations
    assert result.env_steps == 1200 and result.cpu_time > 0
    assert not checkpoints.path(spec).exists()  # a finished run leaves no checkpoint


def test_the_test_above_tells_a_resume_that_misses_state(tmp_path, weights, monkeypatch):
    """The same check fails when the global random states are not restored (replay sampling and exploration then
    draw other numbers): the comparison above can fail."""
    import rlaudit.run.runner as runner

    spec = spec_for("DQN")
    execute_run(spec, lambda rec: None)
    plain_weights = list(weights)
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0)
    kill_at(spec, 900, checkpoints)
    monkeypatch.setattr(runner, "set_random_states", lambda states: None)
    weights.clear()
    execute_run(spec, lambda rec: None, checkpoints=checkpoints)
    assert len(weights) == 2 and weights[0] == plain_weights[2]  # no update between the checkpoint and 900
    assert weights[1] != plain_weights[3]


def test_checkpoints_are_written_only_when_due(tmp_path):
    """With a long interval a short run writes none, and with checkpoints off (``None``) nothing is written."""
    spec = spec_for("DQN")
    execute_run(spec, lambda rec: None, checkpoints=Checkpoints(tmp_path / "long", every=3600.0))
    assert not (tmp_path / "long").exists()
    kill_at(spec, 900, Checkpoints(tmp_path / "long", every=3600.0))
    assert not (tmp_path / "long").exists()


def test_an_algorithm_whose_learn_cannot_be_reentered_restarts_from_scratch(tmp_path):
    """PPO keeps its iteration count in a local of ``learn``: no checkpoint is written, the run restarts."""
    spec = spec_for("PPO")
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0)
    kill_at(spec, 900, checkpoints)
    assert not checkpoints.path(spec).exists()


def test_a_failed_run_deletes_its_checkpoint_and_is_retried_from_scratch(tmp_path):
    spec = spec_for("DQN")
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0)
    kill_at(spec, 900, checkpoints, error=ValueError)
    assert not checkpoints.path(spec).exists()


@contextlib.contextmanager
def another_machine():
    """This process reads as another CPU (its machine fingerprint differs) inside the block."""
    import rlaudit.run.checkpoint as module
    import rlaudit.run.machine as machine

    real = machine.machine_fingerprint
    try:
        machine.machine_fingerprint = lambda: {**real(), "cpu_model": "another CPU"}
        module.this_machine.cache_clear()
        yield json.dumps(machine.machine_fingerprint(), sort_keys=True)
    finally:
        machine.machine_fingerprint = real
        module.this_machine.cache_clear()


def test_a_checkpoint_of_another_run_or_build_is_ignored(tmp_path):
    """A checkpoint whose fingerprint differs (other settings under the same run id; another CPU) is deleted and
    the run trains from scratch; a truncated file and a writer's leftover temporary file are cleaned up too."""
    spec = spec_for("DQN")
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0)
    kill_at(spec, 900, checkpoints)
    other = spec_for("DQN", steps=1500)  # same run id, other budgets
    assert other.run_id == spec.run_id and checkpoints.path(other) == checkpoints.path(spec)
    assert checkpoints.load(other) is None
    assert not checkpoints.path(spec).exists()

    kill_at(spec, 900, checkpoints)
    with another_machine():  # by default the store's machine must be where all of a run trained
        assert checkpoints.load(spec) is None and not checkpoints.path(spec).exists()

    kill_at(spec, 900, checkpoints)
    path = checkpoints.path(spec)
    path.write_bytes(path.read_bytes()[:1000])
    leftover = path.with_name(path.name + ".123.tmp")
    leftover.write_bytes(b"x")
    reports = []
    execute_run(spec, lambda rec: None, progress=reports.append, checkpoints=checkpoints)
    assert not leftover.exists() and not path.exists() and not path.with_suffix(".json").exists()
    assert reports and reports[0] < 896  # trained from the start


def test_a_portable_checkpoint_resumes_on_another_machine_and_the_run_says_where_it_trained(tmp_path):
    """With ``portable`` a checkpoint written on another machine is resumed (from where it stopped, its evaluations
    kept) and the result lists both machines with the step the second took over; a checkpoint saved after the move
    keeps the history. Without ``portable``, the same checkpoint is deleted and the run restarts (test above)."""
    from rlaudit.run.checkpoint import saved_checkpoints, this_machine

    spec = spec_for("DQN")
    plain = []
    execute_run(spec, plain.append)
    checkpoints = Checkpoints(tmp_path / "ck", every=0.0, portable=True)
    with another_machine() as elsewhere:
        kill_at(spec, 900, checkpoints)
    here = this_machine()
    assert elsewhere != here
    assert saved_checkpoints(tmp_path / "ck") == {spec.run_id: (896, False)}  # `rlaudit status` says "another machine"
    state = checkpoints.load(spec)
    assert state["trained_on"] == [[elsewhere, 0], [here, 896]]

    resumed, reports = [], []
    result = execute_run(spec, resumed.append, progress=reports.append, checkpoints=checkpoints)
    assert reports[0] == 896 and numbers(resumed)[:3] == numbers(plain)[:3]
    assert result.trained_on == ((elsewhere, 0), (here, 896))
    assert execute_run(spec, lambda rec: None).trained_on is None  # one machine: nothing to say

    with another_machine():
        kill_at(spec, 900, checkpoints)
    kill_at(spec, 1200, checkpoints)  # resumed here at 896, checkpointed again at 1196
    state = checkpoints.load(spec)
    assert [k for _, k in state["trained_on"]] == [0, 896] and state["env_steps"] == 1196


def test_the_code_a_checkpoint_matches_ignores_comments_and_docstrings():
    """Editing a comment or a docstring of the training code keeps the checkpoints; a changed number does not."""
    from rlaudit.run.checkpoint import _code_of

    plain = "def f(x):\n    return x + 1\n"
    assert _code_of(plain) == _code_of('"""Module."""\n# a comment\ndef f(x):\n    """Adds one."""\n'
                                       '    return x + 1  # one\n')
    assert _code_of(plain) != _code_of("def f(x):\n    return x + 2\n")
    assert _code_of('def f():\n    """Only a docstring."""\n') == _code_of("def f():\n    pass\n")


def test_large_arrays_of_zeros_and_ones_are_stored_a_bit_per_value_and_load_unchanged(tmp_path):
    """MinAtar's frames in a replay buffer are 0/1 bytes: packed, a checkpoint is several times smaller; every
    array loads back with its dtype, shape and values, writable; an array with other values is kept as it is."""
    import numpy as np

    rng = np.random.default_rng(0)
    state = {"env_steps": 5, "frames": rng.integers(0, 2, (3000, 1, 10, 10, 4), dtype=np.uint8),
             "flags": rng.random((2_000_001,)) < 0.1, "pixels": rng.integers(0, 256, (3000, 400), dtype=np.uint8),
             "small": np.array([0, 1, 1], dtype=np.uint8), "odd_size": rng.integers(0, 2, (1_048_583,), dtype=np.uint8)}
    checkpoints = Checkpoints(tmp_path / "ck", portable=True)
    spec = spec_for("DQN")
    checkpoints.save(spec, state)
    loaded = checkpoints.load(spec)
    for key in ("frames", "flags", "pixels", "small", "odd_size"):
        a, b = state[key], loaded[key]
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), key
        assert b.flags.writeable, key
    import zlib

    raw = zlib.decompress(checkpoints.path(spec).read_bytes())
    assert len(raw) < state["pixels"].nbytes + (state["frames"].nbytes + state["flags"].nbytes) / 4  # packed
    assert b"_unpack_bits" in raw


def test_the_training_code_is_read_when_the_module_is_imported_not_at_the_first_save(monkeypatch):
    """A driver runs for hours: a file edited meanwhile must not lend its hash to checkpoints written by the code
    the driver imported before the edit."""
    from rlaudit.run import checkpoint

    before = checkpoint._code_hash()
    checkpoint._code_hash.cache_clear()

    def no_reading(self, *args, **kwargs):
        raise AssertionError(f"{self} read after import")

    monkeypatch.setattr(Path, "read_text", no_reading)
    try:
        assert checkpoint._code_hash() == before
    finally:
        checkpoint._code_hash.cache_clear()


def test_a_run_that_trained_on_two_machines_names_both_in_the_store(tmp_path):
    """The store names each machine of a moved run in ``runs.machine`` (``machine`` and a ``machine_also_*`` it
    records), the compute summary says ``A then B``, and ``run_machines`` reads them in order."""
    from rlaudit.run.checkpoint import this_machine
    from rlaudit.run.spec import RunResult
    from rlaudit.store import Store, compute_used, run_machines

    protocol = parse_protocol(SWEEP, "resume.toml")
    spec = plan(protocol).runs[0]
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, protocol, machine=json.loads(this_machine()))
    try:
        store.sync_plan(plan(protocol))
        store.started(spec.run_id, "w")
        other = json.dumps({**json.loads(this_machine()), "cpu_model": "Intel Xeon Processor"}, sort_keys=True)
        store.finished(RunResult(spec.run_id, 6000, 10.0, 9.0, trained_on=((other, 0), (this_machine(), 3000))))
    finally:
        store.close()
    keys = run_machines(path, spec.run_id)
    assert len(keys) == 2 and keys[0].startswith("machine_also_") and keys[1] == "machine"
    con = sqlite3.connect(path)
    assert json.loads(dict(con.execute("SELECT key, value FROM meta"))[keys[0]])["cpu_model"] == "Intel Xeon Processor"
    con.close()
    (where,) = compute_used(path)["machines"]
    assert where["runs"] == 1 and re.fullmatch(r"Intel Xeon Processor .* then .*", where["machine"]), where


# ------------------------------------------------------------------------------------------- through the CLI

SWEEP = """
schema_version = 1
name = "resume"
seeds = 2
[regimes]
b = 6000
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "DQN"
hyperparams = { learning_starts = 200, train_freq = 4, target_update_interval = 100, buffer_size = 2000 }
policy_kwargs = { net_arch = [32] }
[evaluation]
n_eval_episodes = 3
eval_every = 500
"""


def _evaluations(store: Path) -> dict:
    con = sqlite3.connect(store)
    try:
        rows = con.execute("SELECT e.run_id, e.env_steps, e.returns FROM evaluations e JOIN runs r USING (run_id) "
                           "WHERE r.status = 'done' ORDER BY e.run_id, e.env_steps").fetchall()
    finally:
        con.close()
    return rows


def _start(tmp_path, store_name: str) -> tuple[Path, Path, subprocess.Popen]:
    """``rlaudit run --checkpoint-every 0`` of SWEEP in a child process: ``(protocol, store, process)``."""
    protocol = tmp_path / "resume.toml"
    protocol.write_text(SWEEP)
    store = tmp_path / store_name
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "rlaudit", "run", str(protocol), "--store", str(store),
                             "--workers", "1", "--checkpoint-every", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, text=True)
    return protocol, store, proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses SIGKILL")
def test_rlaudit_run_killed_mid_run_resumes_it_from_its_checkpoint(tmp_path):
    """``rlaudit run --checkpoint-every 0`` killed with SIGKILL once a run has a checkpoint and an evaluation, then
    run again: the run resumes (the driver's progress starts past 0), and the store ends with the numbers of an
    uninterrupted sweep; no checkpoint is left behind."""
    protocol, store, proc = _start(tmp_path, "killed.sqlite")
    folder = checkpoint_dir(store)
    stop_when(proc, lambda: bool(list(folder.glob("*.ckpt"))) and stored_evaluations(store))
    assert proc.returncode == -signal.SIGKILL
    assert list(folder.glob("*.ckpt"))
    shown = CliRunner().invoke(main, ["status", str(store)])
    assert shown.exit_code == 0, shown.output
    assert re.search(r"1 unfinished run\(s\) have a checkpoint, resumed if the run's settings, the libraries and "
                     r"rlaudit's training code are unchanged \(else restarted\): CartPole-v1__DQN__\d__nested at "
                     r"[\d,]+ env steps", " ".join(shown.output.split())), shown.output

    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    reference = tmp_path / "reference.sqlite"
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(reference), "--workers", "1",
                                       "--no-checkpoints"])
    assert result.exit_code == 0, result.output
    assert _evaluations(store) == _evaluations(reference) and len(_evaluations(store)) == 24
    assert not list(folder.iterdir()) and not checkpoint_dir(reference).exists()
    assert "will resume" not in CliRunner().invoke(main, ["status", str(store)]).output


def test_ctrl_c_keeps_the_checkpoint_and_the_summary_says_the_run_will_resume(tmp_path):
    """SIGINT once a checkpoint exists: exit 130, the summary says which runs resume and which restart, and the
    checkpoint is still there for the next run."""
    _, store, proc = _start(tmp_path, "s.sqlite")
    folder = checkpoint_dir(store)
    err = stop_when(proc, lambda: bool(list(folder.glob("*.ckpt"))), signal.SIGINT)
    assert proc.returncode == 130, err
    assert "1 interrupted (partial records discarded; the next run resumes 1 from its checkpoint)" in \
        " ".join(err.split()), err
    assert len(list(folder.glob("*.ckpt"))) == 1
    # no run finished, but the interrupted one advanced: the last line names the steps its checkpoint keeps
    (note,) = folder.glob("*.json")
    kept = json.loads(note.read_text())["env_steps"]
    assert kept > 0
    assert f"; no run finished; {kept:,} env steps kept in checkpoints for the next run -> " in " ".join(err.split())


@pytest.mark.parametrize("args,message", [
    (["--checkpoint-every", "-1"], "--checkpoint-every: expected a number of seconds >= 0, got -1"),
    (["--checkpoint-every", "nan"], "--checkpoint-every: expected a number of seconds >= 0, got nan"),
    (["--checkpoint-every", "5", "--no-checkpoints"], "--checkpoint-every: cannot be given with --no-checkpoints"),
    (["--executor", "ray", "--checkpoint-every", "5"],
     "--checkpoint-every: applies to --executor local only; runs on a Ray cluster restart from scratch"),
    (["--executor", "ray", "--no-checkpoints"],
     "--no-checkpoints: applies to --executor local only; runs on a Ray cluster restart from scratch"),
    (["--executor", "ray", "--resume-on-any-machine"],
     "--resume-on-any-machine: applies to --executor local only; runs on a Ray cluster restart from scratch"),
    (["--no-checkpoints", "--resume-on-any-machine"], "--resume-on-any-machine: cannot be given with --no-checkpoints"),
])
def test_bad_checkpoint_options_are_one_line_and_write_nothing(tmp_path, args, message):
    protocol = tmp_path / "resume.toml"
    protocol.write_text(SWEEP)
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"error: {message}"
    assert result.stdout == "" and not store.exists() and not checkpoint_dir(store).exists()


def test_a_file_where_the_checkpoint_folder_goes_is_one_line_and_writes_nothing(tmp_path):
    protocol = tmp_path / "resume.toml"
    protocol.write_text(SWEEP)
    store = tmp_path / "s.sqlite"
    checkpoint_dir(store).write_text("not a folder")
    result = CliRunner().invoke(main, ["run", str(protocol), "--store", str(store)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"error: {checkpoint_dir(store)}: the store's checkpoint folder is a file; move "
                                     f"it aside, or run with --no-checkpoints")
    assert result.stdout == "" and not store.exists()


def test_the_checkpoint_bench_prints_its_line(capsys):
    """bench/bench_checkpoint.py (the size and seconds in docs/protocol.md) runs end to end on a part-filled buffer,
    and names a missing algorithm in one line."""
    import importlib

    sys.path.insert(0, str(REPO / "bench"))
    try:
        bench = importlib.import_module("bench_checkpoint")
    finally:
        sys.path.pop(0)
    assert bench.main(["--algorithm", "DQN", "--game", "MinAtar/Breakout-v1", "--fill", "300", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"MinAtar/Breakout-v1__DQN__0__nested: buffer 300 of 100,000 transitions, observations "
                        r"\(1, 10, 10, 4\) uint8; checkpoint [\d.]+ MB; save [\d.]+ s wall / [\d.]+ s CPU, load "
                        r"[\d.]+ s / [\d.]+ s; every 600 s: overhead ratio [\d.]+\n", out), out
    assert bench.main(["--algorithm", "PPO"]) == 2
    assert capsys.readouterr().err == (f"error: {REPO}/protocols/dqn-family-minatar.toml has no run of 'PPO' on "
                                       f"'MinAtar/Seaquest-v1'\n")


def test_the_subnormal_bench_counts_them_in_a_checkpoint_and_names_a_bad_file(tmp_path, capsys):
    """bench/bench_subnormals.py (the cause of the flagship's Freeway cost, in its protocol's header) reads a run's
    checkpoint: it counts the subnormal values Adam's moments hold (three planted among normal ones here), and
    times the update both ways; a file that is not a checkpoint, or none, is one line and exit 2."""
    import importlib
    import pickle
    import zlib

    import cloudpickle

    spec = spec_for("QRDQN")
    checkpoints = Checkpoints(tmp_path / "ck", every=0)
    kill_at(spec, 600, checkpoints)
    data = pickle.loads(zlib.decompress(checkpoints.path(spec).read_bytes()))
    moments = next(iter(data["state"]["agent"].model.policy.optimizer.state.values()))
    moments["exp_avg_sq"].fill_(1.0)
    moments["exp_avg_sq"].view(-1)[:3] = 1e-40
    planted = tmp_path / "planted.ckpt"
    planted.write_bytes(zlib.compress(cloudpickle.dumps(data)))  # as checkpoints are written (local functions)
    shape, size = tuple(moments["exp_avg_sq"].shape), moments["exp_avg_sq"].numel()

    sys.path.insert(0, str(REPO / "bench"))
    try:
        bench = importlib.import_module("bench_subnormals")
    finally:
        sys.path.pop(0)
    assert bench.main([str(planted), "--updates", "5", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    steps = data["state"]["env_steps"]
    assert out.startswith(f"planted.ckpt: QRDQN at {steps} env steps\n  parameters: 0 subnormal\n"), out
    assert f"  Adam exp_avg_sq of {shape}: 3 of {size:,} subnormal ({3 / size:.0%})\n" in out
    assert re.search(r"  update: [\d.]+ ms kept, [\d.]+ ms flushed to zero \(median of 1 x 5 updates, CPU "
                     r"time\); ratio [\d.]+\n$", out), out
    (tmp_path / "x.ckpt").write_text("not a checkpoint")
    for path, says in ((tmp_path / "x.ckpt", "not a readable SB3 run checkpoint"),
                       (tmp_path / "none.ckpt", "no such checkpoint file")):
        assert bench.main([str(path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith(f"error: {path}: {says}")
        assert captured.err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_:  # argparse's own errors, one line too
        bench.main([str(planted), "--updates", "abc"])
    captured = capsys.readouterr()
    assert exit_.value.code == 2 and captured.err == "error: argument --updates: invalid int value: 'abc'\n"


TWO_SEEDS_1M = """
schema_version = 1
name = "t"
seeds = [0, 1]
[regimes]
low = 250_000
top = 1_000_000
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "DQN"
"""
"""Two 1M-step DQN runs: checkpoints at hundreds of thousands of steps are a real share of them."""


def test_the_eta_and_the_summary_count_only_the_steps_trained_since_a_resumed_checkpoint(tmp_path):
    """A run resumed at 400k of 1M steps reports 400k at once: the ETA must not take that for speed (it said
    "10 min" for a sweep with hours left), and the summary's steps/s counts what this driver trained. A run whose
    checkpoint the runner threw away (deleted before its first report) counts from 0."""
    import io

    from rich.console import Console

    from rlaudit.run.checkpoint import this_machine
    from rlaudit.run.driver import run_plan
    from rlaudit.run.spec import EvalRecord, RunResult

    pl = plan(parse_protocol(TWO_SEEDS_1M, "t.toml"))
    store = tmp_path / "s.sqlite"
    checkpoints = Checkpoints(checkpoint_dir(store))
    resumed, restarted = pl.runs
    for spec, steps in ((resumed, 400_000), (restarted, 300_000)):
        checkpoints.directory.mkdir(exist_ok=True)
        checkpoints.path(spec).write_bytes(b"state")
        checkpoints.path(spec).with_suffix(".json").write_text(
            json.dumps({"run_id": spec.run_id, "env_steps": steps, "machine": this_machine()}))
    seen = {}

    class Resuming:
        name, workers = "fake", 2

        def __init__(self):
            self.checkpoints = checkpoints

        def run(self, specs, sink):
            sink.started(resumed.run_id, "w1")
            sink.record(EvalRecord(resumed.run_id, 250_000, (1.0,), (10,), 1.0))  # re-emitted from the checkpoint
            sink.progress(resumed.run_id, 400_000)
            sink.t0 -= 100.0  # 100 s of this sweep, 10k steps trained
            sink.progress(resumed.run_id, 410_000)
            seen["eta"] = sink._eta()
            checkpoints.discard(restarted)  # what Checkpoints.load does with a checkpoint it cannot use
            sink.started(restarted.run_id, "w2")
            sink.progress(restarted.run_id, 5_000)
            seen["restarted from"] = sink.resume_from[restarted.run_id]
            for spec in (resumed, restarted):
                sink.record(EvalRecord(spec.run_id, 1_000_000, (2.0,), (10,), 2.0))
                if spec is restarted:
                    sink.record(EvalRecord(spec.run_id, 250_000, (1.0,), (10,), 1.0))
                sink.finished(RunResult(spec.run_id, 1_000_000, 200.0, 200.0))

    summary = run_plan(pl, store, Resuming(), console=Console(file=io.StringIO()))
    # 10k steps in 100 s; left: 590k of the resumed run and 700k of the other (its checkpoint counted as done)
    assert re.fullmatch(r"; ETA 3 h 3[45] min", seen["eta"]), seen["eta"]
    assert seen["restarted from"] == 0
    assert summary.env_steps == 600_000 + 1_000_000


def test_a_resumed_run_starts_first_and_is_priced_from_its_checkpoint(tmp_path):
    """A run that resumes at 400k of 1M steps costs 600k steps' time: the plan header and `rlaudit validate` said
    the full price (about 1 h too much for the flagship's sitting that resumed two IQN runs at 70 %). A checkpoint
    written on another machine is priced from 0 unless the run resumes it (--resume-on-any-machine). Resumed runs
    start first."""
    import io

    from rich.console import Console

    from rlaudit.run.checkpoint import this_machine
    from rlaudit.run.driver import estimate, format_duration, run_plan
    from rlaudit.store import Store

    (tmp_path / "t.toml").write_text(TWO_SEEDS_1M)
    protocol = parse_protocol(TWO_SEEDS_1M, "t.toml")
    pl = plan(protocol)
    store = tmp_path / "s.sqlite"
    checkpoints = Checkpoints(checkpoint_dir(store))
    elsewhere, here = pl.runs
    checkpoints.directory.mkdir()
    for spec, steps, machine in ((here, 400_000, this_machine()), (elsewhere, 300_000, "another")):
        checkpoints.path(spec).write_bytes(b"state")
        checkpoints.path(spec).with_suffix(".json").write_text(
            json.dumps({"run_id": spec.run_id, "env_steps": steps, "machine": machine}))

    full = estimate([here], 1).cpu_seconds
    assert estimate([here], 1, trained={here.run_id: 400_000}).cpu_seconds == pytest.approx(0.6 * full)
    priced = estimate(pl.runs, 2, trained={here.run_id: 400_000})
    assert priced.cpu_seconds == pytest.approx(1.6 * full)

    s = Store.open_for_run(store, protocol)
    s.sync_plan(pl)
    s.close()
    told = CliRunner().invoke(main, ["validate", str(tmp_path / "t.toml"), "--store", str(store), "--workers", "2"])
    assert told.exit_code == 0, told.output
    assert (f"store: 0 of 2 planned runs finished; the other 2 take about {format_duration(priced.seconds)} with 2 "
            "workers (1 run resumes from a checkpoint, 400,000 of these steps trained) (1 more checkpoint written on "
            "another machine, priced from 0: 'rlaudit run --resume-on-any-machine' resumes them)\n") in told.output

    class Idle:  # trains nothing: the header and the order of the runs are what this test reads
        name, workers = "fake", 2

        def __init__(self, portable):
            self.checkpoints = Checkpoints(checkpoint_dir(store), portable=portable)
            self.order = []

        def run(self, specs, sink):
            self.order = [s.run_id for s in specs]

    for portable, trained in ((False, {here.run_id: 400_000}),
                              (True, {here.run_id: 400_000, elsewhere.run_id: 300_000})):
        out, idle = io.StringIO(), Idle(portable)
        run_plan(pl, store, idle, console=Console(file=out, width=400))
        # the run resumed here starts first (seed 1 before seed 0); with both resumed, plan order
        assert idle.order == ([here.run_id, elsewhere.run_id] if len(trained) == 1
                              else [elsewhere.run_id, here.run_id])
        runs = ("1 run resumes from a checkpoint, 400,000" if len(trained) == 1
                else "2 runs resume from checkpoints, 700,000")
        assert (f"training 2 of 2 runs, 2,000,000 env steps ({runs} of these steps trained); estimate about "
                f"{format_duration(estimate(pl.runs, 2, trained=trained).seconds)} with 2 worker(s)") in out.getvalue()
