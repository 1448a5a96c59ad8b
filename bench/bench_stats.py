"""Benchmark: rlaudit's statistics engine vs rliable 1.2.0 on the same data (prints ratios; not a test).

Workload (the issue's): 7 algorithms x 26 tasks x 10 runs;
1. interval estimates of the four aggregate metrics (IQM, median, mean, optimality gap) with 50,000
   stratified-bootstrap replicates: ``rlaudit.stats.interval_estimates`` vs
   ``rliable.library.get_interval_estimates`` (one ``func`` returning all four metrics, as rliable's README);
2. probability of improvement with 2,000-replicate intervals for all 21 pairs:
   ``probability_of_improvement`` + ``poi_replicates`` vs ``get_interval_estimates`` over
   ``rliable.metrics.probability_of_improvement`` (rliable's ``StratifiedIndependentBootstrap``);
3. the engine choice: ``scipy.stats.bootstrap`` (one sample per task, vectorised statistic) vs rlaudit's
   counts engine, on one algorithm;
4. peak memory of rlaudit's two workloads (tracemalloc, which sees NumPy's allocations) and the process's
   peak RSS.

Run: ``.venv/bin/python bench/bench_stats.py`` (full; rliable alone takes minutes on a shared machine) or
``--quick`` (10x fewer replicates; same data shape). rliable is timed once (too slow to repeat); rlaudit is
timed as the best of ``--repeat`` runs before rliable and once right after it, and the ratio uses the
slower of those two rlaudit timings. Wall-clock and process CPU time are both reported; on a shared
machine the CPU-time ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rliable_compat import import_rliable_library  # noqa: E402  (test/bench-only shim)

from rlaudit.stats import (
    METRICS,
    aggregate,
    interval,
    interval_estimates,
    poi_replicates,
    probability_of_improvement,
    replicates,
    rng_for,
)


def make_data(n_algorithms: int, n_tasks: int, n_runs: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Synthetic normalised scores: algorithm -> (n_runs, n_tasks), lognormal with per-task difficulty."""
    rng = np.random.default_rng(seed)
    difficulty = rng.lognormal(0.0, 0.8, n_tasks)
    return {f"algo{a}": difficulty * rng.lognormal(0.1 * a - 0.3, 0.6, (n_runs, n_tasks))
            for a in range(n_algorithms)}


class Timing:
    """Wall-clock and process CPU seconds of the fastest of several runs (CPU time is less sensitive to other
    processes on a shared machine; both libraries are single-threaded NumPy here)."""

    def __init__(self, wall: float, cpu: float):
        self.wall, self.cpu = wall, cpu

    def __str__(self) -> str:
        return f"{self.wall:.3f} s wall, {self.cpu:.3f} s CPU"

    def ratio(self, other: Timing) -> str:
        return f"{other.wall / self.wall:.1f}x wall, {other.cpu / self.cpu:.1f}x CPU"


def timed(fn, repeat: int = 1):
    best, out = Timing(float("inf"), float("inf")), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        if wall < best.wall:
            best = Timing(wall, cpu)
    return best, out


def say(msg: str) -> None:
    print(msg, flush=True)


def rlaudit_aggregates(data, reps, seed=0, method="percentile"):
    return interval_estimates({k: [v[:, m] for m in range(v.shape[1])] for k, v in data.items()},
                              METRICS, reps=reps, seed=seed, method=method)


def all_pairs(data, limit=None):
    return list(itertools.combinations(data, 2))[:limit]


def rlaudit_poi(data, reps, seed=0, limit=None):
    out = {}
    for a, b in all_pairs(data, limit):
        x, y = data[a], data[b]
        p = probability_of_improvement(x, y)
        lo, hi = interval(p, poi_replicates(x, y, reps, rng_for(seed, "poi", a, b)))
        out[(a, b)] = (p, lo, hi)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10x fewer replicates (5,000 and 200)")
    ap.add_argument("--reps", type=int, default=None, help="aggregate replicates (default 50,000)")
    ap.add_argument("--poi-reps", type=int, default=None, help="PoI replicates (default 2,000)")
    ap.add_argument("--algorithms", type=int, default=7)
    ap.add_argument("--tasks", type=int, default=26)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="rlaudit timings: best of N")
    ap.add_argument("--poi-pairs", type=int, default=None,
                    help="time PoI on the first N pairs only, for both libraries (rliable needs ~minutes per pair "
                         "at 2,000 replicates on a busy machine); default all")
    ap.add_argument("--skip-rliable", action="store_true", help="time rlaudit only")
    args = ap.parse_args(argv)
    reps = args.reps or (5_000 if args.quick else 50_000)
    poi_reps = args.poi_reps or (200 if args.quick else 2_000)
    data = make_data(args.algorithms, args.tasks, args.runs)
    n_pairs = len(all_pairs(data, args.poi_pairs))
    say(f"data: {args.algorithms} algorithms x {args.tasks} tasks x {args.runs} runs; aggregates: {reps:,} "
        f"replicates x {len(METRICS)} metrics; PoI: {n_pairs} pairs x {poi_reps:,} replicates")
    say(f"numpy {np.__version__}, scipy {scipy.__version__}, python {sys.version.split()[0]}")

    # ------------------------------------------------------------------ 1. aggregate interval estimates
    t_ours, ours = timed(lambda: rlaudit_aggregates(data, reps), args.repeat)
    say(f"[aggregates] rlaudit interval_estimates: {t_ours} (best of {args.repeat})")
    t_poi, ours_poi = timed(lambda: rlaudit_poi(data, poi_reps, limit=args.poi_pairs), args.repeat)
    say(f"[PoI]        rlaudit, {n_pairs} pairs: {t_poi} (best of {args.repeat})")

    # ------------------------------------------------------------------ 3. engine choice
    first = next(iter(data.values()))
    samples = [first[:, m] for m in range(first.shape[1])]

    def scipy_mean(*xs, axis=-1):
        return np.mean(np.stack([np.mean(x, axis=axis) for x in xs], axis=-1), axis=-1)

    def scipy_iqm(*xs, axis=-1):
        return scipy.stats.trim_mean(np.concatenate(xs, axis=axis), 0.25, axis=-1)

    for name, stat in (("mean", scipy_mean), ("iqm", scipy_iqm)):
        t_sp, _ = timed(lambda: scipy.stats.bootstrap(samples, stat, n_resamples=reps, method="percentile",
                                                      vectorized=True, rng=np.random.default_rng(0),
                                                      batch=max(1, (1 << 16) // first.size)))
        t_np, _ = timed(lambda: replicates(samples, [name], reps, rng_for(0)), args.repeat)
        say(f"[engine]     one algorithm, {name}: scipy.stats.bootstrap {t_sp}; rlaudit counts engine "
            f"{t_np} -> {t_np.ratio(t_sp)}")

    # ------------------------------------------------------------------ 4. memory
    tracemalloc.start()
    rlaudit_aggregates(data, reps)
    _, peak_agg = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    rlaudit_poi(data, poi_reps, limit=args.poi_pairs)
    _, peak_poi = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    say(f"[memory]     rlaudit peak traced allocation: aggregates {peak_agg / 2**20:.1f} MiB, "
        f"PoI {peak_poi / 2**20:.1f} MiB")

    if args.skip_rliable:
        say(f"[memory]     process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        return 0

    # ------------------------------------------------------------------ rliable
    from rliable import metrics as rm

    library = import_rliable_library()
    fns = {"iqm": rm.aggregate_iqm, "median": rm.aggregate_median, "mean": rm.aggregate_mean,
           "og": rm.aggregate_optimality_gap}
    func = lambda x: np.array([fns[m](x) for m in METRICS])  # noqa: E731
    np.random.seed(0)  # rliable draws from NumPy's global RNG and ignores random_state
    say(f"[aggregates] rliable get_interval_estimates ({reps:,} replicates; slow) ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_rly, (rly_points, rly_cis) = timed(lambda: library.get_interval_estimates(
            data, func, reps=reps, random_state=np.random.RandomState(0)))
    t_again, _ = timed(lambda: rlaudit_aggregates(data, reps))
    say(f"[aggregates] rliable: {t_rly}; rlaudit again right after: {t_again}")
    t_ours = t_again if t_again.wall > t_ours.wall else t_ours  # the less favourable of the two rlaudit timings
    say(f"[aggregates] rlaudit is {t_ours.ratio(t_rly)} faster (goal >= 30x)")
    t_exp, _ = timed(lambda: rlaudit_aggregates(data, reps, method="expanded"), args.repeat)
    say(f"[aggregates] rlaudit, expanded scheme (the audit's default): {t_exp}; {t_exp.ratio(t_rly)} faster than "
        f"rliable's percentile (goal >= 30x)")
    worst = 0.0
    for k in data:
        for j, m in enumerate(METRICS):
            point, lo, hi = ours[k][m]
            assert abs(point - rly_points[k][j]) <= 1e-12, (k, m)
            width = hi - lo
            worst = max(worst, abs(lo - rly_cis[k][0, j]) / width, abs(hi - rly_cis[k][1, j]) / width)
    say(f"[aggregates] point estimates equal to 1e-12; CI endpoints differ by at most {100 * worst:.2f}% of the "
        f"CI width (Monte-Carlo error of two independent bootstraps)")

    pairs = {f"{a},{b}": (data[a], data[b]) for a, b in all_pairs(data, args.poi_pairs)}
    say(f"[PoI]        rliable probability_of_improvement via get_interval_estimates ({n_pairs} pairs, "
        f"{poi_reps:,} replicates; slow) ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_rly_poi, (rly_p, _) = timed(lambda: library.get_interval_estimates(
            pairs, lambda x, y: np.array([rm.probability_of_improvement(x, y)]), reps=poi_reps,
            random_state=np.random.RandomState(0)))
    for (a, b), (p, _, _) in ours_poi.items():
        assert abs(p - rly_p[f"{a},{b}"][0]) <= 1e-12
    t_again, _ = timed(lambda: rlaudit_poi(data, poi_reps, limit=args.poi_pairs))
    say(f"[PoI]        rliable: {t_rly_poi}; rlaudit again right after: {t_again}")
    t_poi = t_again if t_again.wall > t_poi.wall else t_poi
    say(f"[PoI]        rlaudit is {t_poi.ratio(t_rly_poi)} faster (goal >= 100x)")
    say(f"[memory]     process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
        f"(includes rliable)")
    say(f"SUMMARY aggregates {t_ours.ratio(t_rly)} (rliable {t_rly}; rlaudit {t_ours}); "
        f"PoI over {n_pairs} pairs {t_poi.ratio(t_rly_poi)} (rliable {t_rly_poi}; rlaudit {t_poi}); "
        f"rlaudit peak traced memory {max(peak_agg, peak_poi) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
