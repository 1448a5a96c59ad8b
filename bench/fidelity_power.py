"""Power of the fidelity harness's TOST (rlaudit.fidelity.compare) with no true difference: the fraction of
simulated pairs of normal samples (n runs a side, equal means and SDs) found ``equivalent`` within ±1 pooled SD
(or ``--margin-sd``) at level 0.05 / 2 (two tasks, Bonferroni).
``python bench/fidelity_power.py [--reps 2000] [--margin-sd 1]`` (seeded).

``--size``: instead, the error the margin's estimation could add. The fraction of pairs found ``equivalent``
when the reference's scores are the built-in's shifted by ``margin_sd`` population SDs (the margin's edge), on
the score shapes of ``bench/equivalence_calibration.py``, 10 and 20 runs a side, at level 0.025. It must stay
near 0.025, and the algorithm's ``equivalent`` (every task equivalent) is then within the family-wise 0.05."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rlaudit.fidelity.compare import compare_task


def size_at_edge(shape: str, n: int, reps: int, seed: int = 0, margin_sd: float = 1.0,
                 level: float = 0.025) -> float:
    """P(``equivalent``) with the reference shifted by ``margin_sd`` population SDs of ``shape``."""
    from equivalence_calibration import SHAPES

    draw = SHAPES[shape]
    shift = margin_sd * float(draw(np.random.default_rng(9), 1.0, 400_000).std())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        x, y = draw(rng, 1.0, n), draw(rng, 1.0, n) + shift
        hits += compare_task("sim", x, y, alpha_task=level, margin_sd=margin_sd, reps=1).verdict == "equivalent"
    return hits / reps


def power(n: int, reps: int, seed: int = 0, margin_sd: float = 1.0, level: float = 0.025) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        x, y = rng.normal(0, 1, n), rng.normal(0, 1, n)
        hits += compare_task("sim", x, y, alpha_task=level, margin_sd=margin_sd, reps=10).verdict == "equivalent"
    return hits / reps


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--margin-sd", type=float, default=1.0)
    ap.add_argument("--size", action="store_true", help="the error at the margin's edge on several shapes")
    args = ap.parse_args()
    if args.size:
        from equivalence_calibration import SHAPES

        for shape in SHAPES:
            for n in (10, 20):
                p = size_at_edge(shape, n, args.reps, margin_sd=args.margin_sd)
                print(f"{shape:<14} n = {n}: P(equivalent | shifted {args.margin_sd:g} SD) = {p:.3f} (level 0.025)",
                      flush=True)
        raise SystemExit(0)
    for n in (5, 10, 20, 30):
        p = power(n, args.reps, margin_sd=args.margin_sd)
        print(f"n = {n:>2} runs a side: P(equivalent within {args.margin_sd:g} pooled SD | no difference) = {p:.3f}")
