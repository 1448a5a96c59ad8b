"""Subnormal floats in a checkpointed run's optimiser state, and what they cost its updates.

Loads a run's checkpoint (``rlaudit run`` writes one every 10 minutes of a run: ``<store>.checkpoints/*.ckpt``),
counts the subnormal values (non-zero, below float32's smallest normal 1.18e-38) in the network's parameters
and in Adam's first and second moments, the features that are zero on every replayed frame sampled, and the
share of each moment's subnormal values that sit on those features; then times the agent's update
(``train(gradient_steps=N)`` on copies of the agent, CPU time, one thread) with subnormals kept, as training
does, and flushed to zero (``torch.set_flush_denormal(True)``), alternating, and prints the ratio.

Why: the flagship's C51 and QR-DQN runs on MinAtar Freeway cost more CPU time than their other games'
(1.3-2x) and slow as they train. Many of the 1,600 features are never non-zero on Freeway's frames, so the
gradient of the head's weights on them is exactly 0 and Adam's moments decay into the subnormal range, where
every arithmetic operation on them takes the CPU's slow path. A 306-row distributional head (6 actions x 51
atoms) has 51x more such weights than DQN's. Flushing them would change the numbers of every later step, so
recorded sweeps keep them (protocols/dqn-family-minatar.toml, RECORDING).

    python bench/bench_subnormals.py                     # every checkpoint committed with the sweeps
    python bench/bench_subnormals.py PATH.ckpt --updates 200 --repeats 2

Exit status 0 with a note when there is no checkpoint to probe; 2 on a file that is not a readable checkpoint.
"""

from __future__ import annotations

import copy
import pickle
import sys
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class BadCheckpoint(Exception):
    """A file that is not a checkpoint this bench can probe."""


def _subnormals(t):
    """Boolean mask of a tensor's subnormal values (non-zero, below its dtype's smallest normal number)."""
    import torch

    t = t.detach()
    return (t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)


def _update_ms(model, flush: bool, updates: int) -> float:
    """CPU milliseconds per update of a copy of ``model``, subnormals flushed or kept."""
    import torch

    trial = copy.deepcopy(model)
    torch.set_flush_denormal(flush)
    try:
        trial.train(gradient_steps=10, batch_size=trial.batch_size)  # warm the allocator and the kernels
        start = time.process_time()
        trial.train(gradient_steps=updates, batch_size=trial.batch_size)
        return (time.process_time() - start) / updates * 1000
    finally:
        torch.set_flush_denormal(False)


def probe(path: Path, updates: int, repeats: int) -> None:
    import numpy as np
    import torch

    try:
        state = pickle.loads(zlib.decompress(path.read_bytes()))["state"]
        model = state["agent"].model
        model.policy.optimizer  # noqa: B018 - an SB3 model with an optimiser, or not a checkpoint we can probe
    except Exception as exc:  # noqa: BLE001 - any unreadable file is one bad input
        raise BadCheckpoint(f"{path}: not a readable SB3 run checkpoint ({type(exc).__name__}: {exc})") from None
    print(f"{path.name}: {type(model).__name__} at {state['env_steps']:,} env steps")
    n_sub = sum(int(_subnormals(p).sum()) for p in model.policy.parameters())
    print(f"  parameters: {n_sub:,} subnormal")
    frames = model.replay_buffer.observations[: model.replay_buffer.size()]
    frames = np.asarray(frames[:: max(1, len(frames) // 2000), 0][:2000])
    net = getattr(model.policy, "quantile_net", None) or getattr(model.policy, "q_net", None)
    dead = None
    if net is not None and hasattr(net, "features_extractor"):
        with torch.no_grad():
            features = net.features_extractor(torch.as_tensor(frames).float())
        dead = features.abs().sum(0) == 0
        print(f"  features never non-zero on {len(frames):,} replayed frames: {int(dead.sum()):,} of "
              f"{features.shape[1]:,}")
    for param, moments in model.policy.optimizer.state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            if key not in moments:
                continue
            mask = _subnormals(moments[key])
            n, size = int(mask.sum()), mask.numel()
            if not n:
                continue
            where = ""
            if dead is not None and dead.any() and mask.ndim == 2 and mask.shape[1] == dead.numel():
                where = f"; {int(mask[:, dead].sum()) / n:.0%} of them on those features"
            print(f"  Adam {key} of {tuple(param.shape)}: {n:,} of {size:,} subnormal ({n / size:.0%}){where}")
    torch.set_num_threads(1)
    kept, flushed = [], []
    for _ in range(repeats):
        kept.append(_update_ms(model, False, updates))
        flushed.append(_update_ms(model, True, updates))
    k, f = sorted(kept)[len(kept) // 2], sorted(flushed)[len(flushed) // 2]
    print(f"  update: {k:.2f} ms kept, {f:.2f} ms flushed to zero (median of {repeats} x {updates} updates, CPU "
          f"time); ratio {k / f:.2f}")


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    from rlaudit.errors import OneLineArgumentParser

    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="*", help="checkpoint files (default: sweeps/*/store.sqlite.checkpoints/)")
    ap.add_argument("--updates", type=int, default=200, help="updates timed per measurement (default 200)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating measurements of each (default 3)")
    args = ap.parse_args(argv)
    if args.updates < 1 or args.repeats < 1:
        print("error: --updates and --repeats must be at least 1", file=sys.stderr)
        return 2
    paths = [Path(p) for p in args.checkpoints] or sorted(REPO.glob("sweeps/*/store.sqlite.checkpoints/*.ckpt"))
    if not paths:
        print("no checkpoint to probe: none is committed with the sweeps now (a run's checkpoint is deleted when it "
              "finishes); pass one, e.g. from a 'rlaudit run' stopped part-way")
        return 0
    for path in paths:
        if not path.is_file():
            print(f"error: {path}: no such checkpoint file", file=sys.stderr)
            return 2
    try:
        for path in paths:
            probe(path, args.updates, args.repeats)
    except BadCheckpoint as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
