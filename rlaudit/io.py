"""File helpers shared by every stage: atomic writes so that a failure never leaves a partial file."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from rlaudit.errors import InputError, WriteFailed

REPORT_MARKER = ".rlaudit-report"
"""File written into every report folder, so that a later report may replace that folder's files."""


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


def csv_rows(lines: Iterable[str], sep: str = ",", first_line: int = 1,
             comment: str | None = None) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of each record of CSV text, as pandas reads it: empty lines skipped.

    Args:
        lines: the text's lines (a file object or ``str.splitlines(keepends=True)``).
        sep: field separator.
        first_line: number of the first of ``lines`` in the file (after skipped comment lines).
        comment: with ``"#"``, a field holding it ends the record there (pandas' ``comment="#"``) and a
            record left empty is skipped.
    """
    reader = csv.reader(lines, delimiter=sep)
    start = first_line
    for fields in reader:
        line, start = start, first_line + reader.line_num
        if comment is not None:
            cut = next((i for i, f in enumerate(fields) if comment in f), None)
            if cut is not None:
                fields = fields[:cut] + [fields[cut].split(comment, 1)[0]]
                if fields == [""] or (cut == 0 and not fields[0].strip()):
                    continue
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        yield line, fields


def check_csv_table(rows: Iterable[tuple[int, list[str]]], where: str) -> None:
    """Refuse a header that names a column twice, and records with more or fewer fields than the header.

    pandas would read both without a word: a duplicated ``DQN`` becomes an invented ``DQN.1``, a second
    ``score`` column is ignored, and rows that all end in a comma shift every column by one.

    Args:
        rows: ``(line number, fields)`` as :func:`csv_rows` yields them, the header first.
        where: the file, for messages.

    Raises:
        InputError: naming the line and the column (or the number of fields).
    """
    header: list[str] | None = None
    for line, fields in rows:
        if header is None:
            header = [f.strip() for f in fields]
            seen: dict[str, int] = {}
            for i, name in enumerate(header, start=1):
                if name in seen:
                    raise InputError(f"{where}: line {line}: column {name!r} appears twice in the header "
                                     f"(columns {seen[name]} and {i}); give each column its own name")
                seen[name] = i
            continue
        if len(fields) != len(header):
            hint = " (the line ends in a separator?)" if len(fields) > len(header) and not fields[-1].strip() else ""
            raise InputError(f"{where}: line {line}: {len(fields)} fields, but the header has {len(header)} "
                             f"columns{hint}; every row needs one value per column")


def is_audit_json(path: Path) -> bool:
    """Whether ``path`` is an audit document written by rlaudit (a JSON object with its version keys)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "schema_version" in doc and "rlaudit_version" in doc


def check_output_dir(out_dir: str | os.PathLike, flag: str = "-o", force: bool = False,
                     writes: Iterable[str] | None = None) -> Path:
    """``out_dir`` as a path, after refusing what would overwrite or scatter a user's files.

    Refused: an empty path (it would mean the current folder) and the root of the file system; unless
    ``force``, an existing folder that holds files but no earlier rlaudit report (no :data:`REPORT_MARKER`
    and no rlaudit ``audit.json``), or, when ``writes`` names the only files written, one of those files
    that rlaudit did not write.

    Raises:
        InputError: naming ``flag`` and the folder (or the file).
    """
    if not str(out_dir).strip():
        raise InputError(f"{flag}: empty path; give the folder to write into")
    out = Path(out_dir)
    resolved = out.resolve()
    if resolved == Path(resolved.anchor):
        raise InputError(f"{flag} {out_dir}: the root of the file system; give a folder of its own")
    if force or not out.is_dir():
        return out
    if writes is not None:
        foreign = next((out / n for n in writes if (out / n).exists() and not is_audit_json(out / n)), None)
        if foreign is not None:
            raise InputError(f"{flag} {out_dir}: {foreign} exists and is not an rlaudit audit.json; give another "
                             f"folder, or add --force to overwrite it")
        return out
    if not any(out.iterdir()) or (out / REPORT_MARKER).is_file() or is_audit_json(out / "audit.json"):
        return out
    raise InputError(f"{flag} {out_dir}: the folder holds files and no earlier rlaudit report, and they could be "
                     f"overwritten; give an empty or new folder, or add --force")


def ensure_writable_dir(path: Path) -> None:
    """Create ``path`` (and parents) or raise :class:`InputError` naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{path}: cannot create output directory ({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise InputError(f"{path}: output directory is not writable")


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
