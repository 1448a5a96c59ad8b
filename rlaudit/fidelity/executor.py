"""An :class:`~rlaudit.run.executors.Executor` that trains each run with a reference implementation.

Every run is one ``python -m rlaudit.fidelity.worker`` process in the reference's interpreter, at most
``workers`` at a time, each with ``nice`` 10 and one thread; its JSON events become the driver's events, so the
reference side goes through :func:`rlaudit.run.driver.run_plan` like any sweep: SQLite store, resume (a
killed sweep keeps its finished runs and restarts the unfinished ones), progress bars, summary.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Sequence

from rlaudit.fidelity.references import SELF_SEED_OFFSET, Reference, worker_environment
from rlaudit.run.spec import EvalRecord, RunResult, RunSpec

STDERR_TAIL = 40
"""Lines of a failed worker's stderr kept in the run's recorded error."""


class ReferenceExecutor:
    """Run specs with ``reference`` (see the module doc).

    Args:
        reference: the reference implementation.
        workers: processes at a time (>= 1).
        nice: niceness of the worker processes, at least (the machine's cores are shared).
    """

    name = "reference"

    def __init__(self, reference: Reference, workers: int = 1, nice: int = 10):
        self.reference = reference
        self.workers = max(1, int(workers))
        self.nice = nice

    def _renice(self) -> None:
        """In the child: niceness ``self.nice`` (not ``self.nice`` more than the parent's, which may be niced)."""
        os.nice(max(0, self.nice - os.nice(0)))

    def _start(self, spec: RunSpec) -> tuple[subprocess.Popen, object]:
        err = tempfile.TemporaryFile(mode="w+")
        offset = SELF_SEED_OFFSET if self.reference.name == "self" else 0
        cmd = [self.reference.python(), "-m", "rlaudit.fidelity.worker"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=worker_environment(), preexec_fn=self._renice)
        proc.stdin.write(json.dumps({"spec": spec.to_json(), "backend": self.reference.backend,
                                     "seed_offset": offset}))
        proc.stdin.close()
        return proc, err

    def run(self, specs: Sequence[RunSpec], sink) -> None:
        """Execute ``specs``, reporting to ``sink`` (started / record / progress / finished / failed)."""
        pending = list(specs)
        events: queue.Queue = queue.Queue()
        running: dict[str, tuple[subprocess.Popen, object, threading.Thread]] = {}
        progress = getattr(sink, "progress", None)

        def read(run_id: str, proc: subprocess.Popen) -> None:
            for line in proc.stdout:
                try:
                    events.put((run_id, json.loads(line)))
                except json.JSONDecodeError:
                    continue
            events.put((run_id, None))  # end of output

        try:
            while pending or running:
                while pending and len(running) < self.workers:
                    spec = pending.pop(0)
                    proc, err = self._start(spec)
                    t = threading.Thread(target=read, args=(spec.run_id, proc), daemon=True)
                    t.start()
                    running[spec.run_id] = (proc, err, t)
                    sink.started(spec.run_id, f"{self.reference.name}-{proc.pid}")
                run_id, ev = events.get()
                if run_id not in running:
                    continue
                if ev is None:  # output ended without a verdict: the process died
                    proc, err, _ = running.pop(run_id)
                    code = proc.wait()
                    sink.failed(run_id, f"reference worker for {run_id} ended (exit code {code}) without "
                                        f"finishing:\n{_tail(err)}")
                    err.close()
                elif ev["event"] == "record":
                    sink.record(EvalRecord(run_id, int(ev["env_steps"]), tuple(ev["returns"]),
                                           tuple(int(n) for n in ev["lengths"]), float(ev["wall_time"])))
                elif ev["event"] == "progress":
                    if callable(progress):
                        progress(run_id, int(ev["env_steps"]))
                elif ev["event"] in ("finished", "failed"):
                    proc, err, t = running.pop(run_id)
                    proc.wait()
                    t.join(timeout=5)
                    if ev["event"] == "finished":
                        cpu = ev.get("cpu_time")
                        sink.finished(RunResult(run_id, int(ev["env_steps"]), float(ev["wall_time"]),
                                                None if cpu is None else float(cpu)))
                    else:
                        sink.failed(run_id, ev["error"] + "\n" + _tail(err))
                    err.close()
        finally:
            for proc, err, _ in running.values():
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                err.close()


def _tail(err) -> str:
    err.seek(0)
    lines = err.read().splitlines()
    return "\n".join(lines[-STDERR_TAIL:])


__all__ = ["ReferenceExecutor"]
