"""Score normalisation: ``none``, ``atari`` (human-normalised), ``divide:K``, ``minmax`` (user references).

- ``atari``: human-normalised score ``(score - random) / (human - random)`` with the standard Atari-57
  random and human reference scores of DQN Zoo (:data:`ATARI_REFERENCE`). Game names are matched across
  the usual spellings (:func:`canonical_game`).
- ``divide:K``: ``score / K`` (DMC returns are divided by 1000).
- ``minmax:PATH``: ``(score - low) / (high - low)`` with per-task references from a CSV ``task,low,high``.

A task without a reference is an :class:`~rlaudit.errors.InputError` naming every such task.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from rlaudit.errors import InputError, did_you_mean
from rlaudit.io import check_csv_table

METHODS: tuple[str, ...] = ("none", "atari", "divide", "minmax")
"""Normalisation methods."""

SPEC_FORMS = "none, atari, divide:K or minmax:PATH"

# Atari-57 reference scores: game -> (random, human), raw game scores. Source: google-deepmind/dqn_zoo,
# dqn_zoo/atari_data.py (_ATARI_DATA), commit 45061f4b (Apache-2.0). Identical to danijar/dreamerv3's
# baselines.yaml (atari57_gamer) for all 57 games and to the rliable colab's tables for the 26 Atari 100k
# games. VideoPinball's random score is DQN Zoo's 16256.9 (the MuZero-paper table uses 0.0).
_ATARI_REFERENCE = {
    "Alien": (227.8, 7127.7),
    "Amidar": (5.8, 1719.5),
    "Assault": (222.4, 742.0),
    "Asterix": (210.0, 8503.3),
    "Asteroids": (719.1, 47388.7),
    "Atlantis": (12850.0, 29028.1),
    "BankHeist": (14.2, 753.1),
    "BattleZone": (2360.0, 37187.5),
    "BeamRider": (363.9, 16926.5),
    "Berzerk": (123.7, 2630.4),
    "Bowling": (23.1, 160.7),
    "Boxing": (0.1, 12.1),
    "Breakout": (1.7, 30.5),
    "Centipede": (2090.9, 12017.0),
    "ChopperCommand": (811.0, 7387.8),
    "CrazyClimber": (10780.5, 35829.4),
    "Defender": (2874.5, 18688.9),
    "DemonAttack": (152.1, 1971.0),
    "DoubleDunk": (-18.6, -16.4),
    "Enduro": (0.0, 860.5),
    "FishingDerby": (-91.7, -38.7),
    "Freeway": (0.0, 29.6),
    "Frostbite": (65.2, 4334.7),
    "Gopher": (257.6, 2412.5),
    "Gravitar": (173.0, 3351.4),
    "Hero": (1027.0, 30826.4),
    "IceHockey": (-11.2, 0.9),
    "Jamesbond": (29.0, 302.8),
    "Kangaroo": (52.0, 3035.0),
    "Krull": (1598.0, 2665.5),
    "KungFuMaster": (258.5, 22736.3),
    "MontezumaRevenge": (0.0, 4753.3),
    "MsPacman": (307.3, 6951.6),
    "NameThisGame": (2292.3, 8049.0),
    "Phoenix": (761.4, 7242.6),
    "Pitfall": (-229.4, 6463.7),
    "Pong": (-20.7, 14.6),
    "PrivateEye": (24.9, 69571.3),
    "Qbert": (163.9, 13455.0),
    "Riverraid": (1338.5, 17118.0),
    "RoadRunner": (11.5, 7845.0),
    "Robotank": (2.2, 11.9),
    "Seaquest": (68.4, 42054.7),
    "Skiing": (-17098.1, -4336.9),
    "Solaris": (1236.3, 12326.7),
    "SpaceInvaders": (148.0, 1668.7),
    "StarGunner": (664.0, 10250.0),
    "Surround": (-10.0, 6.5),
    "Tennis": (-23.8, -8.3),
    "TimePilot": (3568.0, 5229.2),
    "Tutankham": (11.4, 167.6),
    "UpNDown": (533.4, 11693.2),
    "Venture": (0.0, 1187.5),
    "VideoPinball": (16256.9, 17667.9),
    "WizardOfWor": (563.5, 4756.5),
    "YarsRevenge": (3092.9, 54576.9),
    "Zaxxon": (32.5, 9173.3),
}
ATARI_REFERENCE: Mapping[str, tuple[float, float]] = MappingProxyType(_ATARI_REFERENCE)
"""Atari-57 ``game -> (random, human)`` reference scores (DQN Zoo), keyed by canonical CamelCase name."""

_GAME_KEYS = {g.lower(): g for g in _ATARI_REFERENCE}
# Spellings whose letters differ from the canonical name's, not only in case and punctuation.
_GAME_ALIASES = {
    "montezumasrevenge": "MontezumaRevenge",
    "upanddown": "UpNDown",
    "jamesbond007": "Jamesbond",
    "kungfu": "KungFuMaster",
    "mspac": "MsPacman",
}
_ENV_ID = re.compile(r"(noframeskip|deterministic)?-v\d+$")


def canonical_game(name: str) -> str | None:
    """The canonical Atari-57 game name for a spelling, or ``None`` when it is not an Atari-57 game.

    Matching ignores case, spaces, ``_``, ``-`` and ``.``, an ``ALE/`` or ``atari_`` prefix and a Gym id
    suffix (``NoFrameskip-v4``, ``Deterministic-v4``, ``-v5``): ``MsPacman``, ``ms_pacman``, ``Ms. Pac-Man``,
    ``MsPacmanNoFrameskip-v4``, ``ALE/MsPacman-v5`` and ``atari_ms_pacman`` all give ``"MsPacman"``.

    Args:
        name: a game or environment name.
    """
    s = str(name).strip().lower()
    for prefix in ("ale/", "atari_", "atari-", "atari/"):
        if s.startswith(prefix):
            s = s[len(prefix):]
    s = _ENV_ID.sub("", s)
    key = re.sub(r"[^a-z0-9]", "", s)
    return _GAME_KEYS.get(key) or _GAME_ALIASES.get(key)


@dataclass(frozen=True)
class Normalization:
    """How raw scores become normalised scores (immutable)."""

    method: str = "none"
    """One of :data:`METHODS`."""
    divisor: float | None = None
    """``divide`` only: the positive number scores are divided by."""
    references: Mapping[str, tuple[float, float]] = field(default_factory=lambda: MappingProxyType({}))
    """``atari``/``minmax``: task -> (low, high); normalised = (score - low) / (high - low)."""
    label: str = "none"
    """Short name written into outputs: ``"none"``, ``"atari"``, ``"divide:1000"``, ``"minmax"``."""
    source: str = ""
    """Where the references or divisor come from, in words (a protocol's ``source``; shown in reports)."""
    where: str = field(default="", compare=False)
    """The option or protocol field it was given in (``--normalize``), for messages."""
    low_is_random: bool = False
    """The low references are the uniformly random policy's scores (``atari``; ``minmax`` with
    ``low = "random"``), so the audit can tell which tasks nothing has learned yet."""

    def reference_for(self, task: str) -> tuple[float, float] | None:
        """(low, high) for ``task``, or ``None`` when the task has no reference."""
        if self.method == "atari":
            game = canonical_game(task)
            return self.references.get(game) if game else None
        return self.references.get(task)


NONE = Normalization()


def parse_normalization(spec: str | Mapping | None, where: str = "--normalize",
                        base_dir: Path | None = None) -> Normalization:
    """Parse a normalisation spec from the command line or a protocol file.

    Args:
        spec: ``None`` or ``"none"``; ``"atari"``; ``"divide:K"``; ``"minmax:PATH"`` (CSV ``task,low,high``);
            or a mapping ``{method, divisor, references={task=[low, high]}, references_file}`` (the
            ``[normalization]`` table of a protocol; inline references override the file's).
        where: the option or file field named in error messages.
        base_dir: directory relative paths are resolved against (the protocol's folder); default the cwd.

    Returns:
        A :class:`Normalization`.

    Raises:
        InputError: unknown method, bad divisor, unreadable or malformed reference CSV (file and line named).
    """
    norm = _parse(spec, where, base_dir)
    return norm if norm.method == "none" else replace(norm, where=where)


def _parse(spec: str | Mapping | None, where: str, base_dir: Path | None) -> Normalization:
    if spec is None:
        return NONE
    if isinstance(spec, Mapping):
        return _parse_mapping(spec, where, base_dir)
    if not isinstance(spec, str):
        raise InputError(f"{where}: expected a string ({SPEC_FORMS}) or a table, got {type(spec).__name__}")
    text = spec.strip()
    method, sep, arg = text.partition(":")
    method = method.strip().lower()
    if method == "none" and not sep:
        return NONE
    if method == "atari" and not sep:
        return Normalization("atari", references=ATARI_REFERENCE, label="atari", low_is_random=True)
    if method == "divide":
        if not sep or not arg.strip():
            raise InputError(f"{where}: 'divide' needs a divisor, e.g. divide:1000")
        return _divide(arg.strip(), where)
    if method == "minmax":
        if not sep or not arg.strip():
            raise InputError(f"{where}: 'minmax' needs a reference CSV (task,low,high), e.g. minmax:refs.csv")
        return Normalization("minmax", references=MappingProxyType(_read_references(arg.strip(), where,
                                                                                     base_dir)), label="minmax")
    if method in ("none", "atari"):
        raise InputError(f"{where}: {method!r} takes no argument, got {text!r}")
    raise InputError(f"{where}: unknown normalisation {text!r}; expected {SPEC_FORMS}{did_you_mean(method, METHODS)}")


def _divide(value, where: str) -> Normalization:
    try:
        k = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: divisor {value!r} is not a number") from None
    if not math.isfinite(k) or k <= 0:
        raise InputError(f"{where}: divisor must be a positive finite number, got {value!r}")
    return Normalization("divide", divisor=k, label=f"divide:{k:g}")


_MAPPING_KEYS = ("method", "divisor", "references", "references_file", "source", "low")


def _parse_mapping(spec: Mapping, where: str, base_dir: Path | None) -> Normalization:
    unknown = [k for k in spec if k not in _MAPPING_KEYS]
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], _MAPPING_KEYS)}; "
                         f"expected {', '.join(_MAPPING_KEYS)}")
    method = spec.get("method")
    if not isinstance(method, str):
        raise InputError(f"{where}.method: required, one of {', '.join(METHODS)}")
    method = method.strip().lower()
    if method not in METHODS:
        raise InputError(f"{where}.method: unknown normalisation {method!r}; expected one of "
                         f"{', '.join(METHODS)}{did_you_mean(method, METHODS)}")
    given = [k for k in ("divisor", "references", "references_file") if k in spec]
    allowed = {"none": (), "atari": (), "divide": ("divisor",), "minmax": ("references", "references_file")}
    stray = [k for k in given if k not in allowed[method]]
    if stray:
        raise InputError(f"{where}.{stray[0]}: not used by method {method!r}")
    source = spec.get("source", "")
    if not isinstance(source, str):
        raise InputError(f"{where}.source: expected a string saying where the references come from")
    if method == "none":
        if source:
            raise InputError(f"{where}.source: not used by method 'none'")
        return NONE
    low = spec.get("low")
    if low is not None and (method != "minmax" or low != "random"):
        raise InputError(f"{where}.low: " + ("only 'random' is understood (the low references are the random "
                                             "policy's scores)" if method == "minmax" else
                                             f"not used by method {method!r}"))
    norm = replace(_parse_method(spec, method, where, base_dir), source=source.strip())
    return replace(norm, low_is_random=True) if low == "random" else norm


def _parse_method(spec: Mapping, method: str, where: str, base_dir: Path | None) -> Normalization:
    if method == "atari":
        return Normalization("atari", references=ATARI_REFERENCE, label="atari", low_is_random=True)
    if method == "divide":
        if "divisor" not in spec:
            raise InputError(f"{where}.divisor: required for method 'divide' (e.g. divisor = 1000)")
        if isinstance(spec["divisor"], bool):
            raise InputError(f"{where}.divisor: must be a positive number, got {spec['divisor']!r}")
        return _divide(spec["divisor"], f"{where}.divisor")
    refs: dict[str, tuple[float, float]] = {}
    if "references_file" in spec:
        if not isinstance(spec["references_file"], str):
            raise InputError(f"{where}.references_file: expected a path string")
        refs.update(_read_references(spec["references_file"], f"{where}.references_file", base_dir))
    inline = spec.get("references", {})
    if not isinstance(inline, Mapping):
        raise InputError(f"{where}.references: expected a table task = [low, high]")
    for task, pair in inline.items():
        fld = f"{where}.references.{task}"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or any(isinstance(v, bool) for v in pair):
            raise InputError(f"{fld}: expected [low, high], got {pair!r}")
        refs[str(task)] = _low_high(pair[0], pair[1], fld)
    if not refs:
        raise InputError(f"{where}: method 'minmax' needs references or references_file")
    return Normalization("minmax", references=MappingProxyType(refs), label="minmax")


def _low_high(low, high, where: str) -> tuple[float, float]:
    try:
        lo, hi = float(low), float(high)
    except (TypeError, ValueError):
        raise InputError(f"{where}: low and high must be numbers, got {low!r}, {high!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InputError(f"{where}: low and high must be finite, got {low!r}, {high!r}")
    if hi == lo:
        raise InputError(f"{where}: low and high are equal ({lo:g}); normalisation would divide by zero")
    if hi < lo:  # (score - low) / (high - low) would turn every ordering upside down without a word
        raise InputError(f"{where}: low ({lo:g}) is above high ({hi:g}); give [low, high] with low < high "
                         f"(low: e.g. a random policy's score, high: e.g. a human's)")
    return lo, hi


def _read_references(path: str, where: str, base_dir: Path | None) -> dict[str, tuple[float, float]]:
    """Read a ``task,low,high`` CSV; errors name the file and line."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if not p.is_file():
        raise InputError(f"{where}: reference file {p} not found")
    try:
        with open(p, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read reference file ({exc})") from None
    lines = [(i + 1, r) for i, r in enumerate(rows) if any(c.strip() for c in r) and not r[0].startswith("#")]
    if not lines:
        raise InputError(f"{p}: reference file is empty; expected a header task,low,high")
    header_line, header = lines[0]
    header = [c.strip().lower() for c in header]
    missing = [c for c in ("task", "low", "high") if c not in header]
    if missing:
        extra = [c for c in header if c not in ("task", "low", "high")]
        raise InputError(f"{p}:{header_line}: missing column {missing[0]!r}{did_you_mean(missing[0], extra)}; "
                         f"expected header task,low,high")
    check_csv_table([(header_line, header)] + lines[1:], str(p))
    col = {c: header.index(c) for c in ("task", "low", "high")}
    refs: dict[str, tuple[float, float]] = {}
    seen: dict[str, int] = {}
    for line, row in lines[1:]:
        task = row[col["task"]].strip()
        if not task:
            raise InputError(f"{p}:{line}: empty task name")
        if task in seen:
            raise InputError(f"{p}:{line}: task {task!r} listed twice (first at line {seen[task]})")
        seen[task] = line
        lo, hi = row[col["low"]].strip(), row[col["high"]].strip()
        for name, v in (("low", lo), ("high", hi)):
            try:
                float(v)
            except ValueError:
                raise InputError(f"{p}:{line}: column {name!r} is not a number: {v!r}") from None
        refs[task] = _low_high(lo, hi, f"{p}:{line}")
    if not refs:
        raise InputError(f"{p}: reference file has a header but no rows")
    return refs


def normalize(table, norm: Normalization):
    """Normalise the ``score`` column of a score table.

    Args:
        table: a :class:`rlaudit.scores.ScoreTable` of raw scores.
        norm: from :func:`parse_normalization`.

    Returns:
        A new table with normalised scores and ``meta.normalized`` set to ``norm.label`` (the input table
        itself when ``norm.method == "none"``).

    Raises:
        InputError: the table is already normalised, tasks lack reference scores (all of them named), or a
            normalised score overflows (naming the normalisation, not the score file).
    """
    if norm.method == "none":
        return table
    where = table.meta.source or "scores"
    if table.meta.normalized:
        raise InputError(f"{where}: scores are already normalised ({table.meta.normalized}); refusing to "
                         f"normalise them again with {norm.label!r} (use --normalize none)")
    frame = table.frame.copy()
    if norm.method == "divide":
        with np.errstate(over="ignore"):
            frame["score"] = frame["score"].to_numpy(dtype=np.float64) / norm.divisor
        _check_finite(frame, table.frame, norm.where or f"normalisation {norm.label!r}", "a larger divisor")
        return table.with_frame(frame, normalized=norm.label)
    tasks = list(dict.fromkeys(frame["task"]))
    refs = {t: norm.reference_for(t) for t in tasks}
    missing = sorted(t for t, r in refs.items() if r is None)
    if missing:
        known = list(norm.references)
        hint = did_you_mean(missing[0], known) if norm.method == "minmax" else ""
        what = "Atari-57 reference scores" if norm.method == "atari" else "a minmax reference"
        raise InputError(f"{where}: {len(missing)} task{'s' if len(missing) > 1 else ''} without {what}: "
                         f"{', '.join(missing)}{hint}")
    low = frame["task"].map(lambda t: refs[t][0]).to_numpy(dtype=np.float64)
    high = frame["task"].map(lambda t: refs[t][1]).to_numpy(dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        frame["score"] = (frame["score"].to_numpy(dtype=np.float64) - low) / (high - low)
    _check_finite(frame, table.frame, norm.where or f"normalisation {norm.label!r}", "other reference scores")
    return table.with_frame(frame, normalized=norm.label)


def _check_finite(frame, raw, where: str, remedy: str) -> None:
    """Raise :class:`InputError` naming the normalisation ``where`` when it made a score overflow."""
    bad = ~np.isfinite(frame["score"].to_numpy(dtype=np.float64))
    if bad.any():
        i = int(np.argmax(bad))
        row = raw.iloc[i]
        raise InputError(f"{where}: normalising the score {row['score']:g} of {row['algorithm']} on {row['task']} "
                         f"(run {row['run']}, budget {row['budget']}) overflows to infinity; choose {remedy}")
