"""How far the JAX backend takes a protocol's agents in a wall-clock window (made for a GPU machine).

For each algorithm entry of ``--protocol`` (on its first task) and each number of seeds S vmapped in one program:

- the program's **compile time** (the first call of the compiled loop, wall);
- the **training rate** after ``--warmup`` steps, where learning starts and every later step trains on the
  protocol's schedule (one update per ``train_freq`` steps), timed over at least ``--min-seconds`` of wall time:
  env steps per second for one seed and for the S seeds together;
- the **budget one seed reaches in ``--window`` seconds** of wall time: the rate per seed times the window less
  the compile time. It is a projection from the measured rate, not a run that lasted the window: the warm-up
  steps before learning starts are faster, evaluations (10 greedy episodes at each budget, on the host) are not
  counted, and the rate does not change with the step once the replay buffer's arrays exist (fixed shapes).

    python bench/bench_jax_budget.py --protocol protocols/dqn-family-minatar.toml --seeds 5,50 \\
        --json out.json --deadline 420

Entries are measured in the order of ``--algorithms`` (default: the protocol's), all of them at the first S
before any at the next; after ``--deadline`` seconds no new measurement starts and the rest is listed as not
measured. ``--json`` is rewritten after each measurement, so a run stopped from outside keeps what it measured.
``--note`` turns such a JSON file into the one-line summary that a sweep's report carries (``<store>.notes.toml``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def measure(spec, n_seeds: int, warmup: int, min_seconds: float) -> dict:
    """Compile time and training rate of ``spec``'s JAX program with ``n_seeds`` seeds (see the module docstring)."""
    import jax

    from bench_backends import jax_config
    from rlaudit.run.backends.jax.training import Program, seed_keys

    total = 10**6
    prog = Program(jax_config(spec, warmup))
    carries = prog.init(seed_keys(range(n_seeds)))
    jax.block_until_ready(carries.key)
    w0 = time.perf_counter()
    carries = prog.run(carries, 0, 1, total)
    jax.block_until_ready(carries.key)
    compile_s = time.perf_counter() - w0
    carries = prog.run(carries, 1, warmup, total)
    jax.block_until_ready(carries.key)
    t, chunk, timed_steps, timed_s = warmup, 2_000, 0, 0.0
    while timed_s < min_seconds:
        w0 = time.perf_counter()
        carries = prog.run(carries, t, t + chunk, total)
        jax.block_until_ready(carries.key)
        timed_s += time.perf_counter() - w0
        t, timed_steps = t + chunk, timed_steps + chunk
        chunk = min(chunk * 2, 64_000)
    per_seed = timed_steps / timed_s
    return {"compile_s": compile_s, "timed_steps_per_seed": timed_steps, "timed_s": timed_s,
            "steps_per_s_per_seed": per_seed, "steps_per_s_all_seeds": per_seed * n_seeds}


def machine() -> dict:
    import jax

    dev = jax.devices()[0]
    return {"platform": dev.platform, "device_kind": getattr(dev, "device_kind", ""), "jax": jax.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def reach(entry: dict, window: float) -> int:
    """Env steps one seed trains in ``window`` seconds of wall time at the entry's measured rate."""
    return int(entry["steps_per_s_per_seed"] * max(window - entry["compile_s"], 0.0))


def _steps(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 10**6 else f"{n / 1e3:.0f}k"


END_TO_END = re.compile(r"\] done +(?P<label>.+?) (?P<task>\S+) seed \d+ \[\w+\] \((?P<s>[\d.]+) s, "
                        r"(?P<rate>[\d,]+) steps/s")


def end_to_end(log: str) -> dict:
    """The runs of an ``rlaudit run`` log (its ``[k/n] done`` lines): algorithm, task, number of runs, and the wall
    rate of one run (env steps per second of one seed, everything included: a JAX batch's runs share its time).

    Raises:
        ValueError: the log has no finished run, or runs of several algorithms or rates.
    """
    runs = [m.groupdict() for m in END_TO_END.finditer(log)]
    if not runs:
        raise ValueError("no finished run ('[k/n] done ...') in the log")
    if len({(r["label"], r["task"], r["rate"]) for r in runs}) != 1:
        raise ValueError("the log's runs are not one batch (several algorithms, tasks or rates)")
    return {"algorithm": runs[0]["label"], "task": runs[0]["task"], "runs": len(runs),
            "seconds": float(runs[0]["s"]), "steps_per_s_per_seed": float(runs[0]["rate"].replace(",", ""))}


def note(result: dict, e2e: dict | None = None, e2e_command: str = "") -> str:
    """The one-line summary of a result file (and of an end-to-end run's log, :func:`end_to_end`), as a sweep's
    report carries it."""
    m, window = result["machine"], result["window_s"]
    measured = [e for e in result["entries"] if "steps_per_s_per_seed" in e]
    by_s: dict[int, list[dict]] = {}
    for e in measured:
        by_s.setdefault(e["seeds"], []).append(e)
    parts = []
    for n_seeds, entries in sorted(by_s.items()):
        rates = ", ".join(f"{e['algorithm']} {e['steps_per_s_per_seed']:,.0f}" for e in entries)
        reached = ", ".join(f"{e['algorithm']} {_steps(reach(e, window))}" for e in entries)
        parts.append(f"S = {n_seeds} seeds in one program: env steps/s per seed {rates}; "
                     f"budget one seed reaches in {window / 60:g} minutes {reached}")
    skipped = [f"{e['algorithm']} at S = {e['seeds']}" for e in result["entries"] if "steps_per_s_per_seed" not in e]
    whole, hours = _whole_protocol(result, by_s)
    checked = ""
    if e2e:
        bench = next((e for e in measured if e["algorithm"] == e2e["algorithm"] and e["seeds"] == e2e["runs"]), None)
        if bench is None:
            raise ValueError(f"the end-to-end runs ({e2e['algorithm']}, {e2e['runs']} seeds) have no measurement "
                             f"in the result file to compare with")
        share = e2e["steps_per_s_per_seed"] / bench["steps_per_s_per_seed"]
        checked = (f". End to end (`{e2e_command}`: {e2e['algorithm']} on {e2e['task']}, {e2e['runs']} seeds in one "
                   f"program, compile and evaluations included): {e2e['steps_per_s_per_seed']:,.0f} env steps/s per "
                   f"seed, {share:.0%} of the rate above" + (f"; at that share the whole protocol takes about "
                                                             f"{hours / share:.1f} h" if hours else ""))
    return (f"JAX backend on a GPU ({m['device_kind']}, jax {m['jax']}, {m['date']}; "
            f"`python bench/bench_jax_budget.py --protocol {result['protocol']}`), on {result['task']}, training rate "
            f"after learning starts, compile time subtracted, evaluations not counted: " + "; ".join(parts)
            + (f". Not measured (deadline): {', '.join(skipped)}" if skipped else "")
            + (f". {whole}" if whole else "") + checked
            + ". The recorded runs here trained on SB3 on CPUs; none on this GPU.")


def _whole_protocol(result: dict, by_s: dict[int, list[dict]]) -> tuple[str, float]:
    """The projected wall time of the whole protocol, one program (agent, task) of all its seeds after another:
    its sentence and hours (``("", 0.0)`` when the protocol's seed count was not measured for every entry)."""
    from rlaudit.protocol import load_protocol

    path = Path(result["protocol"])
    proto = load_protocol(path if path.is_absolute() or path.exists() else REPO / path)  # as written: repo-relative
    n_seeds = len(proto.seeds)
    entries = by_s.get(n_seeds)
    if not entries or len(entries) < len(proto.algorithms):
        return "", 0.0
    top = max(r.budget for r in proto.regimes)
    hours = len(proto.tasks) * sum(top / e["steps_per_s_per_seed"] + e["compile_s"] for e in entries) / 3600
    text = (f"Projected from these rates, the whole protocol ({len(proto.algorithms)} agents x {len(proto.tasks)} "
            f"tasks, one program of {n_seeds} seeds each, to {top:,} steps) takes about {hours:.1f} h on this GPU, "
            f"the programs one after another (several processes sharing one GPU add little: docs/backends.md, GPU)")
    return text, hours


def main(argv=None) -> int:
    from rlaudit.errors import OneLineArgumentParser

    ap = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", help="the protocol whose algorithm entries are measured")
    ap.add_argument("--algorithms", help="entry labels, comma-separated (default: every entry, in order)")
    ap.add_argument("--seeds", default="5,50", help="numbers of seeds vmapped, comma-separated")
    ap.add_argument("--warmup", type=int, default=1_000, help="steps before timing (learning starts there)")
    ap.add_argument("--min-seconds", type=float, default=8.0, help="wall seconds timed per measurement, at least")
    ap.add_argument("--window", type=float, default=600.0, help="wall seconds of the projected budget")
    ap.add_argument("--deadline", type=float, default=float("inf"), help="start no measurement after this many s")
    ap.add_argument("--json", help="write the results here (rewritten after each measurement)")
    ap.add_argument("--note", nargs=2, metavar=("RESULT_JSON", "NOTES_TOML"),
                    help="write RESULT_JSON's one-line summary into NOTES_TOML (key gpu_jax_budget) and stop")
    ap.add_argument("--end-to-end", nargs=2, metavar=("LOG", "COMMAND"),
                    help="with --note: the log of an `rlaudit run` of one batch (COMMAND, as run) to check the rates")
    args = ap.parse_args(argv)
    if args.note:
        from rlaudit.store.notes import set_note

        src, dest = args.note
        try:
            result = json.loads(Path(src).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            print(f"error: {src}: cannot read a result file ({err})", file=sys.stderr)
            return 2
        e2e, command = None, ""
        if args.end_to_end:
            log, command = args.end_to_end
            try:
                e2e = end_to_end(Path(log).read_text(encoding="utf-8"))
                text = note(result, e2e, command)
            except (OSError, ValueError) as err:
                print(f"error: {log}: {err}", file=sys.stderr)
                return 2
        else:
            text = note(result)
        set_note(Path(dest), "gpu_jax_budget", text)
        print(f"wrote {dest}")
        return 0
    if not args.protocol:
        print("error: --protocol is required (or --note RESULT_JSON NOTES_TOML)", file=sys.stderr)
        return 2
    from rlaudit.run.backends.jax import configure_jax, missing_dependency

    if missing_dependency():
        print(f"error: {missing_dependency()}", file=sys.stderr)
        return 2
    configure_jax()
    from rlaudit.errors import InputError
    from rlaudit.protocol import load_protocol, plan

    start = time.perf_counter()
    try:
        runs = plan(load_protocol(args.protocol)).runs
        seeds = [int(s) for s in args.seeds.split(",")]
    except (InputError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    first_task = runs[0].task.id
    specs = {}
    for r in runs:
        if r.task.id == first_task:
            specs.setdefault(r.algorithm.label, r)
    labels = args.algorithms.split(",") if args.algorithms else list(specs)
    unknown = [label for label in labels if label not in specs]
    if unknown:
        print(f"error: {args.protocol}: no algorithm entry labelled {unknown[0]!r}; entries: {', '.join(specs)}",
              file=sys.stderr)
        return 2
    result = {"protocol": args.protocol, "task": first_task, "warmup": args.warmup, "window_s": args.window,
              "machine": machine(), "entries": []}
    print(f"{first_task}; jax {result['machine']['jax']} on {result['machine']['device_kind']} "
          f"({result['machine']['platform']}); {args.warmup:,} warm-up steps, >= {args.min_seconds:g} s timed",
          flush=True)
    for n_seeds in seeds:
        for label in labels:
            entry = {"algorithm": label, "seeds": n_seeds}
            if time.perf_counter() - start < args.deadline:
                entry.update(measure(specs[label], n_seeds, args.warmup, args.min_seconds))
                print(f"{label:<20} S = {n_seeds:<4} compile {entry['compile_s']:6.1f} s  "
                      f"{entry['steps_per_s_per_seed']:9,.0f} steps/s per seed  "
                      f"{entry['steps_per_s_all_seeds']:11,.0f} all seeds  "
                      f"{args.window / 60:g} min -> {reach(entry, args.window):,} steps per seed", flush=True)
            else:
                print(f"{label:<20} S = {n_seeds:<4} not measured (deadline)", flush=True)
            result["entries"].append(entry)
            if args.json:
                Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
