"""Run-engine benchmarks; prints ratios (targets from issues 4 and 11).

1. overhead: ``rlaudit run`` (one PPO run, evaluations at 3 budgets) vs a plain stable-baselines3 script
   doing the same training and evaluations; both as fresh processes; median over pairs. Target ≤ 1.05.
2. parallel: runs/s with ``--workers 2`` vs ``--workers 1`` on the same sweep (driver API in-process;
   worker start-up included). Target ≥ 1.8 on 2 cores.
3. nested: a 3-budget nested protocol vs its largest budget alone. Target ≤ 1.1.
4. minatar: steps/s of ``rlaudit run`` (DQN, MinAtar Breakout, MLP [256, 256], the hyperparameters of
   ``protocols/dqn-family-minatar-250k.toml``, evaluations every ``budget/3`` steps) vs a bare SB3 DQN script
   doing the same training and evaluations the way a user writes it (float32 observations, one episode at
   a time); fresh processes, median over pairs. Target ≥ 1.0 (never slower).
5. minatar-parallel: the same DQN runs with 2 workers vs 1. Target ≥ 1.8 on 2 cores.

Run on a quiet machine: ``.venv/bin/python bench/bench_run.py`` (about 10 minutes on 2 cores for parts 1-3,
``--parts minatar,minatar-parallel`` about 10 more), or ``--quick`` (a few minutes; checks that the benchmark
works, the ratios are not meaningful). The load average is printed before each part; on a busy machine
compare the CPU-time ratios: wall-time ratios then mostly measure the other processes.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
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

BARE_DQN = """
import sys, tomllib
import gymnasium, numpy as np, torch, minatar.gym
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback
torch.set_num_threads(1)
minatar.gym.register_envs()
budgets = [int(b) for b in sys.argv[1].split(",")]
n_episodes, epsilon, max_steps = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
hp = tomllib.loads(sys.argv[5])["hp"]
def make():
    env = gymnasium.make("MinAtar/Breakout-v1", max_episode_steps=max_steps)
    return gymnasium.wrappers.TransformObservation(
        env, lambda o: o.astype(np.float32), gymnasium.spaces.Box(0.0, 1.0, env.observation_space.shape, np.float32))
eval_env = make()
def evaluate(model, steps):
    rng, out = np.random.default_rng(steps), []
    for i in range(n_episodes):
        obs, _ = eval_env.reset(seed=i)
        done, total = False, 0.0
        while not done:
            if rng.random() < epsilon:
                action = eval_env.action_space.sample()
            else:
                action, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = eval_env.step(action)
            total += r
            done = term or trunc
        out.append(total)
    return out
class Eval(BaseCallback):
    def _on_step(self):
        if self.num_timesteps in budgets[:-1]:
            evaluate(self.model, self.num_timesteps)
        return True
model = DQN("MlpPolicy", make(), seed=0, device="cpu", policy_kwargs={"net_arch": [256, 256]}, **hp)
model.learn(budgets[-1], callback=Eval())
evaluate(model, budgets[-1])
"""

MINATAR_PROTOCOL = """
schema_version = 1
name = "bench-minatar"
seeds = {seeds}
[regimes]
high = {budget}
[[tasks]]
id = "MinAtar/Breakout-v1"
suite = "minatar"
[[algorithms]]
name = "DQN"
hyperparams = {{ {hp} }}
policy_kwargs = {{ net_arch = [256, 256] }}
[evaluation]
n_eval_episodes = {episodes}
deterministic = true
epsilon = {epsilon}
eval_every = {eval_every}
max_episode_steps = {max_steps}
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


def minatar_hyperparams(budget: int) -> dict:
    """The DQN entry of the MinAtar flagship protocol, with learning starting at a tenth of ``budget``."""
    import tomllib

    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "protocols" / "dqn-family-minatar-250k.toml").read_text())
    hp = dict(next(a for a in doc["algorithms"] if a["name"] == "DQN")["hyperparams"])
    hp["learning_starts"] = min(hp["learning_starts"], budget // 10)
    return hp


def _toml_inline(hp: dict) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in hp.items())


def minatar_protocol(path: Path, budget: int, seeds: int, episodes: int, epsilon: float, max_steps: int) -> Path:
    path.write_text(MINATAR_PROTOCOL.format(seeds=seeds, budget=budget, hp=_toml_inline(minatar_hyperparams(budget)),
                                            episodes=episodes, epsilon=epsilon, eval_every=budget // 3,
                                            max_steps=max_steps))
    return path


def bench_minatar(tmp: Path, budget: int, pairs: int, episodes: int) -> tuple[float, float, float, float]:
    """(steps/s ratio rlaudit / bare on wall time, on CPU time, rlaudit steps/s, bare steps/s), medians."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_CACHE_HOME": str(tmp / "cache")}
    bare = tmp / "bare_dqn.py"
    bare.write_text(BARE_DQN)
    epsilon, max_steps = 0.001, 3_000
    proto = minatar_protocol(tmp / "minatar.toml", budget, 1, episodes, epsilon, max_steps)
    third = budget // 3
    budgets = ",".join(str(b) for b in (third, 2 * third, budget))
    hp = "hp = { " + _toml_inline(minatar_hyperparams(budget)) + " }"
    ours, theirs = [], []
    for i in range(pairs):
        store = tmp / f"minatar{i}.sqlite"
        run = [PYTHON, "-m", "rlaudit", "run", str(proto), "--store", str(store), "--workers", "1"]
        plain = [PYTHON, str(bare), budgets, str(episodes), str(epsilon), str(max_steps), hp]
        first, second = (plain, run) if i % 2 else (run, plain)
        a = timed(first, env)
        b = timed(second, env)
        o, t = (b, a) if i % 2 else (a, b)
        ours.append(o)
        theirs.append(t)
        print(f"  pair {i + 1}: rlaudit {o[0]:.1f} s (CPU {o[1]:.1f} s), bare SB3 {t[0]:.1f} s (CPU {t[1]:.1f} s); "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    wall = statistics.median(t[0] / o[0] for o, t in zip(ours, theirs))
    cpu = statistics.median(t[1] / o[1] for o, t in zip(ours, theirs))
    return wall, cpu, budget / statistics.median(o[0] for o in ours), budget / statistics.median(t[0] for t in theirs)


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def bench_minatar_parallel(tmp: Path, budget: int, n_runs: int) -> tuple[float, float, float, float, float]:
    """(speed-up, steps/s with 1 worker, with 2, CPU-s with 1 worker, with 2).

    The CPU seconds (the driver's own with one worker, which runs inline; the workers' with two) tell
    whether a shortfall is overhead of the pool or cores taken by other processes.
    """
    proto = minatar_protocol(tmp / "minatar_par.toml", budget, n_runs, 10, 0.001, 3_000)
    c1 = _cpu_seconds(resource.RUSAGE_SELF)
    t1 = run_in_process(proto, tmp / "mp1.sqlite", 1)
    c1 = _cpu_seconds(resource.RUSAGE_SELF) - c1
    c2 = _cpu_seconds(resource.RUSAGE_CHILDREN)
    t2 = run_in_process(proto, tmp / "mp2.sqlite", 2)
    c2 = _cpu_seconds(resource.RUSAGE_CHILDREN) - c2
    return t1 / t2, n_runs * budget / t1, n_runs * budget / t2, c1, c2


PARTS = ("overhead", "parallel", "nested", "minatar", "minatar-parallel")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script, not the targets")
    ap.add_argument("--parts", default="overhead,parallel,nested",
                    help=f"comma-separated parts to run, from {', '.join(PARTS)} (default: the first three)")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="rlaudit-bench-cache-")
    if args.quick:
        budgets, pairs, episodes, par_budget, par_runs, reps = [1_000, 2_000, 4_096], 1, 3, 2_048, 4, 1
        mn_budget, mn_pairs, mn_par_budget, mn_par_runs = 3_000, 1, 2_000, 2
    else:
        budgets, pairs, episodes, par_budget, par_runs, reps = [10_000, 30_000, 100_000], 5, 10, 20_480, 8, 3
        mn_budget, mn_pairs, mn_par_budget, mn_par_runs = 30_000, 3, 30_000, 4
    print(f"cores: {len(os.sched_getaffinity(0))}, load average: {os.getloadavg()[0]:.2f}")
    # Import once up front so that no in-process timing below pays for it.
    import stable_baselines3  # noqa: F401
    import torch  # noqa: F401

    from rlaudit.run import driver, runner  # noqa: F401
    summary = []
    with tempfile.TemporaryDirectory(prefix="rlaudit-bench-") as d:
        tmp = Path(d)
        if "overhead" in parts:
            print(f"1. overhead: PPO CartPole-v1, budgets {budgets}, {episodes} eval episodes, {pairs} pairs")
            r1, r1cpu = bench_overhead(tmp, budgets, pairs, episodes)
            print(f"   rlaudit / plain SB3 wall time (median of pairs): {r1:.3f}  (target <= 1.05); CPU time {r1cpu:.3f}")
            summary.append(f"overhead {r1:.3f} (<= 1.05; CPU {r1cpu:.3f})")
        if "parallel" in parts:
            print(f"2. parallel: {par_runs} PPO runs of {par_budget} steps, 1 vs 2 workers; load {os.getloadavg()[0]:.2f}")
            r2, s1, s2 = bench_parallel(tmp, par_budget, par_runs)
            print(f"   runs/s: 1 worker {s1:.3f}, 2 workers {s2:.3f}; speed-up {r2:.2f}x  (target >= 1.8)")
            summary.append(f"parallel {r2:.2f}x (>= 1.8)")
        if "nested" in parts:
            print(f"3. nested: budgets {budgets} in one run vs {budgets[-1]} alone, {reps} reps")
            r3 = bench_nested(tmp, budgets, reps)
            print(f"   nested / largest alone (median): {r3:.3f}  (target <= 1.1)")
            summary.append(f"nested {r3:.3f} (<= 1.1)")
        if "minatar" in parts:
            print(f"4. minatar: DQN MinAtar/Breakout-v1 MLP [256, 256], {mn_budget} steps, 3 evaluations x 10 "
                  f"episodes, {mn_pairs} pairs; load {os.getloadavg()[0]:.2f}")
            r4, r4cpu, ours, theirs = bench_minatar(tmp, mn_budget, mn_pairs, 10)
            print(f"   steps/s: rlaudit {ours:.0f}, bare SB3 {theirs:.0f}; rlaudit / bare (median of pairs) "
                  f"{r4:.3f} on wall time (target >= 1.0), {r4cpu:.3f} on CPU time")
            summary.append(f"minatar {r4:.3f} (>= 1.0; CPU {r4cpu:.3f})")
        if "minatar-parallel" in parts:
            print(f"5. minatar-parallel: {mn_par_runs} DQN MinAtar runs of {mn_par_budget} steps, 1 vs 2 workers; "
                  f"load {os.getloadavg()[0]:.2f}")
            r5, s1, s2, c1, c2 = bench_minatar_parallel(tmp, mn_par_budget, mn_par_runs)
            print(f"   steps/s: 1 worker {s1:.0f}, 2 workers {s2:.0f}; speed-up {r5:.2f}x  (target >= 1.8); "
                  f"CPU s: 1 worker {c1:.0f}, 2 workers {c2:.0f} (with worker start-up); load {os.getloadavg()[0]:.2f}")
            summary.append(f"minatar-parallel {r5:.2f}x (>= 1.8)")
    print("\nsummary: " + ", ".join(summary))


if __name__ == "__main__":
    main()
