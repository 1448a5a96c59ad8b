#!/usr/bin/env bash
# Stage a consistent snapshot of SQLite stores that a sweep may be writing right now (WAL mode): `sqlite3 .backup`
# into a temporary file, then that file's content is staged under the store's path; the live file is not touched.
#   scripts/stage_store.sh sweeps/fidelity-minatar-100k/reference-dopamine-DQN.sqlite [more stores ...]
set -euo pipefail
for store in "$@"; do
  snap=$(mktemp --suffix=.sqlite)
  sqlite3 "$store" ".backup '$snap'"
  blob=$(git hash-object -w "$snap")
  git update-index --add --cacheinfo "100644,$blob,$store"
  rm -f "$snap"
  echo "staged a snapshot of $store"
done
