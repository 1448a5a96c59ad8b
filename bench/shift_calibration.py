"""Error rate of the suite-level shift test (``compare_backends.py --by-task``) when the algorithms share seeds.

Two sides (backends) each train ``k`` algorithms on the same ``n`` seeds of their own. At a seed every
algorithm starts from the same network and environment seeds, so a seed's luck is partly shared: the score of
algorithm ``g`` at seed ``s`` is ``mu_g + sqrt(rho) * u_s + sqrt(1 - rho) * e_sg`` on a latent scale, ``u_s``
shared by the seed's runs, then mapped through one of the shapes RL scores take. Both sides draw from one
distribution, so every rejection is an error. Printed per shape, ``rho`` and ``n``, each a fraction of ``--reps``
simulated pairs of sides (seeded), at level ``--level``:

- ``independent``: Stouffer's z of the algorithms' one-sided Welch tests read as standard normal (what
  ``--by-task`` printed before 2026-12-04);
- ``permutation``: the same z against seed-block permutations (``--perms`` of them), each seed's runs of every
  algorithm kept together (:func:`rlaudit.stats.equivalence.shift_across`).

``python bench/shift_calibration.py [--reps 2000] [--perms 1000] [--k 5] [--level 0.05]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlaudit.stats.equivalence import shift_across  # noqa: E402


def _normal(z, mu):
    return mu + 6.0 * z


def _collapse(z, mu):
    return np.where(z < stats.norm.ppf(0.15), 0.1, mu + 2.0 * z)  # the seeds at the bottom 15 % stuck near 0


def _heavy(z, mu):
    return mu + 2.0 * stats.t.ppf(stats.norm.cdf(z), 2.5)  # Student t, 2.5 degrees of freedom


def _ties(z, mu):
    return stats.poisson.ppf(stats.norm.cdf(z), mu).astype(float)  # integer scores, many ties


SHAPES = {"normal": _normal, "collapse 15 %": _collapse, "student t 2.5": _heavy, "integer ties": _ties}
RHOS = (0.0, 0.3, 0.6)
SIZES = (3, 5, 10, 20)


def draw_side(rng, shape, rho: float, n: int, mus) -> dict[str, dict[str, float]]:
    """``algorithm -> {seed: score}`` of one side: ``n`` seeds, one shared latent effect per seed."""
    shared = rng.standard_normal((n, 1))
    latent = np.sqrt(rho) * shared + np.sqrt(1.0 - rho) * rng.standard_normal((n, len(mus)))
    return {f"g{j}": {str(s): float(shape(latent[s, j], mu)) for s in range(n)} for j, mu in enumerate(mus)}


def error_rates(shape, rho: float, n: int, k: int, reps: int, perms: int, level: float,
                rng: np.random.Generator) -> tuple[float, float]:
    """(independent, permutation) rejection rates with both sides from one distribution."""
    mus = np.linspace(5.0, 25.0, k)
    wrong_ind = wrong_perm = 0
    for _ in range(reps):
        a, b = draw_side(rng, shape, rho, n, mus), draw_side(rng, shape, rho, n, mus)
        test = shift_across(a, b, reps=perms, rng=rng)
        wrong_ind += test.p_independent < level
        wrong_perm += test.p_permutation < level
    return wrong_ind / reps, wrong_perm / reps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated pairs of sides per cell (default 2000)")
    ap.add_argument("--perms", type=int, default=1000, help="seed permutations per test (default 1000)")
    ap.add_argument("--k", type=int, default=5, help="algorithms per side (default 5)")
    ap.add_argument("--level", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    mc = 2 * (args.level * (1 - args.level) / args.reps) ** 0.5
    print(f"P(reject | no shift) at level {args.level}, {args.k} algorithms sharing each seed, {args.reps} pairs "
          f"of sides per cell, {args.perms} permutations per test (2 Monte Carlo SE: ±{mc:.3f})")
    print(f"{'shape':15s} {'rho':>4s} {'seeds':>5s}  {'independent':>11s}  {'permutation':>11s}")
    started = time.process_time()
    worst = 0.0
    for name, shape in SHAPES.items():
        for rho in RHOS:
            for n in SIZES:
                ind, perm = error_rates(shape, rho, n, args.k, args.reps, args.perms, args.level, rng)
                worst = max(worst, perm)
                print(f"{name:15s} {rho:4.1f} {n:5d}  {ind:11.3f}  {perm:11.3f}", flush=True)
    print(f"largest permutation rate {worst:.3f}; {time.process_time() - started:.0f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
