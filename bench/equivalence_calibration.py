"""Error rates of the backend-equivalence verdicts (``scripts/compare_backends.py``), measured in simulation.

Two samples of per-seed scores, ``x`` (the reference backend, ``n_x`` runs) and ``y`` (the other, ``n_y``),
are drawn from one of several shapes that RL scores take, and compared as the script compares them: Welch's
test of equal means, and TOST within a margin of ``frac`` times the reference's mean (``--margin-frac``).
Printed per shape and sample sizes, each a fraction of ``--reps`` simulated pairs (seeded):

- ``P(different | same)``: ``y`` from the same distribution as ``x``; must stay at or under the level;
- ``P(equivalent | +frac)`` and ``P(equivalent | -frac)``: ``y``'s mean ``(1 ± frac)`` times ``x``'s (the shape
  scaled, so a collapsed seed stays collapsed), the margin's edge; must stay at or under the level;
- ``P(equivalent | same)``: the power the sample sizes have.

Two rules are measured: ``fixed``, the margin ``frac * mean(x)`` taken as a known constant in a Welch TOST (how
compare_backends.py read it before 2026-12-03), and ``ratio``, the TOST of the ratio of means
(:func:`rlaudit.stats.equivalence.compare_relative`), whose standard errors carry the reference mean's own
uncertainty.

Sizes ``10/10+10`` are two looks (10 runs a side, then 20 when the first verdict is undetermined), ``a/2``
each look at half the level (see :data:`SIZES`).

``python bench/equivalence_calibration.py [--reps 4000] [--frac 0.25] [--level 0.05]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlaudit.stats.equivalence import compare_relative, compare_samples  # noqa: E402


def _normal(rng, scale, size):
    return scale * rng.normal(25.0, 6.0, size)  # SpaceInvaders-like at 100k


def _lognormal(rng, scale, size):
    return scale * 10.0 * rng.lognormal(0.0, 0.5, size)  # right tail: skewness 1.8


def _collapse(rng, scale, size):
    live = rng.normal(10.0, 2.0, size)
    dead = rng.uniform(0.0, 0.2, size)
    return scale * np.where(rng.random(size) < 0.15, dead, live)  # 15 % of seeds stuck near 0


def _ties(rng, scale, size):
    return rng.poisson(10.0 * scale, size).astype(float)  # integer scores, many ties


def _student(rng, scale, size):
    return scale * (10.0 + 2.0 * rng.standard_t(2.5, size))  # symmetric heavy tails


SHAPES = {"normal": _normal, "lognormal": _lognormal, "collapse 15 %": _collapse, "integer ties": _ties,
          "student t 2.5": _student}
"""Samplers ``(rng, scale, size) -> scores``: the population mean is proportional to ``scale``."""

SIZES = ((3, 3), (5, 5), (10, 10), (20, 20), (10, 5), (10, 10, 20), (10, 10, 20, 2))
"""``(n_x, n_y)`` pairs: the run counts users have, and the recorded Rainbow comparison's 10/5. ``(10, 10, 20)``
is two looks, as the recorded SpaceInvaders comparisons were made: 10 runs a side, and when that verdict is
*undetermined*, 10 more a side and the verdict of all 20, each look at the level; ``(10, 10, 20, 2)`` the same
with each look at half the level (Bonferroni over the looks, ``compare_backends.py --looks``)."""


def _verdict(rule: str, x: np.ndarray, y: np.ndarray, frac: float, level: float) -> str:
    if rule == "fixed":
        margin = frac * abs(float(x.mean()))
        if not margin > 0:
            return "undetermined"
        return compare_samples(x, y, margin, level, reps=1, constant_is_exact=False).verdict
    return compare_relative(x, y, frac, level, reps=1).verdict


def rates(shape: str, size: tuple[int, ...], rule: str, reps: int, frac: float, level: float,
          seed: int = 0) -> dict[str, float]:
    """Fractions of ``reps`` simulated pairs per scenario (see the module docstring); ``size`` is ``(n_x, n_y)``
    or ``(n_x, n_y, n_final)`` (two looks, see :data:`SIZES`)."""
    rng = np.random.default_rng(seed)
    draw = SHAPES[shape]
    n_x, n_y, n_final, n_looks = (*size, *(0, 1)[len(size) - 2:])
    level /= n_looks
    out = {}
    for name, scale, verdict in (("different|same", 1.0, "different"), ("equivalent|+frac", 1 + frac, "equivalent"),
                                 ("equivalent|-frac", 1 - frac, "equivalent"), ("equivalent|same", 1.0, "equivalent")):
        hits = 0
        for _ in range(reps):
            x, y = draw(rng, 1.0, max(n_x, n_final)), draw(rng, scale, max(n_y, n_final))
            got = _verdict(rule, x[:n_x], y[:n_y], frac, level)
            if got == "undetermined" and n_final:
                got = _verdict(rule, x, y, frac, level)
            hits += got == verdict
        out[name] = hits / reps
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--frac", type=float, default=0.25)
    ap.add_argument("--level", type=float, default=0.05)
    ap.add_argument("--rules", default="fixed,ratio")
    args = ap.parse_args(argv)
    mc = 2 * np.sqrt(args.level * (1 - args.level) / args.reps)
    print(f"{args.reps} pairs per cell, level {args.level}, margin ±{args.frac:g} x mean(x); "
          f"Monte Carlo 2 SE at the level: ±{mc:.3f}")
    print(f"{'rule':<6} {'shape':<14} {'n_x/n_y':>12} | {'P(diff|same)':>12} {'P(eq|+frac)':>11} {'P(eq|-frac)':>11} "
          f"| {'P(eq|same)':>10}")
    worst, by_size = {}, {}
    for rule in args.rules.split(","):
        for shape in SHAPES:
            for size in SIZES:
                r = rates(shape, size, rule, args.reps, args.frac, args.level)
                err = max(r["different|same"], r["equivalent|+frac"], r["equivalent|-frac"])
                worst[rule] = max(worst.get(rule, 0.0), err)
                cell = by_size.setdefault((rule, sizes_label(size)), [0.0, 0.0, 0.0])
                cell[0] = max(cell[0], r["different|same"])
                cell[1] = max(cell[1], r["equivalent|+frac"], r["equivalent|-frac"])
                if shape == "normal":
                    cell[2] = r["equivalent|same"]
                flag = "  <- over the level" if err > args.level + mc else ""
                sizes = sizes_label(size)
                print(f"{rule:<6} {shape:<14} {sizes:>12} | {r['different|same']:>12.3f} "
                      f"{r['equivalent|+frac']:>11.3f} {r['equivalent|-frac']:>11.3f} | {r['equivalent|same']:>10.3f}"
                      f"{flag}", flush=True)
    for rule, w in worst.items():
        print(f"{rule}: largest error rate {w:.3f} (level {args.level})")
    print("\nThe largest error rate over the shapes, per rule and run counts (power: normal scores):\n")
    print("| runs a side | fixed: P(different) | fixed: P(equivalent) at the edge | ratio: P(different) "
          "| ratio: P(equivalent) at the edge | ratio: power, normal |")
    print("|---|---|---|---|---|---|")
    for size in SIZES:
        f, r = by_size.get(("fixed", sizes_label(size))), by_size.get(("ratio", sizes_label(size)))
        if f and r:
            print(f"| {sizes_label(size)} | {f[0]:.3f} | {f[1]:.3f} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} |")
    return 0


def sizes_label(size: tuple[int, ...]) -> str:
    """``10/10``, ``10/10+10`` (two looks), ``10/10+10 a/2`` (two looks at half the level each)."""
    return (f"{size[0]}/{size[1]}" + (f"+{size[2] - size[0]}" if len(size) > 2 else "")
            + (f" a/{size[3]}" if len(size) > 3 else ""))


if __name__ == "__main__":
    raise SystemExit(main())
