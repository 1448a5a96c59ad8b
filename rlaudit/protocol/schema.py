"""Protocol files as frozen, typed objects (one docstring per field; reference page: ``docs/protocol.md``).

A protocol is either a **rerun** protocol — ``tasks``, ``algorithms``, ``seeds``, ``regimes`` and
``evaluation``, trained by ``rlaudit run`` — or a **published** protocol — a ``[data]`` section naming an
importer and files. Both may carry ``[normalization]``, ``[audit]`` and ``[[claims]]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlaudit.protocol.provenance import Deviation, SourceRef

SCHEMA_VERSION = 1
"""The protocol-file schema version this rlaudit reads."""


@dataclass(frozen=True)
class Task:
    """One ``[[tasks]]`` entry: an environment."""

    id: str
    """Environment id (``"CartPole-v1"``, ``"ALE/Pong-v5"``, ``"MinAtar/Breakout-v1"``)."""
    suite: str = "gymnasium"
    """``gymnasium``, ``atari`` (standard preprocessing, sticky actions 0.25) or ``minatar``."""
    kwargs: dict = field(default_factory=dict)
    """Keyword arguments for the environment (``gymnasium.make``; Atari preprocessing options)."""
    max_episode_steps: int | None = None
    """Episode time limit in agent steps for this task (default: ``evaluation.max_episode_steps``)."""


@dataclass(frozen=True)
class RegimeOverride:
    """``[algorithms.regimes.<name>]``: an algorithm's settings for one regime (makes it ``separate``)."""

    hyperparams: dict = field(default_factory=dict)
    """Hyperparameters replacing the algorithm's own for this regime."""
    policy_kwargs: dict | None = None
    """``policy_kwargs`` replacing the algorithm's own for this regime (``None``: unchanged)."""


@dataclass(frozen=True)
class Algorithm:
    """One ``[[algorithms]]`` entry."""

    name: str
    """Registry name (``rlaudit algorithms`` lists them): ``PPO``, ``DQN``, ``QR-DQN``, …"""
    label: str
    """Name in the score table and reports (default: ``name``); unique within the protocol."""
    hyperparams: dict = field(default_factory=dict)
    """Keyword hyperparameters of the algorithm class (checked against its signature)."""
    policy_kwargs: dict = field(default_factory=dict)
    """``policy_kwargs`` passed to the policy (e.g. ``{net_arch = [64, 64]}``)."""
    regimes: dict[str, RegimeOverride] = field(default_factory=dict)
    """Per-regime overrides, by regime name."""
    source: tuple[SourceRef, ...] = ()
    """Where the settings come from (``source = "owner/repo@commit:path"``, a paper and table, …); not hashed."""
    deviations: tuple[Deviation, ...] = ()
    """Settings that differ from the source, each with its published value, its value here and why; not hashed."""
    backend: str = "sb3"
    """What trains its runs (``rlaudit.run.backends``): the entry's ``backend``, else the protocol's top-level
    ``backend``, else ``sb3``. One backend for all of an entry's seeds and regimes."""

    def settings_for(self, regime: str | None) -> tuple[dict, dict]:
        """``(hyperparams, policy_kwargs)`` in ``regime`` (``None``: the base settings)."""
        hp, pk = dict(self.hyperparams), dict(self.policy_kwargs)
        over = self.regimes.get(regime) if regime else None
        if over is not None:
            hp.update(over.hyperparams)
            if over.policy_kwargs is not None:
                pk = dict(over.policy_kwargs)
        return hp, pk


@dataclass(frozen=True)
class Regime:
    """One named budget of ``[regimes]``."""

    name: str
    """Regime name (``low``, ``high``, …); written to the score table's ``regime`` column."""
    budget: int
    """Budget in env steps."""
    regime_kind: str
    """``nested``: read from the shared run trained to the largest nested budget (an *anytime* reading);
    ``separate``: its own runs, trained for this budget (schedules scaled to it). One name everywhere: the
    protocol file's key is ``mode`` (``{budget = N, mode = "separate"}``, the user's word), and it is
    ``regime_kind`` in Python, the score table's column, the store's ``runs`` column and ``audit.json``."""


@dataclass(frozen=True)
class Evaluation:
    """``[evaluation]``: how runs are evaluated."""

    n_eval_episodes: int = 10
    """Episodes per evaluation."""
    deterministic: bool = True
    """Greedy / mean action (``true``) or sampled actions (``false``)."""
    epsilon: float = 0.0
    """ε of ε-greedy evaluation (a random action with this probability; 0.05 or 0.001 on Atari)."""
    eval_every: int | None = None
    """Also evaluate every this many env steps (recorded, so "max over evaluations" can be audited)."""
    max_episode_steps: int | None = None
    """Episode time limit in agent steps, training and evaluation (default: the environment's)."""
    eval_seed_offset: int = 10_000
    """The evaluation environment of run seed ``s`` is seeded from ``s + eval_seed_offset``."""


@dataclass(frozen=True)
class AuditSection:
    """``[audit]``: defaults for ``rlaudit audit`` on this protocol's scores."""

    metric: str = "iqm"
    """Metric deciding orderings and claims: ``iqm``, ``median``, ``mean`` or ``og``."""
    budgets: tuple[int, ...] | None = None
    """Budgets of interest (default: all)."""
    extra: dict = field(default_factory=dict)
    """Other audit settings given (``reps``, ``alpha``, ``seed``, … — see ``rlaudit audit --help``)."""

    def to_dict(self) -> dict:
        """The section as the audit stage reads it."""
        d = {"metric": self.metric, **self.extra}
        if self.budgets is not None:
            d["budgets"] = list(self.budgets)
        return d


@dataclass(frozen=True)
class Protocol:
    """A loaded, validated protocol file."""

    path: str
    """The file it was read from."""
    text: str
    """Full text of the file (stored in the store's ``protocols`` table)."""
    hash: str
    """SHA-256 of the canonical run-defining content (tasks, algorithms, seeds, regimes, evaluation, budget
    unit): a store refuses a protocol with another hash. Comments, titles and claims do not change it."""
    schema_version: int
    """Protocol schema version (``1``)."""
    name: str
    """Slug (letters, digits, ``-``, ``_``); default store ``sweeps/<name>/store.sqlite``."""
    title: str = ""
    """Human title."""
    description: str = ""
    """What the comparison is and why."""
    citation: str = ""
    """The work whose comparison this reruns or imports."""
    run_timeout: float | None = None
    """Wall-time limit of one run in seconds (``None``: none): a run past it is stopped and recorded timed out,
    and the sweep goes on. How the sweep is executed, not what it measures, so not part of :attr:`hash`;
    ``rlaudit run --run-timeout`` overrides it. Added within schema version 1 (an optional key)."""
    seeds: tuple[int, ...] = ()
    """Training seeds (``seeds = 5`` means ``0..4``)."""
    budget_unit: str = "env_steps"
    """Unit of every budget (rerun protocols: ``env_steps``)."""
    regimes: tuple[Regime, ...] = ()
    """Named budgets, ascending."""
    tasks: tuple[Task, ...] = ()
    """Environments."""
    algorithms: tuple[Algorithm, ...] = ()
    """Algorithms compared."""
    evaluation: Evaluation = field(default_factory=Evaluation)
    """Evaluation settings."""
    data: dict | None = None
    """``[data]`` of a published protocol (importer, options, files), as written."""
    normalization: dict | None = None
    """``[normalization]`` as written (``None``: not given)."""
    audit: AuditSection = field(default_factory=AuditSection)
    """``[audit]`` section."""
    claims: tuple[dict, ...] = ()
    """``[[claims]]`` tables, each with a ``where`` key naming file and index."""
    rerun: dict | None = None
    """``[rerun]`` of a published protocol, as written (:mod:`rlaudit.protocol.rerun` reads it)."""
    rerun_of: dict | None = None
    """``[rerun_of]`` of a rerun protocol generated from a published one: ``{protocol, name, hash, suite,
    agents = {rerun label: published agent}}``."""
    source: tuple[SourceRef, ...] = ()
    """Top-level ``source``: where the settings shared by every algorithm come from (not hashed)."""
    deviations: tuple[Deviation, ...] = ()
    """Top-level ``[[deviations]]``: differences from the source shared by every algorithm (suite, evaluation,
    budget, seeds); not hashed."""

    @property
    def is_published(self) -> bool:
        """Whether this protocol imports published data instead of training."""
        return self.data is not None

    @property
    def labels(self) -> list[str]:
        """Algorithm labels, in protocol order."""
        return [a.label for a in self.algorithms]

    @property
    def budgets(self) -> list[int]:
        """Regime budgets, ascending."""
        return [r.budget for r in self.regimes]

    @property
    def nested(self) -> tuple[Regime, ...]:
        """Nested regimes, ascending."""
        return tuple(r for r in self.regimes if r.regime_kind == "nested")

    @property
    def separate(self) -> tuple[Regime, ...]:
        """Separate regimes, ascending."""
        return tuple(r for r in self.regimes if r.regime_kind == "separate")
