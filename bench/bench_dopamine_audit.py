"""Benchmark: import the whole Dopamine legacy set (60 games) and audit it at 5 budgets, 15 pairs, default reps.

The default replicate count is the larger of 50,000 and 20 m / alpha for the audit's m tests (75 orderings and
60 change tests: 54,000). Also prints the error-controlled findings (confirmed inversions, tested changes)
and, for the pairs the docs discuss, the decisions at every budget.

Usage: ``python bench/bench_dopamine_audit.py [DATA_DIR]`` (default ``../shared/data``). Prints wall times,
peak RSS and their ratios to the targets (30 s end to end, 2 GB). The audit uses human-normalised scores,
so it covers the 55 games that have Atari-57 reference scores (the 5 others, AirRaid, Carnival,
ElevatorAction, JourneyEscape and Pooyan, are imported but cannot be human-normalised).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

TARGET_S = 30.0
TARGET_RSS_MB = 2048.0
BUDGETS = [10_000_000, 25_000_000, 50_000_000, 100_000_000, 200_000_000]


def main(argv: list[str]) -> None:
    data = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
    t0 = time.perf_counter()
    from rlaudit.audit import AuditSettings, run_audit
    from rlaudit.importers import import_path
    from rlaudit.stats.normalize import canonical_game

    t_imp = time.perf_counter()
    table = import_path("dopamine", [data / "dopamine" / "atari"], variant="legacy", n_runs=5, budgets=BUDGETS)
    t_imp = time.perf_counter() - t_imp
    n_games = len(table.tasks)
    keep = [t for t in table.tasks if canonical_game(t)]
    table = table.with_frame(table.frame[table.frame["task"].isin(keep)])
    settings = AuditSettings(metric="iqm", budgets=tuple(BUDGETS), normalization="atari", seed=0)
    t_aud = time.perf_counter()
    result = run_audit(table, settings)
    t_aud = time.perf_counter() - t_aud
    total = time.perf_counter() - t0
    doc = result.to_dict()
    n_pairs = len({(o["a"], o["b"]) for o in doc["orderings"]})
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss_mb = usage.ru_maxrss / 1024.0
    cpu = usage.ru_utime + usage.ru_stime
    print(f"imported {n_games} games ({len(keep)} audited, human-normalised), {len(table.algorithms)} agents, "
          f"{len(BUDGETS)} budgets, {n_pairs} pairs, {doc['settings']['reps']:,} replicates "
          f"({doc['settings']['interval_method']}, {doc['settings']['correction']}, {doc['settings']['n_tests']} tests)")
    print(f"import  {t_imp:7.2f} s")
    print(f"audit   {t_aud:7.2f} s")
    print(f"total   {total:7.2f} s   (target {TARGET_S:.0f} s; ratio {total / TARGET_S:.2f})")
    print(f"cpu     {cpu:7.2f} s   (user + system of this process; load average {os.getloadavg()[0]:.1f} when done, "
          f"{os.cpu_count()} cores)")
    print(f"peak RSS {rss_mb:6.0f} MB  (target {TARGET_RSS_MB:.0f} MB; ratio {rss_mb / TARGET_RSS_MB:.2f})")
    print("findings (error-controlled):")
    for inv in doc["inversions"]:
        if inv["finding"]:
            print(f"  {inv['kind']:9} {inv['a']} vs {inv['b']}: {inv['decision_low']} at {inv['budget_low'] // 10**6}M, "
                  f"{inv['decision_high']} at {inv['budget_high'] // 10**6}M")
    def named(prefix: str) -> str | None:
        return next((a for a in doc["data"]["algorithms"] if a.lower().startswith(prefix)), None)

    for x, y in (("quantile (jax)", "c51"), ("quantile (jax)", "dqn (adam + mse"), ("iqn", "rainbow")):
        a, b = named(x), named(y)
        if a and b:
            rows = [result.ordering(bud, a, b) for bud in BUDGETS]
            print(f"  {a} vs {b}: " + ", ".join(f"{bud // 10**6}M {r['a']}-{r['b']} {r['decision']} "
                                                f"(p_adj {r['p_adjusted']:.3g})" for bud, r in zip(BUDGETS, rows)))


if __name__ == "__main__":
    main(sys.argv)
