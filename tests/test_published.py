"""Bundled published protocols: ``rlaudit audit PROTOCOL --data ../shared/data`` checked against an independent
NumPy/SciPy computation straight from the raw files (IQM of normalised scores per algorithm and budget)."""

from __future__ import annotations

import csv
import gzip
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import trim_mean

from rlaudit.cli import main
from rlaudit.importers import content_sha256

PUBLISHED = Path(__file__).resolve().parents[1] / "protocols" / "published"
PROTOCOLS = ["dopamine-atari-200m", "dopamine-cnn-vs-impala", "atari100k", "dmc-100k-vs-500k"]


def _refs(data: Path) -> dict[str, tuple[float, float]]:
    with open(data / "atari_reference_scores.csv", newline="") as fh:
        return {r["game"].lower(): (float(r["random"]), float(r["human"])) for r in csv.DictReader(fh)}


def _hns(score, game, refs):
    lo, hi = refs[game.lower()]
    return (np.asarray(score, dtype=np.float64) - lo) / (hi - lo)


def _audit(protocol: str, data: Path, tmp: Path, *extra: str) -> dict:
    out = tmp / protocol
    r = CliRunner().invoke(main, ["audit", str(PUBLISHED / f"{protocol}.toml"), "--data", str(data), "--out", str(out),
                                  "--reps", "20000", "--reps-pairwise", "100", "-q", *extra])  # >= 20 m / alpha
    assert r.exit_code == 0, r.output
    return json.loads((out / "audit.json").read_text())


def _iqm_by_alg(doc: dict, budget: int) -> dict[str, float]:
    return {a["algorithm"]: a["point"] for a in doc["aggregates"] if a["budget"] == budget and a["metric"] == "iqm"}


def test_protocols_are_regenerated_identically_by_their_script(shared_data):
    import runpy

    make = runpy.run_path(str(PUBLISHED / "make_published.py"))
    for name, build in (("dopamine-atari-200m", "dopamine_legacy"), ("dopamine-cnn-vs-impala", "dopamine_cnn_impala"),
                        ("atari100k", "atari100k"), ("dmc-100k-vs-500k", "dmc")):
        assert make[build](shared_data) == (PUBLISHED / f"{name}.toml").read_text(), name


def test_protocol_checksums_match_the_shared_data(shared_data):
    """Every file's sha256 in the protocols matches the shared copy (content, gunzipped for .gz)."""
    for name in PROTOCOLS:
        doc = tomllib.loads((PUBLISHED / f"{name}.toml").read_text())
        assert doc["schema_version"] == 1 and doc["name"] == name and doc["claims"]
        for f in doc["data"]["files"]:
            assert content_sha256(shared_data / f["path"]) == f["sha256"], f["path"]
            assert f["url"].startswith("https://raw.githubusercontent.com/")


def test_dopamine_legacy_iqm_matches_direct_computation(shared_data, tmp_path):
    doc = _audit("dopamine-atari-200m", shared_data, tmp_path, "--budgets", "100000000,200000000")
    refs = _refs(shared_data)
    proto = tomllib.loads((PUBLISHED / "dopamine-atari-200m.toml").read_text())
    for budget, iteration in ((100_000_000, 99), (200_000_000, 198)):  # 200M read at the last iteration, 198
        scores: dict[str, list[float]] = {}
        for f in proto["data"]["files"]:
            path = shared_data / f["path"]
            game = path.name[: -len(".json.gz")]
            recs = json.loads(gzip.decompress(path.read_bytes()))
            by_agent: dict[str, list[float]] = {}
            for r in recs:
                by_agent.setdefault(r["Agent"], []).append(r["Value"])
            for agent, values in by_agent.items():
                assert len(values) == 5 * 199  # 5 contiguous runs of iterations 0..198
                at = [values[k * 199 + iteration] for k in range(5)]
                scores.setdefault(agent, []).extend(_hns(at, game, refs))
        got = _iqm_by_alg(doc, budget)
        assert set(got) == set(scores)
        for agent, s in scores.items():
            assert got[agent] == pytest.approx(trim_mean(np.array(s), 0.25), rel=1e-12, abs=1e-12), (agent, budget)
    assert {c["text"] for c in doc["claims"]} >= {"Rainbow outperforms DQN", "IQN outperforms Rainbow"}


def test_dopamine_cnn_vs_impala_iqm_matches_direct_computation(shared_data, tmp_path):
    doc = _audit("dopamine-cnn-vs-impala", shared_data, tmp_path, "--budgets", "50000000")
    refs = _refs(shared_data)
    proto = tomllib.loads((PUBLISHED / "dopamine-cnn-vs-impala.toml").read_text())
    scores: dict[str, dict[str, list[float]]] = {}
    complete: dict[str, bool] = {}
    for f in proto["data"]["files"]:
        path = shared_data / f["path"]
        stem = path.name[: -len(".json.gz")]
        game, net = stem.rsplit("_", 1)
        recs = json.loads(gzip.decompress(path.read_bytes()))
        by_agent: dict[str, list[dict]] = {}
        for r in recs:
            by_agent.setdefault(r["Agent"], []).append(r)
        for agent, mine in by_agent.items():
            at = [r["Value"] for r in mine if r["Iteration"] == 49]  # budget 50M = iteration 49, 5 runs by position
            counts = np.bincount([r["Iteration"] for r in mine])
            # positions stay reliable only while every earlier iteration holds all 5 runs
            complete[game] = complete.get(game, True) and counts[:50].min() == 5 and len(at) == 5
            scores.setdefault(f"{agent} ({net})", {})[game] = list(_hns(at, game, refs))
    games = sorted(g for g, ok in complete.items() if ok)
    got = _iqm_by_alg(doc, 50_000_000)
    assert len(games) == 55 and set(got) == set(scores)
    for alg, by_game in scores.items():
        flat = np.concatenate([by_game[g] for g in games])
        assert got[alg] == pytest.approx(trim_mean(flat, 0.25), rel=1e-12, abs=1e-12), alg


def test_atari100k_iqm_matches_direct_computation(shared_data, tmp_path):
    doc = _audit("atari100k", shared_data, tmp_path)
    refs = _refs(shared_data)
    expect = {}
    for name, alg in [("DER", "DER"), ("OTRainbow", "OTR"), ("DrQ", "DrQ"), ("DrQ(eps)", "DrQ(ε)"), ("SPR", "SPR"),
                      ("SimPLe", "SimPLe")]:
        raw = json.loads((shared_data / f"atari100k/{name}.json").read_text())
        expect[alg] = trim_mean(np.concatenate([_hns(v, g, refs) for g, v in raw.items()]), 0.25)
    curl = json.loads((shared_data / "atari100k/CURL_10_evals.json").read_text())
    expect["CURL"] = trim_mean(np.array([r["HNS"] for r in curl]), 0.25)  # already human-normalised
    got = _iqm_by_alg(doc, 100_000)
    assert set(got) == set(expect)
    for alg, v in expect.items():
        assert got[alg] == pytest.approx(v, rel=1e-9), alg
    assert doc["settings"]["normalization"] == "atari"
    assert any(c["better"] == "CURL" and c["worse"] == "DER" for c in doc["claims"])


def test_dmc_iqm_matches_direct_computation(shared_data, tmp_path):
    doc = _audit("dmc-100k-vs-500k", shared_data, tmp_path)
    for key, budget in (("100k", 100_000), ("500k", 500_000)):
        got = _iqm_by_alg(doc, budget)
        for alg in ("DrQ", "RAD", "PISAC", "SAC+AE", "SLAC", "Dreamer"):
            raw = json.loads((shared_data / f"rliable/dm_control/{alg}.json").read_text())[key]
            flat = np.concatenate([np.asarray(v, dtype=np.float64) / 1000 for v in raw.values()])
            assert got[alg] == pytest.approx(trim_mean(flat, 0.25), rel=1e-12), (alg, budget)


def _dmc_protocol(tmp: Path, edit) -> Path:
    text = (PUBLISHED / "dmc-100k-vs-500k.toml").read_text()
    p = tmp / "edited.toml"
    p.write_text(edit(text))
    return p


@pytest.mark.parametrize("edit, expect", [
    (lambda t: t.replace(t.split('sha256 = "')[1][:64], "0" * 64, 1), "rliable/dm_control/DrQ.json: checksum mismatch"),
    (lambda t: t.replace('format = "rliable"', 'fromat = "rliable"'), "data: unknown field 'fromat' (did you mean 'format'?)"),
    (lambda t: t.replace('options = { budget_unit = "env_steps" }', 'options = { budget_unti = "env_steps" }'),
     "data: options: unknown option 'budget_unti' for format 'rliable' (did you mean 'budget_unit'"),
    (lambda t: t.replace('path = "rliable/dm_control/DrQ.json"', 'path = "rliable/dm_control/DrQ2.json"'),
     "DrQ2.json: file listed in"),
])
def test_bad_data_sections_fail_cleanly(shared_data, tmp_path, edit, expect):
    proto = _dmc_protocol(tmp_path, edit)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["audit", str(proto), "--data", str(shared_data), "--out", str(out), "--reps", "200"])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], r.output
    assert not (out / "audit.json").exists()
