#!/usr/bin/env bash
# The fidelity runs of docs/fidelity.md, as two resumable chains (at most 2 training processes at once, nice 10,
# one thread each): run it again after a kill and every finished run is kept.
#   scripts/fidelity_minatar.sh builtin     # the SB3 side: rlaudit run into $STORE (a normal sweep)
#   scripts/fidelity_minatar.sh reference   # Dopamine's agents: rlaudit fidelity --reference-only
# One seed at a time (both games), so that partial results cover both games; DQN first, then C51 (the two the
# JAX backend's equivalence check needs), then QR-DQN, IQN and Dopamine's Rainbow (ALGOS="..." to choose).
# Environment: PYTHON (default: this checkout's .venv), STORE (default sweeps/fidelity-minatar-100k/store.sqlite),
# SEEDS (default "0 1 2 3 4 5 6 7 8 9"), WORKERS (processes at a time, default 1; 2 trains both games of a seed at
# once).
set -u
cd "$(dirname "$0")/.."
PROTOCOL=protocols/fidelity/minatar-100k.toml
STORE=${STORE:-sweeps/fidelity-minatar-100k/store.sqlite}
PY=${PYTHON:-/work/main/.venv/bin/python}
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
RL="nice -n 10 $PY -m rlaudit"
ALGOS=${ALGOS:-"DQN C51 QRDQN IQN DopamineRainbow"}
SEEDS=${SEEDS:-"0 1 2 3 4 5 6 7 8 9"}
WORKERS=${WORKERS:-1}
label() { case $1 in QRDQN) echo "QR-DQN";; DopamineRainbow) echo "Rainbow (Dopamine)";; *) echo "$1";; esac; }
case ${1:-} in
  builtin)
    for a in $ALGOS; do
      for s in $SEEDS; do
        $RL run "$PROTOCOL" --store "$STORE" --workers "$WORKERS" --only "algo=$(label "$a"),seed=$s"
      done
    done ;;
  reference)
    for a in $ALGOS; do
      for s in $SEEDS; do
        $RL fidelity "$a" --against dopamine --protocol "$PROTOCOL" --store "$STORE" --workers "$WORKERS" --seeds "$s" \
          --reference-only || echo "($a seed $s: compared once both sides have 2 seeds)"
      done
    done ;;
  *) echo "usage: $0 builtin|reference" >&2; exit 2 ;;
esac
