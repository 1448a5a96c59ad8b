"""Runnable published protocols: the ``[rerun]`` section and the ordinary rerun protocol built from it.

A published protocol (``[data]``) may carry a ``[rerun]`` section mapping each published agent to a
registered algorithm with the published hyperparameters, plus suites (tasks, budgets, network, evaluation)
to rerun at. :func:`rerun_protocol` turns it, for one suite and budget list, into the TOML text of an
ordinary rerun protocol and loads that with :func:`~rlaudit.protocol.loader.parse_protocol`; planning,
the store (resume, hash), ``validate`` and ``run`` then work exactly as for a hand-written rerun protocol.
The generated protocol carries a ``[rerun_of]`` table naming the published protocol and the agent mapping,
so that its store alone is enough to join the audit with the published data.

Scaling rule (``docs/protocol.md``, "Rerunning a published protocol"): settings counted in steps
(``rerun.scaled``, e.g. replay size, learning starts, target-update period) and ``exploration_steps`` are
multiplied by ``suite.reference_steps / rerun.reference_steps`` (rounded, at least 1); the exploration
schedule becomes SB3's ``exploration_fraction`` of the largest budget. Everything else is kept.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from rlaudit.errors import InputError, did_you_mean
from rlaudit.protocol.provenance import hyperparam_checker, parse_deviations, parse_source
from rlaudit.scores import BUDGET_MAX, exact_whole

RERUN_KEYS = ("reference_steps", "scaled", "exploration_steps", "seeds", "hyperparams", "policy_kwargs", "note",
              "implementation", "agents", "suites", "published_suite")
AGENT_KEYS = ("published", "algorithm", "label", "hyperparams", "policy_kwargs", "runnable", "note", "source",
              "deviations")
SUITE_KEYS = ("reference_steps", "tasks", "task_kwargs", "budgets", "policy_kwargs", "hyperparams", "evaluation",
              "normalization", "note", "source", "deviations", "agents", "random_policy")
SUITE_AGENT_KEYS = ("algorithm", "hyperparams", "policy_kwargs", "source", "deviations", "note")
RERUN_OF_KEYS = ("protocol", "name", "hash", "suite", "agents")
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


@dataclass(frozen=True)
class RerunAgent:
    """One ``[[rerun.agents]]`` entry: a published agent and its runnable counterpart."""

    published: str
    """The agent's name in the published data (its algorithm label there)."""
    algorithm: str | None
    """Registered algorithm that reruns it (``None``: no runnable counterpart)."""
    label: str
    """Label of the rerun in the score table (default: ``algorithm``)."""
    hyperparams: dict = field(default_factory=dict)
    """Published hyperparameters in rlaudit's (SB3's) names, at the published scale."""
    policy_kwargs: dict = field(default_factory=dict)
    """``policy_kwargs`` (e.g. ``optimizer_kwargs``), merged over the suite's."""
    note: str = ""
    """What differs from the published agent, or why it cannot be rerun."""
    source: tuple = ()
    """Where the published agent's settings come from (:class:`~rlaudit.protocol.provenance.SourceRef`)."""
    deviations: tuple = ()
    """Settings of the rerun that differ from that source (:class:`~rlaudit.protocol.provenance.Deviation`)."""


@dataclass(frozen=True)
class SuiteAgent:
    """``[rerun.suites.<suite>.agents.<published agent>]``: an agent's own settings on one suite.

    Where a suite has published settings of its own (MinAtar: Obando-Ceron & Castro 2021), they replace the
    scaled ones; their ``source`` and ``deviations`` then replace the agent's, which describe the published
    suite's settings.
    """

    hyperparams: dict = field(default_factory=dict)
    """Hyperparameters replacing the scaled and the suite's ones (not scaled)."""
    policy_kwargs: dict = field(default_factory=dict)
    """``policy_kwargs`` merged over the suite's and the agent's."""
    source: tuple = ()
    """Where this suite's settings of the agent come from."""
    deviations: tuple = ()
    """Differences from that source."""
    note: str = ""
    """Why these settings."""
    algorithm: str | None = None
    """Registered algorithm that reruns the agent on this suite instead of the agent's own (``None``: the agent's):
    where the published agent on this suite is a plainer one (MinAtar's quantile agent is QR-DQN without the
    Atari config's prioritized replay and n-step returns). Its settings then start from the section's and the
    suite's, not from the agent's own hyperparameters and ``policy_kwargs``."""


@dataclass(frozen=True)
class RerunSuite:
    """One ``[rerun.suites.<suite>]`` table: where and how long to rerun."""

    name: str
    """Suite name: ``gymnasium``, ``minatar`` or ``atari`` (the tasks' suite)."""
    reference_steps: int
    """The suite's counterpart of the published training length (sets the scale factor)."""
    tasks: tuple[str, ...]
    """Environment ids."""
    budgets: tuple[int, ...]
    """Default budgets (env steps) when ``--budgets`` is not given."""
    policy_kwargs: dict = field(default_factory=dict)
    """Network for this suite (e.g. ``{net_arch = [256, 256]}``)."""
    hyperparams: dict = field(default_factory=dict)
    """Hyperparameters replacing the scaled published ones on this suite (not scaled)."""
    evaluation: dict = field(default_factory=dict)
    """``[evaluation]`` of the generated protocol."""
    normalization: dict | None = None
    """``[normalization]`` of the generated protocol (``None``: raw scores)."""
    note: str = ""
    """Why these settings."""
    source: tuple = ()
    """Where the suite's shared settings come from (the generated protocol's top-level ``source``)."""
    deviations: tuple = ()
    """Differences shared by every agent on this suite (top-level ``deviations`` of the generated protocol)."""
    agents: dict = field(default_factory=dict)
    """Per published agent: its :class:`SuiteAgent` settings on this suite."""
    task_kwargs: dict = field(default_factory=dict)
    """Keyword arguments of every task on this suite (MinAtar: ``use_minimal_action_set``, ``clip_reward``)."""
    random_policy: dict | None = None
    """``[audit.random_policy]`` of the generated protocol: the random policy's scores on these tasks, for the
    learned-vs-random check on raw scores (``None``: none given)."""


@dataclass(frozen=True)
class RerunSection:
    """A published protocol's ``[rerun]`` section."""

    reference_steps: int
    """Training length of the published runs in agent steps (Dopamine: 200M frames = 50M steps)."""
    scaled: tuple[str, ...]
    """Hyperparameters counted in steps, scaled to the suite."""
    exploration_steps: int | None
    """Steps over which ε decays in the published runs (scaled; becomes ``exploration_fraction``)."""
    seeds: int
    """Default number of seeds."""
    hyperparams: dict
    """Hyperparameters shared by every agent (each agent's own win)."""
    policy_kwargs: dict
    """``policy_kwargs`` shared by every agent."""
    agents: tuple[RerunAgent, ...]
    """Every published agent, runnable or not."""
    suites: dict[str, RerunSuite]
    """Suites by name."""
    note: str = ""
    """What the rerun changes, in words."""
    implementation: str = ""
    """The published implementation, in words (e.g. ``"Dopamine (JAX / TensorFlow)"``), for the report's caveat."""
    published_suite: str = ""
    """The suite the published runs were trained on (``atari``): a rerun on another suite changes the suite as
    well as the budget, and the joined audit says so."""

    @property
    def runnable(self) -> tuple[RerunAgent, ...]:
        """Agents with a runnable counterpart."""
        return tuple(a for a in self.agents if a.algorithm is not None)

    @property
    def not_runnable(self) -> tuple[RerunAgent, ...]:
        """Agents without one (listed, never silently dropped)."""
        return tuple(a for a in self.agents if a.algorithm is None)


# ------------------------------------------------------------------------------------------- loading

def check_sections(doc: dict, published: bool, where: str) -> None:
    """Loader hook: ``[rerun]`` only on a published protocol, ``[rerun_of]`` only on a rerun protocol.

    Raises:
        InputError: naming the file and the field.
    """
    if "rerun" in doc:
        if not published:
            raise InputError(f"{where}: rerun: a [rerun] section belongs to a published protocol ([data]); a rerun "
                             f"protocol lists its own tasks and algorithms")
        parse_section(doc["rerun"], f"{where}: rerun")
    if "rerun_of" in doc:
        if published:
            raise InputError(f"{where}: rerun_of: a published protocol cannot be a rerun of another")
        d = _table(doc["rerun_of"], f"{where}: rerun_of")
        _keys(d, RERUN_OF_KEYS, f"{where}: rerun_of")
        for k in ("protocol", "name", "suite"):
            if not isinstance(d.get(k), str) or not d[k]:
                raise InputError(f"{where}: rerun_of.{k}: missing or not a string")
        agents = d.get("agents", {})
        if not isinstance(agents, dict) or not all(isinstance(v, str) for v in agents.values()):
            raise InputError(f"{where}: rerun_of.agents: must be a table {{ rerun label = \"published agent\" }}")


def parse_section(raw, where: str) -> RerunSection:
    """Check a ``[rerun]`` table (structure only; algorithm names are checked by :func:`rerun_protocol`)."""
    d = _table(raw, where)
    _keys(d, RERUN_KEYS, where)
    reference = _positive(d, "reference_steps", where, required=True)
    scaled = d.get("scaled", [])
    if not isinstance(scaled, list) or not all(isinstance(s, str) for s in scaled):
        raise InputError(f"{where}.scaled: must be a list of hyperparameter names, got {scaled!r}")
    seeds = _positive(d, "seeds", where) or 5
    agents_raw = d.get("agents")
    if not isinstance(agents_raw, list) or not agents_raw:
        raise InputError(f"{where}.agents: missing; add one [[rerun.agents]] per published agent (published = "
                         f"\"<name in the data>\", algorithm = \"<registered algorithm>\" or runnable = false)")
    agents = []
    for i, a in enumerate(agents_raw):
        at = f"{where}.agents[{i}]"
        a = _table(a, at)
        _keys(a, AGENT_KEYS, at)
        published = _string(a, "published", at, required=True)
        runnable = a.get("runnable", True)
        if not isinstance(runnable, bool):
            raise InputError(f"{at}.runnable: must be true or false, got {runnable!r}")
        algorithm = _string(a, "algorithm", at) or None
        if runnable and algorithm is None:
            raise InputError(f"{at}: agent {published!r} has no 'algorithm'; name a registered algorithm or write "
                             f"runnable = false with a note saying why")
        if not runnable and algorithm is not None:
            raise InputError(f"{at}: agent {published!r} names algorithm {algorithm!r} but runnable = false")
        if not runnable and not _string(a, "note", at):
            raise InputError(f"{at}.note: say why agent {published!r} has no runnable counterpart")
        label = _string(a, "label", at) or algorithm or published
        if algorithm is not None and not _SLUG.match(label):
            raise InputError(f"{at}.label: {label!r} must be a slug (letters, digits, '-', '_', '.'); it names runs")
        hp, pk = _dict(a, "hyperparams", at), _dict(a, "policy_kwargs", at)
        agents.append(RerunAgent(published, algorithm if runnable else None, label, hp, pk, _string(a, "note", at),
                                 parse_source(a.get("source"), f"{at}.source"),
                                 _deviations(a.get("deviations"), f"{at}.deviations", algorithm, hp, pk)))
    for what, values in (("published", [a.published for a in agents]),
                         ("label", [a.label for a in agents if a.algorithm])):
        dup = next((v for v in values if values.count(v) > 1), None)
        if dup:
            raise InputError(f"{where}.agents: {what} {dup!r} is used twice")
    suites_raw = _table(d.get("suites", {}), f"{where}.suites")
    if not suites_raw:
        raise InputError(f"{where}.suites: missing; add [rerun.suites.<suite>] with tasks and budgets")
    suites = {}
    for name, s in suites_raw.items():
        at = f"{where}.suites.{name}"
        s = _table(s, at)
        _keys(s, SUITE_KEYS, at)
        tasks = s.get("tasks")
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise InputError(f"{at}.tasks: must be a non-empty list of environment ids")
        budgets = s.get("budgets")
        if not isinstance(budgets, list) or not budgets:
            raise InputError(f"{at}.budgets: must be a non-empty list of budgets (env steps)")
        budgets = _increasing([_int_budget(b, f"{at}.budgets") for b in budgets], f"{at}.budgets")
        norm = s.get("normalization")
        by_name = {a.published: a for a in agents}
        suite_agents = {}
        for pname, sa in _dict(s, "agents", at).items():
            sat = f"{at}.agents.{pname}"
            if pname not in by_name:
                raise InputError(f"{sat}: no published agent {pname!r} in [[rerun.agents]]"
                                 f"{did_you_mean(pname, by_name)}")
            sa = _table(sa, sat)
            _keys(sa, SUITE_AGENT_KEYS, sat)
            hp, pk = _dict(sa, "hyperparams", sat), _dict(sa, "policy_kwargs", sat)
            base = by_name[pname]
            own = _string(sa, "algorithm", sat) or None
            if own is not None and base.algorithm is None:
                raise InputError(f"{sat}.algorithm: {pname!r} is not rerun (no algorithm in [[rerun.agents]]); "
                                 f"map it there first")
            inherited = ({}, {}) if own else (base.hyperparams, base.policy_kwargs)
            suite_agents[pname] = SuiteAgent(hp, pk, parse_source(sa.get("source"), f"{sat}.source"),
                                             _deviations(sa.get("deviations"), f"{sat}.deviations",
                                                         own or base.algorithm, {**inherited[0], **hp},
                                                         {**inherited[1], **pk}),
                                             _string(sa, "note", sat), own)
        suites[name] = RerunSuite(name, _positive(s, "reference_steps", at, required=True), tuple(tasks), budgets,
                                  _dict(s, "policy_kwargs", at), _dict(s, "hyperparams", at),
                                  _dict(s, "evaluation", at), _table(norm, f"{at}.normalization") if norm else None,
                                  _string(s, "note", at), parse_source(s.get("source"), f"{at}.source"),
                                  parse_deviations(s.get("deviations"), f"{at}.deviations"), suite_agents,
                                  _dict(s, "task_kwargs", at), _random_policy(s.get("random_policy"), tasks, at))
    return RerunSection(reference, tuple(scaled), _positive(d, "exploration_steps", where), seeds,
                        _dict(d, "hyperparams", where), _dict(d, "policy_kwargs", where), tuple(agents), suites,
                        _string(d, "note", where), _string(d, "implementation", where),
                        _string(d, "published_suite", where))


def _random_policy(value, tasks: list, at: str) -> dict | None:
    """A suite's ``random_policy`` table, checked as the generated protocol's ``[audit.random_policy]`` is."""
    if value is None:
        return None
    from rlaudit.audit.settings import check_random_policy

    check_random_policy(value, f"{at}.random_policy")
    for t in value["scores"]:
        if t not in tasks:
            raise InputError(f"{at}.random_policy.scores: {t!r} is not a task of this suite{did_you_mean(t, tasks)}")
    return dict(value)


def section_of(protocol) -> RerunSection:
    """The ``[rerun]`` section of a published protocol.

    Raises:
        InputError: the protocol is not published, or has no ``[rerun]`` section (one line naming what is missing).
    """
    if not protocol.is_published:
        raise InputError(f"{protocol.path}: not a published protocol ([data]); --suite applies to published "
                         f"protocols with a [rerun] section")
    if not protocol.rerun:
        raise InputError(f"{protocol.path}: rerun: missing; this published protocol has no [rerun] section mapping "
                         f"its agents to runnable algorithms and naming suites and budgets, so it cannot be rerun "
                         f"(see docs/protocol.md, 'Rerunning a published protocol')")
    return parse_section(protocol.rerun, f"{protocol.path}: rerun")


# ------------------------------------------------------------------------------------------- options

def parse_budgets(text: str | None, flag: str = "--budgets") -> tuple[int, ...] | None:
    """``"100k,1M"`` -> ``(100_000, 1_000_000)``; suffixes k, M, G (case-insensitive), ``_`` allowed.

    Raises:
        InputError: a malformed, zero, negative, repeated or non-integer budget (one line).
    """
    if text is None:
        return None
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise InputError(f"{flag}: expected budgets like 100k,1M, got {text!r}")
    out = []
    for item in items:
        m = re.fullmatch(r"([+-]?[0-9][0-9_]*(?:\.[0-9]+)?)([kKmMgG]?)", item)
        if not m:
            raise InputError(f"{flag}: {item!r} is not a budget; write env steps like 100000, 100k or 1M")
        try:
            value = exact_whole(m.group(1).replace("_", ""), _SUFFIX[m.group(2).lower()])
        except OverflowError:
            raise InputError(f"{flag}: {item!r} is out of range: a budget is at most {BUDGET_MAX:,} env steps "
                             f"(2^63 - 1)") from None
        if value is None:
            raise InputError(f"{flag}: {item!r} is not a whole number of env steps")
        if value <= 0:
            raise InputError(f"{flag}: {item!r}: a budget must be a positive number of env steps")
        out.append(value)
    return _increasing(out, flag)


def budget_name(budget: int) -> str:
    """Regime name of a budget: ``100000 -> "100k"``, ``1000000 -> "1M"``, ``2500 -> "2.5k"``."""
    for suffix, unit in (("G", 1_000_000_000), ("M", 1_000_000), ("k", 1_000)):
        if budget >= unit and (budget * 1000) % unit == 0:
            # Exact digits: a float's "%g" rounds 1234567 to "1234.57k" and writes 10^18 as "1e+09G".
            whole, rest = divmod(budget, unit)
            return f"{whole}{'.' + str(rest * 1000 // unit).zfill(3).rstrip('0') if rest else ''}{suffix}"
    return str(budget)


# ------------------------------------------------------------------------------------------- building

def rerun_protocol(published, suite: str | None = None, budgets: tuple[int, ...] | None = None,
                   seeds: int | None = None):
    """The ordinary rerun :class:`~rlaudit.protocol.schema.Protocol` that reruns ``published`` on ``suite``.

    Args:
        published: a loaded published protocol with a ``[rerun]`` section.
        suite: suite name (``None``: the only suite, if there is one).
        budgets: budgets in env steps (``None``: the suite's); all nested regimes of one run per
            (task, agent, seed), so the cost is the largest budget.
        seeds: number of seeds (``None``: the section's).

    Raises:
        InputError: no ``[rerun]`` section, unknown suite (did-you-mean), agents whose algorithm is not
            registered (listed by name with the closest registered algorithms), bad seeds.
    """
    from rlaudit.protocol.loader import parse_protocol

    section = section_of(published)
    where = f"{published.path}: rerun"
    if suite is None:
        if len(section.suites) != 1:
            raise InputError(f"--suite: required; {published.path} can be rerun on {', '.join(section.suites)}")
        suite = next(iter(section.suites))
    if suite not in section.suites:
        raise InputError(f"--suite: {published.path} has no rerun suite {suite!r}{did_you_mean(suite, section.suites)}; "
                         f"choose from {', '.join(section.suites)}")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise InputError(f"--seeds: need at least one seed, got {seeds!r}")
    check_registered(section, where)
    s = section.suites[suite]
    budgets = tuple(budgets) if budgets else s.budgets
    text = render_protocol(published, section, s, budgets, seeds or section.seeds)
    return parse_protocol(text, f"{published.path} [rerun on {suite}]")


def check_registered(section: RerunSection, where: str) -> None:
    """Every runnable agent's algorithm is registered; else one line listing each agent with the closest ones."""
    from rlaudit.algorithms import list_specs

    names = [s.name for s in list_specs()]
    pairs = [(a.published, a.algorithm) for a in section.runnable] + [
        (f"{a} on {s.name}", own.algorithm) for s in section.suites.values() for a, own in s.agents.items()
        if own.algorithm]
    missing = [(p, alg) for p, alg in pairs if alg not in names]
    if missing:
        items = [f"{p} -> {alg!r} (closest registered: {', '.join(closest(alg, names))})" for p, alg in missing]
        raise InputError(f"{where}.agents: no runnable counterpart for {len(missing)} agent"
                         f"{'s' if len(missing) > 1 else ''}: {'; '.join(items)}; `rlaudit algorithms` lists them")


def closest(name: str, candidates, n: int = 3) -> list[str]:
    """The ``n`` candidates closest to ``name`` (difflib), also matching the name without its parenthetical
    (``"DQN (Adam + MSE in JAX)"`` -> ``"DQN"``); never empty when there are candidates."""
    cands = list(candidates)
    lower = {c.lower(): c for c in cands}
    keys = [name.lower(), re.sub(r"\s*\(.*?\)", "", name).strip().lower()]
    scored = sorted(((max(difflib.SequenceMatcher(None, k, c).ratio() for k in keys), -i, lower[c])
                     for i, c in enumerate(lower)), reverse=True)
    return [c for _, _, c in scored[:n]]


def scaled_settings(section: RerunSection, agent: RerunAgent, suite: RerunSuite, largest: int) -> tuple[dict, dict]:
    """``(hyperparams, policy_kwargs)`` of ``agent`` on ``suite`` by the scaling rule (module docstring).

    Args:
        largest: the largest budget of the rerun (the length of every nested run; sets ``exploration_fraction``).
    """
    factor = suite.reference_steps / section.reference_steps
    own = suite.agents.get(agent.published)
    replaced = own is not None and own.algorithm is not None  # another algorithm: not the agent's own settings
    hp = {**section.hyperparams, **({} if replaced else agent.hyperparams)}
    for key in section.scaled:
        if key in hp:
            hp[key] = max(1, round(hp[key] * factor))
    if section.exploration_steps is not None:
        steps = max(1, round(section.exploration_steps * factor))
        hp["exploration_fraction"] = min(1.0, steps / largest)
    hp.update(suite.hyperparams)
    pk = {**section.policy_kwargs, **suite.policy_kwargs, **({} if replaced else agent.policy_kwargs)}
    if own is not None:
        hp.update(own.hyperparams)
        pk.update(own.policy_kwargs)
    optimizer = pk.get("optimizer_kwargs")
    suite_eps = "adam_eps" in suite.hyperparams or (own is not None and "adam_eps" in own.hyperparams)
    if suite_eps and hp.get("adam_eps") is not None and isinstance(optimizer, dict) and "eps" in optimizer:
        # a suite's adam_eps replaces the Adam eps the agent's published (Atari) settings carry
        rest = {k: v for k, v in optimizer.items() if k != "eps"}
        pk = {**pk, "optimizer_kwargs": rest} if rest else {k: v for k, v in pk.items() if k != "optimizer_kwargs"}
    return hp, pk


def algorithm_on(agent: RerunAgent, suite: RerunSuite) -> str:
    """The registered algorithm that reruns ``agent`` on ``suite`` (the suite's own choice, else the agent's)."""
    own = suite.agents.get(agent.published)
    return own.algorithm if own is not None and own.algorithm else agent.algorithm


def provenance_of(agent: RerunAgent, suite: RerunSuite) -> tuple[tuple, tuple]:
    """``(source, deviations)`` of ``agent`` rerun on ``suite``: the suite's own published settings of the agent
    when it has them (:class:`SuiteAgent` with a source), else the agent's."""
    own = suite.agents.get(agent.published)
    if own is not None and own.source:
        return own.source, own.deviations
    return agent.source, agent.deviations + (own.deviations if own is not None else ())


def render_protocol(published, section: RerunSection, suite: RerunSuite, budgets: tuple[int, ...],
                    n_seeds: int) -> str:
    """TOML text of the rerun protocol (what the store records; ``rlaudit validate`` accepts it as a file)."""
    name = f"{published.name}-rerun-{suite.name}"
    factor = suite.reference_steps / section.reference_steps
    lines = [f"# Generated by rlaudit from {published.path} ([rerun], suite {suite.name}); scale factor "
             f"{suite.reference_steps:_} / {section.reference_steps:_} = {factor:g} on {', '.join(section.scaled)}"
             + (" and exploration_steps" if section.exploration_steps else "") + ".",
             "schema_version = 1", f"name = {_toml(name)}",
             f"title = {_toml('Rerun on ' + suite.name + ': ' + (published.title or published.name))}",
             f"description = {_toml(' '.join(x for x in (section.note, suite.note) if x))}",
             f"citation = {_toml(published.citation)}", f"seeds = {n_seeds}"]
    if suite.source:
        lines.append(f"source = {_toml([x.text for x in suite.source])}")
    if suite.deviations:
        lines.append(f"deviations = {_toml([d.to_dict() for d in suite.deviations])}")
    lines += ["",
             "[rerun_of]", f"protocol = {_toml(published.path)}", f"name = {_toml(published.name)}",
             f"hash = {_toml(published.hash)}", f"suite = {_toml(suite.name)}",
             f"agents = {_toml({a.label: a.published for a in section.runnable})}", "", "[regimes]"]
    lines += [f"{_toml(budget_name(b))} = {b}" for b in budgets]
    for t in suite.tasks:
        lines += ["", "[[tasks]]", f"id = {_toml(t)}", f"suite = {_toml(suite.name)}"]
        if suite.task_kwargs:
            lines.append(f"kwargs = {_toml(suite.task_kwargs)}")
    for a in section.runnable:
        hp, pk = scaled_settings(section, a, suite, max(budgets))
        lines += ["", "[[algorithms]]", f"name = {_toml(algorithm_on(a, suite))}", f"label = {_toml(a.label)}",
                  f"hyperparams = {_toml(hp)}", f"policy_kwargs = {_toml(pk)}"]
        source, deviations = provenance_of(a, suite)
        if source:
            lines.append(f"source = {_toml([x.text for x in source])}")
        if deviations:
            lines.append(f"deviations = {_toml([d.to_dict() for d in deviations])}")
    if suite.evaluation:
        lines += ["", "[evaluation]"] + [f"{k} = {_toml(v)}" for k, v in suite.evaluation.items()]
    if suite.normalization:
        lines += ["", "[normalization]"] + [f"{k} = {_toml(v)}" for k, v in suite.normalization.items()]
    lines += ["", "[audit]", f"metric = {_toml(published.audit.metric)}"]
    if suite.random_policy:
        lines += ["", "[audit.random_policy]", f"source = {_toml(suite.random_policy['source'])}",
                  f"scores = {_toml(suite.random_policy['scores'])}"]
    labels = {a.published: a.label for a in section.runnable}
    for c in published.claims:
        if c.get("better") in labels and c.get("worse") in labels:
            lines += ["", "[[claims]]", f"better = {_toml(labels[c['better']])}",
                      f"worse = {_toml(labels[c['worse']])}", f"text = {_toml(c.get('text') or '')}",
                      f"source = {_toml('published: ' + (c.get('source') or published.name))}"]
    return "\n".join(lines) + "\n"


def describe(section: RerunSection, protocol, echo) -> None:
    """Print the agent mapping, with the agents that are not rerun and the closest registered algorithms."""
    from rlaudit.algorithms import list_specs

    echo(f"rerun of published protocol {protocol.rerun_of['name']} ({protocol.rerun_of['protocol']}), suite "
         f"{protocol.rerun_of['suite']}; implementations differ from the published ones, so only orderings are "
         f"compared with the published data")
    suite = section.suites.get(protocol.rerun_of["suite"])
    for a in section.runnable:
        alg = algorithm_on(a, suite) if suite is not None else a.algorithm
        own = suite.agents.get(a.published) if suite is not None else None
        note = own.note if own is not None and own.note else a.note  # this suite's reason, else the agent's
        echo(f"  {a.published} -> {a.label}" + (f" ({alg})" if a.label != alg else "") + (f": {note}" if note else ""))
    names = [s.name for s in list_specs()]
    for a in section.not_runnable:
        echo(f"  {a.published}: not rerun, no runnable counterpart (closest built-ins: "
             f"{', '.join(closest(a.published, names))}): {a.note}")


# ------------------------------------------------------------------------------------------- helpers

def _toml(v) -> str:
    """A TOML value (inline form)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(x)}" for k, x in v.items()) + " }"
    raise InputError(f"cannot write {v!r} ({type(v).__name__}) into a protocol")


def _deviations(value, where: str, algorithm: str | None, hyperparams: dict, policy_kwargs: dict) -> tuple:
    """Deviations of a rerun agent: setting names, or the algorithm's hyperparameters when it has one."""
    known = hyperparam_checker(algorithm, hyperparams, policy_kwargs, where.rsplit(".", 1)[0]) if algorithm else None
    return parse_deviations(value, where, known)


def _keys(d: dict, allowed, where: str) -> None:
    for k in d:
        if k not in allowed:
            raise InputError(f"{where}: unknown key {k!r}{did_you_mean(k, allowed)}; expected one of "
                             f"{', '.join(allowed)}")


def _table(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise InputError(f"{where}: must be a table, got {type(v).__name__} {v!r}")
    return v


def _dict(d: dict, key: str, where: str) -> dict:
    return dict(_table(d.get(key, {}), f"{where}.{key}"))


def _string(d: dict, key: str, where: str, required: bool = False) -> str:
    v = d.get(key)
    if v is None:
        if required:
            raise InputError(f"{where}.{key}: missing")
        return ""
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{where}.{key}: must be a non-empty string, got {v!r}")
    return v


def _positive(d: dict, key: str, where: str, required: bool = False) -> int | None:
    if key not in d:
        if required:
            raise InputError(f"{where}.{key}: missing")
        return None
    return _int_budget(d[key], f"{where}.{key}")


def _int_budget(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise InputError(f"{where}: must be a positive integer, got {v!r}")
    return v


def _increasing(values: list[int], where: str) -> tuple[int, ...]:
    for prev, cur in zip(values, values[1:]):
        if cur <= prev:
            raise InputError(f"{where}: {cur} follows {prev}; list budgets once each, in increasing order")
    return tuple(values)
