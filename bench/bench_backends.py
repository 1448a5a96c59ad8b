"""Training throughput of the two backends: SB3 (one run per process) against JAX (S seeds vmapped in one process).

MinAtar Breakout with the flagship's DQN settings (``protocols/dqn-family-minatar-250k.toml``: MLP [256, 256], batch
32, one update every 4 steps, buffer 100k), one CPU thread per process. Each backend first plays
``--warmup`` steps (learning starts there), then ``--steps`` steps are timed in the update regime:

- **steps per CPU-second** (user + sys of this process, ``os.times``), the measure that machine load does not
  distort; for JAX, env steps of all S seeds together;
- **wall steps/s**, for reading;
- JAX's **compile time**, separately (the first call of the compiled loop, which the timed steps exclude);
- the **ceiling**: FLOPs of one env step (a quarter of an update — forward, backward and target forward on a
  batch of 32 — plus one acting forward) against the matmul rate this process measures at the update's shapes.

    python bench/bench_backends.py                   # S = 1, 8, 32; 2,000 warm-up + 4,000 timed steps
    python bench/bench_backends.py --seeds 8,64,256  # another machine (a GPU: JAX picks it up)
    python bench/bench_backends.py --protocol protocols/fidelity/minatar-100k.toml --algorithm IQN --seeds 5
        # an algorithm entry of a protocol (its settings, its first task; --warmup replaces learning_starts)

Prints one line per configuration and the ratios to SB3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_NUM_THREADS", "1")

HP = {"learning_rate": 1e-4, "buffer_size": 100_000, "batch_size": 32, "gamma": 0.99, "train_freq": 4,
      "gradient_steps": 1, "target_update_interval": 1_000, "exploration_fraction": 0.1, "exploration_final_eps": 0.01}
NET = [256, 256]
TASK = "MinAtar/Breakout-v1"


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def default_spec():
    """The bench's own run: DQN with the flagship's MLP settings on Breakout."""
    from rlaudit.run.spec import AlgoSpec, RunSpec, TaskSpec

    algo = AlgoSpec("DQN", "DQN", tuple(sorted(HP.items())), (("net_arch", NET),))
    return RunSpec("bench", "", TaskSpec(TASK, "minatar"), algo, 0, (10**6,))


def protocol_spec(path: str, label: str):
    """The first run of ``path``'s algorithm entry ``label`` (its settings, its first task)."""
    from rlaudit.errors import InputError
    from rlaudit.protocol import load_protocol, plan

    runs = [r for r in plan(load_protocol(path)).runs if r.algorithm.label == label]
    if not runs:
        raise InputError(f"{path}: no algorithm entry labelled {label!r}")
    return runs[0]


def bench_sb3(spec, warmup: int, steps: int) -> dict:
    """``spec`` trained by SB3 with the runner's patches, timed from step ``warmup`` to ``warmup + steps``."""
    from rlaudit.algorithms import make_agent
    from rlaudit.run.envs import make_env
    from rlaudit.run.executors import prepare_training_process
    from rlaudit.run.runner import precompute_observation_checks, skip_redundant_mode_switches

    prepare_training_process()
    env = make_env(spec.task, 0)
    a = spec.algorithm
    agent = make_agent(a.name, env, {**a.hyperparams_dict, "learning_starts": warmup}, 0, a.policy_kwargs_dict)
    skip_redundant_mode_switches(agent)
    precompute_observation_checks(agent)
    marks = {}

    def on_step(n: int) -> bool:
        if n == warmup:
            marks["start"] = (cpu(), time.perf_counter())
        return True

    agent.train(warmup + steps, on_step)
    c0, w0 = marks["start"]
    c, w = cpu() - c0, time.perf_counter() - w0
    return {"cpu_rate": steps / c, "wall_rate": steps / w}


def jax_config(spec, warmup: int):
    import dataclasses

    from rlaudit.run.backends.jax.config import agent_config

    hp = {**spec.algorithm.hyperparams_dict, "learning_starts": warmup}
    algo = dataclasses.replace(spec.algorithm, hyperparams=tuple(sorted(hp.items())), backend="jax")
    return agent_config(dataclasses.replace(spec, algorithm=algo, budgets=(10**6,)))


def bench_jax(spec, n_seeds: int, warmup: int, steps: int) -> dict:
    import jax

    from rlaudit.run.backends.jax.training import Program, seed_keys

    prog = Program(jax_config(spec, warmup))  # a fresh program: its compile time is measured here
    total = 10**6
    carries = prog.init(seed_keys(range(n_seeds)))
    jax.block_until_ready(carries.key)
    c0, w0 = cpu(), time.perf_counter()
    carries = prog.run(carries, 0, 1, total)
    jax.block_until_ready(carries.key)
    compile_wall, compile_cpu = time.perf_counter() - w0, cpu() - c0
    carries = prog.run(carries, 1, warmup, total)
    jax.block_until_ready(carries.key)
    c0, w0 = cpu(), time.perf_counter()
    carries = prog.run(carries, warmup, warmup + steps, total)
    jax.block_until_ready(carries.key)
    c, w = cpu() - c0, time.perf_counter() - w0
    return {"cpu_rate": n_seeds * steps / c, "wall_rate": n_seeds * steps / w, "compile_s": compile_wall,
            "compile_cpu_s": compile_cpu}


def ceiling(n_seeds: int) -> dict:
    """FLOPs per env step of one seed and the matmul rate at the update's shapes (S seeds batched)."""
    import jax
    import jax.numpy as jnp

    n_in, n_actions, batch = 400, 3, HP["batch_size"]
    dims = [n_in, *NET, n_actions]
    weights = sum(a * b for a, b in zip(dims, dims[1:]))
    # per update: forward + backward (~2x forward) on the batch, target forward on the next observations
    update = 4 * 2 * batch * weights
    per_step = update / HP["train_freq"] + 2 * weights  # plus the acting forward
    key = jax.random.PRNGKey(0)
    xs = [jax.random.normal(key, (n_seeds, batch, a)) for a in dims[:-1]]
    ws = [jax.random.normal(key, (n_seeds, a, b)) for a, b in zip(dims, dims[1:])]
    f = jax.jit(lambda xs, ws: [jnp.einsum("sbi,sio->sbo", x, w) for x, w in zip(xs, ws)])
    jax.block_until_ready(f(xs, ws))
    reps, c0 = 200, cpu()
    for _ in range(reps):
        out = f(xs, ws)
    jax.block_until_ready(out)
    flops = reps * n_seeds * 2 * batch * weights
    rate = flops / (cpu() - c0)
    return {"flops_per_step": per_step, "matmul_flops_per_cpu_s": rate, "ceiling_steps_per_cpu_s": rate / per_step}


def main(argv=None) -> int:
    from rlaudit.errors import OneLineArgumentParser

    ap = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,8,32", help="numbers of seeds vmapped, comma-separated")
    ap.add_argument("--warmup", type=int, default=2_000, help="steps before timing (learning starts there)")
    ap.add_argument("--steps", type=int, default=4_000, help="steps timed, per seed")
    ap.add_argument("--no-sb3", action="store_true", help="skip the SB3 baseline (e.g. on a GPU machine)")
    ap.add_argument("--protocol", help="bench an algorithm entry of this protocol instead of the MLP DQN")
    ap.add_argument("--algorithm", help="with --protocol: the entry's label")
    args = ap.parse_args(argv)
    if bool(args.protocol) != bool(args.algorithm):
        print("error: --protocol and --algorithm go together", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.seeds.split(",")]
    from rlaudit.run.backends.jax import configure_jax, missing_dependency

    if missing_dependency():
        print(f"error: {missing_dependency()}", file=sys.stderr)
        return 2

    configure_jax()
    import jax

    from rlaudit.errors import InputError

    try:
        spec = protocol_spec(args.protocol, args.algorithm) if args.protocol else default_spec()
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    what = (f"{spec.task.id}, {spec.algorithm.label} of {args.protocol}" if args.protocol else
            f"MinAtar Breakout, DQN, MLP {NET}, one update per {HP['train_freq']} steps, batch {HP['batch_size']}")
    print(f"{what}; {args.warmup:,} warm-up + {args.steps:,} timed steps; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}")
    sb3 = None
    if not args.no_sb3:
        sb3 = bench_sb3(spec, args.warmup, args.steps)
        print(f"SB3              {sb3['cpu_rate']:9,.0f} steps/CPU-s  {sb3['wall_rate']:9,.0f} steps/s wall")
    for n in sizes:
        r = bench_jax(spec, n, args.warmup, args.steps)
        ratio = f"  {r['cpu_rate'] / sb3['cpu_rate']:.2f}x SB3 per CPU-s, {r['wall_rate'] / sb3['wall_rate']:.2f}x wall" \
            if sb3 else ""
        print(f"JAX S = {n:<4}     {r['cpu_rate']:9,.0f} steps/CPU-s  {r['wall_rate']:9,.0f} steps/s wall  "
              f"compile {r['compile_s']:.1f} s wall ({r['compile_cpu_s']:.1f} CPU-s){ratio}")
        if jax.devices()[0].platform == "cpu" and not args.protocol:  # the ceiling knows the MLP DQN only
            c = ceiling(n)
            print(f"  ceiling at S = {n}: {c['flops_per_step'] / 1e6:.1f} MFLOP per env step, matmuls at "
                  f"{c['matmul_flops_per_cpu_s'] / 1e9:.1f} GFLOP/CPU-s -> {c['ceiling_steps_per_cpu_s']:,.0f} "
                  f"steps/CPU-s ({r['cpu_rate'] / c['ceiling_steps_per_cpu_s']:.0%} reached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
