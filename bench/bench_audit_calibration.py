"""Null calibration of the audit's error control (a measurement script, not a test).

Two algorithms are drawn from one distribution (gamma(2, scale) with a different scale per task) at three
budgets; each simulated dataset is audited and we count audits with at least one decided ordering (a
false decision: the family-wise error) and with at least one confirmed inversion. Prints the rates and
their ratio to alpha, with a one-sided 99 % Clopper-Pearson upper bound.

    .venv/bin/python bench/bench_audit_calibration.py --sims 300 --runs 10
    .venv/bin/python bench/bench_audit_calibration.py --quick
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import scipy.stats

from rlaudit.audit import AuditSettings, run_audit
from rlaudit.scores import ScoreTable

SCALES = (1.0, 2.0, 5.0, 0.5, 3.0)


def simulate(seed: int, n_runs: int) -> ScoreTable:
    """One null dataset: algorithms A and B, identical distributions, 5 tasks, budgets 1..3."""
    rng = np.random.default_rng(seed)
    rows = []
    for budget in (1, 2, 3):
        for t, scale in enumerate(SCALES):
            for a in "AB":
                rows += [(a, f"t{t}", r, budget, x) for r, x in enumerate(rng.gamma(2.0, scale, n_runs))]
    return ScoreTable.from_frame(pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=300)
    ap.add_argument("--runs", type=int, default=10, help="runs per task")
    ap.add_argument("--reps", type=int, default=2_000)
    ap.add_argument("--metric", default="iqm")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--correction", default="holm")
    ap.add_argument("--small-sample", action="store_true", help="decide from the expanded bootstrap")
    ap.add_argument("--quick", action="store_true", help="40 simulations")
    args = ap.parse_args()
    sims = 40 if args.quick else args.sims
    settings = AuditSettings(metric=args.metric, metrics=(args.metric,), reps=args.reps, reps_pairwise=100,
                             alpha=args.alpha, correction=args.correction, small_sample=args.small_sample)
    start = time.perf_counter()
    false_any = confirmed_any = 0
    for seed in range(sims):
        res = run_audit(simulate(seed, args.runs), settings)
        false_any += any(o["decision"] != "inconclusive" for o in res.orderings)
        confirmed_any += any(i["kind"] == "confirmed" for i in res.inversions)
    elapsed = time.perf_counter() - start
    print(f"null calibration: {sims} audits, {args.runs} runs/task, 5 tasks, 3 budgets, {args.metric}, "
          f"{args.reps} reps, {args.correction}, alpha {args.alpha:g}"
          f"{', small-sample (expanded) bootstrap' if args.small_sample else ''} ({elapsed:.1f} s)")
    for name, k in (("audits with >= 1 false decision", false_any),
                    ("audits with a confirmed inversion", confirmed_any)):
        upper = scipy.stats.beta.ppf(0.99, k + 1, sims - k) if k < sims else 1.0
        print(f"  {name}: {k}/{sims} = {k / sims:.3f} (ratio to alpha {k / sims / args.alpha:.2f}; "
              f"99% upper bound {upper:.3f})")


if __name__ == "__main__":
    main()
