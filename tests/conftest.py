"""Shared fixtures. Published data lives in ``../shared/data`` beside the repository (not copied here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RLAUDIT_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test with a clear reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"published score data not found at {SHARED_DATA} (set RLAUDIT_SHARED_DATA)")
    return SHARED_DATA


def _bench_module(name: str):
    """A script of ``bench/`` imported as a module (bench scripts import each other by name)."""
    import importlib
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


@pytest.fixture(scope="session")
def calibration_bench():
    """The calibration suite ``bench/bench_audit_calibration.py`` as a module (its simulators and cells)."""
    return _bench_module("bench_audit_calibration")


@pytest.fixture(scope="session")
def dependence_check():
    """``bench/dependence_check.py`` as a module (it imports the calibration suite by name)."""
    return _bench_module("dependence_check")


@pytest.fixture(autouse=True)
def _single_torch_thread(monkeypatch):
    """Tests share 2 cores; keep BLAS/torch from oversubscribing them."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
