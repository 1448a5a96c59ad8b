"""CPU time of training with and without :func:`rlaudit.run.allocator.keep_freed_memory`, and whether the bits agree.

For each algorithm entry of a protocol (its first task, SB3 with the runner's patches, one thread), trains
``--warmup`` steps and then times ``--steps`` more in a fresh process, once with glibc's default malloc
thresholds and once with the executors' setting, ``--repeats`` times, interleaved so that machine load hits
both alike. Prints the median steps per CPU-second of each, the share of system time, their ratio, and
whether the two processes ended with the same network parameters, bit for bit (they must: the setting moves
memory, not arithmetic).

    python bench/bench_allocator.py                                    # the flagship's five agents
    python bench/bench_allocator.py --only IQN,C51 --steps 2000 --repeats 1

CPU time, not wall time, is compared: the machine's load changes wall time, and the setting's gain is the
system time the kernel spends mapping and zeroing pages. Run it on a quiet machine all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "protocols" / "dqn-family-minatar.toml"
_GLIBC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def child(protocol: str, label: str, warmup: int, steps: int, keep: bool) -> dict:
    """Train in this process; its rates and a digest of the trained parameters."""
    sys.path.insert(0, str(REPO))
    from rlaudit.algorithms import make_agent
    from rlaudit.run.allocator import keep_freed_memory
    from rlaudit.run.envs import make_env
    from rlaudit.run.runner import precompute_observation_checks, set_single_thread, skip_redundant_mode_switches

    sys.path.insert(0, str(REPO / "bench"))
    from bench_backends import protocol_spec

    set_single_thread()
    if keep and not keep_freed_memory():
        raise SystemExit("error: keep_freed_memory() set nothing here (no glibc mallopt?)")
    spec = protocol_spec(protocol, label)
    a = spec.algorithm
    agent = make_agent(a.name, make_env(spec.task, 0), {**a.hyperparams_dict, "learning_starts": warmup}, 0,
                       a.policy_kwargs_dict)
    skip_redundant_mode_switches(agent)
    precompute_observation_checks(agent)
    marks = {}

    def on_step(n: int) -> bool:
        if n == warmup:
            marks["start"] = os.times()
        return True

    agent.train(warmup + steps, on_step)
    end, start = os.times(), marks["start"]
    user, system = end.user - start.user, end.system - start.system
    digest = hashlib.sha256()
    for name, tensor in sorted(agent.model.policy.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return {"label": label, "keep": keep, "cpu_rate": steps / (user + system), "system_share": system / (user + system),
            "params_sha256": digest.hexdigest()}


def measure(protocol: str, label: str, warmup: int, steps: int, keep: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _GLIBC_SETTINGS}
    env.setdefault("OMP_NUM_THREADS", "1")
    out = subprocess.run([sys.executable, __file__, "--child", label, "--protocol", protocol, "--warmup", str(warmup),
                          "--steps", str(steps), "--keep", str(int(keep))],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"child exited {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    sys.path.insert(0, str(REPO))
    from rlaudit.errors import InputError, OneLineArgumentParser
    from rlaudit.protocol import load_protocol

    ap = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", default=str(PROTOCOL), help="protocol whose algorithm entries are timed")
    ap.add_argument("--only", help="entry labels, comma-separated (default: all)")
    ap.add_argument("--warmup", type=int, default=1_000, help="steps before timing (learning starts there)")
    ap.add_argument("--steps", type=int, default=4_000, help="steps timed")
    ap.add_argument("--repeats", type=int, default=3, help="processes per setting and entry")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", help=argparse_hidden())
    ap.add_argument("--keep", type=int, default=1, help=argparse_hidden())
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.protocol, args.child, args.warmup, args.steps, bool(args.keep))))
        return 0
    try:
        labels = [a.label for a in load_protocol(args.protocol).algorithms]
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only.split(",")) - set(labels))
        if unknown:
            print(f"error: --only: no entry labelled {', '.join(unknown)} in {args.protocol} "
                  f"(entries: {', '.join(labels)})", file=sys.stderr)
            return 2
        labels = [label for label in labels if label in args.only.split(",")]
    if min(args.warmup, args.steps, args.repeats) < 1:
        print("error: --warmup, --steps and --repeats must be >= 1", file=sys.stderr)
        return 2
    print(f"{Path(args.protocol).name}, first task of each entry; {args.warmup:,} warm-up + {args.steps:,} timed "
          f"steps; {args.repeats} process(es) per setting; steps per CPU-second (system-time share)")
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    results = []
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} processes"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task("", total=len(labels) * args.repeats * 2)
        for label in labels:
            runs = {False: [], True: []}
            for _ in range(args.repeats):
                for keep in (False, True):
                    bar.update(task, description=f"{label}, {'kept' if keep else 'default'}")
                    runs[keep].append(measure(args.protocol, label, args.warmup, args.steps, keep))
                    bar.advance(task)
            results.append(summarise(label, runs))
            row = results[-1]
            print(f"{label:<20} default {row['default']['cpu_rate']:7,.0f} ({row['default']['system_share']:4.0%} "
                  f"system)  kept {row['keep']['cpu_rate']:7,.0f} ({row['keep']['system_share']:4.0%})  "
                  f"{row['ratio']:.2f}x  parameters {'bit-identical' if row['bit_identical'] else 'DIFFER'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": sys.argv[1:], "results": results}, indent=1) + "\n")
    return 0 if all(r["bit_identical"] for r in results) else 1


def summarise(label: str, runs: dict[bool, list[dict]]) -> dict:
    """One entry's row: its processes, the medians of each setting, their ratio, whether all bits agree."""
    same = len({r["params_sha256"] for r in runs[False] + runs[True]}) == 1
    row = {"label": label, "runs": runs[False] + runs[True], "bit_identical": same}
    for keep in (False, True):
        row["keep" if keep else "default"] = {
            "cpu_rate": statistics.median(r["cpu_rate"] for r in runs[keep]),
            "system_share": statistics.median(r["system_share"] for r in runs[keep])}
    row["ratio"] = row["keep"]["cpu_rate"] / row["default"]["cpu_rate"]
    return row


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
