"""The catalogue of published comparisons (issue 19): protocols, multi-source [data], single-run methods,
curve-reading notes, bad input, and the index builder."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from rlaudit.audit import run_audit
from rlaudit.audit.settings import AuditSettings
from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import content_sha256
from rlaudit.importers.curves import import_curves, nearest_gap
from rlaudit.importers.rliable_sets import import_rliable
from rlaudit.protocol import load_protocol
from rlaudit.report.catalogue import build_catalogue, missing_data, write_catalogue
from rlaudit.scores import ScoreMeta, ScoreTable
from rlaudit.sources import load_source

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RLAUDIT_SHARED_DATA", REPO.parent / "shared" / "data"))
PUBLISHED = sorted((REPO / "protocols" / "published").glob("*.toml"))
NEW = ["atari-200m-big-table", "atari100k-curves", "dmc-proprio", "dmc-vision", "dmlab30", "procgen",
       "minecraft-diamond"]


def _needs_data(proto: Path) -> None:
    reason = missing_data(proto, DATA)
    if reason:
        pytest.skip(reason)


@functools.lru_cache(maxsize=None)
def _source(name: str):
    """The imported source of a published protocol, shared by the tests (the Atari 200M import takes ~10 s)."""
    proto = REPO / "protocols" / "published" / f"{name}.toml"
    _needs_data(proto)
    return proto, load_source(proto, data_dir=DATA)


def _cli(*args):
    """``rlaudit ARGS``: (exit code, output lines)."""
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.output.strip().splitlines()


# ------------------------------------------------------------------------- every published protocol

@pytest.mark.parametrize("proto", PUBLISHED, ids=lambda p: p.stem)
def test_published_protocol_validates(proto):
    p = load_protocol(proto)
    assert p.is_published and p.citation and p.audit.budgets is not None or p.name == "atari100k"


def test_new_protocols_are_regenerated_identically_and_pinned(shared_data):
    make = runpy.run_path(str(REPO / "protocols" / "published" / "make_published.py"))
    builders = {"atari-200m-big-table": "atari_big_table", "atari100k-curves": "atari100k_curves",
                "dmc-proprio": "dmc_proprio", "dmc-vision": "dmc_vision", "dmlab30": "dmlab30", "procgen": "procgen",
                "minecraft-diamond": "minecraft"}
    for name, build in builders.items():
        path = REPO / "protocols" / "published" / f"{name}.toml"
        assert make[build](shared_data) == path.read_text(encoding="utf-8"), name
        for f in load_protocol(path).data["files"]:
            assert content_sha256(shared_data / f["path"]) == f["sha256"], f["path"]


@pytest.mark.parametrize("name", NEW)
def test_new_published_protocol_imports_and_selects(name):
    """The protocol's data verifies and imports, its [data] selection and claims fit the data, and the audit's
    selection step (budgets, common tasks, single-run methods) succeeds on the shared data."""
    from rlaudit.audit import engine
    from rlaudit.audit.claims import parse_claims
    from rlaudit.stats.normalize import parse_normalization

    proto, source = _source(name)
    protocol = load_protocol(proto)
    settings = AuditSettings.from_section(source.audit, str(proto))
    norm = parse_normalization(source.normalization, str(proto), proto.parent)
    settings = settings.override(normalization=norm)
    claims = parse_claims(list(source.claims), str(proto))
    sel = engine.select(source.table, settings, claims, str(proto))
    assert sel.budgets == list(protocol.audit.budgets)
    assert set(sel.algorithms) <= set(protocol.data["algorithms"])
    single = [f for f in sel.findings if f.id == "single-run"]
    assert set(sel.algorithms) | set(single[0].details["algorithms"] if single else ()) == \
        set(protocol.data["algorithms"])
    assert len(sel.tasks) >= 1


def test_big_table_sets_muzero_aside_and_counts_missing_values():
    from rlaudit.audit import engine

    proto, source = _source("atari-200m-big-table")
    notes = " | ".join(source.table.meta.notes)
    # atari57-dreamerv3 holds 5,266 nulls; the 2023 release 1,863 bare NaN tokens (data README).
    assert "dreamerv3: 5,266 missing values" in notes
    assert "DreamerV3 (2023): 1,863 missing values" in notes
    assert "distance from each budget to the recorded point read" in notes
    settings = AuditSettings.from_section(source.audit, str(proto)).override(normalization="atari")
    sel = engine.select(source.table, settings, (), str(proto))
    assert "MuZero" not in sel.algorithms
    finding = next(f for f in sel.findings if f.id == "single-run")
    assert "MuZero" in finding.message and set(finding.details["algorithms"]) == {"MuZero"}
    assert "Pong" in sel.tasks and "DQN (Adam + MSE in JAX)" not in sel.algorithms
    mixed = next(f for f in engine.checklist(sel, engine.calibration_doc(sel, settings)) if f["id"] == "mixed-score-kind")
    assert "train scores for C51, DQN, IQN, QR-DQN, Rainbow" in mixed["message"]


def test_procgen_audits_end_to_end(tmp_path):
    """One whole published audit (the smallest) through the CLI: report written, single-run method named."""
    proto = REPO / "protocols" / "published" / "procgen.toml"
    _needs_data(proto)
    out = tmp_path / "r"
    code, lines = _cli("report", proto, "--data", DATA, "-o", out, "--budgets", "10000000,50000000")
    assert code == 0, lines
    audit = json.loads((out / "audit.json").read_text())
    assert audit["data"]["algorithms"] == ["PPG", "PPO"]
    assert any(f["id"] == "single-run" and "DreamerV3" in f["message"] for f in audit["checklist"])
    assert "DreamerV3" in (out / "report.md").read_text()


# ------------------------------------------------------------------------------------- bad input

def _procgen_copy(tmp_path, edit) -> Path:
    src = REPO / "protocols" / "published" / "procgen.toml"
    _needs_data(src)
    dst = tmp_path / "bad.toml"
    dst.write_text(edit(src.read_text(encoding="utf-8")), encoding="utf-8")
    return dst


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace('"PPG", "PPO"]', '"PPG", "PPO", "MuZero"]'),
     "data: algorithms[3]: 'MuZero' is not in the data"),
    # procgen's runs end at 5e7 steps: 9e7 (in [data].options and [audit]) is beyond every run.
    (lambda t: t.replace("50_000_000]", "50_000_000, 90_000_000]"), "audit.budgets: budget 90000000 is not in"),
    (lambda t: t + '\n[[claims]]\nbetter = "PPG"\nworse = "IMPALA"\ntext = "PPG beats IMPALA"\n',
     "claims[0]: unknown algorithm 'IMPALA'"),
], ids=["method-not-in-source", "budget-beyond-every-run", "claim-unknown-algorithm"])
def test_bad_published_protocol_is_one_line_exit_2_nothing_written(tmp_path, edit, expected):
    proto = _procgen_copy(tmp_path, edit)
    out = tmp_path / "out"
    code, lines = _cli("report", proto, "--data", DATA, "-o", out)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(proto.name) in lines[0], lines
    assert expected in lines[0]
    assert not out.exists()


# --------------------------------------------------------------------------- importers and engine

def _curves_file(path: Path, runs: list[dict]) -> Path:
    path.write_text(json.dumps(runs).replace("null", "NaN"), encoding="utf-8")
    return path


def test_curves_notes_count_missing_values_and_distances(tmp_path):
    f = _curves_file(tmp_path / "c.json", [
        {"task": "t", "method": "m", "seed": 0, "xs": [0, 90, 190], "ys": [1.0, None, 3.0]},
        {"task": "t", "method": "m", "seed": 1, "xs": [0, 100, 180], "ys": [1.0, 2.0, None]},
    ])
    table = import_curves([f], budgets=[100, 200], max_staleness=30)
    notes = " | ".join(table.meta.notes)
    assert "m: 2 missing values (null/NaN) in 2 run(s)" in notes
    # budget 100: seed 0 reads x=0 (NaN at 90 skipped) -> too stale; seed 1 reads x=100 (distance 0).
    # budget 200: seed 0 reads x=190 (10); seed 1 reads x=100 (100 > 30) -> no score.
    assert "100: median 0, max 0; 200: median 10, max 10" in notes
    assert "1 run(s) yield no score at budget 100: m/t/seed 0" in notes
    assert sorted(table.frame["score"]) == [2.0, 3.0]


def test_nearest_gap_linear_takes_the_nearer_bracketing_point():
    xs, ys = np.array([0.0, 10.0, 40.0]), np.array([0.0, 1.0, 2.0])
    assert nearest_gap(xs, ys, np.array([12.0, 35.0, 50.0]), "linear").tolist() == [2.0, 5.0, 10.0]
    assert nearest_gap(xs, ys, np.array([12.0, 35.0]), "last").tolist() == [2.0, 25.0]


def test_rliable_curves_read_at_budgets_by_the_last_rule(tmp_path):
    f = tmp_path / "DER.json"
    f.write_text(json.dumps([{"iteration": i, "eval_average_return": float(10 * i), "game": "Pong",
                              "run_number": r, "agent": "DER"} for r in (1, 2) for i in range(10)]))
    table = import_rliable([f], budget_per_iteration=40_000, budget_unit="frames", budgets=[100_000, 400_000],
                           max_staleness=40_000)
    got = table.frame.groupby("budget")["score"].apply(list).to_dict()
    assert got == {100_000: [10.0, 10.0], 400_000: [90.0, 90.0]}  # 100k read at iteration 1 (80k frames)
    assert "100,000: median 20,000, max 20,000" in " | ".join(table.meta.notes)


def test_single_run_algorithm_is_set_aside_and_named():
    rows = []
    for b in (1, 2):
        for t in ("t1", "t2"):
            rows += [("A", t, str(r), b, 1.0 + r) for r in range(3)]
            rows += [("B", t, str(r), b, 0.5 * b + r) for r in range(3)]
            rows.append(("C", t, "0", b, {"t1": 4.0, "t2": 6.0}[t] * b))
    table = ScoreTable.from_frame(pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"]),
                                  ScoreMeta(budget_unit="env_steps"))
    result = run_audit(table, AuditSettings(metric="mean", reps=2000)).to_dict()
    assert result["data"]["algorithms"] == ["A", "B"]
    assert all("C" not in (o["a"], o["b"]) for o in result["orderings"])
    finding = next(f for f in result["checklist"] if f["id"] == "single-run")
    assert finding["details"]["algorithms"]["C"] == {"n_tasks": {"1": 2, "2": 2}, "points": {"1": 5.0, "2": 10.0}}
    assert "C (mean over the audited tasks it has, of 2; by budget in env_steps: 1: 5 (2 tasks), 2: 10 (2 tasks))" \
        in finding["message"]


def test_single_run_everywhere_is_still_refused():
    rows = [(a, t, "0", 1, 1.0) for a in ("A", "B") for t in ("t1", "t2")]
    table = ScoreTable.from_frame(pd.DataFrame(rows, columns=["algorithm", "task", "run", "budget", "score"]))
    with pytest.raises(InputError, match="a single run"):
        run_audit(table, AuditSettings(reps=2000))


# ------------------------------------------------------------------------------- catalogue builder

def _small_protocol(root: Path, name: str, data_dir: Path, reverse: bool) -> Path:
    """Two algorithms on two tasks at two budgets; with ``reverse`` A wins clearly at 100k and loses at 500k."""
    rng = np.random.default_rng(0)
    files = []
    for alg, lo, hi in (("A", 0.9, 0.1), ("B<b>", 0.1, 0.9)) if reverse else (("A", 0.9, 0.9), ("B<b>", 0.1, 0.1)):
        doc = {str(k): {t: (v + 0.01 * rng.standard_normal(6)).tolist() for t in ("t1", "t2")}
               for k, v in (("100000", lo), ("500000", hi))}
        rel = f"{name}/{alg[0]}.json"
        (data_dir / name).mkdir(parents=True, exist_ok=True)
        (data_dir / rel).write_text(json.dumps(doc))
        sha = hashlib.sha256((data_dir / rel).read_bytes()).hexdigest()
        files.append(f'[[data.files]]\npath = "{rel}"\nurl = "https://example.org/{rel}"\nsha256 = "{sha}"\n'
                     f'options = {{ algorithm = "{alg}" }}\n')
    text = (f'schema_version = 1\nname = "{name}"\ntitle = "Small {name}"\ncitation = "test"\n\n[data]\n'
            f'format = "rliable"\noptions = {{ budget_unit = "env_steps" }}\n\n' + "\n".join(files) +
            '\n[audit]\nmetric = "mean"\nbudgets = [100_000, 500_000]\n\n'
            '[[claims]]\nbetter = "A"\nworse = "B<b>"\ntext = "A outperforms B<b>"\nsource = "Paper, Table 1"\n')
    path = root / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_catalogue_from_two_small_protocols_one_without_data(tmp_path):
    data, reports = tmp_path / "data", tmp_path / "reports"
    data.mkdir()
    flips = _small_protocol(tmp_path, "flips", data, reverse=True)
    gone = _small_protocol(tmp_path, "gone", data, reverse=False)
    for f in (data / "gone").iterdir():
        f.unlink()
    code, lines = _cli("report", flips, "--data", data, "-o", reports / "flips", "--format", "json")
    assert code == 0, lines
    reason = missing_data(gone, data)
    assert reason.startswith("data missing: 2 of 2 files") and "gone/A.json" in reason
    assert missing_data(flips, data) == ""

    cat = build_catalogue([flips, gone], reports, tmp_path, {"gone": reason})
    assert cat.headline == ("1 of 1 published comparisons have a confirmed ranking inversion across budgets; "
                            "1 of 1 published claims do not hold at every audited budget")
    flips_entry, gone_entry = cat.entries
    assert flips_entry.algorithms == ("A", "B<b>") and flips_entry.n_tasks == 2
    assert flips_entry.runs_per_task == "A 6; B<b> 6" and flips_entry.budgets == ("100k", "500k environment steps")
    assert [(i.winner_low, i.budgets_low, i.winner_high, i.budgets_high) for i in flips_entry.inversions] == \
        [("A", ("100k",), "B<b>", ("500k",))]
    assert flips_entry.claim_counts() == {"holds": 0, "reversed": 1, "inconclusive": 0}
    assert flips_entry.claims[0].per_budget == "100k: holds, 500k: reversed"
    assert gone_entry.report is None and gone_entry.reason == reason

    write_catalogue(cat, reports)
    html = (reports / "index.html").read_text()
    md = (reports / "README.md").read_text()
    assert cat.headline in html and f"**{cat.headline}.**" in md.splitlines()[2]
    assert 'href="flips/index.html"' in html and "(flips/report.md)" in md
    assert "A > B&lt;b&gt; at 100k, reversed at 500k" in html and "A > B&lt;b> at 100k, reversed at 500k" in md
    assert "B&lt;b&gt;" in html and "B<b>" not in html
    assert "not audited: data missing" in html and "not audited: data missing" in md


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace('[data]\n', '[data]\ntask_names = "atarii"\n'),
     "data: field 'task_names' must be one of atari"),
    (lambda t: t.replace('[data]\n', '[data]\ntask_names = "atari"\n'), "data: task_names = 'atari': t1, t2 are not"),
    (lambda t: t.replace('[data]\n', '[data]\nrename = { Z = "Y" }\n'),
     "data: rename: 'Z' is not an algorithm of the data"),
    (lambda t: t.replace('[data]\n', '[data]\nalgorithms = "A"\n'),
     "data: field 'algorithms' must be a non-empty array"),
    (lambda t: t.replace('options = { algorithm = "A" }', 'format = "curvs"\noptions = { algorithm = "A" }'),
     "data: files: field 'format': unknown format 'curvs' (did you mean 'curves'?)"),
    (lambda t: t.replace('options = { algorithm = "A" }', 'format = "curves"\noptions = { algorithm = "A" }')
              .replace('options = { budget_unit = "env_steps" }', 'options = { layout = "budgets" }'),
     "data: options: unknown option 'layout' for format 'curves'"),
], ids=["task-names-value", "task-names-not-atari", "rename-unknown", "algorithms-type", "file-format-unknown",
        "shared-option-unfit-for-a-file-format"])
def test_bad_data_selection_is_one_line_exit_2(tmp_path, edit, expected):
    data = tmp_path / "data"
    data.mkdir()
    proto = _small_protocol(tmp_path, "flips", data, reverse=True)
    proto.write_text(edit(proto.read_text(encoding="utf-8")), encoding="utf-8")
    out = tmp_path / "out"
    code, lines = _cli("report", proto, "--data", data, "-o", out)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and "flips.toml" in lines[0], lines
    assert expected in lines[0], lines
    assert not out.exists()


def test_catalogue_refuses_a_broken_audit_json(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    proto = _small_protocol(tmp_path, "flips", data, reverse=True)
    (tmp_path / "reports" / "flips").mkdir(parents=True)
    (tmp_path / "reports" / "flips" / "audit.json").write_text("{not json")
    with pytest.raises(InputError, match=r"flips/audit.json: not a valid audit.json"):
        build_catalogue([proto], tmp_path / "reports", tmp_path)
