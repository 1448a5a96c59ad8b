"""Wall time of each DQN-family built-in against stable-baselines3's plain DQN, same env and budget.

MinAtar (rlaudit's environment: uint8 0/1 observations; MLP policy, one CPU thread), the hyperparameters of
``protocols/dqn-family-minatar-250k.toml`` except the budget. Each variant is timed ``--repeats`` times,
interleaved with the others so that machine load hits all alike; the median is reported with its ratio to
SB3's DQN. Targets: PrioritizedDQN <= 1.5x, DoubleDQN and DuelingDQN <= 1.1x (issue 6); C51 <= 1.5x,
IQN <= 2x, Rainbow <= 2.5x (issue 11). ``--only`` times a subset (labels, comma-separated; SB3's DQN is
always included as the baseline).

    python bench/bench_dqn_family.py            # 10k steps, 3 repeats, Breakout
    python bench/bench_dqn_family.py --quick    # 2k steps, 1 repeat (smoke)

Run it on a quiet machine: the ratios are what matters, and other processes distort them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tomllib
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "protocols" / "dqn-family-minatar-250k.toml"

VARIANTS: list[tuple[str, str, dict]] = [
    ("DQN (SB3)", "DQN", {}),
    ("DQNFamily, all off", "DQNFamily", {}),
    ("DoubleDQN", "DoubleDQN", {}),
    ("DuelingDQN", "DuelingDQN", {}),
    ("PrioritizedDQN", "PrioritizedDQN", {}),
    ("Double+Dueling+PER", "DQNFamily", {"double": True, "dueling": True, "prioritized": True}),
    ("QRDQN 50 quantiles", "QRDQN", {"n_quantiles": 50}),
    ("QRDQN 200 quantiles", "QRDQN", {"n_quantiles": 200}),
    ("C51", "C51", {}),
    ("IQN", "IQN", {}),
    ("IQN N=N'=8", "IQN", {"n_tau": 8, "n_tau_target": 8}),
    ("IQN N=N'=8 merge-last", "IQN", {"n_tau": 8, "n_tau_target": 8, "iqn_post_layers": 0}),
    ("IQN merge-last", "IQN", {"iqn_post_layers": 0}),
    ("NoisyDQN", "NoisyDQN", {}),
    ("Rainbow", "Rainbow", {}),
    ("DopamineRainbow", "DopamineRainbow", {}),
]
# Issue 6 (Double, Dueling, PER) and issue 11 (C51, IQN, Rainbow) targets on wall time.
# IQN's target is checked at the paper's settings ("IQN") and at the flagship protocol's ("... merge-last").
TARGETS = {"DoubleDQN": 1.1, "DuelingDQN": 1.1, "PrioritizedDQN": 1.5, "C51": 1.5, "IQN": 2.0,
           "IQN N=N'=8 merge-last": 2.0, "Rainbow": 2.5}


def protocol_hyperparams() -> dict:
    """The DQN entry's hyperparameters from the MinAtar protocol (shared by the whole family there)."""
    doc = tomllib.loads(PROTOCOL.read_text())
    dqn = next(a for a in doc["algorithms"] if a["name"] == "DQN")
    return dict(dqn.get("hyperparams", {})), dict(dqn.get("policy_kwargs", {}))


def time_one(name: str, extra: dict, game: str, budget: int, hp: dict, policy_kwargs: dict) -> tuple[float, float]:
    """Train one agent; return (wall seconds, CPU seconds of this process) of the ``train`` call."""
    from rlaudit.algorithms import make_agent
    from rlaudit.run.envs import make_env
    from rlaudit.run.spec import TaskSpec

    env = make_env(TaskSpec(f"MinAtar/{game}-v1", "minatar"), seed=0)  # what `rlaudit run` trains on
    agent = make_agent(name, env, {**hp, **extra}, seed=0, policy_kwargs=policy_kwargs)
    start, cpu = time.perf_counter(), time.process_time()
    agent.train(budget)
    return time.perf_counter() - start, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2k steps, 1 repeat")
    parser.add_argument("--steps", type=int, default=None, help="training budget per run (default 10000)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per variant (default 3)")
    parser.add_argument("--game", default="Breakout", help="MinAtar game (default Breakout)")
    parser.add_argument("--only", default=None, help="comma-separated variant labels to time (plus the baseline)")
    args = parser.parse_args(argv)
    variants = VARIANTS
    if args.only:
        wanted = {w.strip() for w in args.only.split(",")}
        unknown = wanted - {label for label, _, _ in VARIANTS}
        if unknown:
            parser.error(f"unknown variant(s) {sorted(unknown)}; choose from {[v[0] for v in VARIANTS]}")
        variants = [v for v in VARIANTS if v[0] == "DQN (SB3)" or v[0] in wanted]
    steps = args.steps or (2_000 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 3)

    import torch

    torch.set_num_threads(1)
    hp, policy_kwargs = protocol_hyperparams()
    # learning_starts shrinks with the budget so that most of each timed run trains.
    hp["learning_starts"] = min(hp.get("learning_starts", 1_000), steps // 10)
    print(f"MinAtar/{args.game}-v1, MLP {policy_kwargs.get('net_arch')}, {steps:,} steps, {repeats} repeat(s), "
          f"1 torch thread; hyperparameters from {PROTOCOL.relative_to(REPO)}")
    wall: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    for r in range(repeats):
        for label, name, extra in variants:
            w, c = time_one(name, extra, args.game, steps, hp, policy_kwargs)
            wall[label].append(w)
            cpu[label].append(c)
            print(f"  repeat {r + 1}: {label:<24} wall {w:7.2f} s  cpu {c:7.2f} s", file=sys.stderr, flush=True)
    base_wall = statistics.median(wall["DQN (SB3)"])
    base_cpu = statistics.median(cpu["DQN (SB3)"])
    # CPU time is the fairer figure on a shared machine (one torch thread: CPU time ~ work done);
    # wall time is what a user waits for on a quiet one. The targets are checked on wall time.
    print(f"{'variant':<24} {'wall s':>8} {'steps/s':>8} {'ratio':>6} {'cpu s':>8} {'ratio':>6}  target (wall)")
    failed = []
    for label, name, _ in variants:
        w, c = statistics.median(wall[label]), statistics.median(cpu[label])
        ratio = w / base_wall
        target = TARGETS.get(label)
        verdict = "" if target is None else (f"<= {target}x ok" if ratio <= target else f"<= {target}x MISSED")
        if target is not None and ratio > target:
            failed.append(label)
        print(f"{label:<24} {w:8.2f} {steps / w:8.0f} {ratio:6.2f} {c:8.2f} {c / base_cpu:6.2f}  {verdict}")
    if failed:
        print(f"targets missed: {', '.join(failed)} (rerun on a quiet machine before concluding)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
