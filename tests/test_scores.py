"""The tidy score table: validation messages, round trips, metadata."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlaudit.errors import InputError
from rlaudit.scores import ScoreMeta, ScoreTable, read_scores, validate_frame, write_scores


def _frame(n_runs=3):
    rows = [(a, t, str(r), b, float(i))
            for i, (a, t, r, b) in enumerate((a, t, r, b) for a in ("A", "B") for t in ("x", "y")
                                             for r in range(n_runs) for b in (10, 20))]
    return pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"])


def test_validate_coerces_and_sorts():
    df = _frame().sample(frac=1.0, random_state=0)
    df["budget"] = df["budget"].astype(float)
    out = validate_frame(df)
    assert list(out.columns) == ["algorithm", "task", "run", "budget", "score"]
    assert out["budget"].dtype == np.int64 and out["score"].dtype == np.float64
    assert out[["algorithm", "task", "budget", "run"]].equals(
        out[["algorithm", "task", "budget", "run"]].sort_values(["algorithm", "task", "budget", "run"]))


def test_score_matrix_is_per_task_and_ragged():
    df = _frame()
    df = df[~((df.algorithm == "A") & (df.task == "y") & (df.run == "2"))]
    table = ScoreTable.from_frame(df)
    x, y = table.score_matrix("A", 10)
    assert x.shape == (3,) and y.shape == (2,)
    assert table.budgets == [10, 20] and table.tasks == ["x", "y"] and table.algorithms == ["A", "B"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip_keeps_metadata(tmp_path, suffix):
    meta = ScoreMeta(budget_unit="frames", score_kind="train", source="unit", normalized="atari", notes=("n1",))
    table = ScoreTable.from_frame(_frame(), meta)
    path = write_scores(table, tmp_path / f"s{suffix}")
    back = read_scores(path)
    assert back.meta == meta
    pd.testing.assert_frame_equal(back.frame, table.frame)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.rename(columns={"score": "scroe"}), "missing column 'score' (did you mean 'scroe'?)"),
        (lambda d: d.assign(score=d["score"].astype(object).where(d.index != 3, "abc")),
         "column 'score' is not numeric at line 5"),
        (lambda d: d.assign(score=d["score"].where(d.index != 0, np.nan)), "column 'score' is NaN or empty at line 2"),
        (lambda d: d.assign(score=d["score"].where(d.index != 1, np.inf)), "column 'score' is infinite at line 3"),
        (lambda d: pd.concat([d, d.iloc[[0]]]), "duplicate (algorithm, task, run, budget) rows at line 2, 26"),
        (lambda d: d.assign(budget=d["budget"].astype(float).where(d.index != 2, 1.5)),
         "column 'budget' must hold integers; bad value at line 4"),
    ],
)
def test_bad_frames_name_lines(mutate, message):
    with pytest.raises(InputError) as err:
        validate_frame(mutate(_frame()), where="s.csv")
    assert str(err.value).startswith("s.csv: ")
    assert message in str(err.value)


def test_csv_line_numbers_account_for_metadata_comments(tmp_path):
    path = write_scores(ScoreTable.from_frame(_frame(), ScoreMeta(budget_unit="frames")), tmp_path / "s.csv")
    lines = path.read_text().splitlines()
    n_comments = sum(line.startswith("#") for line in lines)
    target = n_comments + 2  # header, then the first data row
    lines[target - 1] = lines[target - 1].rsplit(",", 1)[0] + ",oops"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=f"not numeric at line {target}$"):
        read_scores(path)


def test_empty_and_unknown_files(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(InputError, match="empty"):
        read_scores(tmp_path / "e.csv")
    (tmp_path / "h.csv").write_text("algorithm,task,run,budget,score\n")
    with pytest.raises(InputError, match="no score rows"):
        read_scores(tmp_path / "h.csv")
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(InputError, match="unknown score file type"):
        read_scores(tmp_path / "x.xlsx")
    with pytest.raises(InputError, match="no such score file"):
        read_scores(tmp_path / "missing.csv")


def test_bad_score_kind_is_rejected():
    with pytest.raises(InputError, match="score kind 'test'"):
        ScoreTable.from_frame(_frame(), ScoreMeta(score_kind="test"))
