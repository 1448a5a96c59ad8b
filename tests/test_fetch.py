"""``rlaudit fetch`` against a local HTTP server on 127.0.0.1 serving ``../shared/data``."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaudit.cli import main
from rlaudit.errors import InputError
from rlaudit.importers import content_sha256
from rlaudit.importers.fetch import fetch_file, fetch_protocol

FILES = ["rliable/dm_control/DrQ.json", "rliable/dm_control/SLAC.json", "dopamine/atari/pong.json.gz"]


class _Server:
    """Serves a folder; ``corrupt`` paths get one flipped byte; ``drop`` paths close mid-body once."""

    def __init__(self, root: Path, ranges: bool = True):
        self.root, self.ranges = root, ranges
        self.corrupt: set[str] = set()
        self.drop: set[str] = set()
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rel = self.path.lstrip("/")
                from urllib.parse import unquote

                rel = unquote(rel)
                server.requests.append((rel, self.headers.get("Range")))
                path = server.root / rel
                if not path.is_file():
                    self.send_error(404)
                    return
                body = path.read_bytes()
                if rel in server.corrupt:
                    body = body[:100] + bytes([body[100] ^ 0xFF]) + body[101:]
                start = 0
                rng = self.headers.get("Range")
                if rng and server.ranges:
                    start = int(rng.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if rel in server.drop:
                    server.drop.discard(rel)
                    self.wfile.write(body[start:start + (len(body) - start) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _protocol(tmp: Path, data: Path, files=FILES) -> Path:
    lines = ['schema_version = 1', 'name = "fetch-test"', 'title = "fetch test"', "", "[data]",
             'format = "rliable"', "options = {}"]
    for f in files:
        lines += ["", "[[data.files]]", f'path = "{f}"', f'url = "https://example.invalid/{f}"',
                  f'sha256 = "{content_sha256(data / f)}"']
    p = tmp / "fetch-test.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_fetch_downloads_verifies_and_reuses(shared_data, tmp_path, monkeypatch):
    proto = _protocol(tmp_path, shared_data)
    cache = tmp_path / "cache"
    with _Server(shared_data) as srv:
        monkeypatch.setenv("RLAUDIT_FETCH_BASE", srv.url)
        r = CliRunner().invoke(main, ["fetch", str(proto), "--cache", str(cache)])
        assert r.exit_code == 0, r.output
        assert "3 downloaded" in r.output
        for f in FILES:
            assert content_sha256(cache / f) == content_sha256(shared_data / f)
        assert (cache / FILES[0]).read_bytes() == (shared_data / FILES[0]).read_bytes()
        n = len(srv.requests)
        again = fetch_protocol(proto, cache=cache, progress=False)
        assert [s for _, s in again] == ["cached"] * 3 and len(srv.requests) == n


def test_upstream_json_is_verified_then_gzipped_for_a_gz_path(shared_data, tmp_path):
    """Upstream serves Dopamine's plain <game>.json; the protocol's sha256 covers that content."""
    import gzip

    plain = tmp_path / "srv" / "dopamine/atari/pong.json.gz"  # served bytes: the gunzipped upstream file
    plain.parent.mkdir(parents=True)
    plain.write_bytes(gzip.decompress((shared_data / "dopamine/atari/pong.json.gz").read_bytes()))
    entry = {"path": "dopamine/atari/pong.json.gz", "url": "https://example.invalid/x",
             "sha256": hashlib.sha256(plain.read_bytes()).hexdigest()}
    with _Server(tmp_path / "srv") as srv:
        dest, status = fetch_file(entry, tmp_path / "cache", mirror=srv.url)
    assert status == "downloaded" and dest.read_bytes()[:2] == b"\x1f\x8b"
    assert content_sha256(dest) == entry["sha256"]


def test_checksum_mismatch_is_an_error_and_keeps_nothing(shared_data, tmp_path, monkeypatch):
    proto = _protocol(tmp_path, shared_data, files=FILES[:1])
    cache = tmp_path / "cache"
    with _Server(shared_data) as srv:
        srv.corrupt.add(FILES[0])
        monkeypatch.setenv("RLAUDIT_FETCH_BASE", srv.url)
        r = CliRunner().invoke(main, ["fetch", str(proto), "--cache", str(cache)])
    assert r.exit_code == 2
    line = r.output.strip().splitlines()
    assert len(line) == 1 and "checksum mismatch for rliable/dm_control/DrQ.json" in line[0], r.output
    assert not (cache / FILES[0]).exists()
    assert not list(cache.rglob("*.part"))


@pytest.mark.parametrize("ranges", [True, False], ids=["resume-with-range", "restart-without-range"])
def test_dropped_connection_resumes_or_restarts(shared_data, tmp_path, ranges):
    entry = {"path": FILES[2], "url": "https://example.invalid/x", "sha256": content_sha256(shared_data / FILES[2])}
    with _Server(shared_data, ranges=ranges) as srv:
        srv.drop.add(FILES[2])
        dest, status = fetch_file(entry, tmp_path / "cache", mirror=srv.url)
        assert len(srv.requests) == 2 and srv.requests[1][1] is not None  # second request asked for the rest
    assert status == "downloaded"
    assert dest.read_bytes() == (shared_data / FILES[2]).read_bytes()


def test_a_half_file_never_passes(shared_data, tmp_path):
    """A server that always drops mid-body: the fetch fails and leaves no file under the real name."""
    entry = {"path": FILES[0], "url": "https://example.invalid/x", "sha256": content_sha256(shared_data / FILES[0])}
    with _Server(shared_data, ranges=False) as srv:
        class Always(set):
            def discard(self, x):
                pass
        srv.drop = Always({FILES[0]})
        with pytest.raises(InputError, match="download failed after 3 attempts"):
            fetch_file(entry, tmp_path / "cache", mirror=srv.url, retries=2)
    assert not (tmp_path / "cache" / FILES[0]).exists()
    # a stale half file under the real name is not trusted: it is re-downloaded and verified
    half = tmp_path / "cache" / FILES[0]
    half.write_bytes((shared_data / FILES[0]).read_bytes()[:300])
    with _Server(shared_data) as srv:
        _, status = fetch_file(entry, tmp_path / "cache", mirror=srv.url)
    assert status == "downloaded" and half.read_bytes() == (shared_data / FILES[0]).read_bytes()


def test_audit_without_data_uses_the_cache(shared_data, tmp_path, monkeypatch):
    from rlaudit.sources import source_from_protocol

    proto = _protocol(tmp_path, shared_data, files=FILES[:2])
    monkeypatch.setenv("RLAUDIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(InputError, match="rlaudit fetch"):
        source_from_protocol(proto)
    with _Server(shared_data) as srv:
        fetch_protocol(proto, mirror=srv.url, progress=False)
    src = source_from_protocol(proto)
    assert sorted(src.table.algorithms) == ["DrQ", "SLAC"] and src.table.budgets == [100_000, 500_000]
    try:
        import rlaudit.cli.audit_cmd  # noqa: F401
    except ImportError:
        return
    out = tmp_path / "audit"
    r = CliRunner().invoke(main, ["audit", str(proto), "--out", str(out), "--reps", "1200"])  # >= 20 m / alpha
    assert r.exit_code == 0, r.output
    assert (out / "audit.json").is_file()
