"""The Ray executor against a real Ray cluster on 127.0.0.1 (a loopback-only network namespace).

One two-node cluster (1 CPU each) serves the module; every ``rlaudit run --executor ray`` runs inside its
namespace, so nothing here can reach any address but loopback. The reference is the local executor's store
for the same protocol and seeds: the Ray stores must hold the same evaluations, run by run, bit for bit.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ray_cluster import BIN, ENV, LoopbackCluster, loopback_unavailable  # noqa: E402

DATA = Path(__file__).parent / "data"
SWEEP = DATA / "ray_sweep.toml"
PLUGIN = DATA / "ray_plugin.toml"
JAX_SWEEP = DATA / "jax_sweep.toml"  # backend jax: one batch of two seeds
PLUGIN_DIR = DATA / "ray_plugin"
RLAUDIT = str(BIN / "rlaudit")
N_EVALS = 4  # ray_sweep.toml: evaluations at 500, 1000, 1500 and 2000 env steps

pytest.importorskip("ray")
_why_not = loopback_unavailable()
pytestmark = pytest.mark.timeout(400)
needs_cluster = pytest.mark.skipif(_why_not is not None, reason=f"loopback Ray cluster: {_why_not}")


# ------------------------------------------------------------------------------------------- helpers
def evaluations(store: Path) -> dict[str, list[tuple]]:
    """``run_id -> [(env_steps, returns, lengths), ...]`` of the store's done runs, in step order."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        done = {r[0] for r in con.execute("SELECT run_id FROM runs WHERE status='done'")}
        out: dict[str, list[tuple]] = {}
        for run_id, steps, returns, lengths in con.execute(
                "SELECT run_id, env_steps, returns, lengths FROM evaluations ORDER BY run_id, env_steps"):
            if run_id in done:
                out.setdefault(run_id, []).append((steps, tuple(json.loads(returns)), tuple(json.loads(lengths))))
        return out
    finally:
        con.close()


def runs(store: Path) -> dict[str, dict]:
    """``run_id -> {status, attempts, worker, error}``."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {r[0]: {"status": r[1], "attempts": r[2], "worker": r[3], "error": r[4]}
                for r in con.execute("SELECT run_id, status, attempts, worker, error FROM runs")}
    finally:
        con.close()


def evaluated_runs(store: Path) -> set[str]:
    """Runs with at least one stored evaluation right now (the store may be mid-write: then empty)."""
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.2)
        try:
            return {r[0] for r in con.execute("SELECT DISTINCT run_id FROM evaluations")}
        finally:
            con.close()
    except sqlite3.Error:
        return set()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def local_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([RLAUDIT, "run", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def ray_run(cluster: LoopbackCluster, args: list[str], cwd: Path, env: dict | None = None):
    return cluster.run([RLAUDIT, "run", *args, "--executor", "ray", "--address", cluster.address], cwd=cwd,
                       env=env or ENV)


def run_and_kill_a_worker(cluster: LoopbackCluster, args: list[str], store: Path, cwd: Path):
    """Run a Ray sweep; SIGKILL the worker process of the first run seen training with an evaluation stored.

    Returns:
        ``(finished process, killed run id or None, stderr)``.
    """
    proc = cluster.popen([RLAUDIT, "run", *args, "--executor", "ray", "--address", cluster.address], cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    try:
        deadline = time.monotonic() + 240
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            evaluated = evaluated_runs(store)
            for pid, title in cluster.task_pids("rlaudit:").items():
                run_id = title.removeprefix("ray::rlaudit:").split()[0].removesuffix("()")
                if run_id in evaluated:
                    os.kill(pid, signal.SIGKILL)
                    killed = run_id
                    break
            time.sleep(0.05)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, killed, err


# ------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    """The local executor's sweep of ray_sweep.toml, started now; it trains while the cluster starts."""
    if _why_not is not None:
        pytest.skip(f"loopback Ray cluster: {_why_not}")
    d = tmp_path_factory.mktemp("local")
    proc = subprocess.Popen([RLAUDIT, "run", str(SWEEP), "--store", str(d / "store.sqlite"), "-j", "2"], cwd=d,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, d / "store.sqlite"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def cluster(local_sweep):
    """Two Ray nodes of one CPU each on 127.0.0.1; every process of it is killed at the end, pass or fail."""
    if _why_not is not None:
        pytest.skip(f"loopback Ray cluster: {_why_not}")
    c = LoopbackCluster(node_cpus=(1, 1))
    try:
        c.start()
        yield c
    finally:
        c.stop()
        assert not c.pids(), "Ray processes left running"


@pytest.fixture(scope="module")
def reference(local_sweep, cluster) -> dict[str, list[tuple]]:
    """The local executor's evaluations for ray_sweep.toml."""
    proc, store = local_sweep
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    ref = evaluations(store)
    assert len(ref) == 4 and all(len(v) == N_EVALS for v in ref.values())
    return ref


# ------------------------------------------------------------------------------------------- tests
def test_sweep_survives_worker_kill_and_matches_local(cluster, reference, tmp_path):
    """SIGKILL the worker of a running task after its first evaluation: Ray retries the run, the driver
    discards its partial records, and the final store equals the local executor's, run by run."""
    store = tmp_path / "store.sqlite"
    proc, killed, err = run_and_kill_a_worker(cluster, [str(SWEEP), "--store", str(store)], store, tmp_path)
    assert killed is not None, f"no running task with an evaluation was seen to kill\n{err}"
    assert proc.returncode == 0, err
    assert f"restarting {killed}: worker" in err
    assert "1 lost (retried)" in err and "ray nodes used: 2" in err
    got = evaluations(store)
    assert got == reference  # nothing lost, nothing duplicated, same numbers
    status = runs(store)
    assert {r["status"] for r in status.values()} == {"done"}
    assert status[killed]["attempts"] == 2
    assert all(r["attempts"] == 1 for rid, r in status.items() if rid != killed)


def test_resume_across_executors_with_bounded_retries(cluster, reference, tmp_path):
    """Local, then Ray, then local again on one store: with --max-retries 0 a killed Ray worker fails its run
    (exit 1); the next (local) sweep retries it, and the store ends identical to the all-local one."""
    store = tmp_path / "store.sqlite"
    first = local_run([str(SWEEP), "--store", str(store), "--only", "seed=0", "-j", "1"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert {rid for rid, r in runs(store).items() if r["status"] == "done"} == {
        rid for rid in reference if "__0__" in rid}

    proc, killed, err = run_and_kill_a_worker(cluster, [str(SWEEP), "--store", str(store), "--max-retries", "0"],
                                              store, tmp_path)
    assert killed is not None and "__1__" in killed, err
    assert proc.returncode == 1, err
    assert "2 of 4 runs already done" in err
    status = runs(store)
    assert status[killed]["status"] == "failed" and status[killed]["attempts"] == 1
    assert status[killed]["error"].rstrip().endswith(
        "WorkerCrashedError: the run's Ray worker was lost 1 time(s) (--max-retries 0)")
    assert f"restarting {killed}" not in err

    again = local_run([str(SWEEP), "--store", str(store), "-j", "1"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "3 of 4 runs already done" in again.stderr
    assert evaluations(store) == reference
    on_ray = {rid for rid, r in runs(store).items() if "pid" in r["worker"]}  # Ray workers are "IP/node pid N"
    assert on_ray == {rid for rid in reference if "__1__" in rid} - {killed}


def test_plugin_shipped_with_working_dir_and_failing_run(cluster, tmp_path):
    """A plugin on the driver only is refused before submitting (naming it); shipped with a runtime_env
    working_dir it runs on the workers. Its seed-1 run raises: recorded failed, the sweep completes, exit 1."""
    env = {**ENV, "PYTHONPATH": str(PLUGIN_DIR)}  # importable by the driver, not by the Ray workers
    store = tmp_path / "store.sqlite"
    refused = ray_run(cluster, [str(PLUGIN), "--store", str(store)], cwd=tmp_path, env=env)
    assert refused.returncode == 2, refused.stderr
    assert "algorithm 'FlakyPPO' is not importable on the workers (no package installed there registers it)" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not evaluated_runs(store)

    env["RLAUDIT_RAY_RUNTIME_ENV"] = json.dumps({"working_dir": str(PLUGIN_DIR)})
    done = ray_run(cluster, [str(PLUGIN), "--store", str(store)], cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    status = runs(store)
    ok, bad = "CartPole-v1__FlakyPPO__0__nested", "CartPole-v1__FlakyPPO__1__nested"
    assert status[ok]["status"] == "done" and status[bad]["status"] == "failed"
    assert status[bad]["attempts"] == 1  # an exception is not retried
    assert "RuntimeError: FlakyPPO: deliberate failure for seed 1" in status[bad]["error"]
    assert "Traceback" in status[bad]["error"]  # the remote traceback is kept
    assert "1 of 2 runs failed" in done.stderr
    assert len(evaluations(store)[ok]) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_outstanding_tasks(cluster, tmp_path, sig):
    """Ctrl-C (or a scheduler's SIGTERM) to the driver while runs train: exit 130, no rlaudit task left
    running on the cluster, the unfinished runs back to pending for the next 'rlaudit run'."""
    store = tmp_path / "store.sqlite"
    proc = cluster.popen([RLAUDIT, "run", str(SWEEP), "--store", str(store), "--executor", "ray",
                          "--address", cluster.address], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not cluster.task_pids("rlaudit:CartPole") and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert cluster.task_pids("rlaudit:CartPole"), "no run started"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    deadline = time.monotonic() + 20
    while cluster.task_pids("rlaudit:CartPole") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.task_pids("rlaudit:CartPole") == {}
    assert set(r["status"] for r in runs(store).values()) <= {"pending", "done"}
    assert "interrupted" in err


class FakeSink:
    """Records the calls an executor makes (no store)."""

    def __init__(self):
        self.calls: list[tuple] = []

    def started(self, run_id, worker):
        self.calls.append(("started", run_id, worker))

    def record(self, rec):
        self.calls.append(("record", rec))

    def restarted(self, run_id, reason):
        self.calls.append(("restarted", run_id, reason))

    def progress(self, run_id, steps):
        self.calls.append(("progress", run_id, steps))


def test_router_drops_late_events_of_a_lost_attempt():
    """A retried run starts clean: restarted() before the new start, and no event of the lost attempt after it."""
    from rlaudit.run.ray_executor import _EventRouter

    sink, counted = FakeSink(), []
    router = _EventRouter(sink, lambda node, what: counted.append((node, what)))
    router.dispatch([("start", "r1", "a", "n1 pid 1", "n1"), ("record", "r1", "a", "rec-a1"),
                     ("progress", "r1", "a", 300), ("start", "r2", "c", "n2 pid 5", "n2")])
    # r1's worker dies; Ray retries it on n2. A record the dead worker sent is delivered late.
    router.dispatch([("start", "r1", "b", "n2 pid 7", "n2"), ("record", "r1", "a", "rec-a2"),
                     ("progress", "r1", "a", 600), ("record", "r1", "b", "rec-b1"), ("record", "r2", "c", "rec-c1")])
    assert sink.calls == [
        ("started", "r1", "n1 pid 1"), ("record", "rec-a1"), ("progress", "r1", 300), ("started", "r2", "n2 pid 5"),
        ("restarted", "r1", "worker n1 pid 1 was lost; Ray retried the run on n2 pid 7"),
        ("started", "r1", "n2 pid 7"), ("record", "rec-b1"), ("record", "rec-c1")]
    assert counted == [("n1", "lost")]
    assert router.is_live("r1", "b") and not router.is_live("r1", "a") and router.node_of("r1") == "n2"
    assert router.node_of("r3") == "unknown node"


def test_run_timeout_counts_once_per_run_of_a_batch():
    """A batch of two runs in one Ray task (a JAX batch's seeds) gets run_timeout twice over; a lone run once.
    After 5 s at a 3 s limit only the lone run's task is cancelled and recorded timed out."""
    from types import SimpleNamespace

    from rlaudit.run.ray_executor import RayExecutor, _EventRouter

    sink, cancelled = FakeSink(), []
    sink.failed = lambda run_id, error: sink.calls.append(("failed", run_id, error))
    router = _EventRouter(sink, lambda node, what: None)
    router.dispatch([("start", r, "a", "n1 pid 1", "n1") for r in ("b0", "b1", "alone")])
    router.started_at = {r: time.monotonic() - 5 for r in router.started_at}
    executor = RayExecutor.__new__(RayExecutor)
    executor.run_timeout, executor.node_counts = 3.0, {}
    pending = {"batch-ref": (SimpleNamespace(run_id="b0"), SimpleNamespace(run_id="b1")),
               "alone-ref": (SimpleNamespace(run_id="alone"),)}
    ray = SimpleNamespace(cancel=lambda ref, force: cancelled.append(ref))
    executor._stop_overdue(ray, pending, router, sink)
    assert cancelled == ["alone-ref"] and list(pending) == ["batch-ref"]
    assert [c[:2] for c in sink.calls if c[0] == "failed"] == [("failed", "alone")]
    router.started_at = {r: time.monotonic() - 7 for r in router.started_at}
    executor._stop_overdue(ray, pending, router, sink)
    assert cancelled == ["alone-ref", "batch-ref"] and not pending
    failed = {c[1]: c[2] for c in sink.calls if c[0] == "failed"}
    assert failed["b1"].startswith("RunTimedOut: b1 ran past the run timeout of 3 s (6 s for its batch of 2 runs "
                                   "trained together); worker n1 pid 1 was stopped")


def test_check_reachable_answers_fast(tmp_path):
    """A closed port and a port that is not a Ray GCS are refused within seconds (ray.init alone would retry
    them for minutes). Loopback only: the listener is on 127.0.0.1."""
    from rlaudit.errors import InputError
    from rlaudit.run.ray_executor import check_reachable

    with socket.socket() as s:  # a port nobody listens on: bind without listen
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(InputError, match=rf"^--address 127.0.0.1:{port}: cannot connect \(Connection refused\)"):
            check_reachable(f"127.0.0.1:{port}")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with pytest.raises(InputError, match="something answers there but it is not a Ray cluster"):
            check_reachable(f"127.0.0.1:{srv.getsockname()[1]}", timeout=1.0)
    assert time.monotonic() - t0 < 5


def test_unreachable_address_fails_before_ray_init():
    """The executor checks the address before ray.init (which would hang on it)."""
    import ray

    from rlaudit.errors import InputError
    from rlaudit.run.ray_executor import RayExecutor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(InputError, match=f"^--address {address}: cannot connect"):
            RayExecutor(address=address)._connect(ray)
    assert time.monotonic() - t0 < 5 and not ray.is_initialized()


@pytest.mark.parametrize("address, message", [
    ("localhost", "expected HOST:PORT of the Ray head"),
    ("10.0.0.1:99999", "expected HOST:PORT of the Ray head"),
    ("ray://10.0.0.1:10001", "Ray Client addresses are not supported"),
])
def test_bad_address_is_one_line(address, message):
    from rlaudit.errors import InputError
    from rlaudit.run.ray_executor import RayExecutor

    with pytest.raises(InputError, match=message):
        RayExecutor(address=address)


def test_bad_runtime_env(tmp_path, monkeypatch):
    from rlaudit.errors import InputError
    from rlaudit.run.ray_executor import RUNTIME_ENV_VAR, load_runtime_env

    monkeypatch.setenv(RUNTIME_ENV_VAR, '{"working_dir": ')
    with pytest.raises(InputError, match=rf"^{RUNTIME_ENV_VAR}: not valid JSON \(Expecting value, line 1 column 16\)"):
        load_runtime_env(None)
    missing = tmp_path / "env.json"
    with pytest.raises(InputError, match=f"^runtime_env file {missing}: cannot read"):
        load_runtime_env(str(missing))
    missing.write_text('["working_dir"]')
    with pytest.raises(InputError, match="expected a JSON object"):
        load_runtime_env(str(missing))
    missing.write_text('{"working_dir": "ship"}')
    assert load_runtime_env(str(missing)) == {"working_dir": "ship"}


def test_ray_missing_names_the_extra(monkeypatch):
    from rlaudit.errors import InputError
    from rlaudit.run import ray_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(InputError, match=r"^--executor ray needs Ray: pip install 'rlaudit\[ray\]'$"):
        ray_executor.RayExecutor(address="127.0.0.1:6379")


def test_bad_cluster_inputs(cluster, tmp_path):
    """Too many CPUs or GPUs per run: one line, exit 2, before any run starts."""
    store = tmp_path / "store.sqlite"
    big = ray_run(cluster, [str(SWEEP), "--store", str(store), "--cpus-per-run", "3"], cwd=tmp_path)
    assert big.returncode == 2 and "Traceback" not in big.stderr
    assert big.stderr.strip().splitlines()[-1] == (
        "error: --cpus-per-run 3 --gpus-per-run 0: no node of the Ray cluster can hold one run (its largest "
        "node has 1 CPU and 0 GPUs); lower them or add nodes")
    gpu = ray_run(cluster, [str(SWEEP), "--store", str(store), "--gpus-per-run", "1"], cwd=tmp_path)
    assert gpu.returncode == 2 and "no node of the Ray cluster can hold one run" in gpu.stderr

    # Python API: check() connects and checks without submitting, so a driver can call it before the store.
    code = f"""
from rlaudit.errors import InputError
from rlaudit.protocol import load_protocol, plan
from rlaudit.run.ray_executor import RayExecutor
runs = plan(load_protocol({str(SWEEP)!r})).runs
ex = RayExecutor(address={cluster.address!r})
ex.check(runs)
print("ok", len(runs))
try:
    RayExecutor(address={cluster.address!r}, cpus_per_run=2).check(runs)
except InputError as exc:
    print("refused:", exc)
"""
    api = cluster.run([sys.executable, "-c", code], cwd=tmp_path)
    assert api.returncode == 0, api.stderr
    assert api.stdout.splitlines() == [
        "ok 4", "refused: --cpus-per-run 2 --gpus-per-run 0: no node of the Ray cluster can hold one run (its "
        "largest node has 1 CPU and 0 GPUs); lower them or add nodes"]

    assert not store.exists() or not evaluated_runs(store)


@needs_cluster
def test_cluster_stopped_when_the_body_fails():
    """The harness kills every process of the cluster even when the code using it raises."""
    c = LoopbackCluster(node_cpus=(1,), port=6391)
    seen = {}
    with pytest.raises(RuntimeError, match="boom"):
        with c:
            seen["netns"], seen["pids"] = c.netns, c.pids()
            assert any("gcs_server" in c.cmdline(p) for p in seen["pids"])
            raise RuntimeError("boom")
    assert c.netns is None and c.holder.poll() is not None
    c.netns = seen["netns"]  # look again in the namespace the cluster had
    assert c.pids() == []
    assert not [p for p in seen["pids"] if alive(p)]
    c.netns = None
    assert not c.temp_dir.exists()


TIMEOUT_PLUGIN_DIR = DATA / "timeout_plugin"


def test_run_timeout_stops_a_ray_run_and_the_sweep_goes_on(cluster, tmp_path):
    """--run-timeout under --executor ray: seed 0's learn() sleeps for an hour; its task is cancelled at the limit
    (its worker killed) and recorded timed out, seed 1 finishes, exit 1, no rlaudit task left on the cluster."""
    protocol = tmp_path / "sleepy.toml"
    protocol.write_text('schema_version = 1\nname = "sleepy"\nseeds = 2\n[regimes]\nlow = 50\n[[tasks]]\n'
                        'id = "CartPole-v1"\n[[algorithms]]\nname = "SleepyLearner"\n[evaluation]\nn_eval_episodes = 1\n')
    env = {**ENV, "PYTHONPATH": str(TIMEOUT_PLUGIN_DIR),
           "RLAUDIT_RAY_RUNTIME_ENV": json.dumps({"working_dir": str(TIMEOUT_PLUGIN_DIR)})}
    store = tmp_path / "store.sqlite"
    t0 = time.monotonic()
    done = ray_run(cluster, [str(protocol), "--store", str(store), "--run-timeout", "15"], cwd=tmp_path, env=env)
    assert time.monotonic() - t0 < 300, "the sleeping run was not stopped"
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "1 done, 1 failed (1 timed out)" in done.stderr, done.stderr
    status = runs(store)
    slept, ok = "CartPole-v1__SleepyLearner__0__nested", "CartPole-v1__SleepyLearner__1__nested"
    assert status[ok]["status"] == "done"
    assert status[slept]["status"] == "failed"
    assert status[slept]["error"].startswith(f"RunTimedOut: {slept} ran past the run timeout of 15 s"), status[slept]
    deadline = time.monotonic() + 20
    while cluster.task_pids("rlaudit:CartPole") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.task_pids("rlaudit:CartPole") == {}


def test_a_jax_batch_is_one_ray_task(cluster, tmp_path):
    """backend jax under --executor ray: the two seeds of one entry train in one task (one worker process, one
    compiled program); both runs are done with an evaluation at each budget, the same numbers as the local
    executor's."""
    from rlaudit.run.backends.jax import missing_dependency

    if missing_dependency():
        pytest.skip(missing_dependency())
    store = tmp_path / "store.sqlite"
    done = ray_run(cluster, [str(JAX_SWEEP), "--store", str(store)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 done, 0 failed" in done.stderr and "ray nodes used: 1" in done.stderr, done.stderr
    status = runs(store)
    assert [r["status"] for r in status.values()] == ["done", "done"]
    workers = {r["worker"] for r in status.values()}
    assert len(workers) == 1 and " pid " in workers.pop()  # one Ray worker process trained both seeds
    got = evaluations(store)
    assert {rid: [e[0] for e in evals] for rid, evals in got.items()} == {rid: [300, 600] for rid in status}
    assert all(len(returns) == 2 and all(map(math.isfinite, returns)) for evals in got.values()
               for _, returns, _ in evals)
    local = local_run([str(JAX_SWEEP), "--store", str(tmp_path / "local.sqlite"), "-j", "1"], cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert evaluations(tmp_path / "local.sqlite") == got
