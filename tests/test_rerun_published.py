"""Runnable published protocols ([rerun]) and the joined published-vs-rerun audit.

Statistics on hand-computed arrays; bad input through the CLI (one line, exit 2, nothing written); one tiny
rerun end to end (CartPole, 3 built-ins, 2 seeds, 1k/2k steps) through run -> joined audit -> report.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.audit.agreement import compare_orderings, ordering_status, rank_agreement, summarize
from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.protocol import load_protocol
from rlaudit.protocol.loader import parse_protocol
from rlaudit.protocol.rerun import (algorithm_on, budget_name, closest, parse_budgets, render_protocol, scaled_settings,
                                    section_of)
from rlaudit.scores import ScoreMeta, ScoreTable
from rlaudit.stats.agreement import kendall_tau, kendall_tau_rows

REPO = Path(__file__).resolve().parents[1]
DOPAMINE = REPO / "protocols" / "published" / "dopamine-atari-200m.toml"
IMPALA = REPO / "protocols" / "published" / "dopamine-cnn-vs-impala.toml"


# ------------------------------------------------------------------------------------------- Kendall tau

def test_kendall_tau_on_hand_computed_vectors():
    # 6 pairs, one discordant (items 1, 2): (5 - 1) / 6.
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3, abs=1e-15)
    # A tie in x: S = 2, n0 = 3, T_x = 1 -> 2 / sqrt(2 * 3).
    assert kendall_tau([1, 2, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6), abs=1e-15)
    assert kendall_tau([3, 2, 1], [1, 2, 3]) == -1.0
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall_tau([1], [2]))


def test_kendall_tau_equals_scipy_on_random_rows_with_ties():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(50, 6)).astype(float)
    y = rng.integers(0, 4, size=(50, 6)).astype(float)
    ours = kendall_tau_rows(x, y)
    for r in range(50):
        ref = kendalltau(x[r], y[r]).statistic
        assert (math.isnan(ours[r]) and math.isnan(ref)) or ours[r] == pytest.approx(ref, abs=1e-12)


def test_rank_agreement_interval_on_hand_computed_replicates():
    published = np.array([3.0, 2.0, 1.0])
    rerun_reps = np.array([[1, 2, 3], [3, 2, 1], [1, 3, 2], [2, 1, 3]], dtype=float)
    out = rank_agreement(published, np.array([1.0, 2.0, 3.0]), published[None, :], rerun_reps, confidence=0.95)
    # Replicate taus: -1, 1, -1/3, -1/3; sorted [-1, -1/3, -1/3, 1]; quantiles at 0.075 and 2.925.
    assert out["tau"] == -1.0
    assert out["lo"] == pytest.approx(-1 + 0.075 * (2 / 3), abs=1e-12)
    assert out["hi"] == pytest.approx(-1 / 3 + 0.925 * (4 / 3), abs=1e-12)
    assert (out["n_agents"], out["n_reps"]) == (3, 4)
    flat = rank_agreement(np.ones(3), np.arange(3.0), np.ones((2, 3)), np.ones((2, 3)))
    assert flat == {"tau": None, "lo": None, "hi": None, "n_agents": 3, "n_reps": 0}


# ------------------------------------------------------------------------------------------- orderings

def _o(budget, a, b, decision, diff=(0.0, 0.0, 0.0)):
    return {"budget": budget, "a": a, "b": b, "metric": "iqm", "decision": decision, "diff_point": diff[0],
            "diff_lo": diff[1], "diff_hi": diff[2]}


def test_ordering_status():
    assert ordering_status("a>b", True) == "holds"
    assert ordering_status("b>a", True) == "reversed"
    assert ordering_status("a>b", False) == "reversed"
    assert ordering_status("b>a", False) == "holds"
    assert ordering_status("inconclusive", True) == "inconclusive"
    assert ordering_status(None, True) == "not rerun"


def test_compare_orderings_maps_flips_and_groups():
    published = [_o(10, "A", "B", "a>b"), _o(20, "A", "B", "a>b"), _o(10, "B", "C", "b>a"),
                 _o(10, "A", "C", "inconclusive"), _o(20, "A", "D", "a>b"), _o(10, "A", "B", "b>a") | {"metric": "og"}]
    rerun = [_o(1, "a", "b", "b>a", (-0.5, -0.7, -0.3)), _o(1, "b", "c", "b>a", (-0.2, -0.3, -0.1)),
             _o(2, "a", "b", "inconclusive", (0.1, -0.2, 0.4))]
    out = compare_orderings(published, rerun, {"A": "a", "B": "b", "C": "c"}, [1, 2], "iqm")
    assert [(o["better"], o["worse"], o["published_budgets"]) for o in out] == [
        ("A", "B", [10, 20]), ("C", "B", [10]), ("A", "D", [20])]
    ab, cb, ad = out
    assert [p["status"] for p in ab["per_budget"]] == ["reversed", "inconclusive"]
    assert ab["per_budget"][0]["diff_point"] == -0.5
    # Rerun pair stored as (b, c) with c better: seen from the published C > B it holds, difference negated.
    assert cb["per_budget"][0] == {"budget": 1, "status": "holds", "decision": "b>a", "diff_point": 0.2,
                                   "diff_lo": 0.1, "diff_hi": 0.3}
    assert cb["per_budget"][1]["status"] == "not rerun"
    assert ad["rerun_worse"] is None and [p["status"] for p in ad["per_budget"]] == ["not rerun", "not rerun"]
    assert summarize(out, [1, 2]) == [
        {"budget": 1, "holds": 1, "reversed": 1, "inconclusive": 0, "not rerun": 1},
        {"budget": 2, "holds": 0, "reversed": 0, "inconclusive": 1, "not rerun": 2}]


# ------------------------------------------------------------------------------------------- options, scaling

def test_parse_budgets():
    assert parse_budgets("100k,1M") == (100_000, 1_000_000)
    assert parse_budgets("1.5k, 2_500") == (1_500, 2_500)
    assert parse_budgets(None) is None
    for bad in ("100q", "0", "-5", "1.0001k", "", "2k,1k", "1k,1000", "k"):
        with pytest.raises(InputError, match="--budgets"):
            parse_budgets(bad)


def test_budget_name():
    assert [budget_name(b) for b in (100_000, 1_000_000, 2_500, 999, 50_000_000)] == ["100k", "1M", "2.5k", "999", "50M"]


def test_closest_matches_the_name_without_its_parenthetical():
    assert closest("DQN (Adam + MSE in JAX)", ["PPO", "DQN", "SAC", "QRDQN"], n=2) == ["DQN", "QRDQN"]


def test_dopamine_rerun_section_scales_to_minatar():
    section = section_of(load_protocol(DOPAMINE))
    assert [a.published for a in section.agents] == ["DQN", "C51", "Rainbow", "IQN", "Quantile (JAX)",
                                                    "DQN (Adam + MSE in JAX)"]
    assert [a.algorithm for a in section.agents] == ["DQN", "C51", "DopamineRainbow", "IQN", "DQNFamily", None]
    # MinAtar has published settings of its own (revisiting_rainbow's configs): they replace the scaled ones.
    minatar = section.suites["minatar"]
    hp, pk = scaled_settings(section, section.agents[0], minatar, largest=1_000_000)
    assert (hp["buffer_size"], hp["learning_starts"], hp["target_update_interval"]) == (100_000, 1_000, 1_000)
    assert hp["exploration_schedule"] == "dopamine" and hp["epsilon_decay_steps"] == 250_000
    assert hp["learning_rate"] == 0.00025 and hp["loss"] == "mse" and hp["max_grad_norm"] == float("inf")
    assert pk == {"features_extractor": "minatar", "net_arch": []} and hp["adam_eps"] == 0.0003125
    hp_rb, pk_rb = scaled_settings(section, section.agents[2], minatar, largest=100_000)
    assert (hp_rb["learning_rate"], hp_rb["v_max"], hp_rb["n_steps"], hp_rb["per_beta_anneal"]) == (1e-4, 100.0, 3, False)
    # the suite's adam_eps replaces the Atari Rainbow's optimizer_kwargs eps (1.5e-4), which JAX would refuse
    assert hp_rb["adam_eps"] == 0.0003125 and "optimizer_kwargs" not in pk_rb
    # MinAtar's quantile agent is plain QR-DQN: the built-in QRDQN, none of the Atari composition's settings
    quantile = section.agents[4]
    assert algorithm_on(quantile, minatar) == "QRDQN" and algorithm_on(quantile, section.suites["gymnasium"]) == "DQNFamily"
    hp_qr, pk_qr = scaled_settings(section, quantile, minatar, largest=100_000)
    assert hp_qr["n_quantiles"] == 51 and not {"distributional", "prioritized", "n_steps", "per_alpha"} & set(hp_qr)
    assert "optimizer_kwargs" not in pk_qr
    hp_iqn, _ = scaled_settings(section, section.agents[3], minatar, largest=100_000)
    assert (hp_iqn["n_cos"], hp_iqn["cos_start"], hp_iqn["n_steps"]) == (64, 1, 1)  # Dopamine's i = 1..64
    # Classic control keeps the scaling rule: factor 500k / 50M = 0.01.
    hp_g, _ = scaled_settings(section, section.agents[0], section.suites["gymnasium"], largest=100_000)
    assert (hp_g["buffer_size"], hp_g["learning_starts"], hp_g["target_update_interval"]) == (10_000, 200, 80)


def test_dopamine_rerun_protocol_text_is_an_ordinary_rerun_protocol():
    published = load_protocol(DOPAMINE)
    section = section_of(published)
    text = render_protocol(published, section, section.suites["minatar"], (100_000, 1_000_000), 5)
    p = parse_protocol(text, "generated")
    assert p.name == "dopamine-atari-200m-rerun-minatar" and not p.is_published
    assert tuple(t.id for t in p.tasks) == section.suites["minatar"].tasks
    assert p.labels == ["DQN", "C51", "Rainbow", "IQN", "QR-DQN"]
    assert [(r.name, r.budget, r.regime_kind) for r in p.regimes] == [("100k", 100_000, "nested"), ("1M", 1_000_000, "nested")]
    assert p.rerun_of["agents"]["QR-DQN"] == "Quantile (JAX)" and p.rerun_of["suite"] == "minatar"
    # Published claims between rerun agents carry over under the rerun labels; DQN (Adam + MSE) is not rerun.
    assert {(c["better"], c["worse"]) for c in p.claims} == {("Rainbow", "DQN"), ("IQN", "Rainbow"), ("C51", "DQN"),
                                                             ("QR-DQN", "C51")}
    assert p.evaluation.epsilon == 0.001 and p.evaluation.max_episode_steps is None  # no cap, as published
    assert all(t.kwargs == {"use_minimal_action_set": False, "clip_reward": [-1, 1]} for t in p.tasks)
    assert [d.key for d in p.deviations] == ["evaluation", "replay", "budget", "implementation"]
    assert "dqn_breakout.gin" in p.algorithms[0].source[1].text and p.algorithms[0].deviations[0].key == "loss"
    assert [a.name for a in p.algorithms] == ["DQN", "C51", "DopamineRainbow", "IQN", "QRDQN"]
    assert "implementation" in [d.key for d in p.algorithms[2].deviations]  # the newest revision's noisy Rainbow
    assert p.algorithms[3].deviations == ()  # IQN's embedding is Dopamine's (cos_start = 1)
    # the learned-vs-random check has the random policy's scores on raw MinAtar returns
    random_policy = p.audit.extra["random_policy"]
    assert set(random_policy["scores"]) == set(section.suites["minatar"].tasks)
    assert random_policy["scores"]["MinAtar/SpaceInvaders-v1"] == 2.781  # full action set
    # Same options -> same text -> same hash, so the store resumes.
    assert parse_protocol(render_protocol(published, section, section.suites["minatar"], (100_000, 1_000_000), 5),
                          "again").hash == p.hash


# ------------------------------------------------------------------------------------------- scores contract

def test_source_column_is_optional_and_checked():
    frame = pd.DataFrame({"algorithm": ["A", "A"], "task": ["t", "t"], "run": ["0", "0"], "budget": [1, 1],
                          "score": [1.0, 2.0], "source": ["published", "rerun"]})
    with pytest.raises(InputError, match="duplicate"):
        ScoreTable.from_frame(frame)
    frame.loc[1, "task"] = "u"
    assert list(ScoreTable.from_frame(frame).frame["source"]) == ["published", "rerun"]
    frame.loc[1, "source"] = " "
    with pytest.raises(InputError, match="empty 'source'"):
        ScoreTable.from_frame(frame)


def test_joined_table_keeps_sources_apart():
    from rlaudit.audit.joined import _side, joined_table

    def table(algos, task, kind):
        rows = [{"algorithm": a, "task": task, "run": str(r), "budget": 10, "score": float(r)}
                for a in algos for r in range(2)]
        return ScoreTable.from_frame(pd.DataFrame(rows), ScoreMeta(score_kind=kind, budget_unit="frames"))

    pub, rer = table(["DQN", "C51"], "Pong", "train"), table(["DQN"], "Pong", "eval")  # same key: prefixed
    joined = joined_table(pub, rer)
    assert joined.frame.groupby("source").size().to_dict() == {"published": 4, "rerun": 2}
    assert set(joined.frame.loc[joined.frame["source"] == "rerun", "algorithm"]) == {"rerun:DQN"}
    assert set(joined.frame.loc[joined.frame["source"] == "published", "score_kind"]) == {"train"}
    assert _side(joined, "rerun").algorithms == ["DQN"]


# ------------------------------------------------------------------------------------------- bad input

def _cli(args, cwd: Path):
    import os

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("args, expect", [
    ([str(IMPALA), "--suite", "minatar"], "rerun: missing; this published protocol has no [rerun] section"),
    ([str(DOPAMINE), "--suite", "minatr"], "no rerun suite 'minatr' (did you mean 'minatar'?)"),
    ([str(DOPAMINE), "--suite", "minatar", "--budgets", "100q"], "'100q' is not a budget"),
    ([str(DOPAMINE), "--suite", "minatar", "--budgets", "0"], "a budget must be a positive"),
    ([str(DOPAMINE), "--suite", "minatar", "--budgets", "-1k"], "a budget must be a positive"),
    ([str(DOPAMINE), "--suite", "minatar", "--seeds", "x"], "--seeds: 'x' is not a number"),
    ([str(REPO / "protocols" / "quickstart.toml"), "--suite", "minatar"], "--suite: applies to a published protocol"),
])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_rerun_options_are_one_line_exit_2_nothing_written(tmp_path, command, args, expect):
    result = _cli([command, *args, "--store", str(tmp_path / "s.sqlite")], tmp_path)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and expect in lines[0], result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def _fixture(tmp_path: Path, algorithm_for_qr: str = "QRDQN") -> Path:
    """A tiny published comparison (tidy CSV, 2 games, 10 runs, budgets 10 and 20 frames) with a [rerun]
    section mapping three of its four agents to existing built-ins on CartPole. Ten runs, not three: with
    2 games x 3 runs the t-corrected family level lies beyond any replicate and nothing can be decided."""
    rows = ["# rlaudit.budget_unit: frames", "algorithm,task,run,budget,score"]
    for a, level in {"DQN": 1.0, "Double": 2.0, "QR": 3.0, "Adam": 2.5}.items():
        for t, k in (("Pong", 1.0), ("Breakout", 10.0)):
            for r in range(10):
                for b in (10, 20):
                    rows.append(f"{a},{t},{r},{b},{k * (level * b / 20 + 0.01 * r)}")
    csv = "\n".join(rows) + "\n"
    data = tmp_path / "data"
    data.mkdir()
    (data / "pub.csv").write_text(csv)
    sha = hashlib.sha256(csv.encode()).hexdigest()
    path = tmp_path / "pub.toml"
    path.write_text(f'''schema_version = 1
name = "tiny-pub"
title = "Tiny published comparison"
[data]
format = "tidy"
[[data.files]]
path = "pub.csv"
url = "https://example.org/pub.csv"
sha256 = "{sha}"
[audit]
metric = "iqm"
[[claims]]
better = "QR"
worse = "DQN"
[rerun]
reference_steps = 1_000_000
scaled = ["buffer_size", "learning_starts", "target_update_interval"]
exploration_steps = 250_000
seeds = 2
implementation = "the tiny authors' code"
hyperparams = {{ buffer_size = 1_000_000, learning_starts = 20_000, target_update_interval = 8_000 }}
[[rerun.agents]]
published = "DQN"
algorithm = "DQN"
[[rerun.agents]]
published = "Double"
algorithm = "DoubleDQN"
label = "Double"
[[rerun.agents]]
published = "QR"
algorithm = "{algorithm_for_qr}"
label = "QR-DQN"
hyperparams = {{ n_quantiles = 10 }}
[[rerun.agents]]
published = "Adam"
runnable = false
note = "its loss is not a hyperparameter"
[rerun.suites.gymnasium]
reference_steps = 5_000
tasks = ["CartPole-v1"]
budgets = [1_000, 2_000]
policy_kwargs = {{ net_arch = [16] }}
evaluation = {{ n_eval_episodes = 2, max_episode_steps = 100 }}
normalization = {{ method = "minmax", references = {{ CartPole-v1 = [0, 100] }} }}
''')
    return path


def test_an_unregistered_counterpart_is_listed_with_the_closest_built_ins(tmp_path):
    path = _fixture(tmp_path, algorithm_for_qr="QRDQNN")
    result = _cli(["run", str(path), "--suite", "gymnasium", "--store", str(tmp_path / "s.sqlite")], tmp_path)
    assert result.exit_code == 2
    assert "no runnable counterpart for 1 agent: QR -> 'QRDQNN' (closest registered: QRDQN" in result.output
    assert not (tmp_path / "s.sqlite").exists()


def test_a_suite_may_rerun_an_agent_with_another_algorithm_and_an_unregistered_one_is_named(tmp_path):
    path = _fixture(tmp_path)
    text = path.read_text()
    path.write_text(text + '[rerun.suites.gymnasium.agents.Double]\nalgorithm = "QRDQN"\nhyperparams = { n_quantiles = 5 }\n')
    result = _cli(["validate", str(path), "--suite", "gymnasium"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "Double -> Double (QRDQN)" in result.output  # DoubleDQN's own settings are not carried over
    path.write_text(text + '[rerun.suites.gymnasium.agents.Double]\nalgorithm = "QRDQM"\n')
    result = _cli(["validate", str(path), "--suite", "gymnasium"], tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "no runnable counterpart for 1 agent: Double on gymnasium -> 'QRDQM' (closest registered: QRDQN" in \
        result.output
    path.write_text(text + '[rerun.suites.gymnasium.agents.Adam]\nalgorithm = "DQN"\n')
    result = _cli(["validate", str(path), "--suite", "gymnasium"], tmp_path)
    assert result.exit_code == 2 and "rerun.suites.gymnasium.agents.Adam.algorithm: 'Adam' is not rerun" in result.output


def test_validate_prints_the_plan_and_the_agents_not_rerun(tmp_path):
    path = _fixture(tmp_path)
    result = _cli(["validate", str(path), "--suite", "gymnasium", "--budgets", "1k,2k", "--seeds", "3"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "plan: 9 runs (9 nested, 0 separate), 18,000 env steps in total" in result.output
    assert "Adam: not rerun, no runnable counterpart (closest built-ins: " in result.output
    assert "QR -> QR-DQN (QRDQN)" in result.output and "estimate: about" in result.output
    assert "sweeps/tiny-pub-rerun-gymnasium/store.sqlite" in result.output
    assert not (tmp_path / "sweeps").exists()


def test_joined_audit_of_a_score_file_and_its_bad_input(tmp_path):
    path = _fixture(tmp_path)
    rows = ["algorithm,task,run,budget,score"]
    for a, level in (("DQN", 3.0), ("Double", 2.0), ("QR-DQN", 1.0)):
        for r in range(4):
            rows += [f"{a},CartPole-v1,{r},1000,{level + 0.01 * r}", f"{a},Acrobot-v1,{r},1000,{level + 0.02 * r}"]
    (tmp_path / "rerun.csv").write_text("\n".join(rows) + "\n")
    base = ["audit", "rerun.csv", "--data", "data", "--reps", "12000", "--reps-pairwise", "100"]
    result = _cli([*base, "--published", str(path), "--out", "a"], tmp_path)
    assert result.exit_code == 0, result.output
    pa = json.loads((tmp_path / "a" / "audit.json").read_text())["published_agreement"]
    # The rerun ranks the three agents in exactly the opposite order, every run agreeing: tau = -1, no spread.
    assert [(r["tau"], r["lo"], r["hi"]) for r in pa["rank_agreement"]] == [(-1.0, -1.0, -1.0)] * 2
    assert {o["better"]: [p["status"] for p in o["per_budget"]] for o in pa["orderings"]
            if o["worse"] == "DQN"} == {"QR": ["reversed"], "Double": ["reversed"], "Adam": ["not rerun"]}
    # Without --published a score file is audited alone.
    result = _cli([*base, "--out", "b"], tmp_path)
    assert result.exit_code == 0 and "published_agreement" not in json.loads((tmp_path / "b" / "audit.json").read_text())
    text = path.read_text()
    (tmp_path / "norerun.toml").write_text(text[:text.index("[rerun]")])
    for published, expect in (("norerun.toml", "no agent mapping; the published protocol norerun.toml has no [rerun]"),
                              (str(REPO / "protocols" / "quickstart.toml"), "--published: ")):
        result = _cli([*base, "--published", published, "--out", "c"], tmp_path)
        assert result.exit_code == 2 and expect in result.output, result.output
        assert result.output.count("error:") == 1 and not (tmp_path / "c").exists()


# ------------------------------------------------------------------------------------------- end to end

def test_rerun_then_joined_audit_then_report(tmp_path):
    path = _fixture(tmp_path)
    store = tmp_path / "s.sqlite"
    run = ["run", str(path), "--suite", "gymnasium", "--budgets", "1k,2k", "--store", str(store), "--workers", "1"]
    result = _cli(run, tmp_path)
    assert result.exit_code == 0, result.output
    again = _cli(run, tmp_path)  # resumable: an ordinary store of the generated rerun protocol
    assert again.exit_code == 0 and "0 done, 0 failed, 6 skipped" in again.output, again.output

    fast = ["--reps", "12000", "--reps-pairwise", "200", "--seed", "1"]
    # The store alone: its protocol records the published protocol it reruns.
    result = _cli(["audit", str(store), "--data", str(tmp_path / "data"), "--out", str(tmp_path / "a"), *fast],
                  tmp_path)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "a" / "audit.json").read_text())
    pa = doc["published_agreement"]
    assert doc["data"]["algorithms"] == ["DQN", "Double", "QR-DQN"]
    assert pa["mapping"] == [{"published": "DQN", "rerun": "DQN"}, {"published": "Double", "rerun": "Double"},
                             {"published": "QR", "rerun": "QR-DQN"}]
    assert pa["not_rerun"] == ["Adam"] and pa["rerun"]["budgets"] == [1000, 2000]
    assert pa["published"]["budgets"] == [10, 20] and pa["published"]["budget_unit"] == "frames"
    # The fixture's published orderings are all decided: every pair of the four agents, QR > Adam > Double > DQN.
    assert {(o["better"], o["worse"]) for o in pa["orderings"]} == {
        ("QR", "Adam"), ("QR", "Double"), ("QR", "DQN"), ("Adam", "Double"), ("Adam", "DQN"), ("Double", "DQN")}
    by_pair = {(o["better"], o["worse"]): o for o in pa["orderings"]}
    assert [p["status"] for p in by_pair[("Adam", "DQN")]["per_budget"]] == ["not rerun", "not rerun"]
    for o in pa["orderings"]:
        for p in o["per_budget"]:
            rerun_o = next((r for r in doc["orderings"] if r["budget"] == p["budget"]
                            and {r["a"], r["b"]} == {o["rerun_better"], o["rerun_worse"]}), None)
            assert (rerun_o is None) == (p["status"] == "not rerun")
            if rerun_o is not None:
                assert p["decision"] == rerun_o["decision"]
    assert [(r["published_budget"], r["rerun_budget"]) for r in pa["rank_agreement"]] == [
        (10, 1000), (10, 2000), (20, 1000), (20, 2000)]
    assert all(r["published_ranking"] == ["QR", "Double", "DQN"] for r in pa["rank_agreement"])
    assert "Implementations differ" in pa["caveat"] and "BOTH sides" in pa["method"]
    assert "the tiny authors' code" in pa["caveat"] and "another suite (gymnasium)" in pa["caveat"]
    assert "published vs rerun (tiny-pub -> gymnasium)" in result.output
    assert pa["published"]["suite"] is None and pa["suite_change"]["differs"] is None  # the fixture names none

    # Same seed, same numbers; --published given explicitly gives the same join.
    again = _cli(["audit", str(store), "--published", str(path), "--data", str(tmp_path / "data"), "--out",
                  str(tmp_path / "b"), *fast], tmp_path)
    assert again.exit_code == 0, again.output
    assert json.loads((tmp_path / "b" / "audit.json").read_text())["published_agreement"] == pa

    result = _cli(["report", str(tmp_path / "a" / "audit.json"), "-o", str(tmp_path / "r"), "--format", "md,html,tex,json"],
                  tmp_path)
    assert result.exit_code == 0, result.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## 10. Published vs rerun" in md and "Implementations differ" in md
    verdict = md.split("## 2.")[0]
    assert "Published vs rerun (tiny-pub (" in verdict and "of 6 decided published orderings" in verdict
    assert "only orderings are compared, not scores" in verdict
    assert "| QR > DQN | 10, 20 | QR-DQN vs DQN |" in md and "Not rerun (no runnable counterpart): Adam." in md
    # one word for "no decision after error control" in every table, as in the verdict and audit.json
    assert "| Rerun budget | Hold | Reversed | Inconclusive | Not rerun |" in md and "ndecided" not in md.split("## 10.")[1]
    html = (tmp_path / "r" / "index.html").read_text()
    assert '<section id="published-vs-rerun">' in html and 'href="#published-vs-rerun"' in html
    tex = (tmp_path / "r" / "tables.tex").read_text()
    assert "\\label{tab:rlaudit-rank-agreement}" in tex and "QR \\textgreater{} DQN & 10, 20 & QR-DQN vs DQN" in tex
    assert tex.count("\\begin{table}") == tex.count("\\end{table}")
    assert json.loads((tmp_path / "r" / "audit.json").read_text())["published_agreement"] == pa


def test_a_rerun_on_another_suite_says_a_reversal_can_come_from_the_suite():
    from rlaudit.audit.joined import suite_change
    from rlaudit.report.agreement import agreement_findings, build_agreement

    assert suite_change("atari", "minatar")["differs"] is True
    assert suite_change("minatar", "MinAtar")["differs"] is False
    assert suite_change(None, "minatar")["differs"] is None
    doc = {"published": {"name": "dopamine", "protocol": "d.toml", "suite": "atari"},
           "rerun": {"suite": "minatar", "budgets": [100_000]}, "metric": "iqm", "caveat": "c", "method": "m",
           "orderings": [{"better": "C51", "worse": "DQN", "published_budgets": [1],
                          "per_budget": [{"budget": 100_000, "status": "reversed"}]}],
           "summary": [{"budget": 100_000, "holds": 0, "reversed": 1, "inconclusive": 0, "not rerun": 0}],
           "suite_change": suite_change("atari", "minatar")}
    texts = [f.text for f in agreement_findings(build_agreement(doc))]
    assert texts[0].startswith("Published vs rerun (dopamine (d.toml), atari -> rerun on minatar): of 1 decided "
                               "published orderings, at rerun budget 100k: 0 hold, 1 reversed (differ from the "
                               "published suite's ordering), 0 inconclusive.")
    assert texts[1] == ("The published runs are on atari and the rerun on minatar: an ordering that differs from the "
                        "published one can come from the change of suite as well as of budget. Orderings reversed "
                        "between the rerun's own budgets are on one suite (minatar) and are reported separately.")
    doc["suite_change"] = suite_change("minatar", "minatar")
    assert len(agreement_findings(build_agreement(doc))) == 1  # same suite: nothing to add


def test_inversions_of_a_joined_rerun_are_named_between_budgets_on_its_suite():
    from types import SimpleNamespace

    from rlaudit.report.model import Report

    fake = SimpleNamespace(audit={"published_agreement": {"x": 1},
                                  "source": {"suites": {"MinAtar/Breakout-v1": "minatar",
                                                        "MinAtar/Freeway-v1": "minatar"}}})
    assert Report.rerun_suite.fget(fake) == "minatar"
    fake.audit["source"]["suites"]["CartPole-v1"] = "gymnasium"
    assert Report.rerun_suite.fget(fake) is None  # two suites: no one suite to name
    del fake.audit["published_agreement"]
    assert Report.rerun_suite.fget(fake) is None
