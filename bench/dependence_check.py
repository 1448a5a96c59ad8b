"""Does the joint bootstrap see the tests of a nested-budget family as more alike than they are? (A measurement
script, not a test; docs/audit.md, "Not the family's size: the max-T step".)

On the null data sets of ``bench/bench_audit_calibration.py --shapes`` (same generator, seed and order, so the
data sets are the calibration cells'), each audit's IQM replicates give every member of the family (orderings at
each budget, changes to the last budget) a bootstrap distribution; their correlation matrix is the dependence
max-T reads. Across data sets the members' point estimates have a true correlation matrix. Prints, by kind of
member pair, the mean bootstrap correlation against the true one, and what each matrix makes of the family as
max-T would read it under normality: the two-sided level ``c`` with ``P(max |Z_i| > z_c) = alpha`` for
``Z ~ N(0, R)``, as an effective number of tests ``alpha / c`` (``m`` for independent tests, 1 for identical
ones).

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python bench/dependence_check.py --shapes heavy,gamma --tasks 5 \
        --runs 10 --n-budgets 4 --n-algorithms 3 --sims 1000 --reps 4000 --data-seed 1
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import scipy.stats
from bench_audit_calibration import SHAPES, ShapeBenchmark, audit_many, null_data_sets

from rlaudit.audit.engine import family_members, member_statistic
from rlaudit.audit.settings import AuditSettings


def _shared_kind(kx: str, ky: str, same_budget: bool) -> str:
    if kx == ky == "order":
        return f"orderings sharing an algorithm, {'one budget' if same_budget else 'two budgets'}"
    return "changes sharing an algorithm" if kx == ky else "ordering and change sharing an algorithm"


def pair_kind(x: tuple, y: tuple) -> str:
    """The kind of a pair of members: what they share."""
    kx, bx, *px = x
    ky, by, *py = y
    same_pair = px == py
    common = set(px) & set(py)
    if common and not same_pair:  # A - B and A - C move together, A - B and C - A (or B - C) against each other
        a = common.pop()
        side = " (same side)" if px.index(a) == py.index(a) else " (opposite sides)"
        return _shared_kind(kx, ky, bx == by) + side
    if kx == ky == "order":
        return "orderings of one pair, two budgets" if same_pair else "orderings of disjoint pairs"
    if kx == ky == "change":
        return "changes of one pair (same last gap)" if same_pair else "changes of disjoint pairs"
    return "ordering and change of one pair" if same_pair else "ordering and change of disjoint pairs"


def effective_tests(corr: np.ndarray, alpha: float, rng: np.random.Generator, draws: int = 200_000) -> float:
    """``alpha / c`` with ``c`` the two-sided level at which ``max |Z_i|`` of ``Z ~ N(0, corr)`` exceeds its
    critical value with probability ``alpha``."""
    w, v = np.linalg.eigh(corr)
    root = v * np.sqrt(np.clip(w, 0.0, None))
    z = np.abs(rng.standard_normal((draws, corr.shape[0])) @ root.T).max(axis=1)
    crit = np.quantile(z, 1.0 - alpha)
    c = 2.0 * float(scipy.stats.norm.sf(crit))
    return alpha / c


def cell(shape: str, n_tasks: int, n_runs: int, n_budgets: int, n_algorithms: int, sims: int, reps: int,
         seed: int, alpha: float = 0.05) -> None:
    """Audit ``sims`` null data sets of one calibration cell and print the dependence table and effective tests."""
    bench = ShapeBenchmark.make(shape, n_tasks)
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    names = [chr(ord("A") + k) for k in range(n_algorithms)]
    fam = family_members(list(range(1, n_budgets + 1)), list(itertools.combinations(names, 2)))
    kinds = {}
    for i, j in itertools.combinations(range(len(fam)), 2):
        kinds.setdefault(pair_kind(fam[i], fam[j]), []).append((i, j))
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method="expanded", reps=reps)
    points, boot_corr = [], []
    t0 = time.time()
    for sim, sets in enumerate(null_data_sets(bench, n_runs, n_budgets, sims, n_algorithms, rng)):
        by_algorithm = {a: [sets[(a, b)] for b in range(1, n_budgets + 1)] for a in names}
        boot, _ = audit_many(by_algorithm, settings.replace(seed=sim), reps, range(1, n_budgets + 1))
        p, d = zip(*(member_statistic(member, boot, 0, n_budgets) for member in fam))
        d = np.column_stack(d)
        points.append(np.array(p))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot_corr.append(np.corrcoef(d, rowvar=False))
    points = np.array(points)
    true = np.corrcoef(points, rowvar=False)
    boot = np.array(boot_corr)
    m = len(fam)
    print(f"{shape}: {n_tasks} tasks x {n_runs} runs, {n_budgets} budgets, {n_algorithms} algorithms ({m} tests), "
          f"{sims} null data sets (data seed {seed}), {reps} replicates, {time.time() - t0:.0f} s")
    print(f"  {'member pairs':60s} {'n':>4s} {'true corr':>10s} {'bootstrap corr: mean':>21s} {'[10 %, 90 %]':>15s}")
    for kind, idx in sorted(kinds.items()):
        ii, jj = np.array(idx).T
        t = float(np.mean(true[ii, jj]))
        b = np.nanmean(boot[:, ii, jj], axis=1)  # per data set, mean over the member pairs of this kind
        lo, hi = np.nanquantile(b, (0.1, 0.9))
        print(f"  {kind:60s} {len(idx):4d} {t:10.3f} {np.nanmean(b):21.3f}   [{lo:5.3f}, {hi:5.3f}]")
    gen = np.random.default_rng(0)
    mean_boot = np.nanmean(boot, axis=0)
    np.fill_diagonal(mean_boot, 1.0)
    per_set = []
    for c in boot[:: max(1, sims // 100)]:  # a hundred data sets' own matrices (a member that never varies: 0)
        c = np.nan_to_num(c, nan=0.0)
        np.fill_diagonal(c, 1.0)
        per_set.append(effective_tests(c, alpha, gen, 20_000))
    print(f"  effective tests (alpha / c under normality): true correlation {effective_tests(true, alpha, gen):.1f}, "
          f"mean bootstrap correlation {effective_tests(mean_boot, alpha, gen):.1f}, per data set median "
          f"{np.median(per_set):.1f} [10 %, 90 %: {np.quantile(per_set, 0.1):.1f}, {np.quantile(per_set, 0.9):.1f}] "
          f"of {len(per_set)}; m = {m}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="heavy,gamma")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--n-budgets", type=int, default=4)
    ap.add_argument("--n-algorithms", type=int, default=3)
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--data-seed", type=int, default=1)
    args = ap.parse_args()
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            ap.error(f"--shapes: unknown shape {shape!r} (one of {', '.join(SHAPES)})")
        cell(shape, args.tasks, args.runs, args.n_budgets, args.n_algorithms, args.sims, args.reps, args.data_seed)


if __name__ == "__main__":
    main()
