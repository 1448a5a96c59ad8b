"""Mid-run checkpoints: a run killed part-way resumes from its last checkpoint with the numbers of a run never killed.

Some runs outlast a sitting: a 1M-step IQN run on MinAtar takes 3-4 CPU-hours here, and a driver stopped at the
end of a sitting used to restart every unfinished run from scratch. With checkpoints on (``rlaudit run``'s
``--checkpoint-every``, on by default for the local executor) a run saves its whole state every so often, and a
later ``rlaudit run`` on the same store takes it up where the checkpoint left it.

**When.** At an update boundary of SB3's off-policy loop (the start of a rollout: the last transition stored,
the last gradient step taken), the first boundary after ``every`` seconds of the run's wall time.

**What.** The agent (network, target network, optimiser, replay buffer, exploration counters, the training
environment mid-episode), the evaluation environments (MinAtar remembers its last action across episodes),
the global torch / NumPy / ``random`` states, the evaluations made so far and the wall and CPU seconds spent.
Resumed, the run re-enters ``learn`` with ``reset_num_timesteps=False`` and the steps left, so its schedules
(ε decay) and every later number are those of the uninterrupted run, bit for bit on the same machine and
build (tested for the DQN-family built-ins and SAC, and through ``rlaudit run`` killed with SIGKILL). The seconds a
resumed run records are those of its checkpointed work: what a killed attempt did after its last checkpoint is
done again and counted once.

**Which runs.** SB3 off-policy algorithms without gSDE (the DQN family; SAC, TD3 and DDPG without
``use_sde``), whose ``learn`` can be re-entered at a rollout boundary without changing a number. Others
(on-policy algorithms, whose ``learn`` keeps its iteration count in a local; learner plugins; JAX batches)
restart from scratch as before.

**Validity.** A checkpoint is used only by the run it was written for (its spec, the protocol's hash aside) with
the same Python, torch, NumPy, gymnasium, stable-baselines3, sb3-contrib and rlaudit training code (a hash of the
code of the modules that build and train a run, comments and docstrings aside); any other checkpoint is ignored and
overwritten. By default it is also used only on the machine that wrote it (the fingerprint a store records: CPU
model and flags, torch and NumPy builds), so that every recorded run is bit-reproducible where its store says it
was trained; a run moved to another CPU restarts from scratch. With ``portable`` (``rlaudit run
--resume-on-any-machine``) a checkpoint written on another machine is resumed too, for sweeps whose runs outlast
the machine they start on: the run then records every machine it trained on (``runs.machine`` names them in
order), its numbers are those of neither machine's uninterrupted run, and a replay compares it as a
distribution, not bit for bit (``scripts/replay_run.py``). A checkpoint is deleted when its run finishes or fails
(a failure is retried from scratch), and kept when the run is killed or interrupted.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import hashlib
import io
import json
import os
import random
import re
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlaudit.run.spec import RunSpec

DEFAULT_EVERY_S = 600.0
"""Seconds of a run's wall time between checkpoints unless ``--checkpoint-every`` says otherwise."""

SUFFIX = ".checkpoints"
"""The checkpoint folder of a store is the store's path with this added (``store.sqlite.checkpoints/``)."""

_TRAINING_CODE = ("algorithms", "run/runner.py", "run/envs.py", "run/checkpoint.py")
"""rlaudit's modules (under the package) whose code a checkpoint's numbers depend on."""


def checkpoint_dir(store_path: str | os.PathLike) -> Path:
    """Where the runs of the store at ``store_path`` keep their checkpoints."""
    return Path(f"{os.fspath(store_path)}{SUFFIX}")


def checkpointable(agent) -> bool:
    """Whether ``agent``'s training can be checkpointed and resumed with unchanged numbers (see the module)."""
    if getattr(agent, "kind", None) != "sb3":
        return False
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    model = getattr(agent, "model", None)
    return isinstance(model, OffPolicyAlgorithm) and not getattr(model, "use_sde", False)


def _fingerprint(spec: RunSpec) -> str:
    """What a checkpoint must match on any machine: the run (protocol hash aside: a header comment changes it), the
    libraries and the training code."""
    run = json.loads(spec.to_json())
    run.pop("protocol_hash", None)
    return hashlib.sha256((json.dumps(run, sort_keys=True) + _code_hash()).encode()).hexdigest()


@functools.cache
def this_machine() -> str:
    """This machine's fingerprint (:func:`rlaudit.run.machine.machine_fingerprint`) as the canonical JSON text a
    store records in its ``meta``."""
    from rlaudit.run.machine import machine_fingerprint

    return json.dumps(machine_fingerprint(), sort_keys=True)


def _source_digest() -> str:
    """rlaudit's training code (its syntax tree without docstrings: a comment or a docstring does not change a
    number)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for name in _TRAINING_CODE:
        path = root / name
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(_code_of(f.read_text()).encode())
    return h.hexdigest()


@functools.cache
def _code_hash() -> str:
    """The libraries' versions and rlaudit's training code as this process imported it."""
    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch

    h = hashlib.sha256()
    for part in (sys.version, torch.__version__, np.__version__, gymnasium.__version__,
                 stable_baselines3.__version__, sb3_contrib.__version__, _SOURCE_DIGEST):
        h.update(part.encode())
    return h.hexdigest()


def _code_of(source: str) -> str:
    """``source``'s syntax tree without docstrings, as text."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


_SOURCE_DIGEST = _source_digest()
"""Read when this module is imported, not at the first save: a file edited while a driver runs (hours) must not
give its runs' checkpoints the edited code's fingerprint."""


@dataclass(frozen=True)
class Checkpoints:
    """Checkpointing of the runs trained by one executor.

    Attributes:
        directory: the folder of the checkpoint files (made when the first is written).
        every: seconds of a run's wall time between two checkpoints (0: at every update boundary).
        portable: resume checkpoints written on another machine too (see the module's **Validity**).
    """

    directory: Path
    every: float = DEFAULT_EVERY_S
    portable: bool = False

    def path(self, spec: RunSpec) -> Path:
        """The checkpoint file of ``spec``'s run (its id made file-safe, plus a hash against collisions)."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.run_id)[:120]
        return self.directory / f"{safe}.{hashlib.sha256(spec.run_id.encode()).hexdigest()[:10]}.ckpt"

    def save(self, spec: RunSpec, state: dict) -> None:
        """Write ``state`` as ``spec``'s checkpoint (atomically: a kill mid-write leaves the previous one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        _pickler_class()(buffer, protocol=5).dump({"fingerprint": _fingerprint(spec), "machine": this_machine(),
                                                   "state": state})
        payload = zlib.compress(buffer.getvalue(), 1)
        target = self.path(spec)
        _write_atomically(target, payload)
        # what `rlaudit status` shows, without unpickling the checkpoint
        note = {"run_id": spec.run_id, "env_steps": state["env_steps"], "saved_at": time.time(),
                "machine": this_machine()}
        _write_atomically(target.with_suffix(".json"), json.dumps(note).encode())

    def load(self, spec: RunSpec) -> dict | None:
        """``spec``'s checkpointed state, or ``None`` when there is none or it was written for another run, other
        code, or (unless :attr:`portable`) on another machine; then it is deleted: the run starts from scratch
        and will overwrite it.

        The state's ``"trained_on"`` lists ``[machine fingerprint (JSON text), env step it took the run up
        from]`` for each machine the run has trained on, this one last.
        """
        import pickle

        target = self.path(spec)
        for name in (target.name, target.with_suffix(".json").name):  # a writer killed mid-write
            for stale in target.parent.glob(f"{glob.escape(name)}.*.tmp"):
                with contextlib.suppress(OSError):
                    stale.unlink()
        if not target.exists():
            return None
        try:
            data = pickle.loads(zlib.decompress(target.read_bytes()))
            if data.get("fingerprint") == _fingerprint(spec) and (self.portable or data["machine"] == this_machine()):
                state = data["state"]
                trained_on = list(state.get("trained_on") or [[data["machine"], 0]])
                if trained_on[-1][0] != this_machine():
                    trained_on.append([this_machine(), int(state["env_steps"])])
                state["trained_on"] = trained_on
                return state
        except Exception:  # unreadable (another build's classes, a truncated file): not this run's checkpoint
            pass
        self.discard(spec)
        return None

    def discard(self, spec: RunSpec) -> None:
        """Delete ``spec``'s checkpoint, if any."""
        for path in (self.path(spec), self.path(spec).with_suffix(".json")):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


_PACK_BYTES = 1 << 20
"""Arrays of 0/1 bytes from this size up are stored a bit per value (MinAtar's frames in a replay buffer)."""


def _unpack_bits(bits: np.ndarray, shape: tuple, dtype: str) -> np.ndarray:
    """The array that :func:`_pickler_class`'s pickler packed (a new, writable one)."""
    return np.unpackbits(bits, count=int(np.prod(shape)))[: int(np.prod(shape))].astype(dtype).reshape(shape)


@functools.cache
def _pickler_class():
    """cloudpickle's pickler, with large arrays of 0s and 1s (bool or uint8: MinAtar's observations in a replay
    buffer) stored a bit per value; they load to the same array (made when first used: cloudpickle is imported
    only by runs that save)."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            if (type(obj) is np.ndarray and obj.dtype in (np.bool_, np.uint8) and obj.nbytes >= _PACK_BYTES
                    and (obj.dtype == np.bool_ or int(obj.max(initial=0)) <= 1)):
                return _unpack_bits, (np.packbits(obj, axis=None), obj.shape, obj.dtype.str)
            return super().reducer_override(obj)

    return Pickler


def _write_atomically(target: Path, payload: bytes) -> None:
    """A kill mid-write leaves the previous file (and a ``.tmp`` that the next :meth:`Checkpoints.load` deletes)."""
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def saved_checkpoints(directory: str | os.PathLike) -> dict[str, tuple[int, bool]]:
    """Run id -> ``(env steps, written on this machine)`` of each checkpoint in ``directory`` (none when it does
    not exist)."""
    out: dict[str, tuple[int, bool]] = {}
    for note in sorted(Path(directory).glob("*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(note.read_text())
            if note.with_suffix(".ckpt").exists():
                out[str(data["run_id"])] = (int(data["env_steps"]), data.get("machine") == this_machine())
    return out


def random_states() -> tuple:
    """The global torch, NumPy and ``random`` states (what SB3 draws exploration and replay samples from)."""
    import torch

    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def set_random_states(states: tuple) -> None:
    """Restore what :func:`random_states` returned."""
    import torch

    torch_state, np_state, py_state = states
    torch.set_rng_state(torch_state)
    np.random.set_state(np_state)
    random.setstate(py_state)


__all__ = ["DEFAULT_EVERY_S", "SUFFIX", "Checkpoints", "checkpoint_dir", "checkpointable", "random_states",
           "saved_checkpoints", "set_random_states", "this_machine"]
