"""Tests for rlaudit.stats.normalize: specs, Atari reference data and spellings, clear errors."""

from __future__ import annotations

import csv
import re

import numpy as np
import pandas as pd
import pytest

from rlaudit.errors import InputError
from rlaudit.scores import ScoreMeta, ScoreTable
from rlaudit.stats.normalize import ATARI_REFERENCE, Normalization, canonical_game, normalize, parse_normalization


def table(tasks, scores, **meta) -> ScoreTable:
    frame = pd.DataFrame({"algorithm": "A", "task": tasks, "run": [str(i) for i in range(len(tasks))],
                          "budget": 100, "score": scores})
    return ScoreTable.from_frame(frame, ScoreMeta(source="scores.csv", **meta))


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# ----------------------------------------------------------------------------------------- reference data

def test_atari_reference_matches_shared_csv(shared_data):
    with open(shared_data / "atari_reference_scores.csv", newline="") as fh:
        rows = {r["game"]: (float(r["random"]), float(r["human"])) for r in csv.DictReader(fh)}
    assert dict(ATARI_REFERENCE) == rows
    assert len(ATARI_REFERENCE) == 57


def test_atari_reference_spot_values():
    assert ATARI_REFERENCE["Pong"] == (-20.7, 14.6)
    assert ATARI_REFERENCE["MsPacman"] == (307.3, 6951.6)
    assert ATARI_REFERENCE["VideoPinball"] == (16256.9, 17667.9)  # DQN Zoo, not the MuZero table's 0.0


@pytest.mark.parametrize("game", sorted(ATARI_REFERENCE))
def test_canonical_game_every_game_every_spelling(game):
    for spelling in (game, game.lower(), game.upper(), snake(game), f"{game}NoFrameskip-v4", f"ALE/{game}-v5",
                     f"{game}Deterministic-v4", f"atari_{snake(game)}", f" {game} "):
        assert canonical_game(spelling) == game, spelling


@pytest.mark.parametrize("spelling,game", [
    ("Ms. Pac-Man", "MsPacman"), ("ms_pacman", "MsPacman"), ("MsPacmanNoFrameskip-v4", "MsPacman"),
    ("ALE/MsPacman-v5", "MsPacman"), ("pong", "Pong"), ("PongNoFrameskip-v4", "Pong"),
    ("JamesBond", "Jamesbond"), ("james_bond", "Jamesbond"), ("kung_fu_master", "KungFuMaster"),
    ("KungFuMaster", "KungFuMaster"), ("up_n_down", "UpNDown"), ("UpNDown", "UpNDown"),
    ("Montezuma's Revenge", "MontezumaRevenge"), ("montezuma_revenge", "MontezumaRevenge"),
    ("bankheist", "BankHeist"), ("atari_bank_heist", "BankHeist"), ("Private Eye", "PrivateEye"),
    ("river_raid", "Riverraid"), ("Q*bert", "Qbert"),
])
def test_canonical_game_usual_spellings(spelling, game):
    assert canonical_game(spelling) == game


@pytest.mark.parametrize("name", ["CartPole-v1", "Pacman", "walker-walk", "AirRaid", "", "pong2"])
def test_canonical_game_rejects_non_atari57(name):
    assert canonical_game(name) is None


def test_dopamine_file_stems_match(shared_data):
    stems = {p.name.split(".")[0].split("_")[0] for p in (shared_data / "dopamine" / "atari").glob("*.json.gz")}
    matched = {s for s in stems if canonical_game(s)}
    # Dopamine has 60 games: the 57 minus Defender, Phoenix, Surround... plus 6 outside Atari-57
    assert len(matched) >= 54
    assert stems - matched <= {"airraid", "carnival", "elevatoraction", "journeyescape", "pooyan"}


# ------------------------------------------------------------------------------------------------ parsing

def test_parse_string_specs(tmp_path):
    assert parse_normalization(None).method == "none"
    assert parse_normalization("none").label == "none"
    atari = parse_normalization(" Atari ")
    assert (atari.method, atari.label) == ("atari", "atari")
    d = parse_normalization("divide:1000")
    assert (d.method, d.divisor, d.label) == ("divide", 1000.0, "divide:1000")
    assert parse_normalization("divide:2.5").label == "divide:2.5"
    refs = tmp_path / "refs.csv"
    refs.write_text("task,low,high\nwalker-walk,0,1000\ncheetah-run,-5,900\n")
    m = parse_normalization(f"minmax:{refs}")
    assert (m.method, m.label) == ("minmax", "minmax")
    assert dict(m.references) == {"walker-walk": (0.0, 1000.0), "cheetah-run": (-5.0, 900.0)}
    assert parse_normalization("minmax:refs.csv", base_dir=tmp_path).references == m.references


def test_parse_mapping_specs(tmp_path):
    (tmp_path / "refs.csv").write_text("high,task,low\n10,a,0\n20,b,10\n")  # columns in any order
    n = parse_normalization({"method": "minmax", "references_file": "refs.csv", "references": {"b": [0, 5]}},
                            where="p.toml [normalization]", base_dir=tmp_path)
    assert dict(n.references) == {"a": (0.0, 10.0), "b": (0.0, 5.0)}  # inline overrides the file
    assert parse_normalization({"method": "divide", "divisor": 1000}).label == "divide:1000"
    assert parse_normalization({"method": "atari"}).method == "atari"
    assert parse_normalization({"method": "none"}).method == "none"
    sourced = parse_normalization({"method": "minmax", "references": {"a": [0, 2]}, "source": " measured here "})
    assert sourced.source == "measured here" and sourced.label == "minmax" and parse_normalization("atari").source == ""


@pytest.mark.parametrize("spec,message", [
    ("atary", r"--normalize: unknown normalisation 'atari?y'.*expected none, atari, divide:K or minmax:PATH "
              r"\(did you mean 'atari'\?\)"),
    ("zscore", r"unknown normalisation 'zscore'"),
    ("divide", r"'divide' needs a divisor, e.g. divide:1000"),
    ("divide:", r"'divide' needs a divisor"),
    ("divide:abc", r"divisor 'abc' is not a number"),
    ("divide:0", r"divisor must be a positive finite number, got '0'"),
    ("divide:-10", r"divisor must be a positive finite number"),
    ("divide:inf", r"divisor must be a positive finite number"),
    ("minmax", r"'minmax' needs a reference CSV"),
    ("atari:57", r"'atari' takes no argument"),
    (3, r"expected a string"),
])
def test_parse_errors(spec, message):
    with pytest.raises(InputError, match=message):
        parse_normalization(spec)


@pytest.mark.parametrize("spec,message", [
    ({"method": "divide"}, r"p\.toml\.divisor: required for method 'divide'"),
    ({"method": "divide", "divisor": True}, r"p\.toml\.divisor: must be a positive number"),
    ({"method": "divide", "divisor": -1}, r"p\.toml\.divisor: divisor must be a positive finite number"),
    ({"method": "minmax"}, r"p\.toml: method 'minmax' needs references or references_file"),
    ({"method": "minmax", "references": {"a": [1]}}, r"p\.toml\.references\.a: expected \[low, high\]"),
    ({"method": "minmax", "references": {"a": [1, 1]}}, r"p\.toml\.references\.a: low and high are equal"),
    ({"method": "minmax", "references": {"a": ["x", 1]}}, r"p\.toml\.references\.a: low and high must be numbers"),
    ({"method": "atari", "divisor": 3}, r"p\.toml\.divisor: not used by method 'atari'"),
    ({"method": "minmax", "reference": {}}, r"p\.toml: unknown key 'reference' \(did you mean 'references'"),
    ({"method": "humann"}, r"p\.toml\.method: unknown normalisation 'humann'"),
    ({}, r"p\.toml\.method: required"),
    ({"method": "minmax", "references": {"a": [0, 1]}, "source": 3}, r"p\.toml\.source: expected a string"),
    ({"method": "none", "source": "x"}, r"p\.toml\.source: not used by method 'none'"),
])
def test_parse_mapping_errors(spec, message):
    with pytest.raises(InputError, match=message):
        parse_normalization(spec, where="p.toml")


@pytest.mark.parametrize("content,message", [
    ("", r"refs\.csv: reference file is empty"),
    ("task,lo,high\na,0,1\n", r"refs\.csv:1: missing column 'low' \(did you mean 'lo'\?\)"),
    ("task,low,high\na,0,1\nb,zero,1\n", r"refs\.csv:3: column 'low' is not a number: 'zero'"),
    ("task,low,high\na,0,1\nb,1\n", r"refs\.csv: line 3: 2 fields, but the header has 3 columns"),
    ("task,low,high\na,0,1\na,0,2\n", r"refs\.csv:3: task 'a' listed twice \(first at line 2\)"),
    ("task,low,high\na,5,5\n", r"refs\.csv:2: low and high are equal \(5\)"),
    ("task,low,high\n,0,1\n", r"refs\.csv:2: empty task name"),
    ("task,low,high\na,0,nan\n", r"refs\.csv:2: low and high must be finite"),
    ("task,low,high\n", r"refs\.csv: reference file has a header but no rows"),
])
def test_minmax_csv_errors_name_file_and_line(tmp_path, content, message):
    (tmp_path / "refs.csv").write_text(content)
    with pytest.raises(InputError, match=message):
        parse_normalization(f"minmax:{tmp_path / 'refs.csv'}")


def test_minmax_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"--normalize: reference file .*nope\.csv not found"):
        parse_normalization("minmax:nope.csv", base_dir=tmp_path)


# ---------------------------------------------------------------------------------------------- normalize

def test_normalize_atari_values_and_spellings():
    t = table(["Pong", "PongNoFrameskip-v4", "ms_pacman", "ALE/MsPacman-v5"], [14.6, -20.7, 307.3, 3629.45])
    out = normalize(t, parse_normalization("atari"))
    expected = [1.0, 0.0, 0.0, (3629.45 - 307.3) / (6951.6 - 307.3)]
    by_task = dict(zip(out.frame["task"], out.frame["score"]))
    np.testing.assert_allclose([by_task[k] for k in ["Pong", "PongNoFrameskip-v4", "ms_pacman", "ALE/MsPacman-v5"]],
                               expected, rtol=0, atol=1e-15)
    assert out.meta.normalized == "atari"
    assert t.meta.normalized == ""  # the input is untouched
    assert list(out.frame["task"]) == list(t.frame["task"])  # task names are kept as given


def test_normalize_divide_and_minmax():
    t = table(["walker", "cheetah"], [500.0, 250.0])
    out = normalize(t, parse_normalization("divide:1000"))
    assert sorted(out.frame["score"]) == [0.25, 0.5]
    assert out.meta.normalized == "divide:1000"
    mm = parse_normalization({"method": "minmax", "references": {"walker": [0, 1000], "cheetah": [-250, 750]}})
    out = normalize(t, mm)
    assert dict(zip(out.frame["task"], out.frame["score"])) == {"walker": 0.5, "cheetah": 0.5}


def test_normalize_none_returns_input():
    t = table(["a"], [3.0])
    assert normalize(t, parse_normalization("none")) is t


def test_missing_references_name_every_task():
    t = table(["Pong", "CartPole-v1", "Acrobot-v1", "Pong"], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(InputError, match=r"^scores\.csv: 2 tasks without Atari-57 reference scores: "
                                         r"Acrobot-v1, CartPole-v1$"):
        normalize(t, parse_normalization("atari"))
    mm = Normalization("minmax", references={"walker_walk": (0.0, 1.0)}, label="minmax")
    with pytest.raises(InputError, match=r"1 task without a minmax reference: walker-walk "
                                         r"\(did you mean 'walker_walk'\?\)"):
        normalize(table(["walker-walk"], [1.0]), mm)


def test_refuses_double_normalisation():
    t = table(["Pong"], [1.0], normalized="atari")
    with pytest.raises(InputError, match=r"scores\.csv: scores are already normalised \(atari\); refusing"):
        normalize(t, parse_normalization("divide:10"))


def test_real_atari100k_scores_normalise_like_rliable(shared_data):
    """SPR's published Atari 100k runs (rliable's data): normalise through a score table and compare the IQM
    with rliable's on the matrix normalised by hand from the shared reference CSV."""
    import json

    from rliable import metrics as rly_metrics

    from rlaudit.stats import aggregate

    raw = json.loads((shared_data / "atari100k" / "SPR.json").read_text())
    with open(shared_data / "atari_reference_scores.csv", newline="") as fh:
        ref = {r["game"]: (float(r["random"]), float(r["human"])) for r in csv.DictReader(fh)}
    games = sorted(raw)
    matrix = np.stack([(np.asarray(raw[g]) - ref[g][0]) / (ref[g][1] - ref[g][0]) for g in games], axis=1)
    # spell the games the Gym way to exercise the name matching on real data
    frame = pd.DataFrame([{"algorithm": "SPR", "task": f"{g}NoFrameskip-v4", "run": str(r), "budget": 100_000,
                           "score": s} for g in games for r, s in enumerate(raw[g])])
    out = normalize(ScoreTable.from_frame(frame), parse_normalization("atari"))
    score_set = out.score_matrix("SPR", 100_000, [f"{g}NoFrameskip-v4" for g in games])
    assert matrix.shape == (100, 26)
    assert abs(aggregate("iqm", score_set) - rly_metrics.aggregate_iqm(matrix)) <= 1e-12
    assert abs(aggregate("median", score_set) - rly_metrics.aggregate_median(matrix)) <= 1e-12
