"""``rlaudit audit`` through the real command line: bad inputs, reproducibility, published Atari 100k data."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from click.testing import CliRunner

from rlaudit.cli import main

GOOD = "algorithm,task,run,budget,score\n" + "".join(
    f"{a},{t},{r},{b},{s}\n" for a, base in (("A", 1.0), ("B", 0.5)) for t in ("x", "y") for b in (10, 20)
    for r, s in enumerate(np.round(np.random.default_rng(0).normal(base, 0.2, 10), 4)))


def invoke(args: list[str]):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    return result.exit_code, result.stdout, result.stderr, result.exception


def assert_bad_input(tmp_path: Path, args: list[str], *fragments: str) -> str:
    """Exit 2, exactly one line on stderr naming the problem, no traceback, nothing written."""
    out = tmp_path / "out"
    code, stdout, stderr, exc = invoke(["audit", "--reps", "200", "--out", str(out), *args])
    assert code == 2, (code, stdout, stderr, exc)
    assert isinstance(exc, SystemExit), exc
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr + stdout
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert not out.exists(), "nothing may be written on bad input"
    return lines[0]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ----------------------------------------------------------------------------------------- bad input

def test_missing_or_misspelled_column(tmp_path):
    p = write(tmp_path, "s.csv", GOOD.replace("score\n", "scor\n", 1))
    assert_bad_input(tmp_path, [str(p)], "s.csv", "missing column 'score'", "did you mean 'scor'")


@pytest.mark.parametrize("bad, what", [("abc", "not numeric"), ("nan", "NaN"), ("inf", "infinite")])
def test_bad_scores_name_rows(tmp_path, bad, what):
    lines = GOOD.splitlines()
    lines[3] = ",".join(lines[3].split(",")[:4] + [bad])
    p = write(tmp_path, "s.csv", "\n".join(lines) + "\n")
    assert_bad_input(tmp_path, [str(p)], "s.csv", what, "line 4")


def test_duplicate_rows(tmp_path):
    lines = GOOD.splitlines()
    p = write(tmp_path, "s.csv", "\n".join(lines + [lines[5]]) + "\n")
    assert_bad_input(tmp_path, [str(p)], "duplicate (algorithm, task, run, budget)", "line 6")


def test_requested_budget_missing_for_some_algorithm(tmp_path):
    extra = "".join(f"A,{t},{r},30,1.0\n" for t in ("x", "y") for r in range(10))
    p = write(tmp_path, "s.csv", GOOD + extra)
    assert_bad_input(tmp_path, [str(p), "--budgets", "10,30"], "--budgets", "budget 30 is missing for B")


def test_single_run_for_a_task(tmp_path):
    lines = [ln for ln in GOOD.splitlines() if not (ln.startswith("B,x,") and ",10," in ln and
                                                     not ln.startswith("B,x,0,"))]
    p = write(tmp_path, "s.csv", "\n".join(lines) + "\n")
    assert_bad_input(tmp_path, [str(p)], "a single run for B/x/budget 10")


def test_empty_file(tmp_path):
    p = write(tmp_path, "s.csv", "")
    assert_bad_input(tmp_path, [str(p)], "s.csv", "empty")
    p = write(tmp_path, "h.csv", "algorithm,task,run,budget,score\n")
    assert_bad_input(tmp_path, [str(p)], "h.csv", "no score rows")


def test_claims_naming_unknown_algorithm(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    c = write(tmp_path, "claims.toml", '[[claims]]\nbetter = "AA"\nworse = "B"\n')
    assert_bad_input(tmp_path, [str(p), "--claims", str(c)], "claims.toml: claims[0]", "unknown algorithm 'AA'",
                     "did you mean 'A'")


def test_unknown_normalisation(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    assert_bad_input(tmp_path, [str(p), "--normalize", "atary"], "--normalize", "atary")


def test_task_without_reference_scores(tmp_path):
    p = write(tmp_path, "s.csv", GOOD.replace(",x,", ",Pong,").replace(",y,", ",NotAGame,"))
    line = assert_bad_input(tmp_path, [str(p), "--normalize", "atari"], "NotAGame")
    assert "Pong" not in line.split("NotAGame")[0].split(":")[-1]


@pytest.mark.parametrize("args, fragment", [
    (["--metric", "iqr"], "--metric: unknown metric 'iqr' (did you mean 'iqm'?)"),
    (["--reps", "many"], "--reps: 'many' is not an integer"),
    (["--alpha", "2"], "--alpha: must be between 0 and 1"),
    (["--budgets", "10,x"], "--budgets: 'x' is not an integer budget"),
    (["--ci-method", "student"], "--ci-method: unknown interval method 'student'"),
    (["--ci-method", "expand"], "did you mean 'expanded'"),
    (["--min-effect", "0"], "--min-effect: the smallest effect of interest must be positive, got 0.0"),
    (["--min-effect", "-0.1"], "--min-effect: the smallest effect of interest must be positive"),
    (["--min-effect", "big"], "--min-effect: 'big' is not a number"),
    (["--correction", "maxT"], "--correction: unknown correction 'maxT' (did you mean 'maxt'?)"),
])
def test_bad_options(tmp_path, args, fragment):
    p = write(tmp_path, "s.csv", GOOD)
    assert_bad_input(tmp_path, [str(p), *args], fragment)


def test_missing_file_via_subprocess(tmp_path):
    """The installed entry point: one line, exit 2, no traceback."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rlaudit", "audit", str(tmp_path / "nope.csv"), "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.csv'}: no such file or directory"]
    assert not out.exists()


# ------------------------------------------------------------------------------------------ success

def test_audit_writes_json_and_is_reproducible(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    c = write(tmp_path, "claims.toml", '[[claims]]\nbetter = "A"\nworse = "B"\ntext = "A beats B"\n')
    docs = []
    for out in ("o1", "o2"):
        code, stdout, stderr, exc = invoke(["audit", str(p), "--reps", "1200", "--seed", "3", "--claims", str(c),
                                            "--normalize", "none", "--out", str(tmp_path / out)])
        assert code == 0, (stderr, exc)
        assert "ranking by IQM" in stdout and "A beats B" in stdout and "Checklist" in stdout
        text = (tmp_path / out / "audit.json").read_text(encoding="utf-8")
        docs.append("\n".join(ln for ln in text.splitlines() if not ln.startswith(' "created": ')))
    assert docs[0] == docs[1]  # byte for byte, apart from the timestamp line
    doc = json.loads((tmp_path / "o1" / "audit.json").read_text())
    assert doc["settings"]["seed"] == 3 and doc["settings"]["reps"] == 1200 and doc["budgets"] == [10, 20]
    assert doc["claims"][0]["overall"] == "holds at all budgets"
    code, *_ = invoke(["audit", str(p), "--reps", "1200", "--seed", "4", "--out", str(tmp_path / "o3")])
    assert code == 0
    other = json.loads((tmp_path / "o3" / "audit.json").read_text())
    assert other["aggregates"] != doc["aggregates"]


def test_flags_select_budgets_metric_and_correction(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    code, stdout, stderr, exc = invoke(["audit", str(p), "--reps", "2000", "--budgets", "20", "--metric", "median",
                                        "--correction", "bonferroni", "--alpha", "0.01", "--gamma", "0.8",
                                        "--ci-method", "bca", "--min-effect", "0.05", "--quiet",
                                        "--out", str(tmp_path / "o")])
    assert code == 0, (stderr, exc)
    assert stdout == ""
    doc = json.loads((tmp_path / "o" / "audit.json").read_text())
    s = doc["settings"]
    assert (doc["budgets"], s["metric"], s["correction"], s["alpha"], s["gamma"], s["interval_method"]) == \
        ([20], "median", "bonferroni", 0.01, 0.8, "bca")
    assert doc["orderings"][0]["metric"] == "median" and s["small_sample"] is False and s["min_effect"] == 0.05
    assert "Bonferroni over 1 ordering(s) (pairs x budgets) and 0 change test(s)" in s["correction_description"]


def test_too_few_replicates_for_the_family_refused(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    # 1 pair x 2 budgets + 1 change test = 3 tests: 20 * 3 / 0.05 = 1,200 replicates
    assert_bad_input(tmp_path, [str(p), "--reps", "1199"], "--reps: 1199 replicates cannot resolve", "--reps 1200")


def test_protocol_audit_section_resolved_once(tmp_path):
    """[audit] keys are honoured (power, ci_method, small_sample, min_effect), flags override them, and a bad
    value names the protocol key, not a flag the user never typed."""
    from rlaudit.audit import AuditSettings
    from rlaudit.errors import InputError

    s = AuditSettings.from_section({"power": 0.99, "ci_method": "percentile", "min_effect": 0.1,
                                    "small_sample": False, "reps": 2000}, "p.toml")
    assert (s.power, s.interval_method, s.min_effect, s.reps) == (0.99, "percentile", 0.1, 2000)
    assert s.override(reps=5000, power=None).reps == 5000 and s.override(power=None).power == 0.99
    old = AuditSettings.from_section({"small_sample": True}, "p.toml")
    assert old.scheme == "expanded" and old.override(interval_method="percentile").scheme == "percentile"
    with pytest.raises(InputError, match=r"^p\.toml: audit\.reps: need at least 100"):
        AuditSettings.from_section({"reps": 10}, "p.toml").check()
    with pytest.raises(InputError, match=r"^--reps: need at least 100"):
        AuditSettings.from_section({"reps": 10}, "p.toml").override(reps=20).check()
    with pytest.raises(InputError, match=r"^p\.toml: audit\.powr: unknown key \(did you mean 'power'\?\)"):
        AuditSettings.from_section({"powr": 0.9}, "p.toml")
    with pytest.raises(InputError, match=r"^p\.toml: audit\.min_effect: .* must be positive"):
        AuditSettings.from_section({"min_effect": -1}, "p.toml").check()


# --------------------------------------------------------------------------- published Atari 100k data

ALGORITHMS = {"DER": "DER.json", "DrQ(eps)": "DrQ(eps).json", "SPR": "SPR.json", "OTR": "OTRainbow.json"}


def _atari100k_csv(shared: Path, path: Path) -> dict[str, tuple[float, float]]:
    """Tidy CSV of Atari 100k final scores (raw); CURL's human-normalised scores are mapped back to raw
    with the same reference table. Returns the (random, human) references used."""
    with open(shared / "atari_reference_scores.csv", encoding="utf-8") as fh:
        ref = {r["game"]: (float(r["random"]), float(r["human"])) for r in csv.DictReader(fh)}
    rows = []
    for alg, name in ALGORITHMS.items():
        for game, scores in json.loads((shared / "atari100k" / name).read_text()).items():
            rows += [(alg, game, i, 100_000, s) for i, s in enumerate(scores)]
    for rec in json.loads((shared / "atari100k" / "CURL_10_evals.json").read_text()):
        lo, hi = ref[rec["game"]]
        rows.append(("CURL", rec["game"], int(rec["seed"]), 100_000, repr(rec["HNS"] * (hi - lo) + lo)))
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write('# rlaudit.budget_unit: "agent_steps"\n')
        w = csv.writer(fh)
        w.writerow(["algorithm", "task", "run", "budget", "score"])
        w.writerows(rows)
    return ref


def test_end_to_end_atari100k(tmp_path, shared_data):
    scores = tmp_path / "atari100k.csv"
    ref = _atari100k_csv(shared_data, scores)
    claims = write(tmp_path, "claims.toml", '[[claims]]\nbetter = "CURL"\nworse = "DER"\ntext = "CURL > DER"\n'
                                            '[[claims]]\nbetter = "SPR"\nworse = "DER"\n')
    code, stdout, stderr, exc = invoke(["audit", str(scores), "--normalize", "atari", "--claims", str(claims),
                                        "--reps", "4000", "--reps-pairwise", "200", "--out", str(tmp_path / "o")])
    assert code == 0, (stderr, exc)
    doc = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert doc["data"]["budget_unit"] == "agent_steps" and doc["data"]["normalization"] == "atari"
    assert len(doc["data"]["tasks"]) == 26 and doc["budgets"] == [100_000]

    # Independent IQM of SPR's human-normalised scores.
    spr = json.loads((shared_data / "atari100k" / "SPR.json").read_text())
    hns = np.concatenate([(np.asarray(v) - ref[g][0]) / (ref[g][1] - ref[g][0]) for g, v in spr.items()])
    iqm = next(r for r in doc["aggregates"] if r["algorithm"] == "SPR" and r["metric"] == "iqm")
    assert iqm["point"] == pytest.approx(scipy.stats.trim_mean(hns, 0.25), abs=1e-12)
    assert iqm["lo"] < iqm["point"] < iqm["hi"]

    verdicts = {c["text"]: c for c in doc["claims"]}
    for c in verdicts.values():
        assert c["per_budget"][0]["verdict"] in ("holds", "reversed", "inconclusive")
        assert c["overall"]
    # The published result (Agarwal et al. 2021, Fig. 1): SPR's IQM is well above DER's at 100k steps.
    assert verdicts["SPR > DER"]["overall"] == "holds at all budgets"
    curl = verdicts["CURL > DER"]["per_budget"][0]
    assert curl["verdict"] == {"a>b": "holds", "b>a": "reversed"}.get(curl["decision"], "inconclusive")
    assert ("CURL > DER" in stdout) and ("SPR > DER" in stdout)


def test_protocol_defaults_and_flag_overrides(tmp_path, monkeypatch):
    """A protocol's [audit], [normalization] and [[claims]] are defaults; flags override them."""
    import rlaudit.sources
    from rlaudit.scores import read_scores
    from rlaudit.sources import Source

    p = write(tmp_path, "s.csv", GOOD)
    proto = tmp_path / "proto.toml"
    source = Source(read_scores(p), str(proto), protocol="demo", title="Demo comparison",
                    normalization={"method": "divide", "divisor": 2.0},
                    audit={"metric": "median", "budgets": [20], "power": 0.99, "ci_method": "percentile"},
                    claims=({"better": "B", "worse": "A", "where": f"{proto}: claims[0]"},))
    monkeypatch.setattr(rlaudit.sources, "load_source", lambda *a, **k: source)
    code, stdout, stderr, exc = invoke(["audit", str(proto), "--reps", "1200", "--quiet", "--out", str(tmp_path / "o")])
    assert code == 0, (stderr, exc)
    doc = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert (doc["settings"]["metric"], doc["budgets"], doc["data"]["normalization"]) == ("median", [20], "divide:2")
    assert (doc["settings"]["power"], doc["settings"]["interval_method"]) == (0.99, "percentile")
    assert doc["source"]["protocol"] == "demo" and doc["source"]["title"] == "Demo comparison"
    assert doc["claims"][0]["overall"] == "reversed at all budgets"
    iqm_a = next(r["point"] for r in doc["aggregates"] if r["algorithm"] == "A" and r["metric"] == "median")
    raw = [float(ln.split(",")[4]) for ln in GOOD.splitlines()[1:] if ln.startswith("A,") and ",20," in ln]
    assert iqm_a == pytest.approx(np.median([np.mean(raw[:10]), np.mean(raw[10:])]) / 2, abs=1e-12)

    code, *_ = invoke(["audit", str(proto), "--reps", "1200", "--quiet", "--metric", "iqm", "--budgets", "10,20",
                       "--normalize", "none", "--out", str(tmp_path / "o2")])
    assert code == 0
    doc = json.loads((tmp_path / "o2" / "audit.json").read_text())
    assert (doc["settings"]["metric"], doc["budgets"], doc["data"]["normalization"]) == ("iqm", [10, 20], "none")
    # the protocol's claim names B and A: still checked, now at both budgets
    assert doc["claims"][0]["budgets"] == [10, 20]


def test_summary_prints_names_literally(tmp_path):
    text = GOOD.replace("A,", "[red]A[/red],").replace("B,", "B[x],")
    p = write(tmp_path, "s.csv", text)
    code, stdout, stderr, exc = invoke(["audit", str(p), "--reps", "1200", "--out", str(tmp_path / "o")])
    assert code == 0, (stderr, exc)
    assert "B[x] vs [red]A[/red]" in stdout and "[red]A[/red] > B[x]" in stdout


def test_protocol_file_audit_section_keys(tmp_path):
    """The loader hands [audit] to AuditSettings.from_section: power and the new keys load, bad values and
    unknown keys are one line naming `file: audit.KEY`."""
    from rlaudit.audit import AuditSettings
    from rlaudit.errors import InputError
    from rlaudit.protocol import parse_protocol

    base = (Path(__file__).resolve().parents[1] / "protocols" / "quickstart.toml").read_text(encoding="utf-8")
    text = base.replace('[audit]\nmetric = "iqm"\n', '[audit]\nmetric = "iqm"\npower = 0.99\nci_method = "percentile"\n'
                        'small_sample = false\nmin_effect = 0.1\n')
    proto = parse_protocol(text, "q.toml", base_dir=tmp_path)
    s = AuditSettings.from_section(proto.audit.to_dict(), "q.toml")
    assert (s.power, s.interval_method, s.min_effect) == (0.99, "percentile", 0.1)
    for key, value, fragment in (("reps", "10", "q.toml: audit.reps: need at least 100"),
                                 ("powr", "0.9", "q.toml: audit.powr: unknown key (did you mean 'power'?)"),
                                 ("metric", '"iqr"', "q.toml: audit.metric: unknown metric 'iqr'"),
                                 ("ci_method", '"student"', "q.toml: audit.ci_method: unknown interval method")):
        bad = base.replace('[audit]\nmetric = "iqm"\n', f'[audit]\n{key} = {value}\n')
        with pytest.raises(InputError) as exc:
            parse_protocol(bad, "q.toml", base_dir=tmp_path)
        assert str(exc.value).startswith(fragment), str(exc.value)


def test_summary_and_report_md_word_the_audit_alike(tmp_path):
    """`audit`'s terminal summary and `report`'s Markdown read the same typed rows of one audit.json."""
    p = write(tmp_path, "s.csv", GOOD)
    c = write(tmp_path, "claims.toml", '[[claims]]\nbetter = "B"\nworse = "A"\ntext = "B beats A"\n')
    code, stdout, stderr, exc = invoke(["audit", str(p), "--reps", "1200", "--seed", "3", "--claims", str(c),
                                        "--normalize", "none", "--out", str(tmp_path / "o")])
    assert code == 0, (stderr, exc)
    code, _, stderr, exc = invoke(["report", str(tmp_path / "o" / "audit.json"), "-o", str(tmp_path / "r"),
                                   "--format", "md"])
    assert code == 0, (stderr, exc)
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    doc = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert doc["claims"][0]["overall"] == "reversed at all budgets"  # A is ahead at 10 and 20
    assert "reversed at all budgets" in stdout and "reversed: reversed at all budgets" in md
    for o in doc["orderings"]:
        words = {"a>b": f"{o['a']} > {o['b']}", "b>a": f"{o['b']} > {o['a']}"}.get(o["decision"], "inconclusive")
        assert words in stdout and f"| {o['a']} | {o['b']} | {words} |" in md


def test_report_of_a_malformed_audit_json_names_the_row(tmp_path):
    p = write(tmp_path, "s.csv", GOOD)
    code, *_ = invoke(["audit", str(p), "--reps", "1200", "--normalize", "none", "--out", str(tmp_path / "o")])
    assert code == 0
    src = tmp_path / "o" / "audit.json"
    doc = json.loads(src.read_text())
    doc["changes"][0]["decision"] = "fails"
    src.write_text(json.dumps(doc))
    code, stdout, stderr, exc = invoke(["report", str(src), "-o", str(tmp_path / "r")])
    assert code == 2 and not isinstance(exc, (KeyError, TypeError, AttributeError))
    assert stderr == (f"error: {src}: changes[0].decision is 'fails', expected 'changed' or 'inconclusive'\n")
    assert not (tmp_path / "r").exists()
