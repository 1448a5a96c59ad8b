#!/usr/bin/env bash
# The JAX side of the backend-equivalence check at the published MinAtar settings (issue 22, docs/backends.md):
# protocols/backend-equivalence/minatar-100k-jax.toml (the fidelity protocol with backend = "jax") recorded into
# $STORE, one algorithm at a time (DQN, then C51, then the others), each (algorithm, game) compiled batches of
# $BATCH seeds (default 5: seeds 0-4, then 5-9; a run's records do not depend on the seeds beside it in its batch,
# tests/test_jax_backend.py). Resumable: run it again after a kill and every finished batch is kept (an unfinished
# batch restarts, so smaller batches lose less to a kill; at load 6 on 2 cores a 10-seed QR-DQN batch needed
# about 3 h). The SB3 side is scripts/fidelity_minatar.sh builtin; compare with scripts/compare_backends.py.
# Environment: PYTHON (default: this checkout's .venv), STORE (default sweeps/backend-equivalence/store.sqlite),
# ALGOS (labels, default all five), BATCH (seeds per compiled batch, default 5).
set -u
cd "$(dirname "$0")/.."
PROTOCOL=protocols/backend-equivalence/minatar-100k-jax.toml
STORE=${STORE:-sweeps/backend-equivalence/store.sqlite}
PY=${PYTHON:-$PWD/.venv/bin/python}
BATCH=${BATCH:-5}
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
ALGOS=${ALGOS:-"DQN|C51|QR-DQN|IQN|Rainbow (Dopamine)"}
IFS='|' read -r -a labels <<< "$ALGOS"
for a in "${labels[@]}"; do
  for ((first = 0; first < 10; first += BATCH)); do
    only="algo=$a"
    for ((s = first; s < first + BATCH && s < 10; s++)); do only+=",seed=$s"; done
    nice -n 10 "$PY" -m rlaudit run "$PROTOCOL" --store "$STORE" --workers 1 --only "$only" || exit $?
  done
done
