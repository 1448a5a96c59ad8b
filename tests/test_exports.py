"""Exports read by a plain ``pandas.read_csv`` / ``pandas.read_parquet``; metadata kept in a sidecar / Parquet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.scores import ScoreMeta, ScoreTable, read_scores, sidecar_path, write_scores

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "sweeps" / "quickstart"


def _table() -> ScoreTable:
    frame = pd.DataFrame({"algorithm": ["A", "A", "B", "B"], "task": ["x"] * 4, "run": ["0", "1", "0", "1"],
                          "budget": [10] * 4, "score": [1.5, 2.25, 0.1, 1e-17]})
    return ScoreTable.from_frame(frame, ScoreMeta(budget_unit="frames", score_kind="train", source="unit",
                                                  notes=("a note",)))


def test_csv_export_is_a_plain_table_with_a_sidecar(tmp_path):
    table = _table()
    path = write_scores(table, tmp_path / "x.csv")
    plain = pd.read_csv(path)  # raised ParserError on the '# rlaudit.*' comment lines
    assert list(plain.columns) == ["algorithm", "task", "run", "budget", "score"]
    assert plain["score"].tolist() == table.frame["score"].tolist()
    side = json.loads(sidecar_path(path).read_text())
    assert side["budget_unit"] == "frames" and side["notes"] == ["a note"]
    back = read_scores(path)
    assert back.meta == table.meta
    pd.testing.assert_frame_equal(back.frame, table.frame)


def test_parquet_export_reads_with_pandas_and_keeps_metadata(tmp_path):
    path = write_scores(_table(), tmp_path / "x.parquet")
    assert pd.read_parquet(path)["algorithm"].tolist() == ["A", "A", "B", "B"]
    assert read_scores(path).meta.budget_unit == "frames"
    assert not sidecar_path(path).exists()


def test_old_commented_csv_still_reads(tmp_path):
    """Exports written before the sidecar kept their metadata in leading '# rlaudit.*' comment lines."""
    plain = (QUICKSTART / "scores.csv").read_text()
    old = tmp_path / "old.csv"
    old.write_text('# rlaudit.source: "sweeps/quickstart/store.sqlite"\n# rlaudit.budget_unit: "env_steps"\n' + plain)
    table = read_scores(old)
    assert table.meta.source == "sweeps/quickstart/store.sqlite" and table.meta.budget_unit == "env_steps"
    assert len(table.frame) == len(plain.splitlines()) - 1


def test_bad_sidecar_is_one_error_naming_it(tmp_path):
    path = write_scores(_table(), tmp_path / "x.csv")
    sidecar_path(path).write_text('{"budget_unit": "frames",')
    with pytest.raises(InputError, match=r"x\.csv\.meta\.json: not valid JSON at line 1"):
        read_scores(path)
    sidecar_path(path).write_text('{"budget_units": "frames"}')
    with pytest.raises(InputError, match=r"x\.csv\.meta\.json: unknown score metadata field 'budget_units'"):
        read_scores(path)


def test_export_and_import_write_plain_csv(tmp_path):
    store = tmp_path / "store.sqlite"
    shutil.copy(QUICKSTART / "store.sqlite", store)
    runner = CliRunner()
    res = runner.invoke(main, ["export", str(store), "-o", str(tmp_path / "e.csv")])
    assert res.exit_code == 0, res.output
    exported = pd.read_csv(tmp_path / "e.csv")
    assert {"algorithm", "task", "run", "budget", "score", "regime"} <= set(exported.columns)
    assert read_scores(tmp_path / "e.csv").meta.runs_finished > 0
    res = runner.invoke(main, ["import", "tidy", str(tmp_path / "e.csv"), "-o", str(tmp_path / "i.csv")])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "i.csv")) == len(exported)
    assert read_scores(tmp_path / "i.csv").meta == read_scores(tmp_path / "e.csv").meta
