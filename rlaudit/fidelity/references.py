"""Reference implementations the fidelity harness runs the built-ins against, and how to reach them.

A reference runs in its own interpreter (its dependencies may clash with rlaudit's: Dopamine needs
TensorFlow, JAX and flax), found through an environment variable or a default virtual environment, and
builds its agent with a ``"module:function"`` backend imported only there
(:mod:`rlaudit.fidelity.worker`). The backend's module must not import torch or stable-baselines3.

- ``dopamine``: Dopamine's own JAX agents (dopamine-rl, Castro et al. 2018) — ``JaxDQNAgent`` (DQN),
  ``JaxRainbowAgent`` (C51 = Rainbow with 1-step returns and uniform replay; Dopamine's Rainbow), the
  ``JaxQuantileAgent`` (QR-DQN) and ``JaxImplicitQuantileAgent`` (IQN) — with our MinAtar environment
  wrapper and the published 'minatar' network written in flax (:mod:`rlaudit.fidelity.dopamine_backend`).
- ``self``: the built-in itself, run through the same subprocess path with every seed shifted by
  :data:`SELF_SEED_OFFSET`. It checks the harness (the two sides must come out equivalent, up to the test's
  error rate) and runs wherever rlaudit does, so the fast test covers the whole path without Dopamine.
  Its results are never recorded as a fidelity status.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rlaudit.errors import InputError, did_you_mean

SELF_SEED_OFFSET = 1_000
"""The ``self`` reference trains seed ``s + SELF_SEED_OFFSET`` for the run of seed ``s``."""

DOPAMINE_VENV = Path("/work/venvs/dopamine")
"""Default virtual environment of the ``dopamine`` reference (``make reference-venv`` creates it)."""

DOPAMINE_REQUIREMENTS = "requirements/dopamine-reference.txt"
"""What ``make reference-venv`` installs into :data:`DOPAMINE_VENV`: dopamine-rl 4.1.2 with the TensorFlow, JAX,
flax and optax versions it works with (later JAX breaks tensorflow-probability, later TensorFlow clashes with
jaxlib's protobuf descriptors), then OpenAI baselines 0.1.5 without its dependencies (dopamine-rl imports its
Atari wrappers without declaring it)."""


@dataclass(frozen=True)
class Reference:
    """An independent implementation of some of the built-ins."""

    name: str
    """Name on the command line (``--against NAME``)."""
    title: str
    """What it is, in words, for tables and the status file."""
    python_var: str | None
    """Environment variable naming its interpreter (``None``: this interpreter)."""
    default_python: Path | None
    """Interpreter used when the variable is unset."""
    backend: str
    """``"module:function"`` building the agent of a run in that interpreter (``function(spec, env)``)."""
    algorithms: tuple[str, ...]
    """Registry names of the built-ins it implements."""
    install: str
    """The fix when it is not installed, as a command."""
    probe: str
    """Python statement printing its version; fails when it is not installed."""
    revision: int = 1
    """Revision of rlaudit's side of the reference (the loop that drives it, its networks, the settings
    translation). A reference store records it, and runs of two revisions are never mixed in one store or one
    comparison (:func:`rlaudit.fidelity.check_reference_revision`)."""

    @property
    def revision_text(self) -> str:
        """What a reference store records as ``meta.reference_revision``."""
        return f"{self.name} harness revision {self.revision}"

    def python(self) -> str:
        """Path of the interpreter to run it with."""
        if self.python_var is None:
            return sys.executable
        return os.environ.get(self.python_var) or str(self.default_python)

    def version(self) -> str:
        """Its version string (runs :attr:`probe` in its interpreter).

        Raises:
            InputError: not installed, with :attr:`install` as the fix.
        """
        python = self.python()
        where = f"{self.python_var}={python}" if self.python_var and os.environ.get(self.python_var) else python
        if not Path(python).exists():
            raise InputError(f"--against {self.name}: {self.title} is not installed (no interpreter at {where}); "
                             f"install it with `{self.install}`"
                             + (f" or set {self.python_var} to a Python that has it" if self.python_var else ""))
        try:
            out = subprocess.run([python, "-c", self.probe], capture_output=True, text=True, timeout=300,
                                 env=worker_environment())
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"--against {self.name}: cannot start {python}: {exc}; install it with "
                             f"`{self.install}`") from None
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["?"])[-1]
            raise InputError(f"--against {self.name}: {self.title} is not installed in {where} ({last}); install "
                             f"it with `{self.install}`")
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else self.name

    def check_algorithm(self, name: str) -> None:
        """Raise :class:`InputError` when the reference has no implementation of built-in ``name``."""
        if name not in self.algorithms:
            raise InputError(f"--against {self.name}: {self.title} has no implementation of {name!r}; it has "
                             f"{', '.join(self.algorithms)}")


def worker_environment() -> dict[str, str]:
    """Environment of a reference interpreter: rlaudit importable from this checkout, one thread per process."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2",
               JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    return env


_DQN_FAMILY = ("DQN", "C51", "QRDQN", "IQN", "DopamineRainbow")

REFERENCES: dict[str, Reference] = {
    "dopamine": Reference(
        name="dopamine",
        title="Dopamine's JAX agents (dopamine-rl)",
        python_var="RLAUDIT_DOPAMINE_PYTHON",
        default_python=DOPAMINE_VENV / "bin" / "python",
        backend="rlaudit.fidelity.dopamine_backend:build_agent",
        algorithms=_DQN_FAMILY,
        install=f"make reference-venv (python3 -m venv {DOPAMINE_VENV}; {DOPAMINE_VENV}/bin/pip install -r "
                f"{DOPAMINE_REQUIREMENTS}; {DOPAMINE_VENV}/bin/pip install --no-deps baselines==0.1.5)",
        probe=("import importlib.metadata as m, dopamine.jax.agents.dqn.dqn_agent, minatar, gymnasium; "
               "print('dopamine-rl ' + m.version('dopamine-rl') + ', jax ' + m.version('jax') + ', flax ' "
               "+ m.version('flax'))"),
        # 2 (2026-12-02): the episode's last transition is stored as Dopamine 3's replay stored it (dopamine-rl
        # 4.1.2's accumulator drops it and flags the one before as terminal; DopamineAgent._end_episode).
        revision=2,
    ),
    "self": Reference(
        name="self",
        title="the built-in itself, seeds shifted (harness check)",
        python_var=None,
        default_python=None,
        backend="rlaudit.fidelity.worker:builtin_agent",
        algorithms=("DQN", "DQNFamily", "DoubleDQN", "DuelingDQN", "PrioritizedDQN", "QRDQN", "C51", "IQN",
                    "NoisyDQN", "Rainbow", "DopamineRainbow", "PPO", "A2C"),
        install="pip install -e .",
        probe="import rlaudit, stable_baselines3; print('rlaudit ' + rlaudit.__version__)",
    ),
}
"""Known references by name."""


def get_reference(name: str) -> Reference:
    """The reference called ``name``.

    Raises:
        InputError: unknown name, with did-you-mean.
    """
    try:
        return REFERENCES[name]
    except KeyError:
        raise InputError(f"--against: unknown reference {name!r}{did_you_mean(name, REFERENCES)}; known: "
                         f"{', '.join(REFERENCES)}") from None


__all__ = ["DOPAMINE_REQUIREMENTS", "DOPAMINE_VENV", "REFERENCES", "SELF_SEED_OFFSET", "Reference", "get_reference",
           "worker_environment"]
