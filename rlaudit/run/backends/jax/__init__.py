"""The JAX backend: the DQN family compiled end to end, the seeds of one (algorithm, task, regime) vmapped.

``backend = "jax"`` on an ``[[algorithms]]`` entry (or at the top of a protocol) trains its runs here instead
of through stable-baselines3: DQN, DoubleDQN, DuelingDQN, PrioritizedDQN (and DQNFamily's combinations of
double, dueling, prioritized, n-step), C51, QR-DQN, IQN and Dopamine's Rainbow, in JAX with optax, on the tasks
whose training environment is registered in :mod:`.envs` (MinAtar through pgx, gymnasium's CartPole-v1). The
runs of one entry that differ only in their seed form one batch: one process, one compiled program, one
``vmap`` over the seeds (:mod:`.training`). Hyperparameters keep the SB3 names, meanings and
defaults (:mod:`.config`); evaluations are the SB3 path's, made by the same function on the same
environments. ``docs/backends.md`` has the measured throughput and the equivalence with the SB3 backend.

Needs the optional extra: ``pip install 'rlaudit[jax]'`` (jax, jaxlib, optax, pgx). Without it, ``validate``
refuses a protocol that asks for this backend in one line and everything else works.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from rlaudit.errors import InputError
from rlaudit.run.spec import EvalRecord, RunSpec

INSTALL_HINT = "the jax backend needs JAX: pip install 'rlaudit[jax]' (jax, jaxlib, optax, pgx)"

SINGLE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
"""XLA flags for one CPU thread per process (as torch's one thread per run): workers share the cores, and the
numbers do not depend on how many there are."""

MAX_BATCH = 64
"""At most this many runs (seeds) in one vmapped batch; more are split into several batches."""


def missing_dependency() -> str | None:
    """``None`` when jax, optax and pgx import, else what is missing (one line)."""
    import importlib.util

    missing = [m for m in ("jax", "jaxlib", "optax", "pgx") if importlib.util.find_spec(m) is None]
    return f"{INSTALL_HINT}; missing here: {', '.join(missing)}" if missing else None


def configure_jax() -> None:
    """One XLA CPU thread unless the user set ``XLA_FLAGS`` themselves, and the persistent compilation cache;
    before JAX is first imported (the flags are read then)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {SINGLE_THREAD_FLAGS}".strip()
    import jax

    from rlaudit.run.driver import throughput_cache

    # Without this a second thread runs the program while the caller's thread waits for it busily: with 2 cores
    # the process used ~1.4 CPU-s per second of wall time for the same steps (bench/bench_backends.py).
    jax.config.update("jax_cpu_enable_async_dispatch", False)

    cache = os.environ.get("RLAUDIT_JAX_CACHE") or str(throughput_cache().parent / "jax")
    if cache != "off" and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def jax_facts() -> dict[str, str]:
    """``jax``, ``jaxlib`` (versions) and ``jax_devices`` (``platform kind`` of each kind of device JAX runs on,
    e.g. ``gpu NVIDIA H200``; ``cpu`` alone on a CPU): a JAX run's arithmetic is XLA's on those devices, not
    torch's, so the driver's machine fingerprint records them (:meth:`JaxBackend.machine_facts`)."""
    configure_jax()  # before JAX is first imported: its XLA flags are read then
    import jax
    import jaxlib

    kinds = dict.fromkeys(d.platform if str(getattr(d, "device_kind", "")).lower() in ("", d.platform) else
                          f"{d.platform} {d.device_kind}" for d in jax.devices())
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "jax_devices": ", ".join(kinds)}


class JaxBackend:
    """See the module docstring and :class:`rlaudit.run.backends.Backend`."""

    name = "jax"
    max_batch = MAX_BATCH
    reference_speedup = 3.0
    """CPU throughput of a batch over the SB3 reference rate, for estimates before this machine has measured
    one (bench/bench_backends.py: 2.7-3.7x at 8 seeds on the development machine, DQN with an MLP)."""
    reference_speedups = {("DQN", "minatar"): 2.34, ("C51", "minatar"): 1.24, ("QRDQN", "minatar"): 1.41,
                          ("DopamineRainbow", "minatar"): 1.10, ("IQN", "minatar"): 1.34}
    """Per (algorithm, suite), where measured: at the published MinAtar settings, 5 seeds a batch
    (docs/backends.md Throughput; the distributional heads make the update matmul-bound, so vmapping seeds gains
    less than for DQN's MLP)."""

    def missing_dependency(self) -> str | None:
        """What of the ``jax`` extra is not installed here (``None``: all of it is)."""
        return missing_dependency()

    def machine_facts(self) -> dict[str, str]:
        """What this backend adds to the driver's machine fingerprint: :func:`jax_facts`."""
        return jax_facts()

    def check(self, algorithm, spec, tasks, evaluation, where: str) -> None:
        """The entry's hyperparameters, ``policy_kwargs``, tasks and evaluation against what this backend
        implements (:mod:`.config`), then that JAX is installed."""
        from rlaudit.run.backends.jax import config

        config.check_hyperparams(spec, algorithm.hyperparams, f"{where}.hyperparams")
        config.check_policy_kwargs(spec, algorithm.policy_kwargs, algorithm.hyperparams, f"{where}.policy_kwargs")
        for rname in algorithm.regimes:
            hp, pk = algorithm.settings_for(rname)
            config.check_hyperparams(spec, hp, f"{where}.regimes.{rname}.hyperparams")
            config.check_policy_kwargs(spec, pk, hp, f"{where}.regimes.{rname}.policy_kwargs")
        for task_where, task, _, _ in tasks:
            config.check_task(task, task_where, spec)
            config.check_features_extractor(task, algorithm.policy_kwargs, f"{where}.policy_kwargs", spec)
            for rname in algorithm.regimes:
                config.check_features_extractor(task, algorithm.settings_for(rname)[1],
                                                f"{where}.regimes.{rname}.policy_kwargs", spec)
        config.check_evaluation(evaluation, f"{where}: evaluation.deterministic", spec)
        missing = missing_dependency()
        if missing:
            raise InputError(f"{where}.backend: {missing}")

    def batch_key(self, spec: RunSpec) -> str:
        """Everything but the seed (and the evaluation seed derived from it), as canonical JSON."""
        import json
        from dataclasses import asdict

        ev = spec.eval
        return json.dumps([asdict(spec.algorithm), asdict(spec.task), spec.budgets, spec.regime_kind, spec.regime,
                           [ev.n_eval_episodes, ev.deterministic, ev.epsilon, ev.eval_every]], sort_keys=True,
                          default=str)

    def execute(self, batch: Sequence[RunSpec], emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None, checkpoints=None) -> list:
        """Train ``batch`` in one vmapped program (:func:`.training.train_batch`). No mid-run checkpoints
        (``checkpoints`` is ignored): the whole loop is one compiled ``lax.scan``, and a killed batch restarts."""
        missing = missing_dependency()
        if missing:
            raise RuntimeError(missing)
        configure_jax()
        from rlaudit.run.backends.jax.config import agent_config
        from rlaudit.run.backends.jax.training import train_batch

        return train_batch(batch, agent_config(batch[0]), emit, progress)
