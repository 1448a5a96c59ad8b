"""What decides whether a rerun gives the same bits: the machine fingerprint a store records.

A run is a deterministic function of its spec and seed *on one machine and build*: the same code, seed and
library versions give the same numbers there, bit for bit (``scripts/replay_run.py`` checks it). On another
machine they usually do not, even with the same library versions: torch dispatches its CPU kernels by
instruction set (AVX2, AVX-512, …), MKL / oneDNN pick their code paths by CPU, and a different BLAS or
libm rounds differently. One last-bit difference in a gradient is enough: RL training is chaotic, so two
runs that differ in one rounding soon take different actions and diverge. Between machines, reruns can only
be compared as distributions (``replay_run.py`` does so when the fingerprints differ).

:func:`machine_fingerprint` collects those deciding facts as plain strings; the driver records them in the
store's ``meta`` (key ``machine``). Host names and kernel versions are left out: they change nothing in
the numbers, and a fingerprint that changed with them would never match.

Threads: every run sets torch to one thread (:func:`rlaudit.run.runner.set_single_thread`), recorded as
``torch_threads_per_run``, so the machine's core count and ``OMP_NUM_THREADS`` do not enter; NumPy's BLAS
thread variables are not recorded (a shell that exports one must not make the same machine look like
another, and the networks' arithmetic is torch's).

Limits: a virtual machine may report only a CPU family (``AMD EPYC``), so two machines with the same
fingerprint may still differ; the fingerprint is the driver's, and Ray workers on other nodes are not
fingerprinted.
"""

from __future__ import annotations

import hashlib
import platform
import re
from pathlib import Path

CPU_FLAGS: tuple[str, ...] = ("sse4_2", "avx", "f16c", "fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16",
                              "amx_tile", "neon", "asimd", "sve")
"""CPU features that change which kernels torch, MKL, oneDNN and OpenBLAS run (recorded when present)."""

RUN_THREADS = 1
"""torch threads per run (:func:`rlaudit.run.runner.set_single_thread`): results do not depend on the cores."""


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """CPU model name and feature flags from ``/proc/cpuinfo`` (Linux), else ``platform.processor()``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return platform.processor() or "unknown", set()
    model = re.search(r"^(?:model name|Model|cpu model)\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
    return (model.group(1).strip() if model else platform.processor() or "unknown",
            set(flags.group(1).split()) if flags else set())


def _torch_build() -> dict[str, str]:
    import torch

    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    mkl = re.search(r"Math Kernel Library Version (\S+)", config)
    dnn = re.search(r"MKL-DNN v(\S+)", config)
    return {
        "torch": torch.__version__,
        "torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "torch_blas": blas.group(1) if blas else "unknown",
        "torch_mkl": mkl.group(1) if mkl else "none",
        "torch_onednn": f"{dnn.group(1) if dnn else 'none'} ({'enabled' if torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled else 'disabled'})",
        "torch_config_sha256": hashlib.sha256(config.encode()).hexdigest(),
        "torch_threads_per_run": str(RUN_THREADS),
        "torch_deterministic_algorithms": str(torch.are_deterministic_algorithms_enabled()),
    }


def _numpy_build() -> dict[str, str]:
    import numpy as np

    blas = "unknown"
    try:
        deps = np.show_config(mode="dicts").get("Build Dependencies", {})
        info = deps.get("blas", {})
        blas = f"{info.get('name', 'unknown')} {info.get('version', '')}".strip()
    except (TypeError, AttributeError):  # NumPy < 1.26 has no mode="dicts"
        pass
    return {"numpy": np.__version__, "numpy_blas": blas}


def cpu_identity(fingerprint: dict | None = None) -> str:
    """A CPU as ``model (flags)`` — the fingerprint's ``cpu_model`` and ``cpu_flags``; this machine's without
    ``fingerprint`` (one model name can hide CPUs with and without AVX-512). A fingerprint whose JAX trained on
    an accelerator adds it (``... with gpu NVIDIA H200``): its runs' speed is the accelerator's, not the CPU's."""
    fingerprint = _cpu_facts() if fingerprint is None else fingerprint
    out = f"{fingerprint.get('cpu_model', '?')} ({fingerprint.get('cpu_flags', '?')})"
    devices = [d for d in str(fingerprint.get("jax_devices", "")).split(", ") if d and not d.startswith("cpu")]
    return f"{out} with {', '.join(devices)}" if devices else out


def _cpu_facts() -> dict[str, str]:
    """The fingerprint's ``cpu_model`` and ``cpu_flags`` (the :data:`CPU_FLAGS` present, else ``none``)."""
    model, flags = _cpuinfo()
    return {"cpu_model": model, "cpu_flags": " ".join(f for f in CPU_FLAGS if f in flags) or "none"}


def machine_fingerprint() -> dict[str, str]:
    """The facts that decide bit-equality of a rerun, as ``name -> text`` (recorded in the store's ``meta``).

    Keys: ``cpu_model``, ``cpu_flags`` (the :data:`CPU_FLAGS` present), ``machine`` (architecture),
    ``libc``, ``python``, the torch build (version, CPU capability it dispatches to, BLAS, MKL and oneDNN
    versions, a hash of ``torch.__config__.show()``, threads per run, deterministic-algorithms flag),
    NumPy's version and BLAS, and the versions of the libraries that run the environments and agents.
    """
    from importlib import metadata

    out = {**_cpu_facts(), "machine": platform.machine(),
           "libc": " ".join(platform.libc_ver()).strip() or "unknown", "python": platform.python_version(),
           **_torch_build(), **_numpy_build()}
    for dist in ("stable-baselines3", "sb3-contrib", "gymnasium", "ale-py", "minatar"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def fingerprint_differences(recorded: dict[str, str], current: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(key, recorded value, current value)`` for every key whose values differ (``missing`` if absent).

    Args:
        recorded: the fingerprint in a store.
        current: this machine's (:func:`machine_fingerprint`).

    Returns:
        The differences, sorted by key; empty when the machines match.
    """
    keys = sorted(set(recorded) | set(current))
    return [(k, recorded.get(k, "missing"), current.get(k, "missing")) for k in keys
            if recorded.get(k, "missing") != current.get(k, "missing")]
