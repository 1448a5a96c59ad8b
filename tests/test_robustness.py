"""Hostile-user probes (issue 12): each bad input or broken environment gives one clear line, a non-zero
exit, no traceback, no partial output, and leaves the user's data intact.

Some probes need a real read-only or full file system: they mount a small tmpfs (root only) and are skipped
where mounting is not allowed.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.protocol import load_protocol, plan
from rlaudit.run.spec import EvalRecord, RunResult
from rlaudit.scores import read_scores
from rlaudit.store import Store

STORE_PROTOCOL = """
schema_version = 1
name = "rb"
seeds = 2
[regimes]
low = 100
high = 200
[[tasks]]
id = "CartPole-v1"
[[algorithms]]
name = "PPO"
[[algorithms]]
name = "A2C"
"""


def one_line_error(result, code: int = 2) -> str:
    """The CLI's error line, after checking exit code, the single line and no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def pl(tmp_path):
    path = tmp_path / "rb.toml"
    path.write_text(STORE_PROTOCOL)
    return plan(load_protocol(path))


def filled_store(path, pl):
    store = Store.open_for_run(path, pl.protocol)
    store.sync_plan(pl)
    for r in pl.runs:
        store.started(r.run_id, "w")
        for steps in (100, 200):
            store.record(EvalRecord(r.run_id, steps, (1.0 + r.seed, 3.0), (10, 10), 0.1))
        store.finished(RunResult(r.run_id, 200, 1.0))
    store.close()
    return path


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(size)``: a fresh tmpfs of ``size`` bytes under ``tmp_path``; ``remount(where, ro)`` flips it."""
    mounted = []

    def mount(size: int):
        where = tmp_path / f"mnt{len(mounted)}"
        where.mkdir()
        if shutil.which("mount") is None or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True).returncode:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(where)
        return where

    def remount(where, readonly: bool) -> None:
        subprocess.run(["mount", "-o", f"remount,{'ro' if readonly else 'rw'}", str(where)], check=True)

    yield mount, remount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=True)  # -l: a failed test may leave a file open


def fill_disk(where) -> None:
    """Write a filler file until the file system at ``where`` is full."""
    import os

    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------- read-only stores

def test_store_on_a_read_only_mount_is_read_not_called_corrupted(tmp_path, pl, tmpfs):
    mount, remount = tmpfs
    where = mount(8 << 20)
    store = filled_store(where / "s.sqlite", pl)
    remount(where, True)
    out = tmp_path / "out"
    for argv in (["status", str(store)], ["export", str(store), "-o", str(tmp_path / "scores.csv")],
                 ["audit", str(store), "--out", str(out / "audit"), "--reps", "1200"],
                 ["report", str(store), "-o", str(out / "report"), "--reps", "1200", "--format", "md,json"]):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 0, (argv, result.output)
        assert "corrupted" not in result.output and "--new-store" not in result.output
    assert len(read_scores(tmp_path / "scores.csv").frame) == 2 * 2 * 2
    assert sorted(p.name for p in where.iterdir()) == ["s.sqlite"]  # nothing written beside it


# ------------------------------------------------------------------------------------- a full disk

class FillingExecutor:
    """Stores one evaluation, fills the disk, then tries to store the next one (as a run would)."""

    def __init__(self, where):
        self.where = where

    def run(self, specs, sink):
        spec = specs[0]
        sink.started(spec.run_id, "main")
        sink.record(EvalRecord(spec.run_id, spec.budgets[0], (1.0, 2.0), (5, 5), 0.1))
        fill_disk(self.where)
        for steps in spec.budgets[1:]:
            sink.record(EvalRecord(spec.run_id, steps, (3.0, 4.0), (5, 5), 0.2))
        sink.finished(RunResult(spec.run_id, spec.budgets[-1], 0.3))


def test_disk_full_during_run_is_one_line_and_the_store_stays_consistent(tmp_path, tmpfs, monkeypatch):
    import rlaudit.run.executors as executors

    mount, _ = tmpfs
    where = mount(1 << 20)
    proto = tmp_path / "rb.toml"
    proto.write_text(STORE_PROTOCOL)
    monkeypatch.setattr(executors, "get_executor", lambda name, **kw: FillingExecutor(where))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = where / "s.sqlite"
    result = CliRunner().invoke(main, ["run", str(proto), "--store", str(store)])
    line = one_line_error(result, code=1)
    assert "cannot write the store" in line and "full" in line and str(store) in line
    (where / "filler").unlink()
    con = sqlite3.connect(store)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT count(*) FROM evaluations").fetchone()[0] == 1  # the one written before
    con.close()
    status = CliRunner().invoke(main, ["status", str(store)])
    assert status.exit_code == 0 and "interrupted" in status.output


def test_export_onto_a_full_disk_is_one_line_and_leaves_no_file(tmp_path, pl, tmpfs):
    mount, _ = tmpfs
    where = mount(256 << 10)
    store = filled_store(tmp_path / "s.sqlite", pl)
    fill_disk(where)
    for name in ("scores.csv", "scores.parquet"):
        result = CliRunner().invoke(main, ["export", str(store), "-o", str(where / name)])
        line = one_line_error(result, code=1)
        assert str(where / name) in line and "No space left" in line
    assert sorted(p.name for p in where.iterdir()) == ["filler"]


# ------------------------------------------------------------------------------------- score files

TIDY = "algorithm,task,run,budget,score\n"


def test_truncated_csv_gz_names_the_file(tmp_path):
    import gzip

    whole = gzip.compress((TIDY + "".join(f"a,t,{i},100,{i}.5\n" for i in range(400))).encode())
    path = tmp_path / "s.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    for argv in (["audit", str(path), "--out", str(tmp_path / "a")], ["import", "tidy", str(path), "-o",
                                                                         str(tmp_path / "o.csv")]):
        line = one_line_error(CliRunner().invoke(main, argv))
        assert line == f"error: {path}: truncated or corrupt gzip data (Compressed file ended before the " \
                       f"end-of-stream marker was reached)"
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "a").exists()


@pytest.mark.parametrize("budget, message", [
    ("9223372036854775808", "larger than 9,223,372,036,854,775,807 (2^63 - 1) at line 2"),
    ("18446744073709551616", "larger than 9,223,372,036,854,775,807 (2^63 - 1) at line 2"),
    ("1e19", "larger than 9,223,372,036,854,775,807 (2^63 - 1) at line 2"),
    ("-100", "negative at line 2"),
])
def test_budgets_past_int64_or_negative_are_refused(tmp_path, budget, message):
    path = tmp_path / "s.csv"
    path.write_text(TIDY + f"a,t,0,{budget},1.0\na,t,1,100,2.0\n")
    for argv in (["audit", str(path), "--out", str(tmp_path / "a")],
                 ["import", "tidy", str(path), "-o", str(tmp_path / "o.csv")]):
        line = one_line_error(CliRunner().invoke(main, argv))
        assert line == f"error: {path}: column 'budget' is {message}" + (
            "; budgets count steps, frames or samples from 0" if message.startswith("negative") else "")
    assert not (tmp_path / "o.csv").exists()


def test_largest_int64_budget_is_kept_exactly(tmp_path):
    from rlaudit.scores import BUDGET_MAX

    path = tmp_path / "s.csv"
    path.write_text(TIDY + f"a,t,0,{BUDGET_MAX},1.0\n")
    assert read_scores(path).budgets == [BUDGET_MAX]


@pytest.mark.parametrize("steps, message", [
    ([100, -50], "'timesteps'[1] is negative (-50); env steps count from 0"),
    ([-1, 5], "'timesteps'[0] is negative (-1); env steps count from 0"),
    (None, "'timesteps'[1] is larger than 2^63 - 1 (9223372036854775808)"),
    ([10.0, 20.5], "'timesteps'[1] is not a whole number (20.5)"),
])
def test_zoo_timesteps_negative_or_past_int64_are_refused(tmp_path, steps, message):
    import numpy as np

    run = tmp_path / "logs" / "ppo" / "CartPole-v1_1"
    run.mkdir(parents=True)
    arr = np.array([1, 2**63], dtype=np.uint64) if steps is None else np.array(steps)
    np.savez(run / "evaluations.npz", timesteps=arr, results=np.ones((2, 3)))
    line = one_line_error(CliRunner().invoke(main, ["import", "zoo", str(tmp_path / "logs"), "-o",
                                                    str(tmp_path / "o.csv")]))
    assert line == f"error: {run / 'evaluations.npz'}: {message}"


def test_output_naming_an_existing_folder(tmp_path, pl):
    store = filled_store(tmp_path / "s.sqlite", pl)
    scores = tmp_path / "scores.csv"
    assert CliRunner().invoke(main, ["export", str(store), "-o", str(scores)]).exit_code == 0
    folder = tmp_path / "out.csv"
    folder.mkdir()
    for argv in (["export", str(store), "-o", str(folder)], ["import", "tidy", str(scores), "-o", str(folder)]):
        line = one_line_error(CliRunner().invoke(main, argv))
        assert line == f"error: {folder}: is a folder; give a file name (e.g. {folder / 'scores.csv'})"
    assert list(folder.iterdir()) == []


def test_wide_importer_refuses_names_that_are_not_utf8(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_bytes(b"task,DQN,Rainbow\nPong,1.0,2.0\nBreakout,3.0,4.0\nQ\xe9bert,5.0,6.0\n")
    line = one_line_error(CliRunner().invoke(main, ["import", "wide", str(path), "-o", str(tmp_path / "o.csv")]))
    assert line == f"error: {path}: not a CSV text file in UTF-8 (line 4, byte 48 is 0xe9); save it as UTF-8"
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------------------------------------- fetch

def _fetch_protocol(tmp_path, path: str, url: str = "https://example.invalid/x", sha: str = "0" * 64):
    proto = tmp_path / "f.toml"
    proto.write_text('schema_version = 1\nname = "f"\n[data]\nformat = "rliable"\n[[data.files]]\n'
                     f'path = {path}\nurl = "{url}"\nsha256 = "{sha}"\n')
    return proto


@pytest.mark.parametrize("path", ['"."', '"a/./b.json"', '"a//b.json"', '"a/"', '"../x.json"', '"/etc/x"',
                                  '"a/\\u0000b.json"', '"a\\nb.json"'])
def test_fetch_paths_stay_inside_the_cache(tmp_path, path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "keep.json").write_text("{}")
    proto = _fetch_protocol(tmp_path, path)
    line = one_line_error(CliRunner().invoke(main, ["fetch", str(proto), "--cache", str(cache)]))
    assert line.startswith(f"error: {proto}: data: files[0]: 'path' ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "f.toml"]
    assert [p.name for p in cache.iterdir()] == ["keep.json"]


def test_fetch_file_refuses_a_path_out_of_the_cache_even_unchecked(tmp_path):
    from rlaudit.errors import InputError
    from rlaudit.importers.fetch import fetch_file

    for rel in (".", "../x", "a/../../x", "a\0b"):
        with pytest.raises(InputError):
            fetch_file({"path": rel, "url": "http://127.0.0.1:9/x", "sha256": "0" * 64}, tmp_path / "cache")
    assert not (tmp_path / "x").exists() and not (tmp_path / "cache.part").exists()


class _Handler:
    """A tiny HTTP server: ``routes[path] = (status, headers, body)``."""

    def __init__(self, routes):
        import http.server
        import threading

        routes_ = routes

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                status, headers, body = routes_.get(self.path, (404, {}, b""))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server():
    servers = []

    def start(routes):
        servers.append(_Handler(routes))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_fetch_does_not_write_through_a_part_symlink(tmp_path, http_server):
    import hashlib

    from rlaudit.importers.fetch import fetch_file

    body = b'{"t": [1.0, 2.0]}'
    srv = http_server({"/d.json": (200, {}, body)})
    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (cache / "d.json.part").symlink_to(victim)
    entry = {"path": "d.json", "url": srv.url + "/d.json", "sha256": hashlib.sha256(body).hexdigest()}
    dest, status = fetch_file(entry, cache)
    assert status == "downloaded" and dest.read_bytes() == body and not dest.is_symlink()
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("target", ["ftp://127.0.0.1:9/x.json", "file:///etc/hostname"])
def test_fetch_refuses_redirects_to_other_schemes(tmp_path, http_server, target):
    srv = http_server({"/d.json": (302, {"Location": target}, b"")})
    proto = _fetch_protocol(tmp_path, '"d.json"', url=srv.url + "/d.json")
    line = one_line_error(CliRunner().invoke(main, ["fetch", str(proto), "--cache", str(tmp_path / "c")]))
    scheme = target.split(":")[0]
    assert line == (f"error: {srv.url}/d.json: redirected to a {scheme}:// URL ({target}); only http(s) "
                    f"redirects are followed")
    assert not list((tmp_path / "c").rglob("*.part"))


def test_fetch_caps_the_download_size(tmp_path, http_server, monkeypatch):
    from rlaudit.importers import fetch

    monkeypatch.setattr(fetch, "MAX_DOWNLOAD_BYTES", 1000)
    monkeypatch.setattr(fetch.fetch_file, "__defaults__", fetch.fetch_file.__defaults__[:-1] + (1000,))
    srv = http_server({"/d.json": (200, {}, b"x" * 5000)})
    proto = _fetch_protocol(tmp_path, '"d.json"', url=srv.url + "/d.json")
    line = one_line_error(CliRunner().invoke(main, ["fetch", str(proto), "--cache", str(tmp_path / "c")]))
    assert line == (f"error: {srv.url}/d.json: the server announces 5,000 bytes, more than the 1,000 a published "
                    f"data file may have")
    assert [p for p in (tmp_path / "c").rglob("*") if p.is_file()] == []  # no .part, no d.json


def test_a_gzip_bomb_is_refused_with_bounded_memory(tmp_path, monkeypatch):
    """1 MiB of gzip inflating to 1 GiB: refused at the cap, reading at most one chunk past it."""
    import gzip
    import tracemalloc

    from rlaudit.importers import _common

    monkeypatch.setattr(_common, "MAX_CONTENT_BYTES", 8 << 20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.GzipFile(bomb, "wb", compresslevel=9) as fh:
        zeros = b"0" * (1 << 20)
        for _ in range(64):  # 64 MiB of content is enough to pass an 8 MiB cap
            fh.write(zeros)
    assert bomb.stat().st_size < 1 << 20
    tracemalloc.start()
    result = CliRunner().invoke(main, ["import", "rliable", str(bomb), "-o", str(tmp_path / "o.csv")])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    line = one_line_error(result)
    assert line == f"error: {bomb}: content larger than 8,388,608 bytes once gunzipped; refusing to read it"
    assert peak < 40 << 20, peak


# ------------------------------------------------------------------------------------- validate: hyperparameters

def _validate(tmp_path, algorithms: str, top: str = "seeds = 1", regimes: str = "high = 256"):
    proto = tmp_path / "h.toml"
    proto.write_text(f'schema_version = 1\nname = "h"\n{top}\n[regimes]\n{regimes}\n[[tasks]]\nid = "CartPole-v1"\n'
                     + algorithms)
    return proto, CliRunner().invoke(main, ["validate", str(proto), "--store", str(tmp_path / "none" / "s.sqlite")])


@pytest.mark.parametrize("algo, field, message", [
    ("PPO", "hyperparams = { n_steps = 25.5 }", "hyperparams.n_steps: expected an integer for 'PPO', got 25.5"),
    ("PPO", "hyperparams = { n_steps = [64, 128] }", "hyperparams.n_steps: expected an integer for 'PPO', got [64, 128]"),
    ("PPO", "hyperparams = { batch_size = -64 }", "hyperparams.batch_size: must be at least 1 for 'PPO', got -64"),
    ("A2C", "hyperparams = { gamma = 1.5 }", "hyperparams.gamma: must be in [0, 1] for 'A2C', got 1.5"),
    ("DQN", "hyperparams = { learning_rate = -0.1 }",
     "hyperparams.learning_rate: must be greater than 0 for 'DQN', got -0.1"),
    ("DQN", "hyperparams = { learning_rate = nan }", "hyperparams.learning_rate: must be a finite number for 'DQN', got nan"),
    ("DQN", "hyperparams = { train_freq = [0, \"step\"] }", "hyperparams.train_freq: must be at least 1 for 'DQN', got [0, 'step']"),
    ("DQN", "hyperparams = { train_freq = \"often\" }",
     "hyperparams.train_freq: expected an integer or an array [an integer, a string] for 'DQN', got 'often'"),
    ("PPO", "hyperparams = { policy = \"os:system\" }",
     "hyperparams.policy: 'os:system' is not a policy of 'PPO'; expected one of CnnPolicy, MlpPolicy, MultiInputPolicy"),
    ("DoubleDQN", "hyperparams = { n_steps = 0 }", "hyperparams: DoubleDQN: n_steps must be an integer >= 1, got 0"),
    ("DQNFamily", "hyperparams = { dueling = \"yes\" }", "hyperparams.dueling: expected true or false for 'DQNFamily', got 'yes'"),
    ("QRDQN", "hyperparams = { replay_buffer_class = \"os:system\" }",
     "hyperparams.replay_buffer_class: 'QRDQN' expects a Python class or function here, which a protocol cannot "
     "give (got 'os:system'); leave it at its default"),
    ("PPO", "policy_kwargs = { net_arch = \"big\" }",
     "policy_kwargs.net_arch: expected an array of integers or a table of arrays of integers for the "
     "ActorCriticPolicy of 'PPO', got 'big'"),
    ("PPO", "policy_kwargs = { activation_fn = \"os:system\" }",
     "policy_kwargs.activation_fn: the ActorCriticPolicy of 'PPO' expects a Python class or function here, which "
     "a protocol cannot give (got 'os:system'); leave it at its default"),
    ("DQN", "policy_kwargs = { net_arch = { pi = [32] } }",
     "policy_kwargs.net_arch: expected an array of integers for the DQNPolicy of 'DQN', got {'pi': [32]}"),
    ("PPO", "policy_kwargs = { net_arhc = [64] }", "policy_kwargs: unknown key 'net_arhc' for the ActorCriticPolicy "
     "of 'PPO' (did you mean 'net_arch'?)"),
])
def test_validate_checks_hyperparameter_types_and_ranges(tmp_path, algo, field, message):
    proto, result = _validate(tmp_path, f'[[algorithms]]\nname = "{algo}"\n{field}\n')
    line = one_line_error(result)
    assert line.startswith(f"error: {proto}: algorithms[0].{message}"), line


def test_per_regime_settings_are_checked_too(tmp_path):
    proto, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n'
                              '[algorithms.regimes.high]\npolicy_kwargs = { net_arch = "big" }\n')
    assert one_line_error(result).startswith(f"error: {proto}: algorithms[0].regimes.high.policy_kwargs.net_arch: ")


def test_well_typed_settings_stay_valid(tmp_path):
    _, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\nhyperparams = { n_steps = 64, learning_rate = 3e-4, '
                          'clip_range = 0.2, policy = "MlpPolicy" }\npolicy_kwargs = { net_arch = { pi = [32], vf = [32] } }\n'
                          '[[algorithms]]\nname = "DQN"\nhyperparams = { train_freq = [4, "step"], gradient_steps = -1 }\n'
                          'policy_kwargs = { net_arch = [64, 64] }\n'
                          '[[algorithms]]\nname = "DoubleDQN"\nhyperparams = { n_steps = 3, dueling = true }\n')
    assert result.exit_code == 0 and result.output.strip().endswith("valid"), result.output


def test_hyperparameter_checks_follow_annotations_of_any_class():
    """Plugins and new algorithms are checked from their own signature, not a list kept by rlaudit."""
    from typing import Literal

    from rlaudit.algorithms.hyperparams import check_hyperparams
    from rlaudit.errors import InputError

    class Learner:
        def __init__(self, env, *, seed: int, n_atoms: int = 51, v_min: float = -10.0, mode: Literal["a", "b"] = "a",
                      sizes: tuple[int, ...] = (64,), plain=0.5, flag=False):
            pass

    check_hyperparams(Learner, {"n_atoms": 21, "v_min": -5, "mode": "b", "sizes": [32, 32], "plain": 1}, "w", "L")
    for hp, message in [({"n_atoms": 2.5}, "w.n_atoms: expected an integer for 'L', got 2.5"),
                        ({"n_atoms": 0}, "w.n_atoms: must be at least 1 for 'L', got 0"),
                        ({"mode": "c"}, "w.mode: expected one of 'a', 'b' for 'L', got 'c'"),
                        ({"sizes": [32, "x"]}, "w.sizes: expected an array of integers for 'L', got [32, 'x']"),
                        ({"plain": "x"}, "w.plain: expected a number or an array for 'L', got 'x'"),
                        ({"flag": 1}, "w.flag: expected true or false for 'L', got 1")]:
        with pytest.raises(InputError) as exc:
            check_hyperparams(Learner, hp, "w", "L")
        assert str(exc.value) == message


# ------------------------------------------------------------------------------------- validate: plan size

def test_seeds_are_bounded(tmp_path):
    proto, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n', top="seeds = 1_000_000")
    assert one_line_error(result) == f"error: {proto}: seeds: 1,000,000 seeds is more than the 1,000 a protocol may ask for"
    proto, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n', top="seeds = [0, 4_294_967_296]")
    assert one_line_error(result) == f"error: {proto}: seeds: seed 4294967296 is larger than 2147483647 (2^31 - 1)"


def test_budgets_past_int64_are_refused_and_huge_plans_warned(tmp_path):
    proto, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n', regimes="high = 10_000_000_000_000_000_000")
    assert one_line_error(result) == (f"error: {proto}: regimes.high: budget 10,000,000,000,000,000,000 is larger "
                                      f"than 9,223,372,036,854,775,807 (2^63 - 1)")
    proto, result = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n', top="seeds = 5",
                              regimes="high = 1_000_000_000_000_000_000")
    assert result.exit_code == 0 and result.stdout.strip().endswith("valid")
    assert ("warning: this plan is large: 5,000,000,000,000,000,000 env steps" in result.stderr
            and "(warning past 10,000,000,000 env steps or 7 days)" in result.stderr), result.stderr
    _, small = _validate(tmp_path, '[[algorithms]]\nname = "PPO"\n')
    assert small.exit_code == 0 and "warning" not in small.output


def test_run_warns_about_a_huge_plan_before_training(tmp_path, monkeypatch):
    import rlaudit.run.executors as executors

    class Nothing:
        def run(self, specs, sink):
            pass

    monkeypatch.setattr(executors, "get_executor", lambda name, **kw: Nothing())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    proto = tmp_path / "h.toml"
    proto.write_text('schema_version = 1\nname = "h"\nseeds = 2\n[regimes]\nhigh = 100_000_000_000\n[[tasks]]\n'
                     'id = "CartPole-v1"\n[[algorithms]]\nname = "PPO"\n')
    import rlaudit.run.driver as driver

    reads = []  # the recorded CPU times are read once, for the warning and the driver's header alike
    real = driver.recorded_rates
    monkeypatch.setattr(driver, "recorded_rates", lambda paths, **kw: reads.append(paths) or real(paths, **kw))
    result = CliRunner().invoke(main, ["run", str(proto), "--store", str(tmp_path / "s.sqlite")])
    assert "warning: this plan is large: 200,000,000,000 env steps" in result.stderr, result.output
    assert "training 2 of 2 runs" in result.stderr and len(reads) == 1, (reads, result.output)

    from rlaudit.protocol import load_protocol, plan
    from rlaudit.run.spec import RunResult
    from rlaudit.store import Store

    resumed = tmp_path / "done.sqlite"  # every run finished: nothing left to train, nothing to warn about
    store = Store.open_for_run(resumed, load_protocol(proto))
    pl = plan(load_protocol(proto))
    store.sync_plan(pl)
    for run in pl.runs:
        store.started(run.run_id, "w1")
        store.finished(RunResult(run.run_id, run.total_steps, 1.0, 1.0))
    store.close()
    result = CliRunner().invoke(main, ["run", str(proto), "--store", str(resumed)])
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output


# ------------------------------------------------------------------------------------- reports

HOSTILE_NAMES = ["PPO\u202e1v", "DQN \U0001F600", "a_b|c*<i>", "Q\u00e9bert-\u00df", "X" * 100_000]


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    """A report of five algorithms with hostile names; the first two swap ranks between the budgets."""
    import numpy as np

    tmp = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(0)
    rows = [TIDY.strip()]
    for ai, name in enumerate(HOSTILE_NAMES):
        for task in ("t1", "t2", "t3"):
            for run in range(10):
                for budget in (100, 200):
                    level = {0: {100: 10, 200: 0}, 1: {100: 0, 200: 10}}.get(ai, {100: 5, 200: 5})[budget]
                    quoted = '"' + name.replace('"', '""') + '"'
                    rows.append(f"{quoted},{task},{run},{budget},{level + ai * 0.01 + rng.normal(0, 0.1):.6f}")
    scores = tmp / "s.csv"
    scores.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp / "report"
    result = CliRunner().invoke(main, ["report", str(scores), "-o", str(out), "--reps", "12000"])
    assert result.exit_code == 0, result.output
    return out


def test_report_shows_bidi_controls_instead_of_obeying_them(hostile_report):
    for name, shown in (("index.html", "PPO[U+202E]1v"), ("report.md", r"PPO\[U+202E\]1v"),
                        ("tables.tex", "PPO[U+202E]1v")):
        text = (hostile_report / name).read_text(encoding="utf-8")
        assert not any(ch in text for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), name
        assert shown in text, name


def test_report_md_escapes_names_once_in_every_table(hostile_report):
    md = (hostile_report / "report.md").read_text(encoding="utf-8")
    once = r"a\_b\|c\*&lt;i>"
    assert once in md and "\\\\" not in md.replace(r"\\|", "")  # no escaped backslash anywhere
    inversions = md[md.index("### Inversions between budgets"):]
    inversions = inversions[: inversions.index("\n#", 5)]
    assert "**confirmed**" in inversions
    ppo, dqn = r"PPO\[U+202E\]1v", "DQN \U0001F600"
    assert f"| {ppo} > {dqn} |" in inversions and f"| {dqn} > {ppo} |" in inversions, inversions[:2000]


def test_report_figures_cut_long_names(hostile_report):
    import struct

    from rlaudit.report.plots import MAX_LABEL, figure_labels

    labels = figure_labels(HOSTILE_NAMES + ["X" * 40])
    assert labels["X" * 100_000] == "X" * (MAX_LABEL - 1) + "\u2026"
    assert labels["X" * 40] == "X" * (MAX_LABEL - 4) + " (2)" and labels["PPO\u202e1v"] == "PPO[U+202E]1v"
    for png in (hostile_report / "figures").glob("*.png"):
        width, height = struct.unpack(">II", png.read_bytes()[16:24])
        assert width < 5000 and height < 5000, (png.name, width, height)


def test_tables_tex_compiles_with_pdflatex(hostile_report, tmp_path):
    import shutil

    tex = (hostile_report / "tables.tex").read_text(encoding="utf-8")
    assert "DQN [U+1F600]" in tex and r"Q\'{e}bert-\ss{}" in tex
    assert max(len(line) for line in tex.splitlines()) < 10_000
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended)")
    doc = tmp_path / "doc.tex"
    shutil.copy(hostile_report / "tables.tex", tmp_path / "tables.tex")
    doc.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n\\begin{document}\n"
                   "\\input{tables}\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000
