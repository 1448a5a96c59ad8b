"""What the training-log importers share (``tensorboard``, ``wandb``, ``openrlbenchmark``): the default return
tags and their score kind, run names in CleanRL's layout, ``run_from`` patterns, and reading one run's
``(step, value)`` points as rows (every step, or at requested budgets)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rlaudit.errors import InputError
from rlaudit.importers._common import opt_budgets, opt_int
from rlaudit.scores import SCORE_KINDS

DEFAULT_TAGS: tuple[tuple[str, str], ...] = (
    ("eval/mean_reward", "eval"),
    ("charts/episodic_return", "train"),
    ("rollout/ep_rew_mean", "train"),
)
"""``(tag, score kind)`` read by default, first found per run wins: SB3 / RL Zoo ``EvalCallback``'s mean
evaluation return; CleanRL's return of each training episode; SB3's mean of the last 100 training episodes."""

TRAIN_NOTE = ("charts/episodic_return and rollout/ep_rew_mean are returns of training episodes (exploration "
              "included), not separate evaluations: score_kind = train")

CLEANRL_RUN = re.compile(r"^(?P<task>.+?)__(?P<algorithm>.+)__(?P<run>\d+)__(?P<time>\d+)$")
"""CleanRL's run name ``{env_id}__{exp_name}__{seed}__{int(time.time())}`` (also RL Zoo's with ``--track``)."""

READ_OPTIONS = {
    "budgets": "budgets to read each run at (default: every logged step)",
    "rule": "with budgets: resampling rule last (default) or linear",
    "max_staleness": "with budgets, rule last: how far before a budget the last point may be (default 5%)",
    "budget_unit": "unit of the step (default env_steps)",
}


def tag_list(options: dict, key: str = "tag") -> list[tuple[str, str]]:
    """``[(tag, score kind)]`` in order of preference: option ``key`` (comma-separated) or :data:`DEFAULT_TAGS`.

    A tag outside the defaults is ``eval`` when it starts with ``eval``, else ``train``, unless option
    ``score_kind`` says otherwise.
    """
    if options.get(key) is None:
        return list(DEFAULT_TAGS)
    given = options[key]
    tags = [str(t).strip() for t in (given.split(",") if isinstance(given, str) else given) if str(t).strip()]
    if not tags:
        raise InputError(f"--{key}: expected a name such as eval/mean_reward")
    kind = options.get("score_kind")
    if kind is not None and kind not in SCORE_KINDS:
        raise InputError(f"option 'score_kind' must be eval or train, got {kind!r}")
    known = dict(DEFAULT_TAGS)
    return [(t, kind or known.get(t) or ("eval" if t.startswith("eval") else "train")) for t in tags]


def compile_run_from(options: dict) -> re.Pattern | None:
    """Option ``run_from`` compiled (``None`` when absent)."""
    pattern = options.get("run_from")
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InputError(f"--run-from: {pattern!r} is not a regular expression ({exc})") from None


def apply_run_from(pattern: re.Pattern | None, text: str, ids: dict, where: str, what: str) -> dict:
    """``ids`` (algorithm, task, run) with the groups of ``pattern`` searched in ``text`` put over them;
    ``what`` names ``text`` in the message when it does not match ("this path", "the run name 'x'")."""
    if pattern is None:
        return ids
    m = pattern.search(text)
    if m is None:
        raise InputError(f"{where}: --run-from {pattern.pattern!r} does not match {what}")
    named = {k: v for k, v in m.groupdict().items() if v is not None}
    if not named and m.groups():
        named = {"run": m.group(1)}
    if not named:
        raise InputError(f"--run-from {pattern.pattern!r}: needs a group, e.g. 'seed(\\d+)' or '(?P<run>\\d+)'")
    return {**ids, **{k: v for k, v in named.items() if k in ("algorithm", "task", "run")}}


class Reader:
    """Reads runs' points as rows, every logged step or at option ``budgets`` (the rule of
    :mod:`rlaudit.importers.curves`), and keeps the notes of what it did."""

    def __init__(self, options: dict, where: str):
        from rlaudit.importers.curves import RULES

        self.budgets = opt_budgets(options, "budgets", where)
        self.rule = options.get("rule", "last")
        if self.rule not in RULES:
            raise InputError(f"{where}: option 'rule' must be one of {', '.join(RULES)}, got {self.rule!r}")
        self.staleness = opt_int(options, "max_staleness", None, where, minimum=0)
        self.missing: dict[int, list[str]] = {}
        self.n_averaged = 0
        self._origin: dict[tuple[str, str, str], str] = {}

    def claim(self, ids: tuple[str, str, str], where: str) -> None:
        """Record that run ``ids`` comes from ``where``; a second source of the same run is an error."""
        if ids in self._origin:
            raise InputError(f"{where}: run {'/'.join(ids)} also comes from {self._origin[ids]}; pass --run-from "
                             f"(or --algorithm / --task) to tell the runs apart")
        self._origin[ids] = where

    def rows(self, ids: tuple[str, str, str], steps: np.ndarray, values: np.ndarray, kind: str,
             where: str) -> pd.DataFrame:
        """One run's rows: ``steps`` (n,) and ``values`` (n,) in any order; values at one step are averaged.
        ``where`` names the run's source (file, column) for :meth:`claim`."""
        from rlaudit.importers.curves import resample

        self.claim(ids, where)

        grouped = pd.DataFrame({"step": steps, "value": values}).groupby("step", sort=True)["value"]
        self.n_averaged += int((grouped.size() > 1).sum())
        means = grouped.mean()
        steps, values = means.index.to_numpy(dtype=np.int64), means.to_numpy(dtype=np.float64)
        if self.budgets is not None:
            at = resample(steps, values, np.asarray(self.budgets, dtype=np.float64), self.rule, self.staleness)
            for b, v in zip(self.budgets, at):
                if not np.isfinite(v):
                    self.missing.setdefault(b, []).append("/".join(ids))
            keep = np.isfinite(at)
            steps, values = np.asarray(self.budgets, dtype=np.int64)[keep], at[keep]
        algo, task, run = ids
        return pd.DataFrame({"algorithm": algo, "task": task, "run": run, "budget": steps, "score": values,
                             "score_kind": kind})

    def notes(self, unit: str) -> list[str]:
        """What the reading did, for ``meta.notes``."""
        from rlaudit.importers.curves import resample_rule_note

        out = []
        if self.n_averaged:
            out.append(f"{self.n_averaged} step(s) logged several values (episodes ending at the same step): averaged")
        if self.budgets is not None:
            out.append(resample_rule_note(self.rule, self.staleness, unit))
            for b, runs in sorted(self.missing.items()):
                out.append(f"budget {b}: no point for {len(runs)} run(s) ({', '.join(runs[:5])}"
                           f"{', …' if len(runs) > 5 else ''}); left out")
        return out


def finish(parts: list[pd.DataFrame], where: str) -> tuple[pd.DataFrame, str]:
    """Concatenate runs' rows; drop the per-row ``score_kind`` when all agree. Returns (frame, table kind)."""
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if frame.empty:
        raise InputError(f"{where}: no run has a point at the requested budgets")
    kinds = set(frame["score_kind"])
    if len(kinds) == 1:
        frame = frame.drop(columns="score_kind")
    return frame, "eval" if kinds == {"eval"} else "train"
