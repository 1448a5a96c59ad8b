"""Protocol files: loading, every bad input (one line, exit 2, nothing written), planning."""

from __future__ import annotations

import os
import sqlite3
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.protocol import load_protocol, parse_protocol, plan

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Runs record measured steps/s in the user's cache; tests keep theirs apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

GOOD = """
schema_version = 1
name = "tiny"
title = "Tiny"
seeds = 2
[regimes]
low = 1_000
mid = 2_000
high = 4_000
[[tasks]]
id = "CartPole-v1"
[[tasks]]
id = "Acrobot-v1"
[[algorithms]]
name = "PPO"
hyperparams = { n_steps = 64 }
[[algorithms]]
name = "DQN"
[evaluation]
n_eval_episodes = 3
[[claims]]
better = "PPO"
worse = "DQN"
"""


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def validate(tmp_path: Path, text: str, *extra: str):
    path = write(tmp_path, text)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = CliRunner().invoke(main, ["validate", str(path), "--store", str(tmp_path / "s.sqlite"), *extra])
    after = sorted(p.name for p in tmp_path.iterdir())
    return result, before, after


def test_good_protocol_loads_into_frozen_objects(tmp_path):
    p = load_protocol(write(tmp_path, GOOD))
    assert p.name == "tiny" and p.seeds == (0, 1)
    assert [(r.name, r.budget, r.regime_kind) for r in p.regimes] == [("low", 1000, "nested"), ("mid", 2000, "nested"),
                                                              ("high", 4000, "nested")]
    assert p.labels == ["PPO", "DQN"]
    assert p.algorithms[0].hyperparams == {"n_steps": 64}
    assert p.claims[0]["where"].endswith("claims[0]")
    with pytest.raises(AttributeError):
        p.name = "other"  # frozen


def test_hash_ignores_comments_titles_and_claims_but_not_runs(tmp_path):
    base = parse_protocol(GOOD, "a.toml")
    cosmetic = parse_protocol("# a comment\n" + GOOD.replace('title = "Tiny"', 'title = "Other"')
                              .replace('worse = "DQN"', 'worse = "DQN"\ntext = "PPO beats DQN"'), "b.toml")
    assert cosmetic.hash == base.hash
    assert parse_protocol(GOOD.replace("seeds = 2", "seeds = 3"), "c.toml").hash != base.hash
    assert parse_protocol(GOOD.replace("n_steps = 64", "n_steps = 128"), "d.toml").hash != base.hash


def test_plan_nested_is_one_run_per_task_algo_seed(tmp_path):
    pl = plan(parse_protocol(GOOD, "p.toml"))
    assert len(pl.runs) == 2 * 2 * 2
    r = pl.runs[0]
    assert r.run_id == "CartPole-v1__PPO__0__nested"
    assert r.budgets == (1000, 2000, 4000) and r.total_steps == 4000 and r.regime_kind == "nested"
    assert r.eval.eval_seed == 10_000 and pl.runs[1].eval.eval_seed == 10_001
    assert pl.total_env_steps == 8 * 4000  # nested cost is the largest budget, not the sum
    assert [lb.to_dict() for lb in pl.labels][0] == {"budget": 1000, "regime": "low", "regime_kind": "nested"}


def test_plan_separate_regime_from_overrides(tmp_path):
    text = GOOD.replace("[[algorithms]]\nname = \"DQN\"", "[[algorithms]]\nname = \"DQN\"\n"
                        "[algorithms.regimes.low]\nhyperparams = { learning_starts = 100 }")
    text = text.replace('[evaluation]', '[evaluation]\neval_every = 500')
    pl = plan(parse_protocol(text, "p.toml"))
    p = pl.protocol
    assert [(r.name, r.regime_kind) for r in p.regimes] == [("low", "separate"), ("mid", "nested"), ("high", "nested")]
    ids = [r.run_id for r in pl.runs]
    assert "CartPole-v1__DQN__1__low" in ids and "CartPole-v1__PPO__1__low" in ids  # every algorithm, same regime
    low_dqn = next(r for r in pl.runs if r.run_id == "CartPole-v1__DQN__1__low")
    assert low_dqn.budgets == (1000,) and low_dqn.regime_kind == "separate"
    assert low_dqn.algorithm.hyperparams_dict == {"learning_starts": 100}
    nested_dqn = next(r for r in pl.runs if r.run_id == "CartPole-v1__DQN__1__nested")
    assert nested_dqn.budgets == (2000, 4000) and nested_dqn.algorithm.hyperparams_dict == {}
    assert nested_dqn.eval_points() == (500, 1000, 1500, 2000, 2500, 3000, 3500, 4000)
    assert pl.total_env_steps == 2 * 2 * 2 * (4000 + 1000)


def test_explicit_separate_regime_table():
    text = GOOD.replace("low = 1_000", 'low = { budget = 1_000, mode = "separate" }')
    p = parse_protocol(text, "p.toml")
    assert [(r.name, r.regime_kind) for r in p.regimes][0] == ("low", "separate")


def test_validate_prints_plan(tmp_path):
    result, before, after = validate(tmp_path, GOOD)
    assert result.exit_code == 0, result.output
    assert "plan: 8 runs (8 nested, 0 separate), 32,000 env steps in total" in result.output
    assert "estimate: about" in result.output and "on backend sb3" in result.output
    # the plan's cost on the other backend, or why it cannot run it (PPO has no jax backend, and Acrobot-v1 no JAX
    # environment; or the extra is not installed)
    other = next(line for line in result.output.splitlines() if line.startswith("  on backend jax: "))
    assert other.startswith("  on backend jax: cannot run this plan (") and other.endswith(")")
    assert before == after  # validate writes nothing


def test_quickstart_protocol_is_valid():
    result = CliRunner().invoke(main, ["validate", str(REPO / "protocols" / "quickstart.toml"), "--store",
                                       "/tmp/rlaudit-test-nonexistent/store.sqlite"])
    assert result.exit_code == 0, result.output
    assert "plan:" in result.output


RANDOM_POLICY = """
[audit.random_policy]
source = "measured"
scores = { "CartPole-v1" = 22.4, "Acrobot-v1" = -499.5 }
"""

BAD = [
    ("toml syntax", GOOD.replace("seeds = 2", "seeds = = 2"), "TOML syntax error", "(at line 5, column 9)"),
    ("unknown top key", GOOD.replace("seeds = 2", "seeds = 2\nalgorithmz = 1"), "unknown top-level key 'algorithmz'",
     "did you mean 'algorithms'"),
    ("unknown eval key", GOOD.replace("n_eval_episodes = 3", "n_eval_episode = 3"), "evaluation",
     "did you mean 'n_eval_episodes'"),
    ("unknown algorithm", GOOD.replace('name = "DQN"', 'name = "DQM"\nlabel = "DQN"'), "algorithms[1].name", "'DQN'"),
    ("unknown env", GOOD.replace('id = "Acrobot-v1"', 'id = "Acrobat-v1"'), "tasks[1].id", "'Acrobot-v1'"),
    ("unknown suite", GOOD.replace('id = "Acrobot-v1"', 'id = "Acrobot-v1"\nsuite = "atary"'), "tasks[1].suite",
     "'atari'"),
    ("bad hyperparameter", GOOD.replace("n_steps = 64", "n_stepz = 64"), "algorithms[0].hyperparams", "n_stepz"),
    ("continuous algo on discrete env", GOOD.replace('name = "DQN"', 'name = "SAC"\nlabel = "DQN"'), "algorithms[1]", "Discrete"),
    ("discrete algo on continuous env", GOOD.replace('id = "Acrobot-v1"', 'id = "Pendulum-v1"'), "algorithms[1]",
     "Box"),
    ("zero budget", GOOD.replace("low = 1_000", "low = 0"), "regimes.low", "positive"),
    ("negative budget", GOOD.replace("low = 1_000", "low = -5"), "regimes.low", "positive"),
    ("float budget", GOOD.replace("low = 1_000", "low = 1e3"), "regimes.low", "integer"),
    ("non-increasing budgets", GOOD.replace("mid = 2_000", "mid = 500"), "regimes.mid", "not larger than"),
    ("duplicate budget", GOOD.replace("mid = 2_000", "mid = 1_000"), "regimes.mid", "already regime 'low'"),
    ("zero seeds", GOOD.replace("seeds = 2", "seeds = 0"), "seeds", "at least one seed"),
    ("empty seed list", GOOD.replace("seeds = 2", "seeds = []"), "seeds", "empty"),
    ("claim unknown algo", GOOD.replace('worse = "DQN"', 'worse = "DQNN"'), "claims[0].worse", "'DQN'"),
    ("claim unknown budget", GOOD.replace('worse = "DQN"', 'worse = "DQN"\nbudgets = [3_000]'), "claims[0].budgets",
     "3000"),
    ("override unknown regime", GOOD.replace('name = "DQN"', 'name = "DQN"\n[algorithms.regimes.lo]\nhyperparams = {}'),
     "algorithms[1].regimes.lo", "'low'"),
    ("override of nested mode", GOOD.replace("low = 1_000", 'low = { budget = 1_000, mode = "nested" }')
     .replace('name = "DQN"', 'name = "DQN"\n[algorithms.regimes.low]\nhyperparams = { learning_starts = 10 }'),
     "regimes.low.mode", "separate"),
    ("duplicate label", GOOD.replace('name = "DQN"', 'name = "PPO"'), "algorithms", "label 'PPO' is used twice"),
    ("schema version", GOOD.replace("schema_version = 1", "schema_version = 2"), "schema_version", "not supported"),
    ("missing references", GOOD + '\n[normalization]\nmethod = "minmax"\nreferences = { "CartPole-v1" = [0, 500] }\n',
     "normalization.references", "Acrobot-v1"),
    ("random policy of an unknown task", GOOD + RANDOM_POLICY.replace('"Acrobot-v1"', '"Acrobot-v2"'),
     "audit.random_policy.scores", "'Acrobot-v2' is not a task of this protocol (did you mean 'Acrobot-v1'?)"),
    ("random policy score not a number", GOOD + RANDOM_POLICY.replace("-499.5", '"low"'),
     "audit.random_policy.scores.Acrobot-v1", "must be a finite number"),
    ("random policy without a source", GOOD + RANDOM_POLICY.replace('source = "measured"', ""),
     "audit.random_policy.source", "say where the random policy's scores come from"),
    ("random policy given twice", GOOD + '\n[normalization]\nmethod = "minmax"\nlow = "random"\nreferences = { '
     '"CartPole-v1" = [22, 500], "Acrobot-v1" = [-500, 0] }\n' + RANDOM_POLICY, "audit.random_policy",
     "already the random policy's scores; give them once"),
]


@pytest.mark.parametrize("label,text,where,what", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, label, text, where, what):
    result, before, after = validate(tmp_path, text)
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"error: {tmp_path / 'p.toml'}"), err
    assert where in err and what in err, err
    assert before == after


def test_unwritable_store_path(tmp_path):
    write(tmp_path, GOOD)
    (tmp_path / "afile").write_text("x")
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "p.toml"), "--store",
                                       str(tmp_path / "afile" / "sub" / "s.sqlite")])
    assert result.exit_code == 2
    assert "afile is not a writable directory" in result.stderr and "\n" not in result.stderr.strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "p.toml"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only directories")
def test_read_only_store_directory(tmp_path):
    write(tmp_path, GOOD)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        result = CliRunner().invoke(main, ["validate", str(tmp_path / "p.toml"), "--store", str(ro / "s.sqlite")])
        assert result.exit_code == 2 and "not a writable directory" in result.stderr
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_store_of_another_protocol_and_corrupted_store(tmp_path):
    from rlaudit.store import Store

    other = parse_protocol(GOOD.replace("seeds = 2", "seeds = 3").replace('name = "tiny"', 'name = "other"'),
                           "other.toml")
    store = Store.open_for_run(tmp_path / "s.sqlite", other)
    store.sync_plan(plan(other))
    store.close()
    result, before, after = validate(tmp_path, GOOD)
    assert result.exit_code == 2
    assert "holds runs of another protocol" in result.stderr and "--new-store" in result.stderr
    assert before == after

    (tmp_path / "s.sqlite").write_bytes(b"this is not sqlite" * 100)
    result, _, _ = validate(tmp_path, GOOD)
    assert result.exit_code == 2
    assert "not a readable rlaudit store" in result.stderr and "\n" not in result.stderr.strip()

    con = sqlite3.connect(tmp_path / "x.sqlite")
    con.execute("CREATE TABLE t(a)")
    con.commit()
    con.close()
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "p.toml"), "--store", str(tmp_path / "x.sqlite")])
    assert result.exit_code == 2 and "not an rlaudit store" in result.stderr


def test_published_protocol_rejects_run_sections(tmp_path):
    text = 'schema_version = 1\nname = "pub"\nseeds = 3\n[data]\nformat = "tidy"\n'
    with pytest.raises(InputError, match="published protocol"):
        parse_protocol(text, "pub.toml")


def test_only_filter(tmp_path):
    from rlaudit.protocol import parse_only

    pl = plan(parse_protocol(GOOD, "p.toml"))
    only = parse_only("algo=PPO,task=Acrobot-v1", pl)
    assert [r.run_id for r in pl.select(only)] == ["Acrobot-v1__PPO__0__nested", "Acrobot-v1__PPO__1__nested"]
    with pytest.raises(InputError, match="did you mean 'PPO'"):
        parse_only("algo=PPOO", pl)
    with pytest.raises(InputError, match="unknown key 'algos'"):
        parse_only("algos=PPO", pl)


def test_time_estimate_uses_rates_measured_here(tmp_path):
    import json

    from rlaudit.run.driver import REFERENCE_STEPS_PER_S, estimate, rate_key, throughput_cache

    pl = plan(parse_protocol(GOOD, "p.toml"))  # 4 PPO + 4 DQN runs of 4000 steps
    # ... each evaluated at 3 budgets x 3 episodes of at most 500 steps (CartPole-v1 and Acrobot-v1's limit)
    steps = 4000 + 3 * 3 * 500
    est = estimate(pl.runs, workers=2)
    assert est.seconds == pytest.approx(4 * steps / REFERENCE_STEPS_PER_S["PPO"] / 2
                                        + 4 * steps / REFERENCE_STEPS_PER_S["DQN"] / 2)
    assert est.cpu_seconds == pytest.approx(2 * est.seconds)
    assert est.source == "reference rates, not measured on this machine"
    ppo = next(r for r in pl.runs if r.algorithm.name == "PPO")
    dqn = next(r for r in pl.runs if r.algorithm.name == "DQN")
    throughput_cache().parent.mkdir(parents=True)
    throughput_cache().write_text(json.dumps({rate_key(ppo): 1000.0, rate_key(dqn): 500.0}))
    est = estimate(pl.runs, workers=2)
    assert est.seconds == pytest.approx((4 * steps / 1000 + 4 * steps / 500) / 2)
    assert est.source == "measured on this machine"
    assert estimate(pl.runs[:1], workers=2).seconds == pytest.approx(steps / 1000)  # one run cannot be split
    # the same algorithm with other settings trains at another rate: the measured one is not used for it
    other = plan(parse_protocol(GOOD.replace("n_steps = 64", "n_steps = 128"), "p.toml"))
    assert rate_key(other.runs[0]) != rate_key(ppo) and rate_key(other.runs[-1]) == rate_key(dqn)
    assert estimate(other.runs, workers=2).source == ("measured on this machine for DQN/gymnasium; "
                                                      "reference rates for PPO/gymnasium")


def test_runs_start_longest_first_by_their_estimated_time(tmp_path):
    """The driver hands the executor its runs longest first by the estimate's prices, not by env steps: runs of a
    slow algorithm start before faster ones with as many steps, so that no worker trains one alone at the end."""
    import io
    import json

    from rich.console import Console

    from rlaudit.run.driver import longest_first, rate_key, run_plan, throughput_cache

    pl = plan(parse_protocol(GOOD, "p.toml"))  # PPO before DQN in the plan; all 4,000 steps
    ppo = next(r for r in pl.runs if r.algorithm.name == "PPO")
    dqn = next(r for r in pl.runs if r.algorithm.name == "DQN")
    # reference rates: PPO 2,300 steps/s, DQN 2,900: PPO's runs are longer and keep the plan's order
    assert [r.algorithm.name for r in longest_first(pl.runs)] == ["PPO"] * 4 + ["DQN"] * 4
    throughput_cache().parent.mkdir(parents=True)
    throughput_cache().write_text(json.dumps({rate_key(ppo): 1000.0, rate_key(dqn): 100.0}))
    ordered = longest_first(pl.runs)
    assert [r.algorithm.name for r in ordered] == ["DQN"] * 4 + ["PPO"] * 4
    assert [r.run_id for r in ordered if r.algorithm.name == "DQN"] == [r.run_id for r in pl.runs
                                                                        if r.algorithm.name == "DQN"]  # ties: plan order
    last_ppo = [r for r in pl.runs if r.algorithm.name == "PPO"][-1]  # resumes from a checkpoint: starts first
    assert longest_first(pl.runs, resumed={last_ppo.run_id}) == [last_ppo] + [r for r in ordered if r != last_ppo]

    class Recorder:
        name = "recorder"
        workers = 2

        def __init__(self):
            self.order = []

        def run(self, specs, sink):
            self.order = [s.run_id for s in specs]

    rec = Recorder()
    run_plan(pl, tmp_path / "s.sqlite", rec, console=Console(file=io.StringIO()))
    assert rec.order == [r.run_id for r in ordered]


def test_the_eta_weighs_each_runs_steps_by_its_estimated_cost(tmp_path):
    """Runs of one sweep cost per env step up to ten times one another (IQN and DQN at the flagship's settings):
    the ETA weighs the steps left by the estimate's price of each run, so the slow runs that train first do not
    set the speed of the cheap ones after them (the flagship's seed 1 said "ETA 21 h" at its start, where the
    estimate said 14 h), nor the reverse. The driver gets those weights from the prices that order the runs."""
    import io
    import re

    from rich.console import Console

    from rlaudit.run.driver import Driver, RecordedRate, Summary, run_plan, step_costs

    pl = plan(parse_protocol(GOOD.replace("high = 4_000", "high = 1_000_000"), "p.toml"))
    ppo = next(r for r in pl.runs if r.algorithm.name == "PPO")
    dqn = next(r for r in pl.runs if r.algorithm.name == "DQN")
    rates = {ppo.cost_key(): RecordedRate(100.0, 3, ("a.sqlite",)),
             dqn.cost_key(): RecordedRate(1000.0, 3, ("a.sqlite",))}
    costs = step_costs([ppo, dqn], rates)
    assert costs[ppo.run_id] == pytest.approx(10 * costs[dqn.run_id])

    class Store:
        def started(self, *a):
            pass

    def eta(step_cost):
        d = Driver(Store(), [ppo, dqn], Console(file=io.StringIO()), Summary(), step_cost=step_cost)
        d.started(ppo.run_id, "w1")
        d.t0 -= 100.0  # PPO trained 10k steps in 100 s; DQN's 1M steps wait, 10 times cheaper each
        d.progress(ppo.run_id, 10_000)
        return d._eta()

    # 990k PPO steps at 100/s and 1M DQN steps at 1,000/s: 9,900 + 1,000 s
    assert re.fullmatch(r"; ETA 3 h 0[01] min", eta(costs)), eta(costs)
    assert re.fullmatch(r"; ETA 5 h 3[01] min", eta(None)), eta(None)  # steps alike: 1.99M at 100/s

    # on a terminal the overall bar (and rich's ETA of it) counts the same work; its text, env steps
    d = Driver(Store(), [ppo, dqn], Console(file=io.StringIO(), force_terminal=True), Summary(), step_cost=costs)
    with d:
        d.started(ppo.run_id, "w1")
        d.progress(ppo.run_id, 10_000)
        overall = d._progress.tasks[d._overall]
        assert overall.total == pytest.approx(1_000_000 * 11 * costs[dqn.run_id])
        assert overall.completed == pytest.approx(10_000 * 10 * costs[dqn.run_id])
        assert overall.fields["info"] == "10,000 env steps"

    class Recorder:
        name, workers = "recorder", 2

        def run(self, specs, sink):
            self.cost = dict(sink.cost)

    rec = Recorder()
    run_plan(pl, tmp_path / "s.sqlite", rec, console=Console(file=io.StringIO()), recorded=rates)
    assert rec.cost == pytest.approx(step_costs(pl.runs, rates))
    assert rec.cost[ppo.run_id] == pytest.approx(10 * rec.cost[dqn.run_id])


def test_time_estimate_prices_runs_from_cpu_time_recorded_with_the_same_settings(tmp_path):
    """Runs a store recorded (schema 3: CPU seconds) price the runs of any plan with the same algorithm settings,
    backend and suite; other settings, short runs, stores from before schema 3 and unreadable files price nothing."""
    from rlaudit.run.driver import estimate, recorded_rates
    from rlaudit.run.spec import RunResult
    from rlaudit.store import Store

    recorded_protocol = parse_protocol(GOOD.replace("low = 1_000", "low = 10_000").replace("mid = 2_000", "mid = 20_000")
                                       .replace("high = 4_000", "high = 40_000"), "p.toml")
    rec = plan(recorded_protocol)
    path = tmp_path / "recorded.sqlite"
    store = Store.open_for_run(path, recorded_protocol)
    store.sync_plan(rec)
    ppo = [r for r in rec.runs if r.algorithm.name == "PPO"]
    for run, cpu in zip(ppo[:3], (10.0, 20.0, 40.0)):  # 4,000, 2,000 and 1,000 steps per CPU-second: median 2,000
        store.started(run.run_id, "w1")
        store.finished(RunResult(run.run_id, 40_000, cpu * 2, cpu))
    short = next(r for r in rec.runs if r.algorithm.name == "DQN")
    store.started(short.run_id, "w1")
    store.finished(RunResult(short.run_id, 4_000, 1.0, 1.0))  # below MIN_STEPS_MEASURED: does not count
    store.close()
    (tmp_path / "junk.sqlite").write_text("not a store")

    rates = recorded_rates([path, tmp_path / "junk.sqlite", tmp_path / "missing.sqlite"])
    assert len(rates) == 1
    (rate,) = rates.values()
    assert rate.steps_per_cpu_s == pytest.approx(2000.0) and rate.n_runs == 3 and rate.stores == (str(path),)

    pl = plan(parse_protocol(GOOD, "p.toml"))  # the same PPO settings at 4,000 steps; DQN not recorded
    est = estimate(pl.runs, workers=2, recorded=rates)
    dqn_steps = 4000 + 3 * 3 * 500
    from rlaudit.run.driver import REFERENCE_STEPS_PER_S

    assert est.cpu_seconds == pytest.approx(4 * 4000 / 2000 + 4 * dqn_steps / REFERENCE_STEPS_PER_S["DQN"])
    assert est.seconds == pytest.approx(est.cpu_seconds / 2)
    assert est.source == (f"CPU time recorded with the same settings in {path} for PPO/gymnasium (3 runs, 2,000 "
                          "steps/CPU-s); reference rates for DQN/gymnasium")
    ppo_only = [r for r in pl.runs if r.algorithm.name == "PPO"]
    assert estimate(ppo_only, 1, rates).source == (f"CPU time recorded with the same settings in {path}: "
                                                   "PPO/gymnasium (3 runs, 2,000 steps/CPU-s)")
    other = plan(parse_protocol(GOOD.replace("n_steps = 64", "n_steps = 128"), "p.toml"))
    assert "recorded" not in estimate(other.runs, 2, rates).source  # other settings: not priced by these runs

    con = sqlite3.connect(path)  # a version-2 store has no CPU times
    con.executescript("ALTER TABLE runs DROP COLUMN cpu_time; ALTER TABLE runs DROP COLUMN machine; "
                      "UPDATE meta SET value='2' WHERE key='schema_version';")
    con.commit()
    con.close()
    assert recorded_rates([path]) == {}


def test_reference_rates_name_registered_algorithms_and_price_the_dqn_family_on_minatar_as_measured():
    """Every reference rate is keyed by a registered algorithm's name (a label such as "QR-DQN" never matches a
    run), and a MinAtar plan at the published settings is priced at the rates measured there (IQN: 36 steps per
    CPU-second, not the CartPole default x suite factor), on the JAX backend with that algorithm's speedup."""
    import dataclasses

    from rlaudit.algorithms.registry import list_specs
    from rlaudit.protocol import load_protocol
    from rlaudit.run.backends.jax import JaxBackend
    from rlaudit.run.driver import REFERENCE_STEPS_PER_S, SUITE_STEPS_PER_CPU_S, eval_steps, estimate, rate_of

    names = {s.name for s in list_specs()}
    assert set(REFERENCE_STEPS_PER_S) <= names and {n for n, _ in SUITE_STEPS_PER_CPU_S} <= names
    assert {n for n, _ in JaxBackend.reference_speedups} <= names
    iqn = next(r for r in plan(load_protocol(REPO / "protocols/fidelity/minatar-100k.toml")).runs
               if r.algorithm.name == "IQN")
    assert rate_of(iqn, {}) == 36.0
    sb3 = estimate([iqn], workers=1)
    assert sb3.cpu_seconds == pytest.approx((iqn.total_steps + eval_steps(iqn)) / 36.0)
    on_jax = dataclasses.replace(iqn, algorithm=dataclasses.replace(iqn.algorithm, backend="jax"))
    assert estimate([on_jax], workers=1).cpu_seconds == pytest.approx(sb3.cpu_seconds / 1.34)
    qr = plan(parse_protocol(GOOD.replace('name = "DQN"', 'name = "QRDQN"\nlabel = "DQN"'), "p.toml")).runs[-1]
    assert qr.algorithm.name == "QRDQN" and rate_of(qr, {}) == REFERENCE_STEPS_PER_S["QRDQN"]


def test_a_plan_is_priced_from_its_own_stores_runs_where_there_are_some(tmp_path, monkeypatch):
    """A sweep's own finished runs price its remaining ones (other stores' runs with the same settings cost the
    flagship twice as much per step: recorded with four runs per core, or with older code); without own runs,
    every store's count. A store named by an absolute path is read once, not also as a recorded sweep."""
    from rlaudit.run.driver import cost_sources, estimate, recorded_rates
    from rlaudit.run.machine import machine_fingerprint
    from rlaudit.run.spec import RunResult
    from rlaudit.store import Store

    protocol = parse_protocol(GOOD.replace("high = 4_000", "high = 40_000"), "p.toml")
    pl = plan(protocol)
    ppo = [r for r in pl.runs if r.algorithm.name == "PPO"]
    monkeypatch.chdir(tmp_path)

    def record(path, runs, cpu_seconds):
        path.parent.mkdir(parents=True, exist_ok=True)
        store = Store.open_for_run(path, protocol, machine=machine_fingerprint())
        store.sync_plan(pl)
        for run in runs:
            store.started(run.run_id, "w1")
            store.finished(RunResult(run.run_id, 40_000, 2 * cpu_seconds, cpu_seconds))
        store.close()

    other, own = Path("sweeps/other/store.sqlite"), Path("sweeps/own/store.sqlite")
    record(other, ppo[:3], 40.0)  # 1,000 steps per CPU-second
    record(own, ppo[3:], 10.0)  # 4,000
    assert cost_sources(own.resolve()) == [own.resolve(), other]  # once, as named first
    (rate,) = recorded_rates(cost_sources(own.resolve()), own=own.resolve()).values()
    assert (rate.steps_per_cpu_s, rate.n_runs, rate.stores) == (4000.0, 1, (str(own.resolve()),))
    source = estimate(ppo[:3], 1, {ppo[0].cost_key(): rate}).source
    assert source == (f"CPU time recorded with the same settings in {own.resolve()}: PPO/gymnasium (1 run on this "
                      "CPU, 4,000 steps/CPU-s)")
    (rate,) = recorded_rates(cost_sources(own)).values()  # not said to be its own: all four, median 1,000
    assert (rate.steps_per_cpu_s, rate.n_runs) == (1000.0, 4)
    (rate,) = recorded_rates([other], own=Path("sweeps/new/store.sqlite")).values()  # a new store: the others'
    assert (rate.steps_per_cpu_s, rate.n_runs) == (1000.0, 3)


def test_recorded_rates_prefer_runs_recorded_on_this_cpu(tmp_path):
    """Runs a driver recorded on this machine's CPU (model and flags) price a plan alone where there are some (a
    store resumed here after another machine: the same model name without this one's vector units); runs from
    other CPUs only are used but said to be."""
    from rlaudit.run.driver import estimate, recorded_rates
    from rlaudit.run.machine import cpu_identity, machine_fingerprint
    from rlaudit.run.spec import RunResult
    from rlaudit.store import Store

    protocol = parse_protocol(GOOD.replace("high = 4_000", "high = 40_000"), "p.toml")
    pl = plan(protocol)
    ppo = [r for r in pl.runs if r.algorithm.name == "PPO"]
    path = tmp_path / "s.sqlite"
    store = Store.open_for_run(path, protocol, machine={**machine_fingerprint(), "cpu_flags": "elsewhere"})
    store.sync_plan(pl)
    for run in ppo[:2]:  # 1,000 steps per CPU-second elsewhere
        store.started(run.run_id, "w1")
        store.finished(RunResult(run.run_id, 40_000, 80.0, 40.0))
    store.close()
    (rate,) = recorded_rates([path]).values()
    assert (rate.steps_per_cpu_s, rate.n_runs, rate.cpu) == (1000.0, 2, "other CPUs")
    source = estimate(ppo, 1, {ppo[0].cost_key(): rate}).source
    assert "PPO/gymnasium (2 runs on other CPUs, 1,000 steps/CPU-s)" in source

    store = Store.open_for_run(path, protocol, machine=machine_fingerprint())
    store.started(ppo[2].run_id, "w1")  # 4,000 here
    store.finished(RunResult(ppo[2].run_id, 40_000, 20.0, 10.0))
    store.close()
    (rate,) = recorded_rates([path]).values()
    assert (rate.steps_per_cpu_s, rate.n_runs, rate.cpu) == (4000.0, 1, "this CPU")
    assert cpu_identity() == cpu_identity(machine_fingerprint()) != cpu_identity({**machine_fingerprint(),
                                                                                  "cpu_flags": "elsewhere"})
