"""The fidelity harness (rlaudit fidelity): comparison statistics, the status record, the settings translation
for Dopamine, bad input, and the whole path end to end on CartPole (both sides, real code)."""

from __future__ import annotations

import textwrap
import json
import math
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.fidelity.compare import compare_task, overall_verdict, pooled_sd
from rlaudit.fidelity.dopamine_settings import dopamine_config
from rlaudit.fidelity.references import REFERENCES, get_reference
from rlaudit.fidelity.status import FidelityStatus, fidelity_warnings, load_status, record_status, status_text

REPO = Path(__file__).resolve().parents[1]
FIDELITY_PROTOCOL = REPO / "protocols" / "fidelity" / "minatar-100k.toml"
DOPAMINE_INSTALLED = Path(REFERENCES["dopamine"].python()).exists()


# --- the statistics -----------------------------------------------------------------------------------------------

def test_pooled_sd_hand_computed():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0, 8.0])
    # variances 1 and 20/3, dof 2 and 3: (2 * 1 + 3 * 20/3) / 5 = 22 / 5
    assert pooled_sd(x, y) == pytest.approx(math.sqrt(22 / 5), abs=1e-15)


def test_compare_task_equivalent_differs_and_undetermined():
    rng = np.random.default_rng(0)
    base = rng.normal(10.0, 1.0, 40)
    same = compare_task("T", base[:20], base[20:], alpha_task=0.025)
    assert same.verdict == "equivalent" and same.margin == pytest.approx(same.pooled_sd)
    assert same.shown_within < same.margin
    far = compare_task("T", base[:20], base[20:] + 5.0, alpha_task=0.025)
    assert far.verdict == "differs" and far.difference == pytest.approx(same.difference + 5.0)
    few = compare_task("T", base[:3], base[3:6], alpha_task=0.025)
    assert few.verdict == "undetermined"
    # the interval is seeded: same seed, same numbers
    assert compare_task("T", base[:5], base[5:10], alpha_task=0.025, seed=3).interval == \
        compare_task("T", base[:5], base[5:10], alpha_task=0.025, seed=3).interval


def test_constant_equal_samples_are_not_shown_equivalent():
    """Runs that all end in the same score on both sides (MinAtar Breakout's 3 at 100k) have no spread: TOST's p is 0
    at any n, which shows nothing about the implementations, so the verdict stays undetermined; constant samples
    that differ are a difference."""
    same = compare_task("T", [3.0, 3.0], [3.0, 3.0], alpha_task=0.025)
    assert same.pooled_sd == 0 and same.verdict == "undetermined"
    assert compare_task("T", [3.0] * 10, [3.0] * 10, alpha_task=0.025, margin=1.0).verdict == "undetermined"
    assert compare_task("T", [3.0] * 10, [2.0] * 10, alpha_task=0.025).verdict == "differs"


def test_compare_task_exact_numbers():
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]
    r = compare_task("T", x, y, alpha_task=0.05, margin=3.0)
    assert r.difference == 1.0 and r.mean_builtin == 2.5 and r.mean_reference == 3.5
    assert r.pooled_sd == pytest.approx(math.sqrt(5 / 3))
    # Welch: se = sqrt(2 * (5/3) / 4), df = 6; TOST p = P(T_6 > (3 - 1) / se)
    from scipy import stats

    se = math.sqrt(2 * (5 / 3) / 4)
    assert r.p_equivalent == pytest.approx(stats.t.sf(2 / se, 6))
    assert r.p_different == pytest.approx(2 * stats.t.sf(1 / se, 6))
    assert r.shown_within == pytest.approx(1 + stats.t.ppf(0.95, 6) * se)
    assert r.verdict == ("equivalent" if r.p_equivalent < 0.05 else "undetermined")


def test_overall_verdict():
    assert overall_verdict(["equivalent", "equivalent"]) == "equivalent"
    assert overall_verdict(["equivalent", "undetermined"]) == "undetermined"
    assert overall_verdict(["undetermined", "differs"]) == "differs"
    assert overall_verdict([]) == "undetermined"


# --- the status record -----------------------------------------------------------------------------------------

def _fidelity(verdict: str):
    from rlaudit.fidelity.compare import Fidelity

    t = compare_task("MinAtar/Breakout-v1", [1.0, 2.0, 3.0], [1.5, 2.5, 3.5], alpha_task=0.025)
    return Fidelity("C51", "C51", "dopamine", "dopamine-rl 4.1.2, jax 0.4", 100_000, 0.05, "+-1 pooled SD", (t,),
                    verdict)


def test_record_and_read_status(tmp_path):
    path = tmp_path / "status.toml"
    assert load_status(path) == {}
    record_status(_fidelity("differs"), "protocols/fidelity/minatar-100k.toml", path)
    record_status(_fidelity("undetermined").__class__(**{**_fidelity("equivalent").__dict__, "algorithm": "DQN"}),
                  "p.toml", path)
    statuses = load_status(path)
    assert statuses["C51"].verdict == "differs" and statuses["DQN"].verdict == "equivalent"
    assert status_text(statuses["C51"]) == "differs from dopamine at 100k steps (Breakout; 3 runs a side)"
    assert status_text(FidelityStatus("PPO", "not checked")) == "not checked"
    lines = fidelity_warnings(["DQN", "C51", "IQN", "C51"], path)
    assert lines == [
        "C51: differs from dopamine at 100k steps (Breakout; 3 runs a side) (dopamine-rl 4.1.2, jax 0.4); its "
        "scores may not be those of the published algorithm",
        "IQN: its fidelity to an independent implementation is not checked",
    ]
    assert path.read_text().startswith("# Fidelity status")


def test_a_verdict_checked_at_other_settings_says_so(tmp_path, monkeypatch):
    """The status is about the settings of the protocol it was checked with: a report whose runs use others
    (another network, loss, schedule) is told so, also for an 'equivalent' built-in."""
    (tmp_path / "fid.toml").write_text(textwrap.dedent("""
        schema_version = 1
        name = "fid"
        seeds = 2
        [regimes]
        r = 1_000
        [[tasks]]
        id = "CartPole-v1"
        [[algorithms]]
        name = "C51"
        hyperparams = { learning_rate = 1e-4, v_max = 100.0 }
        policy_kwargs = { net_arch = [] }
        """))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "status.toml"
    record_status(_fidelity("equivalent"), "fid.toml", path)
    same = {"C51": ({"learning_rate": 1e-4, "v_max": 100.0}, {"net_arch": []})}
    assert fidelity_warnings(["C51"], path, same) == []
    other = {"C51": ({"learning_rate": 1e-4, "loss": "mse"}, {"net_arch": [256, 256]})}
    assert fidelity_warnings(["C51"], path, other) == [
        "C51: equivalent to dopamine at 100k steps (Breakout; 3 runs a side); checked at other settings (fid.toml: "
        "policy_kwargs.net_arch [] there, [256, 256] here; loss unset there, \"mse\" here; v_max 100.0 there, unset "
        "here), not those of these runs"]
    record_status(_fidelity("differs"), "gone.toml", path)
    assert fidelity_warnings(["C51"], path, other)[0].endswith(
        "; checked at other settings (gone.toml: its protocol is not found here, so the settings are not "
        "compared), not those of these runs")
    (tmp_path / "no-c51.toml").write_text((tmp_path / "fid.toml").read_text().replace('name = "C51"', 'name = "DQN"')
                                          .replace("v_max = 100.0", "gamma = 0.9"))
    record_status(_fidelity("differs"), "no-c51.toml", path)
    assert fidelity_warnings(["C51"], path, other)[0].endswith(
        "; checked at other settings (no-c51.toml: its protocol here has no C51 entry, so the settings are not "
        "compared), not those of these runs")


def test_update_check_is_recorded_beside_the_seed_level_verdict(tmp_path):
    from rlaudit.fidelity.status import record_update

    path = tmp_path / "status.toml"
    record_update("C51", "the same update as dopamine-rl 4.1.2: gradient 1e-06 (x)", path)
    c51 = load_status(path)["C51"]
    assert c51.verdict == "not checked" and status_text(c51) == "scores not compared; same update step as dopamine"
    assert fidelity_warnings(["C51"], path) == [
        "C51: its scores are not compared with an independent implementation; update check: the same update as "
        "dopamine-rl 4.1.2: gradient 1e-06 (x)"]
    t = compare_task("MinAtar/Breakout-v1", [1.0, 2.0, 3.0], [1.5, 2.5, 3.5], alpha_task=0.025, margin_sd=1.0, seed=0)
    from rlaudit.fidelity.compare import Fidelity

    record_status(Fidelity("C51", "C51", "dopamine", "v", 100_000, 0.05, "rule", (t,), t.verdict), "p.toml", path)
    c51 = load_status(path)["C51"]  # the seed-level verdict joins the update check, which stays
    assert c51.checked and c51.update.startswith("the same update")
    assert status_text(c51).endswith("(Breakout; 3 runs a side); same update step as dopamine")
    record_update("C51", "DIFFERENT updates as dopamine-rl 4.1.2: gradient 0.5 (x)", path)
    assert load_status(path)["C51"].checked and "same update step" not in status_text(load_status(path)["C51"])


def test_update_check_record_names_every_task_and_agrees_only_when_all_do():
    from rlaudit.fidelity.update_check import UpdateCheck, record_text

    breakout = UpdateCheck("DopamineRainbow", "MinAtar/Breakout-v1", 3, 5.1e-5, (1.5e-4, 1.5e-4), 4.5e-7, 0.1)
    invaders = UpdateCheck("DopamineRainbow", "MinAtar/SpaceInvaders-v1", 3, 4.2e-5, (3e-4,), 4.4e-7, 0.1)
    assert record_text([breakout, invaders], "dopamine-rl 4.1.2", "p.toml", "2026-12-02") == (
        "the same update as dopamine-rl 4.1.2: MinAtar/Breakout-v1: gradient 5.1e-05 of the largest, parameters "
        "1.5e-04 learning rates after 3 Adam steps, priorities 4.5e-07; MinAtar/SpaceInvaders-v1: gradient 4.2e-05 "
        "of the largest, parameters 3.0e-04 learning rates after 3 Adam steps, priorities 4.4e-07 (p.toml, "
        "2026-12-02)")
    off = UpdateCheck("DQN", "MinAtar/SpaceInvaders-v1", 3, 0.3, (2.0,), None, 0.1)
    assert not off.agrees
    assert record_text([breakout, off], "v", "p.toml", "d").startswith("DIFFERENT updates as v: ")


def test_committed_status_file_parses_and_names_builtins():
    from rlaudit.algorithms import get_spec

    for name, s in load_status().items():
        get_spec(name)
        assert s.verdict in ("equivalent", "differs", "undetermined", "not checked")
        assert s.checked or s.update, name  # an entry holds a seed-level verdict, an update check, or both
        assert not s.checked or (s.reference in REFERENCES and s.budget > 0 and s.n_runs >= 2)


def test_algorithms_lists_fidelity_status():
    result = CliRunner().invoke(main, ["algorithms"])
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[0]
    assert "FIDELITY" in header
    ppo = next(line for line in result.output.splitlines() if line.startswith("PPO "))
    assert "not checked" in ppo
    show = CliRunner().invoke(main, ["algorithms", "show", "PPO"])
    assert "fidelity:      not checked" in show.output


# --- translating the settings for Dopamine -------------------------------------------------------------------------

def test_dopamine_config_of_the_published_protocol():
    import tomllib

    doc = tomllib.loads(FIDELITY_PROTOCOL.read_text())
    cfg = {a["name"]: dopamine_config(a["name"], a["hyperparams"], a["policy_kwargs"]) for a in doc["algorithms"]}
    assert cfg["DQN"]["agent"] == "JaxDQNAgent" and cfg["DQN"]["kwargs"]["loss_type"] == "mse"
    assert cfg["DQN"]["optimizer"] == {"learning_rate": 2.5e-4, "eps": 3.125e-4}
    assert cfg["C51"]["kwargs"]["replay_scheme"] == "uniform" and cfg["C51"]["kwargs"]["update_horizon"] == 1
    assert (cfg["C51"]["kwargs"]["vmin"], cfg["C51"]["kwargs"]["vmax"]) == (-100.0, 100.0)
    assert cfg["DopamineRainbow"]["kwargs"]["replay_scheme"] == "prioritized"
    assert cfg["DopamineRainbow"]["kwargs"]["update_horizon"] == 3
    assert cfg["QRDQN"]["kwargs"]["num_atoms"] == 51 and cfg["QRDQN"]["kwargs"]["update_horizon"] == 1
    assert cfg["IQN"]["network"]["quantile_embedding_dim"] == 64
    for c in cfg.values():
        assert c["network"] == {"torso": "minatar", "hidden": [], **({"quantile_embedding_dim": 64}
                                                                     if c["agent"].startswith("JaxImplicit") else {})}
        assert c["kwargs"]["min_replay_history"] == 1_000 and c["kwargs"]["epsilon_decay_period"] == 250_000
        assert c["replay"] == {"max_capacity": 100_000, "batch_size": 32}


PUBLISHED_DQN = {"exploration_schedule": "dopamine", "max_grad_norm": math.inf}


@pytest.mark.parametrize(("name", "hp", "pk", "message"), [
    ("DQN", {"exploration_schedule": "dopamine"}, {}, r"hyperparams.max_grad_norm = 10 cannot be run by Dopamine's "
                                                      r"JaxDQNAgent \(Dopamine does not clip gradients"),
    ("DQN", {"max_grad_norm": math.inf}, {}, r"hyperparams.exploration_schedule = 'linear' cannot be run"),
    ("DQN", {**PUBLISHED_DQN, "double": True}, {}, r"hyperparams.double = True cannot be run"),
    ("DopamineRainbow", PUBLISHED_DQN, {}, r"hyperparams.per_beta_anneal = True cannot be run .*write "
                                           r"per_beta_anneal = false"),
    ("DQN", {**PUBLISHED_DQN, "target_kl": 0.1}, {}, r"hyperparams.target_kl has no counterpart"),
    ("C51", {**PUBLISHED_DQN, "loss": "mse"}, {}, r"hyperparams.loss applies to DQN only"),
    ("DQN", PUBLISHED_DQN, {"features_extractor": "nature"}, r"the Dopamine reference has the 'minatar' network only"),
    ("DQN", PUBLISHED_DQN, {"activation_fn": "tanh"}, r"policy_kwargs.activation_fn has no counterpart"),
    ("PPO", {}, {}, r"Dopamine has no agent for 'PPO'"),
    ("IQN", PUBLISHED_DQN, {}, r"hyperparams.cos_start = 0 cannot be run by Dopamine's JaxImplicitQuantileAgent "
                               r"\(Dopamine's cosine features are cos\(pi i tau\) for i = 1 .. n_cos; write cos_start = 1"),
])
def test_dopamine_config_refuses_what_dopamine_cannot_run(name, hp, pk, message):
    with pytest.raises(InputError, match=message) as info:
        dopamine_config(name, hp, pk, where="p.toml: algorithms[DQN]")
    assert "\n" not in str(info.value)


# --- bad input on the command line ------------------------------------------------------------------------------

def _cli(args, env=None):
    return CliRunner().invoke(main, args, env=env)


def test_unknown_reference_is_one_line_exit_2():
    r = _cli(["fidelity", "DQN", "--against", "dopamin", "--protocol", str(FIDELITY_PROTOCOL)])
    assert r.exit_code == 2
    assert r.output == "error: --against: unknown reference 'dopamin' (did you mean 'dopamine'?); known: dopamine, self\n"


def test_reference_not_installed_names_the_fix(tmp_path):
    r = _cli(["fidelity", "C51", "--against", "dopamine", "--protocol", str(FIDELITY_PROTOCOL)],
             env={"RLAUDIT_DOPAMINE_PYTHON": str(tmp_path / "nowhere" / "python")})
    assert r.exit_code == 2
    line = r.output.strip()
    assert "\n" not in line
    assert line.startswith("error: --against dopamine: Dopamine's JAX agents (dopamine-rl) is not installed (no "
                           f"interpreter at RLAUDIT_DOPAMINE_PYTHON={tmp_path / 'nowhere' / 'python'}); install it "
                           "with `make reference-venv")
    assert "requirements/dopamine-reference.txt" in line


def test_reference_interpreter_without_dopamine(tmp_path):
    import sys

    r = _cli(["fidelity", "DQN", "--against", "dopamine", "--protocol", str(FIDELITY_PROTOCOL)],
             env={"RLAUDIT_DOPAMINE_PYTHON": sys.executable})  # rlaudit's own Python has no dopamine
    assert r.exit_code == 2
    assert "is not installed in RLAUDIT_DOPAMINE_PYTHON=" in r.output and "ModuleNotFoundError" in r.output
    assert r.output.count("\n") == 1


@pytest.mark.parametrize(("args", "message"), [
    (["fidelity", "PPO", "--against", "self"], "no algorithm 'PPO'"),
    (["fidelity", "DQN", "--against", "self", "--budget", "7"], "--budget: 7 is not a budget of"),
    (["fidelity", "DQN", "--against", "self", "--seeds", "x"], "--seeds: 'x' is not a seed"),
    (["fidelity", "DQN", "--against", "self", "--record"], "--record: the 'self' reference checks the harness"),
    (["fidelity", "DQN", "--against", "self", "--margin", "-1"], "must be positive"),
])
def test_bad_fidelity_options_are_one_line(args, message):
    r = _cli([*args, "--protocol", str(FIDELITY_PROTOCOL)])
    assert r.exit_code == 2, r.output
    assert message in r.output and r.output.count("\n") == 1


def test_dopamine_settings_checked_before_anything_runs(tmp_path):
    text = FIDELITY_PROTOCOL.read_text().replace("max_grad_norm = inf }", "max_grad_norm = 10.0 }", 1)
    p = tmp_path / "p.toml"
    p.write_text(text)
    r = _cli(["fidelity", "DQN", "--against", "dopamine", "--protocol", str(p), "--store", str(tmp_path / "s.sqlite")])
    assert r.exit_code == 2
    assert "hyperparams.max_grad_norm = 10.0 cannot be run by Dopamine's JaxDQNAgent" in r.output
    assert not (tmp_path / "s.sqlite").exists()


# --- end to end on CartPole ---------------------------------------------------------------------------------------

CARTPOLE = """
schema_version = 1
name = "fidelity-cartpole"
seeds = 3
[budget]
unit = "env_steps"
[regimes]
low = {steps}
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "DQN"
hyperparams = {{ learning_rate = 1e-3, adam_eps = 3.125e-4, buffer_size = 2_000, learning_starts = 200, batch_size = 32, train_freq = 4, target_update_interval = 200, exploration_schedule = "dopamine", epsilon_decay_steps = 800, exploration_final_eps = 0.02, max_grad_norm = inf, loss = "mse" }}
policy_kwargs = {{ net_arch = [32] }}
[[algorithms]]
name = "C51"
hyperparams = {{ learning_starts = 200, exploration_schedule = "dopamine", max_grad_norm = inf }}
[evaluation]
n_eval_episodes = 3
epsilon = 0.001
max_episode_steps = 200
"""


def _cartpole_protocol(tmp_path: Path, steps: int) -> Path:
    p = tmp_path / "cartpole.toml"
    p.write_text(CARTPOLE.format(steps=steps))
    return p


def _run_end_to_end(tmp_path: Path, against: str, steps: int):
    protocol = _cartpole_protocol(tmp_path, steps)
    store = tmp_path / "sweep" / "store.sqlite"
    args = ["fidelity", "DQN", "--against", against, "--protocol", str(protocol), "--store", str(store),
            "--workers", "2"]
    r = _cli(args)
    assert r.exit_code == 0, r.output
    ref_store = store.with_name(f"reference-{against}-DQN.sqlite")
    for s, planned in ((store, 6), (ref_store, 3)):  # the reference's store holds DQN's runs only
        with sqlite3.connect(s) as con:
            assert con.execute("SELECT COUNT(*) FROM runs WHERE status = 'done'").fetchone()[0] == 3
            assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == planned
    doc = json.loads(store.with_name(f"fidelity-DQN-{against}.json").read_text())
    assert doc["budget"] == steps and doc["reference"] == against
    (task,) = doc["tasks"]
    assert task["task"] == "CartPole-v1" and task["n_builtin"] == task["n_reference"] == 3
    assert task["verdict"] in ("equivalent", "differs", "undetermined")
    assert f"verdict: {doc['verdict']}" in r.output
    return args, r, doc, store, ref_store


def test_result_and_reference_store_file_names_spell_a_label_alike(tmp_path):
    """A label with spaces or brackets ("Rainbow (Dopamine)") is one file-name part for both files of a check."""
    from types import SimpleNamespace

    from rlaudit.fidelity import reference_store_path, write_result

    store = tmp_path / "store.sqlite"
    fr = SimpleNamespace(store=store, label="Rainbow (Dopamine)", reference=REFERENCES["self"],
                         protocol=SimpleNamespace(path="p.toml", hash="h"),
                         reference_store=reference_store_path(store, "self", "Rainbow (Dopamine)"))
    path = write_result(fr, SimpleNamespace(to_dict=lambda: {"verdict": "undetermined"}))
    assert (path.name, fr.reference_store.name) == ("fidelity-Rainbow__Dopamine_-self.json",
                                                    "reference-self-Rainbow__Dopamine_.sqlite")
    assert json.loads(path.read_text())["reference_store"] == str(fr.reference_store)


def test_fidelity_end_to_end_self(tmp_path, monkeypatch):
    import rlaudit.run.driver as driver

    priced_from = []  # the stores each driver's estimate read recorded CPU times from
    real = driver.recorded_rates
    monkeypatch.setattr(driver, "recorded_rates", lambda paths, **kw: priced_from.append(list(map(str, paths)))
                        or real(paths, **kw))
    args, first, doc, store, ref_store = _run_end_to_end(tmp_path, "self", 1_000)
    # the reference's runs are priced from its own store, never from the built-in's (another implementation)
    assert [str(ref_store)] in priced_from and not any(str(ref_store) in p and len(p) > 1 for p in priced_from)
    assert any(p[:1] == [str(store)] for p in priced_from)
    # the reference side trained other seeds: its scores are not a copy of the built-in's
    from rlaudit.store.export import export_table

    ours = export_table(store).frame.sort_values("run")["score"].tolist()
    theirs = export_table(ref_store).frame.sort_values("run")["score"].tolist()
    assert ours != theirs
    assert doc["tasks"][0]["mean_builtin"] == pytest.approx(np.mean(ours))
    assert doc["tasks"][0]["mean_reference"] == pytest.approx(np.mean(theirs))
    # resumable: a second call trains nothing and gives the same numbers
    again = _cli(args)
    assert again.exit_code == 0, again.output
    assert "3 of 3 runs already done" in again.output
    assert json.loads(store.with_name("fidelity-DQN-self.json").read_text()) == doc
    from rlaudit.fidelity.compare import markdown_rows

    table = _cli(args + ["--compare-only", "--markdown"])
    assert table.exit_code == 0 and markdown_rows(doc)[0] in table.output.splitlines(), table.output
    # the reference worker's runs say what they cost: the CPU seconds of the worker process
    with sqlite3.connect(ref_store) as con:
        cpu = [row[0] for row in con.execute("SELECT cpu_time FROM runs WHERE status='done'")]
    assert cpu and all(c is not None and c > 0 for c in cpu)
    # the reference store records the harness revision that trained it ...
    with sqlite3.connect(ref_store) as con:
        assert con.execute("SELECT value FROM meta WHERE key='reference_revision'").fetchone() == (
            "self harness revision 1",)
    # ... and runs of another revision are neither resumed nor compared: one line, exit 2
    from dataclasses import replace

    from rlaudit.fidelity import check_reference_revision

    with pytest.raises(InputError, match="its runs were trained by self harness revision 1, not self harness "
                                         "revision 2"):
        check_reference_revision(ref_store, replace(REFERENCES["self"], revision=2))
    with sqlite3.connect(ref_store) as con:
        con.execute("DELETE FROM meta WHERE key='reference_revision'")  # a store from before revisions: 1
    check_reference_revision(ref_store, REFERENCES["self"])
    with sqlite3.connect(ref_store) as con:
        con.execute("INSERT INTO meta(key, value) VALUES ('reference_revision', 'self harness revision 0')")
    for extra in ([], ["--compare-only"]):
        r = _cli(args + extra)
        assert r.exit_code == 2, r.output
        assert r.output.count("\n") == 1 and "not self harness revision 1" in r.output and "move the store aside" \
            in r.output


@pytest.mark.slow  # ~150 s: three interpreters importing TensorFlow and JAX; test_fidelity_end_to_end_self covers the path
@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason=f"the Dopamine reference is not installed "
                                                   f"({REFERENCES['dopamine'].python()}); make reference-venv")
def test_fidelity_end_to_end_dopamine(tmp_path):
    _, r, doc, _, ref_store = _run_end_to_end(tmp_path, "dopamine", 1_500)
    assert doc["reference_version"].startswith("dopamine-rl 4.1.2")
    with sqlite3.connect(ref_store) as con:
        rows = con.execute("SELECT returns FROM evaluations").fetchall()
    assert len(rows) == 3 and all(len(json.loads(x)) == 3 for (x,) in rows)


DOPAMINE_PROBE = """
import functools, types
import gin
import numpy as np
from dopamine.jax.agents.dqn import dqn_agent
from rlaudit.fidelity.dopamine_backend import DopamineAgent, MinAtarDQNNetwork

gin.bind_parameter("ReplayBuffer.max_capacity", 100)
gin.bind_parameter("ReplayBuffer.batch_size", 4)
gin.bind_parameter("ReplayBuffer.compress", False)

def episode(end):
    net = functools.partial(MinAtarDQNNetwork, torso="flatten", hidden=(8,))
    agent = dqn_agent.JaxDQNAgent(num_actions=2, observation_shape=(3,), observation_dtype=np.float32,
                                  stack_size=1, network=net, seed=0, min_replay_history=100)
    obs = [np.full(3, float(k), dtype=np.float32) for k in range(5)]
    agent.begin_episode(obs[0])
    for k in (1, 2, 3):
        agent.step(10.0 + k - 1, obs[k])  # the reward of the action taken in obs[k - 1]
    end(agent, 13.0, obs[4])  # the action taken in obs[3] ends the episode in obs[4]
    for e in agent._replay._memory.values():
        print(end.__name__, int(e.state.ravel()[0]), float(e.reward), int(e.next_state.ravel()[0]), bool(e.is_terminal))

def dopamine(agent, reward, final):
    agent.end_episode(reward, True)

def harness(agent, reward, final):
    DopamineAgent._end_episode(types.SimpleNamespace(agent=agent), reward, final, True)

episode(dopamine)
episode(harness)

"""
"""Dopamine's replay at an episode's end, through dopamine-rl's end_episode and through the harness's."""
DOPAMINE_NETWORK_PROBE = """
import jax, jax.numpy as jnp, numpy as np
from rlaudit.fidelity.dopamine_backend import MinAtarDQNNetwork
net = MinAtarDQNNetwork(num_actions=6)
params = net.init(jax.random.PRNGKey(0), jnp.zeros((10, 10, 4, 1)))
k = params['params']['Conv_0']['kernel']; d = params['params']['Dense_0']['kernel']
print("network", k.shape, d.shape, float(jnp.abs(k).max()), float(jnp.abs(d).max()),
      net.apply(params, jnp.ones((10, 10, 4, 1))).q_values.shape)
from dopamine.jax.agents.dqn.dqn_agent import linearly_decaying_epsilon
print("eps", *[float(linearly_decaying_epsilon(250_000, t, 1_000, 0.01)) for t in (0, 999, 1_000, 100_000, 251_000)])
"""
"""The reference's MinAtar network and Dopamine's epsilon schedule."""


@pytest.fixture(scope="module")
def dopamine_probe() -> list[str]:
    """The output lines of both probes, run in one interpreter of the Dopamine reference (importing dopamine-rl and
    TensorFlow costs ~20 CPU-s a process)."""
    import subprocess

    from rlaudit.fidelity.references import worker_environment

    out = subprocess.run([REFERENCES["dopamine"].python(), "-c", DOPAMINE_PROBE + DOPAMINE_NETWORK_PROBE],
                         capture_output=True, text=True, env=worker_environment(), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason="the Dopamine reference is not installed; make reference-venv")
def test_dopamine_reference_stores_the_episodes_last_transition(dopamine_probe):
    """dopamine-rl 4.1.2's end_episode loses the last transition and flags the one before as terminal
    (google/dopamine#228); the harness stores every transition once, the terminal flag on the last, as Dopamine 3's
    replay (which the published runs used) did. Both halves are checked, so a dopamine-rl that fixes its
    accumulator fails the first and says so."""
    rows = [line.split() for line in dopamine_probe if line.startswith(("dopamine ", "harness "))]
    # (state, reward, next state, terminal) per stored transition
    assert [r[1:] for r in rows if r[0] == "dopamine"] == [
        ["0", "10.0", "1", "False"], ["1", "11.0", "2", "False"], ["2", "12.0", "3", "True"]]
    assert [r[1:] for r in rows if r[0] == "harness"] == [
        ["0", "10.0", "1", "False"], ["1", "11.0", "2", "False"], ["2", "12.0", "3", "False"],
        ["3", "13.0", "4", "True"]]


@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason="the Dopamine reference is not installed; make reference-venv")
def test_builtins_take_dopamines_training_step():
    """Same parameters, same batches (IQN: the quantile levels Dopamine drew): each built-in's gradient, parameters
    after three Adam steps and (Rainbow) new priorities are Dopamine's to float32 rounding (measured: gradients
    within 3e-7 - 5e-5 of the largest, parameters within 3e-4 learning rates). A wrong projection, loss scale,
    head layout, importance weight or target gives differences of order 1; Dopamine's Rainbow without the
    harness's replay-scheme fix (google/dopamine#230) trains unweighted and never updates a priority, and IQN's
    cosine argument in the other float32 order gave 2.7e-4 and 0.01 learning rates: both fail here."""
    from rlaudit.fidelity.update_check import CHECKED, check_updates

    results = check_updates(FIDELITY_PROTOCOL, list(CHECKED))
    assert [r.algorithm for r in results] == list(CHECKED)
    recorded = load_status()
    for r in results:  # the committed record says what the check gives now
        assert recorded[r.algorithm].update.startswith("the same update as dopamine-rl"), r.algorithm
        assert r.grad_rel < 1e-4 and max(r.params_lr) < 0.01 and r.agrees, r
        assert (r.priorities_rel is None) == (r.algorithm != "DopamineRainbow"), r
        assert r.priorities_rel is None or r.priorities_rel < 1e-4, r
        assert r.line().endswith(": the same update")


@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason="the Dopamine reference is not installed; make reference-venv")
def test_training_loops_run_the_same_schedule():
    """scripts/fidelity_schedule.py: DQN's updates, target syncs (once anything is learned) and epsilon per action
    are Dopamine's over 3,000 steps (docs/fidelity.md, "The training loop's schedule")."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(REPO / "scripts" / "fidelity_schedule.py"), "DQN", "3000"],
                         capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "updates: built-in 500 (first [1004, 1008, 1012]), Dopamine 500 (first [1004, 1008, 1012])" in out.stdout
    assert out.stdout.strip().endswith("equivalent schedules (the differences above change nothing or less than 1e-5 "
                                       "in epsilon)")


def test_update_check_refuses_what_it_does_not_cover():
    from rlaudit.fidelity.update_check import check_backend_updates, check_updates

    with pytest.raises(InputError, match="no algorithm 'NoisyDQN'"):
        check_updates(FIDELITY_PROTOCOL, ["NoisyDQN"])
    with pytest.raises(InputError, match="no algorithm 'PPO'"):
        check_updates(FIDELITY_PROTOCOL, ["PPO"])
    with pytest.raises(InputError, match="no algorithm 'PPO'"):
        check_backend_updates(FIDELITY_PROTOCOL, ["DQN", "PPO"])
    r = _cli(["fidelity", "DQN", "--against", "self", "--protocol", str(FIDELITY_PROTOCOL), "--update-check"])
    assert r.exit_code == 2 and r.output.strip() == ("error: --update-check: compares with Dopamine's agents "
                                                      "(--against dopamine), not 'self'")


@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason="the Dopamine reference is not installed; make reference-venv")
def test_dopamine_minatar_network_matches_the_published_reading(dopamine_probe):
    """The flax network of the reference: a 3x3 kernel over (10, 10, C), 1,600 features, Xavier bounds."""
    line = next(x for x in dopamine_probe if x.startswith("network "))[len("network "):]
    eps_line = next(x for x in dopamine_probe if x.startswith("eps "))
    from rlaudit.algorithms.dqn_settings import dopamine_epsilon

    theirs = [float(v) for v in eps_line.split()[1:]]
    ours = [dopamine_epsilon(t, 250_000, 1_000, 0.01) for t in (0, 999, 1_000, 100_000, 251_000)]
    assert theirs == pytest.approx(ours, abs=1e-6)  # Dopamine's schedule computes in float32
    assert line.startswith("(3, 3, 4, 16) (1600, 6) ")
    parts = line.replace("(", " ").replace(")", " ").replace(",", " ").split()
    conv_max, dense_max = float(parts[6]), float(parts[7])
    assert 0.9 * math.sqrt(6 / (9 * 20)) < conv_max <= math.sqrt(6 / (9 * 20))
    assert 0.9 * math.sqrt(6 / 1606) < dense_max <= math.sqrt(6 / 1606)
    assert line.endswith("(6,)")


@pytest.mark.slow
@pytest.mark.skipif(not DOPAMINE_INSTALLED, reason="the Dopamine reference is not installed; make reference-venv")
@pytest.mark.parametrize("algorithm", ["DQN", "C51", "QRDQN", "IQN", "DopamineRainbow"])
def test_fidelity_minatar_100k(algorithm):
    """The real runs (hours of CPU): resumes the committed stores of sweeps/fidelity-minatar-100k/ and compares;
    the recorded status must be what the stores give."""
    store = REPO / "sweeps" / "fidelity-minatar-100k" / "store.sqlite"
    r = _cli(["fidelity", algorithm, "--against", "dopamine", "--protocol", str(FIDELITY_PROTOCOL), "--store",
              str(store)])
    assert r.exit_code == 0, r.output
    recorded = load_status().get(algorithm)
    if recorded is not None:
        assert f"verdict: {recorded.verdict}" in r.output


def test_result_tables_in_the_docs_are_the_recorded_comparisons():
    """Every row of docs/fidelity.md's result tables is what --markdown prints from a committed comparison, and
    every committed comparison has its rows there (numbers are never typed by hand)."""
    from rlaudit.fidelity.compare import markdown_rows

    docs = (REPO / "docs" / "fidelity.md").read_text()
    results = sorted((REPO / "sweeps" / "fidelity-minatar-100k").glob("fidelity-*-dopamine.json"))
    assert {p.name for p in results} >= {"fidelity-DQN-dopamine.json", "fidelity-C51-dopamine.json"}
    for path in results:
        rows = markdown_rows(json.loads(path.read_text()))
        assert len(rows) == 2 and all(row in docs for row in rows), (path.name, rows)
    assert markdown_rows({"tasks": [{"task": "MinAtar/Breakout-v1", "interval": [-0.5, 1.25], "shown_within": 1.5,
                                     "pooled_sd": 2.0, "verdict": "differs", "p_equivalent": 0.5, "mean_builtin": 3,
                                     "sd_builtin": 0.5, "mean_reference": 3.5, "sd_reference": 0.25,
                                     "difference": 0.5, "p_different": 0.0034}]}) == [
        "| Breakout | 3.00 ± 0.50 | 3.50 ± 0.25 | +0.50 [-0.50, +1.25] | 0.0034 | 1.50 (0.75 SD) | differs |"]


def test_recorded_status_is_what_the_committed_stores_give():
    """No hard-coded verdict: every recorded status is recomputed from the committed stores."""
    from rlaudit.fidelity import compare_stores
    from rlaudit.fidelity.compare import Fidelity  # noqa: F401 - the type compared
    from rlaudit.fidelity.references import get_reference
    from rlaudit.protocol import load_protocol, plan

    for name, s in load_status().items():
        if not s.checked:  # only the update check (recomputed by test_builtins_take_dopamines_training_step)
            continue
        protocol = load_protocol(REPO / s.protocol)
        store = REPO / "sweeps" / protocol.name / "store.sqlite"
        entry = next(a for a in protocol.algorithms if a.name == name)
        from rlaudit.fidelity import FidelityRun, reference_store_path

        fr = FidelityRun(protocol, plan(protocol), name, entry.label, get_reference(s.reference), s.reference_version,
                         store, reference_store_path(store, s.reference, entry.label), s.budget,
                         {"algo": [entry.label]})
        result = compare_stores(fr)
        assert result.verdict == s.verdict, name
        assert min(min(t.n_builtin, t.n_reference) for t in result.tasks) == s.n_runs
