"""Are two backends' runs of the same protocol statistically the same? Per-seed scores of two stores compared.

For every (algorithm label, task, budget) recorded in both stores (``--a``, the reference, usually the SB3
backend's; ``--b``, usually the JAX backend's), the runs' scores (mean return over each evaluation's episodes,
one per seed) are compared as two samples (:func:`rlaudit.stats.equivalence.compare_samples`): the difference
of means ``b - a`` with its bootstrap interval, Welch's test of equal means and a TOST equivalence test within
the stated margin (each comparison at level ``--alpha``, and the verdict line says how many comparisons were
made). ``--margin-frac`` (default 0.25) tests the ratio of means, ``mean(b)`` within ``(1 ± frac) mean(a)``
(:func:`rlaudit.stats.equivalence.compare_relative`: the reference's mean is an estimate, and its uncertainty
is in the test); ``--margin`` instead tests a fixed margin in score units. It also prints the narrowest margin
these samples can show equivalent (:func:`~rlaudit.stats.equivalence.smallest_relative_margin` or
:func:`~rlaudit.stats.equivalence.smallest_margin`), so that an *undetermined* verdict says how far it is from
*equivalent*. The error rates of both rules on several score shapes: ``bench/equivalence_calibration.py``.

Usage::

    python scripts/compare_backends.py --a sweeps/fidelity-minatar-100k/store.sqlite \\
        --b sweeps/backend-equivalence/store.sqlite --margin-frac 0.25 [--budget 100000] [--markdown]

``--a`` and ``--b`` may each be given several times: the runs of one side's stores are pooled (e.g. seeds 0-9
in one store and seeds 10-19 in another); a run found in two stores of one side is refused.

A comparison whose runs were added after a first look (more seeds, pooled as above) has been looked at twice:
``--looks "LABEL@TASK=2"`` tests it at ``alpha / 2`` (Bonferroni over the looks, valid when the first look's
p-values were both at or above ``alpha / 2``). Uncorrected, two looks at 10 and 20 runs a side err more often
than ``alpha``: ``bench/equivalence_calibration.py``.

``--by-task`` adds, per task, whether ``b`` scores above ``a`` across the algorithms: Stouffer's combination of
their one-sided Welch tests, with its p read as if they were independent and by permuting seeds between the sides
(each seed's runs of every algorithm kept together, since at a seed they share network and environment seeds;
:func:`rlaudit.stats.equivalence.shift_across`, calibrated by ``bench/shift_calibration.py``).

Labels are matched by name; with ``--map "A label=B label"`` (repeatable) only the mapped labels are compared
(two entries of one store: ``--a`` and ``--b`` the same file). Exit status 2 with one line on bad
input (a missing store, no common (label, task, budget)).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def scores_by_key(stores: str | Sequence[str]) -> dict[tuple[str, str, int], dict[str, float]]:
    """``(label, task, budget) -> {run: score}`` of the finished runs of ``stores`` (one path or several, pooled).

    Raises:
        InputError: a run (label, task, budget, run) found in two of the stores.
    """
    from rlaudit.errors import InputError
    from rlaudit.store.export import export_table

    out: dict = {}
    seen: dict = {}
    for store in [stores] if isinstance(stores, str) else stores:
        frame = export_table(store).frame
        for row in frame.itertuples(index=False):
            key, run = (row.algorithm, row.task, int(row.budget)), str(row.run)
            if (key, run) in seen:
                raise InputError(f"{store}: run {run} ({row.algorithm}, {row.task}, {int(row.budget):,}) is also in "
                                 f"{seen[key, run]}; pool stores of other seeds")
            seen[key, run] = store
            out.setdefault(key, {})[run] = float(row.score)
    return out


def compare_stores(a: str | Sequence[str], b: str | Sequence[str], margin: float | None = None,
                   margin_frac: float | None = 0.25, alpha: float = 0.05, budget: int | None = None,
                   mapping: dict[str, str] | None = None, seed: int = 0,
                   looks: dict[tuple[str, str], int] | None = None, min_runs: int = 2) -> list[dict]:
    """One row per common (label, task, budget): sample sizes, means, standard deviations, the comparison.

    ``looks`` maps ``(label, task)`` to the number of times its verdict was read as runs were added: that row is
    tested at ``alpha / looks`` (Bonferroni over the looks). That keeps ``alpha`` whatever made the runs be added,
    provided no earlier look decided anything at ``alpha / looks``: both of its p-values were at or above it.

    A (label, task, budget) with fewer than ``min_runs`` finished runs on a side is left out (not compared yet).

    Raises:
        InputError: nothing in common, fewer than ``min_runs`` runs a side everywhere, or a ``looks`` entry
            matching no row.
    """
    import numpy as np

    from rlaudit.errors import InputError
    from rlaudit.stats.equivalence import (compare_relative, compare_samples, smallest_margin,
                                           smallest_relative_margin)

    mapping, looks = mapping or {}, looks or {}
    sa, sb = scores_by_key(a), scores_by_key(b)
    rows = []
    for (label, task, bud), xa in sorted(sa.items()):
        if mapping and label not in mapping:  # with --map, only the mapped labels are compared
            continue
        key = (mapping.get(label, label), task, bud)
        if key not in sb or (budget is not None and bud != budget):
            continue
        x, y = np.array(list(xa.values())), np.array(list(sb[key].values()))
        if min(x.size, y.size) < max(2, min_runs):
            continue
        rng = np.random.default_rng(seed)
        level = alpha / looks.get((label, task), 1)
        if margin is not None:
            c = compare_samples(x, y, margin, level, rng=rng, constant_is_exact=False)
            narrowest = smallest_margin(x, y, level)
        else:
            c = compare_relative(x, y, margin_frac, level, rng=rng)
            narrowest = smallest_relative_margin(x, y, level) * abs(float(x.mean()))
        rows.append({"label": label, "task": task, "budget": bud, "n_a": int(x.size), "n_b": int(y.size),
                     "mean_a": float(x.mean()), "sd_a": float(x.std(ddof=1)), "mean_b": float(y.mean()),
                     "sd_b": float(y.std(ddof=1)), "difference": c.difference, "interval": c.interval,
                     "p_different": c.p_different, "p_equivalent": c.p_equivalent, "margin": c.margin,
                     "smallest_margin": narrowest, "level": level, "verdict": c.verdict,
                     "scores_a": dict(xa), "scores_b": dict(sb[key])})
    unmatched = sorted(set(looks) - {(r["label"], r["task"]) for r in rows})
    if unmatched:
        raise InputError(f"--looks {unmatched[0][0]}@{unmatched[0][1]}: no such compared (algorithm, task)")
    if not rows:
        raise InputError(f"--a {_names(a)} / --b {_names(b)}: no (algorithm, task, budget) with at least "
                         f"{max(2, min_runs)} finished runs in both sides' stores"
                         + (f" at budget {budget}" if budget is not None else ""))
    return rows


def task_shifts(rows: list[dict], reps: int = 10_000) -> list[dict]:
    """Per task, whether ``b`` scores above ``a`` across the compared algorithms
    (:func:`rlaudit.stats.equivalence.shift_across` on the rows' per-seed scores): how many of them do, Stouffer's
    combination of their one-sided Welch tests with its p read as if the algorithms were independent, and the
    p of a seed-block permutation, which stays right when they share seeds (they do: at a seed, every algorithm
    starts from the same network and environment seeds). A suite-level reading of the rows, not a verdict on any
    one of them.

    Returns:
        ``{"task", "n", "n_higher", "z", "p", "p_permutation", "correlation", "reps", "splits"}`` per task, in
        the order tasks first appear (``p`` is ``p_independent``; the others as :class:`ShiftTest` names them).
    """
    from rlaudit.stats.equivalence import shift_across

    tasks: dict[str, list[dict]] = {}
    for r in rows:
        tasks.setdefault(r["task"], []).append(r)
    result = []
    for task, group in tasks.items():
        a = {r["label"]: r["scores_a"] for r in group}
        b = {r["label"]: r["scores_b"] for r in group}
        s = shift_across(a, b, reps=reps)
        result.append({"task": task, "n": s.n, "n_higher": s.n_higher, "z": s.z, "p": s.p_independent,
                       "p_permutation": s.p_permutation, "correlation": s.correlation, "reps": s.reps,
                       "splits": s.splits})
    return result


def _names(stores: str | Sequence[str]) -> str:
    return stores if isinstance(stores, str) else " + ".join(stores)


def format_rows(rows: list[dict], markdown: bool) -> str:
    head = ["algorithm", "task", "budget", "runs a/b", "level", "a: mean ± sd", "b: mean ± sd",
            "b - a [(1 - level) CI]", "p(diff)", "margin", "p(TOST)", "narrowest margin shown", "verdict"]
    body = [[r["label"], r["task"], f"{r['budget']:,}", f"{r['n_a']}/{r['n_b']}", f"{r['level']:g}",
             f"{r['mean_a']:.2f} ± {r['sd_a']:.2f}",
             f"{r['mean_b']:.2f} ± {r['sd_b']:.2f}",
             f"{r['difference']:+.2f} [{r['interval'][0]:+.2f}, {r['interval'][1]:+.2f}]", f"{r['p_different']:.3g}",
             f"±{r['margin']:.2f}", f"{r['p_equivalent']:.3g}", f"±{r['smallest_margin']:.2f}", r["verdict"]]
            for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [head, *body])


def main(argv=None) -> int:
    from rlaudit.errors import InputError, OneLineArgumentParser

    ap = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, action="append",
                    help="reference store (e.g. the SB3 backend's); repeat to pool stores of other seeds")
    ap.add_argument("--b", required=True, action="append",
                    help="compared store (e.g. the JAX backend's); repeat to pool stores of other seeds")
    ap.add_argument("--margin", type=float, help="equivalence margin in score units")
    ap.add_argument("--margin-frac", type=float, default=0.25,
                    help="margin as this fraction of the reference's mean score (default 0.25)")
    ap.add_argument("--alpha", type=float, default=0.05, help="level of each test (default 0.05)")
    ap.add_argument("--budget", type=int, help="only this budget")
    ap.add_argument("--map", action="append", default=[], help="'label in a=label in b' when they differ")
    ap.add_argument("--looks", action="append", default=[], metavar="LABEL@TASK=K",
                    help="that comparison's verdict was read K times as runs were added: test it at alpha / K")
    ap.add_argument("--min-runs", type=int, default=2,
                    help="compare a (label, task, budget) only once each side has this many finished runs (default 2)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    ap.add_argument("--by-task", action="store_true",
                    help="also, per task, whether b scores above a across the algorithms "
                         "(Stouffer's z; seed-permutation p)")
    args = ap.parse_args(argv)
    try:
        for path in args.a + args.b:
            if not Path(path).is_file():
                raise InputError(f"{path}: no such store")
        if args.margin is not None and not args.margin > 0:
            raise InputError(f"--margin: must be positive, not {args.margin}")
        if not args.margin_frac > 0:
            raise InputError(f"--margin-frac: must be positive, not {args.margin_frac}")
        if not 0 < args.alpha < 1:
            raise InputError(f"--alpha: must be in (0, 1), not {args.alpha}")
        mapping = {}
        for item in args.map:
            if "=" not in item:
                raise InputError(f"--map: expected 'label in a=label in b', got {item!r}")
            k, v = item.split("=", 1)
            mapping[k] = v
        looks = {}
        for item in args.looks:
            name, _, k = item.rpartition("=")
            label, _, task = name.partition("@")
            if not (label and task and k.isdigit() and int(k) >= 1):
                raise InputError(f"--looks: expected 'LABEL@TASK=K' with K a whole number >= 1, got {item!r}")
            looks[label, task] = int(k)
        if args.min_runs < 2:
            raise InputError(f"--min-runs: must be at least 2, not {args.min_runs}")
        rows = compare_stores(args.a, args.b, args.margin, args.margin_frac, args.alpha, args.budget, mapping,
                              looks=looks, min_runs=args.min_runs)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_rows(rows, args.markdown))
    n_eq = sum(r["verdict"] == "equivalent" for r in rows)
    n_diff = sum(r["verdict"] == "different" for r in rows)
    lowered = [r for r in rows if r["level"] < args.alpha]
    print(f"\n{len(rows)} comparisons at level {args.alpha:g} each"
          + (f" ({len(lowered)} at a lower level after more than one look)" if lowered else "")
          + f": {n_eq} equivalent, {n_diff} different, {len(rows) - n_eq - n_diff} undetermined")
    if args.by_task:
        print("\nacross the algorithms, per task (b above a; Stouffer's z of one-sided Welch tests; two-sided p as if "
              "the algorithms were independent, and by permuting seeds, each seed's runs of every algorithm "
              "together):")
        for s in task_shifts(rows):
            rho = ("" if s["correlation"] is None
                   else f"; per-seed scores correlate across algorithms: {s['correlation']:+.2f}")
            few = (f" (only {s['splits']} ways to split the seeds: it cannot go below about {2 / s['splits']:.2g})"
                   if 2 / s["splits"] > args.alpha else "")
            print(f"  {s['task']}: {s['n_higher']} of {s['n']} higher, z {s['z']:+.2f}, p {s['p']:.3g} if "
                  f"independent, {s['p_permutation']:.3g} by seed permutation ({s['reps']:,}){few}{rho}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
