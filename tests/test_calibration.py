"""Data-shape detection and the measured error rates the audit states (rlaudit.audit.calibration, issue 17)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlaudit.audit import AuditSettings, run_audit
from rlaudit.audit.calibration import (CALIBRATION, HEAVY_EXACT_VALUES, HEAVY_SIMULATIONS, CalibrationRow, detect_shapes,
                                      heavy_threshold, supported_rates, tail_ratio)
from rlaudit.scores import ScoreMeta, ScoreTable


def sets_of(shape: str, n_tasks: int = 5, n_runs: int = 5, n_algorithms: int = 3, seed: int = 0) -> dict:
    """``(algorithm, budget)`` -> score set of one budget, drawn like the calibration bench's shapes."""
    rng = np.random.default_rng(seed)
    scales = np.exp(rng.uniform(0.0, np.log(30.0), n_tasks))
    out = {}
    for a in range(n_algorithms):
        cells = []
        for t in range(n_tasks):
            if shape == "collapsed":
                x = np.where(rng.random(n_runs) < 0.2, 0.01 * rng.random(n_runs) * scales[t],
                             np.maximum(0.0, scales[t] * (1 + 0.4 * rng.standard_normal(n_runs))))
            elif shape == "heavy":
                x = scales[t] * (1 + 0.4 * rng.standard_t(2.5, n_runs))
            elif shape == "poisson":
                x = rng.poisson(rng.uniform(0.5, 20.0), n_runs).astype(float)
            else:  # gamma
                x = rng.gamma(rng.uniform(1.0, 4.0), scales[t], n_runs)
            cells.append(x)
        out[(f"A{a}", 100)] = cells
    return out


def test_tail_ratio_hand_computed():
    # [0, 1, 2, 3, 10]: median 2, IQR 3 - 1 = 2, tails 8 and 2 -> 2 / 2 = 1
    assert tail_ratio([np.array([0.0, 1.0, 2.0, 3.0, 10.0])]).tolist() == [1.0]
    # [0, 0, 5, 10, 10]: IQR 10 - 0, tails 5 and 5 -> 0.5; a constant cell has no ratio
    out = tail_ratio(np.array([[0.0, 0.0, 5.0, 10.0, 10.0], [1.0] * 5]))
    assert out[0] == 0.5 and np.isnan(out[1])


@pytest.mark.parametrize("shape,n_runs,expected", [
    ("collapsed", 5, {"collapsed"}), ("collapsed", 10, {"collapsed"}),
    ("heavy", 10, {"heavy"}), ("poisson", 5, {"discrete"}),
    ("gamma", 5, set()), ("gamma", 10, set()),
])
def test_detects_each_shape_and_not_skewed_continuous_runs(shape, n_runs, expected):
    hits = {s.shape for s in detect_shapes(sets_of(shape, n_tasks=26, n_runs=n_runs), [f"t{t}" for t in range(26)])}
    assert hits == expected


def test_detection_is_deterministic_and_names_the_cells():
    sets = sets_of("collapsed", n_tasks=5)
    one, two = detect_shapes(sets, list("abcde")), detect_shapes(sets, list("abcde"))
    assert one == two
    (found,) = one
    assert found.details["collapsed_runs"] >= 2 and "at 100" in found.summary


def test_the_floor_setting_run_does_not_count_unless_the_old_rule_is_chosen(monkeypatch):
    """Two tasks of three runs a cell: each task's lowest run sits in a learning cell (median far above it). The
    rule until 2026-12-07 counted it, 2 of 12 runs collapsed by chance; the rule now leaves none. A second run at
    the floor of each task (real collapse) is counted: 2 runs, where the old rule counted 4."""
    from rlaudit.audit import calibration

    sets = {("A", 1): [np.array([0.0, 10.0, 11.0]), np.array([5.0, 6.0, 7.0])],
            ("B", 1): [np.array([9.0, 10.0, 12.0]), np.array([0.0, 6.5, 7.5])]}
    assert calibration.COLLAPSE_COUNT_FLOOR_RUN is False
    assert detect_shapes(sets, ["x", "y"]) == []
    monkeypatch.setattr(calibration, "COLLAPSE_COUNT_FLOOR_RUN", True)
    (found,) = detect_shapes(sets, ["x", "y"])
    assert found.shape == "collapsed" and found.details["collapsed_runs"] == 2

    sets[("A", 1)][0] = np.array([0.0, 0.1, 11.0, 12.0, 13.0])
    sets[("B", 1)][1] = np.array([0.0, 0.2, 6.5, 7.5, 8.0])
    assert detect_shapes(sets, ["x", "y"])[0].details["collapsed_runs"] == 4
    monkeypatch.setattr(calibration, "COLLAPSE_COUNT_FLOOR_RUN", False)
    (found,) = detect_shapes(sets, ["x", "y"])
    assert found.shape == "collapsed" and found.details["collapsed_runs"] == 2
    assert type(found.details["collapsed_runs"]) is int  # audit.json takes it (a numpy int once failed a report)


def test_nothing_learned_is_not_collapse():
    """Every run at the floor (nothing learned yet) is not a bimodal cell."""
    sets = {(a, 1): [np.zeros(5), np.full(5, 0.01)] for a in "AB"}
    assert [s.shape for s in detect_shapes(sets, ["x", "y"])] == ["discrete"]  # every run ties, none collapses


@pytest.mark.parametrize("sizes", [{20: 2_500}, {100: 500}, {6: 2_000, 100: 300}])
def test_the_normal_approximation_of_the_heavy_threshold_agrees_with_the_simulation(sizes):
    """Where the simulation fits, the approximation used beyond HEAVY_EXACT_VALUES gives the same threshold
    (measured: within 0.7 % at each size's switch point, e.g. 10,000 cells of 5 runs)."""
    n = sum(sizes.values())
    simulated, approximated = heavy_threshold(sizes, n), heavy_threshold(sizes, n, exact_values=0)
    assert approximated == pytest.approx(simulated, rel=0.01)
    assert approximated != simulated  # the other path was taken


@pytest.mark.parametrize("shape,expected", [("heavy", {"heavy"}), ("gamma", set())])
def test_a_million_runs_are_judged_without_simulating_a_million_runs_400_times(shape, expected):
    """10,000 cells of 100 runs: beyond HEAVY_EXACT_VALUES, so each size is approximated; heavy tails are still
    found and skewed continuous runs still pass."""
    sets = sets_of(shape, n_tasks=2_500, n_runs=100, n_algorithms=4, seed=3)
    assert HEAVY_SIMULATIONS * 10_000 * 100 > HEAVY_EXACT_VALUES
    assert {s.shape for s in detect_shapes(sets, [f"t{t}" for t in range(2_500)])} == expected


ROWS = (CalibrationRow("collapsed", 5, 5, 2, (6.9, 5.4, 8.7), (89.1, 87.0, 91.0), 1.0, 300),
        CalibrationRow("collapsed", 26, 5, 2, (10.2, 8.4, 12.2), (92.6, 90.9, 94.0), 5.0, 300),
        CalibrationRow("collapsed", 26, 10, 2, (4.0, 2.0, 6.9), (97.5, 95.9, 98.6), 39.0, 300))


def test_supported_rates_nearest_row():
    assert supported_rates("collapsed", 5, 5, 2, ROWS) is ROWS[0]
    assert supported_rates("collapsed", 30, 4, 2, ROWS) is ROWS[1]   # tasks first, then runs (log scale)
    assert supported_rates("collapsed", 20, 12, 3, ROWS) is ROWS[2]
    assert supported_rates("heavy", 5, 5, 2, ROWS) is None
    assert not ROWS[0].holds and ROWS[2].holds


def test_supported_rates_match_the_number_of_tests():
    """A 5-algorithm, 4-budget design (70 tests: the flagship's) reads its own measured row, not the 9-test one;
    at 3 runs on skewed data that row keeps the nominal rates (null FWER 1.0 %, coverage 96.1 %; under the rule
    until 2026-12-07 it missed the coverage target, 91.3 %)."""
    flagship = supported_rates("gamma", 5, 3, 4, n_algorithms=5)
    assert (flagship.n_algorithms, flagship.n_budgets, flagship.n_tests) == (5, 4, 70)
    assert flagship.holds and flagship.coverage[0] == 96.1 and flagship.power is None
    small = supported_rates("gamma", 5, 3, 2)
    assert (small.n_algorithms, small.n_tests) == (3, 9) and small.holds
    assert "5 algorithms" in flagship.describe() and "power" not in flagship.describe()
    # budgets before tests: 7 algorithms at 1 budget (21 tests) read the 2-budget row, not 4 budgets' 21 tests
    assert supported_rates("gamma", 26, 5, 1, n_algorithms=7).n_budgets == 2
    assert supported_rates("gamma", 5, 5, 4, n_algorithms=3).n_tests == 21  # same budgets: the nearer family
    assert supported_rates("gamma", 5, 5, 4, n_algorithms=5).n_tests == 70


def test_every_measured_shape_and_size_is_in_the_table():
    shapes = {r.shape for r in CALIBRATION}
    assert {"gamma", "collapsed", "heavy", "discrete"} <= shapes
    for shape in shapes:
        sizes = {(r.n_tasks, r.n_runs) for r in CALIBRATION if r.shape == shape and r.n_budgets == 2}
        assert {(t, n) for t in (5, 26) for n in (3, 5, 10)} <= sizes, shape


def collapsed_table(seed: int = 1) -> ScoreTable:
    rows = []
    for (a, b), cells in sets_of("collapsed", n_tasks=5, n_runs=5, seed=seed).items():
        for t, x in enumerate(cells):
            rows += [{"algorithm": a, "task": f"t{t}", "run": r, "budget": b, "score": float(v)} for r, v in enumerate(x)]
    return ScoreTable.from_frame(pd.DataFrame(rows), ScoreMeta(normalized="minmax"))


def test_audit_states_the_measured_rates_for_collapsed_seeds():
    """A 5-task x 5-run audit of collapsing seeds: audit.json carries the shape and the matching measured row,
    the checklist names it, and the few-runs note cites the same row."""
    res = run_audit(collapsed_table(), AuditSettings(reps=2_000, reps_pairwise=100))
    cal = res.settings["calibration"]
    assert [s["shape"] for s in cal["shapes"]] == ["collapsed"]
    row = cal["row"]
    assert (row["shape"], row["n_tasks"], row["n_runs"], row["n_budgets"]) == ("collapsed", 5, 5, 2)
    shape_items = [c for c in res.checklist if c["id"] == "data-shape"]
    assert len(shape_items) == 1 and shape_items[0]["details"]["calibration_row"] == row
    assert ("warning" if not row["holds"] else "info") == shape_items[0]["severity"]
    few = next(c for c in res.checklist if c["id"] == "few-runs")
    assert few["details"]["calibration_row"] == row and "5 tasks x 5 runs" in few["advice"]


def test_other_schemes_get_no_measured_row_and_a_trim_note():
    res = run_audit(collapsed_table(), AuditSettings(reps=2_000, reps_pairwise=100, interval_method="percentile"))
    assert res.settings["calibration"]["row"] is None
    rows = [{"algorithm": a, "task": f"t{t}", "run": r, "budget": 1, "score": float(r + t + (a == "B"))}
            for a in "AB" for t in range(5) for r in range(3)]
    res = run_audit(ScoreTable.from_frame(pd.DataFrame(rows), ScoreMeta(normalized="minmax")),
                    AuditSettings(reps=2_000, reps_pairwise=100))
    trim = next(c for c in res.checklist if c["id"] == "iqm-trim")
    assert trim["details"] == {"pooled_runs": 15, "trimmed_each_side": 3} and "20 %" in trim["message"]


def test_planted_crossing_size_moves_only_the_power(calibration_bench):
    """--crossing-sd: the planted crossing is A's lead of that many between-run SD at the first budget and its
    deficit of as much at the last, added to the same draws: the null audits (and their counts) do not change
    with it, and a crossing of 4 SD on 5 tasks x 5 runs is found in most audits where one of 0.5 SD is not;
    skipping the null audits (the table's power pass) leaves the crossing audits as they were."""
    import numpy as np

    sd, growth = np.array([1.0, 2.0]), (1.0, 1.5, 2.0)
    shifts = calibration_bench.crossing_shifts(sd, growth, 2.0)
    assert [s.tolist() for s in shifts] == [[2.0, 4.0], [0.0, 0.0], [-4.0, -8.0]]
    cells = {size: calibration_bench.shape_cell("gamma", "expanded", 5, 5, 2, sims=20, reps=500, crossing_sd=size)
             for size in (0.5, 4.0)}
    small, large = (cells[size]["counts"] for size in (0.5, 4.0))
    assert {k: v for k, v in small.items() if k != "power"} == {k: v for k, v in large.items() if k != "power"}
    assert small["power"] <= 2 and large["power"] >= 12, (small, large)
    # the table's power pass: the crossing audits alone find the same crossings on the same data sets
    alone = calibration_bench.shape_cell("gamma", "expanded", 5, 5, 2, sims=20, reps=500, crossing_sd=4.0,
                                         null_too=False)
    assert alone["counts"]["power"] == large["power"] and alone["counts"]["n_cover"] == alone["counts"]["fwer"] == 0
    assert alone["fwer"] == alone["cover"] == "not run" and alone["power"] == cells[4.0]["power"]


def test_collapsed_seeds_five_tasks_five_runs_keep_the_bands(calibration_bench):
    """The fast version of the data-shape calibration (bench/bench_audit_calibration.py --shapes): 200 null
    audits of collapsing seeds, 5 tasks x 5 runs, 2 nested budgets, 3 identical algorithms, through the audit's
    own steps (shape detection and its t reading included) keep the family-wise error at 5 % and the 95 % IQM
    intervals' coverage in [93 %, 97 %], within a 1 % binomial margin."""
    import scipy.stats

    cell = calibration_bench.shape_cell("collapsed", "expanded", 5, 5, 2, sims=200, reps=4_000, power_too=False)
    r, d = cell["counts"], cell["diagnostics"]
    assert r["fwer"] <= scipy.stats.binom.ppf(0.99, r["sims"], 0.05), r
    # the null diagnostics (docs/audit.md, "Where the excess comes from") count every member of every audit
    assert (d["n_orderings"], d["n_changes"]) == (200 * 3 * 2, 200 * 3 * 1)
    assert max(d["fwer_orderings"], d["fwer_changes"]) <= r["fwer"] <= d["fwer_orderings"] + d["fwer_changes"]
    assert d["orderings_below"][1] <= d["orderings_below"][0] and d["levels"] == (0.05, 0.05 / 9)
    low = scipy.stats.binom.ppf(0.01, r["n_cover"], 0.93)
    high = scipy.stats.binom.ppf(0.99, r["n_cover"], 0.97)
    assert low <= r["cover"] <= high, r


def test_verdict_states_the_measured_error_where_the_matching_row_misses_the_nominal_one():
    from rlaudit.audit.checklist import supported_error_note

    bad = ROWS[1].to_dict()
    note = supported_error_note({"calibration": {"shapes": [{"shape": "collapsed"}], "row": bad}})
    assert note == ("; on data like these (seeds that collapse to ~0 while others learn, 26 tasks x 5 runs) the "
                    "simulation puts the family-wise error at 10.2 % [8.4, 12.2] and the coverage of 95 % intervals "
                    "at 92.6 %, not the nominal ones")
    assert supported_error_note({"calibration": {"shapes": [{"shape": "collapsed"}], "row": ROWS[2].to_dict()}}) == ""
    assert supported_error_note({}) == ""  # an audit.json written before the calibration was recorded


def test_permutation_candidate_decides_a_clear_gap_and_nothing_between_equal_runs(calibration_bench):
    """The permutation max-T candidate of the bench (docs/audit.md, "Where the excess comes from"): runs shifted
    far apart are ordered, the same runs under two names are not, and the p-value is never below 1 / n_perm."""
    rng = np.random.default_rng(0)
    base = [[rng.gamma(2.0, 1.0, 4) for _ in range(3)]]  # one budget, 3 tasks, 4 runs
    far = {"A": [[x + 100.0 for x in base[0]]], "B": base}
    decided = calibration_bench.permutation_orderings(far, 500, 0.05, np.random.default_rng(1))
    assert decided == {(0, "A", "B"): "a>b"}
    same = {"A": base, "B": [[x.copy() for x in base[0]]]}
    assert calibration_bench.permutation_orderings(same, 500, 0.05, np.random.default_rng(1)) == \
        {(0, "A", "B"): "inconclusive"}
    tiny = {"A": [[np.array([1.0, 2.0])]], "B": [[np.array([3.0, 4.0])]]}  # 6 labellings: p >= 1/6 at best
    assert calibration_bench.permutation_orderings(tiny, 200, 0.05, np.random.default_rng(1)) == \
        {(0, "A", "B"): "inconclusive"}


def test_candidate_df_rules_correct_each_task_before_welch(calibration_bench):
    """The bench's --df-rule candidates that wrap Welch-Satterthwaite (docs/audit.md, "A design-independent
    small-sample rule"): the corrected per-task counts reach it, a shape's halving compounding with the correction
    (``smaller`` is the library's ``bootstrap.DF_CUT``: tests/test_stats.py)."""
    seen = []
    rule = calibration_bench.candidate_effective_df
    welch = lambda v, d: seen.append(list(d)) or 0.0  # noqa: E731 - records what reaches Welch
    v = np.ones(3)
    for text, dfs, expected in (("half", [1, 2, 9], [0.5, 1, 4.5]), ("minus:1", [1, 2, 9], [1, 1, 8]),
                                ("minus-half:1", [1, 2, 9], [0.5, 1, 8]), ("minus-half:3", [1, 2, 9], [0.5, 1, 6]),
                                ("minus-half:1", [0.5, 1, 4.5], [0.25, 0.5, 3.5])):
        rule(text, welch)(v, dfs)
        assert seen.pop() == expected, text


def test_table_mode_remeasures_each_row_as_the_table_states_it_and_resumes(calibration_bench, monkeypatch, tmp_path):
    """``--table OUT`` (the whole CALIBRATION table under a candidate rule): each row's replicates, power and fresh
    data sets as the table states them, counts pooled into Clopper-Pearson rows, and a second run adds nothing.
    The cells themselves are the bench's (faked here); a real row was re-measured by hand and matched
    (gamma 5 x 2, 2 budgets: (0.0, 0.0, 1.2), (99.2, 98.1, 99.7), 0.0, 300)."""
    import argparse

    from rlaudit.audit import calibration

    rows = (calibration.CalibrationRow("gamma", 5, 2, 2, (0, 0, 0), (0, 0, 0), 0.0, 300),
            calibration.CalibrationRow("discrete", 5, 10, 2, (0, 0, 0), (0, 0, 0), 1.0, 1300),
            calibration.CalibrationRow("heavy", 5, 3, 4, (0, 0, 0), (0, 0, 0), None, 300, 5),
            calibration.CalibrationRow("heavy", 5, 10, 4, (0, 0, 0), (0, 0, 0), None, 1300, 5))
    monkeypatch.setattr(calibration, "CALIBRATION", rows)
    calls = []

    def cell(shape, method, n_tasks, n_runs, n_budgets, sims, reps, correction, n_algorithms, seed, power_too=True,
             null_too=True):
        calls.append((shape, n_runs, sims, reps, seed, power_too, null_too))
        return {"counts": {"fwer": sims // 100, "sims": sims, "cover": sims * n_budgets - 10,
                           "n_cover": sims * n_budgets, "power": 30 if power_too else 0}}

    monkeypatch.setattr(calibration_bench, "shape_cell", cell)
    out = tmp_path / "table.txt"
    args = argparse.Namespace(table=str(out), df_rule="smaller:1", iqm_df="runs", collapse_rule="skip-floor",
                              no_shape_df=False, correction="maxt", data_seed=0, table_runs=None)
    calibration_bench.calibration_table(args)
    # a row whose null audits need more replicates than the power pass's 4,000 has the power audited alone
    assert calls == [("gamma", 2, 300, 50_000, 0, False, True), ("gamma", 2, 300, 4_000, 0, True, False),
                     ("poisson", 10, 300, 4_000, 0, True, True), ("poisson", 10, 1000, 4_000, 1, False, True),
                     ("heavy", 3, 300, 50_000, 0, False, True), ("heavy", 10, 300, 4_000, 0, False, True),
                     ("heavy", 10, 1000, 4_000, 1, False, True)]
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# bench/bench_audit_calibration.py --table: df rule smaller:1")
    got = [eval(line.split("#")[0].strip().rstrip(","), {"CalibrationRow": calibration.CalibrationRow})
           for line in lines[1:]]
    assert [(r.shape, r.n_tasks, r.n_runs, r.n_budgets, r.n_algorithms, r.n_sims) for r in got] == \
        [(r.shape, r.n_tasks, r.n_runs, r.n_budgets, r.n_algorithms, r.n_sims) for r in rows]
    assert got[0].fwer == (1.0, 0.2, 2.9) and got[0].coverage[0] == 98.3 and got[0].power == 10.0  # 3/300, 590/600
    assert got[1].fwer[0] == round(100 * 13 / 1300, 1) and got[1].coverage[0] == round(100 * 2580 / 2600, 1)
    assert got[2].power is None and got[2].fwer[0] == 1.0
    assert got[3].power is None and got[3].fwer[0] == round(100 * 13 / 1300, 1)
    calls.clear()
    calibration_bench.calibration_table(args)
    assert calls == [] and out.read_text().splitlines() == lines
    with pytest.raises(SystemExit, match="measured under other options .*df rule smaller:1.*not these .*df rule welch"):
        calibration_bench.calibration_table(argparse.Namespace(**(vars(args) | {"df_rule": "welch"})))
    assert calls == [] and out.read_text().splitlines() == lines  # nothing mixed into it
    some = tmp_path / "some.txt"  # --table-runs: only those rows, and the header says so
    calibration_bench.calibration_table(argparse.Namespace(**(vars(args) | {"table": str(some), "table_runs": "3,10"})))
    assert [c[:2] for c in calls] == [("poisson", 10), ("poisson", 10), ("heavy", 3), ("heavy", 10), ("heavy", 10)]
    assert some.read_text().splitlines()[0].endswith(", rows with 3,10 runs per task only")
    with pytest.raises(SystemExit, match="measured under other options"):
        calibration_bench.calibration_table(argparse.Namespace(**(vars(args) | {"table": str(some)})))


def test_bootstrap_t_candidate_influence_and_decisions(calibration_bench):
    """The bootstrap-t candidate of the bench (docs/audit.md, "The Bayesian bootstrap and bootstrap-t"): the pooled
    IQM and its influence values by hand, a clear gap ordered and changed, nothing decided between copies."""
    x = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])  # 2 tasks x 4 runs: 8 pooled, 2 cut at each end
    iqm, influence = calibration_bench._iqm_and_influence(x)
    assert iqm == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    # winsorised at 3 and 6: 3 3 3 4 | 5 6 6 6, mean 4.5; influence (w - 4.5) / 0.5
    assert influence.ravel().tolist() == pytest.approx([-3.0, -3.0, -3.0, -1.0, 1.0, 3.0, 3.0, 3.0])
    # within-task variances 1 and 1 (ddof 1): 4 * (1 + 1) / 8 ** 2
    assert calibration_bench._stratified_var(influence) == pytest.approx(0.125)
    rng = np.random.default_rng(0)
    base = [[rng.gamma(2.0, 1.0, 5) for _ in range(4)] for _ in range(2)]  # 2 budgets, 4 tasks, 5 runs
    later = [[x + (100.0 if i else 0.0) for x in budget] for i, budget in enumerate(base)]  # A pulls ahead later
    decided, intervals = calibration_bench.bootstrap_t_family({"A": later, "B": base}, 2_000, 0.05,
                                                               np.random.default_rng(1))
    assert decided[("order", 1, "A", "B")] == "a>b" and decided[("change", 0, "A", "B")] == "changed"
    assert decided[("order", 0, "A", "B")] == "inconclusive"  # the same runs at the first budget
    lo, hi = intervals[("B", 0)]
    point = calibration_bench._iqm_and_influence(np.stack(base[0]))[0]
    assert lo < point < hi
    same = {"A": base, "B": [[x.copy() for x in budget] for budget in base]}
    decided, _ = calibration_bench.bootstrap_t_family(same, 2_000, 0.05, np.random.default_rng(1))
    assert set(decided.values()) == {"inconclusive"}


def test_detection_cell_counts_the_shapes_found_on_the_cells_null_data(calibration_bench):
    """The bench's --detect-only cell: collapsing seeds at 5 runs a task are found on (nearly) every data set
    (95-100 %: docs/audit.md); on skewed runs at 5 algorithms x 5 runs almost never
    (bench/results/shape_detection_false_positives.txt: 3 of 300 under the rule until 2026-12-07)."""
    collapsing = calibration_bench.detection_cell("collapsed", 5, 5, 2, 30, 3)
    assert sum(collapsing.values()) == 30 and collapsing["collapsed"] >= 27
    skewed = calibration_bench.detection_cell("gamma", 5, 5, 2, 30, 5)
    assert skewed["none"] >= 27


def test_the_flagship_design_power_note_is_the_one_its_recorded_measurement_gives(calibration_bench):
    """sweeps/dqn-family-minatar/store.sqlite.notes.toml's design_power note says what
    bench/results/flagship_design_power_note.txt measured, under the audit's current small-sample rule (a change
    of rule fails here until the note is measured again)."""
    import argparse
    import re
    from pathlib import Path

    from rlaudit.stats import bootstrap
    from rlaudit.store.notes import read_notes

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "bench/results/flagship_design_power_note.txt").read_text()
    measured, size = [], None
    for line in text.splitlines():
        if line.startswith("data shapes:"):
            assert "df rule smaller:2," in line and "collapse rule skip-floor," in line and "data seed 0," in line
            size = float(re.search(r"crossing ([\d.]+) SD", line).group(1))
        elif line.split()[:1] and line.split()[0] in calibration_bench.SHAPES:
            f = line.split()
            power = float(re.search(r"not run +([\d.]+) \[", line).group(1))
            measured.append((f[0], int(f[2]), int(f[3]), int(f[4]), size, round(power * 3), 300))  # k of 300
    assert bootstrap.DF_CUT == 2.0 and len(measured) == 27 and "note 'design_power' ->" in text
    note = next(n for n in read_notes(repo / "sweeps/dqn-family-minatar/store.sqlite")
                if n.startswith("What this design can detect"))
    day = re.search(r"; (\d{4}-\d\d-\d\d); python", note).group(1)
    args = argparse.Namespace(n_algorithms=5, correction="maxt", df_rule="smaller:2", collapse_rule="skip-floor",
                              reps=4_000, data_seed=0)
    assert note == " ".join(calibration_bench.design_power_note(args, 300, measured, day).split())
    assert "5 runs a task: gamma 1 SD 2 %, gamma 1.5 SD 38 %" in note  # docs/audit.md's table, same data sets


def test_dependence_check_classes_member_pairs_and_counts_effective_tests(dependence_check):
    """bench/dependence_check.py (docs/audit.md, "Not the family's size") classes pairs of the audit's members
    (``rlaudit.audit.engine.family_members``) by what they share, and counts m effective tests for independent
    members and 1 for identical ones."""
    kind = dependence_check.pair_kind
    assert kind(("order", 1, "A", "B"), ("order", 2, "A", "B")) == "orderings of one pair, two budgets"
    assert kind(("order", 1, "A", "B"), ("order", 1, "A", "C")).endswith("one budget (same side)")
    assert kind(("order", 1, "A", "B"), ("order", 1, "B", "C")).endswith("one budget (opposite sides)")
    assert kind(("change", 1, "A", "B"), ("change", 2, "A", "B")) == "changes of one pair (same last gap)"
    gen = np.random.default_rng(0)
    assert dependence_check.effective_tests(np.eye(10), 0.05, gen) == pytest.approx(10, rel=0.08)
    assert dependence_check.effective_tests(np.ones((10, 10)), 0.05, gen) == pytest.approx(1, rel=0.08)
