"""Retrain one recorded run from its store's protocol and check every stored evaluation bit for bit.

Same seed, same numbers: this is how a change to the runner is shown not to move a recorded result (the
flagship's ``MinAtar/Breakout-v1__DQN__0__nested`` was replayed this way after the acting fast path).
Exit status 0 when every evaluation matches, 1 when one differs, 2 on bad input.

Usage: ``python scripts/replay_run.py STORE RUN_ID``
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    from rlaudit.errors import InputError
    from rlaudit.protocol import parse_protocol, plan
    from rlaudit.run.runner import execute_run, set_single_thread
    from rlaudit.store import run_evaluations, stored_protocol_text

    if len(argv) != 2:
        print("usage: python scripts/replay_run.py STORE RUN_ID", file=sys.stderr)
        return 2
    store, run_id = argv
    try:
        text, where = stored_protocol_text(store)
        spec = next((r for r in plan(parse_protocol(text, where)).runs if r.run_id == run_id), None)
        if spec is None:
            raise InputError(f"{store}: no run {run_id!r} in its protocol's plan")
        stored = run_evaluations(store, run_id)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not stored:
        print(f"error: {store}: run {run_id} has no stored evaluation", file=sys.stderr)
        return 2
    set_single_thread()
    t0, records = time.perf_counter(), []
    execute_run(spec, records.append)
    fresh = {r.env_steps: (list(r.returns), list(r.lengths)) for r in records}
    same = fresh == stored
    print(f"{run_id}: {'identical' if same else 'DIFFERENT'} ({len(fresh)} evaluations, "
          f"{time.perf_counter() - t0:.0f} s)")
    for steps in sorted(set(fresh) | set(stored)):
        if fresh.get(steps) != stored.get(steps):
            print(f"  at {steps} env steps: stored {stored.get(steps)}, retrained {fresh.get(steps)}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
