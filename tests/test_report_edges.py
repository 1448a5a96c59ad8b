"""The report's rough edges (issue 20): claims that hold at some budgets only, an incomplete sweep, claims
that name algorithms by other names, metrics not tested, the runs-needed range, unbounded intervals in the
plots, and the audit summary line.

Report tests read the frozen audit in ``tests/golden/audit.json`` (a real ``run_audit`` output), changed
where a test needs a case the frozen audit lacks.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rlaudit.audit.runs_needed import method_description
from rlaudit.report.model import FLOOR_CLAUSE, MEDIAN_CLAUSE, build_model
from rlaudit.report.render import render_text

GOLDEN_AUDIT = Path(__file__).parent / "golden" / "audit.json"
STEMS = ("aggregates", "budget_curves", "rank_bump", "pairwise", "profiles")


@pytest.fixture()
def doc() -> dict:
    return json.loads(GOLDEN_AUDIT.read_text())


def _md(doc: dict) -> str:
    return render_text(build_model(doc), "md", {stem: {} for stem in STEMS})


def _verdict(md: str) -> list[str]:
    """The verdict section's lines (the counter, then one line per finding)."""
    section = md.split("## 1. Verdict", 1)[1].split("## 2.", 1)[0]
    return [line for line in section.splitlines() if line.strip()]


def _held_at_first_budget_only(doc: dict) -> dict:
    """Claim 1 ("IQN > C51") made to hold at the first budget and be undecided at the others."""
    claim = doc["claims"][1]
    for p in claim["per_budget"][1:]:
        p["verdict"], p["decision"] = "inconclusive", "inconclusive"
    claim["overall"] = f"holds only at {claim['per_budget'][0]['budget']}"
    return doc


# ------------------------------------------------------------------------------ claims that hold in part
def test_claim_held_at_some_budgets_is_counted_and_bannered_as_such(doc):
    md = _md(_held_at_first_budget_only(doc))
    counter, *findings = _verdict(md)
    assert "inconclusive" not in counter
    # claim 2 ("Rainbow > IQN") already holds at 200M only in the frozen audit
    assert "claims: **0** hold, **2** hold only at some budgets, **1** reversed, **0** never decided" in counter
    line = next(f for f in findings if "IQN > C51" in f)
    assert "holds only at 10M frames; it is not decided at 50M and 200M" in line
    assert "inconclusive" not in line
    claims_table = md.split("## 6. Claims", 1)[1].split("## 7.", 1)[0]
    row = next(r for r in claims_table.splitlines() if r.startswith("| IQN > C51"))
    assert row.rstrip().endswith("| holds only at 10M |")


def test_claim_decided_nowhere_is_counted_as_never_decided(doc):
    claim = doc["claims"][1]
    for p in claim["per_budget"]:
        p["verdict"], p["decision"] = "inconclusive", "inconclusive"
    counter, *findings = _verdict(_md(doc))
    assert "claims: **0** hold, **1** hold only at some budgets, **1** reversed, **1** never decided" in counter
    assert any("IQN > C51\u201d is not decided at any audited budget." in f for f in findings)


def test_html_badge_and_tex_say_holds_only_at_some_budgets(doc):
    model = build_model(_held_at_first_budget_only(doc))
    html = render_text(model, "html", {})
    assert "claims hold / hold only at some budgets / reversed / never decided" in html
    assert ">holds only at some budgets</span>" in html
    assert "holds only at some budgets" in render_text(model, "tex", {})


def test_incomplete_sweep_comes_before_the_findings_it_qualifies(doc):
    doc["checklist"].append({"id": "incomplete-sweep", "severity": "warning",
                             "message": "the sweep is incomplete: 3 of 4 planned runs are finished and audited; "
                                        "1 are not", "advice": "finish the sweep", "details": {}})
    headline, first, *rest = _verdict(_md(doc))[1:]
    assert "orderings" in headline and "decided at family-wise error" in headline
    assert "the sweep is incomplete" in first
    assert any("Important" in f for f in rest), "the critical findings it qualifies come after it"
    assert not any("the sweep is incomplete" in f for f in rest), "said once"


# ------------------------------------------------------------------------------ the terminal summary
def _summary(doc: dict, width: int = 140) -> str:
    from rich.console import Console

    from rlaudit.audit import AuditResult
    from rlaudit.audit.summary import render_summary

    console = Console(record=True, width=width)
    render_summary(AuditResult.from_dict(doc), console)
    return console.export_text()


def test_summary_settings_lines_end_in_no_dangling_separator(doc):
    """At the width ``rlaudit audit`` prints piped output (140), no line of the header ends in ``;``."""
    head = _summary(doc).splitlines()[:4]
    assert any("deciding metric IQM" in line for line in head)
    assert not [line for line in head if line.rstrip().endswith(";")], head


def test_summary_says_the_sweep_is_incomplete_before_the_rankings(doc):
    doc["checklist"].append({"id": "incomplete-sweep", "severity": "warning",
                             "message": "the sweep is incomplete: 3 of 4 planned runs are finished and audited; "
                                        "1 are not", "advice": "finish the sweep", "details": {}})
    text = _summary(doc, width=400)
    assert text.index("the sweep is incomplete") < text.index("ranking by IQM") < text.index("Claims")


# ------------------------------------------------------------------------------ claims name algorithms by label
def test_claim_text_naming_an_algorithm_otherwise_than_its_label_is_refused_at_load(tmp_path):
    from rlaudit.audit.claims import load_claims_file
    from rlaudit.errors import InputError

    path = tmp_path / "claims.toml"
    path.write_text('[[claims]]\nbetter = "Quantile (JAX)"\nworse = "C51"\ntext = "QR-DQN outperforms C51"\n')
    with pytest.raises(InputError) as err:
        load_claims_file(path)
    assert str(err.value).startswith(f"{path}: claims[0]: field 'text' ('QR-DQN outperforms C51') does not name "
                                     "'Quantile (JAX)', the algorithm in 'better'; name both algorithms by their labels")
    path.write_text('[[claims]]\nbetter = "Quantile (JAX)"\nworse = "C51"\n'
                    'text = "quantile (JAX), i.e. QR-DQN, outperforms c51"\n')
    assert load_claims_file(path)[0].label == "quantile (JAX), i.e. QR-DQN, outperforms c51"  # case aside


def test_protocol_claim_text_without_the_label_names_the_protocol_file(tmp_path):
    from click.testing import CliRunner

    from rlaudit.cli import main

    text = (Path(__file__).parents[1] / "protocols" / "quickstart.toml").read_text()
    claim = 'text = "PPO beats DQN on discrete classic control"'
    assert claim in text
    bad = tmp_path / "p.toml"
    bad.write_text(text.replace(claim, 'text = "Proximal policy optimisation wins"'))
    res = CliRunner().invoke(main, ["validate", str(bad)])
    assert res.exit_code == 2
    assert res.output.startswith(f"error: {bad}: claims[1]: field 'text' ('Proximal policy optimisation wins') "
                                 "does not name 'PPO'"), res.output


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[1] / "protocols").rglob("*.toml")),
                         ids=lambda p: p.name)
def test_shipped_protocols_name_claimed_algorithms_by_their_labels(path):
    from rlaudit.protocol import load_protocol

    protocol = load_protocol(path)
    for c in protocol.claims:
        for key in ("better", "worse"):
            assert c[key].casefold() in c.get("text", c[key]).casefold(), (c["where"], key)


# ------------------------------------------------------------------------------ runs needed over the CI
def _runs_needed_section(md: str) -> str:
    return md.split("### Runs needed for undecided pairs", 1)[1].split("## 9.", 1)[0]


NOTE_ALL = ("*Runs per task needed over the CI, for every pair: at most one run per task more than the pair has, "
            "with no upper end (the interval contains 0: its far end would be decided with at most one more run, "
            "its near end with no number of runs).*")


def test_runs_needed_range_column_that_reads_one_more_run_on_every_row_becomes_one_sentence(doc):
    """The frozen audit has 8 runs per task; "9 or more" (one more run, open-ended) is what every undecided
    pair reads, so the column goes and one sentence says it."""
    undecided = [o for o in doc["orderings"] if o["runs_needed"] is not None]
    assert len(undecided) >= 2 and {d["n_runs"] for d in doc["data"]["design"]} == {8}
    for o in undecided:
        o["runs_needed_range"] = [9, None]
    model = build_model(doc)
    section = _runs_needed_section(render_text(model, "md", {stem: {} for stem in STEMS}))
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0] == "| Budget | Pair | IQM difference [CI] | Runs per task needed |"
    assert len(table) == 2 + len(undecided) and all(line.count("|") == 5 for line in table)
    assert "9 or more" not in section and NOTE_ALL in section
    html = render_text(model, "html", {})
    assert "<th class=\"num\">Over the CI</th>" not in html and NOTE_ALL.strip("*") in html


def test_runs_needed_range_is_shown_only_where_it_says_more_than_one_more_run(doc):
    ranges = [o["runs_needed_range"] for o in doc["orderings"] if o["runs_needed"] is not None]
    assert sorted(map(tuple, ranges)) == [(9, None), (9, None), (19, None)]  # the frozen audit, 8 runs per task
    doc["orderings"][next(i for i, o in enumerate(doc["orderings"]) if o["runs_needed_range"] == [9, None])][
        "runs_needed_range"] = [9, 40]  # a bounded range says something even when it starts at one more run
    section = _runs_needed_section(_md(doc))
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0].endswith("| Over the CI |")
    assert sorted(line.rsplit("|", 2)[1].strip() for line in table[2:]) == ["19 or more", "9 to 40", "\u2013"]
    assert "for pairs showing \u2013: at most one run per task more than the pair has, with no upper end" in section


def test_runs_needed_at_two_or_three_runs_per_task_are_read_as_lower_bounds(doc):
    """At 2-3 runs per task the estimate of audits before 2026-12-06 was measured to fall short of its power
    (docs/audit.md): the section and the verdict say so; at the frozen audit's 8 runs, under the percentile scheme,
    and for an audit whose estimate plans on the median-unbiased standard error (or waited for the floor), not."""
    assert "lower bounds" not in _md(doc)
    undecided = next(o for o in doc["orderings"] if o["runs_needed"] is not None)
    for d in doc["data"]["design"]:
        d["n_runs"] = 2 if d["algorithm"] == undecided["a"] else 3
    md = _md(doc)
    assert "*With 2 runs per task on 5 tasks, read these as lower bounds: in simulation" in _runs_needed_section(md)
    assert "runs per task); estimates (lower bounds at this run count) and their method in section 8." in md
    assert "read these as lower bounds" in render_text(build_model(doc), "html", {})
    doc["settings"]["interval_method"] = "percentile"
    assert "lower bounds" not in _md(doc)
    doc["settings"]["interval_method"] = "expanded"  # one run of an algorithm with every pair decided: not counted
    for d in doc["data"]["design"]:
        d["n_runs"] = 1 if d["algorithm"] == "C51" else 3
    assert all("C51" not in (o["a"], o["b"]) for o in doc["orderings"] if o["runs_needed"] is not None)
    assert "*With 3 runs per task on 5 tasks, read these as lower bounds" in _md(doc)
    doc["data"]["tasks"] += [f"extra{i}" for i in range(6)]  # 11 tasks: measured to hold there, not said
    assert "lower bounds" not in _md(doc)
    doc["data"]["tasks"] = doc["data"]["tasks"][:-6]
    assert "lower bounds" in _md(doc)
    # An audit whose estimate plans on the median-unbiased standard error met its power at 2-3 runs: not said;
    # nor for the audits of 2026-12-06 whose estimate waited until the floor's level was reachable.
    doc["settings"]["runs_needed_method"] = method_description(0.05, 70, 0.8, 1000, t_reading=True)
    assert MEDIAN_CLAUSE in doc["settings"]["runs_needed_method"] and "lower bounds" not in _md(doc)
    doc["settings"]["runs_needed_method"] = f"... n* = the smallest n' > n that meets it and where {FLOOR_CLAUSE} ..."
    assert "lower bounds" not in _md(doc)


# ------------------------------------------------------------------------------ unbounded intervals in figures
def _unbounded(doc: dict) -> tuple[dict, dict]:
    """The first IQM aggregate made unbounded above (as audit.json writes an infinite bound: null)."""
    agg = next(a for a in doc["aggregates"] if a["metric"] == "iqm")
    agg["hi"] = None
    return doc, agg


def _open_arrows(ax):
    from matplotlib.text import Annotation

    return [t for t in ax.texts if isinstance(t, Annotation) and t.arrow_patch is not None]


def test_aggregates_plot_draws_an_unbounded_interval_open_ended_and_says_so(doc):
    import matplotlib.pyplot as plt

    from rlaudit.report.plots import OPEN_NOTE, plot_aggregates

    doc, agg = _unbounded(doc)
    model = build_model(doc)
    fig = plot_aggregates(model)
    try:
        panel = fig.axes[model.budgets.index(agg["budget"]) * len(model.metrics) + model.metrics.index("iqm")]
        arrows = _open_arrows(panel)
        assert len(arrows) == 1
        arrow = arrows[0]
        assert arrow.xy[0] == 1.0  # to the right-hand edge of the axes: no upper bound
        assert arrow.xyann[0] == pytest.approx(agg["point"])
        assert arrow.arrow_patch.get_linestyle() != "-"
        assert OPEN_NOTE in fig._suptitle.get_text()
        others = [ax for ax in fig.axes if ax is not panel]
        assert not any(_open_arrows(ax) for ax in others)
        markers = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() not in ("None", "", None)]
        assert markers and not any(line.get_clip_on() for line in markers)
    finally:
        plt.close(fig)
    bounded = plot_aggregates(build_model(json.loads(GOLDEN_AUDIT.read_text())))
    try:
        assert OPEN_NOTE not in bounded._suptitle.get_text() and not any(_open_arrows(ax) for ax in bounded.axes)
    finally:
        plt.close(bounded)


def test_budget_curves_draw_an_unbounded_interval_open_ended(doc):
    import matplotlib.pyplot as plt

    from rlaudit.report.plots import plot_budget_curves

    doc, agg = _unbounded(doc)
    fig = plot_budget_curves(build_model(doc))
    try:
        ax = fig.axes[0]
        arrows = _open_arrows(ax)
        assert [(a.xy, a.xyann) for a in arrows] == [((agg["budget"], 1.0), (agg["budget"], agg["point"]))]
        assert "no bounded CI on that side" in [t.get_text() for t in ax.get_legend().get_texts()]
        assert not any(line.get_clip_on() for line in ax.get_lines() if line.get_marker() not in ("None", "", None))
    finally:
        plt.close(fig)


def test_report_caption_mentions_open_ended_intervals_only_when_there_are_some(doc):
    caption = "A dashed arrow to the axis edge: no bounded interval on that side."
    figures = {stem: {} for stem in STEMS}
    assert caption not in render_text(build_model(doc), "md", figures)
    assert caption in render_text(build_model(_unbounded(doc)[0]), "md", figures)


def test_an_open_end_near_the_axis_edge_gets_room_to_show(doc):
    import matplotlib.pyplot as plt

    from rlaudit.report.plots import plot_aggregates

    model = build_model(doc)
    lowest = min((a for a in doc["aggregates"] if a["metric"] == "iqm"), key=lambda a: a["point"])
    lowest["lo"] = None  # the leftmost point of its column: without room its arrow would hide under the marker
    fig = plot_aggregates(build_model(doc))
    try:
        panel = fig.axes[model.budgets.index(lowest["budget"]) * len(model.metrics) + model.metrics.index("iqm")]
        left, right = panel.get_xlim()
        assert lowest["point"] - left >= 0.15 * (right - left)
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------ metrics other than the deciding one
def _sensitivity_rows(md: str) -> list[str]:
    section = md.split("### Metric sensitivity", 1)[1].split("## 6.", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def test_a_metric_without_a_test_reads_not_tested_instead_of_inconclusive(doc):
    row = doc["metric_sensitivity"][0]
    del row["decisions"]["mean"]
    lines = _sensitivity_rows(_md(doc))
    assert lines[0] == "| Budget | Pair | IQM | Median | Mean | Optimality gap |"
    assert lines[1].split(" | ")[4] == "not tested (deciding metric IQM)"
    assert "not tested" not in "\n".join(lines[2:])


def test_sensitivity_table_says_each_metric_is_decided_in_its_own_family(doc):
    md = _md(doc)
    section = md.split("### Metric sensitivity", 1)[1].split("## 6.", 1)[0]
    n = doc["settings"]["n_tests"]
    assert (f"Each metric's orderings are tested in a family of their own ({n} tests at family-wise \u03b1 = 0.05, "
            "the same bootstrap as IQM), so \u201cinconclusive\u201d under a metric is that metric's test result.") in section


def test_rank_bump_markers_are_not_clipped_at_the_axis(doc):
    import matplotlib.pyplot as plt

    from rlaudit.report.plots import plot_rank_bump

    fig = plot_rank_bump(build_model(doc))
    try:
        lines = [line for line in fig.axes[0].get_lines() if line.get_marker() not in ("None", "", None)]
        assert lines and not any(line.get_clip_on() for line in lines)
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------- p-values read past the replicates
def test_a_p_value_read_past_the_replicates_is_marked_and_explained(doc):
    """An ordering whose p-value the audit read on t past the bootstrap replicates carries "†" after it, in
    Markdown and HTML, with one note giving the degrees of freedom; the frozen audit (written before the field
    existed) has neither."""
    assert "†" not in _md(doc)
    o = doc["orderings"][0]
    o.update(past_replicates=True, df=2.04)
    md = _md(doc)
    row = next(line for line in md.splitlines() if line.startswith(f"| {o['a']} | {o['b']} |"))
    assert row.count("†") == 1 and "†" in row.split("|")[5]  # the p column, not the adjusted one
    assert md.count("†: no bootstrap replicate of the difference") == 1 and "ν (2.0 here" in md
    html = render_text(build_model(doc), "html", {})
    assert html.count("†</td>") == 1 and 'class="note past-replicates"' in html
