"""File helpers shared by every stage: atomic writes so that a failure never leaves a partial file."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rlaudit.errors import InputError, WriteFailed

MAX_NESTING = 32
"""Deepest nesting of arrays and tables a protocol, claims file or JSON document may have: far past any real
one, and shallow enough that parsing, checking and hashing never hit Python's recursion limit."""


def existing_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a :class:`Path` when it names an existing file that is not a folder.

    Args:
        path: the input the user named.
        what: what it should be, for messages: ``"protocol file"`` gives ``no such protocol file`` and
            ``is a directory, expected a protocol file``.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such {what}")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a {what}")
    return path


def ensure_writable_dir(path: Path) -> None:
    """Create ``path`` (and parents) or raise :class:`InputError` naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create output directory ({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise InputError(f"{path}: output directory is not writable")


def check_nesting(doc, where: str, limit: int = MAX_NESTING) -> None:
    """Raise :class:`InputError` naming ``where`` when lists and dicts in ``doc`` nest deeper than ``limit``.

    Iterative, so that a hostile document cannot exhaust the stack while being measured.
    """
    stack = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= limit:
                raise _too_deep(where, limit)
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def loads_nested(loads, text: str, where: str):
    """``loads(text)`` (``tomllib.loads`` or ``json.loads``) refusing documents nested past :data:`MAX_NESTING`.

    The parser's own syntax errors propagate unchanged, for the caller's message.
    """
    try:
        doc = loads(text)
    except RecursionError:
        raise _too_deep(where, MAX_NESTING) from None
    check_nesting(doc, where)
    return doc


def _too_deep(where: str, limit: int) -> InputError:
    return InputError(f"{where}: arrays or tables nested more than {limit} levels deep; no protocol or result "
                      f"needs that many")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    Raises:
        InputError: ``path`` is an existing folder, or its folder cannot be created.
        WriteFailed: the file system refused the write (disk full, I/O error); nothing is left behind.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file name (e.g. {path / 'scores.csv'})")
    ensure_writable_dir(path.parent if str(path.parent) else Path("."))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise WriteFailed(f"{path}: cannot write ({exc.strerror})") from None
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        # The block only writes `tmp`: an OSError here is the file system refusing (ENOSPC, EIO, EDQUOT).
        raise WriteFailed(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory's *contents* in a staging folder, then move them into ``path``.

    On failure nothing new is left in ``path``. Files already in ``path`` that the block writes again are
    replaced; other existing files are kept.
    """
    path = Path(path)
    ensure_writable_dir(path)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".staging", dir=path))
    except OSError as exc:
        raise WriteFailed(f"{path}: cannot write ({exc.strerror})") from None
    try:
        yield stage
        for item in sorted(stage.rglob("*")):
            rel = item.relative_to(stage)
            dest = path / rel
            if item.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item, dest)
    except OSError as exc:  # the block writes into the staging folder: the file system refused
        raise WriteFailed(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
