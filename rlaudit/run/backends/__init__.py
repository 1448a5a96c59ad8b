"""Training backends: what trains a run, behind one contract with the executors, the driver and the store.

A backend takes planned :class:`~rlaudit.run.spec.RunSpec` objects and turns them into evaluation records and
results. Executors never know which backend trains a run: they group the runs into **batches**
(:func:`make_batches`, runs whose backend says they may train together in one process), hand each batch to
:func:`execute_batch` in a worker, and report one event per run to the driver (started, each evaluation,
finished or failed), exactly as for a single run. The driver and the store see runs only.

==========  ==============================================================================================
backend     what it runs
==========  ==============================================================================================
``sb3``     every registered algorithm (stable-baselines3, sb3-contrib, the DQN family, learner plugins) on
            every suite, one run per batch (:func:`rlaudit.run.runner.execute_run`); the default
``jax``     the DQN family in JAX (optax), the whole training loop compiled, the seeds of one (algorithm,
            task, regime) vmapped in one process, MinAtar through pgx (:mod:`rlaudit.run.backends.jax`);
            needs ``pip install 'rlaudit[jax]'``
==========  ==============================================================================================

Backends are named in :data:`BACKENDS` as ``"module:attr"`` and imported only when used; an algorithm's
registry entry lists the backends that implement it (``rlaudit algorithms``), and ``rlaudit validate`` asks
the backend of each ``[[algorithms]]`` entry whether it can run it (:meth:`Backend.check`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, runtime_checkable

from rlaudit.errors import InputError, did_you_mean
from rlaudit.run.spec import EvalRecord, RunResult, RunSpec

BACKENDS: dict[str, str] = {
    "sb3": "rlaudit.run.backends.sb3:SB3Backend",
    "jax": "rlaudit.run.backends.jax:JaxBackend",
}
"""Backend name -> ``"module:attr"`` of its class (constructed without arguments)."""

DEFAULT_BACKEND = "sb3"
"""The backend of an ``[[algorithms]]`` entry that names none (and of a protocol without ``backend``)."""

Outcome = RunResult | str
"""What a batch gives for each of its runs: the :class:`RunResult`, or the error text of a run that failed
alone (a diverged seed) while the others went on."""


@runtime_checkable
class Backend(Protocol):
    """What a backend implements. Optionally also ``machine_facts() -> dict[str, str]``: what it adds to the
    driver's machine fingerprint (:func:`machine_facts`)."""

    name: str
    """Its name in :data:`BACKENDS` and in protocols (``backend = "jax"``)."""
    max_batch: int | None
    """Most runs in one batch (``None``: no limit); :func:`make_batches` splits larger groups."""

    def missing_dependency(self) -> str | None:
        """``None`` when what the backend needs imports here, else one line saying what to install."""

    def check(self, algorithm, spec, tasks, evaluation, where: str) -> None:
        """Raise :class:`~rlaudit.errors.InputError` (naming ``where``) unless this backend can run the
        protocol's ``[[algorithms]]`` entry ``algorithm`` (:class:`~rlaudit.protocol.schema.Algorithm`, its
        registry ``spec``) on every task of ``tasks`` (``(where, Task, TaskSpec, action space)`` tuples) with
        the protocol's ``evaluation``."""

    def batch_key(self, spec: RunSpec) -> Hashable:
        """Runs with equal keys may train together in one batch (one process, one compiled program)."""

    def execute(self, batch: Sequence[RunSpec], emit: Callable[[EvalRecord], None],
                progress: Callable[[int], None] | None = None, checkpoints=None) -> list[Outcome]:
        """Train ``batch``: call ``emit`` with each evaluation as it is made, ``progress`` with the env steps
        done (at most about once a second); return one :data:`Outcome` per run, in order. Raising fails the
        whole batch (every run of it is recorded failed with the traceback; the sweep goes on).
        ``checkpoints`` (:class:`~rlaudit.run.checkpoint.Checkpoints` or ``None``): where runs that can be
        checkpointed keep their mid-run state, and resume it from; a backend may train without them."""


_instances: dict[str, Backend] = {}


def backend_names() -> tuple[str, ...]:
    """Every backend name, the default first."""
    return tuple(BACKENDS)


def check_backend_name(name: object, where: str) -> str:
    """``name`` when it names a backend, else an :class:`InputError` naming ``where`` and the choices."""
    if not isinstance(name, str) or name not in BACKENDS:
        hint = did_you_mean(str(name), BACKENDS) if isinstance(name, str) else ""
        raise InputError(f"{where}: unknown backend {name!r}{hint}; choose from {', '.join(BACKENDS)}")
    return name


def get_backend(name: str) -> Backend:
    """The backend named ``name`` (one instance per process).

    Raises:
        InputError: unknown name, or its module cannot be imported.
    """
    check_backend_name(name, "backend")
    if name not in _instances:
        module, attr = BACKENDS[name].split(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise InputError(f"backend {name!r}: not available ({exc})") from None
        _instances[name] = cls()
    return _instances[name]


def backend_of(spec: RunSpec) -> Backend:
    """The backend that trains ``spec``."""
    return get_backend(spec.algorithm.backend)


def machine_facts(specs: Sequence[RunSpec]) -> dict[str, str]:
    """What the backends that train ``specs`` add to the driver's machine fingerprint: each backend's optional
    ``machine_facts()`` (where it has one and its dependencies import), e.g. the JAX backend's version and the
    devices it trains on. Empty for the SB3 backend, whose arithmetic the fingerprint already describes."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(spec.algorithm.backend for spec in specs):
        backend = get_backend(name)
        facts = getattr(backend, "machine_facts", None)
        if facts is not None and backend.missing_dependency() is None:
            out.update(facts())
    return out


def make_batches(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """Group ``specs`` into batches, each trained in one process: runs of one backend with one
    :meth:`Backend.batch_key` (an sb3 run is a batch of its own).

    Returns:
        The batches in the order their first runs come in ``specs`` (the driver orders a plan's runs longest
        first, :func:`rlaudit.run.driver.longest_first`: executors start them in this order).
    """
    groups: dict[tuple[str, Hashable], list[RunSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.algorithm.backend, backend_of(spec).batch_key(spec)), []).append(spec)
    batches = []
    for (name, _), group in groups.items():
        width = getattr(get_backend(name), "max_batch", None) or len(group)
        batches += [tuple(group[i:i + width]) for i in range(0, len(group), width)]
    position = {id(spec): i for i, spec in enumerate(specs)}
    return sorted(batches, key=lambda b: position[id(b[0])])


def execute_batch(batch: Sequence[RunSpec], emit: Callable[[EvalRecord], None],
                  progress: Callable[[int], None] | None = None, checkpoints=None) -> list[Outcome]:
    """Train one batch of :func:`make_batches` with its backend; see :meth:`Backend.execute`."""
    if not batch:
        return []
    backend = backend_of(batch[0])
    if checkpoints is None:
        return backend.execute(tuple(batch), emit, progress)
    return backend.execute(tuple(batch), emit, progress, checkpoints=checkpoints)


def batch_label(batch: Sequence[RunSpec]) -> str:
    """``"<first run id>"`` or ``"<first run id> (+3 more in the batch)"``: how a batch is named in messages."""
    more = f" (+{len(batch) - 1} more in the batch)" if len(batch) > 1 else ""
    return f"{batch[0].run_id}{more}"


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "Outcome", "backend_names", "backend_of", "batch_label",
           "check_backend_name", "execute_batch", "get_backend", "make_batches"]
