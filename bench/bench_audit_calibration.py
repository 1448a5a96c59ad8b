"""Calibration suite of the audit's intervals and decisions (a measurement script, not a test).

Simulated benchmarks: ``n_tasks`` tasks with heterogeneous scales (Gamma shape in [1, 4], scale log-uniform
over two decades: skewed runs of very different sizes), two algorithms A and B, three budgets. Runs are
*nested*: a run's scores at the three budgets come from one latent Gaussian with correlation 0.8 between
budgets (a Gaussian copula), and scores grow with the budget (scale x 1, 1.5, 2). The population IQM of the
benchmark (25 %-trimmed mean of the equal-weight mixture of the task distributions) is computed exactly, so
interval coverage is measured against the truth. Each simulated audit runs the audit's own steps
(``rlaudit.audit.engine``: bootstrap scheme, joint draws across paired budgets, one error-controlled family of
orderings and changes), without the descriptive parts (profiles, per-task intervals, P(A > B)).

Prints, for each scheme (``expanded``, ``percentile``) and N = 3, 5, 10 runs per task, 10 and 26 tasks:

- ``cover``: coverage of the 95 % IQM interval of A at each budget (target 93-97 %);
- ``fwer``: null family-wise error, A and B identical: audits with any decided ordering or change (<= 5 %);
- ``size``: change-test size, A ahead by 0.5 between-run SD at every budget with no growth (the gap is the
  same at every budget): audits with a decided change (<= 5 %);
- ``power``: planted crossing, A ahead by 0.5 between-run SD at the first budget and behind by as much at the
  last: audits reporting the confirmed inversion (target >= 80 % at 26 tasks, N = 10);
- ``chg_pow``: same data, audits whose change test between the first and last budget rejects;
- ``rn_pow``: runs-needed achieved power: a one-budget study with A ahead by 0.15 SD (effect known exactly) at N
  runs; when inconclusive, ``runs_needed`` at ``min_effect`` = the true IQM gap gives n*, and a fresh study
  with n* runs is simulated; the fraction of those that decide (promised: ``power`` = 80 %).

Binomial 95 % intervals (Clopper-Pearson) are printed next to each rate.

    PYTHONPATH=. .venv/bin/python bench/bench_audit_calibration.py --sims 1000      # the table of docs/audit.md
    PYTHONPATH=. .venv/bin/python bench/bench_audit_calibration.py --quick         # 100 audits per cell

``--rn-only`` measures the runs-needed power alone, at a chosen lead (``--rn-effect``), family size
(``--rn-tests``) and data shapes (``--rn-shapes``): the small designs of docs/audit.md, "Runs needed at few runs
and many tests" (``bench/results/runs_needed_power.txt``).
"""

from __future__ import annotations

import argparse
import datetime
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from rlaudit.audit.calibration import detect_shapes
from rlaudit.audit.design_power import LEAD, PowerCell, cells_text
from rlaudit.audit.engine import Progress, Selection, bootstrap_aggregates, decide_family
from rlaudit.audit.runs_needed import runs_needed, scaled_df
from rlaudit.audit.settings import AuditSettings
from rlaudit.stats import bootstrap

RHO = 0.8
"""Correlation of a run's latent score between budgets (nested regimes)."""
GROWTH = (1.0, 1.5, 2.0)
"""Scale of the scores at each budget."""
BUDGETS = (1, 2, 3)


@dataclass(frozen=True)
class Benchmark:
    """Task distributions: ``score = shift + Gamma(shape, scale * growth)``, per task."""

    shapes: np.ndarray
    scales: np.ndarray

    @classmethod
    def make(cls, n_tasks: int, seed: int = 12345) -> Benchmark:
        rng = np.random.default_rng(seed)
        return cls(rng.uniform(1.0, 4.0, n_tasks), np.exp(rng.uniform(np.log(0.1), np.log(10.0), n_tasks)))

    def sd(self, growth: float = 1.0) -> np.ndarray:
        """Between-run standard deviation of each task, shape ``(n_tasks,)``."""
        return np.sqrt(self.shapes) * self.scales * growth

    def population_iqm(self, growth: float, shifts: np.ndarray | float = 0.0) -> float:
        """Exact 25 %-trimmed mean of the equal-weight mixture of the task distributions."""
        k, s = self.shapes, self.scales * growth
        shifts = np.broadcast_to(np.asarray(shifts, dtype=np.float64), k.shape)

        def cdf(x: float) -> float:
            return float(np.mean(scipy.special.gammainc(k, np.maximum(x - shifts, 0.0) / s)))

        def partial(q: float) -> float:  # E[X 1{X <= q}] of the mixture
            z = np.maximum(q - shifts, 0.0) / s
            return float(np.mean(shifts * scipy.special.gammainc(k, z) + k * s * scipy.special.gammainc(k + 1, z)))

        hi = float(np.max(shifts + s * (k + 20 * np.sqrt(k))))
        lo_x = float(np.min(shifts))
        q25 = scipy.optimize.brentq(lambda x: cdf(x) - 0.25, lo_x, hi, xtol=1e-13)
        q75 = scipy.optimize.brentq(lambda x: cdf(x) - 0.75, lo_x, hi, xtol=1e-13)
        return (partial(q75) - partial(q25)) / 0.5

    def draw(self, rng: np.random.Generator, n_runs: int, growth=GROWTH, shifts=None) -> list[list[np.ndarray]]:
        """Nested runs: per budget, one array of shape ``(n_runs,)`` per task; ``shifts[b]`` per task."""
        n_tasks = self.shapes.size
        w = rng.standard_normal((n_tasks, n_runs))
        out = []
        for i, g in enumerate(growth):
            z = np.sqrt(RHO) * w + np.sqrt(1.0 - RHO) * rng.standard_normal((n_tasks, n_runs))
            u = scipy.special.ndtr(z)
            x = scipy.special.gammaincinv(self.shapes[:, None], u) * (self.scales * g)[:, None]
            if shifts is not None:
                x = x + np.asarray(shifts[i])[:, None]
            out.append(list(x))
        return out



SHAPES: tuple[str, ...] = ("gamma", "collapsed", "heavy", "poisson")
"""Data shapes of :class:`ShapeBenchmark` (issue 17): the shapes deep-RL scores have."""
SHAPE_WORDS = {"gamma": "skewed runs", "collapsed": "seeds that collapse to ~0", "heavy": "heavy tails (t, 2.5 df)",
               "poisson": "integer scores with ties"}


@dataclass(frozen=True)
class ShapeBenchmark:
    """Task distributions of a given shape, with nested runs through a Gaussian copula (correlation ``rho``).

    - ``gamma``: skewed runs, Gamma shape 1-4, scale log-uniform over two decades (as :class:`Benchmark`);
    - ``collapsed``: each run (a seed) fails to ~0 with probability 0.2 and stays failed at every budget; the
      others score ``max(0, scale (1 + 0.4 z))``; task scales log-uniform, 30x apart;
    - ``heavy``: ``scale (1 + 0.4 t)`` with ``t`` Student-t with 2.5 degrees of freedom;
    - ``poisson``: Poisson counts with rates 0.5-20 (integer scores, many ties), two tasks constant at 0
      (a game where nothing scores).

    A planted shift adds ``shift * sd`` to every run of a task (``sd``: the task's between-run SD at growth 1).
    Population IQMs come from ``n_truth`` quantile-spaced draws per task (exact for ``gamma``).
    """

    shape: str
    scales: np.ndarray
    params: np.ndarray
    rho: float = 0.7
    n_truth: int = 200_000

    @classmethod
    def make(cls, shape: str, n_tasks: int, rho: float = 0.7, seed: int = 12345) -> ShapeBenchmark:
        rng = np.random.default_rng(seed)
        if shape == "gamma":
            return cls(shape, np.exp(rng.uniform(np.log(0.1), np.log(10.0), n_tasks)), rng.uniform(1.0, 4.0, n_tasks), rho)
        if shape == "poisson":
            return cls(shape, np.ones(n_tasks), rng.uniform(0.5, 20.0, n_tasks), rho)
        return cls(shape, np.exp(rng.uniform(0.0, np.log(30.0), n_tasks)), np.zeros(n_tasks), rho)

    def quantile(self, u: np.ndarray, fail: np.ndarray, growth: float) -> np.ndarray:
        """Scores of shape ``u.shape`` (tasks on axis 0) from copula uniforms ``u`` and failure uniforms ``fail``."""
        sc, pa = self.scales[:, None], self.params[:, None]
        if self.shape == "gamma":
            return scipy.special.gammaincinv(pa, u) * sc * growth
        if self.shape == "collapsed":
            ok = np.maximum(0.0, sc * growth * (1.0 + 0.4 * scipy.special.ndtri(u)))
            return np.where(fail < 0.2, 0.01 * sc * fail, ok)
        if self.shape == "heavy":
            return sc * growth * (1.0 + 0.4 * scipy.stats.t.ppf(u, 2.5))
        lam = np.broadcast_to(pa * growth, u.shape)
        x = scipy.stats.poisson.ppf(u, lam)
        x[:2] = 0.0  # two constant tasks
        return x

    def sd(self) -> np.ndarray:
        """Between-run SD of each task at growth 1, shape ``(n_tasks,)`` (constant tasks: that of the others)."""
        u = (np.arange(self.n_truth) + 0.5) / self.n_truth
        x = self.quantile(np.tile(u, (self.scales.size, 1)), np.tile(np.random.default_rng(0).random(self.n_truth),
                                                                   (self.scales.size, 1)), 1.0)
        sd = x.std(axis=1)
        return np.where(sd > 0, sd, np.median(sd[sd > 0]))

    def population_iqm(self, growth: float, shifts: np.ndarray | float = 0.0) -> float:
        """25 %-trimmed mean of the equal-weight mixture of the task distributions (``n_truth`` draws a task)."""
        if self.shape == "gamma":
            return Benchmark(self.params, self.scales).population_iqm(growth, shifts)
        n = self.n_truth
        u = np.tile((np.arange(n) + 0.5) / n, (self.scales.size, 1))
        fail = np.tile(np.random.default_rng(1).random(n), (self.scales.size, 1))
        x = self.quantile(u, fail, growth) + np.asarray(shifts, dtype=np.float64).reshape(-1, 1)
        return float(scipy.stats.trim_mean(x.ravel(), 0.25))

    def draw(self, rng: np.random.Generator, n_runs: int, growth, shifts=None) -> list[list[np.ndarray]]:
        """Nested runs: per budget, one array of shape ``(n_runs,)`` per task; ``shifts[b]`` per task."""
        n_tasks = self.scales.size
        w = rng.standard_normal((n_tasks, n_runs))
        fail = rng.random((n_tasks, n_runs))
        out = []
        for i, g in enumerate(growth):
            z = np.sqrt(self.rho) * w + np.sqrt(1.0 - self.rho) * rng.standard_normal((n_tasks, n_runs))
            x = self.quantile(scipy.special.ndtr(z), fail, g)
            if shifts is not None:
                x = x + np.asarray(shifts[i])[:, None]
            out.append(list(x))
        return out


def audit_many(sets_by_algorithm: dict[str, list], settings: AuditSettings, reps: int, budgets):
    """The audit's decision steps on any number of algorithms' nested score sets; returns (replicates, family)."""
    budgets = list(budgets)
    names = list(sets_by_algorithm)
    sets = {(a, b): sets_by_algorithm[a][i] for a in names for i, b in enumerate(budgets)}
    n_tasks = len(next(iter(sets_by_algorithm.values()))[0])
    tasks = [f"t{t}" for t in range(n_tasks)]
    # The audit detects data shapes in the scores it audits and adapts its t reading (rlaudit.audit.calibration):
    # the bench measures the procedure as run, detection included.
    sel = Selection(None, "none", names, budgets, tasks, None, sets, None, {a: True for a in names},
                    shapes=detect_shapes(sets, tasks))
    boot = bootstrap_aggregates(sel, settings, ["iqm"], reps, Progress())
    return boot, decide_family(sel, boot, settings, "iqm")


def past_the_replicates(boot, key, confidence: float, reps: int) -> bool:
    """Whether the expanded interval of ``key`` (IQM) sits at a t-corrected level no percentile of its replicates
    resolves (``bootstrap.scheme_interval`` then gives ``bootstrap.t_interval_past``; until 2026-12-06 unbounded)."""
    if key not in boot.df_parts:
        return False
    contributions, dfs = boot.df_parts[key]
    df = bootstrap.effective_df(contributions[0], dfs)
    return float(bootstrap.normal_level(1.0 - confidence, df)) * reps < 2.0


def crossing_shifts(sd: np.ndarray, growth, size: float = 0.5) -> list[np.ndarray]:
    """Per budget, the planted crossing's shift of A's runs per task (``sd``: shape ``(n_tasks,)``): ahead by
    ``size`` SD at the first budget, behind by as much at the last, linear between (ahead with one budget)."""
    n_budgets = len(growth)
    return [sd * size * (1.0 - 2.0 * i / (n_budgets - 1)) * g if n_budgets > 1 else size * sd
            for i, g in enumerate(growth)]


def shape_cell(shape: str, method: str, n_tasks: int, n_runs: int, n_budgets: int, sims: int, reps: int,
               correction: str = "maxt", n_algorithms: int = 3, seed: int = 0, power_too: bool = True,
               crossing_sd: float = 0.5, null_too: bool = True) -> dict:
    """Null FWER (``n_algorithms`` identical), 95 % IQM coverage of A, and planted-crossing power (A ahead of the
    others by ``crossing_sd`` SD at the first budget, behind by as much at the last) for one (shape, scheme, size)
    cell. The data sets do not depend on ``crossing_sd`` (the shift is added to the same draws). ``power_too`` /
    ``null_too`` False: the crossing / null audits are skipped (their data drawn all the same, so that the other
    kind's data sets are those of the full cell) and their rates read "not run". Rates as text; the counts behind
    them under ``counts``."""
    bench = ShapeBenchmark.make(shape, n_tasks)
    growth = tuple(np.linspace(1.0, 2.0, n_budgets))
    budgets = tuple(range(1, n_budgets + 1))
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method=method, correction=correction, reps=reps)
    truth = [bench.population_iqm(g) for g in growth]
    sd = bench.sd()
    names = [chr(ord("A") + k) for k in range(n_algorithms)]
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    cover = n_cover = fwer = power = cover_past = n_past = 0
    # Null diagnostics: which kind of member makes the false findings, and how often a member's own (t-read)
    # p-value falls below alpha and below alpha / m (the level a family of m members works at): a valid
    # p-value does so at most alpha and alpha / m of the time.
    m = len(names) * (len(names) - 1) // 2 * (2 * n_budgets - 1)
    levels = (settings.alpha, settings.alpha / m)
    diag = {"fwer_orderings": 0, "fwer_changes": 0, "n_orderings": 0, "n_changes": 0,
            "orderings_below": [0, 0], "changes_below": [0, 0]}
    for sim in range(sims):
        null_sets = {a: bench.draw(rng, n_runs, growth) for a in names}  # drawn even unaudited (the RNG's order)
        if null_too:
            boot, fam = audit_many(null_sets, settings.replace(seed=sim), reps, budgets)
            for row in boot.aggregates:
                if row["algorithm"] == "A":
                    hit = row["lo"] is not None and row["lo"] <= truth[budgets.index(row["budget"])] <= row["hi"]
                    cover += hit
                    n_cover += 1
                    if past_the_replicates(boot, ("A", row["budget"]), settings.confidence, reps):
                        cover_past += hit
                        n_past += 1
            false_order = any(o["decision"] != "inconclusive" for o in fam.orderings.values())
            false_change = any(c["decision"] == "changed" for c in fam.changes)
            fwer += false_order or false_change
            diag["fwer_orderings"] += false_order
            diag["fwer_changes"] += false_change
            for kind, rows in (("orderings", list(fam.orderings.values())), ("changes", fam.changes)):
                diag[f"n_{kind}"] += len(rows)
                for k, level in enumerate(levels):
                    diag[f"{kind}_below"][k] += sum(r["p_value"] < level for r in rows)
        shifts = crossing_shifts(sd, growth, crossing_sd)
        sets = {"A": bench.draw(rng, n_runs, growth, shifts)} | {a: bench.draw(rng, n_runs, growth) for a in names[1:]}
        if not power_too:  # drawn all the same, so that the null data sets are those of the full cell
            continue
        _, fam = audit_many(sets, settings.replace(seed=10_000 + sim), reps, budgets)
        first, last = fam.orderings[(1, "A", "B")]["decision"], fam.orderings[(n_budgets, "A", "B")]["decision"]
        power += first == "a>b" and last == "b>a"
    not_run = "not run"
    return {"cover": rate(cover, n_cover) if null_too else not_run, "fwer": rate(fwer, sims) if null_too else not_run,
            "power": rate(power, sims) if power_too else not_run,
            "counts": {"cover": cover, "n_cover": n_cover, "fwer": fwer, "power": power, "sims": sims,
                       "cover_past": cover_past, "n_past": n_past},
            "diagnostics": diag | {"levels": levels}}


def diagnostics_line(d: dict) -> str:
    """Null false findings by kind and each kind's member p-values below alpha and alpha / m, as a ratio to the
    level (1.0 for a calibrated p-value; the ratio at alpha / m is what the family's error follows)."""
    parts = []
    for kind in ("orderings", "changes"):
        n = d[f"n_{kind}"]
        if n == 0:
            continue
        ratios = [d[f"{kind}_below"][k] / n / lev for k, lev in enumerate(d["levels"])]
        parts.append(f"{kind}: {d[f'{kind}_below'][1]}/{n} below alpha/m (x{ratios[1]:.2f}), "
                     f"x{ratios[0]:.2f} at alpha")
    return "; ".join(parts)

def audit(a_sets, b_sets, settings: AuditSettings, reps: int, budgets=BUDGETS, scale_out: list | None = None):
    """The audit's decision steps on two algorithms' nested score sets; returns (replicates, family).
    ``scale_out``: a list the data shape's factor on each task's ``n - 1`` (``Selection.df_scale``) is appended to."""
    budgets = list(budgets)
    sets = {("A", b): a_sets[i] for i, b in enumerate(budgets)} | {("B", b): b_sets[i] for i, b in enumerate(budgets)}
    tasks = [f"t{t}" for t in range(len(a_sets[0]))]
    sel = Selection(None, "none", ["A", "B"], budgets, tasks, None, sets, None, {"A": True, "B": True},
                    shapes=detect_shapes(sets, tasks))
    if scale_out is not None:
        scale_out.append(sel.df_scale)
    boot = bootstrap_aggregates(sel, settings, ["iqm"], reps, Progress())
    return boot, decide_family(sel, boot, settings, "iqm")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """95 % Clopper-Pearson interval of a rate of ``k`` in ``n`` (fractions)."""
    lo = scipy.stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = scipy.stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return lo, hi


def rate(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{100 * k / n:5.1f} [{100 * lo:4.1f}, {100 * hi:5.1f}]"


def null_rates(method: str, n_tasks: int, n_runs: int, sims: int, reps: int, correction: str = "maxt",
               seed: int = 0) -> dict[str, int]:
    """Counts under the null (A and B identical): ``cover`` of ``n_cover`` 95 % IQM intervals of A contain the
    population IQM; ``fwer`` of ``sims`` audits decide some ordering or change."""
    bench = Benchmark.make(n_tasks)
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method=method, correction=correction, reps=reps)
    truth = [bench.population_iqm(g) for g in GROWTH]
    rng = np.random.default_rng([seed, n_tasks, n_runs, 0])
    out = {"cover": 0, "n_cover": 0, "fwer": 0, "sims": sims}
    for sim in range(sims):
        boot, fam = audit(bench.draw(rng, n_runs), bench.draw(rng, n_runs), settings.replace(seed=sim), reps)
        for row in boot.aggregates:  # the audit's own 95 % intervals
            if row["algorithm"] == "A":
                out["cover"] += row["lo"] <= truth[BUDGETS.index(row["budget"])] <= row["hi"]
                out["n_cover"] += 1
        out["fwer"] += any(o["decision"] != "inconclusive" for o in fam.orderings.values()) or \
            any(c["decision"] == "changed" for c in fam.changes)
    return out


def calibrate(method: str, n_tasks: int, n_runs: int, sims: int, reps: int, seed: int = 0,
              correction: str = "maxt") -> dict[str, str]:
    """Every measured rate of one (scheme, tasks, runs) cell."""
    null = null_rates(method, n_tasks, n_runs, sims, reps, correction, seed)
    bench = Benchmark.make(n_tasks)
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method=method, correction=correction,
                             reps=reps)
    sd = bench.sd()
    size = power = chg_pow = 0
    rng = np.random.default_rng([seed, n_tasks, n_runs, 1])
    for sim in range(sims):
        # change-test size: A ahead by the same 0.5 SD at every budget, no growth (the gap does not change)
        a = bench.draw(rng, n_runs, (1.0,) * 3, [0.5 * sd] * 3)
        _, fam = audit(a, bench.draw(rng, n_runs, (1.0,) * 3), settings.replace(seed=sim), reps)
        size += any(c["decision"] == "changed" for c in fam.changes)
        # planted crossing: A ahead by 0.5 SD at the first budget, behind by 0.5 SD at the last
        a = bench.draw(rng, n_runs, shifts=[0.5 * sd * GROWTH[0], 0.0 * sd, -0.5 * sd * GROWTH[2]])
        _, fam = audit(a, bench.draw(rng, n_runs), settings.replace(seed=sim), reps)
        d1, d3 = fam.orderings[(1, "A", "B")]["decision"], fam.orderings[(3, "A", "B")]["decision"]
        power += d1 == "a>b" and d3 == "b>a"
        chg_pow += any(c["decision"] == "changed" and c["budget_low"] == 1 for c in fam.changes)
    return {"cover": rate(null["cover"], null["n_cover"]), "fwer": rate(null["fwer"], sims), "size": rate(size, sims),
            "power": rate(power, sims), "chg_pow": rate(chg_pow, sims)}


RN_PLAIN_SE = False
"""Whether the runs-needed estimate plans on the pilot's plain standard error (``--rn-se plain``, the rule before
2026-12-06) instead of its median-unbiased value."""

RN_FLOOR = False
"""Whether the runs-needed estimate waits for a run count where the floor's t reading is below the level (the
rule of the morning of 2026-12-06, ``--beyond floor``)."""


def runs_needed_power(method: str, n_tasks: int, n_runs: int, sims: int, reps: int, effect_sd: float = 0.15,
                      cap: int = 200, tests: int = 1, n_stars: list | None = None, shape: str | None = None) -> str:
    """Achieved power of following ``runs_needed`` at the true effect (``min_effect``), one budget; ``tests``
    stands for the audit's family size: the one ordering is decided at the Bonferroni level ``alpha / tests``
    (the level ``runs_needed`` plans for; max-T is never stricter); ``shape``: a :class:`ShapeBenchmark` shape
    instead of :class:`Benchmark`."""
    bench = Benchmark.make(n_tasks) if shape is None else ShapeBenchmark.make(shape, n_tasks)
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method=method, reps=reps,
                             alpha=0.05 / tests)
    shift = effect_sd * bench.sd()
    true_gap = bench.population_iqm(1.0, shift) - bench.population_iqm(1.0)
    rng = np.random.default_rng([n_tasks, n_runs, 2])
    decided = followed = 0
    for sim in range(sims):
        a = bench.draw(rng, n_runs, (1.0,), [shift])
        scale: list[float] = []
        _, fam = audit(a, bench.draw(rng, n_runs, (1.0,)), settings.replace(seed=sim), reps, budgets=(1,),
                       scale_out=scale)
        row = fam.orderings[(1, "A", "B")]
        if row["decision"] != "inconclusive":
            continue
        se = row["diff_se"]
        if RN_PLAIN_SE and math.isfinite(row["df"]):  # undo the median-unbiased scale the estimate applies
            se *= math.sqrt(scipy.stats.chi2.median(row["df"]) / row["df"])
        n_star, capped = runs_needed(true_gap, se, n_runs, settings.alpha, 1, settings.power, cap,
                                     row["df"], scale[0])  # as the audit estimates it (pairwise_details)
        if RN_FLOOR and not capped and math.isfinite(row["df"]):
            # the level's t quantile at nu(n*) within the largest normal quantile the replicates resolve
            z_floor = scipy.stats.norm.isf(0.5 / (reps + 1.0))
            while scipy.stats.t.isf(settings.alpha / 2.0, scaled_df(row["df"], n_runs, n_star, scale[0])[0]) > z_floor:
                n_star += 1
            capped = n_star > cap
        if capped:
            continue
        if n_stars is not None:
            n_stars.append(n_star)
        a = bench.draw(rng, n_star, (1.0,), [shift])
        _, fam = audit(a, bench.draw(rng, n_star, (1.0,)), settings.replace(seed=10_000 + sim), reps, budgets=(1,))
        followed += 1
        decided += fam.orderings[(1, "A", "B")]["decision"] == "a>b"
    return rate(decided, followed) + f" of {followed}" if followed else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=300, help="simulated audits per cell")
    ap.add_argument("--reps", type=int, default=2_000, help="bootstrap replicates per audit")
    ap.add_argument("--methods", default="expanded,percentile")
    ap.add_argument("--runs", default="3,5,10")
    ap.add_argument("--tasks", default="10,26")
    ap.add_argument("--correction", default="maxt")
    ap.add_argument("--rn-sims", type=int, default=None, help="studies for the runs-needed power (default sims / 2)")
    ap.add_argument("--quick", action="store_true", help="100 audits per cell")
    ap.add_argument("--rn-only", action="store_true",
                    help="only the runs-needed power, at --rn-effect and --rn-tests (e.g. the flagship's design: "
                         "--tasks 5 --runs 2,3 --rn-effect 1 --rn-tests 70)")
    ap.add_argument("--rn-effect", type=float, default=0.15, help="runs-needed power: A's lead in between-run SD")
    ap.add_argument("--rn-tests", type=int, default=1,
                    help="runs-needed power: the family size the one ordering stands for (Bonferroni level)")
    ap.add_argument("--rn-shapes", default=None,
                    help=f"runs-needed power on these data shapes (comma list of {', '.join(SHAPES)}) instead of the "
                         "calibration benchmark")
    ap.add_argument("--shapes", default=None,
                    help=f"comma list of {', '.join(SHAPES)}: the data-shape table instead (3 identical algorithms "
                         "under the null, nested budgets with rho 0.7; null FWER, IQM coverage, crossing power)")
    ap.add_argument("--n-budgets", default="2", help="budget counts for --shapes (comma list)")
    ap.add_argument("--n-algorithms", default="3", help="algorithms for --shapes (a comma list with --detect-only)")
    ap.add_argument("--diagnose", action="store_true",
                    help="--shapes: after each row, the null false findings by kind (orderings, changes) and how "
                         "often members' own p-values fall below alpha and alpha / m")
    ap.add_argument("--null-only", action="store_true", help="--shapes: skip the crossing-power audits")
    ap.add_argument("--power-only", action="store_true",
                    help="--shapes: skip the null audits (their data sets drawn all the same, so the crossing "
                         "audits are those of the full cell), e.g. for more --crossing-sd sizes on measured rows")
    ap.add_argument("--crossing-sd", default="0.5", metavar="SD,...",
                    help="--shapes: the planted crossing's size, A's lead at the first budget (and deficit at the "
                         "last) in between-run SD; a comma list measures each (the data sets are the same for "
                         "every size)")
    ap.add_argument("--note", metavar="NOTES_TOML",
                    help="--shapes: write the crossing power measured as the one-line note 'design_power' into a "
                         "sweep's notes file (<store>.notes.toml), which every report of that sweep carries")
    ap.add_argument("--table", default=None, metavar="OUT",
                    help="re-measure every row of rlaudit.audit.calibration.CALIBRATION (its shape, design, "
                         "simulations and replicates) under the candidate options given (--df-rule, "
                         "--collapse-rule, ...), appending each as the CalibrationRow line that would replace it to "
                         "OUT; rows OUT holds already are skipped, so a long table resumes")
    ap.add_argument("--table-runs", default=None, metavar="N,...", type=run_counts,
                    help="--table: only the rows with these runs per task (comma list; OUT's header says so), "
                         "e.g. where two candidates differ only there (smaller:1 and smaller:2 give 2 and 3 runs "
                         "the same degrees of freedom)")
    ap.add_argument("--coverage-only", action="store_true",
                    help="--shapes: A's 95 %% IQM coverage only (no decisions: shapes detected on every algorithm, "
                         "only A bootstrapped), on the null data sets of --null-only; --n-algorithms a comma list")
    ap.add_argument("--detect-only", action="store_true",
                    help="--shapes: no audits; how often the audit's data-shape detection (rlaudit.audit.calibration."
                         "detect_shapes) finds each shape on the cells' null data sets (the same ones --null-only "
                         "audits), for every --n-budgets and --n-algorithms value (comma lists)")
    ap.add_argument("--data-seed", type=int, default=0,
                    help="--shapes: seed of the simulated data sets (the committed tables use 0; another seed draws "
                         "fresh data sets, e.g. to re-measure a cell that was singled out for its high rate)")
    ap.add_argument("--df-rule", default="smaller:2", type=df_rule,
                    help="degrees-of-freedom rule of the t reading: smaller:C (the default's, C = 2 since "
                         "2026-12-07: each task's max(n - 1 - C, (n - 1) / 2) where no shape is found, the shape's "
                         "halving alone where one is: the smaller of the two, not both; the library's "
                         "rlaudit.stats.bootstrap.DF_CUT = C), welch (Welch's n - 1, the default's until "
                         "2026-12-07: the rule of every table measured before; smaller:0 is the same), half (each "
                         "task's n - 1 halved), minus:C (each task's n - 1 - C, at least min(n - 1, 1): none at 2 "
                         "runs), minus-half:C (the same, at least (n - 1) / 2; a detected shape's halving applies "
                         "first, so the two compound); candidates other than the default are measurement only")
    ap.add_argument("--iqm-df", default="runs", choices=("runs", "yuen"),
                    help="candidate per-task degrees of freedom of an IQM's aggregate interval (expanded scheme): "
                         "runs (the default's n - 1), yuen (Yuen's count for a trimmed mean: the task's runs "
                         "inside the pooled trimming window, minus 1, at least 1); measurement only, intervals only")
    ap.add_argument("--collapse-rule", default="skip-floor", choices=("floor", "skip-floor"),
                    help="collapse detection: skip-floor (the default's since 2026-12-07: the run that sets a "
                         "task's floor does not count), floor (the default's until then, the rule of every table "
                         "measured before: every run within 5 %% of the task's range above its lowest run counts); "
                         "measurement only")
    ap.add_argument("--no-shape-df", action="store_true",
                    help="candidate: the t reading ignores the data shapes found (no halving where seeds collapse; "
                         "with --df-rule minus:C, a design-independent rule); measurement only")
    ap.add_argument("--candidate", default=None, choices=("permutation", "bootstrap-t"),
                    help="--shapes: instead of the audit, on the same data sets: 'permutation', the orderings alone "
                         "by a permutation max-T (2,000 relabellings of runs between algorithms within each task; "
                         "null FWER of the orderings and crossing power); 'bootstrap-t', the whole family by a "
                         "studentised stratified bootstrap with max-T (--reps replicates; null FWER, IQM "
                         "coverage, crossing power); measurement only")
    ap.add_argument("--p-rule", default="percentile", choices=("percentile", "symmetric"),
                    help="candidate bootstrap p-value of a member: percentile (the default's: 2 x the smaller tail "
                         "of D* beyond 0), symmetric (#{|D* - c| >= |c|} with c the replicates' mean, Hall & "
                         "Wilson's centred two-sided test); measurement only, decisions only (the intervals stay "
                         "percentile, so interval and decision are not dual under it)")
    ap.add_argument("--beyond", default="t", choices=("t", "floor"),
                    help="p-value of a member none of whose replicates lies on the other side of 0 (expanded "
                         "scheme): t (the default's: 2 P(T_nu > |D| / se) when below the floor's t reading, the t "
                         "reading's premise carried past the replicates), floor (the rule until 2026-12-06: the t "
                         "reading of 1 / (reps + 1) however large the gap, and runs needed waiting for a run count "
                         "where that is below the level; with --rn-se plain, that morning's estimate exactly); "
                         "measurement only")
    ap.add_argument("--rn-se", default="median", choices=("median", "plain"),
                    help="runs-needed power: the standard error the estimate plans on: median (the default's: the "
                         "median-unbiased se * sqrt(nu / chi2_nu(0.5))), plain (the pilot's se as measured, the "
                         "rule before 2026-12-06); measurement only")
    ap.add_argument("--resampling", default="multinomial", choices=("multinomial", "bayesian"),
                    help="candidate resampling of runs within a task: multinomial (the default's stratified "
                         "bootstrap), bayesian (Rubin's Bayesian bootstrap: Dirichlet(1, ..., 1) weights on a "
                         "task's runs, scaled to its run count, in place of resample counts); measurement only")
    args = ap.parse_args()
    for flag, value in (("--shapes", args.shapes), ("--rn-shapes", args.rn_shapes)):
        unknown = [x for x in (value or "").split(",") if value and x not in SHAPES]
        if unknown:
            ap.error(f"{flag}: unknown shape {unknown[0]!r} (choose from {', '.join(SHAPES)})")
    try:
        sizes = [float(x) for x in args.crossing_sd.split(",")]
    except ValueError:
        sizes = []
    if not sizes or not all(math.isfinite(x) and x > 0 for x in sizes):
        ap.error(f"--crossing-sd: expected leads in between-run SD > 0 (a comma list), got {args.crossing_sd!r}")
    # the options of the --shapes table's crossing audits: refused in every mode that audits no planted crossing
    crossing_table = args.shapes and not (args.candidate or args.table or args.null_only or args.coverage_only
                                          or args.detect_only)
    for flag, given in (("--power-only", args.power_only), ("--crossing-sd", sizes != [0.5]), ("--note", args.note)):
        if given and not crossing_table:
            ap.error(f"{flag}: only the --shapes table's crossing audits use it (not with --candidate, --table, "
                     "--null-only, --coverage-only or --detect-only)")
    if args.power_only and args.diagnose:
        ap.error("--power-only: --diagnose reads the null audits it skips")
    if args.note:  # refused now rather than after the measurement
        from rlaudit.errors import InputError
        from rlaudit.store.notes import check_notes_file

        try:
            check_notes_file(Path(args.note))
        except InputError as err:
            ap.error(f"--note: {err}")
    sims = 100 if args.quick else args.sims
    if args.resampling == "bayesian":
        _bayesian_weights()
    if args.p_rule == "symmetric":
        _symmetric_p_values()
    if args.beyond == "floor":
        _floor_beyond()
    if args.rn_se == "plain":
        global RN_PLAIN_SE
        RN_PLAIN_SE = True
    from rlaudit.stats import bootstrap as _bootstrap

    if args.df_rule.startswith("smaller:"):  # the library's own switch (bootstrap.task_dfs)
        _bootstrap.DF_CUT = float(args.df_rule.partition(":")[2])
    else:  # Welch's n - 1 in the library, then the candidate's wrapper on it
        _bootstrap.DF_CUT = 0.0
        if args.df_rule != "welch":
            _bootstrap.effective_df = candidate_effective_df(args.df_rule, _bootstrap.effective_df)
    if args.iqm_df == "yuen":
        _yuen_iqm_df()
    from rlaudit.audit import calibration as _calibration

    _calibration.COLLAPSE_COUNT_FLOOR_RUN = args.collapse_rule == "floor"
    if args.no_shape_df:
        _calibration.DF_SCALE = {}
    if args.table:
        calibration_table(args)
        return
    if args.shapes and args.detect_only:
        detection_table(args, sims)
        return
    if args.shapes and args.coverage_only:
        coverage_table(args, sims)
        return
    if args.shapes:
        args.n_algorithms = int(args.n_algorithms)
        measured = []
        for size in sizes:
            args.crossing_sd = size
            measured += shape_table(args, sims)
        if args.note:
            from rlaudit.store.notes import set_note

            day = datetime.date.today().isoformat()
            set_note(Path(args.note), "design_power", design_power_note(args, sims, measured, day))
            print(f"note 'design_power' -> {args.note}")
        return
    rn_sims = args.rn_sims or max(sims // 2, 20)
    if args.rn_only:
        print(f"runs-needed power: {rn_sims} studies per cell, {args.reps} replicates (at least 20 m / alpha), "
              f"A ahead by {args.rn_effect:g} between-run SD, one ordering decided at 0.05 / {args.rn_tests}; "
              "rate in % with its 95% Clopper-Pearson interval, of the studies that were undecided and followed")
        shapes = args.rn_shapes.split(",") if args.rn_shapes else [None]
        for method, shape in ((m, sh) for m in args.methods.split(",") for sh in shapes):
            for n_tasks in (int(x) for x in args.tasks.split(",")):
                for n_runs in (int(x) for x in args.runs.split(",")):
                    t0 = time.perf_counter()
                    n_stars = []
                    rn = runs_needed_power(method, n_tasks, n_runs, rn_sims, args.reps, args.rn_effect,
                                           tests=args.rn_tests, n_stars=n_stars, shape=shape)
                    spread = (f"n* median {np.median(n_stars):g} (range {min(n_stars)}-{max(n_stars)})"
                              if n_stars else "")
                    took = time.perf_counter() - t0
                    print(f"{method:10} {shape or 'benchmark':>9} {n_tasks:5d} {n_runs:3d}  {rn:>26}  {spread}  "
                          f"{took:5.0f} s", flush=True)
        return
    print(f"calibration: {sims} simulated audits per cell, {args.reps} replicates, correction {args.correction}, "
          f"alpha 0.05, 3 nested budgets (rho {RHO}), 2 algorithms; rates in % with 95% Clopper-Pearson intervals")
    print(f"{'method':10} {'tasks':>5} {'N':>3}  {'cover (93-97)':>19}  {'fwer (<=5)':>19}  {'change size (<=5)':>19}  "
          f"{'crossing power':>19}  {'change power':>19}  {'runs-needed power (80)':>26}  {'s':>5}")
    for method in args.methods.split(","):
        for n_tasks in (int(x) for x in args.tasks.split(",")):
            for n_runs in (int(x) for x in args.runs.split(",")):
                t0 = time.perf_counter()
                r = calibrate(method, n_tasks, n_runs, sims, args.reps, correction=args.correction)
                rn = runs_needed_power(method, n_tasks, n_runs, rn_sims, args.reps)
                print(f"{method:10} {n_tasks:5d} {n_runs:3d}  {r['cover']:>19}  {r['fwer']:>19}  {r['size']:>19}  "
                      f"{r['power']:>19}  {r['chg_pow']:>19}  {rn:>26}  {time.perf_counter() - t0:5.0f}", flush=True)


def permutation_orderings(sets_by_algorithm: dict[str, list], n_perm: int, alpha: float,
                          rng: np.random.Generator) -> dict[tuple[int, str, str], str]:
    """Candidate (``--candidate permutation``): the orderings alone, decided by a permutation max-T.

    ``sets_by_algorithm[a][i]`` is algorithm ``a``'s runs at budget ``i``: one array of shape ``(n_runs,)`` per
    task (equal ``n_runs``). Within each task the runs of all algorithms are permuted between the algorithms,
    each run keeping its scores at every budget (its seed's trajectory); a permutation changes no score, so
    under identical algorithms every relabelling is equally likely and the family-wise error is exact. The
    statistic of an ordering (budget ``i``, pair ``a, b``) is the difference of pooled IQMs over the spread of
    its permutation distribution; Westfall & Young's step-down on the maximum. Changes between budgets are not
    tested (their null is not exchangeability). Returns ``(i, a, b) -> "a>b" | "b>a" | "inconclusive"``."""
    names = list(sets_by_algorithm)
    x = np.stack([np.stack([np.stack(budget_sets) for budget_sets in sets_by_algorithm[a]], axis=-1)
                  for a in names])  # (A, T, N, B)
    n_alg, n_tasks, n_runs, n_budgets = x.shape
    pooled = x.transpose(1, 0, 2, 3).reshape(n_tasks, n_alg * n_runs, n_budgets)  # (T, A*N, B)
    order = np.argsort(rng.random((n_perm, n_tasks, n_alg * n_runs)), axis=2)
    order[0] = np.arange(n_alg * n_runs)  # the observed labelling is one of the permutations
    perm = np.take_along_axis(pooled[None], order[..., None], axis=2)  # (P, T, A*N, B)
    perm = perm.reshape(n_perm, n_tasks, n_alg, n_runs, n_budgets).transpose(0, 2, 1, 3, 4)
    perm = np.sort(perm.reshape(n_perm, n_alg, n_tasks * n_runs, n_budgets), axis=2)
    cut = int(0.25 * n_tasks * n_runs)  # scipy.stats.trim_mean's floor, as the audit's IQM
    iqm = perm[:, :, cut:n_tasks * n_runs - cut].mean(axis=2)  # (P, A, B)
    members = [(i, a, b) for i in range(n_budgets) for ai, a in enumerate(names) for b in names[ai + 1:]]
    d = np.stack([iqm[:, names.index(a), i] - iqm[:, names.index(b), i] for i, a, b in members], axis=1)
    t = np.abs(d) / np.maximum(d.std(axis=0), 1e-300)  # (P, m)
    observed = t[0]
    steps = np.argsort(-observed, kind="stable")
    running = np.zeros(n_perm)
    adjusted = np.empty(len(members))
    for k in steps[::-1]:  # from the smallest observed statistic up: maxima over the members still in play
        np.maximum(running, t[:, k], out=running)
        adjusted[k] = np.count_nonzero(running >= observed[k]) / n_perm
    adjusted[steps] = np.maximum.accumulate(adjusted[steps])
    return {m: ("inconclusive" if adjusted[j] >= alpha else "a>b" if d[0, j] > 0 else "b>a")
            for j, m in enumerate(members)}


def permutation_cell(shape: str, n_tasks: int, n_runs: int, n_budgets: int, sims: int, n_perm: int = 2_000,
                     n_algorithms: int = 3, seed: int = 0) -> dict:
    """Null FWER of the orderings and crossing power of :func:`permutation_orderings`, on the data sets of
    :func:`shape_cell` (same generator and draw order)."""
    bench = ShapeBenchmark.make(shape, n_tasks)
    growth = tuple(np.linspace(1.0, 2.0, n_budgets))
    sd = bench.sd()
    names = [chr(ord("A") + k) for k in range(n_algorithms)]
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    fwer = power = 0
    for sim in range(sims):
        null = {a: bench.draw(rng, n_runs, growth) for a in names}
        decided = permutation_orderings(null, n_perm, 0.05, np.random.default_rng([sim, 1]))
        fwer += any(v != "inconclusive" for v in decided.values())
        shifts = crossing_shifts(sd, growth)
        sets = {"A": bench.draw(rng, n_runs, growth, shifts)} | {a: bench.draw(rng, n_runs, growth) for a in names[1:]}
        decided = permutation_orderings(sets, n_perm, 0.05, np.random.default_rng([sim, 2]))
        power += decided[(0, "A", "B")] == "a>b" and decided[(n_budgets - 1, "A", "B")] == "b>a"
    return {"fwer": rate(fwer, sims), "power": rate(power, sims), "counts": {"fwer": fwer, "power": power, "sims": sims}}


def _iqm_and_influence(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pooled IQM of each row and each run's influence on it.

    ``x``: shape ``(..., n_tasks, n_runs)``. Returns the IQM, shape ``(...)`` (scipy's ``trim_mean`` with the
    audit's floor), and the trimmed mean's influence ``(clip(x, q_lo, q_hi) - W) / (1 - 2 · 0.25)`` with
    ``q_lo, q_hi`` the kept range's end points and ``W`` the winsorised mean, shape of ``x``."""
    n_tasks, n_runs = x.shape[-2:]
    n = n_tasks * n_runs
    cut = int(0.25 * n)
    pooled = np.sort(x.reshape(*x.shape[:-2], n), axis=-1)
    iqm = pooled[..., cut:n - cut].mean(axis=-1)
    lo, hi = pooled[..., cut][..., None, None], pooled[..., n - cut - 1][..., None, None]
    wins = np.clip(x, lo, hi)
    influence = (wins - wins.mean(axis=(-2, -1), keepdims=True)) / (1.0 - 2.0 * cut / n)
    return iqm, influence


def _stratified_var(influence: np.ndarray) -> np.ndarray:
    """Variance of a pooled statistic from its runs' influence values under stratified sampling, shape ``(...)``
    for ``influence`` of shape ``(..., n_tasks, n_runs)``: ``Σ_task n_runs · var_task / (n_tasks · n_runs)²``
    (within-task sample variance, ``n_runs - 1`` in the denominator)."""
    n_tasks, n_runs = influence.shape[-2:]
    return influence.var(axis=-1, ddof=1).sum(axis=-1) * n_runs / (n_tasks * n_runs) ** 2


def bootstrap_t_family(sets_by_algorithm: dict[str, list], reps: int, alpha: float, rng: np.random.Generator):
    """Candidate (``--candidate bootstrap-t``): the studentised stratified bootstrap with max-T over the family.

    ``sets_by_algorithm[a][i]``: algorithm ``a``'s runs at budget ``i``, one array of shape ``(n_runs,)`` per task
    (equal ``n_runs``; run ``j`` is the same seed at every budget). Members as the audit's: every ordering (IQM
    difference of a pair at a budget) and every change (a pair's gap at the last budget minus at an earlier
    one). Each member's statistic is studentised by its standard error from the runs' influence on the pooled
    IQM (:func:`_iqm_and_influence`, stratified over tasks; a change's from each run's influence difference
    between the budgets, so the runs' correlation across budgets is kept), in the data and again inside every
    replicate (runs resampled within each task, jointly across budgets, independently per algorithm);
    Westfall & Young's step-down on ``max |T*|``. Returns the decisions ``{("order", i, a, b) | ("change", i,
    a, b): "a>b" | "b>a" | "changed" | "inconclusive"}`` and each algorithm's 95 % bootstrap-t IQM interval per
    budget ``{(a, i): (lo, hi)}``."""
    names = list(sets_by_algorithm)
    x = {a: np.stack([np.stack(budget_sets) for budget_sets in sets_by_algorithm[a]], axis=0)  # (B, T, N)
         for a in names}
    n_budgets, n_tasks, n_runs = next(iter(x.values())).shape
    stats, boots = {}, {}
    for a in names:
        iqm, infl = _iqm_and_influence(x[a])  # (B,), (B, T, N)
        idx = rng.integers(0, n_runs, size=(reps, n_tasks, n_runs))
        xs = np.take_along_axis(x[a][:, None], idx[None], axis=-1)  # (B, R, T, N)
        iqm_s, infl_s = _iqm_and_influence(xs)
        stats[a] = (iqm, infl)
        boots[a] = (iqm_s, infl_s)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    last = n_budgets - 1
    members = [("order", i, a, b) for i in range(n_budgets) for a, b in pairs]
    members += [("change", i, a, b) for a, b in pairs for i in range(n_budgets - 1)]

    def member(kind, i, a, b, which):
        (ia, fa), (ib, fb) = which[a], which[b]
        if kind == "order":
            return ia[i] - ib[i], _stratified_var(fa[i]) + _stratified_var(fb[i])
        d = (ia[last] - ib[last]) - (ia[i] - ib[i])
        return d, _stratified_var(fa[last] - fa[i]) + _stratified_var(fb[last] - fb[i])

    t_obs, t_boot, d_obs = [], [], []
    for m in members:
        d, v = member(*m, stats)
        ds, vs = member(*m, boots)
        d_obs.append(d)
        t_obs.append(abs(d) / max(np.sqrt(v), 1e-12))
        t_boot.append(np.abs(ds - d) / np.maximum(np.sqrt(vs), 1e-12))
    t_obs, t_boot = np.array(t_obs), np.stack(t_boot, axis=1)  # (m,), (R, m)
    steps = np.argsort(-t_obs, kind="stable")
    running = np.zeros(reps)
    adjusted = np.empty(len(members))
    for k in steps[::-1]:
        np.maximum(running, t_boot[:, k], out=running)
        adjusted[k] = (1 + np.count_nonzero(running >= t_obs[k])) / (reps + 1)
    adjusted[steps] = np.maximum.accumulate(adjusted[steps])
    decided = {}
    for j, m in enumerate(members):
        if adjusted[j] >= alpha:
            decided[m] = "inconclusive"
        elif m[0] == "change":
            decided[m] = "changed"
        else:
            decided[m] = "a>b" if d_obs[j] > 0 else "b>a"
    intervals = {}
    for a in names:
        (iqm, infl), (iqm_s, infl_s) = stats[a], boots[a]
        for i in range(n_budgets):
            se, se_s = np.sqrt(_stratified_var(infl[i])), np.sqrt(_stratified_var(infl_s[i]))
            t = (iqm_s[i] - iqm[i]) / np.maximum(se_s, 1e-12)
            q_lo, q_hi = np.quantile(t, [0.025, 0.975])
            intervals[(a, i)] = (iqm[i] - q_hi * se, iqm[i] - q_lo * se)
    return decided, intervals


def bootstrap_t_cell(shape: str, n_tasks: int, n_runs: int, n_budgets: int, sims: int, reps: int,
                     n_algorithms: int = 3, seed: int = 0, power_too: bool = True) -> dict:
    """Null FWER, A's 95 % IQM coverage and crossing power of :func:`bootstrap_t_family`, on the data sets of
    :func:`shape_cell` (same generator and draw order)."""
    bench = ShapeBenchmark.make(shape, n_tasks)
    growth = tuple(np.linspace(1.0, 2.0, n_budgets))
    truth = [bench.population_iqm(g) for g in growth]
    sd = bench.sd()
    names = [chr(ord("A") + k) for k in range(n_algorithms)]
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    fwer = power = cover = n_cover = 0
    for sim in range(sims):
        null = {a: bench.draw(rng, n_runs, growth) for a in names}
        decided, intervals = bootstrap_t_family(null, reps, 0.05, np.random.default_rng([sim, 3]))
        fwer += any(v != "inconclusive" for v in decided.values())
        for i in range(n_budgets):
            lo, hi = intervals[("A", i)]
            cover += lo <= truth[i] <= hi
            n_cover += 1
        shifts = crossing_shifts(sd, growth)
        sets = {"A": bench.draw(rng, n_runs, growth, shifts)} | {a: bench.draw(rng, n_runs, growth) for a in names[1:]}
        if not power_too:
            continue
        decided, _ = bootstrap_t_family(sets, reps, 0.05, np.random.default_rng([sim, 4]))
        power += decided[("order", 0, "A", "B")] == "a>b" and decided[("order", n_budgets - 1, "A", "B")] == "b>a"
    return {"fwer": rate(fwer, sims), "cover": rate(cover, n_cover), "power": rate(power, sims),
            "counts": {"fwer": fwer, "cover": cover, "n_cover": n_cover, "power": power, "sims": sims}}


def _bayesian_weights() -> None:
    """Swap the engine's stratified resample counts for Bayesian-bootstrap weights (``--resampling bayesian``).

    Per replicate and task, the task's ``n_m`` runs get weights ``n_m · g_i / Σ g`` with ``g_i`` standard
    exponential, i.e. ``n_m`` times a Dirichlet(1, …, 1) draw (Rubin 1981): real-valued multiplicities that sum to
    the task's run count as resample counts do, so every aggregate (task means, the pooled IQM's cumulative
    clipping) reads them unchanged. Shape ``(n, n_scores)`` like :meth:`_Layout.draw_counts`."""
    from rlaudit.stats import bootstrap

    def draw_weights(self, n: int, rng: np.random.Generator) -> np.ndarray:
        g = rng.standard_exponential((n, self.n_scores))
        totals = np.add.reduceat(g, self.offsets, axis=1)  # (n, n_tasks)
        return g / np.repeat(totals, self.n_runs, axis=1) * self.n_rep_f

    bootstrap._Layout.draw_counts = draw_weights


def _symmetric_p_values() -> None:
    """Swap the engine's tail counts for symmetric ones (``--p-rule symmetric``): a member's p-value becomes
    ``(#{|D* - c| >= |c|} + 1) / (n + 1)`` and each replicate's null value ``#{|D* - c| >= |D*_r - c|}``, with
    ``c`` the mean of the member's replicates ``D*`` (shape ``(reps,)``) standing in for its point estimate."""
    from rlaudit.audit import engine

    def tail_counts(d: np.ndarray) -> tuple[float, float]:
        c = float(np.mean(d))
        k = int(np.count_nonzero(np.abs(d - c) >= abs(c)))
        return k / 2.0, k / 2.0

    def null_tails(d: np.ndarray) -> np.ndarray:
        a = np.abs(d - float(np.mean(d)))
        return (d.size - np.searchsorted(np.sort(a), a, side="left")) / 2.0

    engine.tail_counts, engine.null_tails = tail_counts, null_tails


def _floor_beyond() -> None:
    """The rule until 2026-12-06 (``--beyond floor``): a member none of whose replicates lies on the other side
    of 0 keeps the floor's p-value, the t reading of ``1 / (reps + 1)``, however large its gap; at a level no tail
    count resolves its interval is unbounded; and the runs-needed estimate waits for a run count where the
    floor's t reading is below the level."""
    from rlaudit.audit import engine
    from rlaudit.audit.orderings import interval_at, p_from_tail
    from rlaudit.stats import bootstrap

    def member_p_value(diffs: np.ndarray, point: float, df: float) -> float:
        return float(bootstrap.t_corrected_p(p_from_tail(min(engine.tail_counts(diffs)), diffs.size), df))

    engine.member_p_value = member_p_value
    engine.member_interval = lambda diffs, point, k, level, df: interval_at(diffs, k)
    global RN_FLOOR
    RN_FLOOR = True


def null_data_sets(bench: ShapeBenchmark, n_runs: int, n_budgets: int, sims: int, n_algorithms: int, rng):
    """The null data sets of :func:`shape_cell`, one ``{(algorithm, budget): score set}`` per simulated audit: the
    same generator and draws in the same order (the crossing data sets drawn and discarded)."""
    growth = tuple(np.linspace(1.0, 2.0, n_budgets))
    names = [chr(ord("A") + k) for k in range(n_algorithms)]
    sd = bench.sd()
    for _ in range(sims):
        drawn = {a: bench.draw(rng, n_runs, growth) for a in names}
        yield {(a, b): drawn[a][b - 1] for a in names for b in range(1, n_budgets + 1)}
        bench.draw(rng, n_runs, growth, crossing_shifts(sd, growth))
        for _ in names[1:]:
            bench.draw(rng, n_runs, growth)


def detection_cell(shape: str, n_tasks: int, n_runs: int, n_budgets: int, sims: int, n_algorithms: int,
                   seed: int = 0) -> Counter:
    """How often :func:`detect_shapes` finds each set of shapes on the null data sets of :func:`shape_cell`."""
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    tasks = [f"t{t}" for t in range(n_tasks)]
    return Counter("+".join(sorted(e.shape for e in detect_shapes(sets, tasks))) or "none"
                   for sets in null_data_sets(ShapeBenchmark.make(shape, n_tasks), n_runs, n_budgets, sims,
                                              n_algorithms, rng))


def coverage_cell(shape: str, n_tasks: int, n_runs: int, n_budgets: int, sims: int, reps: int, n_algorithms: int,
                  seed: int = 0) -> dict:
    """95 % IQM coverage of A at every budget on the null data sets of :func:`shape_cell`, without the family's
    decisions: the shapes are detected on every algorithm's runs (as the audit does) and only A's aggregates are
    bootstrapped, from A's own stream (``rng_for(sim, "aggregate", "A")``, as in the full audit), so the intervals
    are those :func:`shape_cell` scores, at a fifth of the cost with 5 algorithms."""
    bench = ShapeBenchmark.make(shape, n_tasks)
    budgets = list(range(1, n_budgets + 1))
    tasks = [f"t{t}" for t in range(n_tasks)]
    settings = AuditSettings(metric="iqm", metrics=("iqm",), interval_method="expanded", reps=reps)
    truth = [bench.population_iqm(g) for g in np.linspace(1.0, 2.0, n_budgets)]
    rng = np.random.default_rng([seed, SHAPES.index(shape), n_tasks, n_runs, n_budgets])
    cover = n_cover = cover_past = n_past = halved = 0
    for sim, sets in enumerate(null_data_sets(bench, n_runs, n_budgets, sims, n_algorithms, rng)):
        sel = Selection(None, "none", ["A"], budgets, tasks, None, {k: v for k, v in sets.items() if k[0] == "A"},
                        None, {"A": True}, shapes=detect_shapes(sets, tasks))
        halved += sel.df_scale < 1.0
        boot = bootstrap_aggregates(sel, settings.replace(seed=sim), ["iqm"], reps, Progress())
        for row in boot.aggregates:
            hit = row["lo"] <= truth[budgets.index(row["budget"])] <= row["hi"]
            cover, n_cover = cover + hit, n_cover + 1
            if past_the_replicates(boot, ("A", row["budget"]), settings.confidence, reps):
                cover_past, n_past = cover_past + hit, n_past + 1
    return {"cover": rate(cover, n_cover), "counts": f"{cover}/{n_cover}", "past": f"{cover_past}/{n_past}",
            "halved": halved}


def cells(args):
    """Every (shape, tasks, runs, budgets, algorithms) cell of ``--shapes`` with comma-list sizes."""
    for shape in args.shapes.split(","):
        for n_tasks in (int(x) for x in args.tasks.split(",")):
            for n_runs in (int(x) for x in args.runs.split(",")):
                for n_budgets in (int(x) for x in args.n_budgets.split(",")):
                    for n_algorithms in (int(x) for x in str(args.n_algorithms).split(",")):
                        yield shape, n_tasks, n_runs, n_budgets, n_algorithms


def _yuen_iqm_df() -> None:
    """``--iqm-df yuen``: the IQM's aggregate interval reads each task's degrees of freedom as Yuen's trimmed-mean
    count (its runs inside the pooled trimming window, minus 1, at least 1), times the shape's ``df_scale``."""
    from rlaudit.stats import bootstrap as _bootstrap
    from rlaudit.stats.metrics import TRIM

    plain = _bootstrap.scheme_interval

    def scheme_interval(metric, score_set, point, values, confidence, method, gamma=1.0, df_scale=1.0):
        if method != "expanded" or metric != "iqm":
            return plain(metric, score_set, point, values, confidence, method, gamma, df_scale)
        arrays = _bootstrap.as_score_set(score_set)
        pooled = np.sort(np.concatenate(arrays))
        k = int(TRIM * pooled.size)
        lo, hi = pooled[k], pooled[pooled.size - k - 1]
        dfs = [df_scale * max(int(np.count_nonzero((x >= lo) & (x <= hi))) - 1, 1) if x.size > 1 else 0.0
               for x in arrays]
        df = _bootstrap.effective_df(_bootstrap.variance_contributions(metric, arrays, gamma), dfs)
        return _bootstrap.expanded_interval(point, values, confidence, df)

    _bootstrap.scheme_interval = scheme_interval


def candidate_effective_df(rule: str, welch):
    """``--df-rule``'s Welch-Satterthwaite count: ``welch`` (``rlaudit.stats.bootstrap.effective_df``) applied to
    each task's degrees of freedom (a detected shape's halving already applied) after the rule's correction: the
    two compound. ``smaller:C`` is not a wrapper: it sets the library's ``bootstrap.DF_CUT`` (``task_dfs``)."""
    if rule == "half":
        return lambda v, dfs: welch(v, np.asarray(dfs, dtype=np.float64) / 2.0)
    head, _, c = rule.partition(":")

    def corrected(v, dfs):
        d = np.asarray(dfs, dtype=np.float64)
        return welch(v, np.maximum(d - float(c), d / 2.0 if head == "minus-half" else np.minimum(d, 1.0)))

    return corrected


def df_rule(text: str) -> str:
    """``--df-rule``: ``welch``, ``half``, ``minus:C``, ``minus-half:C`` or ``smaller:C`` with ``C >= 0``."""
    if text in ("welch", "half"):
        return text
    head, _, c = text.partition(":")
    try:
        ok = head in ("minus", "minus-half", "smaller") and float(c) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"expected welch, half, minus:C, minus-half:C or smaller:C with C >= 0, "
                                         f"got {text!r}")
    return text


def run_counts(text: str) -> str:
    """``--table-runs``: a comma list of run counts of at least 2."""
    try:
        ok = all(int(x) >= 2 for x in text.split(","))
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"expected a comma list of run counts >= 2 (e.g. 5,10), got {text!r}")
    return text


def coverage_table(args, sims: int) -> None:
    """The coverage-only table (``--shapes ... --coverage-only``)."""
    print(f"IQM coverage of A on the null data sets of --shapes, no decisions: {sims} per cell, {args.reps} "
          f"replicates, data seed {args.data_seed}, df rule {args.df_rule}, IQM df {args.iqm_df}, collapse rule "
          f"{args.collapse_rule}"
          f"{', shapes ignored by the df' if args.no_shape_df else ''}; rates in % with 95% Clopper-Pearson intervals")
    for shape, n_tasks, n_runs, n_budgets, n_algorithms in cells(args):
        t0 = time.perf_counter()
        r = coverage_cell(shape, n_tasks, n_runs, n_budgets, sims, args.reps, n_algorithms, seed=args.data_seed)
        print(f"{shape:10} {n_tasks:3d} tasks x {n_runs:2d} runs, {n_budgets} budgets, {n_algorithms} algorithms: "
              f"cover {r['cover']} ({r['counts']}); past the replicates {r['past']}; df halved (collapsed found) in "
              f"{r['halved']} of {sims}  {time.perf_counter() - t0:4.0f} s", flush=True)


TABLE_FRESH_SEED = 1
"""Data seed of the fresh data sets a row of more than 300 simulations adds (docs/audit.md, "Fresh data sets")."""


def table_null_reps(row) -> int:
    """Replicates of a ``CALIBRATION`` row's null audits, as the table states them: 50,000 (the audit's default)
    for the flagship's 5-algorithm design up to 5 runs a task and the 5 tasks x 2-3 runs, 2-budget rows; 4,000 for
    the rest."""
    few = row.n_runs <= 3 and row.n_budgets == 2 or row.n_algorithms == 5 and row.n_runs <= 5
    return 50_000 if row.n_tasks == 5 and few else 4_000


def table_key(shape: str, n_tasks: int, n_runs: int, n_budgets: int, n_algorithms: int) -> str:
    """The comment that ends a ``--table`` line and names its row (how a resumed table finds what is done)."""
    return f"# {shape} {n_tasks} x {n_runs}, {n_budgets} budgets, {n_algorithms} algorithms"


def table_line(row, fwer: tuple[int, int], cover: tuple[int, int], power: tuple[int, int] | None,
               seconds: float) -> str:
    """``CalibrationRow(...)`` source for a row measured as ``(hits, trials)`` counts."""
    def cp(k: int, n: int) -> str:
        lo, hi = clopper_pearson(k, n)
        return f"({100 * k / n:.1f}, {100 * lo:.1f}, {100 * hi:.1f})"

    extra = "" if row.n_algorithms == 3 else f", {row.n_algorithms}"
    pw = "None" if power is None else f"{100 * power[0] / power[1]:.1f}"
    return (f'    CalibrationRow("{row.shape}", {row.n_tasks}, {row.n_runs}, {row.n_budgets}, {cp(*fwer)}, '
            f"{cp(*cover)}, {pw}, {fwer[1]}{extra}),  "
            f"{table_key(row.shape, row.n_tasks, row.n_runs, row.n_budgets, row.n_algorithms)}, {seconds:.0f} s")


def calibration_table(args) -> None:
    """``--table OUT``: every ``CALIBRATION`` row re-measured on the table's own data sets (data seed 0, and
    ``TABLE_FRESH_SEED`` for the fresh ones of a row of more than 300 simulations) with the replicates of
    :func:`table_null_reps`; power (on the first 300, at 4,000 replicates) where the row has it. With
    ``--table-runs``, only the rows with those runs per task."""
    from rlaudit.audit.calibration import CALIBRATION

    out = Path(args.table)
    header = (f"# bench/bench_audit_calibration.py --table: df rule {args.df_rule}, IQM df {args.iqm_df}, "
              f"collapse rule {args.collapse_rule}{', shapes ignored by the df' if args.no_shape_df else ''}, "
              f"correction {args.correction}{f', data seed {args.data_seed}' if args.data_seed else ''}"
              f"{f', rows with {args.table_runs} runs per task only' if args.table_runs else ''}")
    runs = None if not args.table_runs else {int(x) for x in args.table_runs.split(",")}
    done = out.read_text() if out.exists() else ""
    if done and done.splitlines()[0] != header:
        raise SystemExit(f"{out}: its rows were measured under other options ({done.splitlines()[0][2:]}), not "
                         f"these ({header[2:]}); resume it with those options or write to another file")
    with out.open("a") as f:
        if not done:
            f.write(header + "\n")
        for row in CALIBRATION:
            key = table_key(row.shape, row.n_tasks, row.n_runs, row.n_budgets, row.n_algorithms)
            if key + "," in done or (runs is not None and row.n_runs not in runs):
                continue
            t0 = time.perf_counter()
            shape = "poisson" if row.shape == "discrete" else row.shape
            reps = table_null_reps(row)
            both = row.power is not None and reps == 4_000
            r = shape_cell(shape, "expanded", row.n_tasks, row.n_runs, row.n_budgets, 300, reps, args.correction,
                           row.n_algorithms, seed=args.data_seed, power_too=both)["counts"]
            fwer, cover = [r["fwer"], 300], [r["cover"], r["n_cover"]]
            power = (r["power"], 300) if both else None
            if row.power is not None and not both:  # the crossing audits alone, on the same data sets
                c = shape_cell(shape, "expanded", row.n_tasks, row.n_runs, row.n_budgets, 300, 4_000, args.correction,
                               row.n_algorithms, seed=args.data_seed, null_too=False)["counts"]
                power = (c["power"], 300)
            if row.n_sims > 300:
                c = shape_cell(shape, "expanded", row.n_tasks, row.n_runs, row.n_budgets, row.n_sims - 300, reps,
                               args.correction, row.n_algorithms, seed=TABLE_FRESH_SEED, power_too=False)["counts"]
                fwer = [fwer[0] + c["fwer"], fwer[1] + c["sims"]]
                cover = [cover[0] + c["cover"], cover[1] + c["n_cover"]]
            line = table_line(row, tuple(fwer), tuple(cover), power, time.perf_counter() - t0)
            print(line, flush=True)
            f.write(line + "\n")
            f.flush()


def detection_table(args, sims: int) -> None:
    """The data-shape detection table (``--shapes ... --detect-only``)."""
    print(f"data-shape detection on the null data sets of --shapes: {sims} per cell, data seed {args.data_seed}, "
          f"collapse rule {args.collapse_rule}; "
          "counts of the shapes found (none: the plain Welch df; collapsed: each task's n - 1 halved)")
    for shape, n_tasks, n_runs, n_budgets, n_algorithms in cells(args):
        found = detection_cell(shape, n_tasks, n_runs, n_budgets, sims, n_algorithms, seed=args.data_seed)
        collapsed = sum(k for key, k in found.items() if "collapsed" in key.split("+"))
        print(f"{shape:10} {n_tasks:3d} tasks x {n_runs:2d} runs, {n_budgets} budgets, {n_algorithms} algorithms "
              f"({n_algorithms * n_runs:3d} runs a task and budget): collapsed found {rate(collapsed, sims)}; "
              + ", ".join(f"{key} {k}" for key, k in sorted(found.items())), flush=True)


def shape_table(args, sims: int) -> list[tuple]:
    """The data-shape calibration table (``--shapes``), at one crossing size ``args.crossing_sd``; returns the
    (shape, tasks, runs, budgets, crossing SD, crossing audits found, audits) of its audit-scheme cells."""
    measured = []
    print(f"data shapes: {sims} simulated audits per cell, {args.reps} replicates, correction {args.correction}, "
          f"df rule {args.df_rule}, IQM df {args.iqm_df}, collapse rule {args.collapse_rule}"
          f"{' (shapes ignored by the df)' if args.no_shape_df else ''}, p rule {args.p_rule}, beyond {args.beyond}, "
          f"resampling {args.resampling}, "
          f"data seed {args.data_seed}, "
          f"alpha 0.05, {args.n_algorithms} algorithms (identical under the null), nested budgets (rho 0.7), "
          f"crossing {args.crossing_sd:g} SD; "
          f"rates in % with 95% Clopper-Pearson intervals")
    print(f"{'shape':10} {'method':10} {'tasks':>5} {'N':>3} {'budgets':>7} {'tests':>5}  {'null fwer (<=5)':>19}  "
          f"{'cover (93-97)':>19}  {'crossing power':>19}  {'s':>5}")
    for shape in args.shapes.split(","):
        for method in args.methods.split(","):
            for n_tasks in (int(x) for x in args.tasks.split(",")):
                for n_runs in (int(x) for x in args.runs.split(",")):
                    for n_budgets in (int(x) for x in args.n_budgets.split(",")):
                        t0 = time.perf_counter()
                        if args.candidate == "permutation":
                            r = permutation_cell(shape, n_tasks, n_runs, n_budgets, sims, n_algorithms=args.n_algorithms,
                                                 seed=args.data_seed)
                            m = args.n_algorithms * (args.n_algorithms - 1) // 2 * n_budgets
                            print(f"{shape:10} {'perm-maxT':10} {n_tasks:5d} {n_runs:3d} {n_budgets:7d} {m:5d}  "
                                  f"{r['fwer']:>19}  {'(orderings only)':>19}  {r['power']:>19}  "
                                  f"{time.perf_counter() - t0:5.0f}", flush=True)
                            continue
                        if args.candidate == "bootstrap-t":
                            r = bootstrap_t_cell(shape, n_tasks, n_runs, n_budgets, sims, args.reps,
                                                 n_algorithms=args.n_algorithms, seed=args.data_seed,
                                                 power_too=not args.null_only)
                            m = args.n_algorithms * (args.n_algorithms - 1) // 2 * (2 * n_budgets - 1)
                            print(f"{shape:10} {'boot-t':10} {n_tasks:5d} {n_runs:3d} {n_budgets:7d} {m:5d}  "
                                  f"{r['fwer']:>19}  {r['cover']:>19}  "
                                  f"{r['power'] if not args.null_only else 'not run':>19}  "
                                  f"{time.perf_counter() - t0:5.0f}", flush=True)
                            continue
                        r = shape_cell(shape, method, n_tasks, n_runs, n_budgets, sims, args.reps, args.correction,
                                       args.n_algorithms, seed=args.data_seed, power_too=not args.null_only,
                                       crossing_sd=args.crossing_sd, null_too=not args.power_only)
                        pairs = args.n_algorithms * (args.n_algorithms - 1) // 2
                        m = pairs * (2 * n_budgets - 1)
                        print(f"{shape:10} {method:10} {n_tasks:5d} {n_runs:3d} {n_budgets:7d} {m:5d}  {r['fwer']:>19}  "
                              f"{r['cover']:>19}  {r['power']:>19}  {time.perf_counter() - t0:5.0f}", flush=True)
                        if not args.null_only:
                            measured.append((shape, n_tasks, n_runs, n_budgets, args.crossing_sd,
                                             r["counts"]["power"], sims))
                        else:  # the counts, so that measurements of one cell can be pooled
                            c = r["counts"]
                            print(f"    counts: null fwer {c['fwer']}/{c['sims']}, cover {c['cover']}/{c['n_cover']}; "
                                  f"past the replicates: cover {c['cover_past']}/{c['n_past']}", flush=True)
                        if args.diagnose:
                            d = r["diagnostics"]
                            print(f"    null false findings: orderings {rate(d['fwer_orderings'], sims)}, changes "
                                  f"{rate(d['fwer_changes'], sims)}; {diagnostics_line(d)}", flush=True)
    return measured


def design_power_note(args, sims: int, measured: list[tuple], day: str) -> str:
    """The one-line note a sweep's reports carry (``--note``): how often the audit finds a planted crossing of
    each measured size at each design measured (``measured``: :func:`shape_table`'s rows), measured on ``day``."""
    designs = sorted({(n_tasks, n_budgets) for _, n_tasks, _, n_budgets, *_ in measured})
    where = "; ".join(f"{t} tasks x {b} budgets" for t, b in designs)
    cells = [PowerCell(runs, shape, size, round(100 * k / n)) for shape, _, runs, _, size, k, n in measured]
    return (f"{LEAD} ({where}, {args.n_algorithms} "
            f"algorithms, correction {args.correction}, df rule {args.df_rule}, collapse rule {args.collapse_rule}; "
            f"{sims} data sets a cell, {args.reps:,} replicates, data seed {args.data_seed}; "
            f"{day}; python bench/bench_audit_calibration.py --shapes ... "
            f"--crossing-sd ... --note): a planted crossing, one algorithm ahead of the others by d between-run SD on "
            f"every task at the first budget and behind by d at the last, is found (both orderings decided) in "
            + cells_text(cells, SHAPES) + " (" + ", ".join(f"{shape}: {SHAPE_WORDS[shape]}"
                                                  for shape in dict.fromkeys(row[0] for row in measured))
            + "; docs/audit.md, What the flagship's design can detect).")


if __name__ == "__main__":
    main()
