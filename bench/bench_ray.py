"""Per-run overhead of the Ray executor against the local process pool, for many short runs.

Runs one protocol of N short CartPole PPO runs twice with the same number of workers: ``--executor local
-j W`` and ``--executor ray`` on a W-CPU Ray cluster started on 127.0.0.1 (inside a loopback-only network
namespace, as in tests/test_ray.py; needs root). Prints runs/s of both, the ratio, and the overhead per run:
wall time x workers minus the runs' own training time (from the store), divided by the number of runs.
Cluster start-up is not counted; driver start-up (imports, connecting, the per-node probe) is.

    .venv/bin/python bench/bench_ray.py [--runs 24] [--steps 256] [--workers 2]
"""

from __future__ import annotations

import argparse
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


def train_seconds(store: Path) -> float:
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
    args = ap.parse_args()
    why = loopback_unavailable()
    if why:
        sys.exit(f"bench_ray: {why}")
    work = Path(tempfile.mkdtemp(prefix="bench_ray."))
    proto = work / "bench.toml"
    proto.write_text(PROTOCOL.format(seeds=args.runs, steps=args.steps))
    rlaudit = str(BIN / "rlaudit")

    local_store = work / "local.sqlite"
    local_wall = timed([rlaudit, "run", str(proto), "--store", str(local_store), "-j", str(args.workers)], work)
    with LoopbackCluster(node_cpus=(args.workers,)) as cluster:
        ray_store = work / "ray.sqlite"
        ray_wall = timed([rlaudit, "run", str(proto), "--store", str(ray_store), "--executor", "ray",
                          "--address", cluster.address], work,
                         runner=lambda c: cluster.run(c, cwd=work, timeout=3600))
        memory = cluster.memory_mb()

    print(f"{args.runs} runs of {args.steps} env steps (CartPole-v1, PPO), {args.workers} workers")
    rows = []
    for name, wall, store in (("local", local_wall, local_store), ("ray", ray_wall, ray_store)):
        train, n = train_seconds(store)
        assert n == args.runs, f"{name}: {n} runs done"
        overhead = (wall * args.workers - train) / n
        rows.append((name, wall, n / wall, train / n, overhead))
        print(f"  {name:<5} wall {wall:7.1f} s  {n / wall:6.2f} runs/s  training {train / n:5.2f} s/run  "
              f"overhead {overhead:5.2f} s/run (worker-seconds not spent training)")
    (_, _, local_rate, _, local_over), (_, _, ray_rate, _, ray_over) = rows
    print(f"ray / local runs/s: {ray_rate / local_rate:.2f}   "
          f"extra overhead of ray: {ray_over - local_over:+.2f} s/run")
    print(f"ray cluster memory (RSS of all its processes): {memory:.0f} MB")


if __name__ == "__main__":
    main()
