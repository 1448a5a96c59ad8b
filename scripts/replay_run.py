"""Retrain one recorded run from its store's protocol: bit for bit on the recording machine, as distributions elsewhere.

What is true of rlaudit's reruns: on the machine and build that recorded a store (same CPU instruction set,
torch / NumPy builds, thread count, library versions: the fingerprint in the store's ``meta.machine``), the
same seed gives the same numbers, bit for bit; this is how a change to the runner is shown not to move a
recorded result (the flagship's ``MinAtar/Breakout-v1__DQN__0__nested`` was replayed this way after the
acting fast path). On another machine the numbers differ (one rounding difference and training diverges),
so there the question is whether the rerun's *scores* come from the same distribution:

1. The script compares this machine's fingerprint with the recorded one and says which facts differ.
2. Same machine: RUN_ID is retrained and every evaluation compared bit for bit (exit 0 identical, 1 not).
3. Another machine (or a store resumed on several, a run that trained on several, or one that records no
   fingerprint and does not replay identically): the runs of RUN_ID's group (same task, algorithm and regime; every finished seed, or the
   first ``--runs N``) are retrained, and at each budget the recorded scores and the retrained ones are
   compared as two samples: Welch's t-test of equal means and a TOST equivalence test within ``--margin``
   (default: 10% of the task's normalisation range), at level ``--alpha`` divided by the number of
   budgets (Bonferroni), with a bootstrap interval of the difference (:mod:`rlaudit.stats.equivalence`).
   Exit 1 when a budget's distributions differ, else 0 (equivalent, or undetermined: too few runs to show
   equivalence within the margin, which is said).

Limits of step 3: it tests the mean score per budget, not every feature of the distribution; with 5 runs a
side it detects only large shifts (about 2 standard deviations of the runs' scores) and rarely shows
equivalence within a tight margin; the retrained runs reuse the recorded seeds, which after divergence
behave as fresh draws (if they do not diverge, the two samples are positively correlated, which makes both
tests conservative).

Usage: ``python scripts/replay_run.py STORE RUN_ID [--runs N] [--margin M] [--alpha A] [--seed S]``
"""

from __future__ import annotations

import sys
import time

DEFAULT_MARGIN_FRACTION = 0.1
"""Default equivalence margin: this fraction of the task's normalisation range (high - low)."""


def _scores_at(evaluations: dict, budgets) -> dict[int, float]:
    """``budget -> score`` as the export reads it: the mean return of the first evaluation at or after it."""
    import numpy as np

    out = {}
    for b in budgets:
        at = [s for s in sorted(evaluations) if s >= b]
        out[b] = float(np.mean(evaluations[at[0]][0])) if at else float("nan")
    return out


def _retrain(spec) -> dict:
    from rlaudit.run.allocator import keep_freed_memory
    from rlaudit.run.runner import execute_run

    keep_freed_memory()  # as the executors' workers train (it changes no number)
    records = []
    execute_run(spec, records.append)
    return {r.env_steps: (list(r.returns), list(r.lengths)) for r in records}


def _machine_lines(recorded, also, current) -> tuple[str, list[str]]:
    """``(state, lines)``: ``match``, ``differs`` or ``unknown``, and what to print about the machine."""
    from rlaudit.run.machine import fingerprint_differences

    if recorded is None:
        return "unknown", ["machine: the store records no machine fingerprint (written before rlaudit recorded "
                           "one), so whether this is the recording machine is unknown"]
    diffs = fingerprint_differences(recorded, current)
    lines = [f"machine: {'matches the recorded one' if not diffs else 'differs from the recorded one'}"]
    lines += [f"  {key}: recorded {old!r}, here {new!r}" for key, old, new in diffs]
    if also:
        lines.append(f"  the store was also written on {len(also)} other machine(s) (resumed elsewhere); runs "
                     f"do not record which machine trained them")
        return "unknown" if not diffs else "differs", lines
    return ("differs" if diffs else "match"), lines


def _group(the_plan, spec, done: set[str], n_runs: int | None) -> list:
    """Finished runs of ``spec``'s task, algorithm and regime, ``spec`` first, then by seed."""
    same = [r for r in the_plan.runs if r.run_id in done and r.run_id != spec.run_id and r.task.id == spec.task.id
            and r.algorithm.label == spec.algorithm.label and r.regime == spec.regime]
    group = [spec, *sorted(same, key=lambda r: r.seed)]
    return group[:n_runs] if n_runs else group


def _distribution_setup(protocol, the_plan, spec, done: set[str], args, where: str) -> tuple[list, float]:
    """The runs to retrain and the equivalence margin; :class:`InputError` when there is no comparison."""
    from rlaudit.errors import InputError
    from rlaudit.stats.normalize import parse_normalization

    group = _group(the_plan, spec, done, args.runs)
    if len(group) < 2:
        raise InputError(f"{args.store}: only {len(group)} finished run of {spec.task.id} / {spec.algorithm.label} "
                         f"({spec.regime}); a distribution comparison needs at least 2")
    if args.margin is not None:
        return group, args.margin
    norm = parse_normalization(protocol.normalization, f"{where}: normalization") if protocol.normalization else None
    ref = norm.reference_for(spec.task.id) if norm is not None else None
    if ref is None:
        raise InputError(f"--margin: the store's protocol has no normalisation range for task {spec.task.id!r}; "
                         f"give the equivalence margin in score units")
    return group, DEFAULT_MARGIN_FRACTION * abs(ref[1] - ref[0])


def _compare_distributions(group, first: dict, stored_of, margin: float, alpha: float, seed: int) -> int:
    """Retrain ``group`` (its first run's evaluations given), compare per budget, print; the exit status."""
    import numpy as np

    from rlaudit.stats.equivalence import compare_samples

    budgets = group[0].budgets
    stored = [_scores_at(stored_of(r.run_id), budgets) for r in group]
    fresh = [_scores_at(first, budgets)]
    for k, r in enumerate(group[1:], 2):
        t0 = time.perf_counter()
        fresh.append(_scores_at(_retrain(r), budgets))
        print(f"  retrained {r.run_id} ({k}/{len(group)}, {time.perf_counter() - t0:.0f} s)", flush=True)
    level = alpha / len(budgets)
    print(f"distributions: {len(group)} recorded vs {len(group)} retrained runs of {group[0].task.id} / "
          f"{group[0].algorithm.label} ({group[0].regime}); Welch and TOST (margin {margin:g}) at level "
          f"{alpha:g}/{len(budgets)} per budget, {100 * (1 - level):.1f}% bootstrap interval")
    verdicts = []
    for i, b in enumerate(budgets):
        c = compare_samples([s[b] for s in stored], [s[b] for s in fresh], margin, level,
                            rng=np.random.default_rng([seed, i]))
        verdicts.append(c.verdict)
        print(f"  at {b} env steps: recorded mean {c.mean_x:.4g}, retrained {c.mean_y:.4g}, difference "
              f"{c.difference:+.4g} [{c.interval[0]:+.4g}, {c.interval[1]:+.4g}], p(equal means) {c.p_different:.3g}, "
              f"p(not within +-{margin:g}) {c.p_equivalent:.3g}: {c.verdict}")
    if "different" in verdicts:
        print("verdict: DIFFERENT distributions at "
              + ", ".join(str(b) for b, v in zip(budgets, verdicts) if v == "different"))
        return 1
    if all(v == "equivalent" for v in verdicts):
        print(f"verdict: equivalent within +-{margin:g} at every budget")
    else:
        print(f"verdict: no difference detected; equivalence within +-{margin:g} not shown at "
              + ", ".join(str(b) for b, v in zip(budgets, verdicts) if v == "undetermined")
              + f" with {len(group)} runs a side (more runs, --runs, or a wider --margin)")
    return 0


def main(argv: list[str]) -> int:
    from rlaudit.errors import InputError, OneLineArgumentParser
    from rlaudit.protocol import parse_protocol, plan
    from rlaudit.run.machine import machine_fingerprint
    from rlaudit.run.runner import set_single_thread
    from rlaudit.store import done_run_ids, run_evaluations, run_machines, stored_machines, stored_protocol_text

    ap = OneLineArgumentParser(prog="replay_run.py", description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("run_id")
    ap.add_argument("--runs", type=int, help="runs of the group retrained off the recording machine (default: all)")
    ap.add_argument("--margin", type=float, help="equivalence margin in score units (default: 10%% of the "
                                                 "task's normalisation range)")
    ap.add_argument("--alpha", type=float, default=0.05, help="error rate over the budgets (default 0.05)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (default 0)")
    args = ap.parse_args(argv)
    try:
        if args.runs is not None and args.runs < 2:
            raise InputError(f"--runs: need at least 2 runs to compare distributions, not {args.runs}")
        if args.margin is not None and not args.margin > 0:
            raise InputError(f"--margin: must be positive, not {args.margin}")
        if not 0 < args.alpha < 1:
            raise InputError(f"--alpha: must be between 0 and 1, not {args.alpha}")
        text, where = stored_protocol_text(args.store)
        protocol = parse_protocol(text, where)
        the_plan = plan(protocol)
        spec = next((r for r in the_plan.runs if r.run_id == args.run_id), None)
        if spec is None:
            raise InputError(f"{args.store}: no run {args.run_id!r} in its protocol's plan")
        stored = run_evaluations(args.store, args.run_id)
        if not stored:
            raise InputError(f"{args.store}: run {args.run_id} has no stored evaluation")
        recorded, also = stored_machines(args.store)
        state, lines = _machine_lines(recorded, also, machine_fingerprint())
        trained_on = run_machines(args.store, args.run_id) or []
        if len(trained_on) > 1:  # resumed from a checkpoint written elsewhere (rlaudit run --resume-on-any-machine)
            state = "differs"
            lines.append(f"  {args.run_id} trained on {len(trained_on)} machines in turn (resumed from a checkpoint "
                         f"written on another), so no machine replays it bit for bit")
        done = done_run_ids(args.store)
        # Off the recording machine the comparison is checked before anything trains.
        group, margin = (_distribution_setup(protocol, the_plan, spec, done, args, where) if state == "differs"
                         else (None, None))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    set_single_thread()
    t0 = time.perf_counter()
    fresh = _retrain(spec)
    same = fresh == stored
    print(f"{args.run_id}: {'identical' if same else 'DIFFERENT'} ({len(fresh)} evaluations, "
          f"{time.perf_counter() - t0:.0f} s)")
    if state == "match" or (state == "unknown" and same):
        for steps in sorted(set(fresh) | set(stored)):
            if fresh.get(steps) != stored.get(steps):
                print(f"  at {steps} env steps: stored {stored.get(steps)}, retrained {fresh.get(steps)}")
        return 0 if same else 1
    print("  (bits are not expected to match off the recording machine; comparing distributions)" if state == "differs"
          else "  (the recording machine is unknown, so the difference may be the machine's; comparing distributions)")
    try:
        if group is None:
            group, margin = _distribution_setup(protocol, the_plan, spec, done, args, where)
        return _compare_distributions(group, fresh, lambda rid: run_evaluations(args.store, rid), margin,
                                      args.alpha, args.seed)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
