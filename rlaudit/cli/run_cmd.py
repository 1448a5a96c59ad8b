"""``rlaudit validate / run / status / export``: protocol files in, a store and a tidy table out."""

from __future__ import annotations

import math
from pathlib import Path

import click

from rlaudit.cli.rerun_opts import rerun_options
from rlaudit.errors import InputError

RAY_OPTIONS = ("address", "cpus_per_run", "gpus_per_run", "max_retries")


def _load(protocol_path: str, suite=None, budgets=None, seeds=None):
    from rlaudit.cli.rerun_opts import describe_rerun, load_to_run
    from rlaudit.protocol import check_runnable, plan

    protocol, section = load_to_run(protocol_path, suite, budgets, seeds)  # published: its [rerun] section
    check_runnable(protocol)
    describe_rerun(protocol, section, echo=lambda line: click.echo(line, err=True))
    return protocol, plan(protocol)


def _store_path(store: str | None, protocol) -> Path:
    from rlaudit.protocol import default_store

    return Path(store) if store else default_store(protocol)


def _print_plan(plan_, specs, store_path: Path, workers: int, recorded: dict, echo=click.echo) -> None:
    """The plan, its cost (``recorded``: :func:`~rlaudit.run.driver.recorded_rates`) and its store."""
    from rlaudit.run.driver import estimate, format_duration

    p = plan_.protocol
    echo(f"protocol {p.name}" + (f" — {p.title}" if p.title else "") + f" ({p.path}, hash {p.hash[:12]})")
    echo(f"  tasks:      {', '.join(f'{t.id} ({t.suite})' for t in p.tasks)}")
    echo(f"  algorithms: {', '.join(a.label if a.label == a.name else f'{a.label} ({a.name})' for a in p.algorithms)}")
    echo(f"  seeds:      {len(p.seeds)} ({', '.join(map(str, p.seeds[:10]))}{', …' if len(p.seeds) > 10 else ''})")
    for r in p.regimes:
        what = ("anytime reading of the nested run" if r.regime_kind == "nested" else "own runs trained for this budget")
        echo(f"  regime {r.name:<10} {r.budget:>12,} env steps  {r.regime_kind:<8}  ({what})")
    ev = p.evaluation
    echo(f"  evaluation: {ev.n_eval_episodes} episodes, "
         f"{'deterministic' if ev.deterministic else 'stochastic'}"
         + (f", epsilon {ev.epsilon}" if ev.epsilon else "")
         + (f", also every {ev.eval_every:,} steps" if ev.eval_every else ""))
    if p.run_timeout:
        echo(f"  run timeout: {format_duration(p.run_timeout)} per run (a run past it is stopped, recorded timed out; a "
             f"batch of runs trained together, a JAX batch's seeds, gets it once per run)")
    from rlaudit.protocol.provenance import describe

    describe(p, echo)
    total_steps = sum(s.total_steps for s in specs)
    n_nested = sum(1 for s in specs if s.regime_kind == "nested")
    echo(f"plan: {len(specs)} runs ({n_nested} nested, {len(specs) - n_nested} separate), "
         f"{total_steps:,} env steps in total")
    if not specs:
        echo(f"store: {store_path}")
        return
    est = estimate(specs, workers, recorded)
    used = sorted({s.algorithm.backend for s in specs})
    echo(f"estimate: about {format_duration(est.seconds)} with {workers} worker{'s' if workers > 1 else ''} "
         f"on backend {', '.join(used)}, {_cpu_hours(est.cpu_seconds)} (steps/s: {est.source}; evaluation episodes "
         f"counted at their time limit unless recorded)")
    _other_backends(p, specs, used, workers, recorded, echo)
    echo(f"store: {store_path}")
    _warn_if_large(specs, workers, est.seconds)


def _cpu_hours(seconds: float) -> str:
    return f"{seconds / 3600:,.3g} CPU-hours" if seconds >= 360 else f"{seconds:,.0f} CPU-seconds"


def _print_progress(plan_, store_path: Path, workers: int, busy: bool, recorded: dict) -> None:
    """How far an existing store is through the plan, and what finishing it costs."""
    from rlaudit.run.checkpoint import Checkpoints, checkpoint_dir, saved_checkpoints
    from rlaudit.run.driver import estimate, format_duration, resume_points, resumed_text
    from rlaudit.store import done_run_ids

    done = done_run_ids(store_path)
    left = [s for s in plan_.runs if s.run_id not in done]
    n_done = len(plan_.runs) - len(left)
    writer = "; another 'rlaudit run' is writing it now (checked read-only)" if busy else ""
    specs = {s.run_id: s for s in left}  # priced from their checkpoints as a plain 'rlaudit run' resumes them
    folder = checkpoint_dir(store_path)
    notes = saved_checkpoints(folder)  # read once for both
    trained = resume_points(specs, Checkpoints(folder), notes)
    saved = resume_points(specs, Checkpoints(folder, portable=True), notes)
    elsewhere = len(saved) - len(trained)
    rest = ""
    if left and (n_done or saved):
        seconds = estimate(left, workers, recorded, trained=trained).seconds
        rest = (f"; the other {len(left)} take about {format_duration(seconds)} with {workers} "
                f"worker{'s' if workers > 1 else ''}{resumed_text(trained)}"
                + (f" ({elsewhere} more checkpoint{'s' if elsewhere > 1 else ''} written on another machine, priced "
                   "from 0: 'rlaudit run --resume-on-any-machine' resumes them)" if elsewhere else ""))
    click.echo(f"store: {n_done} of {len(plan_.runs)} planned runs finished{rest}{writer}")


def _other_backends(protocol, specs, used: list[str], workers: int, recorded, echo) -> None:
    """The plan's cost on every other backend that can run all of it, or why one cannot (one line each)."""
    import dataclasses

    from rlaudit.protocol.loader import backend_refusal
    from rlaudit.run.backends import backend_names
    from rlaudit.run.driver import estimate, format_duration

    for name in backend_names():
        if used == [name]:
            continue
        why = backend_refusal(protocol, name)
        if why:
            echo(f"  on backend {name}: cannot run this plan ({why})")
            continue
        moved = [dataclasses.replace(s, algorithm=dataclasses.replace(s.algorithm, backend=name)) for s in specs]
        est = estimate(moved, workers, recorded)
        echo(f"  on backend {name}: about {format_duration(est.seconds)} with the same workers, "
             f"{_cpu_hours(est.cpu_seconds)} (steps/s: {est.source})")


def _warn_if_large(specs, workers: int, seconds: float | None = None, recorded=None) -> None:
    """Warn on stderr when ``specs`` (the runs left to train) are a large plan: priced as the plan's header
    prices them (``recorded`` rates where there are some)."""
    from rlaudit.protocol.plan import size_warning
    from rlaudit.run.driver import estimate

    if seconds is None:
        seconds = estimate(specs, workers, recorded).seconds
    warning = size_warning(sum(s.total_steps for s in specs), seconds)
    if warning:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@click.argument("protocol", type=click.Path(dir_okay=False))
@click.option("--store", "store", default=None, help="Store file to check (default: sweeps/<name>/store.sqlite).")
@click.option("--workers", type=int, default=None, help="Workers for the time estimate (default: cores).")
@rerun_options
def validate(protocol: str, store: str | None, workers: int | None, rerun_suite=None, rerun_budgets=None,
             rerun_seeds=None) -> None:
    """Check PROTOCOL without training: fields, algorithms, hyperparameters, environments, budgets,
    the store; print the plan (runs, env steps, time estimate)."""
    from rlaudit.protocol import load_protocol
    from rlaudit.run.executors import default_workers
    from rlaudit.store import Store

    p = load_protocol(protocol)
    rerun = (rerun_suite, rerun_budgets, rerun_seeds)
    if p.is_published and not any(v is not None for v in rerun):
        from rlaudit.protocol.loader import check_runnable

        check_runnable(p)
        files = (p.data or {}).get("files", [])
        click.echo(f"protocol {p.name}: published data, importer {p.data.get('format')!r}, {len(files)} file(s); "
                   f"valid" + (f"; rerun with --suite {' | '.join(p.rerun.get('suites') or {})}" if p.rerun else ""))
        return
    p, plan_ = _load(protocol, *rerun)
    store_path = _store_path(store, p)
    Store.open_for_run(store_path, p, check_only=True, busy_ok=True)
    from rlaudit.run.driver import cost_sources, recorded_rates
    from rlaudit.store.sqlite import lock_holder, takeover

    recorded = recorded_rates(cost_sources(store_path), own=store_path)
    _print_plan(plan_, plan_.runs, store_path, workers or default_workers(), recorded)
    if store_path.exists():
        _print_progress(plan_, store_path, workers or default_workers(), lock_holder(store_path), recorded)

    kept = takeover(store_path, p)
    if kept is not None:
        click.echo(f"store: the protocol changed since {store_path} was written (hash {kept.old_hash[:12]}); it plans "
                   f"the store's {kept.kept} finished run(s) identically, so 'rlaudit run' keeps them"
                   + (f" and replans {len(kept.replanned)} unfinished run(s)" if kept.replanned else ""))
    click.echo("valid")


@click.command()
@click.argument("protocol", type=click.Path(dir_okay=False))
@click.option("--store", default=None, help="Store file (default: sweeps/<name>/store.sqlite). Resumed if it exists.")
@click.option("--workers", "-j", type=int, default=None, help="Parallel runs (default: the cores available).")
@click.option("--only", default=None, metavar="KEY=VALUE,…",
              help="Run a subset: algo=, task=, seed=, regime= (repeat a key for several values).")
@click.option("--dry-run", is_flag=True, help="Print the plan and what would run; train nothing.")
@click.option("--new-store", is_flag=True,
              help="If the store holds another protocol's runs (or is corrupted), move it aside to "
                   "<store>.<time>.bak and start a new one.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where runs execute.")
@click.option("--address", default=None, help="Ray: cluster address (executor ray).")
@click.option("--cpus-per-run", type=float, default=None, help="Ray: CPUs reserved per run (executor ray).")
@click.option("--gpus-per-run", type=float, default=None, help="Ray: GPUs reserved per run (executor ray).")
@click.option("--max-retries", type=int, default=None, help="Ray: retries of a run whose worker was lost.")
@click.option("--run-timeout", type=float, default=None, metavar="SECONDS",
              help="Stop a run that trains longer than this and record it timed out; the sweep goes on "
                   "(default: the protocol's run_timeout, else none).")
@click.option("--checkpoint-every", type=float, default=None, metavar="SECONDS",
              help="Local executor: save each run's state this often (default 600), at an update boundary, in "
                   "STORE.checkpoints/; a run killed part-way resumes from it with the same numbers (SB3 "
                   "off-policy algorithms: the DQN family, SAC, TD3; others restart). 0: at every boundary.")
@click.option("--no-checkpoints", is_flag=True, help="Local executor: no mid-run checkpoints.")
@click.option("--resume-on-any-machine", is_flag=True,
              help="Local executor: resume a checkpoint written on another machine too (default: that run restarts, "
                   "so that each run is bit-reproducible on one machine); the run then records each machine it "
                   "trained on, for sweeps whose runs outlast the machine they start on.")
@click.option("--runtime-env", default=None, metavar="JSON|FILE",
              help="Ray: runtime environment for the workers, e.g. '{\"working_dir\": \"plugins/\"}' or a .json/.yaml file.")
@rerun_options
def run(protocol: str, store: str | None, workers: int | None, only: str | None, dry_run: bool, new_store: bool,
        executor: str, address, cpus_per_run, gpus_per_run, max_retries, run_timeout, checkpoint_every,
        no_checkpoints, resume_on_any_machine, runtime_env, rerun_suite=None, rerun_budgets=None, rerun_seeds=None) -> None:
    """Train and evaluate PROTOCOL's runs into a resumable store.

    Finished runs in the store are skipped; unfinished ones resume from their last checkpoint (the DQN family and
    other SB3 off-policy algorithms, local executor) or restart from scratch. Exit status 1 when some runs
    failed (their tracebacks are in the store), 130 on Ctrl-C (finished runs and checkpoints kept).
    """
    from rich.console import Console

    from rlaudit.protocol import parse_only
    from rlaudit.run.driver import run_plan
    from rlaudit.run.executors import default_workers, get_executor
    from rlaudit.store import Store, done_run_ids

    p, plan_ = _load(protocol, rerun_suite, rerun_budgets, rerun_seeds)
    store_path = _store_path(store, p)
    selection = parse_only(only, plan_)
    ray_opts = {k: v for k, v in {"address": address, "cpus_per_run": cpus_per_run, "gpus_per_run": gpus_per_run,
                                  "max_retries": max_retries, "runtime_env": runtime_env}.items() if v is not None}
    if executor == "local" and ray_opts:
        name = next(iter(ray_opts)).replace("_", "-")
        raise InputError(f"--{name}: applies to --executor ray only")
    if workers is not None and workers < 1:
        raise InputError(f"--workers: must be at least 1, got {workers}")
    if executor == "ray" and workers is not None:
        raise InputError("--workers: applies to --executor local only; Ray places runs by --cpus-per-run")
    if executor == "ray" and (checkpoint_every is not None or no_checkpoints or resume_on_any_machine):
        flag = ("--checkpoint-every" if checkpoint_every is not None else
                "--no-checkpoints" if no_checkpoints else "--resume-on-any-machine")
        raise InputError(f"{flag}: applies to --executor local only; runs on a Ray cluster restart from scratch")
    if no_checkpoints and (checkpoint_every is not None or resume_on_any_machine):
        flag = "--checkpoint-every" if checkpoint_every is not None else "--resume-on-any-machine"
        raise InputError(f"{flag}: cannot be given with --no-checkpoints")
    if checkpoint_every is not None and not (math.isfinite(checkpoint_every) and checkpoint_every >= 0):
        raise InputError(f"--checkpoint-every: expected a number of seconds >= 0, got {checkpoint_every:g}")
    opts = dict(ray_opts)
    if workers is not None:
        opts["workers"] = workers
    if executor == "local" and not no_checkpoints:
        from rlaudit.run.checkpoint import DEFAULT_EVERY_S, Checkpoints, checkpoint_dir

        every = DEFAULT_EVERY_S if checkpoint_every is None else checkpoint_every
        folder = checkpoint_dir(store_path)
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{folder}: the store's checkpoint folder is a file; move it aside, or run with "
                             f"--no-checkpoints")
        opts["checkpoints"] = Checkpoints(folder, every, portable=resume_on_any_machine)
    if run_timeout is not None:
        from rlaudit.protocol.loader import run_timeout_value

        run_timeout_value(run_timeout, "--run-timeout")
    run_timeout = run_timeout if run_timeout is not None else p.run_timeout
    if run_timeout is not None:
        opts["run_timeout"] = run_timeout
    Store.open_for_run(store_path, p, new_store=new_store, check_only=True)  # all checks before any write
    from rlaudit.run.driver import cost_sources, recorded_rates

    specs = plan_.select(selection)
    done = done_run_ids(store_path) if store_path.exists() and not new_store else set()
    todo = [s for s in specs if s.run_id not in done]
    recorded = recorded_rates(cost_sources(store_path), own=store_path)
    if dry_run:
        _print_plan(plan_, todo, store_path, workers or default_workers(), recorded)
        click.echo(f"dry run: {len(todo)} of {len(specs)} selected runs would train "
                   f"({len(specs) - len(todo)} already done)")
        for s in todo:
            click.echo(f"  {s.run_id}  budgets {', '.join(map(str, s.budgets))}")
        return
    ex = get_executor(executor, **opts)
    _warn_if_large(todo, workers or default_workers(), recorded=recorded)  # priced as the driver's header prices it
    check = getattr(ex, "check", None)
    if callable(check):  # e.g. Ray: reachability, resources, imports on every node -- before the store exists
        check(specs)
    run_plan(plan_, store_path, ex, only=selection, new_store=new_store, console=Console(stderr=True),
             recorded=recorded)


@click.command()
@click.argument("store", type=click.Path(dir_okay=False))
def status(store: str) -> None:
    """Show done / running / failed / pending runs of STORE per algorithm, task and regime."""
    from rich.console import Console
    from rich.table import Table

    from rlaudit.run.spec import is_timed_out
    from rlaudit.store import failures, store_status

    df = store_status(store)
    table = Table(title=f"{store}", title_justify="left")
    for c in df.columns:
        table.add_column(c, justify="right" if c not in ("algorithm", "task", "regime") else "left")
    for row in df.itertuples(index=False):
        table.add_row(*(str(v) for v in row))
    if len(df):
        totals = df[["done", "running", "interrupted", "failed", "timed_out", "pending", "total"]].sum()
        table.add_row("all", "", "", *(str(int(v)) for v in totals), end_section=True)
    console = Console(width=140)
    console.print(table)
    from rlaudit.report.model import compute_text
    from rlaudit.store import compute_used

    used = compute_used(store)
    if used["runs"]:
        console.print(f"compute of the finished runs: {compute_text(used)}", highlight=False, soft_wrap=True)
    for run_id, last in failures(store):
        console.print(f"{'timed out' if is_timed_out(last) else 'failed'}: {run_id}: {last}", highlight=False)
    from rlaudit.run.checkpoint import checkpoint_dir, saved_checkpoints

    saved = saved_checkpoints(checkpoint_dir(store))
    if saved:
        # the fingerprint (settings, libraries, training code) is checked only when a run loads it
        console.print(f"{len(saved)} unfinished run(s) have a checkpoint, resumed if the run's settings, the "
                      "libraries and rlaudit's training code are unchanged (else restarted): "
                      + "; ".join(f"{rid} at {steps:,} env steps"
                                  + ("" if here else " (written on another machine: resumed with "
                                                     "--resume-on-any-machine, else restarted)")
                                  for rid, (steps, here) in saved.items()),
                      highlight=False, soft_wrap=True)


@click.command()
@click.argument("store", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="Output file: .csv or .parquet.")
@click.option("--protocol", "eval_protocol", type=click.Choice(["final", "max"]), default="final", show_default=True,
              help="Score at a budget: the evaluation at that budget (final) or the best one up to it (max; "
                   "inflates results).")
def export(store: str, output: str, eval_protocol: str) -> None:
    """Export STORE's finished runs as a tidy score table (one row per algorithm, task, seed, budget)."""
    from rlaudit.scores import write_scores
    from rlaudit.store import export_table

    out = Path(output)
    if out.suffix.lower() not in (".csv", ".parquet"):
        raise InputError(f"{output}: unknown output type {out.suffix!r}; expected .csv or .parquet")
    table = export_table(store, eval_protocol)
    write_scores(table, out)
    click.echo(f"{len(table.frame)} rows ({len(table.algorithms)} algorithms, {len(table.tasks)} tasks, budgets "
               f"{', '.join(map(str, table.budgets))}) -> {out}")
