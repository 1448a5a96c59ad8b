"""Run stage: plan a protocol into runs, train and evaluate them, stream the records to the driver.

- :mod:`rlaudit.run.spec`: frozen, picklable :class:`RunSpec` / :class:`EvalRecord` / :class:`RunResult`.
- :mod:`rlaudit.run.envs`: environments per suite (gymnasium, atari, minatar).
- :mod:`rlaudit.run.runner`: :func:`execute_run`, the pure run function (no store access).
- :mod:`rlaudit.run.executors`: the executor interface and the local process pool.
- :mod:`rlaudit.run.driver`: the driver — the store writer, resume, progress, summary.
"""
