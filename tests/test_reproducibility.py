"""Reproducibility stated truthfully: the machine fingerprint a store records, and scripts/replay_run.py's
two paths (bits on the recording machine, distributions elsewhere)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.protocol import load_protocol
from rlaudit.run.machine import CPU_FLAGS, fingerprint_differences, machine_fingerprint
from rlaudit.stats.equivalence import compare_relative, compare_samples, smallest_relative_margin
from rlaudit.store import Store, stored_machines
from rlaudit.store.sqlite import record_checksum

REPO = Path(__file__).resolve().parents[1]

TINY = """
schema_version = 1
name = "tiny-replay"
seeds = 3
[regimes]
low = 128
high = 256
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
hyperparams = { n_steps = 64, batch_size = 32, n_epochs = 1 }
[evaluation]
n_eval_episodes = 2
[normalization]
method = "minmax"
references = { "CartPole-v1" = [0.0, 500.0] }
"""
RUN = "CartPole-v1__PPO__0__nested"


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    """A finished 3-seed sweep of 256-step CartPole PPO runs (a few seconds)."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.toml").write_text(TINY)
    store = folder / "store.sqlite"
    result = CliRunner().invoke(main, ["run", str(folder / "tiny.toml"), "--store", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return store


def _copy(store: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy.sqlite"
    shutil.copy(store, dest)
    return dest


def _set_meta(store: Path, key: str, value: str | None) -> None:
    con = sqlite3.connect(store)
    with con:
        con.execute("DELETE FROM meta WHERE key=?", (key,))
        if value is not None:
            con.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
    con.close()


def _fake_machine(store: Path) -> dict[str, str]:
    """Record, in ``store``, the fingerprint of a machine that differs from this one in its instruction set."""
    fake = {**machine_fingerprint(), "cpu_flags": "sse4_2 avx", "torch_cpu_capability": "DEFAULT"}
    _set_meta(store, "machine", json.dumps(fake, sort_keys=True))
    return fake


def _replay(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "replay_run.py"), str(store), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


# ------------------------------------------------------------------------------------ the fingerprint


def test_machine_fingerprint_names_what_decides_bit_equality():
    import torch

    fp = machine_fingerprint()
    for key in ("cpu_model", "cpu_flags", "machine", "libc", "python", "torch", "torch_cpu_capability",
                "torch_blas", "torch_onednn", "torch_config_sha256", "torch_threads_per_run",
                "torch_deterministic_algorithms", "numpy", "numpy_blas"):
        assert isinstance(fp[key], str) and fp[key], key
    assert fp["torch"] == torch.__version__
    assert fp["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert fp["torch_threads_per_run"] == "1"
    assert set(fp["cpu_flags"].split()) <= {*CPU_FLAGS, "none"}
    assert not {"host", "platform", "blas_thread_variables"} & set(fp)  # none changes a number
    assert machine_fingerprint() == fp


def test_fingerprint_differences_lists_each_differing_fact():
    recorded = {"cpu_flags": "avx2 fma", "torch": "2.13.0", "numpy": "2.4.6"}
    current = {"cpu_flags": "avx2 fma avx512f", "torch": "2.13.0", "numpy_blas": "openblas"}
    assert fingerprint_differences(recorded, current) == [
        ("cpu_flags", "avx2 fma", "avx2 fma avx512f"), ("numpy", "2.4.6", "missing"),
        ("numpy_blas", "missing", "openblas")]
    assert fingerprint_differences(recorded, dict(recorded)) == []


def test_a_new_store_records_this_machine(tiny_store):
    assert stored_machines(tiny_store) == (machine_fingerprint(), [])


def test_a_store_resumed_on_another_machine_records_both(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    fake = _fake_machine(copy)
    protocol = load_protocol(tiny_store.parent / "tiny.toml")
    Store.open_for_run(copy, protocol, machine=machine_fingerprint()).close()
    Store.open_for_run(copy, protocol, machine=machine_fingerprint()).close()  # recorded once
    assert stored_machines(copy) == (fake, [machine_fingerprint()])


def test_an_old_store_resumed_records_that_its_first_machine_is_unknown(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _set_meta(copy, "machine", None)  # as written before fingerprints were recorded
    assert stored_machines(copy) == (None, [])
    Store.open_for_run(copy, load_protocol(tiny_store.parent / "tiny.toml"), machine=machine_fingerprint()).close()
    assert stored_machines(copy) == (None, [machine_fingerprint()])


def test_a_damaged_fingerprint_is_one_error_line(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _set_meta(copy, "machine", "[1, 2]")
    out = _replay(copy, RUN)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"error: {copy}: meta.machine is not a machine fingerprint (a JSON object); the store is damaged\n"


# ------------------------------------------------------------------------------------ replay_run.py


def test_replay_on_the_recording_machine_compares_bits(tiny_store):
    out = _replay(tiny_store, RUN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("machine: matches the recorded one\n")
    assert f"{RUN}: identical (2 evaluations" in out.stdout
    assert "distributions" not in out.stdout


def test_replay_of_a_store_without_fingerprint_still_replays(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _set_meta(copy, "machine", None)
    out = _replay(copy, RUN)
    assert out.returncode == 0, out.stderr
    assert "records no machine fingerprint" in out.stdout and f"{RUN}: identical" in out.stdout


def test_replay_on_another_machine_compares_distributions(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _fake_machine(copy)
    out = _replay(copy, RUN)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "machine: differs from the recorded one"
    assert "  cpu_flags: recorded 'sse4_2 avx', here" in out.stdout
    assert "  torch_cpu_capability: recorded 'DEFAULT', here" in out.stdout
    assert "comparing distributions" in out.stdout
    assert ("distributions: 3 recorded vs 3 retrained runs of CartPole-v1 / PPO (nested); Welch and TOST "
            "(margin 50) at level 0.05/2 per budget") in out.stdout
    per_budget = [ln for ln in lines if ln.startswith("  at ")]
    assert [ln.split(" env steps")[0] for ln in per_budget] == ["  at 128", "  at 256"]
    # The same machine underneath: the retrained runs are the recorded ones, so the difference is exactly 0.
    assert all("difference +0 [" in ln and "p(equal means) 1," in ln for ln in per_budget), per_budget
    assert lines[-1].startswith("verdict: ")
    assert "DIFFERENT" not in out.stdout


def test_replay_of_a_run_that_trained_on_two_machines_compares_distributions(tiny_store, tmp_path):
    """On the recording machine too: a run resumed from a checkpoint written elsewhere (``runs.machine`` names two
    machines, ``rlaudit run --resume-on-any-machine``) cannot be replayed bit for bit, and the script says why."""
    copy = _copy(tiny_store, tmp_path)
    other = json.dumps({**machine_fingerprint(), "cpu_model": "another CPU"}, sort_keys=True)
    _set_meta(copy, "machine_also_0123456789ab", other)
    con = sqlite3.connect(copy)
    with con:
        con.execute("UPDATE runs SET machine='machine_also_0123456789ab+machine' WHERE run_id=?", (RUN,))
    con.close()
    out = _replay(copy, RUN)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (f"  {RUN} trained on 2 machines in turn (resumed from a checkpoint written on another), so no machine "
            f"replays it bit for bit") in out.stdout
    assert "comparing distributions" in out.stdout and out.stdout.splitlines()[-1].startswith("verdict: ")


def _shift_returns(store: Path, by: float) -> None:
    """Move every recorded return by ``by``, checksums recomputed: an intact store that does not reproduce."""
    con = sqlite3.connect(store)
    with con:
        for run_id, steps, returns, lengths, wall in con.execute(
                "SELECT run_id, env_steps, returns, lengths, wall_time FROM evaluations").fetchall():
            shifted = json.dumps([r + by for r in json.loads(returns)])
            con.execute("UPDATE evaluations SET returns=?, checksum=? WHERE run_id=? AND env_steps=?",
                        (shifted, record_checksum(run_id, steps, shifted, lengths, wall), run_id, steps))
    con.close()


def test_replay_on_another_machine_detects_a_shifted_distribution(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _fake_machine(copy)
    _shift_returns(copy, 400.0)
    out = _replay(copy, RUN, "--runs", "2", "--margin", "5")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "distributions: 2 recorded vs 2 retrained runs" in out.stdout
    assert out.stdout.splitlines()[-1] == "verdict: DIFFERENT distributions at 128, 256"


def test_replay_of_a_store_without_fingerprint_that_differs_compares_distributions(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _set_meta(copy, "machine", None)
    _shift_returns(copy, 400.0)
    out = _replay(copy, RUN, "--runs", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{RUN}: DIFFERENT" in out.stdout and "the recording machine is unknown" in out.stdout
    assert out.stdout.splitlines()[-1] == "verdict: DIFFERENT distributions at 128, 256"


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "1"], "error: --runs: need at least 2 runs to compare distributions, not 1\n"),
    (["--margin", "0"], "error: --margin: must be positive, not 0.0\n"),
    (["--alpha", "1.5"], "error: --alpha: must be between 0 and 1, not 1.5\n"),
    (["--runs", "x"], "error: argument --runs: invalid int value: 'x'\n"),
])
def test_replay_bad_flags_are_one_line(tiny_store, args, message):
    out = _replay(tiny_store, RUN, *args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", message)


def test_replay_elsewhere_without_a_margin_fails_before_training(tiny_store, tmp_path):
    copy = _copy(tiny_store, tmp_path)
    _fake_machine(copy)
    con = sqlite3.connect(copy)
    with con:  # the normalisation is not run-defining: the protocol's hash, and its runs, stay the same
        con.execute("UPDATE protocols SET text = substr(text, 1, instr(text, '[normalization]') - 1)")
    con.close()
    out = _replay(copy, RUN)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("error: --margin: the store's protocol has no normalisation range for task "
                          "'CartPole-v1'; give the equivalence margin in score units\n")


# ------------------------------------------------------------------------------------ the two-sample tests


def test_compare_samples_exact_values():
    c = compare_samples([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], margin=2.0, level=0.05)
    assert (c.n_x, c.n_y, c.mean_x, c.mean_y, c.difference) == (3, 3, 2.0, 3.0, 1.0)
    # Welch: se = sqrt(1/3 + 1/3), df = 4; t = 1 / se for the difference, (2 - 1) / se for the nearer TOST bound.
    assert c.p_different == pytest.approx(0.28786413472669053, abs=1e-12)
    assert c.p_equivalent == pytest.approx(0.14393206736334527, abs=1e-12)
    assert c.verdict == "undetermined"
    assert c.interval[0] < 1.0 < c.interval[1]
    assert compare_samples([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], 2.0, rng=np.random.default_rng(0)) == c


def test_compare_samples_verdicts():
    same = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert compare_samples(same, same, margin=10.0).verdict == "equivalent"
    assert compare_samples(same, same, margin=0.1).verdict == "undetermined"
    assert compare_samples(same, [x + 100 for x in same], margin=10.0).verdict == "different"
    # Constant samples: the difference is exact (replays of the same runs) ...
    assert compare_samples([5.0, 5.0], [5.0, 5.0], margin=1.0).verdict == "equivalent"
    assert compare_samples([5.0, 5.0], [6.0, 6.0], margin=10.0).verdict == "different"
    # ... or, for independent runs, all ended in one score: equal constants show no equivalence
    assert compare_samples([5.0, 5.0], [5.0, 5.0], margin=1.0, constant_is_exact=False).verdict == "undetermined"
    assert compare_samples([5.0, 5.0], [6.0, 6.0], margin=10.0, constant_is_exact=False).verdict == "different"


def test_compare_relative_exact_values():
    x, y = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]  # means 2 and 3, variances 1
    c = compare_relative(x, y, frac=1.0, level=0.05)
    # Upper bound c = 2: contrast 2 * 2 - 3 = 1, se = sqrt(4 / 3 + 1 / 3), Welch df = (5/3)^2 / ((16/9 + 1/9) / 2)
    # = 50 / 17. Lower bound c = 0: contrast 3, se = sqrt(1 / 3), df = 2. The TOST p is the larger one-sided p.
    assert c.p_equivalent == pytest.approx(0.24802768722926027, abs=1e-12)
    assert c.p_equivalent > 0.017549359322992324
    assert c.margin == 2.0 and c.verdict == "undetermined"
    # the difference test and the interval are compare_samples's
    same = compare_samples(x, y, margin=2.0, level=0.05)
    assert (c.difference, c.p_different, c.interval) == (same.difference, same.p_different, same.interval)
    # a negative reference mean: the bounds swap, the test is the mirror image
    mirrored = compare_relative([-v for v in x], [-v for v in y], frac=1.0)
    assert mirrored.p_equivalent == pytest.approx(c.p_equivalent, abs=1e-12) and mirrored.margin == 2.0


def test_compare_relative_carries_the_reference_mean_uncertainty():
    # The same data as a fixed margin of 25 % of mean(x): the relative test's p is larger at the upper edge,
    # where the margin estimated from mean(x) grows with the difference's own error.
    rng = np.random.default_rng(3)
    x, y = rng.normal(20.0, 5.0, 10), rng.normal(22.0, 5.0, 10)
    fixed = compare_samples(x, y, margin=0.25 * x.mean(), constant_is_exact=False)
    relative = compare_relative(x, y, frac=0.25)
    assert relative.margin == pytest.approx(fixed.margin, rel=1e-12)
    assert relative.p_equivalent > fixed.p_equivalent
    assert compare_relative([5.0, 5.0], [5.0, 5.0], frac=0.5).verdict == "undetermined"  # constants: no evidence
    assert compare_relative([0.0, 0.0], [1.0, -1.0], frac=0.5).p_equivalent == 1.0  # no relative margin around 0


def test_smallest_relative_margin_is_the_edge_of_equivalence():
    rng = np.random.default_rng(4)
    x, y = rng.normal(20.0, 4.0, 20), rng.normal(21.0, 4.0, 20)
    f = smallest_relative_margin(x, y)
    assert 0.05 < f < 1.0
    assert compare_relative(x, y, f).verdict == "equivalent"
    assert compare_relative(x, y, f - 2e-4).verdict == "undetermined"
    assert smallest_relative_margin([-1.0, 1.0, 0.5, -0.5], [1.0, 2.0, 3.0]) == float("inf")


def test_relative_tost_keeps_its_level_where_a_fixed_reading_does_not():
    """At the margin's edge (the other mean 1.5 times the reference's, normal scores, 20 runs a side) the TOST of
    a margin of 50 % of the estimated mean, read as a known margin, rejects ~8 % of the time at level 0.05 (the
    TOST alone: Welch's difference test would also reject here); the relative test stays at the level. The full table over score shapes and run counts:
    ``bench/equivalence_calibration.py`` (docs/backends.md)."""
    rng = np.random.default_rng(0)
    reps, fixed, relative = 3000, 0, 0
    for _ in range(reps):
        x, y = rng.normal(10.0, 1.5, 20), rng.normal(15.0, 2.25, 20)
        fixed += compare_samples(x, y, 0.5 * x.mean(), reps=1, constant_is_exact=False).p_equivalent < 0.05
        relative += compare_relative(x, y, 0.5, reps=1).p_equivalent < 0.05
    se = np.sqrt(0.05 * 0.95 / reps)
    assert relative / reps < 0.05 + 3 * se
    assert fixed / reps > 0.05 + 3 * se  # the flaw the relative test removes is visible at this many pairs


@pytest.mark.parametrize(("x", "y", "margin", "level", "message"), [
    ([1.0], [1.0, 2.0], 1.0, 0.05, "need at least 2 scores per sample, got 1 and 2"),
    ([1.0, 2.0], [1.0, 2.0], 0.0, 0.05, "margin must be positive, not 0.0"),
    ([1.0, 2.0], [1.0, 2.0], 1.0, 1.0, "level must be in (0, 1), not 1.0"),
])
def test_compare_samples_rejects_bad_arguments(x, y, margin, level, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compare_samples(x, y, margin, level)


def test_the_equivalence_calibration_bench_prints_every_cell(capsys):
    """bench/equivalence_calibration.py (the error rates in docs/backends.md) runs end to end; a few pairs per
    cell here, 4,000 for the record."""
    import importlib

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        bench = importlib.import_module("equivalence_calibration")
    finally:
        sys.path.pop(0)
    assert bench.main(["--reps", "3"]) == 0
    out = capsys.readouterr().out
    cells = [line for line in out.splitlines() if line.startswith(("fixed ", "ratio "))]
    assert len(cells) == 2 * len(bench.SHAPES) * len(bench.SIZES)
    assert sum(line.startswith("| ") for line in out.splitlines()) == 1 + len(bench.SIZES)
    assert "| 10/10+10 a/2 |" in out
