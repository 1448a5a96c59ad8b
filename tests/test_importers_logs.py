"""Imports of the formats researchers have: the tidy CSV's edge cases, TensorBoard event logs (SB3, CleanRL,
RL Zoo layouts), W&B exports and openrlbenchmark tables; and ``rlaudit audit --budgets`` suffixes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import import_path
from rlaudit.scores import read_scores


def invoke(args: list[str]):
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    return result.exit_code, result.stdout, result.stderr, result.exception


def assert_import_fails(tmp_path: Path, args: list[str], *fragments: str) -> str:
    """``rlaudit import ARGS -o out.csv``: exit 2, one ``error:`` line holding ``fragments``, nothing written."""
    out = tmp_path / "out.csv"
    code, stdout, stderr, exc = invoke(["import", *args, "-o", str(out)])
    assert code == 2, (code, stdout, stderr, exc)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stdout + stderr
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert not out.exists() and not Path(str(out) + ".meta.json").exists()
    return lines[0]


def import_ok(args: list[str], out: Path):
    code, stdout, stderr, exc = invoke(["import", *args, "-o", str(out)])
    assert code == 0, (stdout, stderr, exc)
    return read_scores(out), stderr


# ------------------------------------------------------------------------------------------- tidy CSV

TIDY = "algorithm,task,seed,budget,score\nA,x,0,100,1.0\nA,x,1,100,\nA,x,2,100,3.0\nB,x,0,100,0.5\n"


def test_tidy_seed_column_is_the_run(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace(",\n", ",2.0\n"))
    table, stderr = import_ok(["tidy", str(tmp_path / "s.csv")], tmp_path / "o.csv")
    assert sorted(table.frame["run"]) == ["0", "0", "1", "2"]
    assert "column 'seed' read as the run id" in stderr


def test_tidy_run_column_option(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace("seed", "trial").replace(",\n", ",2.0\n"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "missing column 'run'")
    table, _ = import_ok(["tidy", str(tmp_path / "s.csv"), "--run-column", "trial"], tmp_path / "o.csv")
    assert sorted(table.frame["run"]) == ["0", "0", "1", "2"]
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv"), "--run-column", "trail"],
                        "s.csv", "--run-column: no column 'trail' (did you mean 'trial'?)")


def test_tidy_empty_score_is_missing_unless_strict(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY)
    table, stderr = import_ok(["tidy", str(tmp_path / "s.csv")], tmp_path / "o.csv")
    assert len(table.frame) == 3 and "1" not in set(table.frame.loc[table.frame.algorithm == "A", "run"])
    assert "1 row(s) with an empty score read as missing and left out (line 3)" in stderr
    assert any("empty score" in n for n in table.meta.notes)
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv"), "--strict"],
                        "s.csv", "column 'score' is NaN or empty at line 3")


def test_tidy_text_nan_and_bad_other_columns_still_fail(tmp_path):
    (tmp_path / "s.csv").write_text(TIDY.replace("A,x,2,100,3.0", "A,x,2,100,nan"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "NaN or empty at line 4")
    (tmp_path / "s.csv").write_text(TIDY.replace("A,x,1,100,", "A,x,1,,"))
    assert_import_fails(tmp_path, ["tidy", str(tmp_path / "s.csv")], "s.csv", "'budget' must hold integers",
                        "line 3")


def test_tidy_format_is_documented():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "importers.md").read_text()
    section = doc.split("## The tidy score table", 1)[1].split("\n## ", 1)[0]
    for column in ("algorithm", "task", "run", "budget", "score", "score_kind", "regime", "meta.json"):
        assert f"`{column}" in section or column in section, column


# ------------------------------------------------------------------------------------ audit --budgets

def test_audit_budgets_accept_suffixes(tmp_path):
    rng = np.random.default_rng(0)
    rows = [f"{a},{t},{r},{b},{rng.normal(m, 0.1):.4f}" for a, m in (("A", 1.0), ("B", 0.0)) for t in ("x", "y")
            for r in range(5) for b in (10_000, 20_000, 1_000_000)]
    (tmp_path / "s.csv").write_text("algorithm,task,run,budget,score\n" + "\n".join(rows) + "\n")
    code, stdout, stderr, exc = invoke(["audit", str(tmp_path / "s.csv"), "--reps", "1200", "--budgets", "10k,1M",
                                        "--out", str(tmp_path / "o")])
    assert code == 0, (stdout, stderr, exc)
    assert json.loads((tmp_path / "o" / "audit.json").read_text())["budgets"] == [10_000, 1_000_000]
    code, _, stderr, _ = invoke(["audit", str(tmp_path / "s.csv"), "--budgets", "10q", "--out", str(tmp_path / "p")])
    assert code == 2 and "--budgets: '10q' is not an integer budget" in stderr
