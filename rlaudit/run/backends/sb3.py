"""The default backend: stable-baselines3 / sb3-contrib algorithms and learner plugins, one run per process.

Each run is a batch of its own and trains through :func:`rlaudit.run.runner.execute_run` (PyTorch, one thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rlaudit.errors import InputError
from rlaudit.run.spec import EvalRecord, RunSpec


class SB3Backend:
    """Every registered algorithm on every suite, one run at a time (see :mod:`rlaudit.run.backends`)."""

    name = "sb3"
    max_batch = 1

    def missing_dependency(self) -> None:
        """Nothing: stable-baselines3 and torch are core dependencies."""
        return None

    def check(self, algorithm, spec, tasks, evaluation, where: str) -> None:
        """Hyperparameters and ``policy_kwargs`` (base and per regime) against the algorithm class's constructor
        and its policy, and every task's action space against the algorithm's."""
        from rlaudit.algorithms.hyperparams import check_policy_kwargs

        spec.check_hyperparams(algorithm.hyperparams, f"{where}.hyperparams")
        check_policy_kwargs(spec.load(), algorithm.hyperparams.get("policy"), algorithm.policy_kwargs,
                            f"{where}.policy_kwargs", algorithm.name)
        for rname in algorithm.regimes:
            hp, pk = algorithm.settings_for(rname)
            spec.check_hyperparams(hp, f"{where}.regimes.{rname}.hyperparams")
            check_policy_kwargs(spec.load(), hp.get("policy"), pk, f"{where}.regimes.{rname}.policy_kwargs",
                                algorithm.name)
        for _, task, _, space in tasks:
            if not spec.supports(space):
                raise InputError(f"{where}: {algorithm.name} supports {', '.join(sorted(spec.action_spaces))} action "
                                 f"spaces, but task {task.id!r} has a {type(space).__name__} action space ({space})")

    def batch_key(self, spec: RunSpec) -> str:
        """Every run is its own batch."""
        return spec.run_id

    def execute(self, batch: Sequence[RunSpec], emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None, checkpoints=None) -> list:
        """Train the batch's one run (resuming its checkpoint, and checkpointing it, when ``checkpoints`` is
        given and the algorithm allows: :mod:`rlaudit.run.checkpoint`)."""
        from rlaudit.run.runner import execute_run

        return [execute_run(spec, emit, progress, checkpoints=checkpoints) for spec in batch]
