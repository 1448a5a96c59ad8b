"""One run of a reference implementation, in the reference's own interpreter: ``python -m rlaudit.fidelity.worker``.

Reads ``{"spec": RunSpec JSON, "backend": "module:function", "seed_offset": int}`` on stdin, trains and
evaluates the run with :func:`rlaudit.run.runner.execute_run` (the same training loop bookkeeping, evaluation
points, episode seeds, ε and step cap as a built-in run) with the agent built by the backend, and writes one
JSON event per line to its stdout:

``{"event": "record", "env_steps": n, "returns": [...], "lengths": [...], "wall_time": s}``,
``{"event": "progress", "env_steps": n}``, ``{"event": "finished", "env_steps": n, "wall_time": s, "cpu_time": s}``,
``{"event": "failed", "error": "traceback"}``.

Anything else the libraries print on stdout goes to stderr (the real stdout is kept for the events only).
Imports nothing that needs torch unless the backend does (the ``self`` reference's does).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from dataclasses import replace


def builtin_agent(spec, env):
    """The ``self`` reference's backend: the registered built-in, as ``rlaudit run`` builds it."""
    from rlaudit.algorithms import make_agent
    from rlaudit.run.executors import prepare_training_process
    from rlaudit.run.runner import precompute_observation_checks, skip_redundant_mode_switches

    prepare_training_process()
    agent = make_agent(spec.algorithm.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                       policy_kwargs=spec.algorithm.policy_kwargs_dict or None)
    skip_redundant_mode_switches(agent)
    precompute_observation_checks(agent)
    return agent


def _backend(text: str):
    module, _, attr = text.partition(":")
    return getattr(importlib.import_module(module), attr)


def main() -> int:
    events = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # library chatter on fd 1 goes to stderr
    sys.stdout = sys.stderr

    def send(**event) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    try:
        from rlaudit.run.runner import execute_run
        from rlaudit.run.spec import RunSpec

        job = json.loads(sys.stdin.read())
        spec = RunSpec.from_json(job["spec"])
        offset = int(job.get("seed_offset", 0))
        # The reference trains its own seed; the evaluation episodes stay those of the run it is compared with.
        spec = replace(spec, seed=spec.seed + offset) if offset else spec
        build = _backend(job["backend"])
        result = execute_run(
            spec,
            lambda rec: send(event="record", env_steps=rec.env_steps, returns=list(rec.returns),
                             lengths=list(rec.lengths), wall_time=rec.wall_time),
            progress=lambda steps: send(event="progress", env_steps=steps),
            build_agent=build,
        )
        send(event="finished", env_steps=result.env_steps, wall_time=result.wall_time, cpu_time=result.cpu_time)
        return 0
    except BaseException:  # noqa: BLE001 - the run's failure is reported to the parent, whatever it is
        send(event="failed", error=traceback.format_exc())
        return 1


if __name__ == "__main__":
    sys.exit(main())
