"""Tests of the report stage (``rlaudit.report``, ``rlaudit report``).

Reports are rendered once per session (plotting is the slow part) from real audits: synthetic tidy scores
audited by :func:`rlaudit.audit.run_audit` with few replicates. One test opens ``index.html`` in headless
Chromium (skipped only when Chromium is absent), one compiles ``tables.tex`` with pdfLaTeX (skipped only
when ``pdflatex`` is absent; a structural check runs regardless).
"""

from __future__ import annotations

import base64
import copy
import html.parser
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.audit import AuditSettings, parse_claims, run_audit
from rlaudit.audit.design_power import LEAD, PowerCell, cells_text
from rlaudit.errors import InputError
from rlaudit.report import build_report, parse_formats
from rlaudit.report.model import SECTIONS, build_model, format_budget, format_interval, format_number
from rlaudit.report.render import md_escape, render_text, tex_escape
from rlaudit.scores import ScoreMeta, ScoreTable

GOLDEN = Path(__file__).parent / "golden" / "report.md"
GOLDEN_AUDIT = Path(__file__).parent / "golden" / "audit.json"
BUDGETS = (10_000_000, 50_000_000, 200_000_000)
HOSTILE_ALGS = ("<script>alert(1)</script>", "A&B", "50%_run", "a|b")
STEMS = ("aggregates", "budget_curves", "rank_bump", "pairwise", "profiles")


# ------------------------------------------------------------------------------------------------ fixtures
def _table(curves: dict[str, tuple[float, ...]], tasks, n_runs=8, seed=0, noise=0.12) -> ScoreTable:
    """Tidy scores: ``curves[alg][i]`` is the mean score at ``BUDGETS[i]``; tasks add an offset."""
    rng = np.random.default_rng(seed)
    rows = []
    for alg, means in curves.items():
        for ti, task in enumerate(tasks):
            for run in range(n_runs):
                for b, m in zip(BUDGETS, means):
                    rows.append((alg, task, f"s{run}", b, m + 0.05 * ti + rng.normal(0, noise)))
    frame = pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"])
    return ScoreTable.from_frame(frame, ScoreMeta(budget_unit="frames", score_kind="eval", source="synthetic",
                                                  normalized="synthetic"))


def _audit(curves, tasks, claims, seed=0) -> dict:
    table = _table(curves, tasks, seed=seed)
    claims = parse_claims(claims, "test")
    return run_audit(table, AuditSettings(reps=12_000, reps_pairwise=100, seed=0), claims).to_dict()


CURVES = {"DQN": (1.0, 1.1, 1.2), "Rainbow": (0.4, 1.12, 2.0), "IQN": (0.6, 1.15, 1.7), "C51": (0.3, 0.7, 1.0)}
CLAIMS = [{"better": "Rainbow", "worse": "DQN", "source": "Hessel et al. (2018)"},
          {"better": "IQN", "worse": "C51"},
          {"better": "Rainbow", "worse": "IQN", "budgets": [50_000_000, 200_000_000]}]


@pytest.fixture(scope="session")
def audit_doc() -> dict:
    doc = _audit(CURVES, ["Alien", "Breakout", "Pong", "Qbert", "Seaquest"], CLAIMS)
    # preconditions the report tests rely on: the audit must show every kind of finding
    assert any(i["kind"] == "confirmed" for i in doc["inversions"])
    assert {c["overall"].split(" ")[0] for c in doc["claims"]} >= {"holds", "mixed:"}
    assert any(p["verdict"] == "inconclusive" for c in doc["claims"] for p in c["per_budget"])
    assert any(o["decision"] == "inconclusive" for o in doc["orderings"])
    return doc


@pytest.fixture(scope="session")
def report_dir(audit_doc, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    build_report(audit_doc, out)
    return out


@pytest.fixture(scope="session")
def hostile_dir(tmp_path_factory) -> Path:
    curves = dict(zip(HOSTILE_ALGS, CURVES.values()))
    claims = [{"better": HOSTILE_ALGS[1], "worse": HOSTILE_ALGS[0]}]
    doc = _audit(curves, ["Pong", "50%_run", "a|b", "<b>bold</b>", "x$y^z~{w}\\"], claims, seed=1)
    out = tmp_path_factory.mktemp("hostile") / "out"
    build_report(doc, out)
    return out


def _scrub(text: str) -> str:
    text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?", "<TIME>", text)
    return re.sub(r"rlaudit \d+\.\d+\.\d+[\w.+-]*", "rlaudit <VERSION>", text)


class _Tables(html.parser.HTMLParser):
    """Collect every ``<table>``: its attributes and rows of ``(text, attrs)`` cells."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self.ids, self.imgs, self.links = [], None, [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "table":
            self.tables.append({"attrs": a, "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = ["", a]
        elif tag == "img":
            self.imgs.append(a.get("src", ""))
        elif tag in ("link", "script", "a", "iframe", "object", "embed"):
            self.links.append((tag, a))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append((self._cell[0].strip(), self._cell[1]))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data


def _parse_html(path: Path) -> _Tables:
    p = _Tables()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _md_cells(line: str) -> list[str]:
    """Split a GFM table row on unescaped pipes."""
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


# ------------------------------------------------------------------------------------------------ units
def test_format_budget():
    assert format_budget(100_000) == "100k"
    assert format_budget(10_000_000) == "10M"
    assert format_budget(200_000_000) == "200M"
    assert format_budget(1_500_000) == "1.5M"
    assert format_budget(400_000, "frames") == "400k frames"
    assert format_budget(100_000, "env_steps") == "100k environment steps"
    assert format_budget(1_000_000_000) == "1G"
    assert format_budget(500) == "500"


def test_format_number_and_interval():
    assert format_number(0.41234) == "0.412"
    assert format_number(1.15) == "1.150"
    assert format_number(-12.345) == "-12.35"
    assert format_number(1500.4) == "1500"
    assert format_number(None) == "\u2013"
    assert format_interval(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]"


def test_escape_functions():
    assert md_escape("a|b") == r"a\|b"
    assert md_escape("<script>alert(1)</script>") == "&lt;script>alert(1)&lt;/script>"
    assert md_escape("50%_run") == r"50%\_run"
    assert md_escape("A&B") == "A&amp;B"
    assert tex_escape("A&B") == r"A\&B"
    assert tex_escape("50%_run") == r"50\%\_run"
    assert tex_escape("<x>") == r"\textless{}x\textgreater{}"
    assert tex_escape("DrQ(\u03b5)") == r"DrQ(\ensuremath{\varepsilon})"
    assert tex_escape("a\\b{c}$#^~") == (r"a\textbackslash{}b\{c\}\$\#\textasciicircum{}\textasciitilde{}")


def test_parse_formats():
    assert parse_formats("html, md") == ("html", "md")
    with pytest.raises(InputError, match=r"--format: unknown format 'htlm' \(did you mean 'html'\?\)"):
        parse_formats("htlm")
    with pytest.raises(InputError, match="no format"):
        parse_formats(" , ")


def test_bad_audit_documents_name_the_key(audit_doc):
    with pytest.raises(InputError, match="schema_version 7 is not supported"):
        build_model({**audit_doc, "schema_version": 7})
    doc = {k: v for k, v in audit_doc.items() if k != "orderings"}
    with pytest.raises(InputError, match="audit.json: missing key 'orderings'"):
        build_model(doc)
    bad = json.loads(json.dumps(audit_doc))
    del bad["aggregates"][3]["point"]
    with pytest.raises(InputError, match=r"aggregates\[3\] lacks key 'point'"):
        build_model(bad)


def test_verdict_lists_most_important_findings_first(audit_doc):
    r = build_model(audit_doc)
    kinds = [f.kind for f in r.findings]
    assert kinds[0] == "info" and "orderings (IQM) are decided" in r.findings[0].text
    assert kinds[1] == "inversion" and r.findings[1].severity == "critical"
    sev = [f.severity for f in r.findings[1:]]
    assert sev == sorted(sev, key=["critical", "warning", "info"].index)
    text = " ".join(f.text for f in r.findings)
    assert "DQN > Rainbow at 10M frames" in text and "Rainbow > DQN at" in text
    assert "Claim \u201cRainbow > DQN\u201d is reversed at 10M frames" in text
    assert "Claim \u201cRainbow > IQN\u201d holds only at 200M frames" in text
    assert "Claim \u201cIQN > C51\u201d holds" in text
    # tested changes are findings; untested notes (decided at one budget only, swapped points) are not
    assert any(i["kind"] == "decided_once" for i in audit_doc["inversions"])
    assert "tested change(s) of a gap between budgets" in text
    assert "decided_once" not in text and "unconfirmed" not in text and "one budget but not" not in text


def test_answer_leads_the_verdict(audit_doc, report_dir):
    """The verdict opens with the between-budget answer: inversions with their crossover budgets, tested changes,
    then the runs that would decide each undecided pair, each read from the audit document."""
    r = build_model(audit_doc)
    assert [x.heading for x in r.answer] == ["Orderings that change between budgets",
                                             "Runs per task that would decide each undecided pair"]
    changes, runs = (x.text for x in r.answer)
    confirmed = {(i["a"], i["b"]) for i in audit_doc["inversions"] if i["kind"] == "confirmed"}
    assert changes.startswith(f"{len(confirmed)} confirmed inversion(s): ")
    for c in audit_doc["crossovers"]:
        assert (f"crossover between {format_budget(c['last_budget_before'])} and "
                f"{format_budget(c['first_budget_after'])}") in changes
    changed_only = {(i["a"], i["b"]) for i in audit_doc["inversions"] if i["kind"] == "changed"} - confirmed
    assert changed_only and f"{len(changed_only)} pair(s) whose gap changes (tested) without reversing" in changes
    for a, b in changed_only:
        assert f"{a} vs {b}: {a} \u2212 {b} " in changes
    undecided = [o for o in audit_doc["orderings"] if o["metric"] == "iqm" and o["decision"] == "inconclusive"]
    for o in undecided:
        n = f"> {o['runs_needed']}" if o["runs_needed_capped"] else str(o["runs_needed"])
        assert f"{n} at {format_budget(o['budget'])}" in runs and f"{o['a']} vs {o['b']}" in runs
    md = (report_dir / "report.md").read_text()
    verdict = md[md.index("## 1. Verdict"):md.index("## 2.")]
    assert verdict.index("Does the conclusion hold at another budget?") < verdict.index("1. **Orderings that change") \
        < verdict.index("2. **Runs per task") < verdict.index("**Findings**")
    html_text = (report_dir / "index.html").read_text()
    assert html_text.index('<ol class="answer">') < html_text.index("<h3>Findings</h3>")


def test_answer_says_what_the_design_can_detect_when_the_sweep_has_measured_it(audit_doc):
    """With a design-power note among the audit's notes, the first answer line says how often the design finds a
    crossing at the audit's fewest runs a task (8 here: the row measured at 5) and at the most measured; without
    one it says nothing of power."""
    assert "What this design can detect" not in build_model(audit_doc).answer[0].text
    cells = [PowerCell(n, shape, sd, pct) for n, shape, sd, pct in
             [(3, "gamma", 1, 0), (3, "heavy", 1, 2), (5, "gamma", 1, 11), (5, "heavy", 1, 17), (10, "gamma", 1, 90),
              (10, "heavy", 1, 96)]]
    doc = copy.deepcopy(audit_doc)
    note = f"{LEAD} (...): ... in {cells_text(cells, ['gamma', 'heavy'])}"
    doc["data"]["notes"] = [*doc["data"].get("notes", []), note]
    assert {int(d["n_runs"]) for d in doc["data"]["design"]} == {8}
    line = build_model(doc).answer[0].text
    assert line.endswith(" What this design can detect: a crossing of 1 between-run SD (one algorithm ahead at the "
                         "first budget, behind at the last) is found in 11–17 % of simulated audits of this design "
                         "with 5 runs a task (the fewest here are 8) and in 90–96 % with 10 (range over the shapes "
                         "gamma, heavy; the note in section 2).")
    assert line in _render_md(doc)


def test_answer_of_a_joined_rerun_names_published_orderings_learning_and_settings():
    """The recorded 250k flagship audit (a rerun joined with Dopamine's Atari 200M, random-policy references,
    declared settings): the five lines in order, their counts read from the document."""
    path = Path(__file__).resolve().parents[1] / "reports" / "dqn-family-minatar-250k" / "audit.json"
    doc = json.loads(path.read_text())
    r = build_model(doc)
    assert [x.heading for x in r.answer] == [
        "Orderings that change between budgets on minatar", "Published orderings at each budget",
        "Tasks where nothing has learned yet", "Settings vs published",
        "Runs per task that would decide each undecided pair"]
    _, published, learned, settings, _ = (x.text for x in r.answer)
    pa = doc["published_agreement"]
    assert f": of {len(pa['orderings'])} decided published orderings" in published
    for s in pa["summary"]:
        assert (f"at {format_budget(s['budget'], 'env_steps')}: {s['holds']} hold, {s['reversed']} reversed, "
                f"{s['inconclusive']} undecided") in published
    assert "a reversal can come from the suite as well as the budget" in published
    gone = doc["learning"]["nothing_learned"]
    assert learned.startswith("none:") == (not gone)
    n_dev = sum(1 for row in r.settings_published if row.key)
    assert settings.startswith(f"{n_dev} declared deviation(s)") and n_dev > 0
    n_keys = len({row.key for row in r.settings_published if row.key})
    assert f" in {n_keys} setting(s): " in settings
    assert (f"and {n_keys - 6} more setting(s) (table in section 2)." in settings) == (n_keys > 6)


# ------------------------------------------------------------------------------------------------ outputs
def test_all_outputs_written(report_dir, audit_doc):
    for name in ("index.html", "report.md", "tables.tex", "audit.json"):
        assert (report_dir / name).stat().st_size > 500, name
    for stem in STEMS:
        for ext in ("png", "svg", "pdf"):
            assert (report_dir / "figures" / f"{stem}.{ext}").stat().st_size > 1000, (stem, ext)
    assert json.loads((report_dir / "audit.json").read_text()) == audit_doc
    assert not [p for p in report_dir.iterdir() if p.name.startswith(".")], "staging left behind"


def test_sections_present_in_order(report_dir):
    headings = [h for _, h in SECTIONS]
    md = (report_dir / "report.md").read_text()
    md_heads = re.findall(r"^## \d+\. (.+)$", md, flags=re.M)
    assert md_heads == headings
    ids = [i for i in _parse_html(report_dir / "index.html").ids if i in dict(SECTIONS)]
    assert ids == [a for a, _ in SECTIONS]
    html_text = (report_dir / "index.html").read_text()
    for i, h in enumerate(headings, 1):
        assert f"<h2>{i}. {h}</h2>" in html_text
    assert html_text.count("<details>") >= len(BUDGETS)  # per-task detail collapsed


def test_html_is_self_contained(report_dir):
    p = _parse_html(report_dir / "index.html")
    text = (report_dir / "index.html").read_text()
    assert len(p.imgs) == len(STEMS)
    assert all(src.startswith("data:image/svg+xml;base64,") for src in p.imgs)
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text)
    assert not [t for t, _ in p.links if t in ("script", "iframe", "object", "embed")]
    assert [a.get("href") for t, a in p.links if t == "link"] == ["data:,"]  # the empty favicon only
    assert all(a.get("href", "").startswith("#") for t, a in p.links if t == "a")


def test_html_numbers_equal_audit(report_dir, audit_doc):
    p = _parse_html(report_dir / "index.html")
    agg = {(a["budget"], a["algorithm"], a["metric"]): a for a in audit_doc["aggregates"]}
    tables = [t for t in p.tables if t["attrs"].get("class") == "aggregates"]
    assert len(tables) == len(BUDGETS)
    n = 0
    for t in tables:
        b = int(t["attrs"]["data-budget"])
        for row in t["rows"][1:]:
            alg = row[0][0]
            for text, attrs in row[1:]:
                a = agg[(b, alg, attrs["data-metric"])]
                assert float(attrs["data-point"]) == a["point"]
                assert float(attrs["data-lo"]) == a["lo"] and float(attrs["data-hi"]) == a["hi"]
                assert text == format_interval(a["point"], a["lo"], a["hi"])
                n += 1
    assert n == len(audit_doc["aggregates"])
    # orderings: decision and P(A > B) of every pair at every budget
    (orders,) = [t for t in p.tables if t["attrs"].get("class") == "orderings"]
    seen = 0
    for row in orders["rows"][1:]:
        a, b = row[0][0].split(" vs ")
        for bi, budget in enumerate(audit_doc["budgets"]):
            o = next(o for o in audit_doc["orderings"] if o["budget"] == budget and (o["a"], o["b"]) == (a, b))
            dec_text, dec_attrs = row[1 + 2 * bi]
            p_text, p_attrs = row[2 + 2 * bi]
            assert dec_attrs["data-decision"] == o["decision"]
            assert dec_text == {"a>b": a, "b>a": b}.get(o["decision"], "\u2248")
            assert float(p_attrs["data-p-improvement"]) == o["p_improvement"]
            assert p_text == format_number(o["p_improvement"])
            seen += 1
    assert seen == len(audit_doc["orderings"])
    # per-task means
    cells = [(int(t["attrs"]["data-budget"]), row[0][0], c) for t in p.tables if t["attrs"].get("class") == "per-task"
             for row in t["rows"][1:] for c in row[1:]]
    assert len(cells) == len(audit_doc["per_task"])
    means = sorted(float(c[1]["data-mean"]) for _, _, c in cells)
    assert means == sorted(r["mean"] for r in audit_doc["per_task"])


def test_markdown_numbers_equal_audit(report_dir, audit_doc):
    md = (report_dir / "report.md").read_text()
    agg = {(a["budget"], a["algorithm"], a["metric"]): a for a in audit_doc["aggregates"]}
    metrics = audit_doc["settings"]["metrics"]
    n = 0
    for budget in audit_doc["budgets"]:
        block = md.split(f"**{format_budget(budget, 'frames')}**\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert _md_cells(block[0]) == ["Algorithm"] + [f"{m.upper() if m != 'og' else 'Optimality gap'} [CI]"
                                                       .replace("MEDIAN", "Median").replace("MEAN", "Mean")
                                                       for m in metrics]
        for line in block[2:]:
            cells = _md_cells(line)
            for m, cell in zip(metrics, cells[1:]):
                a = agg[(budget, cells[0], m)]
                assert cell == format_interval(a["point"], a["lo"], a["hi"])
                n += 1
    assert n == len(audit_doc["aggregates"])


def _render_md(doc: dict) -> str:
    """``report.md`` exactly as ``build_report`` writes it, without drawing the figures."""
    from rlaudit.report.render import render_text

    return render_text(build_model(doc), "md", {stem: {} for stem in STEMS})


def test_markdown_golden(report_dir, audit_doc):
    """``report.md`` of a frozen audit (``tests/golden/audit.json``, a ``run_audit`` output kept fixed so that
    audit-stage changes do not move this golden file) equals ``tests/golden/report.md``, times and versions
    scrubbed. Regenerate with ``RLAUDIT_UPDATE_GOLDEN=1`` after an intended change."""
    assert (report_dir / "report.md").read_text() == _render_md(audit_doc)  # the golden path is the real one
    if os.environ.get("RLAUDIT_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN_AUDIT.write_text(json.dumps(audit_doc, indent=1, ensure_ascii=False) + "\n")
    text = _scrub(_render_md(json.loads(GOLDEN_AUDIT.read_text())))
    if os.environ.get("RLAUDIT_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "report.md changed; if intended, rerun with RLAUDIT_UPDATE_GOLDEN=1"


def _tex_structure(tex: str) -> None:
    body = re.sub(r"(?<!\\)%.*", "", tex)
    begins = re.findall(r"\\begin\{(\w+\*?)\}", body)
    ends = re.findall(r"\\end\{(\w+\*?)\}", body)
    assert begins == [b for b in begins] and sorted(begins) == sorted(ends)
    assert body.count("\\toprule") == body.count("\\bottomrule") == body.count("\\begin{tabular}")
    assert body.count("{") - body.count("\\{") == body.count("}") - body.count("\\}")
    for spec, rows in re.findall(r"\\begin\{tabular\}\{([lrc]+)\}(.*?)\\end\{tabular\}", body, flags=re.S):
        for row in rows.split("\\\\")[:-1]:
            row = re.sub(r"\\(toprule|midrule|bottomrule)", "", row).strip()
            if row:
                assert len(re.findall(r"(?<!\\)&", row)) == len(spec) - 1, row


def _pdflatex(tex_dir: Path, preambles=("\\usepackage{booktabs}",)) -> None:
    """Compile ``tex_dir/tables.tex`` in a minimal two-column paper, once per preamble."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed (Debian: apt-get install texlive-latex-base texlive-latex-recommended;"
                    " `make latex` does it); the structural LaTeX check still ran")
    for preamble in preambles:
        (tex_dir / "doc.pdf").unlink(missing_ok=True)
        (tex_dir / "doc.tex").write_text("\\documentclass[twocolumn]{article}\n\\usepackage[T1]{fontenc}\n"
                                         f"{preamble}\n\\begin{{document}}\n\\input{{tables}}\n\\end{{document}}\n")
        proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tex_dir,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert (tex_dir / "doc.pdf").stat().st_size > 1000
        if "graphicx" in preamble:  # wide tables are shrunk to the column
            assert "Overfull \\hbox" not in (tex_dir / "doc.log").read_text(errors="replace")


def test_latex_tables_numbers_and_compile(report_dir, audit_doc, tmp_path):
    tex = (report_dir / "tables.tex").read_text()
    _tex_structure(tex)
    for a in audit_doc["aggregates"]:
        if a["metric"] == audit_doc["settings"]["metric"]:
            cell = f"{format_number(a['point'])} {{\\scriptsize [{format_number(a['lo'])}, {format_number(a['hi'])}]}}"
            assert cell.replace("-", "$-$") in tex
    assert "\\label{tab:rlaudit-claims}" in tex and "\\label{tab:rlaudit-orderings}" in tex
    shutil.copy(report_dir / "tables.tex", tmp_path / "tables.tex")
    _pdflatex(tmp_path, ("\\usepackage{booktabs}", "\\usepackage{booktabs}\n\\usepackage{graphicx}"))


# ------------------------------------------------------------------------------------------------ escaping
def test_escaping_html(hostile_dir):
    text = (hostile_dir / "index.html").read_text()
    assert "<script>" not in text and "<b>bold</b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "A&amp;B" in text and "50%_run" in text and "a|b" in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    p = _parse_html(hostile_dir / "index.html")
    (agg, *_) = [t for t in p.tables if t["attrs"].get("class") == "aggregates"]
    assert sorted(r[0][0] for r in agg["rows"][1:]) == sorted(HOSTILE_ALGS)


def test_escaping_markdown_tables_not_broken(hostile_dir):
    md = (hostile_dir / "report.md").read_text()
    assert "<script>" not in md and "<b>bold</b>" not in md
    lines = md.splitlines()
    n_tables = 0
    for i, line in enumerate(lines):
        if re.fullmatch(r"\|(-+:?\|)+", line):  # a delimiter row: its header above, body rows below
            n_tables += 1
            width = len(_md_cells(line))
            assert len(_md_cells(lines[i - 1])) == width, lines[i - 1]
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert len(_md_cells(lines[j])) == width, lines[j]
                j += 1
    assert n_tables >= 10
    assert r"a\|b" in md and "A&amp;B" in md and r"50%\_run" in md and "&lt;script>alert(1)&lt;/script>" in md


def test_escaping_latex_compiles(hostile_dir, tmp_path):
    tex = (hostile_dir / "tables.tex").read_text()
    _tex_structure(tex)
    assert r"\textless{}script\textgreater{}alert(1)\textless{}/script\textgreater{}" in tex
    assert r"A\&B" in tex and r"50\%\_run" in tex and r"a\textbar{}b" in tex
    assert "<script>" not in tex and "A&B" not in tex
    shutil.copy(hostile_dir / "tables.tex", tmp_path / "tables.tex")
    _pdflatex(tmp_path)


# ------------------------------------------------------------------------------------------------ failures
def test_exception_in_a_figure_leaves_no_report(audit_doc, tmp_path, monkeypatch):
    from rlaudit.report import plots

    def boom(report, axes=None):
        raise RuntimeError("figure failed")

    # one real figure is written into the staging folder before the failing one
    monkeypatch.setattr(plots, "FIGURES", plots.FIGURES[1:2] + (("profiles", "x", boom),))
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError, match="figure failed"):
        build_report(audit_doc, fresh)
    assert not fresh.exists()
    old = tmp_path / "old"
    old.mkdir()
    previous = '<meta name="generator" content="rlaudit 0.1.0">previous report'  # an earlier report's page
    (old / "index.html").write_text(previous)
    with pytest.raises(RuntimeError):
        build_report(audit_doc, old)
    assert sorted(p.name for p in old.iterdir()) == ["index.html"]
    assert (old / "index.html").read_text() == previous


def test_unwritable_dir_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "audit.json").write_text(json.dumps({"schema_version": 1}))
    res = CliRunner().invoke(_cli(), ["report", str(tmp_path / "audit.json"), "-o", str(blocker / "out")])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and res.output.startswith("error: ")
    assert not (blocker / "out").exists()


def test_unwritable_dir_python_api(audit_doc, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot create output directory"):
        build_report(audit_doc, blocker / "out")
    assert blocker.read_text() == "x"


# ------------------------------------------------------------------------------------------------ CLI
def _cli():
    from rlaudit.cli import main

    return main


def test_cli_audits_a_score_file_first(tmp_path, monkeypatch):
    from rlaudit.report import plots
    from rlaudit.scores import write_scores

    monkeypatch.setattr(plots, "FIGURES", plots.FIGURES[1:2])  # figures are covered above; keep this fast
    table = _table({"A": (1.0, 1.2, 1.4), "B": (0.5, 1.2, 2.0)}, ["t1", "t2", "t3"], n_runs=5)
    scores = tmp_path / "scores.csv"
    write_scores(table, scores)
    out = tmp_path / "rep"
    res = CliRunner().invoke(_cli(), ["report", str(scores), "-o", str(out), "--format", "md,json", "--reps", "1200",
                                      "--reps-pairwise", "100", "--budgets", "10000000,200000000",
                                      "--title", "My title"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["audit.json", "figures", "report.md"]
    doc = json.loads((out / "audit.json").read_text())
    assert doc["settings"]["reps"] == 1200 and doc["budgets"] == [10_000_000, 200_000_000]
    assert (out / "report.md").read_text().startswith("# My title\n")
    # the audit.json just written renders again, identically (no recomputation)
    out2 = tmp_path / "rep2"
    res = CliRunner().invoke(_cli(), ["report", str(out / "audit.json"), "-o", str(out2), "--format", "md",
                                      "--title", "My title"])
    assert res.exit_code == 0, res.output
    assert (out2 / "report.md").read_text() == (out / "report.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--format", "html,pdf"], "error: --format: unknown format 'pdf'"),
    (["--reps", "10"], "error: --reps: "),
])
def test_cli_bad_options(tmp_path, audit_doc, args, message):
    src = tmp_path / "audit.json"
    src.write_text(json.dumps(audit_doc))
    res = CliRunner().invoke(_cli(), ["report", str(src), "-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and res.output.startswith(message) and res.output.count("\n") == 1, res.output
    assert not (tmp_path / "o").exists()


def test_cli_json_that_is_not_an_audit(tmp_path):
    src = tmp_path / "DER.json"
    src.write_text('{"Pong": [1.0, 2.0]}')
    res = CliRunner().invoke(_cli(), ["report", str(src), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and res.output == (f"error: {src}: not an rlaudit audit.json (no schema_version); for a "
                                                 "published score file pass --from FORMAT (dopamine, rliable, curves, "
                                                 "…)\n"), res.output
    assert not (tmp_path / "o").exists()


def test_cli_bad_json(tmp_path):
    src = tmp_path / "audit.json"
    src.write_text('{"schema_version": 1,')
    res = CliRunner().invoke(_cli(), ["report", str(src), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and res.output.startswith(f"error: {src}: not valid JSON"), res.output


# ------------------------------------------------------------------------------------------------ real data
def test_real_atari100k_single_budget(shared_data, tmp_path):
    """Atari 100k final scores (one budget, 26 games, 100 runs) audited and rendered in every format."""
    rows = []
    for alg, fname in (("DER", "DER.json"), ("DrQ(\u03b5)", "DrQ(eps).json"), ("SPR", "SPR.json"),
                       ("OTR", "OTRainbow.json")):
        data = json.loads((shared_data / "atari100k" / fname).read_text())
        for game, scores in data.items():
            rows += [(alg, game, str(i), 100_000, float(s)) for i, s in enumerate(scores)]
    frame = pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"])
    table = ScoreTable.from_frame(frame, ScoreMeta(budget_unit="agent_steps", score_kind="eval",
                                                   source="atari100k"))
    doc = run_audit(table, AuditSettings(reps=2_400, reps_pairwise=100, normalization="atari"),
                    parse_claims([{"better": "SPR", "worse": "DER"}], "test")).to_dict()
    out = tmp_path / "atari"
    build_report(doc, out, formats="md,tex,json")
    md = (out / "report.md").read_text()
    assert "100k agent steps" in md and "DrQ(ε)" in md
    assert "Does the conclusion hold at another budget?" not in md  # one budget: no between-budget answer
    _tex_structure((out / "tables.tex").read_text())
    assert r"DrQ(\ensuremath{\varepsilon})" in (out / "tables.tex").read_text()


# ------------------------------------------------------------------------------------------------ browser
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--remote-debugging-pipe"]


class _DevTools:
    """Minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (fd 3 in, fd 4 out)."""

    def __init__(self, binary: str, user_dir: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={user_dir}", "about:blank"],
                                     preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout=30.0) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read(timeout)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout=30.0) -> dict:
        for e in self.events:
            if e.get("method") == method:
                return e
        while True:
            m = self._read(timeout)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def _browser_errors(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("method") in ("Runtime.exceptionThrown", "Network.loadingFailed")
            or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
            or (e.get("method") == "Network.responseReceived" and e["params"]["response"].get("status", 0) >= 400)]


def _open_page(cdp: _DevTools, session: str, path: Path) -> tuple[list[dict], dict]:
    """Load ``path``; return the error events of that load and facts read from the page."""
    cdp.events.clear()
    cdp.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
    cdp.wait_for("Page.loadEventFired")
    time.sleep(0.2)  # let late console messages arrive
    cdp.send("Runtime.evaluate", {"expression": "0"}, session=session)
    facts = cdp.send("Runtime.evaluate", {"returnByValue": True, "expression": (
        "({images: Array.from(document.images).map(i => i.complete && i.naturalWidth > 0),"
        " scripts: document.scripts.length, text: document.body.innerText})")}, session=session)["result"]["value"]
    return _browser_errors(cdp.events), facts


def test_html_in_headless_chromium(report_dir, hostile_dir, tmp_path):
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None:
        pytest.skip("Chromium not installed (Debian: apt-get install chromium; `make browser` does it)")
    from PIL import Image

    broken = tmp_path / "broken.html"  # proves the checks can fail: a missing image and a console error
    broken.write_text((report_dir / "index.html").read_text().replace(
        "</main>", '<img src="missing.png" alt=""><script>console.error("boom")</script></main>'))
    cdp = _DevTools(binary, tmp_path / "profile")
    try:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.send(f"{domain}.enable", session=s)
        cdp.send("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 1600, "deviceScaleFactor": 1,
                                                        "mobile": False}, session=s)
        errors, facts = _open_page(cdp, s, report_dir / "index.html")
        shot = cdp.send("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
        hostile_errors, hostile = _open_page(cdp, s, hostile_dir / "index.html")
        broken_errors, _ = _open_page(cdp, s, broken)
    finally:
        cdp.close()
    assert errors == []
    assert facts["images"] == [True] * len(STEMS) and facts["scripts"] == 0
    assert all(h in facts["text"] for _, h in SECTIONS)
    png = tmp_path / "screenshot.png"
    png.write_bytes(base64.b64decode(shot))
    pixels = np.asarray(Image.open(png).convert("L"))
    assert pixels.shape == (1600, 1200)
    assert (pixels < 200).mean() > 0.02, "screenshot is (almost) blank"
    # hostile names are shown as text and never run
    assert hostile_errors == [] and hostile["scripts"] == 0
    assert "<script>alert(1)</script>" in hostile["text"] and "<b>bold</b>" in hostile["text"]
    assert {e["method"] for e in broken_errors} >= {"Network.loadingFailed", "Runtime.consoleAPICalled"}


# ------------------------------------------------------------------------------------------------ typed rows
def _mutate(doc: dict, path: tuple, value) -> dict:
    """A deep copy of ``doc`` with the key at ``path`` set to ``value`` (``...`` deletes it)."""
    bad = json.loads(json.dumps(doc))
    node = bad
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return bad


@pytest.mark.parametrize("path, value, message", [
    (("changes", 2, "decision"), ..., "audit.json: changes[2] lacks key 'decision'"),
    (("changes", 0, "decision"), "reversed", "audit.json: changes[0].decision is 'reversed', expected 'changed' or "
                                             "'inconclusive'"),
    (("inversions", 1, "budget_low"), "10M", "audit.json: inversions[1].budget_low is '10M', expected an integer"),
    (("inversions", 0, "kind"), "lost", "audit.json: inversions[0].kind is 'lost', expected 'confirmed', 'changed', "
                                        "'decided_once', 'unconfirmed' or 'stable'"),
    (("claims", 0, "per_budget", 1, "verdict"), "fails", "audit.json: claims[0].per_budget[1].verdict is 'fails', "
                                                         "expected 'holds', 'reversed' or 'inconclusive'"),
    (("claims", 1, "text"), ..., "audit.json: claims[1] lacks key 'text'"),
    (("claims", 2, "budgets"), "all", "audit.json: claims[2].budgets is 'all', expected a list of integers"),
    (("checklist", 0), "few runs", "audit.json: checklist[0] is str, expected an object"),
    (("crossovers", 0, "from"), None, "audit.json: crossovers[0].from is None, expected 'a>b', 'b>a' or "
                                      "'inconclusive'"),
    (("metric_sensitivity", 0, "decisions", "og"), "?", "audit.json: metric_sensitivity[0].decisions['og'] is '?', "
                                                         "expected 'a>b', 'b>a' or 'inconclusive'"),
    (("aggregates", 5, "point"), "high", "audit.json: aggregates[5].point is 'high', expected a number"),
    (("orderings", 3, "runs_needed_capped"), "no", "audit.json: orderings[3].runs_needed_capped is 'no', expected "
                                                   "true or false"),
    (("orderings", 1, "df"), "abc", "audit.json: orderings[1].df is 'abc', expected a number"),
    (("orderings", 0, "past_replicates"), 3, "audit.json: orderings[0].past_replicates is 3, expected true or false"),
    (("inversions",), {"a": 1}, "audit.json: key 'inversions' has type dict, expected list"),
    (("per_task", 7, "n_runs"), "5", "audit.json: per_task[7].n_runs is '5', expected an integer"),
    (("profiles", 1, "taus"), ..., "audit.json: profiles[1] lacks key 'taus'"),
    (("profiles", 0, "fraction"), [0.5], "audit.json: profiles[0]: taus, fraction, lo and hi must be lists of the "
                                         "same length (taus without nulls)"),
])
def test_malformed_rows_name_the_row_and_key(audit_doc, path, value, message):
    with pytest.raises(InputError) as exc:
        build_model(_mutate(audit_doc, path, value))
    assert str(exc.value) == message


def test_cli_malformed_row_is_one_line_exit_2(audit_doc, tmp_path):
    src = tmp_path / "audit.json"
    src.write_text(json.dumps(_mutate(audit_doc, ("claims", 0, "per_budget", 0, "budget"), 1.5)))
    res = CliRunner().invoke(_cli(), ["report", str(src), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output == f"error: {src}: claims[0].per_budget[0].budget is 1.5, expected an integer\n", res.output
    assert not (tmp_path / "o").exists()


def test_malformed_published_agreement_names_the_entry(audit_doc):
    doc = {"published": {"name": "p"}, "rerun": {"budgets": [100]}, "metric": "iqm", "caveat": "c", "method": "m",
           "orderings": [{"better": "A", "worse": "B", "published_budgets": [1],
                          "per_budget": [{"budget": 100, "status": "fails"}]}], "summary": []}
    with pytest.raises(InputError) as exc:
        build_model({**audit_doc, "published_agreement": doc})
    assert str(exc.value) == ("audit.json: published_agreement.orderings[0].per_budget[0].status is 'fails', "
                              "expected 'holds', 'reversed', 'inconclusive' or 'not rerun'")
    del doc["orderings"][0]["per_budget"][0]["status"]
    with pytest.raises(InputError, match=r"^audit\.json: published_agreement\.orderings\[0\]\.per_budget\[0\] "
                                         r"lacks key 'status'$"):
        build_model({**audit_doc, "published_agreement": doc})
    doc["orderings"][0]["per_budget"][0]["status"] = "holds"
    doc["summary"] = [{"budget": 100, "holds": 1, "reversed": 0, "inconclusive": 0}]
    with pytest.raises(InputError, match=r"^audit\.json: published_agreement\.summary\[0\] lacks key 'not rerun'$"):
        build_model({**audit_doc, "published_agreement": doc})
    doc["summary"][0]["not rerun"] = 0
    a = build_model({**audit_doc, "published_agreement": doc}).agreement
    assert a.rows[0]["cells"] == [("holds", "holds")] and a.summary[0]["holds"] == 1


def test_summary_and_report_word_claims_and_decisions_alike(audit_doc, tmp_path):
    """The terminal summary and every report format read the same typed rows, so they say the same words."""
    from rich.console import Console

    from rlaudit.audit import AuditResult
    from rlaudit.audit.rows import decision_text
    from rlaudit.audit.summary import render_summary

    r = build_model(audit_doc)
    console = Console(record=True, width=400)
    render_summary(AuditResult.from_dict(audit_doc), console)
    summary = console.export_text()
    md = render_text(r, "md", {stem: {} for stem in STEMS})
    overall = [c.overall_text(r.budget) for c in r.claims]
    assert len(set(overall)) >= 2  # holds somewhere, mixed somewhere: the check can tell claims apart
    for c, text in zip(r.claims, overall):
        assert (f"| {text} |" if c.status == "inconclusive" else f"{c.status}: {text}") in md
        assert text in summary
    for c in r.crossovers:
        assert f"{decision_text(c.before, c.a, c.b)} up to {r.budget(c.last_budget_before)}" in summary
        assert decision_text(c.before, c.a, c.b) in md


def test_unbounded_interval_is_explained_in_every_format(audit_doc, tmp_path):
    from rlaudit.report.render import render_text

    figures = {stem: {} for stem in STEMS}
    assert "no bounded interval" not in _render_md(audit_doc)  # every interval of the fixture is bounded
    doc = copy.deepcopy(audit_doc)
    doc["settings"]["interval_method"] = "expanded"
    row = next(a for a in doc["aggregates"] if a["metric"] == doc["settings"]["metric"])
    row["lo"] = row["hi"] = None
    model = build_model(doc)
    md = render_text(model, "md", figures)
    assert format_interval(row["point"], None, None) in md and "effective degrees of freedom" in md
    assert "no bounded interval at this level" in render_text(model, "html", {})
    tex = render_text(model, "tex", figures)
    assert tex.count("no bounded interval at this level") == 2  # both aggregate captions
    _tex_structure(tex)
    (tmp_path / "tables.tex").write_text(tex)
    _pdflatex(tmp_path)
    assert md.count("no bounded interval at this level") == 1  # under the aggregates; every ordering is bounded
    assert "A dashed arrow" in md

    only_ordering = copy.deepcopy(audit_doc)
    only_ordering["settings"]["interval_method"] = "expanded"
    only_ordering["orderings"][0]["diff_lo"] = only_ordering["orderings"][0]["diff_hi"] = None
    md = render_text(build_model(only_ordering), "md", figures)
    assert md.count("no bounded interval at this level") == 1 and "effective degrees of freedom" in md
    assert "A dashed arrow" not in md  # the aggregates' figure has no unbounded side
    tex = render_text(build_model(only_ordering), "tex", figures)
    assert "effective degrees of freedom" in tex and tex.count("no bounded interval at this level") == len(
        build_model(only_ordering).budgets)  # every orderings caption, no aggregate caption

    both = copy.deepcopy(only_ordering)
    both["aggregates"] = doc["aggregates"]
    md = render_text(build_model(both), "md", figures)
    assert md.count("beyond the most extreme bootstrap") == 1  # explained once, under the aggregates
    assert md.count("no bounded interval at this level (why: the aggregate metrics' note)") == 1


def test_setup_names_the_normalisation_references_and_their_source():
    rng = np.random.default_rng(0)
    rows = [{"algorithm": a, "task": t, "run": str(r), "budget": 100, "score": float(rng.normal(mu + lo, 1))}
            for a, mu in (("A", 5.0), ("B", 6.0)) for t, lo in (("t1", 0.0), ("t2", 10.0)) for r in range(4)]
    table = ScoreTable.from_frame(pd.DataFrame(rows))
    norm = {"method": "minmax", "references": {"t1": [0, 10], "t2": [10, 20], "unused": [0, 1]},
            "source": "low: random policy; high: best agent"}
    doc = run_audit(table, AuditSettings(reps=400, reps_pairwise=100, normalization=norm)).to_dict()
    assert doc["data"]["normalization_detail"] == {"references": {"t1": [0.0, 10.0], "t2": [10.0, 20.0]},
                                                   "source": "low: random policy; high: best agent"}
    setup = dict(build_model(doc).setup)
    assert setup["Normalisation"] == ("minmax; (score − low) / (high − low) with [low, high] t1 [0.000, 10.00], "
                                      "t2 [10.00, 20.00]; low: random policy; high: best agent")
    raw = run_audit(table, AuditSettings(reps=400, reps_pairwise=100)).to_dict()
    assert "normalization_detail" not in raw["data"] and dict(build_model(raw).setup)["Normalisation"] == "none"
