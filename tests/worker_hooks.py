"""Worker bodies for the local executor's pool with a test's change applied first, and a backend that sleeps.

The pool's workers are fresh (spawned) interpreters: a test's monkeypatches do not reach them. A test
monkeypatches one of the ``*_worker`` functions below in for ``rlaudit.run.executors._worker_main``; the spawned
worker then imports this module, applies the change and hands over to the real worker body.
"""

from __future__ import annotations

import time

from rlaudit.run.executors import _worker_main as _real_worker_main
from rlaudit.run.spec import AlgoSpec, RunResult, RunSpec, TaskSpec

SLEEPING = "sleeping"
"""Name of :class:`SleepingBackend` where it is registered."""


class SleepingBackend:
    """A backend whose runs of one protocol hash form one batch, which "trains" by sleeping
    ``hyperparams["sleep"]`` seconds and finishes every run: a batch of several runs in a worker process for a
    few CPU-milliseconds (see :class:`rlaudit.run.backends.Backend`)."""

    name = SLEEPING
    max_batch = None

    def missing_dependency(self) -> None:
        return None

    def check(self, algorithm, spec, tasks, evaluation, where: str) -> None:
        return None

    def batch_key(self, spec: RunSpec) -> str:
        return spec.protocol_hash

    def execute(self, batch, emit, progress=None) -> list:
        seconds = dict(batch[0].algorithm.hyperparams)["sleep"]
        time.sleep(seconds)
        return [RunResult(s.run_id, s.total_steps, seconds, 0.0) for s in batch]


def sleeping_specs(batch: str, n_runs: int, sleep: float) -> list[RunSpec]:
    """``n_runs`` runs ``<batch>0``, ``<batch>1``, … of one batch of :class:`SleepingBackend` (their protocol hash
    is ``batch``) sleeping ``sleep`` seconds together."""
    task = TaskSpec("CartPole-v1")
    algo = AlgoSpec("Sleeper", "Sleeper", (("sleep", sleep),), (), SLEEPING)
    return [RunSpec(f"{batch}{i}", batch, task, algo, i, (100,)) for i in range(n_runs)]


def sleeping_backend_worker(*args) -> None:
    """The worker body with :class:`SleepingBackend` registered."""
    from rlaudit.run import backends

    backends.BACKENDS.setdefault(SLEEPING, f"{__name__}:SleepingBackend")
    _real_worker_main(*args)


SIMULATED_COMPILE_FAILURE = "XlaRuntimeError: simulated compile failure"


def failing_c51_worker(*args) -> None:
    """The worker body with the JAX program of every C51-head configuration failing to build, as a compile failure
    would (:data:`SIMULATED_COMPILE_FAILURE`); the other programs build."""
    from rlaudit.run.backends.jax import configure_jax

    configure_jax()  # before training imports JAX, as the backend does
    from rlaudit.run.backends.jax import training

    real = training.program

    def failing(cfg):
        if cfg.distributional == "c51":
            raise RuntimeError(SIMULATED_COMPILE_FAILURE)
        return real(cfg)

    training.program = failing
    _real_worker_main(*args)


class AllocatorProbeBackend(SleepingBackend):
    """:class:`SleepingBackend` whose runs fail unless the process training them has already called
    :func:`rlaudit.run.allocator.keep_freed_memory` (the executors' workers do, before the first batch)."""

    def execute(self, batch, emit, progress=None) -> list:
        from rlaudit.run.allocator import keep_freed_memory

        if keep_freed_memory.cache_info().currsize != 1:
            raise RuntimeError("keep_freed_memory was not called in this training process")
        return super().execute(batch, emit, progress)


def allocator_probe_worker(*args) -> None:
    """The worker body with :class:`AllocatorProbeBackend` registered under :data:`SLEEPING`."""
    from rlaudit.run import backends

    backends.BACKENDS[SLEEPING] = f"{__name__}:AllocatorProbeBackend"
    _real_worker_main(*args)
