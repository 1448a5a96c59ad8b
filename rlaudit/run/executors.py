"""Executors: where runs are trained. The driver owns the store; executors only report events to it.

An executor takes planned :class:`~rlaudit.run.spec.RunSpec` objects, groups them into batches
(:func:`rlaudit.run.backends.make_batches`: one run each, or the vmapped seeds of a JAX batch) and calls
:func:`rlaudit.run.backends.execute_batch` on each batch, somewhere, streaming what happens to each run back
to an :class:`EventSink` that lives in the driver process (the single SQLite writer). :class:`LocalExecutor` is a
process pool on this machine; ``rlaudit.run.ray_executor.RayExecutor`` spreads runs over a Ray cluster.
Executors are named in :data:`EXECUTORS` as ``"module:attr"`` and imported only when used.
"""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rlaudit.errors import InputError, did_you_mean
from rlaudit.run.spec import EvalRecord, RunResult, RunSpec, batch_timeout, timed_out_error

BATCH_FAILED = "the whole batch failed"
"""Added to the error of each run of a multi-run batch that raised (a JAX compile failure, say)."""

EXECUTORS: dict[str, str] = {
    "local": "rlaudit.run.executors:LocalExecutor",
    "ray": "rlaudit.run.ray_executor:RayExecutor",
}
"""Executor name -> ``"module:attr"`` of its class (constructed with keyword options)."""

PROGRESS_INTERVAL_S = 1.0
"""Runs report their env-step count to the driver at most this often (see ``execute_run``)."""


@runtime_checkable
class EventSink(Protocol):
    """What an executor reports, always called in the driver process (one thread)."""

    def started(self, run_id: str, worker: str) -> None:
        """``run_id`` began (or began again) on ``worker``; any earlier partial records of it are void."""

    def record(self, rec: EvalRecord) -> None:
        """An evaluation of a running run."""

    def finished(self, result: RunResult) -> None:
        """The run completed; all its records have been delivered before this call."""

    def failed(self, run_id: str, error: str) -> None:
        """The run raised or its worker died; ``error`` is the traceback text."""

    def restarted(self, run_id: str, reason: str) -> None:
        """The run will be retried from scratch (e.g. a lost Ray worker): discard its partial records."""

    # Optional: ``progress(run_id: str, env_steps: int) -> None`` — executors call it, when the sink has it,
    # at most every PROGRESS_INTERVAL_S seconds per run, for the progress display only.


@runtime_checkable
class Executor(Protocol):
    """Runs specs and reports to a sink; returns when every spec is finished or failed."""

    name: str

    def run(self, specs: Sequence[RunSpec], sink: EventSink) -> None:
        """Execute ``specs``, starting them in the order given. ``KeyboardInterrupt`` cancels outstanding work and
        propagates."""


def check_run_timeout(run_timeout: float | None) -> float | None:
    """``run_timeout`` (seconds, or ``None``) after refusing what is not a finite number above 0."""
    if run_timeout is not None and (isinstance(run_timeout, bool) or not isinstance(run_timeout, (int, float))
                                    or not (math.isfinite(run_timeout) and run_timeout > 0)):
        raise InputError(f"--run-timeout: must be a number of seconds above 0, got {run_timeout!r}")
    return run_timeout


def get_executor(name: str, **options) -> Executor:
    """Construct the executor registered as ``name`` with keyword ``options``.

    Raises:
        InputError: unknown name, or an option the executor does not take.
    """
    if name not in EXECUTORS:
        raise InputError(f"--executor: unknown executor {name!r}{did_you_mean(name, EXECUTORS)}; "
                         f"choose from {', '.join(EXECUTORS)}")
    module, attr = EXECUTORS[name].split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise InputError(f"--executor {name}: not available ({exc})") from None
    import inspect

    params = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        for opt in options:
            if opt not in params:
                raise InputError(f"--{opt.replace('_', '-')}: not an option of --executor {name}")
    return cls(**options)


def prepare_training_process() -> None:
    """What every process that trains sets before its first run: one torch thread (a run's numbers must not depend
    on the cores it is given; workers share them) and glibc's malloc keeping freed memory in the heap
    (:mod:`rlaudit.run.allocator`; changes no number)."""
    from rlaudit.run.allocator import keep_freed_memory
    from rlaudit.run.runner import set_single_thread

    set_single_thread()
    keep_freed_memory()


def default_workers() -> int:
    """CPU cores available to this process."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _progress_fn(sink: EventSink):
    fn = getattr(sink, "progress", None)
    return fn if callable(fn) else None


class LocalExecutor:
    """A pool of worker processes on this machine (spawn context, torch threads = 1 in each).

    With one worker and no ``run_timeout`` the runs execute in the driver process itself: no second
    interpreter to start, so the overhead over a plain stable-baselines3 script is the evaluation only. With a
    ``run_timeout`` every run is in a worker process, which is killed when the run passes the limit (a learner
    stuck in native code or an endless loop cannot be interrupted any other way); the run is recorded as timed
    out and a fresh worker takes the next run. A batch of runs trained together (a JAX batch's seeds) is one
    worker's task: it gets ``run_timeout`` per run (:func:`~rlaudit.run.spec.batch_timeout`) from the worker's
    start of it, compilation included, and past that every run of it is recorded timed out.

    Args:
        workers: number of worker processes (default: the cores available, capped at the number of runs).
        run_timeout: wall-time limit of one run in seconds, from the worker's start of it (``None``: none); a
            batch of n runs gets n times it.
        checkpoints: mid-run checkpoints of the runs that allow them (:mod:`rlaudit.run.checkpoint`; ``None``:
            none): a run killed or interrupted part-way resumes from its last one when the sweep is run again.
    """

    name = "local"

    def __init__(self, workers: int | None = None, run_timeout: float | None = None, checkpoints=None):
        if workers is not None and workers < 1:
            raise InputError(f"--workers: must be at least 1, got {workers}")
        self.workers = workers
        self.run_timeout = check_run_timeout(run_timeout)
        self.checkpoints = checkpoints

    def run(self, specs: Sequence[RunSpec], sink: EventSink) -> None:
        """Execute ``specs`` in their order (the driver's: longest first), reporting to ``sink`` as records arrive."""
        if not specs:
            return
        from rlaudit.run.backends import make_batches

        n = min(self.workers or default_workers(), len(make_batches(specs)))
        if n == 1 and self.run_timeout is None:
            self._run_inline(specs, sink)
        else:
            self._run_pool(specs, sink, n)

    # ------------------------------------------------------------------------------------------ inline
    def _run_inline(self, specs: Sequence[RunSpec], sink: EventSink) -> None:
        from rlaudit.run.backends import execute_batch, make_batches

        prepare_training_process()
        progress = _progress_fn(sink)
        for batch in make_batches(specs):
            for spec in batch:
                sink.started(spec.run_id, "main")
            ids = [s.run_id for s in batch]
            report = (lambda steps, ids=ids: [progress(rid, steps) for rid in ids]) if progress else None
            try:
                outcomes = execute_batch(batch, sink.record, progress=report, checkpoints=self.checkpoints)
            except Exception:  # the batch's failure is data; KeyboardInterrupt is not caught
                error = batch_error(batch, traceback.format_exc())
                for spec in batch:
                    sink.failed(spec.run_id, error)
            else:
                for spec, outcome in zip(batch, outcomes):
                    if isinstance(outcome, RunResult):
                        sink.finished(outcome)
                    else:
                        sink.failed(spec.run_id, outcome)

    # ------------------------------------------------------------------------------------------ pool
    def _run_pool(self, specs: Sequence[RunSpec], sink: EventSink, n: int) -> None:
        ctx = mp.get_context("spawn")
        tasks = ctx.Queue()
        events = ctx.Queue()
        from rlaudit.run.backends import make_batches

        batches = make_batches(specs)
        n = min(n, len(batches))
        for batch in batches:
            tasks.put(batch)
        for _ in range(n):
            tasks.put(None)
        procs: dict[str, mp.process.BaseProcess] = {}
        current: dict[str, list[str]] = {}  # worker -> run ids of the batch in progress
        began: dict[str, float] = {}  # worker -> when its current batch started (monotonic)
        n_runs = {s.run_id: len(b) for b in batches for s in b}  # run id -> runs of its batch
        width: dict[str, int] = {}  # worker -> runs of its current batch
        stopped: set[str] = set()  # runs whose worker was killed at the timeout: their late events are dropped
        counter = 0

        def spawn() -> None:
            nonlocal counter
            counter += 1
            name = f"w{counter}"
            p = ctx.Process(target=_worker_main, args=(name, tasks, events, os.getpid(), self.checkpoints), name=f"rlaudit-{name}",
                            daemon=True)
            p.start()
            procs[name] = p
            current[name] = []

        progress = _progress_fn(sink)
        remaining = {s.run_id for s in specs}

        def handle(ev) -> None:
            """Pass one worker event to the sink."""
            kind = ev[0]
            if _run_of(ev) in stopped:
                return
            if kind == "started":
                _, run_id, worker = ev
                if not current[worker]:  # the first run of a batch
                    began[worker] = time.monotonic()
                    width[worker] = n_runs[run_id]
                current[worker].append(run_id)
                sink.started(run_id, worker)
            elif kind == "record":
                sink.record(ev[1])
            elif kind == "progress":
                if progress:
                    progress(ev[1], ev[2])
            elif kind == "finished":
                _, worker, result = ev
                _discard(current.get(worker), result.run_id)
                remaining.discard(result.run_id)
                sink.finished(result)
            elif kind == "failed":
                _, worker, run_id, error = ev
                _discard(current.get(worker), run_id)
                remaining.discard(run_id)
                sink.failed(run_id, error)

        def check_timeouts() -> None:
            if self.run_timeout is None:
                return
            now = time.monotonic()
            for name, run_ids in list(current.items()):
                if not run_ids or now - began.get(name, now) <= batch_timeout(self.run_timeout, width[name]):
                    continue
                p = procs.pop(name)
                current.pop(name)
                p.kill()  # learn() may never return: nothing short of the process ends it
                p.join(timeout=5)
                for run_id in run_ids:
                    stopped.add(run_id)
                    remaining.discard(run_id)
                    sink.failed(run_id, timed_out_error(run_id, self.run_timeout, name, width[name]))
                spawn()  # takes the stop marker the killed worker never read

        def check_workers() -> None:
            check_timeouts()
            for name, p in list(procs.items()):
                if p.is_alive() or p.exitcode == 0:
                    continue
                # A worker died (out of memory, a crash in native code): fail its runs, replace the worker.
                run_ids = current.pop(name, [])
                procs.pop(name)
                how = (f"signal {-p.exitcode}" if p.exitcode is not None and p.exitcode < 0
                       else f"exit code {p.exitcode}")
                for run_id in run_ids:
                    if run_id in remaining:
                        remaining.discard(run_id)
                        sink.failed(run_id, f"worker {name} died ({how}) while training {run_id}")
                spawn()
                tasks.put(None)  # the dead worker never consumed its stop marker
            if remaining and not any(p.is_alive() for p in procs.values()):
                while True:  # what the workers sent before exiting is still in the queue
                    try:
                        handle(events.get(timeout=0.2))
                    except queue.Empty:
                        break
                for run_id in sorted(remaining):  # taken by a worker that died before reporting it
                    sink.failed(run_id, "lost: the worker that took this run died before starting it")
                remaining.clear()

        try:
            for _ in range(n):
                spawn()
            next_check = time.monotonic() + 1.0
            while remaining:
                if time.monotonic() >= next_check:  # also while events keep arriving
                    next_check = time.monotonic() + 1.0
                    check_workers()
                    continue
                try:
                    ev = events.get(timeout=0.5)
                except queue.Empty:
                    check_workers()
                    continue
                handle(ev)
        finally:
            for p in procs.values():
                if p.is_alive():
                    p.terminate()
            for p in procs.values():
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
            for q in (tasks, events):
                q.cancel_join_thread()
                q.close()


def _run_of(ev: tuple) -> str:
    """The run id a worker event is about: ``("started", run_id, worker)``, ``("record", EvalRecord)``,
    ``("progress", run_id, steps)``, ``("finished", worker, RunResult)``, ``("failed", worker, run_id, error)``."""
    kind = ev[0]
    if kind == "record":
        return ev[1].run_id
    if kind == "finished":
        return ev[2].run_id
    return ev[2] if kind == "failed" else ev[1]


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed driver leaves no orphans)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _worker_main(name: str, tasks, events, parent_pid: int, checkpoints=None) -> None:
    """Body of a pool worker: take specs until the stop marker, send events back."""
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    from rlaudit.run.backends import execute_batch

    prepare_training_process()
    while True:
        batch: tuple[RunSpec, ...] | None = tasks.get()
        if batch is None:
            return
        for spec in batch:
            events.put(("started", spec.run_id, name))
        ids = [s.run_id for s in batch]

        def report(steps: int, ids: list[str] = ids) -> None:
            if os.getppid() != parent_pid:  # orphaned (no prctl on this platform)
                os._exit(1)
            for run_id in ids:
                events.put(("progress", run_id, steps))

        try:
            outcomes = execute_batch(batch, lambda rec: events.put(("record", rec)), progress=report,
                                     checkpoints=checkpoints)
        except (Exception, KeyboardInterrupt):  # SIGINT is ignored here: a KeyboardInterrupt is the run's own
            error = batch_error(batch, traceback.format_exc())
            for spec in batch:
                events.put(("failed", name, spec.run_id, error))
        else:
            for spec, outcome in zip(batch, outcomes):
                if isinstance(outcome, RunResult):
                    events.put(("finished", name, outcome))
                else:
                    events.put(("failed", name, spec.run_id, outcome))


def _discard(run_ids: list[str] | None, run_id: str) -> None:
    if run_ids and run_id in run_ids:
        run_ids.remove(run_id)


def batch_error(batch: Sequence[RunSpec], error: str) -> str:
    """The error recorded for each run of ``batch`` when training the batch raised ``error`` (a traceback):
    unchanged for a batch of one run; for more, a last line saying that the whole batch failed with it."""
    if len(batch) == 1:
        return error
    last = (error.strip().splitlines() or [""])[-1]
    return f"{error.rstrip()}\n{last} ({BATCH_FAILED}: {len(batch)} runs trained together, e.g. the seeds of one " \
           f"JAX program)"
