"""Tests of the design-power note's cells (``rlaudit.audit.design_power``) and the verdict's sentence from them."""

from __future__ import annotations

import pytest

from rlaudit.audit.design_power import LEAD, PowerCell, cells_text, power_sentence, read_note

SHAPES = ("gamma", "collapsed", "heavy", "poisson")
CELLS = (PowerCell(3, "gamma", 1.0, 0), PowerCell(3, "gamma", 1.5, 0), PowerCell(3, "heavy", 1.0, 1),
         PowerCell(3, "heavy", 1.5, 4), PowerCell(5, "gamma", 1.0, 2), PowerCell(5, "gamma", 1.5, 38),
         PowerCell(5, "heavy", 1.0, 6), PowerCell(5, "heavy", 1.5, 51), PowerCell(10, "gamma", 1.0, 86),
         PowerCell(10, "gamma", 1.5, 100), PowerCell(10, "heavy", 1.0, 93), PowerCell(10, "heavy", 1.5, 100))


def _note(cells=CELLS) -> str:
    return f"{LEAD} (5 tasks x 4 budgets; ...): a planted crossing ... is found in {cells_text(cells, SHAPES)} " \
           "(gamma: skewed runs, heavy: heavy tails (t, 2.5 df); docs/audit.md)."


def test_the_cells_written_into_a_note_are_read_back_from_among_other_notes():
    notes = ["scores are mean returns over each evaluation's episodes", _note(), "another note: 3 runs a task"]
    assert sorted(read_note(notes), key=lambda c: (c.n_runs, c.shape, c.sd)) == sorted(
        CELLS, key=lambda c: (c.n_runs, c.shape, c.sd))
    assert cells_text(CELLS, SHAPES).startswith("3 runs a task: gamma 1 SD 0 %, gamma 1.5 SD 0 %, heavy 1 SD 1 %")
    assert read_note(notes[:1] + notes[2:]) == ()


@pytest.mark.parametrize(("fewest", "row", "then"), [
    (5, "2–6 / 38–51 % of simulated audits of this design with 5 runs a task (the fewest here)", True),
    (4, "0–1 / 0–4 % of simulated audits of this design with 3 runs a task (the fewest here are 4)", True),
    (2, "0–1 / 0–4 % of simulated audits of this design with 3 runs a task (the fewest here are 2)", True),
    (12, "86–93 / 100 % of simulated audits of this design with 10 runs a task (the fewest here are 12; range",
     False),
])
def test_the_sentence_reads_the_row_at_the_audits_fewest_runs_and_the_largest_measured(fewest, row, then):
    text = power_sentence(CELLS, fewest)
    assert text.startswith("a crossing of 1 / 1.5 between-run SD (one algorithm ahead at the first budget")
    assert f"is found in {row}" in text
    assert text.endswith("and in 86–93 / 100 % with 10 (range over the shapes gamma, heavy; the note in section 2)") \
        == then
    assert power_sentence((), fewest) == ""
