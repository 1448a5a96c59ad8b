"""Download a published protocol's data files into a cache, verified by SHA-256.

Cache: ``$RLAUDIT_CACHE`` or ``~/.cache/rlaudit``; each file lands at ``<cache>/<path>`` (the protocol's
relative ``path``), so protocols that share a file share its copy. A file is downloaded to
``<path>.part`` and renamed into place only after its checksum matches, so the cache never holds a half
file under the real name. A dropped connection is retried (``Range`` request to resume when the server
supports it, else a restart from zero); a checksum mismatch deletes the download and raises.

The checksum covers the file *content* as published upstream; for a ``.gz`` path it is the checksum of the
gunzipped bytes (Dopamine's ``<game>.json`` upstream is stored gzip-compressed here). A download that is
not gzip data but is bound for a ``.gz`` path is compressed after verification.

``$RLAUDIT_FETCH_BASE`` (or ``--mirror``) replaces every URL by ``<base>/<path>``: a mirror or a local copy
laid out like ``--data DIR``.

Hostile input: every ``path`` stays inside the cache (checked again here, after the ``[data]`` checks); a
``.part`` that is a symbolic link is removed, never written through; redirects go to ``http(s)://`` only;
a download stops at :data:`MAX_DOWNLOAD_BYTES` and its content at
:data:`~rlaudit.importers._common.MAX_CONTENT_BYTES` once gunzipped (checksums are streamed).
"""

from __future__ import annotations

import gzip
import http.client
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.io import loads_nested
from rlaudit.importers._common import CHUNK, GZIP_MAGIC, content_sha256
from rlaudit.importers.data_section import cache_dir, check_data_section

DEFAULT_RETRIES = 4
MAX_DOWNLOAD_BYTES = 1 << 30
"""Largest file ``fetch`` downloads (the published files are a few MB; a larger body is not the file)."""
REDIRECT_SCHEMES = ("http", "https")


def file_url(entry: dict, mirror: str | None = None) -> str:
    """The URL to download ``entry`` from: ``mirror``/``$RLAUDIT_FETCH_BASE`` + path, else its ``url``."""
    base = mirror or os.environ.get("RLAUDIT_FETCH_BASE")
    if base:
        return base.rstrip("/") + "/" + urllib.parse.quote(entry["path"])
    return entry["url"]


def _content_digest(data_path: Path) -> str:
    """Streamed content digest; ``"unreadable: …"`` (never a match) for a corrupt or oversized file."""
    try:
        return content_sha256(data_path)
    except InputError as exc:
        return f"unreadable: {exc}"


def _destination(cache: Path, rel: str) -> Path:
    """``cache/rel``, refusing any ``rel`` that would not name a file strictly inside ``cache``."""
    if "\0" in rel or not rel.strip():
        raise InputError(f"{rel!r}: not a usable file path")
    dest = cache / rel
    root = os.path.abspath(cache)
    target = os.path.abspath(dest)
    if os.path.commonpath([root, target]) != root or target == root:
        raise InputError(f"{rel!r}: path escapes the cache {cache}")
    return dest


class _SafeRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http(s) only (urllib's default also follows ``ftp://``)."""

    def http_error_302(self, req, fp, code, msg, headers):
        newurl = headers.get("location") or headers.get("uri")
        if newurl is not None:
            scheme = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl)).scheme.lower()
            if scheme not in REDIRECT_SCHEMES:
                raise InputError(f"{req.full_url}: redirected to a {scheme or 'schemeless'}:// URL ({newurl}); "
                                 f"only http(s) redirects are followed")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_SafeRedirects)


def fetch_file(entry: dict, cache: Path, mirror: str | None = None, retries: int = DEFAULT_RETRIES,
               timeout: float = 60.0, on_bytes: Callable[[int], None] | None = None,
               max_bytes: int = MAX_DOWNLOAD_BYTES) -> tuple[Path, str]:
    """Make ``cache/entry["path"]`` hold the verified file.

    Args:
        entry: a ``[[data.files]]`` table (``path``, ``url``, ``sha256``).
        cache: cache folder.
        mirror: base URL replacing ``entry["url"]`` (see the module docstring).
        retries: attempts after a dropped connection.
        timeout: socket timeout in seconds.
        on_bytes: progress callback, called with each chunk's size.
        max_bytes: largest body accepted (the download is deleted past it).

    Returns:
        ``(path, status)`` with status ``"cached"`` (already there and verified) or ``"downloaded"``.

    Raises:
        InputError: checksum mismatch (the download is deleted), HTTP error, or too many dropped connections.
    """
    dest = _destination(cache, entry["path"])
    if dest.is_file() and not dest.is_symlink() and _content_digest(dest) == entry["sha256"]:
        return dest, "cached"
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    if part.is_symlink() or (part.exists() and not part.is_file()):
        # Resuming would append through the link into whatever it points at: start from zero instead.
        if part.is_dir() and not part.is_symlink():
            raise InputError(f"{part}: a folder is in the way of the download; remove it")
        part.unlink()
    url = file_url(entry, mirror)
    attempt = 0
    while True:
        try:
            _download(url, part, timeout, on_bytes, max_bytes)
            break
        except InputError:
            part.unlink(missing_ok=True)
            raise
        except _Dropped as exc:
            attempt += 1
            if attempt > retries:
                part.unlink(missing_ok=True)
                raise InputError(f"{url}: download failed after {retries + 1} attempts ({exc})") from None
            time.sleep(min(0.2 * 2 ** attempt, 5.0))
    digest = _content_digest(part)
    if digest != entry["sha256"]:
        part.unlink(missing_ok=True)
        raise InputError(f"{url}: checksum mismatch for {entry['path']}: got sha256 {digest[:16]}…, expected "
                         f"{entry['sha256'][:16]}…; the download was deleted")
    if dest.name.endswith(".gz"):
        with open(part, "rb") as fh:
            is_gz = fh.read(2) == GZIP_MAGIC
        if not is_gz:
            packed = part.with_name(part.name + ".gz")
            with open(part, "rb") as src, gzip.GzipFile(packed, "wb", compresslevel=9, mtime=0) as dst:
                for chunk in iter(lambda: src.read(CHUNK), b""):
                    dst.write(chunk)
            os.replace(packed, part)
    os.replace(part, dest)
    return dest, "downloaded"


class _Dropped(Exception):
    """The connection closed or timed out before the whole body arrived."""


def _download(url: str, part: Path, timeout: float, on_bytes, max_bytes: int) -> None:
    """Download ``url`` into ``part``, resuming from its current size when the server honours ``Range``."""
    have = part.lstat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "rlaudit-fetch"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = _OPENER.open(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the .part is already complete (or longer): start again
            part.unlink(missing_ok=True)
            raise _Dropped("range not satisfiable; restarting") from None
        raise InputError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (socket.timeout, ConnectionError)):
            raise _Dropped(str(exc.reason)) from None
        raise InputError(f"{url}: cannot connect ({exc.reason})") from None
    except (ConnectionError, socket.timeout, http.client.HTTPException) as exc:
        raise _Dropped(f"{type(exc).__name__}: {exc}") from None
    with resp:
        resumed = have and resp.status == 206 and resp.headers.get("Content-Range", "").startswith(f"bytes {have}-")
        if resp.status == 206 and not resumed:  # a range we did not ask for: start again from zero
            part.unlink(missing_ok=True)
            raise _Dropped("server answered with an unexpected range; restarting")
        expected = resp.headers.get("Content-Length")
        expected = int(expected) if expected and expected.isdigit() else None
        if expected is not None and (have if resumed else 0) + expected > max_bytes:
            raise InputError(f"{url}: the server announces {expected:,} bytes, more than the {max_bytes:,} a "
                             f"published data file may have")
        got = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if resumed else os.O_TRUNC)
        with os.fdopen(os.open(part, flags, 0o644), "wb") as fh:
            try:
                for chunk in iter(lambda: resp.read(CHUNK), b""):
                    if (have if resumed else 0) + got + len(chunk) > max_bytes:
                        raise InputError(f"{url}: more than {max_bytes:,} bytes; not a published data file "
                                         f"(the download was deleted)")
                    fh.write(chunk)
                    got += len(chunk)
                    if on_bytes:
                        on_bytes(len(chunk))
            except (ConnectionError, socket.timeout, http.client.HTTPException) as exc:
                raise _Dropped(f"{type(exc).__name__}: {exc}") from None
        if expected is not None and got < expected:
            raise _Dropped(f"connection closed after {got} of {expected} bytes")


def fetch_protocol(protocol: Path, cache: Path | None = None, mirror: str | None = None,
                   progress: bool = True) -> list[tuple[Path, str]]:
    """Fetch every ``[[data.files]]`` entry of a published protocol.

    Args:
        protocol: the ``.toml`` file.
        cache: cache folder (default :func:`cache_dir`).
        mirror: base URL replacing each file's ``url``.
        progress: show a rich progress bar on stderr.

    Returns:
        ``(path, status)`` per file, in protocol order.
    """
    import tomllib

    protocol = Path(protocol)
    try:
        doc = loads_nested(tomllib.loads, protocol.read_text(encoding="utf-8-sig"), str(protocol))
    except FileNotFoundError:
        raise InputError(f"{protocol}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{protocol}: not valid TOML ({exc})") from None
    if "data" not in doc:
        raise InputError(f"{protocol}: no [data] section; only published protocols have files to fetch")
    check_data_section(doc["data"], f"{protocol}: data")
    cache = cache_dir() if cache is None else Path(cache)
    files = doc["data"]["files"]
    out = []
    if not progress:
        return [fetch_file(f, cache, mirror) for f in files]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("fetch"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  transient=True) as bar:
        files_task = bar.add_task("", total=len(files))
        for f in files:
            bar.update(files_task, description=f["path"])
            out.append(fetch_file(f, cache, mirror))
            bar.advance(files_task)
    return out
