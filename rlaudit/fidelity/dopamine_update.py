"""Dopamine's own training step on given parameters and batches (runs in the reference interpreter only).

``python -m rlaudit.fidelity.dopamine_update IN.npz OUT.npz [IN.npz OUT.npz ...]``: the other half of
:mod:`rlaudit.fidelity.update_check`. ``IN.npz`` holds the run's spec (``spec``, RunSpec JSON), the online and
target parameters in the flax layout of :mod:`rlaudit.fidelity.dopamine_backend` (``online/Conv_0/kernel``, …,
``target/…``) and ``n`` batches (``states_k`` ``(32, 10, 10, C)``, ``actions_k``, ``rewards_k``,
``next_states_k``, ``terminals_k``, ``probabilities_k`` for prioritized replay). The harness builds the agent
exactly as for a reference run (:class:`~rlaudit.fidelity.dopamine_backend.DopamineAgent`), loads the parameters
and calls the agent's own ``_train_step`` with its replay sample replaced by each batch in turn: Dopamine's
targets, losses, importance weights, priorities and optimiser, unchanged. Written to ``OUT.npz``:

- ``grad/<layer>/<name>``: the gradient of the first batch's loss (the step taken with ``optax.sgd(1.0)`` in
  place of the agent's Adam, from the same parameters: ``online - new``);
- ``adam_k/<layer>/<name>``: the online parameters after ``k + 1`` steps of the agent's own optimiser;
- ``priorities_k``: the priorities the agent gave its replay after step ``k`` (prioritized replay only).
"""

from __future__ import annotations

import sys

import numpy as np


def _tree(arrays: dict, prefix: str) -> dict:
    params: dict = {}
    for key, value in arrays.items():
        if key.startswith(prefix + "/"):
            layer, name = key[len(prefix) + 1:].split("/")
            params.setdefault(layer, {})[name] = np.asarray(value)
    return {"params": params}


def _flat(params, prefix: str) -> dict:
    return {f"{prefix}/{layer}/{name}": np.asarray(v) for layer, d in params["params"].items() for name, v in d.items()}


def main(argv: list[str]) -> int:
    """``IN OUT [IN OUT ...]``: one check per pair, in one interpreter (its imports take half a minute)."""
    for inp, out in zip(argv[0::2], argv[1::2], strict=True):
        np.savez(out, **_steps(dict(np.load(inp))))
    return 0


def _steps(data: dict) -> dict:
    import optax

    from rlaudit.fidelity.dopamine_backend import DopamineAgent
    from rlaudit.run.envs import make_env
    from rlaudit.run.spec import RunSpec

    spec = RunSpec.from_json(str(data.pop("spec")))
    n_batches = int(data.pop("n"))
    ref = DopamineAgent(spec, make_env(spec.task, spec.seed))
    agent = ref.agent
    online, target = _tree(data, "online"), _tree(data, "target")
    prioritized = getattr(agent, "_replay_scheme", "uniform") == "prioritized"
    captured: list = []

    iqn = hasattr(agent, "num_tau_prime_samples")
    start_rng = getattr(agent, "_rng", None)

    def levels(rng) -> tuple[np.ndarray, np.ndarray]:
        """IQN's quantile levels in ``train(rng)``, as dopamine-rl 4.1.2 draws them (the target's ``N'`` values
        and ``K`` argmax levels per sample, then the online network's ``N``), in the built-in's layout: ``(batch,
        N' + K)`` and ``(batch, N)``."""
        import jax

        b = len(data["actions_0"])
        rng, target_rng = jax.random.split(rng, num=2)
        nxt = []
        for key in jax.random.split(target_rng, num=b):
            _, rng1, rng2 = jax.random.split(key, num=3)
            nxt.append(np.concatenate([np.asarray(jax.random.uniform(rng2, shape=[agent.num_tau_prime_samples, 1])),
                                       np.asarray(jax.random.uniform(rng1, shape=[agent.num_quantile_samples, 1]))])[:, 0])
        _, rng_input = jax.random.split(rng)
        cur = [np.asarray(jax.random.uniform(key, shape=[agent.num_tau_samples, 1]))[:, 0]
               for key in jax.random.split(rng_input, num=b)]
        return np.stack(nxt), np.stack(cur)

    def step(k: int) -> None:
        if iqn:
            out[f"levels_next_{k}"], out[f"levels_cur_{k}"] = levels(agent._rng)
        elements = {"state": data[f"states_{k}"][..., None], "next_state": data[f"next_states_{k}"][..., None],
                    "action": data[f"actions_{k}"], "reward": data[f"rewards_{k}"], "terminal": data[f"terminals_{k}"]}
        if prioritized:
            elements["indices"] = np.arange(len(elements["action"]))
            elements["sampling_probabilities"] = data[f"probabilities_{k}"]
        agent._sample_from_replay_buffer = lambda: setattr(agent, "replay_elements", elements)
        agent._replay.add_count = agent.min_replay_history + 1
        agent.training_steps = agent.update_period  # an update step, not a target-sync step
        agent._train_step()

    if prioritized:
        agent._replay.update = lambda keys, priorities: captured.append(np.asarray(priorities))
    out: dict = {}
    adam = agent.optimizer
    agent.optimizer = optax.sgd(1.0)
    agent.optimizer_state = agent.optimizer.init(online)
    agent.online_params, agent.target_network_params = online, target
    step(0)
    new = _flat(agent.online_params, "grad")
    out.update({k: np.asarray(_flat(online, "grad")[k]) - v for k, v in new.items()})
    captured.clear()
    agent.optimizer = adam
    agent.optimizer_state = adam.init(online)
    agent.online_params, agent.target_network_params = online, target
    if iqn:  # the Adam steps draw the levels the gradient step drew
        agent._rng = start_rng
    for k in range(n_batches):
        step(k)
        out.update(_flat(agent.online_params, f"adam_{k}"))
        if prioritized:
            out[f"priorities_{k}"] = captured[-1]
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
