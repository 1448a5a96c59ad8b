"""When does each implementation update, sync its target and with which epsilon does it act? The training loop's
schedule of a built-in against Dopamine's agent, counted in env steps (what the update check leaves out).

    python scripts/fidelity_schedule.py [ALGORITHM] [STEPS]     # default DQN, 3000 (the fidelity protocol's entry)

The built-in (SB3) trains through rlaudit's adapter with ``train`` and ``polyak_update`` wrapped; Dopamine's agent
through the fidelity harness (its own interpreter) with its module's ``train``, ``_sync_weights`` and
``select_action`` wrapped. Both record the env steps done when each gradient update and target sync happens, and
the epsilon each training action was drawn with (Dopamine's: its ``epsilon_fn`` at the ``training_steps`` it was
given). Prints the counts, the first few of each, the first difference after the first update, and the largest
epsilon difference; exit 0 when the schedules are equivalent (the same updates, the same target syncs once
anything has been learned, epsilon within 1e-5).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PROTOCOL = REPO / "protocols" / "fidelity" / "minatar-100k.toml"

REFERENCE_SIDE = r"""
import json, sys
from rlaudit.protocol import load_protocol, plan
from rlaudit.fidelity import dopamine_backend as db
from rlaudit.run.envs import make_env
from dopamine.jax.agents.dqn import dqn_agent
from dopamine.jax.agents.rainbow import rainbow_agent
from dopamine.jax.agents.quantile import quantile_agent
from dopamine.jax.agents.implicit_quantile import implicit_quantile_agent

label, steps = sys.argv[1], int(sys.argv[2])
spec = plan(load_protocol(sys.argv[3])).select({"algo": [label], "task": ["MinAtar/Breakout-v1"]})[0]
ref = db.DopamineAgent(spec, make_env(spec.task, spec.seed))
agent = ref.agent
import inspect
name = type(agent).__name__
module = {"JaxDQNAgent": dqn_agent, "JaxRainbowAgent": rainbow_agent, "JaxQuantileAgent": quantile_agent,
          "JaxImplicitQuantileAgent": implicit_quantile_agent}[name]
acting = {"JaxQuantileAgent": dqn_agent}.get(name, module)  # QR-DQN acts through JaxDQNAgent.step
now = {"t": 0}
updates, syncs, eps = [], [], []
train, select = module.train, acting.select_action
def wrapped_train(*a, **k):
    updates.append(now["t"])
    return train(*a, **k)
def wrapped_select(*a, **k):
    b = inspect.signature(select).bind(*a, **k).arguments
    eps.append([now["t"], float(b["epsilon_fn"](b["epsilon_decay_period"], b["training_steps"],
                                                 b["min_replay_history"], b["epsilon_train"]))])
    return select(*a, **k)
module.train, acting.select_action = wrapped_train, wrapped_select
sync = agent._sync_weights
agent._sync_weights = lambda: (syncs.append(now["t"]), sync())[1]
def on_step(t):
    now["t"] = t
ref.train(steps, on_step=on_step)
print("SCHEDULE " + json.dumps({"updates": updates, "syncs": syncs, "eps": eps}))
"""


def builtin(label: str, steps: int) -> dict:
    import sb3_contrib.qrdqn.qrdqn as sb3_qrdqn
    import stable_baselines3.dqn.dqn as sb3_dqn

    from rlaudit.algorithms import make_agent
    from rlaudit.protocol import load_protocol, plan
    from rlaudit.run.envs import make_env

    spec = plan(load_protocol(PROTOCOL)).select({"algo": [label], "task": ["MinAtar/Breakout-v1"]})[0]
    env = make_env(spec.task, spec.seed)
    agent = make_agent(spec.algorithm.name, env, spec.algorithm.hyperparams_dict, spec.seed,
                       spec.algorithm.policy_kwargs_dict or None)
    model = agent.model
    updates, syncs, eps = [], [], []
    train = model.train
    model.train = lambda *a, **k: (updates.append(int(model.num_timesteps)), train(*a, **k))[1]
    polyak = sb3_dqn.polyak_update
    modules = [sb3_dqn, sb3_qrdqn]  # each class's _on_step calls its own module's polyak_update

    def wrapped_polyak(*a, **k):
        if not syncs or syncs[-1] != model.num_timesteps:  # called once for the weights, once for batch norms
            syncs.append(int(model.num_timesteps))
        return polyak(*a, **k)

    for m in modules:
        m.polyak_update = wrapped_polyak
    sample = model._sample_action

    def wrapped_sample(learning_starts, *a, **k):
        warm = model.num_timesteps < learning_starts
        eps.append([int(model.num_timesteps), 1.0 if warm else float(model.exploration_rate)])
        return sample(learning_starts, *a, **k)

    model._sample_action = wrapped_sample
    try:
        agent.train(steps)
    finally:
        for m in modules:
            m.polyak_update = polyak
    return {"updates": updates, "syncs": syncs, "eps": eps}


def reference(label: str, steps: int) -> dict:
    from rlaudit.fidelity.references import get_reference, worker_environment

    ref = get_reference("dopamine")
    out = subprocess.run([ref.python(), "-c", REFERENCE_SIDE, label, str(steps), str(PROTOCOL)], capture_output=True,
                         text=True, env=worker_environment(), timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"error: the reference side failed: {out.stderr.strip().splitlines()[-1]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("SCHEDULE "))
    return json.loads(line[len("SCHEDULE "):])


def first_difference(a: list, b: list, close=lambda x, y: x == y) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if not close(x, y):
            return f"item {i}: built-in {x}, Dopamine {y}"
    return "none" if len(a) == len(b) else f"lengths {len(a)} and {len(b)}"


def main() -> int:
    from rlaudit.protocol import load_protocol

    label = sys.argv[1] if len(sys.argv) > 1 else "DQN"
    labels = [a.label for a in load_protocol(PROTOCOL).algorithms]
    if label not in labels:
        print(f"error: {label!r} is not an algorithm of {PROTOCOL.name}; choose from {', '.join(labels)}",
              file=sys.stderr)
        return 2
    text = sys.argv[2] if len(sys.argv) > 2 else "3000"
    if not text.isdigit() or int(text) < 1:
        print(f"error: STEPS must be a positive integer, got {text!r}", file=sys.stderr)
        return 2
    steps = int(text)
    ours, theirs = builtin(label, steps), reference(label, steps)
    diff = first_difference(ours["updates"], theirs["updates"])
    print(f"updates: built-in {len(ours['updates'])} (first {ours['updates'][:3]}), Dopamine {len(theirs['updates'])} "
          f"(first {theirs['updates'][:3]}); first difference: {diff}")
    same = diff == "none"
    first = min(ours["updates"] + theirs["updates"], default=steps)
    # a sync before the first update copies an untrained network onto its identical copy: it changes nothing
    late = [[t for t in x["syncs"] if t > first] for x in (ours, theirs)]
    diff = first_difference(*late)
    print(f"target syncs: built-in at {ours['syncs'][:4]}..., Dopamine at {theirs['syncs'][:4]}...; after the first "
          f"update (step {first}): first difference: {diff}")
    same &= diff == "none"
    theirs_eps = dict((t, e) for t, e in theirs["eps"])
    gaps = [abs(e - theirs_eps[t]) for t, e in ours["eps"] if t in theirs_eps]
    print(f"epsilon of each training action: {len(gaps)} actions at the same env step; largest difference "
          f"{max(gaps):.2e} (built-in {ours['eps'][-1][1]:.6f}, Dopamine {theirs_eps[ours['eps'][-1][0]]:.6f} at "
          f"step {ours['eps'][-1][0]})")
    same &= len(gaps) == len(ours["eps"]) and max(gaps) < 1e-5
    print("equivalent schedules (the differences above change nothing or less than 1e-5 in epsilon)" if same
          else "DIFFERENT schedules")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
