"""Measure min-max reference scores for a protocol's tasks and print them as a ``[normalization]`` table
(with ``--random-policy``: the random policy's scores alone, as an ``[audit.random_policy]`` table).

- low: the uniformly random policy's mean return, played on the protocol's own evaluation (same
  environment, step limit and episode seeds as a run's evaluation; :mod:`rlaudit.run.reference`);
- high (with ``--store``): the best algorithm's mean score at the store's largest budget, per task, i.e.
  1.0 = "as good as the best agent of this study at its largest budget". This reference is derived from
  the data it then normalises: it only sets how much each task weighs in an aggregate (a per-task affine
  map common to every algorithm keeps every per-task ordering), and it moves if the study changes, so a
  protocol that uses it should say so. ``--seeds 0`` (or ``0-1``, ``0,2``) reads only those seeds' runs:
  a sweep recorded seed by seed can fix its scale from its first seed, so every later report of the growing
  store uses the same references and the later seeds are not in the data that set them. Without
  ``--store`` the high ends are printed as ``HIGH``, to be replaced by a sourced reference.

``--random-policy`` prints the low ends alone as ``[audit.random_policy]``: the audit's learned-vs-random check
reads them while the scores stay raw (no high end needed).

Usage: ``python scripts/reference_scores.py PROTOCOL [--episodes N] [--store STORE [--seeds S] | --random-policy]``
Exit status 2 on bad input.
"""

from __future__ import annotations

import json
import sys
import time


def _best_agent_means(store: str, tasks: list[str],
                      seeds: list[str] | None) -> tuple[int, dict[str, tuple[str, float]]]:
    from rlaudit.errors import InputError
    from rlaudit.store import export_table

    table = export_table(store)
    top = table.budgets[-1]
    frame = table.at_budget(top)
    if seeds is not None:
        frame = frame[frame["run"].isin(seeds)]
    missing = sorted(set(tasks) - set(frame["task"]))
    if missing:
        of = f" of seed(s) {', '.join(seeds)}" if seeds is not None else ""
        raise InputError(f"{store}: no finished run{of} at budget {top} for task(s) {', '.join(missing)}")
    means = frame.groupby(["task", "algorithm"])["score"].mean()
    best = {}
    for task in tasks:
        algo = means[task].idxmax()
        best[task] = (algo, float(means[task][algo]))
    return top, best


def main(argv: list[str]) -> int:
    from rlaudit.cli.fidelity_cmd import parse_seed_list
    from rlaudit.errors import InputError, OneLineArgumentParser
    from rlaudit.protocol import load_protocol, plan
    from rlaudit.run.reference import random_policy_reference

    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("protocol")
    ap.add_argument("--episodes", type=int, default=100, help="random-policy episodes per task (default 100)")
    ap.add_argument("--store", help="a store of the protocol's sweep: the high end is its best agent's mean")
    ap.add_argument("--seeds", help="with --store: only these seeds' runs give the high ends (e.g. 0 or 0-1)")
    ap.add_argument("--random-policy", action="store_true",
                    help="print the random policy's scores as [audit.random_policy] (no normalisation)")
    args = ap.parse_args(argv)
    try:
        if args.episodes < 1:
            raise InputError(f"--episodes: must be at least 1, not {args.episodes}")
        if args.random_policy and args.store:
            raise InputError("--store: not used with --random-policy (it prints no high ends)")
        if args.seeds is not None and not args.store:
            raise InputError("--seeds: only with --store (it picks the store's runs that give the high ends)")
        seeds = parse_seed_list(args.seeds)
        runs = plan(load_protocol(args.protocol)).runs
        first = {}
        for r in runs:  # the lowest seed's evaluation settings per task
            if r.task.id not in first or r.seed < first[r.task.id].seed:
                first[r.task.id] = r
        if not first:
            raise InputError(f"{args.protocol}: its plan has no run, so no task to measure")
        tasks = list(first)
        top, best = _best_agent_means(args.store, tasks, seeds) if args.store else (None, {})
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    refs = {}
    for i, task in enumerate(tasks, 1):
        t0 = time.perf_counter()
        ref = random_policy_reference(first[task].task, first[task].eval, args.episodes)
        refs[task] = ref
        print(f"[{i}/{len(tasks)}] {task}: random policy {ref.mean:.3f} ± {ref.sem:.3f} (s.e.m., "
              f"{args.episodes} episodes, {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    command = f"python scripts/reference_scores.py {args.protocol} --episodes {args.episodes}" + (
        f" --store {args.store}" if args.store else "") + (f" --seeds {args.seeds}" if args.seeds else "") + (
        " --random-policy" if args.random_policy else "")
    if args.random_policy:
        print("[audit.random_policy]")
        print("source = " + json.dumps(f"the uniformly random policy's mean return over {args.episodes} episodes "
                                       f"of this protocol's evaluation ({command})", ensure_ascii=False))
        print("scores = { " + ", ".join(f'"{t}" = {round(refs[t].mean, 3)}' for t in tasks) + " }")
        return 0
    if best:
        winners = ", ".join(f"{t.split('/')[-1]}: {a}" for t, (a, _) in best.items())
        among = f"this sweep's runs of seed(s) {', '.join(seeds)}" if seeds is not None else "this sweep"
        high = (f"the best algorithm's mean score at {top} env steps in {among} ({winners}), derived from the "
                f"data it normalises")
    else:
        high = "HIGH"
    source = (f"low: the uniformly random policy's mean return over {args.episodes} episodes of this protocol's "
              f"evaluation; high: {high} ({command})")
    print("[normalization]")
    print('method = "minmax"')
    print('low = "random"')
    print(f"source = {json.dumps(source, ensure_ascii=False)}")
    print("references = { " + ", ".join(
        f'"{t}" = [{round(refs[t].mean, 3)}, {round(best[t][1], 3) if best else "HIGH"}]' for t in tasks) + " }")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
