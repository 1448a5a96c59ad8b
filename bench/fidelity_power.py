"""Power of the fidelity harness's TOST (rlaudit.fidelity.compare) with no true difference: the fraction of
simulated pairs of normal samples (n runs a side, equal means and SDs) found ``equivalent`` within ±1 pooled SD
(or ``--margin-sd``) at level 0.05 / 2 (two tasks, Bonferroni).
``python bench/fidelity_power.py [--reps 2000] [--margin-sd 1]`` (seeded)."""

from __future__ import annotations

import argparse

import numpy as np

from rlaudit.fidelity.compare import compare_task


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
    args = ap.parse_args()
    for n in (5, 10, 20, 30):
        p = power(n, args.reps, margin_sd=args.margin_sd)
        print(f"n = {n:>2} runs a side: P(equivalent within {args.margin_sd:g} pooled SD | no difference) = {p:.3f}")
