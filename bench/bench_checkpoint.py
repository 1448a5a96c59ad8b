"""What a mid-run checkpoint costs (rlaudit.run.checkpoint): size on disk, save and load seconds, and the share of
training time that checkpoints every ``--every`` seconds take.

The flagship's settings (``protocols/dqn-family-minatar.toml``) for one algorithm and game, with its replay buffer
full: ``--fill`` transitions of a uniformly random policy are added first (MinAtar's sparse 0/1 frames compress
much as a trained agent's do). Then one checkpoint is saved and loaded ``--repeats`` times.

    python bench/bench_checkpoint.py                                   # Dopamine's Rainbow on Seaquest (10 channels)
    python bench/bench_checkpoint.py --algorithm IQN --game MinAtar/Breakout-v1

Prints one line: size, median save and load wall / CPU seconds, and the overhead ratio save / every.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default=str(REPO / "protocols" / "dqn-family-minatar.toml"))
    ap.add_argument("--algorithm", default="Rainbow (Dopamine)", help="the algorithm entry's label")
    ap.add_argument("--game", default="MinAtar/Seaquest-v1")
    ap.add_argument("--fill", type=int, default=None, help="transitions added first (default: the buffer's size)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--every", type=float, default=600.0, help="seconds between checkpoints, for the overhead ratio")
    args = ap.parse_args(argv)

    import numpy as np

    from rlaudit.algorithms import make_agent
    from rlaudit.protocol import load_protocol, plan
    from rlaudit.run.checkpoint import Checkpoints, random_states
    from rlaudit.run.envs import make_env
    from rlaudit.run.runner import make_eval_envs, set_single_thread

    set_single_thread()
    specs = [s for s in plan(load_protocol(args.protocol)).runs
             if s.task.id == args.game and s.algorithm.label == args.algorithm]
    if not specs:
        print(f"error: {args.protocol} has no run of {args.algorithm!r} on {args.game!r}", file=sys.stderr)
        return 2
    spec = specs[0]
    env = make_env(spec.task, spec.seed)
    agent = make_agent(spec.algorithm.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                       policy_kwargs=spec.algorithm.policy_kwargs_dict or None)
    buffer = agent.model.replay_buffer
    fill = buffer.buffer_size if args.fill is None else args.fill
    play = make_env(spec.task, spec.seed + 1)
    obs, _ = play.reset(seed=spec.seed + 1)
    for _ in range(fill):
        action = play.action_space.sample()
        nxt, reward, terminated, truncated, _ = play.step(action)
        buffer.add(obs[None], nxt[None], np.array([action]), np.array([reward]), np.array([terminated]), [{}])
        obs = play.reset()[0] if terminated or truncated else nxt
    eval_envs = make_eval_envs(spec.task, spec.eval.eval_seed, spec.eval.n_eval_episodes, True)
    state = {"env": env, "agent": agent, "eval_envs": eval_envs, "random": random_states(), "env_steps": fill,
             "evaluations": [], "wall_s": 0.0, "cpu_s": 0.0}
    saves, loads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = Checkpoints(Path(tmp), args.every)
        for _ in range(args.repeats):
            t, c = time.perf_counter(), time.process_time()
            checkpoints.save(spec, state)
            saves.append((time.perf_counter() - t, time.process_time() - c))
            t, c = time.perf_counter(), time.process_time()
            assert checkpoints.load(spec) is not None
            loads.append((time.perf_counter() - t, time.process_time() - c))
        size = checkpoints.path(spec).stat().st_size
    save_wall = statistics.median(s[0] for s in saves)
    print(f"{spec.run_id}: buffer {fill:,} of {buffer.buffer_size:,} transitions, observations "
          f"{buffer.observations.shape[1:]} {buffer.observations.dtype}; checkpoint {size / 1e6:.1f} MB; "
          f"save {save_wall:.2f} s wall / {statistics.median(s[1] for s in saves):.2f} s CPU, load "
          f"{statistics.median(s[0] for s in loads):.2f} s / {statistics.median(s[1] for s in loads):.2f} s; "
          f"every {args.every:g} s: overhead ratio {save_wall / args.every:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
