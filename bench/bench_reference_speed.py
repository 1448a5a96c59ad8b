"""Steps per CPU-second of one reference run (rlaudit.fidelity), in the reference's interpreter.

    /work/venvs/dopamine/bin/python bench/bench_reference_speed.py C51 MinAtar/SpaceInvaders-v1 20000

Plans seed 0 of ALGORITHM (label) on TASK from protocols/fidelity/minatar-100k.toml, trains STEPS steps with the
Dopamine backend through rlaudit.run.runner.execute_run (one 3-episode evaluation at the end) and prints the
process CPU time (time.process_time: JAX compilation and the evaluation included). One thread: run it with the
variables of rlaudit.fidelity.references.worker_environment (OMP/XLA single-threaded, JAX on the CPU)."""

from __future__ import annotations

import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlaudit.fidelity.dopamine_backend import build_agent  # noqa: E402
from rlaudit.run.runner import execute_run  # noqa: E402
from rlaudit.run.spec import AlgoSpec, EvalSpec, RunSpec, TaskSpec  # noqa: E402


def main(label: str, task_id: str, steps: int) -> None:
    doc = tomllib.loads((ROOT / "protocols" / "fidelity" / "minatar-100k.toml").read_text())
    entry = next(a for a in doc["algorithms"] if a.get("label", a["name"]) == label)
    task = next(t for t in doc["tasks"] if t["id"] == task_id)
    spec = RunSpec(f"bench__{label}", "bench", TaskSpec(task_id, "minatar", tuple(sorted(task["kwargs"].items()))),
                   AlgoSpec(entry["name"], label, tuple(sorted(entry["hyperparams"].items())),
                            tuple(sorted(entry["policy_kwargs"].items()))),
                   0, (steps,), EvalSpec(n_eval_episodes=3, epsilon=0.001))
    t0 = time.process_time()
    result = execute_run(spec, lambda rec: print("evaluation", rec.env_steps, rec.returns), build_agent=build_agent)
    cpu = time.process_time() - t0
    print(f"{label} {task_id}: {result.env_steps} steps in {cpu:.1f} CPU-s = {result.env_steps / cpu:.0f} steps/CPU-s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
