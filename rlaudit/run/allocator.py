"""glibc's malloc in training processes: keep freed memory in the heap instead of handing it back to the kernel.

torch allocates CPU tensors with ``malloc``. glibc serves a block above its mmap threshold (128 KiB, then
adjusted up to the largest block freed so far, at most 32 MiB) with a fresh ``mmap`` and returns it with
``munmap`` when freed, and it trims the top of the heap once more than twice that threshold is free. The
distributional agents' updates make and drop tensors of several MiB at every gradient step (IQN's
``(batch x n_tau, 1,600)`` embedding is 6.5 MiB at the flagship's settings), so each step maps new pages and
the kernel zeroes them on first touch: on MinAtar a quarter of IQN's CPU time was system time.

:func:`keep_freed_memory` sets the two thresholds once per process: blocks up to 32 MiB come from the heap,
and the heap keeps up to 1 GiB of freed memory. Measured with ``python bench/bench_allocator.py`` (table in
docs/backends.md, "Allocator"): IQN, QR-DQN, C51 and Dopamine's Rainbow train 1.16-1.47x more steps per
CPU-second on two x86 CPUs (DQN, whose tensors stay small, is unchanged), and the trained networks are bit for
bit the same (where memory sits changes no arithmetic). The cost is memory: a process keeps its peak heap (tens
of MiB for these agents).

A user who sets ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` keeps their own settings; on a
system without glibc's ``mallopt`` (macOS, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

MMAP_THRESHOLD = 32 * 2**20
"""Blocks up to this size come from the heap (glibc's largest allowed threshold on 64-bit systems)."""

TRIM_THRESHOLD = 2**30
"""Freed memory at the top of the heap is returned to the kernel only beyond this."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


@functools.cache
def keep_freed_memory() -> bool:
    """Set this process's malloc thresholds (once); whether they are now set by this call.

    False where the user set either threshold in the environment (theirs stay) or the C library has no
    ``mallopt``.
    """
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success; musl's stub returns 0 and changes nothing.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
