"""Coverage of the Kendall τ interval of the joined published-vs-rerun audit (a measurement script, not a test).

What is measured: the interval ``rank_agreement`` reports for τ-b between the published and the rerun ranking
of 5 agents, against the TRUE τ: τ between the agents' *population* IQMs on the two sides (tasks held fixed,
as the bootstrap holds them fixed; only the runs are random).

Simulated benchmarks (Gaussian runs, or Gamma-skewed with ``--skew k``; the population IQM is exact): on each
side, task ``m`` has a scale
``s_m`` (log-uniform; published 60 tasks over [0.3, 3] like human-normalised Atari, rerun 5 tasks over
[1, 30] like raw MinAtar returns), and a run of agent ``a`` scores ``N(s_m (e_a + g_am), (SD s_m)^2)`` with
``e_a`` the agent's effect (the scenario), ``g_am`` a fixed agent x task interaction (SD 0.05) and run noise
``SD = 0.5`` of the task scale. Agents' effects are 0.15 apart on the rerun side (adjacent agents are hard to
tell apart with 5 tasks of a few runs) and 0.1 apart on the published side (60 tasks x 5 runs separate them).
The population IQM of each agent (25 %-trimmed mean of the equal-weight mixture of its task distributions) is
computed exactly. Each simulated audit does what ``rlaudit.audit.joined`` does: per agent and side, the IQM
(:func:`~rlaudit.stats.metrics.aggregate`) and its stratified-bootstrap replicates
(:func:`~rlaudit.stats.bootstrap.replicates`, runs resampled within tasks, tasks fixed, one stream per side
and agent), then :func:`~rlaudit.audit.agreement.rank_agreement`.

Population ties (``tie`` scenario): two agents with the same effects on a side have equal population IQMs, so
τ-b of the population vectors would drop that pair from its denominator, but a sample never ties and the
sample τ-b does not converge there (the tied pair's sample order stays a coin flip at any run count). The
true τ is then taken as the limit of the sample τ's mean: ``sum_pairs sign(dpub) sign(drerun) / n_pairs``
(a tied pair counts 0; τ-a of the population IQMs; equal to τ-b when nothing ties). ``cov_any`` additionally
counts an interval as covering when it holds τ for some order of the tied agents.

Intervals compared (one set of replicates per simulated audit, both sides resampled unless said):

- ``pct``: percentile (the current method; rank_agreement);
- ``basic``: reverse percentile ``[2 t - q_hi, 2 t - q_lo]``, clipped to [-1, 1];
- ``bc``: bias-corrected percentile (z0 from the mid-rank share of replicates below ``t``, no acceleration);
- ``bca``: BCa, acceleration from the leave-one-run-out jackknife of τ over every (side, agent, task);
- ``pct-rr``: percentile with the published side held at its point estimate (rerun resampled only);
- ``basic-rr``: basic interval on those rerun-only replicates.

Printed per scenario and rerun runs-per-task: true τ, bias of the sample τ (mean t - τ), and per interval the
coverage of the true τ (Clopper-Pearson 95 % interval in brackets), the mean width, and how often the point
estimate equals the upper bound (``t=hi``).

    PYTHONPATH=. .venv/bin/python bench/sim_kendall_tau.py --sims 250 --reps 1000 --seed 0   # docs/audit-json.md
    PYTHONPATH=. .venv/bin/python bench/sim_kendall_tau.py --sims 250 --reps 1000 --seed 0 --skew 1
    PYTHONPATH=. .venv/bin/python bench/sim_kendall_tau.py --sims 200 --reps 1000 --seed 0 --runs 3 --expanded
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import scipy.optimize
import scipy.stats
from scipy.special import gammainc, ndtr, ndtri

from rlaudit.audit.agreement import rank_agreement
from rlaudit.stats.agreement import kendall_tau_rows
from rlaudit.stats.bootstrap import bca_levels, jackknife, method_replicates, replicates, rng_for
from rlaudit.stats.metrics import aggregate

N_AGENTS = 5
PUB_TASKS, PUB_RUNS = 60, 5
RER_TASKS = 5
RER_RUNS = (3, 5, 10)
RUN_SD = 0.5
"""Run-to-run standard deviation, as a fraction of the task scale."""
INTERACTION_SD = 0.05
PUB_GAP, RER_GAP = 0.10, 0.15
"""Effect gap between adjacent agents (fraction of the task scale) on each side."""
CONFIDENCE = 0.95
METHODS = ("pct", "basic", "bc", "bca", "pct-rr", "basic-rr")
EXPANDED_METHODS = ("pct-exp", "bc-exp")
"""With ``--expanded``: percentile and BC on replicates of the expanded runs (the audit's default scheme for
aggregates, :func:`~rlaudit.stats.bootstrap.method_replicates`), both sides."""


def _effects(order, gap: float) -> np.ndarray:
    """Agent effects from a rank order (0 = best); agents with the same rank get the same effect (a tie)."""
    return gap * (N_AGENTS - 1 - np.asarray(order, dtype=float))


SCENARIOS = {
    # name: (published rank of each agent, rerun rank of each agent); agents 0..4, rank 0 = best
    "same (tau=1)": ((0, 1, 2, 3, 4), (0, 1, 2, 3, 4)),
    "two swaps (0.6)": ((0, 1, 2, 3, 4), (1, 0, 2, 4, 3)),
    "shuffled (0)": ((0, 1, 2, 3, 4), (2, 0, 4, 3, 1)),
    "reversed (-1)": ((0, 1, 2, 3, 4), (4, 3, 2, 1, 0)),
    "tie (rerun 1=2, 3=4)": ((0, 1, 2, 3, 4), (0, 1, 1, 3, 3)),
    "near-tie pub 2~3": ((0, 1, 2, 2.15, 4), (0, 1, 3, 2, 4)),
}


class Side:
    """One side's fixed benchmark: task scales ``(n_tasks,)`` and per-agent task means ``(n_agents, n_tasks)``."""

    def __init__(self, n_tasks: int, scale_range: tuple[float, float], effects: np.ndarray, rng: np.random.Generator,
                 shape: float = 0.0):
        self.shape = shape  # 0: Gaussian runs; k > 0: runs skewed as Gamma(k) (skewness 2 / sqrt(k))
        self.scales = np.exp(rng.uniform(*np.log(scale_range), n_tasks))
        interaction = rng.normal(0.0, INTERACTION_SD, (N_AGENTS, n_tasks))
        self.means = self.scales * (effects[:, None] + interaction)

    def draw(self, agent: int, n_runs: int, rng: np.random.Generator) -> list[np.ndarray]:
        """A score set for ``agent``: one array of shape ``(n_runs,)`` per task."""
        size = (self.scales.size, n_runs)
        if self.shape:
            noise = (rng.standard_gamma(self.shape, size) - self.shape) / np.sqrt(self.shape)
        else:
            noise = rng.standard_normal(size)
        return list(self.means[agent][:, None] + RUN_SD * self.scales[:, None] * noise)

    def population_iqm(self, agent: int) -> float:
        """Exact 25 %-trimmed mean of the equal-weight mixture of the agent's task distributions."""
        mu, sd, k = self.means[agent], RUN_SD * self.scales, self.shape
        c = sd / np.sqrt(k) if k else sd

        def cdf(x):
            if k:
                return float(np.mean(gammainc(k, np.maximum((x - mu) / c + k, 0.0))))
            return float(np.mean(ndtr((x - mu) / sd)))

        def partial(q):  # E[X 1{X <= q}]; X = mu + c (G - k) with G ~ Gamma(k) when skewed
            if k:
                z = np.maximum((q - mu) / c + k, 0.0)
                return float(np.mean((mu - c * k) * gammainc(k, z) + c * k * gammainc(k + 1, z)))
            z = (q - mu) / sd
            return float(np.mean(mu * ndtr(z) - sd * scipy.stats.norm.pdf(z)))

        lo, hi = float((mu - 10 * sd).min()), float((mu + 10 * sd).max())
        q1 = scipy.optimize.brentq(lambda x: cdf(x) - 0.25, lo, hi, xtol=1e-13)
        q3 = scipy.optimize.brentq(lambda x: cdf(x) - 0.75, lo, hi, xtol=1e-13)
        return (partial(q3) - partial(q1)) / 0.5


def true_taus(pub: np.ndarray, rer: np.ndarray) -> tuple[float, list[float]]:
    """True τ (population ties count 0 over all pairs) and τ for every strict order of tied agents."""
    i, j = np.triu_indices(N_AGENTS, k=1)
    sp, sr = np.sign(pub[i] - pub[j]), np.sign(rer[i] - rer[j])
    tau = float((sp * sr).sum() / len(i))
    broken = set()
    tied = [k for k in range(len(i)) if sp[k] == 0 or sr[k] == 0]
    # every way of breaking the tied pairs (a few pairs at most; intransitive breaks are harmless here)
    for signs in itertools.product((-1.0, 1.0), repeat=len(tied)):
        s = sp * sr
        for k, sign in zip(tied, signs):
            s[k] = sign
        broken.add(round(float(s.sum() / len(i)), 12))
    return tau, sorted(broken)


def _side_estimates(side: Side, n_runs: int, reps: int, rng: np.random.Generator, seed_key,
                    expanded: bool = False) -> tuple:
    """Point ``(n_agents,)``, replicates ``(reps, n_agents)``, jackknife lists and (with ``expanded``) expanded
    replicates ``(reps, n_agents)`` of one simulated study."""
    point = np.empty(N_AGENTS)
    reps_out = np.empty((reps, N_AGENTS))
    reps_exp = np.empty((reps, N_AGENTS)) if expanded else None
    jk = []
    for a in range(N_AGENTS):
        score_set = side.draw(a, n_runs, rng)
        point[a] = aggregate("iqm", score_set)
        reps_out[:, a] = replicates(score_set, ["iqm"], reps, rng_for(*seed_key, a))[:, 0]
        jk.append(jackknife("iqm", score_set))
        if expanded:
            reps_exp[:, a] = method_replicates([score_set], ["iqm"], reps, rng_for(*seed_key, "expanded", a),
                                               method="expanded")[1][0, :, 0]
    return point, reps_out, jk, reps_exp


def _jackknife_taus(point_this, jk_this, point_other, this_first: bool) -> list[np.ndarray]:
    """τ with one run left out, one array per (agent, task) of this side."""
    out = []
    for a, per_task in enumerate(jk_this):
        for values in per_task:
            rows = np.repeat(point_this[None, :], values.size, axis=0)
            rows[:, a] = values
            out.append(kendall_tau_rows(rows, point_other) if this_first else kendall_tau_rows(point_other, rows))
    return out


def _bc(t: float, values: np.ndarray, alpha: float) -> tuple[float, float]:
    """Bias-corrected percentile interval (BCa with zero acceleration) of a discrete statistic."""
    z0 = ndtri((np.count_nonzero(values < t) + np.count_nonzero(values <= t)) / (2.0 * values.size))
    levels = np.nan_to_num(ndtr(2 * z0 + ndtri(np.array([alpha, 1 - alpha]))), nan=0.5)
    lo, hi = np.quantile(values, levels)
    return float(lo), float(hi)


def intervals(pp, pr, pjk, rp, rr, rjk, pe=None, re=None) -> dict[str, tuple[float, float, float]]:
    """``{method: (t, lo, hi)}`` from one simulated audit's points, replicates and jackknife values."""
    alpha = (1 - CONFIDENCE) / 2
    r = rank_agreement(pp, rp, pr, rr, CONFIDENCE)
    t = r["tau"]
    both = kendall_tau_rows(pr, rr)
    rr_only = kendall_tau_rows(pp[None, :], rr)
    out = {"pct": (t, r["lo"], r["hi"])}
    out["basic"] = (t, max(-1.0, 2 * t - r["hi"]), min(1.0, 2 * t - r["lo"]))
    out["bc"] = (t, *_bc(t, both, alpha))
    jk = _jackknife_taus(pp, pjk, rp, True) + _jackknife_taus(rp, rjk, pp, False)
    out["bca"] = (t, *(float(q) for q in np.quantile(both, bca_levels(t, both, alpha, jk))))
    lo, hi = (float(q) for q in np.quantile(rr_only, [alpha, 1 - alpha]))
    out["pct-rr"] = (t, lo, hi)
    out["basic-rr"] = (t, max(-1.0, 2 * t - hi), min(1.0, 2 * t - lo))
    if pe is not None:
        exp = kendall_tau_rows(pe, re)
        out["pct-exp"] = (t, *(float(q) for q in np.quantile(exp, [alpha, 1 - alpha])))
        out["bc-exp"] = (t, *_bc(t, exp, alpha))
    return out


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = scipy.stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = scipy.stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=200, help="simulated audits per scenario and run count")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replicates per side and agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skew", type=float, default=0.0,
                        help="Gamma shape k of the run noise (skewness 2/sqrt(k)); 0 = Gaussian runs")
    parser.add_argument("--runs", type=int, nargs="*", default=list(RER_RUNS), help="rerun runs per task")
    parser.add_argument("--expanded", action="store_true", help="also intervals on expanded-run replicates")
    parser.add_argument("--scenarios", nargs="*", default=None, help="substrings of scenario names to run")
    args = parser.parse_args()

    eps = 1e-9
    methods = METHODS + (EXPANDED_METHODS if args.expanded else ())
    start = time.perf_counter()
    print(f"{args.sims} simulated audits per row, {args.reps} replicates, seed {args.seed}; "
          f"published {PUB_TASKS} tasks x {PUB_RUNS} runs, rerun {RER_TASKS} tasks x N runs; 5 agents; run noise "
          f"{'Gamma(%g)' % args.skew if args.skew else 'Gaussian'}")
    print(f"{'scenario':<22}{'N':>3}{'tau':>6}{'bias':>7}  " + "  ".join(f"{m:>24}" for m in methods))
    print(f"{'':<38}" + "  ".join(f"{'cover [CP 95%] width t=hi':>24}" for _ in methods))
    for s_index, (name, (pub_order, rer_order)) in enumerate(SCENARIOS.items()):
        if args.scenarios and not any(k in name for k in args.scenarios):
            continue
        bench_rng = np.random.default_rng([args.seed, s_index])
        pub = Side(PUB_TASKS, (0.3, 3.0), _effects(pub_order, PUB_GAP), bench_rng, args.skew)
        rer = Side(RER_TASKS, (1.0, 30.0), _effects(rer_order, RER_GAP), bench_rng, args.skew)
        # agents tied by the scenario have identical task means, hence identical population IQMs
        for side, order in ((pub, pub_order), (rer, rer_order)):
            for a, b in itertools.combinations(range(N_AGENTS), 2):
                if order[a] == order[b]:
                    side.means[b] = side.means[a]
        pub_pop = np.array([pub.population_iqm(a) for a in range(N_AGENTS)])
        rer_pop = np.array([rer.population_iqm(a) for a in range(N_AGENTS)])
        tau_true, tau_broken = true_taus(pub_pop, rer_pop)
        for n_runs in args.runs:
            hits = {m: 0 for m in methods}
            hits_any = {m: 0 for m in methods}
            width = {m: 0.0 for m in methods}
            at_hi = {m: 0 for m in methods}
            point_sum = 0.0
            for sim in range(args.sims):
                rng = np.random.default_rng([args.seed, s_index, n_runs, sim])
                key = (args.seed, s_index, n_runs, sim)
                pp, pr, pjk, pe = _side_estimates(pub, PUB_RUNS, args.reps, rng, (*key, "published"), args.expanded)
                rp, rr, rjk, re = _side_estimates(rer, n_runs, args.reps, rng, (*key, "rerun"), args.expanded)
                for m, (t, lo, hi) in intervals(pp, pr, pjk, rp, rr, rjk, pe, re).items():
                    hits[m] += lo - eps <= tau_true <= hi + eps
                    hits_any[m] += any(lo - eps <= x <= hi + eps for x in tau_broken)
                    width[m] += hi - lo
                    at_hi[m] += abs(t - hi) < eps
                point_sum += t
            n = args.sims
            cells = []
            for m in methods:
                lo, hi = clopper_pearson(hits[m], n)
                cov = f"{hits[m] / n:.2f} [{lo:.2f},{hi:.2f}]"
                if len(tau_broken) > 1:
                    cov = f"{hits[m] / n:.2f}/{hits_any[m] / n:.2f}any"
                cells.append(f"{cov:>14} {width[m] / n:4.2f} {at_hi[m] / n:4.2f}")
            print(f"{name:<22}{n_runs:>3}{tau_true:>6.2f}{point_sum / n - tau_true:>7.2f}  " + "  ".join(
                f"{c:>24}" for c in cells), flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
