"""Per-run overhead of the Ray executor against the local process pool, for many short runs.

Runs one protocol of N short CartPole PPO runs twice with the same number of workers: ``--executor local
-j W`` and ``--executor ray`` on a W-CPU Ray cluster started on 127.0.0.1 (inside a loopback-only network
namespace, as in tests/test_ray.py; needs root). Prints runs/s of both, the ratio, and the overhead per run:
wall time x workers minus the runs' own training time (from the store), divided by the number of runs.
Cluster start-up is not counted; driver start-up (imports, connecting, the per-node probe) is. Each executor
runs ``--repeat`` times in A B B A order and the means are printed.

    .venv/bin/python bench/bench_ray.py [--runs 24] [--steps 256] [--workers 2] [--repeat 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from ray_cluster import BIN, ENV, LoopbackCluster, loopback_unavailable  # noqa: E402

PROTOCOL = """schema_version = 1
name = "bench-ray"
title = "bench_ray.py: many short runs"
seeds = {seeds}
[budget]
unit = "env_steps"
[regimes]
final = {steps}
[[tasks]]
id = "CartPole-v1"
suite = "gymnasium"
[[algorithms]]
name = "PPO"
hyperparams = {{ n_steps = 64, batch_size = 32, n_epochs = 1 }}
[evaluation]
n_eval_episodes = 1
deterministic = true
"""


def train_seconds(store: Path) -> tuple[float, int]:
    """Training seconds summed over the store's done runs, and their number."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        (total, n), = con.execute("SELECT SUM(wall_time), COUNT(*) FROM runs WHERE status='done'")
    finally:
        con.close()
    return float(total or 0.0), int(n)


def timed(cmd: list[str], cwd: Path, runner=None) -> float:
    t0 = time.perf_counter()
    done = (runner or (lambda c: subprocess.run(c, cwd=cwd, env=ENV, capture_output=True, text=True)))(cmd)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=4, help="sweeps per executor, alternating (A B B A …)")
    args = ap.parse_args()
    why = loopback_unavailable()
    if why:  # not a failure of rlaudit: `make bench` goes on with the other benches
        print(f"bench_ray: skipped ({why})")
        return
    work = Path(tempfile.mkdtemp(prefix="bench_ray."))
    try:
        bench(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench(args: argparse.Namespace, work: Path) -> None:
    """Run both executors ``args.repeat`` times on a protocol written into ``work`` and print the figures."""
    proto = work / "bench.toml"
    proto.write_text(PROTOCOL.format(seeds=args.runs, steps=args.steps))
    rlaudit = str(BIN / "rlaudit")

    results: dict[str, list[tuple[float, float, int]]] = {"local": [], "ray": []}  # (wall, training s, runs)

    def local(i: int) -> None:
        store = work / f"local{i}.sqlite"
        wall = timed([rlaudit, "run", str(proto), "--store", str(store), "-j", str(args.workers)], work)
        results["local"].append((wall, *train_seconds(store)))

    with LoopbackCluster(node_cpus=(args.workers,)) as cluster:

        def on_ray(i: int) -> None:
            store = work / f"ray{i}.sqlite"
            wall = timed([rlaudit, "run", str(proto), "--store", str(store), "--executor", "ray",
                          "--address", cluster.address], work,
                         runner=lambda c: cluster.run(c, cwd=work, timeout=3600))
            results["ray"].append((wall, *train_seconds(store)))

        # A B B A order, so that a change of machine load during the bench hits both executors alike.
        for i in range(args.repeat):
            order = (local, on_ray) if i % 2 == 0 else (on_ray, local)
            for fn in order:
                fn(i)
        memory = cluster.memory_mb()

    print(f"{args.runs} runs of {args.steps} env steps (CartPole-v1, PPO), {args.workers} workers, "
          f"{args.repeat} repeats (mean)")
    rates = {}
    overheads = {}
    for name, rows in results.items():
        assert all(n == args.runs for _, _, n in rows), f"{name}: not every run done"
        wall = sum(w for w, _, _ in rows) / len(rows)
        train = sum(t for _, t, _ in rows) / len(rows)
        rates[name] = args.runs / wall
        overheads[name] = (wall * args.workers - train) / args.runs
        print(f"  {name:<5} wall {wall:7.1f} s  {rates[name]:6.2f} runs/s  training {train / args.runs:5.2f} s/run  "
              f"overhead {overheads[name]:5.2f} s/run (worker-seconds not spent training)  "
              f"[walls: {', '.join(f'{w:.1f}' for w, _, _ in rows)}]")
    print(f"ray / local runs/s: {rates['ray'] / rates['local']:.2f}   "
          f"extra overhead of ray: {overheads['ray'] - overheads['local']:+.2f} s/run")
    print(f"ray cluster memory (RSS of all its processes): {memory:.0f} MB")
    with open("/proc/loadavg") as f:
        print(f"load average at the end (1 / 5 / 15 min): {' / '.join(f.read().split()[:3])} on "
              f"{os.cpu_count()} cores")


if __name__ == "__main__":
    main()
