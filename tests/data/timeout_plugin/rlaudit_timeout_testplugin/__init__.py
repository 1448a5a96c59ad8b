"""A test plugin for tests/test_robustness_validate.py: a learner whose ``learn()`` never returns for seed 0.

Learner protocol (see ``rlaudit.algorithms.adapter``), plain Python: seeds other than 0 take random actions
and return at once, so a sweep has one stuck run and one that finishes.
"""

from __future__ import annotations

import time


class SleepyLearner:
    """Sleeps in ``learn()`` for seed 0 (a learner that never returns); random actions otherwise.

    Args:
        env: a gymnasium env with a Discrete action space.
        seed: 0 sleeps; any other seed trains (does nothing) and returns.
        sleep_s: how long seed 0 sleeps (an hour: "never" for a test).
    """

    rlaudit_action_spaces = ("discrete",)

    def __init__(self, env, *, seed: int, sleep_s: float = 3600.0):
        self.env = env
        self.seed = seed
        self.sleep_s = sleep_s

    def learn(self, total_timesteps: int, callback=None) -> "SleepyLearner":
        if self.seed == 0:
            time.sleep(self.sleep_s)
        for steps in range(1, total_timesteps + 1):
            if callback is not None and callback(steps) is False:
                break
        return self

    def predict(self, obs, deterministic: bool = True) -> int:
        return 0

    def get_params(self) -> dict:
        return {"sleep_s": self.sleep_s}
