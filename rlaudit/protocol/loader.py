"""Read a protocol file into :class:`~rlaudit.protocol.schema.Protocol`, checking everything on the way.

Two levels:

- :func:`load_protocol` — the file alone: TOML syntax (line and column), unknown keys (did-you-mean), types,
  budgets, seeds, and the sections owned by other stages (``[data]`` by the importers, ``[normalization]``
  by the statistics stage, ``[[claims]]`` by the audit stage).
- :func:`check_runnable` — what needs the registries: algorithm names, hyperparameter names, environment
  ids, and algorithm/action-space compatibility. Nothing is trained.

Every problem raises :class:`~rlaudit.errors.InputError` whose message starts with the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
import unicodedata
from pathlib import Path

from rlaudit.errors import InputError, did_you_mean
from rlaudit.io import existing_file, loads_nested
from rlaudit.protocol.provenance import hyperparam_checker, parse_deviations, parse_source
from rlaudit.protocol.schema import (SCHEMA_VERSION, Algorithm, AuditSection, Evaluation, Protocol, Regime,
                                     RegimeOverride, Task)
from rlaudit.scores import BUDGET_MAX

TOP_KEYS = ("schema_version", "name", "title", "description", "citation", "seeds", "budget", "regimes", "tasks",
            "algorithms", "evaluation", "data", "normalization", "audit", "claims", "rerun", "rerun_of", "run_timeout",
            "source", "deviations", "backend")
RERUN_KEYS = ("seeds", "regimes", "tasks", "algorithms", "evaluation")
TASK_KEYS = ("id", "suite", "kwargs", "max_episode_steps")
ALGO_KEYS = ("name", "label", "hyperparams", "policy_kwargs", "regimes", "source", "deviations", "backend")
OVERRIDE_KEYS = ("hyperparams", "policy_kwargs")
REGIME_KEYS = ("budget", "mode")
EVAL_KEYS = ("n_eval_episodes", "deterministic", "epsilon", "eval_every", "max_episode_steps", "eval_seed_offset")
RESERVED_REGIMES = ("nested",)
MAX_SEEDS = 1_000
"""Most seeds per (task, algorithm) a protocol may ask for: far past any published study, and small enough
that planning stays instant (10^6 seeds took 86 s and 1.8 GB just to validate)."""
MAX_SEED = 2**31 - 1
"""Largest seed value: seeds (plus ``evaluation.eval_seed_offset``) must fit NumPy's 32-bit seeding."""
MAX_EVAL_EPISODES = 100_000
"""Most episodes per evaluation: 100 times the 1,000 of the largest published evaluations (random-policy
references), and each one is played at every evaluation point of every run."""
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def load_protocol(path: str | os.PathLike) -> Protocol:
    """Read and check ``path`` (no registry, no environment is touched).

    Raises:
        InputError: one line naming the file and the field.
    """
    p = existing_file(path, "protocol file")
    where = str(p)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not a protocol file (a protocol is TOML text; this file is binary)"
                         f"{_scores_hint(p)}") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read protocol ({exc})") from None
    if p.suffix.lower() != ".toml":  # a score table or store named by mistake: say what it is not
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            raise InputError(f"{where}: not a protocol file (a protocol is a TOML file; this one does not parse "
                             f"as TOML){_scores_hint(p)}") from None
    return parse_protocol(text, where, base_dir=p.parent)


def _scores_hint(path: Path) -> str:
    """``; to audit scores, run 'rlaudit audit PATH'`` for a path that looks like scores, else ``""``."""
    scores = (".csv", ".tsv", ".parquet", ".sqlite", ".db", ".json", ".npz", ".gz")
    return f"; to audit scores, run 'rlaudit audit {path}'" if path.suffix.lower() in scores else ""


def parse_protocol(text: str, where: str = "protocol", base_dir: Path | None = None) -> Protocol:
    """Parse protocol ``text`` (from file ``where``); see :func:`load_protocol`."""
    try:
        doc = loads_nested(tomllib.loads, text, where)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: TOML syntax error: {exc}") from None
    if doc and not any(k in TOP_KEYS for k in doc):
        raise InputError(f"{where}: not a protocol file (top-level keys {', '.join(list(doc)[:4])}; a protocol has "
                         f"schema_version, name, and tasks / algorithms / regimes / seeds or [data])")
    _keys(doc, TOP_KEYS, where, "top-level key")
    version = doc.get("schema_version")
    if version is None:
        raise InputError(f"{where}: schema_version: missing; add 'schema_version = {SCHEMA_VERSION}'")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise InputError(f"{where}: schema_version: {version!r} is not supported; this rlaudit reads "
                         f"schema_version = {SCHEMA_VERSION}")
    name = _str(doc, "name", where, required=True)
    if not _SLUG.match(name):
        raise InputError(f"{where}: name: {name!r} must be a slug (letters, digits, '-', '_', '.')")
    title = _str(doc, "title", where)
    description = _str(doc, "description", where)
    citation = _str(doc, "citation", where)
    run_timeout = run_timeout_value(doc["run_timeout"], f"{where}: run_timeout") if "run_timeout" in doc else None

    unit = "env_steps"
    if "budget" in doc:
        b = _table(doc["budget"], f"{where}: budget")
        _keys(b, ("unit",), f"{where}: budget", "key")
        unit = _str(b, "unit", f"{where}: budget") or unit

    data = doc.get("data")
    published = data is not None
    if published:
        data = _table(data, f"{where}: data")
        extra = [k for k in RERUN_KEYS if k in doc]
        if extra:
            raise InputError(f"{where}: {extra[0]}: a published protocol ([data]) cannot also define "
                             f"{', '.join(extra)}; write a separate rerun protocol")
        _delegate("rlaudit.importers.data_section", "check_data_section", data, f"{where}: data")
        protocol_fields: dict = {}
    else:
        missing = [k for k in ("tasks", "algorithms", "regimes", "seeds") if k not in doc]
        if missing:
            raise InputError(f"{where}: {missing[0]}: missing; a rerun protocol needs tasks, algorithms, "
                             f"regimes and seeds (or a [data] section for published results)")
        if unit != "env_steps":
            raise InputError(f"{where}: budget.unit: rerun protocols count budgets in 'env_steps', got {unit!r}")
        protocol_fields = _rerun_fields(doc, where)

    normalization = None
    if "normalization" in doc:
        normalization = _table(doc["normalization"], f"{where}: normalization")
        _delegate("rlaudit.stats.normalize", "parse_normalization", normalization, f"{where}: normalization",
                  base_dir)
        _check_references(normalization, protocol_fields.get("tasks", ()), where)

    audit = _audit(doc.get("audit", {}), where)
    raw_claims = doc.get("claims", [])
    if not isinstance(raw_claims, list):
        raise InputError(f"{where}: claims: must be an array of tables ([[claims]])")
    claims = tuple({**c, "where": f"{where}: claims[{i}]"} if isinstance(c, dict) else c
                   for i, c in enumerate(raw_claims))
    _delegate("rlaudit.audit.claims", "parse_claims", list(claims), where)

    if not published:
        labels = [a.label for a in protocol_fields["algorithms"]]
        budgets = [r.budget for r in protocol_fields["regimes"]]
        for i, c in enumerate(raw_claims):
            for key in ("better", "worse"):
                if c.get(key) not in labels:
                    _check_algorithm_names(protocol_fields["algorithms"], where)  # a misspelt name comes first
                    raise InputError(f"{where}: claims[{i}].{key}: unknown algorithm {c.get(key)!r}"
                                     f"{did_you_mean(str(c.get(key)), labels)}; algorithms: {', '.join(labels)}")
            for b in _as_list(c.get("budgets")):
                if b not in budgets:
                    raise InputError(f"{where}: claims[{i}].budgets: {b} is not a regime budget "
                                     f"({', '.join(str(x) for x in budgets)})")
        for b in audit.budgets or ():
            if b not in budgets:
                raise InputError(f"{where}: audit.budgets: {b} is not a regime budget "
                                 f"({', '.join(str(x) for x in budgets)})")
        _check_random_policy_tasks(audit.extra.get("random_policy"), normalization, protocol_fields["tasks"], where)

    _delegate("rlaudit.protocol.rerun", "check_sections", doc, published, where)  # [rerun] / [rerun_of]
    canonical = {k: doc.get(k) for k in ("seeds", "budget", "regimes", "tasks", "algorithms", "evaluation", "data")}
    if isinstance(canonical["algorithms"], list):  # provenance describes the runs, it does not change them
        canonical["algorithms"] = [{k: v for k, v in a.items() if k not in ("source", "deviations")}
                                   if isinstance(a, dict) else a for a in canonical["algorithms"]]
    if "backend" in doc:  # only when given, so that the hashes of protocols without it stay what they were
        canonical["backend"] = doc["backend"]
    digest = hashlib.sha256(json.dumps(canonical, sort_keys=True, default=str).encode()).hexdigest()
    provenance = {"source": parse_source(doc.get("source"), f"{where}: source"),
                  "deviations": parse_deviations(doc.get("deviations"), f"{where}: deviations")}
    return Protocol(path=where, text=text, hash=digest, schema_version=version, name=name, title=title,
                    description=description, citation=citation, run_timeout=run_timeout, budget_unit=unit, data=data,
                    normalization=normalization, audit=audit, claims=claims, rerun=doc.get("rerun"),
                    rerun_of=doc.get("rerun_of"), **provenance, **protocol_fields)


# ------------------------------------------------------------------------------------------- sections

def _check_algorithm_names(algorithms, where: str) -> None:
    """Raise on the first algorithm name the registry lacks: a claim naming ``DQN`` next to a misspelt
    ``name = "DQN2"`` is wrong because of the name, so the name's error (with its did-you-mean) is the one to
    show. Called on an unknown claim only, so loading a good protocol never touches the registry."""
    from rlaudit.algorithms import get_spec

    for i, a in enumerate(algorithms):
        try:
            get_spec(a.name)
        except InputError as exc:
            raise InputError(f"{where}: algorithms[{i}].name: {exc}") from None


def _rerun_fields(doc: dict, where: str) -> dict:
    seeds = _seeds(doc["seeds"], f"{where}: seeds")
    regimes_raw = _table(doc["regimes"], f"{where}: regimes")
    if not regimes_raw:
        raise InputError(f"{where}: regimes: no regime given; add e.g. 'low = 10_000' under [regimes]")

    evaluation = _evaluation(doc.get("evaluation", {}), f"{where}: evaluation")
    tasks = []
    for at, t in _array_of_tables(doc, "tasks", TASK_KEYS, where):
        tid = _str(t, "id", at, required=True)
        tasks.append(Task(id=tid, suite=_str(t, "suite", at) or "gymnasium", kwargs=_dict(t, "kwargs", at),
                          max_episode_steps=_int(t, "max_episode_steps", at, minimum=1)))
    ids = [t.id for t in tasks]
    dup = next((x for x in ids if ids.count(x) > 1), None)
    if dup:
        raise InputError(f"{where}: tasks: {dup!r} is listed twice")

    from rlaudit.run.backends import DEFAULT_BACKEND, check_backend_name

    default_backend = check_backend_name(doc["backend"], f"{where}: backend") if "backend" in doc \
        else DEFAULT_BACKEND
    algorithms = []
    for at, a in _array_of_tables(doc, "algorithms", ALGO_KEYS, where):
        name = _str(a, "name", at, required=True)
        backend = check_backend_name(a["backend"], f"{at}.backend") if "backend" in a else default_backend
        overrides = {}
        for rname, o in _dict(a, "regimes", at).items():
            oat = f"{at}.regimes.{rname}"
            if rname not in regimes_raw:
                raise InputError(f"{oat}: no regime {rname!r} in [regimes]{did_you_mean(rname, regimes_raw)}")
            o = _table(o, oat)
            if "backend" in o:
                raise InputError(f"{oat}.backend: one algorithm entry cannot mix backends across its regimes or "
                                 f"seeds (its scores would pool two implementations); write a second [[algorithms]] "
                                 f"entry with its own label and backend = {o['backend']!r}")
            _keys(o, OVERRIDE_KEYS, oat, "key")
            overrides[rname] = RegimeOverride(hyperparams=_dict(o, "hyperparams", oat),
                                              policy_kwargs=_dict(o, "policy_kwargs", oat) if "policy_kwargs" in o
                                              else None)
        label = _str(a, "label", at)
        if "label" in a and not label.strip():
            raise InputError(f"{at}.label: {label!r} is blank; a label names the algorithm in the score table "
                             f"and reports (leave it out to use {name!r})")
        hp, pk = _dict(a, "hyperparams", at), _dict(a, "policy_kwargs", at)
        algorithms.append(Algorithm(name=name, label=label or name, hyperparams=hp, policy_kwargs=pk,
                                    regimes=overrides, source=parse_source(a.get("source"), f"{at}.source"),
                                    deviations=parse_deviations(a.get("deviations"), f"{at}.deviations",
                                                                hyperparam_checker(name, hp, pk, at)),
                                    backend=backend))
    seen_labels: dict[str, str] = {}
    for a in algorithms:
        key = unicodedata.normalize("NFC", a.label)  # "Café" typed and pasted (NFC / NFD) reads the same
        if key in seen_labels:
            same = "" if seen_labels[key] == a.label else f" (as {seen_labels[key]!r}, equal after Unicode normalisation)"
            raise InputError(f"{where}: algorithms: label {a.label!r} is used twice{same}; give each entry its "
                             f"own 'label'")
        seen_labels[key] = a.label

    overridden = {r for a in algorithms for r in a.regimes}
    regimes = []
    for rname, r in regimes_raw.items():
        at = f"{where}: regimes.{rname}"
        if not _SLUG.match(rname) or rname in RESERVED_REGIMES:
            raise InputError(f"{at}: {rname!r} is not a usable regime name (a slug other than 'nested')")
        if isinstance(r, dict):
            _keys(r, REGIME_KEYS, at, "key")
            budget = _int(r, "budget", at, required=True, positive=True)
            regime_kind = _str(r, "mode", at) or ("separate" if rname in overridden else "nested")
            if regime_kind not in ("nested", "separate"):
                raise InputError(f"{at}.mode: {regime_kind!r}{did_you_mean(regime_kind, ['nested', 'separate'])}; "
                                 f"expected 'nested' or 'separate'")
            if regime_kind == "nested" and rname in overridden:
                raise InputError(f"{at}.mode: regime {rname!r} has per-algorithm overrides, so it needs its own "
                                 f"runs; use mode = 'separate'")
        else:
            budget = _budget_value(r, at)
            regime_kind = "separate" if rname in overridden else "nested"
        regimes.append(Regime(rname, budget, regime_kind))
    seen: dict[int, str] = {}
    for r in regimes:
        if r.budget in seen:
            raise InputError(f"{where}: regimes.{r.name}: budget {r.budget} is already regime "
                             f"{seen[r.budget]!r}; each regime needs its own budget")
        seen[r.budget] = r.name
    nested = [r for r in regimes if r.regime_kind == "nested"]
    for prev, cur in zip(nested, nested[1:]):
        if cur.budget <= prev.budget:
            raise InputError(f"{where}: regimes.{cur.name}: budget {cur.budget} is not larger than "
                             f"regimes.{prev.name} ({prev.budget}); list nested regimes in increasing order")
    if evaluation.eval_every is not None and evaluation.eval_every > max(r.budget for r in regimes):
        raise InputError(f"{where}: evaluation.eval_every: {evaluation.eval_every} exceeds the largest budget "
                         f"({max(r.budget for r in regimes)})")
    regimes.sort(key=lambda r: r.budget)
    return {"seeds": seeds, "regimes": tuple(regimes), "tasks": tuple(tasks), "algorithms": tuple(algorithms),
            "evaluation": evaluation}


def _seeds(v, where: str) -> tuple[int, ...]:
    if isinstance(v, bool):
        raise InputError(f"{where}: must be a count (e.g. 5) or a list of seeds, got {v!r}")
    if isinstance(v, int):
        if v <= 0:
            raise InputError(f"{where}: need at least one seed, got {v}")
        if v > MAX_SEEDS:
            raise InputError(f"{where}: {v:,} seeds is more than the {MAX_SEEDS:,} a protocol may ask for")
        return tuple(range(v))
    if isinstance(v, list):
        if not v:
            raise InputError(f"{where}: the seed list is empty; need at least one seed")
        if len(v) > MAX_SEEDS:
            raise InputError(f"{where}: {len(v):,} seeds is more than the {MAX_SEEDS:,} a protocol may ask for")
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v):
            raise InputError(f"{where}: seeds must be non-negative integers, got {v!r}")
        big = next((s for s in v if s > MAX_SEED), None)
        if big is not None:
            raise InputError(f"{where}: seed {big} is larger than {MAX_SEED} (2^31 - 1)")
        if len(set(v)) != len(v):
            raise InputError(f"{where}: seed {next(s for s in v if v.count(s) > 1)} is listed twice")
        return tuple(v)
    raise InputError(f"{where}: must be a count (e.g. 5) or a list of seeds, got {type(v).__name__}")


def _evaluation(d, where: str) -> Evaluation:
    d = _table(d, where)
    _keys(d, EVAL_KEYS, where, "key")
    n = _int(d, "n_eval_episodes", where, positive=True, maximum=MAX_EVAL_EPISODES)
    det = d.get("deterministic", True)
    if not isinstance(det, bool):
        raise InputError(f"{where}.deterministic: must be true or false, got {det!r}")
    eps = d.get("epsilon", 0.0)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0 <= eps <= 1.0:
        raise InputError(f"{where}.epsilon: must be a number in [0, 1], got {eps!r}")
    return Evaluation(n_eval_episodes=10 if n is None else n, deterministic=det, epsilon=float(eps),
                      eval_every=_int(d, "eval_every", where, positive=True),
                      max_episode_steps=_int(d, "max_episode_steps", where, positive=True),
                      eval_seed_offset=_int(d, "eval_seed_offset", where, minimum=0, maximum=MAX_SEED + 1) or 10_000)


def _audit(d, where: str) -> AuditSection:
    at = f"{where}: audit"
    d = _table(d, at)
    # The audit stage owns the list of [audit] keys and their checks (one definition, errors "file: audit.KEY").
    _delegate("rlaudit.audit.settings", "check_section", d, where)
    metric = d.get("metric", "iqm")  # checked with every other key by check_section above
    budgets = None
    if "budgets" in d:
        budgets = [_budget_value(b, f"{at}.budgets") for b in _as_list(d["budgets"])]
        if not budgets:
            raise InputError(f"{at}.budgets: empty list")
        for prev, cur in zip(budgets, budgets[1:]):
            if cur <= prev:
                raise InputError(f"{at}.budgets: {cur} follows {prev}; budgets must be increasing")
        budgets = tuple(budgets)
    extra = {k: v for k, v in d.items() if k not in ("metric", "budgets")}
    return AuditSection(metric=metric, budgets=budgets, extra=extra)


def _check_references(norm: dict, tasks, where: str) -> None:
    """With ``minmax`` references inline, every task of a rerun protocol needs a pair."""
    refs = norm.get("references")
    if norm.get("method") == "minmax" and isinstance(refs, dict):
        for t in tasks:
            if t.id not in refs:
                raise InputError(f"{where}: normalization.references: no [low, high] for task {t.id!r}"
                                 f"{did_you_mean(t.id, refs)}")


def _check_random_policy_tasks(given, norm, tasks, where: str) -> None:
    """``[audit.random_policy]`` names only the protocol's tasks, and the random policy's scores are given once
    (not also as ``[normalization]`` low ends)."""
    if not given:
        return
    ids = [t.id for t in tasks]
    for t in given["scores"]:
        if t not in ids:
            raise InputError(f"{where}: audit.random_policy.scores: {t!r} is not a task of this protocol"
                             f"{did_you_mean(t, ids)}; tasks: {', '.join(ids)}")
    spec = norm if isinstance(norm, dict) else {"method": norm}
    if str(spec.get("low", "")).strip().lower() == "random" or str(spec.get("method", "")).strip().lower() == "atari":
        raise InputError(f"{where}: audit.random_policy: the [normalization] low ends are already the random "
                         f"policy's scores; give them once (drop one of the two)")


# ------------------------------------------------------------------------------------------- helpers

def _delegate(module: str, func: str, *args) -> None:
    """Call the owning stage's validator; skip silently only while that stage is not installed."""
    import importlib

    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError):
        return
    fn(*args)


def _keys(d: dict, allowed, where: str, what: str) -> None:
    for k in d:
        if k not in allowed:
            raise InputError(f"{where}: unknown {what} {k!r}{did_you_mean(k, allowed)}; expected one of "
                             f"{', '.join(allowed)}")


def _array_of_tables(doc: dict, key: str, allowed, where: str) -> list[tuple[str, dict]]:
    """``[[key]]`` entries as ``(where, table)`` pairs, each checked for unknown keys; the array must be
    non-empty."""
    raw = doc[key]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: {key}: must be a non-empty array of tables ([[{key}]])")
    out = []
    for i, entry in enumerate(raw):
        at = f"{where}: {key}[{i}]"
        entry = _table(entry, at)
        _keys(entry, allowed, at, "key")
        out.append((at, entry))
    return out


def _table(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise InputError(f"{where}: must be a table, got {type(v).__name__} {v!r}")
    return v


def _str(d: dict, key: str, where: str, required: bool = False) -> str:
    if key not in d:
        if required:
            raise InputError(f"{where}: {key}: missing")
        return ""
    v = d[key]
    if not isinstance(v, str) or (required and not v.strip()):
        raise InputError(f"{where}: {key}: must be a non-empty string, got {v!r}")
    return v


def _dict(d: dict, key: str, where: str) -> dict:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise InputError(f"{where}.{key}: must be a table, e.g. {key} = {{ name = value }}, got {v!r}")
    return dict(v)


def _int(d: dict, key: str, where: str, required: bool = False, positive: bool = False,
         minimum: int | None = None, maximum: int = BUDGET_MAX) -> int | None:
    if key not in d:
        if required:
            raise InputError(f"{where}.{key}: missing")
        return None
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}.{key}: must be an integer, got {v!r}")
    if positive and v <= 0:
        raise InputError(f"{where}.{key}: must be positive, got {v}")
    if minimum is not None and v < minimum:
        raise InputError(f"{where}.{key}: must be at least {minimum}, got {v}")
    if v > maximum:
        raise InputError(f"{where}.{key}: must be at most {maximum:,}, got {v:,}")
    return v


def run_timeout_value(v, where: str) -> float:
    """A wall-time limit in seconds: a finite number above 0 (``where`` names the key or the flag)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
        raise InputError(f"{where}: must be a number of seconds above 0 (e.g. 3600 for an hour), got {v!r}")
    return float(v)


def _budget_value(v, where: str) -> int:
    if isinstance(v, float) and v.is_integer():
        raise InputError(f"{where}: budget {v!r} must be written as an integer (e.g. 100_000)")
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: budget must be a positive integer number of env steps (or a table "
                         f"{{budget = N, mode = 'separate'}}), got {v!r}")
    if v <= 0:
        raise InputError(f"{where}: budget must be positive, got {v}")
    if v > BUDGET_MAX:
        raise InputError(f"{where}: budget {v:,} is larger than {BUDGET_MAX:,} (2^63 - 1)")
    return v


def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


# ------------------------------------------------------------------------------------ runnable checks

def check_runnable(protocol: Protocol) -> None:
    """Check a rerun protocol against the algorithm registry and the environment suites (nothing trains).

    Checks algorithm names, hyperparameter names, types and ranges and ``policy_kwargs`` (base and
    per-regime, against the constructors' annotations), environment ids, and that every algorithm supports
    every task's action space.

    Raises:
        InputError: naming the file and the field.
    """
    if protocol.is_published:
        return
    _check_algorithms(protocol, _runnable_tasks(protocol))


def backend_refusal(protocol: Protocol, backend: str) -> str | None:
    """Why ``backend`` cannot run every ``[[algorithms]]`` entry of the (runnable) ``protocol``, in one line, or
    ``None`` when it can: for ``rlaudit validate``'s cost of the plan on each backend."""
    from rlaudit.run.backends import get_backend

    missing = get_backend(backend).missing_dependency()
    if missing:
        return missing
    try:
        _check_algorithms(protocol, _runnable_tasks(protocol), backend)
    except InputError as exc:
        return str(exc)
    return None


def _check_algorithms(protocol: Protocol, tasks: list, backend: str | None = None) -> None:
    """Check every ``[[algorithms]]`` entry against the registry and a backend (its own, or ``backend`` for all)
    on ``tasks`` (:func:`_runnable_tasks`). Raises :class:`InputError` naming the file and the field."""
    from rlaudit.algorithms import get_spec
    from rlaudit.run.backends import get_backend

    for i, a in enumerate(protocol.algorithms):
        at = f"{protocol.path}: algorithms[{i}]"
        try:
            spec = get_spec(a.name)
            spec.load()  # a plugin that cannot import: name the protocol's field, then what failed
        except InputError as exc:
            raise InputError(f"{at}.name: {exc}") from None
        name = backend or a.backend
        if name not in spec.backends:
            raise InputError(f"{at}.backend: {a.name} has no {name!r} backend; backends that can run it: "
                             f"{', '.join(spec.backends)}")
        get_backend(name).check(a, spec, tasks, protocol.evaluation, at)


def _runnable_tasks(protocol: Protocol) -> list:
    """``(where, Task, TaskSpec, action space)`` of every task of ``protocol``, each checked buildable."""
    from rlaudit.run.envs import action_space_of, check_task
    from rlaudit.run.spec import TaskSpec

    where = protocol.path
    tasks = []
    for i, t in enumerate(protocol.tasks):
        ts = TaskSpec(t.id, t.suite, tuple(sorted(t.kwargs.items())),
                      t.max_episode_steps or protocol.evaluation.max_episode_steps)
        check_task(ts, f"{where}: tasks[{i}]")
        try:
            space = action_space_of(ts)
        except InputError:
            raise
        except (Exception, SystemExit) as exc:  # the environment's own constructor rejected the kwargs (or exited)
            raise InputError(f"{where}: tasks[{i}]: cannot build {t.id!r} with kwargs {t.kwargs!r}: "
                             f"{type(exc).__name__}: {exc}") from None
        tasks.append((f"{where}: tasks[{i}]", t, ts, space))
    return tasks
