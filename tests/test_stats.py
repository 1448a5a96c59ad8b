"""Tests for rlaudit.stats: exact metric values, rliable agreement, bootstrap engine, intervals, PoI,
profiles, ranks, seeding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats
from rliable import metrics as rly_metrics
from rliable_compat import import_rliable_library

from rlaudit.stats import (
    aggregate,
    interval,
    interval_estimates,
    jackknife,
    performance_profile,
    poi_replicates,
    probability_of_improvement,
    profile_bands,
    profile_replicates,
    rank_probabilities,
    replicates,
    rng_for,
)
from rlaudit.stats.metrics import METRICS

RLIABLE = {
    "iqm": rly_metrics.aggregate_iqm,
    "median": rly_metrics.aggregate_median,
    "mean": rly_metrics.aggregate_mean,
}


def columns(matrix: np.ndarray) -> list[np.ndarray]:
    """(n_runs, n_tasks) matrix -> score set."""
    return [matrix[:, m].copy() for m in range(matrix.shape[1])]


def explicit_resamples(score_set, reps, rng):
    """The documented index rule, written out: run index = floor(u * n_runs) per task, replicate-major."""
    n_runs = [len(a) for a in score_set]
    u = rng.random((reps, sum(n_runs)))
    out, start = [], 0
    per_task = []
    for a, n in zip(score_set, n_runs):
        per_task.append(a[np.floor(u[:, start:start + n] * n).astype(int)])
        start += n
    for r in range(reps):
        out.append([t[r] for t in per_task])
    return out


# --------------------------------------------------------------------------------------- exact values

def test_iqm_hand_computed():
    assert aggregate("iqm", [np.arange(1.0, 9.0)]) == 4.5  # trim 2 each side: mean(3, 4, 5, 6)
    assert aggregate("iqm", np.arange(1.0, 9.0).reshape(4, 2)) == 4.5  # pooled over tasks
    assert aggregate("iqm", [np.arange(1.0, 11.0)]) == 5.5  # floor(2.5) = 2 cut: mean(3..8)


def test_mean_median_hand_computed():
    s = [np.array([1.0, 3.0]), np.array([2.0, 2.0]), np.array([10.0, 20.0])]  # task means 2, 2, 15
    assert aggregate("median", s) == 2.0
    assert aggregate("mean", s) == pytest.approx(19.0 / 3.0, abs=1e-15)


def test_optimality_gap_with_gamma():
    s = [np.array([0.5, 1.5]), np.array([0.2, 0.8])]
    assert aggregate("og", s) == pytest.approx(0.375, abs=1e-15)  # 1 - mean(0.75, 0.5)
    assert aggregate("og", s, gamma=0.6) == pytest.approx(0.125, abs=1e-15)  # 0.6 - mean(0.55, 0.4)


def test_unequal_runs_definitions():
    s = [np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0])]
    assert aggregate("mean", s) == 8.75  # tasks weigh equally: (2.5 + 15) / 2
    assert aggregate("median", s) == 8.75
    assert aggregate("iqm", s) == 4.75  # pooled [1,2,3,4,10,20], cut 1 each side: mean(2, 3, 4, 10)
    assert aggregate("og", s, gamma=5.0) == 1.25  # 5 - mean(2.5, 5)


def test_unknown_metric_and_empty_task():
    with pytest.raises(ValueError, match="unknown metric 'iqr'"):
        aggregate("iqr", [np.ones(3)])
    with pytest.raises(ValueError, match="task 1 of the score set has no runs"):
        aggregate("mean", [np.ones(3), np.array([])])


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (5, 57), (10, 26), (7, 3), (100, 2)])
@pytest.mark.parametrize("gamma", [1.0, 0.5, 2.0])
def test_aggregates_equal_rliable(shape, gamma):
    rng = np.random.default_rng(hash(shape) % 2**32)
    for scores in (rng.normal(1.0, 1.0, shape), rng.integers(0, 4, shape).astype(float)):  # with ties
        for metric, fn in RLIABLE.items():
            assert abs(aggregate(metric, scores) - fn(scores)) <= 1e-12
            assert abs(aggregate(metric, columns(scores)) - fn(scores)) <= 1e-12
        assert abs(aggregate("og", scores, gamma) - rly_metrics.aggregate_optimality_gap(scores, gamma)) <= 1e-12


# ------------------------------------------------------------------------------------ bootstrap engine

def test_replicates_follow_the_documented_resampling():
    rng = np.random.default_rng(3)
    s = [rng.normal(size=n) for n in (3, 5, 4, 10)]  # unequal runs
    got = replicates(s, METRICS, 40, rng_for(11, "x"), gamma=0.3)
    for r, resample in enumerate(explicit_resamples(s, 40, rng_for(11, "x"))):
        expected = [aggregate(m, resample, 0.3) for m in METRICS]
        np.testing.assert_allclose(got[r], expected, rtol=0, atol=1e-12)


def test_replicates_bit_identical_for_seed_and_any_batch():
    s = [np.random.default_rng(1).normal(size=n) for n in (7, 7, 9)]
    ref = replicates(s, METRICS, 1000, rng_for(5))
    for batch in (1, 7, 333, 1000, 5000):
        assert np.array_equal(replicates(s, METRICS, 1000, rng_for(5), batch=batch), ref)
    assert np.array_equal(replicates(s, METRICS, 1000, rng_for(5)), ref)
    assert not np.array_equal(replicates(s, METRICS, 1000, rng_for(6)), ref)


def test_joint_replicates_share_the_resampling_across_sets():
    from rlaudit.stats.bootstrap import joint_replicates

    rng = np.random.default_rng(2)
    s1 = [rng.normal(size=n) for n in (3, 5)]
    s2 = [x * 2.0 + 1.0 for x in s1]  # the same runs at a later budget: mean = 2 * mean + 1 in every replicate
    joint = joint_replicates([s1, s2], ["mean"], 200, rng_for(1, "j"))
    assert joint.shape == (2, 200, 1)
    assert np.array_equal(joint[0], replicates(s1, ["mean"], 200, rng_for(1, "j")))  # same draws as one set
    np.testing.assert_allclose(joint[1], 2.0 * joint[0] + 1.0, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="same number of runs"):
        joint_replicates([s1, [np.ones(3), np.ones(4)]], ["mean"], 10, rng_for(0))


def test_expand_runs_and_variance_contributions_hand_computed():
    from rlaudit.stats.bootstrap import effective_df, expand_runs, variance_contributions

    # task [1, 2, 3]: mean 2, spread by sqrt(3/2); a single run is left alone
    (e, single) = expand_runs([np.array([1.0, 2.0, 3.0]), np.array([7.0])])
    np.testing.assert_allclose(e, [2 - np.sqrt(1.5), 2.0, 2 + np.sqrt(1.5)], rtol=0, atol=1e-15)
    assert single.tolist() == [7.0]
    s = [np.array([1.0, 2.0, 3.0]), np.array([0.0, 4.0])]
    # mean: s_m^2 / (n_m T^2): var [1,2,3] = 1 -> 1/(3*4); var [0,4] = 8 -> 8/(2*4) = 1
    np.testing.assert_allclose(variance_contributions("mean", s), [1 / 12, 1.0], rtol=0, atol=1e-15)
    # og at gamma 2: [1,2,2] var 1/3 -> 1/36; [0,2] var 2 -> 2/8
    np.testing.assert_allclose(variance_contributions("og", s, 2.0), [1 / 36, 0.25], rtol=0, atol=1e-15)
    # median: only tasks whose mean is within the quartiles of the task means (means 1, 2, 10: only 2)
    s3 = [np.array([0.0, 2.0]), np.array([1.0, 3.0]), np.array([9.0, 11.0])]
    np.testing.assert_allclose(variance_contributions("median", s3), [0.0, 2 / (2 * 9), 0.0], rtol=0, atol=1e-15)
    # iqm: pooled sorted 0 1 2 3 4, k = 1, winsorise at [1, 3]: [1,2,3] var 1, [1,3] var 2; kept = 3
    np.testing.assert_allclose(variance_contributions("iqm", s), [3 * 1 / 9, 2 * 2 / 9], rtol=0, atol=1e-15)
    # Welch-Satterthwaite: (1/12 + 1)^2 / ((1/12)^2 / 2 + 1 / 1)
    assert effective_df([1 / 12, 1.0], [2, 1]) == pytest.approx((13 / 12) ** 2 / (1 / 288 + 1), rel=1e-14)
    assert effective_df([0.0, 0.0], [2, 3]) == np.inf


def test_t_correction_and_its_inverse():
    from rlaudit.stats.bootstrap import normal_level, t_corrected_p

    assert t_corrected_p(0.05, np.inf) == 0.05
    # z = 1.959964 read on t with 5 df: 2 * P(T_5 > 1.96) = 0.1075
    assert float(t_corrected_p(0.05, 5.0)) == pytest.approx(2 * scipy.stats.t.sf(scipy.stats.norm.isf(0.025), 5),
                                                            rel=1e-12)
    for df in (2.5, 10.0, 100.0):
        for level in (0.001, 0.05, 0.3):
            assert float(t_corrected_p(normal_level(level, df), df)) == pytest.approx(level, rel=1e-9)
            assert normal_level(level, df) < level


def test_task_dfs_small_sample_correction_and_shape_halving_do_not_compound(monkeypatch):
    from rlaudit.stats import bootstrap

    sizes = [1, 2, 3, 5, 10]
    assert bootstrap.DF_CUT == 2.0  # the calibrated rule: max(n - 3, (n - 1) / 2)
    assert bootstrap.task_dfs(sizes).tolist() == [0, 0.5, 1, 2, 7]
    assert bootstrap.task_dfs(sizes, 0.5).tolist() == [0, 0.5, 1, 2, 4.5]  # the halving alone, not both
    monkeypatch.setattr(bootstrap, "DF_CUT", 1.0)  # the first candidate: max(n - 2, (n - 1) / 2)
    assert bootstrap.task_dfs(sizes).tolist() == [0, 0.5, 1, 3, 8]  # 2-3 runs as under the rule
    monkeypatch.setattr(bootstrap, "DF_CUT", 0.0)  # Welch's n - 1, the rule until 2026-12-07
    assert bootstrap.task_dfs(sizes).tolist() == [0, 1, 2, 4, 9]
    assert bootstrap.task_dfs(sizes, 0.5).tolist() == [0, 0.5, 1, 2, 4.5]
    monkeypatch.setattr(bootstrap, "DF_CUT", 2.0)
    s = [np.array([1.0, 2.0, 4.0]), np.array([3.0, 3.5, 9.0, 1.0, 2.0])]
    values = np.random.default_rng(0).normal(2.0, 0.5, 50_000)
    wide = bootstrap.scheme_interval("mean", s, 2.0, values, 0.95, "expanded")
    monkeypatch.setattr(bootstrap, "DF_CUT", 0.0)
    narrow = bootstrap.scheme_interval("mean", s, 2.0, values, 0.95, "expanded")
    assert wide[0] < narrow[0] and wide[1] > narrow[1]  # fewer degrees of freedom, a wider interval


def test_expanded_scheme_interval_wider_than_percentile_and_percentile_is_rliable():
    from rlaudit.stats.bootstrap import method_replicates, scheme_interval

    rng = np.random.default_rng(6)
    s = [rng.gamma(2.0, scale, 3) for scale in (0.5, 1.0, 4.0, 2.0)]
    pts, plain = method_replicates([s], ["iqm"], 4000, rng_for(0, "e"), method="percentile")
    assert np.array_equal(plain[0], replicates(s, ["iqm"], 4000, rng_for(0, "e")))
    pte, exp = method_replicates([s], ["iqm"], 4000, rng_for(0, "e"), method="expanded")
    assert pts[0, 0] == pte[0, 0] == aggregate("iqm", s)
    lo_p, hi_p = scheme_interval("iqm", s, pts[0, 0], plain[0, :, 0], 0.95, "percentile")
    lo_e, hi_e = scheme_interval("iqm", s, pte[0, 0], exp[0, :, 0], 0.95, "expanded")
    assert (lo_p, hi_p) == interval(pts[0, 0], plain[0, :, 0], 0.95)
    assert lo_e < lo_p and hi_e > hi_p


def test_expanded_interval_past_the_replicates_is_the_t_interval():
    """One task of two runs reads 0.5 degrees of freedom (``bootstrap.task_dfs``: half of Welch's 1): the
    t-corrected 95 % level lies beyond any replicate (the interval used to be unbounded, and before that raised
    'confidence ... 1.0'). Past the replicates it is the t interval on the replicates' spread: for one task, about
    Student's interval of the mean on those degrees of freedom, mean -/+ t_0.5^-1(0.975) s / sqrt(n), computed
    here by scipy from the runs alone."""
    from rlaudit.stats.bootstrap import method_replicates, scheme_interval

    s = [np.array([1.0, 2.0])]
    pt, exp = method_replicates([s], ["mean"], 4000, rng_for(0, "u"), method="expanded")
    lo, hi = scheme_interval("mean", s, pt[0, 0], exp[0, :, 0], 0.95, "expanded")
    t_lo, t_hi = scipy.stats.t.interval(0.95, 0.5, loc=1.5, scale=scipy.stats.sem(s[0]))
    assert lo < exp[0, :, 0].min() and hi > exp[0, :, 0].max()
    assert lo == pytest.approx(t_lo, rel=0.05) and hi == pytest.approx(t_hi, rel=0.05)
    # the percentile scheme at the same level stays inside the replicates
    lo_p, hi_p = scheme_interval("mean", s, pt[0, 0], exp[0, :, 0], 0.95, "percentile")
    assert exp[0, :, 0].min() <= lo_p and hi_p <= exp[0, :, 0].max()
    # with more runs the same call gives the percentile interval of the expanded replicates, around the mean
    s = [np.arange(12.0)]
    pt, exp = method_replicates([s], ["mean"], 4000, rng_for(0, "u"), method="expanded")
    lo, hi = scheme_interval("mean", s, pt[0, 0], exp[0, :, 0], 0.95, "expanded")
    assert exp[0, :, 0].min() < lo < 5.5 < hi < exp[0, :, 0].max()


def test_expanded_mean_interval_past_the_replicates_is_the_welch_satterthwaite_interval():
    """Five tasks of two runs, the mean: past the replicates the interval is the stratified mean -/+
    t_nu^-1(0.975) se with se^2 = sum_m s_m^2 / (n_m T^2) and nu the Welch-Satterthwaite count over the tasks'
    degrees of freedom (``bootstrap.task_dfs``),
    computed here from the runs alone (numpy and scipy), not from the bootstrap."""
    from rlaudit.stats.bootstrap import method_replicates, scheme_interval

    rng = np.random.default_rng(7)
    s = [rng.normal(mu, sd, 2) for mu, sd in ((0.1, 0.05), (0.4, 0.3), (0.2, 0.02), (0.8, 0.01), (0.5, 0.04))]
    pt, exp = method_replicates([s], ["mean"], 20_000, rng_for(0, "ws"), method="expanded")
    lo, hi = scheme_interval("mean", s, pt[0, 0], exp[0, :, 0], 0.95, "expanded")
    v = np.array([np.var(x, ddof=1) / (x.size * len(s) ** 2) for x in s])
    nu = v.sum() ** 2 / np.sum(v ** 2 / 0.5)  # each task: half of n - 1 = 1 (bootstrap.task_dfs at 2 runs)
    assert nu < 1.2  # the 95 % level on t lies beyond 20,000 replicates
    half = scipy.stats.t.isf(0.025, nu) * np.sqrt(v.sum())
    mean = np.mean([x.mean() for x in s])
    assert lo == pytest.approx(mean - half, rel=0.05) and hi == pytest.approx(mean + half, rel=0.05)


def test_t_interval_past_covers_every_replicate_and_is_unbounded_only_without_spread():
    from rlaudit.stats.bootstrap import t_interval_past

    values = np.array([0.0, 0.0, 0.0, 10.0])  # sd 5: at a loose level 5 -/+ 3.4 lies inside the range
    assert t_interval_past(5.0, values, 0.5, 30.0) == (0.0, 10.0)
    q = float(scipy.stats.t.isf(5e-7, 3.0))  # ~ 132: far past the range
    lo, hi = t_interval_past(1.0, values, 1e-6, 3.0)
    assert lo == pytest.approx(1.0 - 5.0 * q) and hi == pytest.approx(1.0 + 5.0 * q)
    assert t_interval_past(2.0, np.full(5, 2.0), 1e-6, 3.0) == (-np.inf, np.inf)
    # replicates equal but for rounding (a median on one task of tied runs): no spread to read, not a 0-width interval
    assert t_interval_past(0.33, 0.33 + np.array([0.0, 5e-17, -5e-17, 0.0]), 1e-6, 3.0) == (-np.inf, np.inf)
    # ... and the member p-value past the replicates reads the same se: no spread, no t reading (stays at the floor)
    from rlaudit.audit.engine import member_p_value

    rounded = 0.33 + np.array([0.0, 5e-17, -5e-17, 0.0])
    assert member_p_value(rounded, 0.33, 3.0) == pytest.approx(float(scipy.stats.t.sf(scipy.stats.norm.isf(0.2 / 2),
                                                                                       3.0) * 2))


def test_rng_streams_independent_of_other_algorithms():
    s = {"A": [np.arange(5.0), np.arange(3.0)], "B": [np.ones(4), np.arange(4.0)]}
    alone = interval_estimates({"A": s["A"]}, reps=500, seed=3)
    both = interval_estimates(s, reps=500, seed=3)
    assert both["A"] == alone["A"]
    assert interval_estimates(s, reps=500, seed=3) == both
    assert interval_estimates(s, reps=500, seed=4)["A"] != alone["A"]
    # streams differ per key and never touch NumPy's global RNG
    state = np.random.get_state()[1].copy()
    a = rng_for(0, "aggregate", 100, "A").random(3)
    assert not np.array_equal(a, rng_for(0, "aggregate", 200, "A").random(3))
    assert np.array_equal(np.random.get_state()[1], state)


def test_rng_for_rejects_bad_seed():
    with pytest.raises(ValueError, match="non-negative integer"):
        rng_for(-1)
    with pytest.raises(ValueError, match="non-negative integer"):
        rng_for(1.5)


def test_interval_estimates_match_manual_pipeline():
    s = [np.array([0.1, 0.4, 0.35, 0.8]), np.array([1.0, 1.2, 0.9])]
    got = interval_estimates({"A": s}, metrics=["iqm", "og"], reps=2000, seed=9, keys=(100,))["A"]
    values = replicates(s, ["iqm", "og"], 2000, rng_for(9, "aggregate", 100, "A"))
    for j, metric in enumerate(["iqm", "og"]):
        lo, hi = np.quantile(values[:, j], [0.025, 0.975])
        assert got[metric] == (aggregate(metric, s), lo, hi)


def test_single_run_task_has_no_spread():
    values = replicates([np.array([2.0])], ["mean"], 100, rng_for(0))
    assert np.all(values == 2.0)
    with pytest.raises(ValueError, match="single run"):
        jackknife("mean", [np.array([2.0])])


# ------------------------------------------------------------------------------------------ intervals

def test_percentile_interval_exact():
    values = np.arange(101.0)
    assert interval(50.0, values, 0.9) == pytest.approx((5.0, 95.0), abs=1e-12)
    assert interval(50.0, values, 0.95) == pytest.approx((2.5, 97.5), abs=1e-12)
    with pytest.raises(ValueError, match="unknown interval method"):
        interval(0.0, values, 0.95, "basic")


def test_bca_equals_scipy_one_task():
    x = np.random.default_rng(0).lognormal(size=15)  # skewed, so BCa differs from percentile
    res = scipy.stats.bootstrap((x,), np.mean, n_resamples=4000, method="BCa", rng=np.random.default_rng(1))
    jk = jackknife("mean", [x])
    got = interval(float(np.mean(x)), res.bootstrap_distribution, 0.95, "bca", jk)
    np.testing.assert_allclose(got, (res.confidence_interval.low, res.confidence_interval.high), rtol=0, atol=1e-12)
    assert got != interval(float(np.mean(x)), res.bootstrap_distribution, 0.95)


def test_bca_equals_scipy_two_tasks():
    # scipy's independent resampling of two samples is the stratified bootstrap of two tasks, and the
    # 'mean' metric of two tasks is (mean(x) + mean(y)) / 2.
    rng = np.random.default_rng(2)
    x, y = rng.exponential(size=9), rng.exponential(3.0, size=12)
    stat = lambda a, b, axis=-1: (np.mean(a, axis=axis) + np.mean(b, axis=axis)) / 2  # noqa: E731
    res = scipy.stats.bootstrap((x, y), stat, n_resamples=3000, method="BCa", rng=np.random.default_rng(4))
    got = interval(aggregate("mean", [x, y]), res.bootstrap_distribution, 0.95, "bca", jackknife("mean", [x, y]))
    np.testing.assert_allclose(got, (res.confidence_interval.low, res.confidence_interval.high), rtol=0, atol=1e-12)


def test_bca_through_interval_estimates():
    s = [np.random.default_rng(7).lognormal(size=10) for _ in range(3)]
    out = interval_estimates({"A": s}, metrics=["mean"], reps=3000, seed=1, method="bca")["A"]["mean"]
    values = replicates(s, ["mean"], 3000, rng_for(1, "aggregate", "A"))[:, 0]
    assert out == (aggregate("mean", s), *interval(aggregate("mean", s), values, 0.95, "bca", jackknife("mean", s)))
    assert out[1] < out[0] < out[2]


# ------------------------------------------------------------------------------ probability of improvement

def test_poi_hand_computed_with_ties():
    # task 1: 1<2,1<2 -> 0; 2=2 twice -> 1; 3>2 twice -> 2: U = 3 of 6 pairs
    # task 2: 3 beats 1, 2 and ties 3 -> 2.5; 4 beats all -> 3: U = 5.5 of 6
    x = [np.array([1.0, 2.0, 3.0]), np.array([3.0, 4.0])]
    y = [np.array([2.0, 2.0]), np.array([1.0, 2.0, 3.0])]
    assert probability_of_improvement(x, y) == pytest.approx((3 / 6 + 5.5 / 6) / 2, abs=1e-15)
    assert probability_of_improvement([np.ones(3)], [np.ones(5)]) == 0.5
    assert probability_of_improvement(y, x) == pytest.approx(1 - (3 / 6 + 5.5 / 6) / 2, abs=1e-15)


@pytest.mark.parametrize("nx,ny,n_tasks", [(5, 5, 3), (10, 3, 26), (2, 7, 1)])
def test_poi_equals_rliable(nx, ny, n_tasks):
    rng = np.random.default_rng(nx * 100 + ny)
    for x, y in ((rng.normal(size=(nx, n_tasks)), rng.normal(size=(ny, n_tasks))),
                 (rng.integers(0, 3, (nx, n_tasks)).astype(float), rng.integers(0, 3, (ny, n_tasks)).astype(float))):
        assert abs(probability_of_improvement(x, y) - rly_metrics.probability_of_improvement(x, y)) <= 1e-12
    same = rng.normal(size=(nx, n_tasks))
    assert probability_of_improvement(same, same) == rly_metrics.probability_of_improvement(same, same) == 0.5


def test_poi_replicates_follow_resampling_and_batch_invariant():
    rng = np.random.default_rng(8)
    x = [rng.integers(0, 4, n).astype(float) for n in (3, 6)]
    y = [rng.integers(0, 4, n).astype(float) for n in (5, 2)]
    got = poi_replicates(x, y, 50, rng_for(2))
    kx = 9
    u = rng_for(2).random((50, kx + 7))
    for r in range(50):
        xr = explicit_resamples(x, 1, _Fixed(u[r:r + 1, :kx]))[0]
        yr = explicit_resamples(y, 1, _Fixed(u[r:r + 1, kx:]))[0]
        assert got[r] == pytest.approx(probability_of_improvement(xr, yr), abs=1e-12)
    for batch in (1, 13, 50):
        assert np.array_equal(poi_replicates(x, y, 50, rng_for(2), batch=batch), got)
    with pytest.raises(ValueError, match="same tasks"):
        poi_replicates(x, y[:1], 10, rng_for(0))


class _Fixed:
    """Stand-in generator that returns pre-drawn uniforms."""

    def __init__(self, u):
        self.u = u

    def random(self, shape):
        assert shape == self.u.shape
        return self.u


# ------------------------------------------------------------------------------------------- profiles

def test_performance_profile_hand_computed():
    s = [np.array([0.0, 1.0, 2.0, 3.0]), np.array([5.0, 6.0])]
    # tau 0.5: task1 3/4, task2 1 -> 0.875; tau 2.5: 1/4, 1 -> 0.625; tau 5.5: 0, 1/2 -> 0.25
    np.testing.assert_array_equal(performance_profile(s, [0.5, 2.5, 5.5]), [0.875, 0.625, 0.25])
    # strictly above: a score equal to tau does not count
    np.testing.assert_array_equal(performance_profile([np.array([1.0, 2.0])], [1.0, 2.0]), [0.5, 0.0])


def test_profile_equals_rliable_score_distribution():
    scores = np.random.default_rng(0).normal(size=(10, 5))
    taus = np.linspace(-2, 2, 9)
    # rliable.library.run_score_deviation: np.mean(scores > tau) over all runs and tasks
    expected = np.array([np.mean(scores > t) for t in taus])
    np.testing.assert_allclose(performance_profile(scores, taus), expected, rtol=0, atol=1e-15)


def test_profile_bands_follow_resampling_and_are_seeded():
    s = [np.array([0.0, 1.0, 2.0, 3.0]), np.array([5.0, 6.0, 4.0])]
    taus = [0.5, 2.5, 5.5]
    got = profile_replicates(s, taus, 30, rng_for(1))
    for r, resample in enumerate(explicit_resamples(s, 30, rng_for(1))):
        np.testing.assert_allclose(got[r], performance_profile(resample, taus), rtol=0, atol=1e-15)
    assert np.array_equal(profile_replicates(s, taus, 30, rng_for(1), batch=4), got)
    point, lo, hi = profile_bands(s, taus, 500, rng_for(1))
    assert np.all(lo <= point) and np.all(point <= hi)
    np.testing.assert_array_equal(point, performance_profile(s, taus))


# ---------------------------------------------------------------------------------------------- ranks

def test_rank_probabilities_hand_computed_with_ties():
    values = np.array([[1.0, 2.0, 2.0],  # B and C tie for ranks 1-2, A third
                       [3.0, 2.0, 1.0]])  # A, B, C
    expected = np.array([[0.5, 0.0, 0.5],
                         [0.25, 0.75, 0.0],
                         [0.25, 0.25, 0.5]])
    np.testing.assert_allclose(rank_probabilities(values), expected, rtol=0, atol=1e-15)
    # lower is better (optimality gap): ranks reverse
    np.testing.assert_allclose(rank_probabilities(values, higher_is_better=False), expected[:, ::-1], atol=1e-15)


def test_rank_probabilities_rows_and_columns_sum_to_one():
    v = np.random.default_rng(0).integers(0, 3, (200, 5)).astype(float)
    p = rank_probabilities(v)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(p.sum(axis=0), 1.0, atol=1e-12)


# ------------------------------------------------------------------------------ cross-check with rliable

def _rliable_library():
    """``rliable.library`` imported under pandas 3 (see ``tests/rliable_compat.py``)."""
    return import_rliable_library()


def _quantile_se(values: np.ndarray, p: float, reps: int) -> float:
    """Monte-Carlo standard error of the ``p`` quantile of ``reps`` bootstrap replicates:
    sqrt(p (1 - p) / reps) / f(q_p), with the density f estimated from the quantiles at p +- 0.02."""
    q_lo, q_hi = np.quantile(values, [p - 0.02, p + 0.02])
    density = 0.04 / max(q_hi - q_lo, 1e-12)
    return float(np.sqrt(p * (1 - p) / reps) / density)


def test_intervals_agree_with_rliable_get_interval_estimates():
    library = _rliable_library()
    rng = np.random.default_rng(2024)
    scores = rng.lognormal(0.0, 0.7, size=(10, 6))  # (n_runs, n_tasks)
    reps = 20_000
    fns = {**RLIABLE, "og": rly_metrics.aggregate_optimality_gap}
    func = lambda x: np.array([fns[m](x) for m in METRICS])  # noqa: E731
    state = np.random.get_state()
    np.random.seed(12345)  # rliable resamples with np.random.choice and ignores random_state
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            points, cis = library.get_interval_estimates({"A": scores}, func, reps=reps,
                                                         random_state=np.random.RandomState(0))
    finally:
        np.random.set_state(state)
    ours = interval_estimates({"A": columns(scores)}, METRICS, reps=reps, seed=0)["A"]
    values = replicates(columns(scores), METRICS, reps, rng_for(0, "aggregate", "A"))
    for j, metric in enumerate(METRICS):
        point, lo, hi = ours[metric]
        assert abs(point - points["A"][j]) <= 1e-12
        for p, mine, theirs in ((0.025, lo, cis["A"][0, j]), (0.975, hi, cis["A"][1, j])):
            # two independent Monte-Carlo estimates of one quantile: |difference| has SE sqrt(2) * SE;
            # 5 SE is a false-alarm rate below 1e-6 per endpoint under normality.
            tol = 5 * np.sqrt(2) * _quantile_se(values[:, j], p, reps)
            assert abs(mine - theirs) <= tol, (metric, p, mine, theirs, tol)


@pytest.mark.parametrize("metric", METRICS)
def test_jackknife_equals_leave_one_out_recomputation(metric):
    rng = np.random.default_rng(4)
    for s in ([rng.normal(size=n) for n in (2, 5, 3, 9)], [rng.integers(0, 3, 4).astype(float) for _ in range(5)]):
        got = jackknife(metric, s, gamma=0.7)
        for m, a in enumerate(s):
            for i in range(a.size):
                reduced = [np.delete(t, i) if j == m else t for j, t in enumerate(s)]
                assert abs(got[m][i] - aggregate(metric, reduced, 0.7)) <= 1e-12


def test_largest_uniform_never_indexes_past_the_task():
    # the engine maps u in [0, 1) to floor(u * n_runs) without clipping; the largest double below 1 must
    # still give an index below n_runs for every plausible run count
    n = np.arange(1, 200_001, dtype=np.float64)
    assert np.all(np.floor(np.nextafter(1.0, 0.0) * n) < n)


def test_poi_intervals_agree_with_rliable_bootstrap():
    library = _rliable_library()
    rng = np.random.default_rng(7)
    x, y = rng.normal(0.3, 1.0, size=(6, 4)), rng.normal(0.0, 1.0, size=(5, 4))  # unequal runs across algorithms
    reps = 2000
    state = np.random.get_state()
    np.random.seed(99)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            points, cis = library.get_interval_estimates(
                {"xy": (x, y)}, lambda a, b: np.array([rly_metrics.probability_of_improvement(a, b)]), reps=reps,
                random_state=np.random.RandomState(0))
    finally:
        np.random.set_state(state)
    point = probability_of_improvement(x, y)
    values = poi_replicates(x, y, reps, rng_for(0, "poi"))
    lo, hi = interval(point, values)
    assert abs(point - points["xy"][0]) <= 1e-12
    for p, mine, theirs in ((0.025, lo, cis["xy"][0, 0]), (0.975, hi, cis["xy"][1, 0])):
        tol = 5 * np.sqrt(2) * _quantile_se(values, p, reps)  # as in the aggregate cross-check above
        assert abs(mine - theirs) <= tol, (p, mine, theirs, tol)


def test_bca_degenerate_and_bad_inputs():
    s = [np.full(4, 0.5), np.full(3, 0.5)]
    assert interval_estimates({"A": s}, ["mean", "iqm"], reps=200, method="bca")["A"] == {
        "mean": (0.5, 0.5, 0.5), "iqm": (0.5, 0.5, 0.5)}
    with pytest.raises(ValueError, match="needs jackknife_values"):
        interval(0.0, np.arange(3.0), 0.95, "bca")
    with pytest.raises(ValueError, match="confidence must be in"):
        interval(0.0, np.arange(3.0), 1.0)
    with pytest.raises(ValueError, match=r"shape \(reps, n_algorithms\)"):
        rank_probabilities(np.arange(3.0))
