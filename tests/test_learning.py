"""Learned or not: cells where no algorithm is clear of the random policy, and what the audit says of them."""

from __future__ import annotations

import re
import numpy as np
import pandas as pd
import pytest

from rlaudit.audit import AuditSettings, parse_claims, run_audit
from rlaudit.audit.learning import claim_notes, learning_cells
from rlaudit.errors import InputError
from rlaudit.scores import ScoreTable
from rlaudit.stats.normalize import parse_normalization

# Random policy at 1.0 on every task; high reference 11.0.
NORM = {"method": "minmax", "low": "random", "source": "random policy, 1000 episodes",
        "references": {"t0": [1.0, 11.0], "t1": [1.0, 11.0], "t2": [1.0, 11.0]}}


def _table() -> ScoreTable:
    """A and B on three tasks at two budgets, 5 runs each; at 100 nothing beats random on t2, and on every
    task at 50 both agents still score around the random policy's 1.0."""
    rng = np.random.default_rng(3)
    rows = []
    means = {("A", 50): (1.0, 1.0, 1.0), ("B", 50): (1.1, 0.9, 1.0),
             ("A", 100): (6.0, 4.0, 1.0), ("B", 100): (3.0, 2.0, 1.05)}
    for (a, b), mus in means.items():
        for t, mu in enumerate(mus):
            for r, x in enumerate(rng.normal(mu, 0.4, 5)):
                rows.append({"algorithm": a, "task": f"t{t}", "run": r, "budget": b, "score": float(x)})
    return ScoreTable.from_frame(pd.DataFrame(rows))


def test_cells_are_learned_only_when_some_interval_is_above_the_reference():
    per_task = [{"budget": 10, "algorithm": "A", "task": "x", "mean": 2.0, "lo": 1.2, "hi": 2.8},
                {"budget": 10, "algorithm": "B", "task": "x", "mean": 1.5, "lo": 0.9, "hi": 2.1},
                {"budget": 10, "algorithm": "A", "task": "y", "mean": 1.2, "lo": 1.0, "hi": 1.4},
                {"budget": 10, "algorithm": "B", "task": "y", "mean": 1.1, "lo": 0.7, "hi": 1.5}]
    cells = learning_cells(per_task, {"x": 1.0, "y": 1.0}, [10], ["x", "y"])
    assert [(c["task"], c["best_algorithm"], c["best_lo"], c["learned"]) for c in cells] == [
        ("x", "A", 1.2, True), ("y", "A", 1.0, False)]  # a lower end equal to the reference is not clear of it
    claims = [{"text": "A > B", "per_budget": [{"budget": 10, "verdict": "holds"}]}]
    assert claim_notes(claims, cells, 2)[0]["per_budget"][0] == {
        "budget": 10, "verdict": "holds", "nothing_learned_tasks": ["y"], "rests_on_unlearned": False}
    assert claim_notes(claims, cells, 1)[0]["per_budget"][0]["rests_on_unlearned"] is True
    assert claims[0]["per_budget"][0] == {"budget": 10, "verdict": "holds"}  # input untouched


def test_the_audit_flags_unlearned_cells_marks_claims_and_gives_aggregates_without_them():
    claims = parse_claims([{"better": "A", "worse": "B", "text": "A beats B"}], "p.toml")
    res = run_audit(_table(), AuditSettings(reps=4_000, reps_pairwise=400, normalization=NORM), claims)
    learning = res.learning
    assert learning["reference"] == "random policy" and learning["source"] == "random policy, 1000 episodes"
    assert learning["nothing_learned"] == [{"task": t, "budget": 50} for t in ("t0", "t1", "t2")] + [
        {"task": "t2", "budget": 100}]
    per = {p["budget"]: p for p in res.claims[0]["per_budget"]}
    assert per[50]["rests_on_unlearned"] is True and per[50]["nothing_learned_tasks"] == ["t0", "t1", "t2"]
    assert per[100]["rests_on_unlearned"] is False and per[100]["nothing_learned_tasks"] == ["t2"]
    only = learning["aggregates_learned_only"]
    assert [(x["budget"], x["algorithm"], x["n_tasks"], x["tasks_left_out"]) for x in only] == [
        (100, "A", 2, ["t2"]), (100, "B", 2, ["t2"])]  # at 50 no task is left, so no learned-only aggregate
    full = {(a["budget"], a["algorithm"]): a["point"] for a in res.aggregates if a["metric"] == "iqm"}
    assert only[0]["point"] > full[(100, "A")]  # dropping a task at random level raises A's IQM
    # the terminal summary says it before the tables, and the report in its verdict
    import io

    from rich.console import Console

    from rlaudit.audit.summary import render_summary

    out = io.StringIO()
    render_summary(res, Console(file=out, width=200))
    assert ("[warning] nothing learned yet (no algorithm's per-task interval above the random policy's score): t0 at "
            "50, t1 at 50, t2 at 50, t2 at 100") in out.getvalue()
    from rlaudit.report.model import build_model

    findings = [f.text for f in build_model(res.to_dict()).findings]
    assert any(t.startswith("Nothing learned yet at 50 environment steps on t0, t1 and t2; at 100 on t2: no "
                                   "algorithm's per-task interval lies above the random policy's score") for t in findings)
    assert any(t == "Claim \u201cA beats B\u201d at 50 environment steps rests only on tasks nothing has learned yet." for t in findings)


def test_raw_scores_are_checked_against_the_protocols_random_policy_scores():
    """[audit.random_policy] gives the check on raw scores (MinAtar has no published normalisation): the same
    cells as with the random policy as the normalisation's low end, since per-task intervals are raw."""
    given = {"source": "measured, 1000 episodes", "scores": {"t0": 1.0, "t1": 1.0, "t2": 1.0, "elsewhere": 3.0}}
    raw = run_audit(_table(), AuditSettings(reps=4_000, reps_pairwise=400, random_policy=given))
    normed = run_audit(_table(), AuditSettings(reps=4_000, reps_pairwise=400, normalization=NORM))
    assert raw.learning["source"] == "measured, 1000 episodes"
    assert raw.learning["nothing_learned"] == normed.learning["nothing_learned"] != []
    assert [c["task"] for c in raw.learning["cells"]] == [c["task"] for c in normed.learning["cells"]]
    partial = {**given, "scores": {"t2": 1.0}}  # tasks without a score are not checked
    res = run_audit(_table(), AuditSettings(reps=4_000, reps_pairwise=400, random_policy=partial))
    assert res.learning["nothing_learned"] == [{"task": "t2", "budget": 50}, {"task": "t2", "budget": 100}]


@pytest.mark.parametrize("value,what", [
    ({"scores": {"t0": 1.0}}, "rp.source: say where"), ({"source": "x", "scores": {}}, "rp.scores: expected a table"),
    ({"source": "x", "scores": {"t0": float("nan")}}, "rp.scores.t0: must be a finite number"),
    ({"source": "x", "scores": {"t0": 1}, "sorce": 1}, "rp.sorce: unknown key (did you mean 'source'")])
def test_a_bad_random_policy_table_is_named(value, what):
    settings = AuditSettings(random_policy=value, origins={"random_policy": "rp"})
    with pytest.raises(InputError, match="^" + re.escape(what)):
        settings.check()


def test_without_a_random_reference_there_is_no_learning_section():
    norm = {**NORM}
    del norm["low"]
    res = run_audit(_table(), AuditSettings(reps=4_000, reps_pairwise=200, normalization=norm))
    assert res.learning == {}


def test_atari_scores_have_the_random_policy_as_their_low_end():
    assert parse_normalization("atari").low_is_random and parse_normalization({"method": "atari"}).low_is_random
    with pytest.raises(InputError, match=r"^n\.low: only 'random' is understood"):
        parse_normalization({**NORM, "low": "zero"}, "n")
    with pytest.raises(InputError, match=r"^n\.low: not used by method 'divide'"):
        parse_normalization({"method": "divide", "divisor": 2, "low": "random"}, "n")


def test_a_stores_protocol_gives_its_random_policy_scores_to_rlaudit_audit(tmp_path, monkeypatch):
    """End to end: the recorded quickstart store, its protocol given [audit.random_policy] (raw scores, the
    normalisation's low ends are not the random policy's), audited by the command line. Run from elsewhere, so
    that the store's recorded text is read, not protocols/quickstart.toml."""
    import json
    import shutil
    import sqlite3
    from pathlib import Path

    from click.testing import CliRunner

    from rlaudit.cli import main

    repo = Path(__file__).resolve().parents[1]
    store = tmp_path / "store.sqlite"
    shutil.copy(repo / "sweeps" / "quickstart" / "store.sqlite", store)
    con = sqlite3.connect(store)
    h = con.execute("SELECT value FROM meta WHERE key='protocol_hash'").fetchone()[0]
    text = con.execute("SELECT text FROM protocols WHERE hash=?", (h,)).fetchone()[0]
    # CartPole's bar is out of reach (nothing learned there); Acrobot's is the real random policy's -500
    extra = ('\n[audit.random_policy]\nsource = "a test"\n'
             'scores = { "CartPole-v1" = 10000.0, "Acrobot-v1" = -500.0 }\n')
    con.execute("UPDATE protocols SET text=? WHERE hash=?", (text + extra, h))
    con.commit()
    con.close()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["audit", str(store), "--reps", "6000", "-q", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    learning = json.loads((tmp_path / "a" / "audit.json").read_text())["learning"]
    assert learning["source"] == "a test"
    unlearned = {c["task"] for c in learning["nothing_learned"]}
    assert unlearned == {"CartPole-v1"}  # every CartPole budget, no Acrobot one
