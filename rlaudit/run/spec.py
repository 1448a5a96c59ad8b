"""Plain, frozen, picklable descriptions of one training run and of what it produces.

These objects cross process (and, with Ray, machine) boundaries: the driver plans :class:`RunSpec` objects
from a protocol, an executor hands each to :func:`rlaudit.run.runner.execute_run` in a worker, and the
worker streams :class:`EvalRecord` objects back to the driver, which alone writes the store.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

TIMED_OUT = "RunTimedOut"
"""First word of the error of a run stopped at its wall-time limit (``run_timeout``): the store keeps it as a
failed run (retried by the next ``rlaudit run``), ``rlaudit status`` counts it as timed out."""


def batch_timeout(run_timeout: float, n_runs: int) -> float:
    """Wall-time limit of a batch of ``n_runs`` runs trained together in one process (the seeds of a JAX program):
    ``run_timeout`` per run, ``n_runs * run_timeout`` in all. A batch does the work of its runs, so a limit set
    for one run must not stop a batch of five that takes no longer than its runs one after another would."""
    return run_timeout * max(n_runs, 1)


def timed_out_error(run_id: str, seconds: float, worker: str, n_runs: int = 1) -> str:
    """The error recorded for ``run_id`` stopped on ``worker`` after ``seconds`` (the run timeout), or after
    :func:`batch_timeout` when it trained in a batch of ``n_runs`` runs."""
    batch = (f" ({batch_timeout(seconds, n_runs):g} s for its batch of {n_runs} runs trained together)"
             if n_runs > 1 else "")
    return (f"{TIMED_OUT}: {run_id} ran past the run timeout of {seconds:g} s{batch}; worker {worker} was stopped "
            f"(raise run_timeout / --run-timeout if the run needs longer)")


def is_timed_out(error: str | None) -> bool:
    """Whether a stored run error is a timeout (:func:`timed_out_error`)."""
    return bool(error) and error.startswith(f"{TIMED_OUT}:")


REGIME_KINDS: tuple[str, ...] = ("nested", "separate")
"""``nested``: an anytime reading, at a smaller budget, of one run trained for the largest budget.
``separate``: a run trained *for* that budget (its schedules scaled to it)."""


@dataclass(frozen=True)
class TaskSpec:
    """An environment to train and evaluate on."""

    id: str
    """Environment id as registered with gymnasium (``"CartPole-v1"``, ``"ALE/Pong-v5"``, ``"MinAtar/Breakout-v1"``)."""
    suite: str = "gymnasium"
    """``gymnasium`` (classic control, Box2D, …), ``atari`` (ale-py, standard preprocessing) or ``minatar``."""
    kwargs: tuple[tuple[str, object], ...] = ()
    """Keyword arguments for ``gymnasium.make``, as sorted ``(name, value)`` pairs (hashable)."""
    max_episode_steps: int | None = None
    """Episode time limit for training and evaluation (``None``: the environment's own)."""

    @property
    def kwargs_dict(self) -> dict:
        """``kwargs`` as a dict."""
        return dict(self.kwargs)


@dataclass(frozen=True)
class AlgoSpec:
    """An algorithm and its settings for one run."""

    name: str
    """Registry name (:mod:`rlaudit.algorithms`), e.g. ``"PPO"``."""
    label: str
    """Display name written to the score table's ``algorithm`` column."""
    hyperparams: tuple[tuple[str, object], ...] = ()
    """Keyword hyperparameters as sorted ``(name, value)`` pairs (hashable)."""
    policy_kwargs: tuple[tuple[str, object], ...] = ()
    """``policy_kwargs`` as sorted ``(name, value)`` pairs."""
    backend: str = "sb3"
    """What trains the run (:mod:`rlaudit.run.backends`): ``sb3`` (the default) or ``jax``."""

    @property
    def hyperparams_dict(self) -> dict:
        """``hyperparams`` as a dict."""
        return dict(self.hyperparams)

    @property
    def policy_kwargs_dict(self) -> dict:
        """``policy_kwargs`` as a dict."""
        return dict(self.policy_kwargs)


@dataclass(frozen=True)
class EvalSpec:
    """How a run is evaluated."""

    n_eval_episodes: int = 10
    """Episodes per evaluation."""
    deterministic: bool = True
    """Greedy/mean action (``True``) or a sample from the policy (``False``)."""
    epsilon: float = 0.0
    """Probability of a uniformly random action at evaluation (ε-greedy evaluation, e.g. 0.05 on Atari)."""
    eval_every: int | None = None
    """Also evaluate every this many env steps (``None``: only at the run's budgets)."""
    eval_seed: int = 10_000
    """Seed of the separate evaluation environment (the planner uses run seed + ``eval_seed_offset``); episode
    ``i`` of every evaluation of the run is reset with a seed derived from ``(eval_seed, i)``."""


@dataclass(frozen=True)
class RunSpec:
    """One training run: everything a worker needs, nothing it must look up."""

    run_id: str
    """Deterministic id ``task__label__seed__regime`` (regime ``nested`` for the run shared by nested regimes; a
    part that holds ``__`` is escaped, see :func:`rlaudit.protocol.plan.run_id`)."""
    protocol_hash: str
    """Hash of the protocol text that planned this run."""
    task: TaskSpec
    """Environment."""
    algorithm: AlgoSpec
    """Algorithm and hyperparameters."""
    seed: int
    """Seed of the training run (environment, network initialisation, exploration)."""
    budgets: tuple[int, ...]
    """Evaluation budgets read from this run, ascending; the last is the training length."""
    eval: EvalSpec = field(default_factory=EvalSpec)
    """Evaluation settings."""
    regime_kind: str = "nested"
    """``nested`` or ``separate`` (see :data:`REGIME_KINDS`)."""
    regime: str = "nested"
    """Regime name for a separate run; ``"nested"`` for the run shared by the nested regimes."""

    @property
    def total_steps(self) -> int:
        """Training length in env steps (the largest budget)."""
        return self.budgets[-1]

    def eval_points(self) -> tuple[int, ...]:
        """Env-step counts at which the run is evaluated: the budgets and every ``eval.eval_every`` steps."""
        points = set(self.budgets)
        if self.eval.eval_every:
            points.update(range(self.eval.eval_every, self.total_steps + 1, self.eval.eval_every))
        return tuple(sorted(p for p in points if p <= self.total_steps))

    def cost_key(self) -> str:
        """What one env step of this run costs depends on: the algorithm, its settings and backend, and the suite
        (canonical JSON; runs with equal keys train at the same rate on one machine, up to the game)."""
        a = self.algorithm
        return json.dumps([a.name, a.backend, self.task.suite, [list(p) for p in a.hyperparams],
                           [list(p) for p in a.policy_kwargs]], default=str)

    def to_json(self) -> str:
        """A canonical JSON form (stored with the run so that a store says exactly what was trained)."""
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """The spec written by :meth:`to_json` (to hand a run to another process, e.g. a reference
        implementation's interpreter in :mod:`rlaudit.fidelity`). Specs stored before a field existed read as
        that field's default (``algorithm.backend``: ``"sb3"``)."""
        d = json.loads(text)

        def pairs(items) -> tuple:
            return tuple((str(k), v) for k, v in items)

        t, a = d["task"], d["algorithm"]
        return cls(run_id=d["run_id"], protocol_hash=d["protocol_hash"],
                   task=TaskSpec(t["id"], t["suite"], pairs(t["kwargs"]), t["max_episode_steps"]),
                   algorithm=AlgoSpec(a["name"], a["label"], pairs(a["hyperparams"]), pairs(a["policy_kwargs"]),
                                      a.get("backend") or "sb3"),
                   seed=int(d["seed"]), budgets=tuple(int(b) for b in d["budgets"]), eval=EvalSpec(**d["eval"]),
                   regime_kind=d["regime_kind"], regime=d["regime"])


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation of a run at one point of its training."""

    run_id: str
    """The run evaluated."""
    env_steps: int
    """Training env steps consumed when the evaluation was made."""
    returns: tuple[float, ...]
    """Undiscounted return of each evaluation episode, shape ``(n_eval_episodes,)``."""
    lengths: tuple[int, ...]
    """Length of each evaluation episode, shape ``(n_eval_episodes,)``."""
    wall_time: float
    """Seconds since the run started (training and earlier evaluations included)."""


@dataclass(frozen=True)
class RunResult:
    """Summary of a finished run."""

    run_id: str
    """The run."""
    env_steps: int
    """Training env steps consumed in total."""
    wall_time: float
    """Seconds from start to finish of the run."""
    cpu_time: float | None = None
    """CPU seconds of the process that trained it, all its threads (:func:`time.process_time`), from the start
    to the end of the run (environments, training, evaluations); for runs trained together in one process (a JAX
    seed batch), the batch's CPU time divided equally among them. ``None``: not measured."""
    trained_on: tuple[tuple[str, int], ...] | None = None
    """For a run resumed from a checkpoint written on another machine (:mod:`rlaudit.run.checkpoint`, ``portable``):
    ``(machine fingerprint as JSON text, env step from which it trained there)`` for each machine, in order.
    ``None``: the run trained on the recording driver's machine only."""
