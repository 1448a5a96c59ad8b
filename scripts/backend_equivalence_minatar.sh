#!/usr/bin/env bash
# The JAX side of the backend-equivalence check at the published MinAtar settings (issue 22, docs/backends.md):
# protocols/backend-equivalence/minatar-100k-jax.toml (the fidelity protocol with backend = "jax") recorded into
# $STORE, one algorithm at a time (DQN, then C51, then the others), each (algorithm, game) one compiled batch of
# its 10 seeds. Resumable: run it again after a kill and every finished batch is kept (an unfinished batch
# restarts). The SB3 side is scripts/fidelity_minatar.sh builtin; compare the two with scripts/compare_backends.py.
# Environment: PYTHON (default: this checkout's .venv), STORE (default sweeps/backend-equivalence/store.sqlite).
set -u
cd "$(dirname "$0")/.."
PROTOCOL=protocols/backend-equivalence/minatar-100k-jax.toml
STORE=${STORE:-sweeps/backend-equivalence/store.sqlite}
PY=${PYTHON:-$PWD/.venv/bin/python}
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
for a in DQN C51 QR-DQN IQN "Rainbow (Dopamine)"; do
  nice -n 10 "$PY" -m rlaudit run "$PROTOCOL" --store "$STORE" --workers 1 --only "algo=$a" || exit $?
done
