"""The planner: a protocol becomes training runs.

For every (task, algorithm, seed):

- one **nested** run trained to the largest nested budget and evaluated at every nested budget from inside
  training (cost: the largest budget, not the sum), id ``task__label__seed__nested``;
- one **separate** run per separate regime, trained for that regime's budget with the algorithm's
  settings for that regime (schedules scaled to it), id ``task__label__seed__<regime>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlaudit.errors import InputError, did_you_mean
from rlaudit.protocol.schema import Protocol
from rlaudit.run.spec import AlgoSpec, EvalSpec, RunSpec, TaskSpec


LARGE_PLAN_ENV_STEPS = 10**10
"""Plans past this many env steps in total get a warning from ``validate`` and ``run`` (Atari 200M for 57
games, 5 seeds and 3 algorithms is 1.7·10^11 frames: large plans exist, but should be meant)."""
LARGE_PLAN_SECONDS = 7 * 24 * 3600.0
"""Plans estimated to take longer than this (one week) get the same warning."""


def size_warning(total_env_steps: int, seconds: float) -> str | None:
    """The warning for a plan past :data:`LARGE_PLAN_ENV_STEPS` or :data:`LARGE_PLAN_SECONDS`, else ``None``."""
    if total_env_steps <= LARGE_PLAN_ENV_STEPS and seconds <= LARGE_PLAN_SECONDS:
        return None
    return (f"this plan is large: {total_env_steps:,} env steps, about {seconds / 3600:,.0f} hours (warning past "
            f"{LARGE_PLAN_ENV_STEPS:,} env steps or {LARGE_PLAN_SECONDS / 86400:.0f} days); check the budgets "
            f"and seeds, or run a subset with --only")


@dataclass(frozen=True)
class BudgetLabel:
    """What a budget of the score table is: which regime, read from which kind of run."""

    regime: str
    """Regime name."""
    budget: int
    """Budget in env steps."""
    regime_kind: str
    """``nested`` (anytime reading of the run trained to the largest nested budget) or ``separate``."""
    run_regime: str
    """Regime part of the run ids that serve this budget (``nested`` or the regime's name)."""

    def to_dict(self) -> dict:
        """``{budget, regime, regime_kind}`` (the audit's ``budget_labels`` entry)."""
        return {"budget": self.budget, "regime": self.regime, "regime_kind": self.regime_kind}


@dataclass(frozen=True)
class Plan:
    """The runs a protocol asks for."""

    protocol: Protocol
    """The protocol planned."""
    runs: tuple[RunSpec, ...]
    """Every run, in a stable order (task, algorithm, seed, regime)."""
    labels: tuple[BudgetLabel, ...]
    """One per regime, ascending by budget."""

    @property
    def total_env_steps(self) -> int:
        """Env steps summed over all runs."""
        return sum(r.total_steps for r in self.runs)

    def select(self, only: dict[str, list[str]] | None) -> tuple[RunSpec, ...]:
        """Runs matching ``only`` (``{"algo": [...], "task": [...], "seed": [...], "regime": [...]}``)."""
        if not only:
            return self.runs
        out = []
        for r in self.runs:
            values = {"algo": r.algorithm.label, "task": r.task.id, "seed": str(r.seed), "regime": r.regime}
            if all(values[k] in v for k, v in only.items()):
                out.append(r)
        return tuple(out)


RUN_ID_SEPARATOR = "__"
"""Between the parts of a run id."""


def _id_part(text: str) -> str:
    """``text`` as one part of a run id: unchanged unless it could be mistaken for a separator.

    A part holding ``__`` or starting or ending with ``_`` is written as ``_`` followed by the part with
    ``%`` as ``%25`` and ``_`` as ``%5F``. Unchanged parts never start with ``_`` and escaped ones hold no
    other ``_``, so every ``__`` of an id is a separator and the parts of different runs never give one id
    (label ``X`` with regime ``0__nested`` against label ``X__1`` with regime ``nested``). Every other part,
    ``%`` included, is kept byte for byte, so recorded stores keep their ids.
    """
    if "__" not in text and not text.startswith("_") and not text.endswith("_"):
        return text
    return "_" + text.replace("%", "%25").replace("_", "%5F")


def run_id(task: str, label: str, seed: int, regime: str) -> str:
    """Deterministic run id ``task__label__seed__regime`` (parts escaped by :func:`_id_part`; unique per run)."""
    return RUN_ID_SEPARATOR.join(_id_part(str(p)) for p in (task, label, seed, regime))


def check_unique_runs(runs, where: str) -> None:
    """Refuse two planned runs with one id (they would share, and overwrite, each other's store rows).

    Raises:
        InputError: naming both runs by task, algorithm label, seed and regime.
    """
    seen: dict[str, RunSpec] = {}
    for r in runs:
        other = seen.setdefault(r.run_id, r)
        if other is not r:
            def name(s):
                return f"task {s.task.id!r}, algorithm {s.algorithm.label!r}, seed {s.seed}, regime {s.regime!r}"
            raise InputError(f"{where}: two runs would share the id {r.run_id!r} ({name(other)}; {name(r)}); "
                             f"rename a label, task or regime")


def plan(protocol: Protocol) -> Plan:
    """Turn a rerun protocol into :class:`~rlaudit.run.spec.RunSpec` objects."""
    if protocol.is_published:
        raise InputError(f"{protocol.path}: a published protocol ([data]) has nothing to run; use "
                         f"'rlaudit audit {protocol.path}'")
    ev = protocol.evaluation
    nested = protocol.nested
    runs = []
    for t in protocol.tasks:
        task = TaskSpec(t.id, t.suite, tuple(sorted(t.kwargs.items())), t.max_episode_steps or ev.max_episode_steps)
        for a in protocol.algorithms:
            for seed in protocol.seeds:
                evs = EvalSpec(ev.n_eval_episodes, ev.deterministic, ev.epsilon, ev.eval_every,
                               seed + ev.eval_seed_offset)
                if nested:
                    hp, pk = a.settings_for(None)
                    runs.append(RunSpec(run_id(t.id, a.label, seed, "nested"), protocol.hash, task,
                                        AlgoSpec(a.name, a.label, tuple(sorted(hp.items())), tuple(sorted(pk.items())),
                                                 a.backend),
                                        seed, tuple(r.budget for r in nested), evs, "nested", "nested"))
                for r in protocol.separate:
                    hp, pk = a.settings_for(r.name)
                    runs.append(RunSpec(run_id(t.id, a.label, seed, r.name), protocol.hash, task,
                                        AlgoSpec(a.name, a.label, tuple(sorted(hp.items())), tuple(sorted(pk.items())),
                                                 a.backend),
                                        seed, (r.budget,), evs, "separate", r.name))
    check_unique_runs(runs, str(protocol.path))
    labels = tuple(BudgetLabel(r.name, r.budget, r.regime_kind, "nested" if r.regime_kind == "nested" else r.name)
                   for r in protocol.regimes)
    return Plan(protocol, tuple(runs), labels)


ONLY_KEYS = ("algo", "task", "seed", "regime")


def parse_only(text: str | None, plan_: Plan) -> dict[str, list[str]] | None:
    """Parse ``--only algo=PPO,task=CartPole-v1`` (repeat a key to allow several values).

    Raises:
        InputError: unknown key or a value that matches no run.
    """
    if not text:
        return None
    only: dict[str, list[str]] = {}
    for part in text.split(","):
        if "=" not in part:
            raise InputError(f"--only: expected key=value pairs like 'algo=PPO,task=CartPole-v1', got {part!r}")
        k, v = (s.strip() for s in part.split("=", 1))
        if k not in ONLY_KEYS:
            raise InputError(f"--only: unknown key {k!r}{did_you_mean(k, ONLY_KEYS)}; use {', '.join(ONLY_KEYS)}")
        only.setdefault(k, []).append(v)
    known = {"algo": {r.algorithm.label for r in plan_.runs}, "task": {r.task.id for r in plan_.runs},
             "seed": {str(r.seed) for r in plan_.runs}, "regime": {r.regime for r in plan_.runs}}
    for k, vs in only.items():
        for v in vs:
            if v not in known[k]:
                raise InputError(f"--only: no run has {k}={v!r}{did_you_mean(v, known[k])}; "
                                 f"choose from {', '.join(sorted(known[k]))}")
    return only
