"""How long a default audit takes as the table grows (a measurement script, not a test).

Builds a synthetic tidy table of ``A`` algorithms x ``T`` tasks x ``R`` runs x ``B`` budgets (scores Gamma
distributed per task, growing with the budget), then runs :func:`rlaudit.run_audit` with the default settings
(IQM, expanded bootstrap, max-T, replicates by the ``20 m / alpha`` rule) and prints, per size, the rows, the
tests, the replicates, the work the audit's up-front estimate counts (:func:`rlaudit.audit.audit_cost`), the
estimate in seconds and the measured wall time of each stage. A size the audit refuses (estimated past
``MAX_AUDIT_SECONDS``) is printed as refused, with the time the estimate gave.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python bench/bench_audit_scale.py                 # the default ladder
    PYTHONPATH=. .venv/bin/python bench/bench_audit_scale.py --size 5,50,100,5 --size 5,50,100,10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

LADDER = ["5,10,10,2", "5,50,10,5", "5,50,100,2", "5,50,100,5", "5,50,100,10", "5,50,100,40"]


def table(n_algorithms: int, n_tasks: int, n_runs: int, n_budgets: int, seed: int = 0):
    """A tidy :class:`~rlaudit.scores.ScoreTable` of the given shape."""
    from rlaudit.scores import ScoreTable

    rng = np.random.default_rng(seed)
    a, t, r, b = np.meshgrid(np.arange(n_algorithms), np.arange(n_tasks), np.arange(n_runs), np.arange(n_budgets),
                             indexing="ij")
    scale = rng.uniform(1, 10, n_tasks)[t] * (1 + 0.1 * a) * (1 + 0.5 * b / max(n_budgets - 1, 1))
    frame = pd.DataFrame({"algorithm": [f"A{i}" for i in a.ravel()], "task": [f"T{i}" for i in t.ravel()],
                          "run": r.ravel().astype(str), "budget": (b.ravel() + 1) * 100_000,
                          "score": rng.gamma(2.0, 1.0, a.size) * scale.ravel()})
    return ScoreTable.from_frame(frame)


class _Timer:
    """A :class:`rlaudit.audit.Progress` that records the wall time of each stage."""

    def __init__(self):
        self.stages: dict[str, float] = {}
        self._t0 = time.perf_counter()
        self._stage = "select"

    def start(self, stage: str, total: int) -> None:
        now = time.perf_counter()
        self.stages[self._stage] = self.stages.get(self._stage, 0.0) + now - self._t0
        self._stage, self._t0 = stage, now

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:
        self.start("family + assemble", 0)


def main() -> None:
    from rlaudit.audit import AuditSettings, audit_cost, run_audit
    from rlaudit.errors import InputError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", help="A,T,R,B (repeatable); default: a ladder up to 10^6 rows")
    args = parser.parse_args()
    for size in args.size or LADDER:
        n_a, n_t, n_r, n_b = (int(x) for x in size.split(","))
        scores = table(n_a, n_t, n_r, n_b)
        settings = AuditSettings()
        cost = audit_cost(scores, settings)
        timer = _Timer()
        t0 = time.perf_counter()
        try:
            run_audit(scores, settings, progress=timer)
        except InputError as exc:
            print(f"{size:>14}  rows {len(scores.frame):>9,}  tests {cost.n_tests:>4}  reps {cost.reps:>7,}  "
                  f"work {cost.work:.2e}  estimate {cost.seconds:8.0f} s  REFUSED: {str(exc)[:120]}…")
            continue
        wall = time.perf_counter() - t0
        timer.done()
        stages = ", ".join(f"{k} {v:.1f}" for k, v in timer.stages.items() if v > 0.05)
        print(f"{size:>14}  rows {len(scores.frame):>9,}  tests {cost.n_tests:>4}  reps {cost.reps:>7,}  "
              f"work {cost.work:.2e}  estimate {cost.seconds:8.1f} s  measured {wall:8.1f} s  ({stages})", flush=True)


if __name__ == "__main__":
    main()
