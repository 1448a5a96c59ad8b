"""Helpers shared by the importers: reading (gzipped) JSON with positioned errors, option checks, paths."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from rlaudit.errors import InputError, did_you_mean
from rlaudit.io import loads_nested
from rlaudit.scores import BUDGET_MAX, exact_whole

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 16
MAX_CONTENT_BYTES = 1 << 30
"""Largest content (after gunzip) read from one input file: a small gzip bomb must not fill the memory."""


def iter_content(path: Path, max_bytes: int | None = None) -> Iterator[bytes]:
    """Yield the content of ``path`` in chunks, gunzipped on the fly when it is gzip data.

    At most ``max_bytes`` (default :data:`MAX_CONTENT_BYTES`) are produced; the decompressor is never
    asked for more, so a gzip bomb costs one chunk of memory before it is refused.

    Raises:
        InputError: unreadable file, truncated or corrupt gzip data, or content over the cap.
    """
    cap = MAX_CONTENT_BYTES if max_bytes is None else max_bytes
    try:
        with open(path, "rb") as fh:
            packed = fh.read(2) == GZIP_MAGIC
        # GzipFile.read(n) inflates at most n bytes per call (zlib's max_length), so memory stays bounded.
        with (gzip.open(path, "rb") if packed else open(path, "rb")) as fh:
            n_out = 0
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                n_out += len(chunk)
                if n_out > cap:
                    raise InputError(f"{path}: content larger than {cap:,} bytes{' once gunzipped' if packed else ''}; "
                                     f"refusing to read it")
                yield chunk
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip data ({_first_line(exc)})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    """Return the content of ``path``, gunzipped when it is gzip data (see :func:`iter_content`)."""
    return b"".join(iter_content(path, max_bytes))


def content_sha256(path: Path, max_bytes: int | None = None) -> str:
    """SHA-256 of a file's content, gunzipped first when it is gzip data (how protocols state it), streamed."""
    h = hashlib.sha256()
    for chunk in iter_content(path, max_bytes):
        h.update(chunk)
    return h.hexdigest()


def decode_utf8(content: bytes, path: Path, what: str) -> str:
    """``content`` as UTF-8 text; bytes that are not UTF-8 raise :class:`InputError` naming line and byte.

    Never decodes with replacement: a name rewritten to U+FFFD would silently become another name. A leading
    byte-order mark (UTF-8 as Windows editors save it) is dropped.
    """
    try:
        return content.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = content.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: not a {what} in UTF-8 (line {line}, byte {exc.start} is "
                         f"0x{content[exc.start]:02x}); save it as UTF-8") from None


def load_json(path: Path, content: bytes | None = None):
    """Parse ``path`` (``.json`` or ``.json.gz``) as JSON; bare ``NaN`` is accepted (DreamerV3 files use it).

    Raises:
        InputError: naming the file, line and column of the first syntax error (e.g. a truncated file).
    """
    content = read_bytes(path) if content is None else content
    text = decode_utf8(content, path, "JSON text file")
    if not text.strip():
        raise InputError(f"{path}: empty file, expected JSON")
    try:
        return loads_nested(json.loads, text, str(path))
    except json.JSONDecodeError as exc:
        ends_early = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        what = "truncated JSON (the text ends early)" if ends_early else "not valid JSON"
        raise InputError(f"{path}: {what} at line {exc.lineno} column {exc.colno} ({exc.msg})") from None


def check_options(options: dict, allowed: dict[str, str], where: str) -> None:
    """Reject unknown importer options with a did-you-mean hint.

    Args:
        options: the options given.
        allowed: option name -> one-line description (used in the message).
        where: importer name or protocol field for the message.
    """
    for key in options:
        if key not in allowed:
            raise InputError(f"{where}: unknown option {key!r}{did_you_mean(key, allowed)}; "
                             f"known options: {', '.join(sorted(allowed))}")


def opt_int(options: dict, key: str, default, where: str, minimum: int | None = None):
    """Integer option (accepts ``"100k"``/``"1M"`` strings); ``default`` when absent."""
    if key not in options or options[key] is None:
        return default
    value = parse_count(options[key], f"{where}: option {key!r}")
    if minimum is not None and value < minimum:
        raise InputError(f"{where}: option {key!r} must be >= {minimum}, got {value}")
    return value


def opt_budgets(options: dict, key: str, where: str) -> list[int] | None:
    """List of budgets (ints or ``"100k"``-style strings, or one comma-separated string)."""
    if key not in options or options[key] is None:
        return None
    value = options[key]
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise InputError(f"{where}: option {key!r} must be a non-empty list of budgets")
    budgets = [parse_count(v, f"{where}: option {key!r}") for v in value]
    if any(b < 0 for b in budgets):
        raise InputError(f"{where}: option {key!r}: budgets must be >= 0")
    for b in budgets:
        check_budget(b, f"{where}: option {key!r}")
    return sorted(set(budgets))


def check_budget(budget: int, where: str, how: str = "") -> int:
    """``budget`` when it fits the table's int64 ``budget`` column; refused, never wrapped, past 2^63 - 1.

    Args:
        budget: an exact (Python) integer, computed before any cast to int64.
        where: the option, file or record, for the message.
        how: how the budget was computed, for the message (``"(iteration 9 + 1) x 10 frames"``).
    """
    if budget > BUDGET_MAX:
        raise InputError(f"{where}: budget {budget:,}{' = ' + how if how else ''} is larger than {BUDGET_MAX:,} "
                         f"(2^63 - 1), the largest a score table holds")
    return budget


_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kKmMbBgG]?)\s*$")
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}


def parse_count(value, where: str) -> int:
    """``100000``, ``1e5``, ``"100k"``, ``"1.5M"`` -> int (exact, at most :data:`BUDGET_MAX` in magnitude);
    anything else raises :class:`InputError`."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a whole number, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        raise InputError(f"{where}: expected a whole number, got {value!r}")
    if isinstance(value, (int, float)):
        if abs(value) > BUDGET_MAX:
            raise _out_of_range(value, where)
        return int(value)
    if isinstance(value, str):
        m = _COUNT.match(value.replace("_", ""))
        if m:
            try:
                number = exact_whole(m.group(1), _SCALE[m.group(2).lower()])
            except OverflowError:
                raise _out_of_range(value, where) from None
            if number is not None:
                return number
    raise InputError(f"{where}: expected a whole number such as 100000 or '100k', got {value!r}")


class OutOfRange(InputError):
    """A count or budget past :data:`BUDGET_MAX` (so that callers can say so in their own words)."""


def _out_of_range(value, where: str) -> InputError:
    return OutOfRange(f"{where}: {value!r} is out of range: at most {BUDGET_MAX:,} (2^63 - 1)")


def is_count(value) -> bool:
    """True when ``value`` reads as a budget (``"100k"``, ``"500000"``)."""
    try:
        parse_count(value, "")
        return True
    except InputError:
        return False


def expand(paths: Sequence[Path], accept, what: str) -> list[Path]:
    """Files named by ``paths``, folders expanded (sorted, recursively) to the files ``accept`` keeps.

    Raises:
        InputError: for a missing path, or a folder holding no file ``accept`` keeps.
    """
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and accept(f))
            if not found:
                raise InputError(f"{p}: no {what} found in this folder")
            out.extend(found)
        else:
            out.append(p)
    if not out:
        raise InputError(f"no input files given (expected {what})")
    return out


def strip_suffixes(path: Path, suffixes: Iterable[str] = (".gz", ".json", ".npz", ".csv")) -> str:
    """File stem without the known (possibly stacked) suffixes: ``pong_CNN.json.gz`` -> ``pong_CNN``."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for s in suffixes:
            if name.lower().endswith(s) and len(name) > len(s):
                name = name[: -len(s)]
                changed = True
    return name


def check_record(record, keys: Sequence[str], where: str, shape: str) -> dict:
    """A JSON record that must be an object with exactly ``keys``; ``shape`` names it in messages
    (e.g. ``"{Iteration, Value, Agent}"``).

    Raises:
        InputError: not an object, an unexpected key, or a missing key, naming ``where``.
    """
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected an object {shape}, got a {type_name(record)}")
    extra = sorted(set(record) - set(keys))
    if extra:
        raise InputError(f"{where}: unexpected key {extra[0]!r}; expected keys {', '.join(keys)}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise InputError(f"{where}: missing key {missing[0]!r}")
    return record


def type_name(value) -> str:
    """JSON type name of a Python value, for messages."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def track(items: Sequence, what: str, min_items: int = 20):
    """Iterate ``items`` with a transient rich progress bar on stderr (only on a terminal, many items)."""
    import sys

    if len(items) < min_items or not sys.stderr.isatty():
        return iter(items)
    from rich.console import Console
    from rich.progress import track as rich_track

    return rich_track(items, description=what, console=Console(stderr=True), transient=True)
