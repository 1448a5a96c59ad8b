"""Notes a sweep's reports carry beside its store: ``<store>.notes.toml`` (``store.sqlite.notes.toml``).

A recorded sweep sometimes has facts that are not runs: a measurement made on another machine (how far the JAX
backend takes the protocol on a GPU, say). They are kept as one-line notes under ``[notes]``, one string per key,
written by the command that measured them, and every score table read from the store lists them in its
``meta.notes``, so that the report shows them with the store's own notes::

    [notes]
    gpu_jax_budget = "JAX backend on a GPU (...): ..."
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.io import atomic_path

SUFFIX = ".notes.toml"
"""Added to the store's file name (as ``.checkpoints`` is for its checkpoints): a file of the user's own beside
the store is never read as its notes."""
HEADER = "# Notes every report of this sweep carries (rlaudit.store.notes); one line each, written by the command\n" \
         "# that measured what it says.\n"


def notes_path(store: Path) -> Path:
    """The notes file of the store at ``store``."""
    store = Path(store)
    return store.with_name(store.name + SUFFIX)


def read_notes(store: Path) -> tuple[str, ...]:
    """The notes beside ``store``, in key order; none when the file is absent.

    Raises:
        InputError: the file is not TOML, or ``notes`` is not a table of strings (naming the file and the key).
    """
    notes = _read(notes_path(store))
    return tuple(notes[k] for k in sorted(notes))


def _read(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"{path}: cannot read the sweep's notes ({err})") from None
    notes = data.get("notes", {})
    if not isinstance(notes, dict):
        raise InputError(f"{path}: 'notes' must be a table of strings, got {type(notes).__name__}")
    for key, text in notes.items():
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{path}: notes.{key} must be a non-empty string, got {text!r}")
    return notes


def check_notes_file(path: Path) -> None:
    """Raise :class:`InputError` unless :func:`set_note` can write ``path``: a notes file or none yet, in an
    existing folder (for a command that measures first and writes its note last)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"{path}: its folder does not exist")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a notes file")
    _read(path)


def set_note(path: Path, key: str, text: str) -> None:
    """Write ``text`` under ``key`` into the notes file ``path`` (created if absent), keeping its other notes.

    Raises:
        InputError: the file exists and is not a notes file (:func:`read_notes`); it is left as it was.
    """
    path = Path(path)
    notes = dict(_read(path))
    notes[key] = " ".join(text.split())
    # JSON's string escapes are TOML basic-string escapes (ASCII only, \uXXXX for the rest)
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in sorted(notes.items()))
    with atomic_path(path) as tmp:
        tmp.write_text(f"{HEADER}\n[notes]\n{body}", encoding="utf-8")
