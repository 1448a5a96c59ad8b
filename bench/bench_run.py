"""Run-engine benchmarks; prints ratios (targets from issue 4).

1. overhead: ``rlaudit run`` (one PPO run, evaluations at 3 budgets) vs a plain stable-baselines3 script
   doing the same training and evaluations; both as fresh processes; median over pairs. Target ≤ 1.05.
2. parallel: runs/s with ``--workers 2`` vs ``--workers 1`` on the same sweep (driver API in-process;
   worker start-up included). Target ≥ 1.8 on 2 cores.
3. nested: a 3-budget nested protocol vs its largest budget alone. Target ≤ 1.1.

Run on a quiet machine: ``.venv/bin/python bench/bench_run.py`` (about 10 minutes on 2 cores), or
``--quick`` (a few minutes; checks that the benchmark works, the ratios are not meaningful). On a busy machine
compare the CPU-time ratio of part 1: wall-time ratios then mostly measure the other processes.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PYTHON = sys.executable

BARE = """
import sys, time
import gymnasium, numpy as np, torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
torch.set_num_threads(1)
budgets = [int(b) for b in sys.argv[1].split(",")]
n_episodes = int(sys.argv[2])
eval_env = gymnasium.make("CartPole-v1")
def evaluate(model):
    out = []
    for i in range(n_episodes):
        # the episode seeds rlaudit derives for seed 0 (eval seed 0 + 10000), so both evaluate the same episodes
        obs, _ = eval_env.reset(seed=int(np.random.SeedSequence([10_000, 0, i]).generate_state(1)[0]))
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = eval_env.step(action)
            total += r
            done = term or trunc
        out.append(total)
    return out
class Eval(BaseCallback):
    def _on_step(self):
        if self.num_timesteps in budgets[:-1]:
            evaluate(self.model)
        return True
model = PPO("MlpPolicy", gymnasium.make("CartPole-v1"), seed=0, device="cpu")
model.learn(budgets[-1], callback=Eval())
evaluate(model)
"""

PROTOCOL = """
schema_version = 1
name = "bench"
seeds = {seeds}
[regimes]
{regimes}
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
[evaluation]
n_eval_episodes = {episodes}
"""


def protocol(path: Path, budgets: list[int], seeds: int = 1, episodes: int = 10) -> Path:
    regimes = "\n".join(f"b{i} = {b}" for i, b in enumerate(budgets))
    path.write_text(PROTOCOL.format(seeds=seeds, regimes=regimes, episodes=episodes))
    return path


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def bench_overhead(tmp: Path, budgets: list[int], pairs: int, episodes: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(tmp / "cache")}
    bare = tmp / "bare.py"
    bare.write_text(BARE)
    proto = protocol(tmp / "overhead.toml", budgets, episodes=episodes)
    ours, theirs = [], []
    for i in range(pairs):
        store = tmp / f"overhead{i}.sqlite"
        run = [PYTHON, "-m", "rlaudit", "run", str(proto), "--store", str(store), "--workers", "1"]
        plain = [PYTHON, str(bare), ",".join(map(str, budgets)), str(episodes)]
        if i % 2:  # alternate the order so that drift in machine load hits both
            theirs.append(timed(plain, env))
            ours.append(timed(run, env))
        else:
            ours.append(timed(run, env))
            theirs.append(timed(plain, env))
        print(f"  pair {i + 1}: rlaudit {ours[-1][0]:.1f} s (CPU {ours[-1][1]:.1f} s), plain SB3 {theirs[-1][0]:.1f} s "
              f"(CPU {theirs[-1][1]:.1f} s)", flush=True)
    wall = statistics.median(o[0] / t[0] for o, t in zip(ours, theirs))
    cpu = statistics.median(o[1] / t[1] for o, t in zip(ours, theirs))
    return wall, cpu


def run_in_process(proto: Path, store: Path, workers: int) -> float:
    from rich.console import Console

    from rlaudit.protocol import check_runnable, load_protocol, plan
    from rlaudit.run.driver import run_plan
    from rlaudit.run.executors import LocalExecutor

    p = load_protocol(proto)
    check_runnable(p)
    t0 = time.perf_counter()
    run_plan(plan(p), store, LocalExecutor(workers), console=Console(file=open(os.devnull, "w")))
    return time.perf_counter() - t0


def bench_parallel(tmp: Path, budget: int, n_runs: int) -> tuple[float, float, float]:
    proto = protocol(tmp / "parallel.toml", [budget], seeds=n_runs, episodes=5)
    t1 = run_in_process(proto, tmp / "p1.sqlite", 1)
    t2 = run_in_process(proto, tmp / "p2.sqlite", 2)
    return t1 / t2, n_runs / t1, n_runs / t2


def bench_nested(tmp: Path, budgets: list[int], reps: int) -> float:
    nested = protocol(tmp / "nested.toml", budgets)
    single = protocol(tmp / "single.toml", budgets[-1:])
    ratios = []
    for i in range(reps):
        if i % 2:
            ts = run_in_process(single, tmp / f"s{i}.sqlite", 1)
            tn = run_in_process(nested, tmp / f"n{i}.sqlite", 1)
        else:
            tn = run_in_process(nested, tmp / f"n{i}.sqlite", 1)
            ts = run_in_process(single, tmp / f"s{i}.sqlite", 1)
        ratios.append(tn / ts)
        print(f"  rep {i + 1}: nested {tn:.1f} s, largest budget alone {ts:.1f} s", flush=True)
    return statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script, not the targets")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="rlaudit-bench-cache-")
    if args.quick:
        budgets, pairs, episodes, par_budget, par_runs, reps = [1_000, 2_000, 4_096], 1, 3, 2_048, 4, 1
    else:
        budgets, pairs, episodes, par_budget, par_runs, reps = [10_000, 30_000, 100_000], 5, 10, 20_480, 8, 3
    print(f"cores: {len(os.sched_getaffinity(0))}, load average: {os.getloadavg()[0]:.2f}")
    # Import once up front so that no in-process timing below pays for it.
    import stable_baselines3  # noqa: F401
    import torch  # noqa: F401

    from rlaudit.run import driver, runner  # noqa: F401
    with tempfile.TemporaryDirectory(prefix="rlaudit-bench-") as d:
        tmp = Path(d)
        print(f"1. overhead: PPO CartPole-v1, budgets {budgets}, {episodes} eval episodes, {pairs} pairs")
        r1, r1cpu = bench_overhead(tmp, budgets, pairs, episodes)
        print(f"   rlaudit / plain SB3 wall time (median of pairs): {r1:.3f}  (target <= 1.05); CPU time {r1cpu:.3f}")
        print(f"2. parallel: {par_runs} PPO runs of {par_budget} steps, 1 vs 2 workers")
        r2, s1, s2 = bench_parallel(tmp, par_budget, par_runs)
        print(f"   runs/s: 1 worker {s1:.3f}, 2 workers {s2:.3f}; speed-up {r2:.2f}x  (target >= 1.8)")
        print(f"3. nested: budgets {budgets} in one run vs {budgets[-1]} alone, {reps} reps")
        r3 = bench_nested(tmp, budgets, reps)
        print(f"   nested / largest alone (median): {r3:.3f}  (target <= 1.1)")
    print(textwrap.dedent(f"""
        summary: overhead {r1:.3f} (<= 1.05; CPU {r1cpu:.3f}), parallel {r2:.2f}x (>= 1.8), nested {r3:.3f} (<= 1.1)"""))


if __name__ == "__main__":
    main()
