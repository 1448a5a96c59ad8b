"""The driver: plans a protocol, owns the store (the single writer), hands runs to an executor, shows
progress and prints the summary. Resume is the default: finished runs are skipped, unfinished ones (a
killed or interrupted driver, a failure) restart from scratch, or from their last mid-run checkpoint when the
executor keeps them and the run was killed or interrupted (:mod:`rlaudit.run.checkpoint`)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import statistics
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rlaudit.errors import RunFailed
from rlaudit.run.spec import EvalRecord, RunResult, RunSpec, is_timed_out

# Env steps per second of one run on one core, used by `rlaudit validate` until runs on this machine have
# measured their own (see throughput_cache()). PPO and DQN: bare stable-baselines3 on CartPole-v1 on a quiet
# core of the development machine (2.3k and 2.9k steps/s). The others are rough guesses, not measurements;
# the estimate says which source it used.
REFERENCE_STEPS_PER_S: dict[str, float] = {
    "PPO": 2300.0, "DQN": 2900.0, "A2C": 2000.0, "QRDQN": 2500.0, "TRPO": 2000.0, "ARS": 3000.0,
    "SAC": 150.0, "TD3": 250.0, "DDPG": 250.0, "TQC": 100.0, "CrossQ": 150.0,
}
SUITE_STEPS_PER_CPU_S: dict[tuple[str, str], float] = {
    ("DQN", "minatar"): 697.0, ("C51", "minatar"): 230.0, ("QRDQN", "minatar"): 193.0,
    ("DopamineRainbow", "minatar"): 195.0, ("IQN", "minatar"): 36.0,
}
"""Measured reference rates (algorithm, suite) that replace the CartPole rate x suite factor: the DQN family on
MinAtar at Obando-Ceron & Castro's published settings (the ``minatar`` network; IQN with N = N' = K = 32), SB3
backend, steps per CPU-second after warm-up (``bench/bench_backends.py --protocol
protocols/fidelity/minatar-100k.toml --algorithm LABEL``, docs/backends.md Throughput, 2026-12-02). IQN there
trains at 36 where the suite factor would say 250: it was the cost of the flagship that the estimate missed."""
MIN_STEPS_MEASURED = 5_000
"""Runs shorter than this are dominated by start-up and evaluation; their rate is not cached."""
_DEFAULT_STEPS_PER_S = 500.0
_SUITE_FACTOR = {"gymnasium": 1.0, "minatar": 0.5, "atari": 0.15}
HEARTBEAT_S = 60.0
"""Piped output: longest silence while runs train (a line with each running run's steps, then the ETA)."""


def throughput_cache() -> Path:
    """File where drivers record measured steps/s per (algorithm, suite) on this machine."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rlaudit" / "throughput.json"


def _read_throughput() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(throughput_cache().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _write_throughput(measured: dict[str, list[float]]) -> None:
    if not measured:
        return
    cache = _read_throughput()
    for key, rates in measured.items():
        rates = sorted(rates)
        # The fastest sweep seen here: a sweep measured while the machine was busy must not slow every
        # later estimate down.
        cache[key] = max(cache.get(key, 0.0), rates[len(rates) // 2])
    try:
        from rlaudit.io import atomic_write_text

        atomic_write_text(throughput_cache(), json.dumps(cache, indent=1, sort_keys=True))
    except Exception:  # a cache is never worth failing a sweep for
        pass


def rate_key(spec: RunSpec) -> str:
    """Key of ``spec``'s measured rate: ``algorithm/suite`` (``@backend`` for a backend other than the default),
    then a hash of its :meth:`~RunSpec.cost_key`: the same algorithm with other settings (a bigger network, more
    quantile samples) trains at another rate."""
    from rlaudit.run.backends import DEFAULT_BACKEND

    backend = spec.algorithm.backend
    digest = hashlib.sha256(spec.cost_key().encode()).hexdigest()[:10]
    return (f"{spec.algorithm.name}/{spec.task.suite}" + ("" if backend == DEFAULT_BACKEND else f"@{backend}")
            + f"#{digest}")


def rate_of(spec: RunSpec, cache: dict[str, float]) -> float:
    """Env steps per second of one run of ``spec``'s algorithm, settings, suite and backend (measured here, else
    the reference rate; a run of a batch counts its batch's wall time, so a measured rate already includes the
    batch's sharing)."""
    key = rate_key(spec)
    if key in cache:
        return cache[key]
    name, suite = spec.algorithm.name, spec.task.suite
    if (name, suite) in SUITE_STEPS_PER_CPU_S:
        return SUITE_STEPS_PER_CPU_S[name, suite]
    return REFERENCE_STEPS_PER_S.get(name, _DEFAULT_STEPS_PER_S) * _SUITE_FACTOR.get(suite, 1.0)


@dataclass(frozen=True)
class RecordedRate:
    """Env steps per CPU-second of the finished runs that share one :meth:`~RunSpec.cost_key`, from the CPU time
    stores record (schema 3)."""

    steps_per_cpu_s: float
    """Median over the runs of env steps / CPU seconds (evaluations included)."""
    n_runs: int
    """Runs it comes from."""
    stores: tuple[str, ...]
    """Stores they are in (paths as given)."""
    cpu: str = ""
    """``this CPU`` (every run was recorded on this machine's CPU, model and flags: the others, if any, are left out),
    ``other CPUs`` (none was), or empty (the stores did not record their machines)."""


def cost_sources(store_path: str | os.PathLike | None = None) -> list[Path]:
    """Stores a plan's cost is read from: its own store, then every ``sweeps/*/store.sqlite`` under the working
    directory (the recorded sweeps of a checkout); the ones that exist, each once (its own store named by an
    absolute path is also one of the recorded sweeps)."""
    paths = [Path(store_path)] if store_path else []
    paths += sorted(Path("sweeps").glob("*/store.sqlite"))
    first: dict[Path, Path] = {}
    for path in paths:
        first.setdefault(path.resolve(), path)
    return [p for p in first.values() if p.is_file()]


def recorded_rates(paths: Sequence[str | os.PathLike], own: str | os.PathLike | None = None
                   ) -> dict[str, RecordedRate]:
    """:class:`RecordedRate` per :meth:`~RunSpec.cost_key` over the timed runs of ``paths``; runs shorter than
    :data:`MIN_STEPS_MEASURED` do not count (start-up dominates them), the runs of ``own`` (the store of the plan
    priced) replace the other stores' where there are some, of those the runs recorded on this machine's CPU
    (:func:`~rlaudit.run.machine.cpu_identity`) replace those of other CPUs where there are some, and a store
    that cannot be read counts nothing (pricing a plan is never worth failing for).

    A sweep's own finished runs were trained with its code, on its machine, in its conditions: other stores' runs
    with the same settings can cost twice as much per step. Measured on the flagship (2026-12-05, AMD EPYC):
    its 1M-step runs trained DQN at 1,574-1,855 steps per CPU-second and IQN at 111-149, where the fidelity and
    backend-equivalence stores hold DQN runs at 837-1,035 (recorded with about four runs per core: a run's CPU
    time grows when it shares a core) and IQN runs at 65-96 (before the runner's and the allocator's speed-ups);
    a 100k-step DQN run retrained then gave 1,652, so run length is not the cause."""
    import sqlite3

    from rlaudit.errors import InputError
    from rlaudit.run.machine import cpu_identity
    from rlaudit.store import timed_runs

    own_path = Path(own).resolve() if own else None
    runs: dict[str, list[tuple[float, str | None, str, bool]]] = {}
    for path in paths:
        try:
            timed = timed_runs(path)
        except (InputError, sqlite3.Error, ValueError, KeyError, TypeError):
            continue
        ours = Path(path).resolve() == own_path
        for spec, steps, cpu, model in timed:
            if steps >= MIN_STEPS_MEASURED:
                runs.setdefault(spec.cost_key(), []).append((steps / cpu, model, str(path), ours))
    here = cpu_identity()
    out = {}
    for key, rows in runs.items():
        rows = [r for r in rows if r[3]] or rows
        mine = [r for r in rows if r[1] == here]
        use = mine or rows
        cpu = "this CPU" if mine else "other CPUs" if all(r[1] for r in rows) else ""
        out[key] = RecordedRate(float(statistics.median(r[0] for r in use)), len(use),
                                tuple(dict.fromkeys(r[2] for r in use)), cpu)
    return out


_UNKNOWN_EPISODE_STEPS = 1_000
"""Episode length assumed for the estimate when neither the protocol nor the environment sets a limit."""


def episode_limit(task) -> int:
    """Most agent steps of one episode of ``task`` (a :class:`~rlaudit.run.spec.TaskSpec`): its own limit, else
    the registered environment's, else :data:`_UNKNOWN_EPISODE_STEPS`."""
    if task.max_episode_steps:
        return task.max_episode_steps
    try:
        import gymnasium

        limit = gymnasium.spec(task.id).max_episode_steps
    except Exception:  # an id gymnasium does not know here: the estimate falls back, nothing else depends on it
        limit = None
    return int(limit) if limit else _UNKNOWN_EPISODE_STEPS


def eval_steps(spec: RunSpec, limits: dict | None = None) -> int:
    """Env steps ``spec``'s evaluations may take at most: points x ``n_eval_episodes`` x the episode limit."""
    limits = {} if limits is None else limits
    if spec.task.id not in limits:
        limits[spec.task.id] = episode_limit(spec.task)
    n_points = len(spec.budgets) + (spec.total_steps // spec.eval.eval_every if spec.eval.eval_every else 0)
    return n_points * spec.eval.n_eval_episodes * limits[spec.task.id]


@dataclass(frozen=True)
class Estimate:
    """What a plan costs: wall time on some workers, the CPU time behind it, and where the rates come from."""

    seconds: float
    """Wall-clock seconds on the workers, one core each."""
    cpu_seconds: float
    """CPU seconds of all the runs (one core per worker: the runs' times summed)."""
    source: str
    """Where the rates come from, in words (:func:`rate_sources`)."""


def estimate(specs: Sequence[RunSpec], workers: int, recorded: dict[str, RecordedRate] | None = None,
             cache: dict[str, float] | None = None, trained: Mapping[str, int] | None = None) -> Estimate:
    """Time and CPU estimate for ``specs`` on ``workers`` workers.

    A run whose settings have :class:`RecordedRate` s (``recorded``, from :func:`recorded_rates`) costs its env
    steps at their CPU rate, evaluations included as they were in the recorded runs; any other run counts its
    training steps at the rate measured on this machine (else the reference rate) and its evaluations at as many
    steps as they can take at most (every episode played to the time limit), so that a plan whose evaluations
    dominate is not estimated at "about 0 s". ``cache``: the rates measured here (read when not given).
    ``trained``: run id -> env steps a run resumes from (:func:`resume_points`): it costs only the rest.
    """
    cache = _read_throughput() if cache is None else cache
    per_batch = [seconds for _, seconds in batch_seconds(specs, recorded, cache, trained)]
    n = max(1, min(workers, len(per_batch)))
    return Estimate(max(sum(per_batch) / n, max(per_batch, default=0.0)), sum(per_batch),
                    rate_sources(specs, cache, recorded or {}))


def batch_seconds(specs: Sequence[RunSpec], recorded: Mapping[str, RecordedRate] | None = None,
                  cache: dict[str, float] | None = None, trained: Mapping[str, int] | None = None
                  ) -> list[tuple[tuple[RunSpec, ...], float]]:
    """Each batch of :func:`~rlaudit.run.backends.make_batches` with the seconds one worker spends on it, priced
    as :func:`estimate` prices them (``cache``: the rates measured here, read from :func:`throughput_cache` when
    not given; ``trained``: env steps each run resumes from, priced only for the rest of it)."""
    from rlaudit.run.backends import backend_of, make_batches

    cache = _read_throughput() if cache is None else cache
    recorded = recorded or {}
    trained = trained or {}

    def left(spec: RunSpec) -> float:  # the share of a run still to train (its evaluations alike)
        return 1.0 - min(trained.get(spec.run_id, 0), spec.total_steps) / max(spec.total_steps, 1)

    limits: dict = {}
    out = []  # the runs of a batch train together: measured rates already say so, reference rates do not
    for batch in make_batches(specs):
        rate = recorded.get(batch[0].cost_key())
        if rate:  # a batch's CPU time is its runs' CPU times summed
            out.append((batch, sum(s.total_steps * left(s) / rate.steps_per_cpu_s for s in batch)))
            continue
        times = [(s.total_steps + eval_steps(s, limits)) * left(s) / rate_of(s, cache) for s in batch]
        measured = rate_key(batch[0]) in cache
        speedup = 1.0 if measured else reference_speedup(backend_of(batch[0]), batch[0])
        out.append((batch, max(times) if measured else sum(times) / speedup))
    return out


def longest_first(specs: Sequence[RunSpec], recorded: Mapping[str, RecordedRate] | None = None,
                  cache: dict[str, float] | None = None, resumed: Collection[str] = ()) -> list[RunSpec]:
    """``specs`` batch by batch, the longest batch first by :func:`batch_seconds` (ties keep their order); the
    batches with a run in ``resumed`` (run ids that resume from a checkpoint) before all others.

    Executors start batches in this order: longest first keeps the last worker from training one long run alone
    while the others idle (a 1M-step IQN run costs ten DQN runs at the flagship's settings; ordered by env steps
    alone they tie). Resumed runs go first because their checkpoints are voided by any change to the training code
    or libraries, and are committed with a store that spans sittings: finished first, fewer wait."""
    ranked = sorted(batch_seconds(specs, recorded, cache),
                    key=lambda item: (not any(s.run_id in resumed for s in item[0]), -item[1]))
    return [spec for batch, _ in ranked for spec in batch]


def step_costs(specs: Sequence[RunSpec], recorded: Mapping[str, RecordedRate] | None = None,
               cache: dict[str, float] | None = None) -> dict[str, float]:
    """Run id -> the estimate's seconds per env step of each of ``specs`` (its batch's :func:`batch_seconds`
    over the batch's env steps), or 1 for every run when some run has no positive price.

    They weigh the driver's ETA: an env step costs ten times more in one algorithm than in another (IQN against
    DQN at the flagship's settings), and runs start longest first, so the steps left, timed at the speed of the
    runs trained so far, said "ETA 21 h" at the start of the flagship's seed 1, where the estimate said 14 h.
    Only their ratios matter: the driver times them by what it measures."""
    out = {}
    for batch, seconds in batch_seconds(specs, recorded, cache):
        steps = sum(s.total_steps for s in batch)
        out.update(dict.fromkeys((s.run_id for s in batch), seconds / steps if steps > 0 else 0.0))
    if not all(cost > 0 for cost in out.values()):
        return dict.fromkeys(out, 1.0)
    return out


def reference_speedup(backend, spec: RunSpec) -> float:
    """A batch's CPU throughput on ``backend`` over the SB3 reference rate of ``spec``'s algorithm, for an
    estimate before this machine measured one: the backend's measured ``reference_speedups`` for the algorithm
    and suite, else its ``reference_speedup``, else 1."""
    per = getattr(backend, "reference_speedups", {})
    return per.get((spec.algorithm.name, spec.task.suite), getattr(backend, "reference_speedup", 1.0))


def rate_sources(specs: Sequence[RunSpec], cache: dict[str, float],
                 recorded: dict[str, RecordedRate] | None = None) -> str:
    """Where the rates of ``specs`` come from, in words: ``CPU time recorded …`` with the runs and stores,
    ``measured on this machine``, ``reference rates, not measured on this machine``, or which algorithms are
    which when they mix."""
    from rlaudit.run.backends import DEFAULT_BACKEND

    recorded = recorded or {}
    kinds: dict[str, dict[str, None]] = {"recorded": {}, "measured": {}, "reference": {}}
    stores: dict[str, None] = {}
    for s in specs:
        backend = s.algorithm.backend
        name = f"{s.algorithm.label}/{s.task.suite}" + ("" if backend == DEFAULT_BACKEND else f"@{backend}")
        rate = recorded.get(s.cost_key())
        if rate:
            on = f" on {rate.cpu}" if rate.cpu else ""
            runs = f"{rate.n_runs} run{'s' if rate.n_runs != 1 else ''}"
            kinds["recorded"][f"{name} ({runs}{on}, {rate.steps_per_cpu_s:,.0f} steps/CPU-s)"] = None
            stores.update(dict.fromkeys(rate.stores))
        else:
            kinds["measured" if rate_key(s) in cache else "reference"][name] = None
    recorded_text = (f"CPU time recorded with the same settings in {', '.join(stores)}" if stores else "")
    only = [k for k, v in kinds.items() if v]
    if only == ["recorded"]:
        return f"{recorded_text}: {', '.join(kinds['recorded'])}"
    if only == ["measured"]:
        return "measured on this machine"
    if only == ["reference"] or not only:
        return "reference rates, not measured on this machine"
    parts = [f"{recorded_text} for {', '.join(kinds['recorded'])}" if kinds["recorded"] else "",
             f"measured on this machine for {', '.join(kinds['measured'])}" if kinds["measured"] else "",
             f"reference rates for {', '.join(kinds['reference'])}" if kinds["reference"] else ""]
    return "; ".join(p for p in parts if p)


def format_duration(seconds: float) -> str:
    """``3 h 05 min``, ``12 min 04 s``, ``42 s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


@dataclass
class Summary:
    """What one ``rlaudit run`` did."""

    total: int = 0
    """Runs selected."""
    skipped: int = 0
    """Already done in the store when the driver started."""
    done: int = 0
    """Finished by this driver."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """``(run_id, last traceback line)`` of runs that failed."""
    interrupted: int = 0
    """Unfinished runs discarded by Ctrl-C."""
    resumable: int = 0
    """Of those, the runs that left a mid-run checkpoint to resume from (:mod:`rlaudit.run.checkpoint`)."""
    wall_time: float = 0.0
    """Seconds."""
    env_steps: int = 0
    """Env steps trained by this driver (finished runs; a run resumed from a checkpoint counts the steps after
    it)."""
    cpu_time: float = 0.0
    """CPU seconds of the finished runs that measured theirs (:attr:`RunResult.cpu_time`)."""
    cpu_steps: int = 0
    """Env steps of those runs."""
    checkpointed_steps: int = 0
    """Env steps the interrupted runs trained into the checkpoints they left, past where this driver resumed them:
    kept for the next run, though no run finished with them."""


def resume_points(specs: Mapping[str, RunSpec], checkpoints,
                  saved: Mapping[str, tuple[int, bool]] | None = None) -> dict[str, int]:
    """Run id -> env steps of the checkpoint each of ``specs`` would resume from (:mod:`rlaudit.run.checkpoint`:
    one written on this machine, or on any with ``checkpoints.portable``); none without ``checkpoints``. ``saved``
    is the folder's :func:`~rlaudit.run.checkpoint.saved_checkpoints` where the caller has read it already."""
    if checkpoints is None:
        return {}
    if saved is None:
        from rlaudit.run.checkpoint import saved_checkpoints

        saved = saved_checkpoints(checkpoints.directory)
    return {run_id: steps for run_id, (steps, here) in saved.items()
            if run_id in specs and steps > 0 and (here or checkpoints.portable)}


def resumed_text(trained: Mapping[str, int]) -> str:
    """`` (N resume from checkpoints, S env steps of them trained)`` for the plan header; empty without any."""
    if not trained:
        return ""
    runs = "1 run resumes from a checkpoint" if len(trained) == 1 else f"{len(trained)} runs resume from checkpoints"
    return f" ({runs}, {sum(trained.values()):,} of these steps trained)"


class Driver:
    """The :class:`~rlaudit.run.executors.EventSink`: writes the store, updates progress, keeps the summary."""

    def __init__(self, store, specs: Sequence[RunSpec], console: Console, summary: Summary, checkpoints=None,
                 step_cost: Mapping[str, float] | None = None, resume_from: Mapping[str, int] | None = None):
        """``step_cost``: run id -> its relative cost per env step (:func:`step_costs`), which weighs the ETA and
        the overall progress bar; every step costs the same without it. ``resume_from``: the runs'
        :func:`resume_points` where the caller has read them already; read from ``checkpoints`` without it."""
        self.store = store
        self.specs = {s.run_id: s for s in specs}
        self.console = console
        self.summary = summary
        self.running: dict[str, tuple[str, int]] = {}  # run_id -> (worker, env steps so far)
        self.measured: dict[str, list[float]] = {}
        self.cost = {r: step_cost[r] for r in self.specs} if step_cost else dict.fromkeys(self.specs, 1.0)
        self.steps_done = 0  # env steps of the runs that ended, whole
        self.work_done = 0.0  # the same, each step weighed by its run's cost
        self.work_trained = 0.0  # of that, what this driver trained (a resumed run's checkpoint aside)
        self.checkpoints = checkpoints
        self.resume_from = (dict(resume_from) if resume_from is not None
                            else resume_points(self.specs, checkpoints))
        self._unconfirmed = set(self.resume_from)  # resumed or restarted: known at the run's first report
        self._ended: set[str] = set()
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._worker_tasks: dict[str, TaskID] = {}
        self.t0 = time.perf_counter()
        self._last_line = self.t0

    # ----------------------------------------------------------------------------------- progress display
    def __enter__(self) -> Driver:
        if self.console.is_terminal:
            # per-run rows show the run's env steps done of its budget; the first row, all runs'
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=30),
                                      TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                      TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                                      refresh_per_second=4)
            # its bar and ETA in work (env steps weighed by their cost), its text in env steps
            total_work = sum(s.total_steps * self.cost[r] for r, s in self.specs.items())
            self._overall = self._progress.add_task(self._overall_text(), total=total_work, info="")
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _overall_text(self) -> str:
        return f"runs {self._n_ended()}/{len(self.specs)}"

    def _refresh(self) -> None:
        if self._progress is None:
            return
        done = self.steps_done + sum(steps for _, steps in self.running.values())
        work = self.work_done + sum(steps * self.cost[r] for r, (_, steps) in self.running.items())
        self._progress.update(self._overall, completed=work, description=self._overall_text(),
                              info=f"{done:,} env steps")

    def _worker_task(self, worker: str) -> TaskID | None:
        if self._progress is None:
            return None
        if worker not in self._worker_tasks:
            self._worker_tasks[worker] = self._progress.add_task(f"  {worker}", total=1, info="")
        return self._worker_tasks[worker]

    @staticmethod
    def _describe(spec: RunSpec) -> str:
        return f"{spec.algorithm.label} {spec.task.id} seed {spec.seed} [{spec.regime}]"

    # --------------------------------------------------------------------------------------- EventSink
    def started(self, run_id: str, worker: str) -> None:
        self.store.started(run_id, worker)
        self.running[run_id] = (worker, 0)
        task = self._worker_task(worker)
        if task is not None:
            spec = self.specs[run_id]
            self._progress.reset(task, total=spec.total_steps, completed=0, info=self._run_info(spec, 0))
        self._refresh()

    def record(self, rec: EvalRecord) -> None:
        self.store.record(rec)
        self.progress(rec.run_id, rec.env_steps)

    def progress(self, run_id: str, env_steps: int) -> None:
        if run_id not in self.running:
            return
        if run_id in self._unconfirmed:
            self._confirm_resume(run_id)
        worker, _ = self.running[run_id]
        self.running[run_id] = (worker, min(env_steps, self.specs[run_id].total_steps))
        task = self._worker_tasks.get(worker)
        if task is not None:
            self._progress.update(task, completed=env_steps, info=self._run_info(self.specs[run_id], env_steps))
        elif self._progress is None and time.perf_counter() - self._last_line >= HEARTBEAT_S:  # piped: never silent for minutes
            self._last_line = time.perf_counter()
            live = ", ".join(f"{self._describe(self.specs[r])} {steps:,}/{self.specs[r].total_steps:,} steps"
                             for r, (_, steps) in self.running.items())
            self.console.print(f"[{self._n_ended()}/{len(self.specs)}] running: {live}{self._eta()}",
                               highlight=False, markup=False, soft_wrap=True)
        self._refresh()

    def _run_info(self, spec: RunSpec, env_steps: int) -> str:
        return f"{escape(self._describe(spec))} {env_steps:,}/{spec.total_steps:,} steps"

    def _n_ended(self) -> int:
        return self.summary.done + len(self.summary.failed)

    def _confirm_resume(self, run_id: str) -> None:
        """At a run's first report: whether it resumed its checkpoint (the file is still there, not overwritten
        by a restarted run's own) or restarted (the runner deleted a checkpoint it could not use)."""
        self._unconfirmed.discard(run_id)
        note = self.checkpoints.path(self.specs[run_id]).with_suffix(".json")
        try:
            resumed = json.loads(note.read_text())["env_steps"] >= self.resume_from[run_id]
        except (OSError, ValueError, KeyError, TypeError):
            resumed = False
        if not resumed:
            self.resume_from[run_id] = 0

    def _eta(self) -> str:
        """``"; ETA 3 min 10 s"``: the env steps left, each weighed by its run's cost (:func:`step_costs`), at the
        weighed steps per second this sweep has trained so far (``""`` before any). The steps a resumed run's
        checkpoint brought count as done, not as trained in this sweep's time."""
        start, cost = self.resume_from, self.cost
        trained = self.work_trained + sum(max(0, steps - start.get(r, 0)) * cost[r]
                                          for r, (_, steps) in self.running.items())
        left = sum((spec.total_steps - max(self.running.get(r, ("", 0))[1], start.get(r, 0))) * cost[r]
                   for r, spec in self.specs.items() if r not in self._ended)
        elapsed = time.perf_counter() - self.t0
        if trained <= 0 or elapsed <= 0:
            return ""
        return f"; ETA {format_duration(max(left, 0) / (trained / elapsed))}"

    def _end(self, run_id: str, finished: bool = True) -> None:
        """The run ended: it trained to its total, or (failed) to its last report."""
        worker, steps = self.running.pop(run_id, (None, 0))
        total = self.specs[run_id].total_steps
        self.steps_done += total
        self.work_done += total * self.cost[run_id]
        trained = max(0, (total if finished else steps) - self.resume_from.get(run_id, 0))
        self.work_trained += trained * self.cost[run_id]
        self._ended.add(run_id)
        task = self._worker_tasks.get(worker) if worker else None
        if task is not None:
            self._progress.reset(task, total=1, completed=0, info="idle")

    def finished(self, result: RunResult) -> None:
        self.store.finished(result)
        spec = self.specs[result.run_id]
        if result.run_id in self._unconfirmed:
            self._confirm_resume(result.run_id)
        self._end(result.run_id)
        self.summary.done += 1
        self.summary.env_steps += max(0, result.env_steps - self.resume_from.get(result.run_id, 0))
        if result.cpu_time:
            self.summary.cpu_time += result.cpu_time
            self.summary.cpu_steps += result.env_steps
        if result.wall_time > 0 and result.env_steps >= MIN_STEPS_MEASURED:
            self.measured.setdefault(rate_key(spec), []).append(
                result.env_steps / result.wall_time)
        if self._progress is None:
            rate = f", {result.env_steps / result.wall_time:,.0f} steps/s" if result.wall_time > 0 else ""
            if result.cpu_time:
                rate += f", {result.env_steps / result.cpu_time:,.0f} steps/CPU-s"
            self._last_line = time.perf_counter()
            self.console.print(f"[{self._n_ended()}/{len(self.specs)}] done   {self._describe(spec)} "
                               f"({result.wall_time:.1f} s{rate}){self._eta()}", highlight=False, markup=False,
                               soft_wrap=True)
        self._refresh()

    def failed(self, run_id: str, error: str) -> None:
        self.store.failed(run_id, error)
        spec = self.specs[run_id]
        self._end(run_id, finished=False)
        last = (error.strip().splitlines() or [""])[-1]
        self.summary.failed.append((run_id, last))
        self.console.print(f"[{self._n_ended()}/{len(self.specs)}] FAILED {self._describe(spec)}: {last}", highlight=False, markup=False, soft_wrap=True,
                           style="red" if self.console.is_terminal else None)
        self._refresh()

    def restarted(self, run_id: str, reason: str) -> None:
        self.store.restarted(run_id, reason)
        self.running.pop(run_id, None)
        self.console.print(f"restarting {run_id}: {reason}", highlight=False, markup=False, soft_wrap=True)
        self._refresh()


def run_plan(plan, store_path: str | os.PathLike, executor, only: dict | None = None, new_store: bool = False,
             console: Console | None = None, recorded: Mapping[str, RecordedRate] | None = None) -> Summary:
    """Run ``plan`` into the store at ``store_path`` with ``executor``; resume what is there.

    Args:
        plan: :class:`~rlaudit.protocol.plan.Plan`.
        store_path: the store file.
        executor: an :class:`~rlaudit.run.executors.Executor`.
        only: run selection (see :meth:`Plan.select`).
        new_store: move a store of another protocol aside instead of refusing it.
        console: where progress and the summary go.
        recorded: the recorded CPU times that price the runs in the estimate (:func:`recorded_rates`; default:
            those of :func:`cost_sources` of ``store_path``, its own runs first; another implementation's runs, e.g. a fidelity
            reference's, are priced from their own store only).

    Returns:
        The :class:`Summary`.

    Raises:
        InputError: store problems (before anything is trained).
        RunFailed: some runs failed (after all others finished).
        KeyboardInterrupt: after the unfinished runs are discarded.
    """
    from rlaudit.run.backends import machine_facts
    from rlaudit.run.machine import machine_fingerprint
    from rlaudit.store import Store

    console = console or Console(stderr=True)
    # plus, for JAX runs, where they train: this CPU or an accelerator
    fingerprint = {**machine_fingerprint(), **machine_facts(plan.runs)}
    store = Store.open_for_run(store_path, plan.protocol, new_store=new_store, machine=fingerprint)
    summary = Summary()
    t0 = time.perf_counter()
    try:
        if store.adopted:
            a = store.adopted
            console.print(f"{store_path}: the protocol changed (hash {a.old_hash[:12]} -> {plan.protocol.hash[:12]}) "
                          f"and plans its {a.kept} finished run(s) identically: kept"
                          + (f"; {len(a.replanned)} unfinished run(s) replanned" if a.replanned else ""),
                          highlight=False, markup=False, soft_wrap=True)
        store.sync_plan(plan)
        selected = plan.select(only)
        store.reset_unfinished({s.run_id for s in selected})
        status = store.statuses()
        rates = recorded_rates(cost_sources(store_path), own=store_path) if recorded is None else recorded
        cache = _read_throughput()
        todo = [s for s in selected if status.get(s.run_id) != "done"]
        trained = resume_points({s.run_id: s for s in todo}, getattr(executor, "checkpoints", None))
        todo = longest_first(todo, rates, cache, resumed=trained)
        summary.total = len(selected)
        summary.skipped = len(selected) - len(todo)
        if summary.skipped:
            console.print(f"resuming {store_path}: {summary.skipped} of {len(selected)} runs already done",
                          highlight=False, markup=False, soft_wrap=True)
        if todo:  # the plan header, piped or not
            from rlaudit.run.executors import default_workers

            workers = getattr(executor, "workers", None) or default_workers()
            est = estimate(todo, workers, rates, cache, trained)
            console.print(f"training {len(todo)} of {len(selected)} runs, {sum(s.total_steps for s in todo):,} env "
                          f"steps{resumed_text(trained)}; estimate about {format_duration(est.seconds)} with "
                          f"{min(workers, len(todo))} worker(s) (steps/s: {est.source})", highlight=False,
                          markup=False, soft_wrap=True)
        driver = Driver(store, todo, console, summary, getattr(executor, "checkpoints", None),
                        step_costs(todo, rates, cache), resume_from=trained)
        previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        try:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, _terminate)  # a scheduler's SIGTERM stops like Ctrl-C
                # A process started in the background by a non-interactive shell (`nohup … &`, CI runners)
                # inherits SIGINT ignored, and Python then never installs its handler: `kill -INT` would be lost.
                signal.signal(signal.SIGINT, signal.default_int_handler)
            with driver:
                executor.run(todo, driver)
        except KeyboardInterrupt:
            unfinished = list(driver.running)
            store.reset_unfinished(unfinished)
            summary.interrupted = len(unfinished)
            checkpoints = getattr(executor, "checkpoints", None)
            if checkpoints is not None:
                specs = {s.run_id: s for s in todo}
                summary.resumable = sum(checkpoints.path(specs[r]).exists() for r in unfinished if r in specs)
                summary.checkpointed_steps = kept_steps({r: specs[r] for r in unfinished if r in specs},
                                                        checkpoints, driver.resume_from)
            summary.wall_time = time.perf_counter() - t0
            print_summary(summary, console, store_path)
            raise
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, previous[0])
                signal.signal(signal.SIGINT, previous[1])
            _write_throughput(driver.measured)
    finally:
        store.close()
    summary.wall_time = time.perf_counter() - t0
    print_summary(summary, console, store_path)
    if summary.failed:
        raise RunFailed(f"{len(summary.failed)} of {summary.total} runs failed (tracebacks in {store_path}; "
                        f"'rlaudit status {store_path}' lists them); the next 'rlaudit run' retries them")
    return summary


def kept_steps(specs: Mapping[str, RunSpec], checkpoints, resumed_from: Mapping[str, int]) -> int:
    """Env steps that the checkpoints the next run resumes (:func:`resume_points`) of ``specs`` (run id -> spec) hold
    past ``resumed_from`` (run id -> the steps a run resumed at; absent: it started from scratch): what an interrupted
    sweep trained and keeps for the next run."""
    return sum(max(0, steps - resumed_from.get(r, 0)) for r, steps in resume_points(specs, checkpoints).items())


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


def print_summary(summary: Summary, console: Console, store_path) -> None:
    """The final summary: done, failed, skipped, wall time, env steps/s."""
    n_timed_out = sum(1 for _, last in summary.failed if is_timed_out(last))
    parts = [f"{summary.done} done", f"{len(summary.failed)} failed"
             + (f" ({n_timed_out} timed out)" if n_timed_out else ""), f"{summary.skipped} skipped (already done)"]
    if summary.interrupted:
        if summary.resumable:
            restart = summary.interrupted - summary.resumable
            parts.append(f"{summary.interrupted} interrupted (partial records discarded; the next run resumes "
                         f"{summary.resumable} from its checkpoint" + (f" and restarts {restart})" if restart else ")"))
        else:
            parts.append(f"{summary.interrupted} interrupted (discarded; the next run restarts them)")
    if summary.env_steps and summary.wall_time > 0:
        trained = f"{summary.env_steps:,} env steps at {summary.env_steps / summary.wall_time:,.0f} steps/s"
        if summary.cpu_time > 0:
            trained += (f" ({summary.cpu_time / 3600:.3g} CPU-hours, {summary.cpu_steps / summary.cpu_time:,.0f} steps "
                        f"per CPU-second)")
        if summary.checkpointed_steps:
            trained += f", and {summary.checkpointed_steps:,} more kept in checkpoints for the next run"
    elif summary.checkpointed_steps:  # interrupted before any run finished, but its runs advanced
        trained = f"no run finished; {summary.checkpointed_steps:,} env steps kept in checkpoints for the next run"
    else:  # a resume with nothing left: no "0 env steps at 0 steps/s"
        trained = "nothing trained"
    console.print(f"{', '.join(parts)} of {summary.total} runs in {format_duration(summary.wall_time)}; "
                  f"{trained} -> {store_path}", highlight=False, markup=False, soft_wrap=True)
    for run_id, last in summary.failed:
        console.print(f"  failed: {run_id}: {last}", highlight=False, markup=False, soft_wrap=True)
