"""``rlaudit import`` (published formats -> tidy table) and ``rlaudit fetch`` (download a protocol's data)."""

from __future__ import annotations

from pathlib import Path

import click

from rlaudit.errors import InputError


def _parse_option(values: tuple[str, ...]) -> dict:
    out = {}
    for v in values:
        if "=" not in v:
            raise InputError(f"--option {v!r}: expected KEY=VALUE")
        k, val = v.split("=", 1)
        out[k.strip()] = val.strip()
    return out


@click.command("import")
@click.argument("fmt", metavar="FORMAT")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Output tidy table: .parquet or .csv (written atomically).")
@click.option("--algorithm", help="Algorithm name (rliable: default file stem; zoo/curves/wide: override).")
@click.option("--task", help="Task name when the format does not hold it (zoo, wide).")
@click.option("--budget", help="Budget of single-budget sets (e.g. 100k).")
@click.option("--budgets", help="Comma-separated budgets to read curves at (curves, dopamine), e.g. 10M,50M,200M.")
@click.option("--budget-unit", help="Unit of the budget (frames, env_steps, agent_steps, …).")
@click.option("--rule", type=click.Choice(["last", "linear"]), help="curves: resampling rule.")
@click.option("--max-staleness", help="curves/dopamine: how far before a budget the last point may be.")
@click.option("--variant", help="dopamine: legacy (default), CNN, Impala or all.")
@click.option("--n-runs", help="dopamine: expected runs per agent.")
@click.option("--pivot", type=click.Choice(["algorithm", "task", "run", "budget"]),
              help="wide: which key the value columns hold (default algorithm).")
@click.option("--tag", help="tensorboard/wandb/openrlbenchmark: metric(s) to read, comma-separated "
              "(default: eval/mean_reward, …).")
@click.option("--run-from", help="tensorboard: regex on each file's path, wandb/openrlbenchmark: on each run's "
              "name; groups algorithm/task/run (or 1 = run).")
@click.option("--run-column", help="tidy: column holding the run id (default: run, else seed).")
@click.option("--strict", is_flag=True, help="tidy: refuse empty scores instead of leaving them out.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE", help="Any other importer option.")
def import_scores(fmt, paths, output, algorithm, task, budget, budgets, budget_unit, rule, max_staleness, variant,
                  n_runs, pivot, tag, run_from, run_column, strict, extra):
    """Convert published results in FORMAT into a tidy score table.

    \b
    FORMAT (see docs/importers.md):
      dopamine  Dopamine baseline curves <game>.json[.gz], _CNN, _Impala (runs from record order)
      rliable   rliable score sets: {task: [runs]}, {budget: {task: ...}}, {algorithm: {task: ...}}, records
      zoo       SB3 EvalCallback / RL Zoo logs: logs/<algo>/<env>_<id>/evaluations.npz
      curves    per-seed curves [{task, method, seed, xs, ys}] (DreamerV3), read at --budgets
      tensorboard  TensorBoard event logs of SB3 / RL Zoo / CleanRL runs (--tag, --run-from)
      wandb     W&B exports: panel CSV, runs table CSV, a run's history() as CSV/Parquet
      openrlbenchmark  openrlbenchmark's per-run cache (run_df.csv + run.json)
      tidy      the native tidy CSV / Parquet
      wide      a CSV copied from a paper: one score column per algorithm (or --pivot key)
      auto      sniff from the first PATH
    """
    from rlaudit.importers import IMPORTERS, import_path, importer_options
    from rlaudit.errors import did_you_mean
    from rlaudit.scores import write_scores

    if output.suffix.lower() not in (".parquet", ".csv"):
        raise InputError(f"{output}: output must end in .parquet or .csv")
    if fmt != "auto" and fmt not in IMPORTERS:
        raise InputError(f"FORMAT {fmt!r} is unknown{did_you_mean(fmt, IMPORTERS)}; known: {', '.join(IMPORTERS)}, auto")
    given = {"algorithm": algorithm, "task": task, "budget": budget, "budgets": budgets, "budget_unit": budget_unit,
             "rule": rule, "max_staleness": max_staleness, "variant": variant, "n_runs": n_runs, "pivot": pivot,
             "tag": tag, "run_from": run_from, "run_column": run_column, "strict": strict or None}
    options = {k: v for k, v in given.items() if v is not None}
    options.update(_parse_option(extra))
    if fmt != "auto":
        allowed = importer_options(fmt)
        for k in options:
            if k not in allowed:
                flag = "--" + k.replace("_", "-")
                raise InputError(f"{flag}: not an option of the {fmt} importer (its options: "
                                 f"{', '.join(sorted(allowed)) or 'none'})")
    table = import_path(None if fmt == "auto" else fmt, list(paths), **options)
    write_scores(table, output)
    f = table.frame
    click.echo(f"wrote {output}: {len(f):,} rows, {f['algorithm'].nunique()} algorithms, {f['task'].nunique()} tasks, "
               f"{f['budget'].nunique()} budgets ({table.meta.budget_unit}), score kind {table.meta.score_kind}"
               + (f", normalised: {table.meta.normalized}" if table.meta.normalized else ""))
    for note in table.meta.notes:
        click.echo(f"note: {note}", err=True)


@click.command("fetch")
@click.argument("protocol", type=click.Path(path_type=Path))
@click.option("--cache", type=click.Path(path_type=Path),
              help="Cache folder (default $RLAUDIT_CACHE or ~/.cache/rlaudit).")
@click.option("--mirror", help="Base URL replacing each file's url: <mirror>/<path> (also $RLAUDIT_FETCH_BASE).")
def fetch(protocol, cache, mirror):
    """Download and verify (sha256) the data files of a published PROTOCOL into the cache."""
    from rlaudit.importers.fetch import cache_dir, fetch_protocol

    results = fetch_protocol(protocol, cache=cache, mirror=mirror, progress=True)
    n_new = sum(1 for _, s in results if s == "downloaded")
    click.echo(f"{protocol}: {len(results)} files verified in {cache or cache_dir()} "
               f"({n_new} downloaded, {len(results) - n_new} already cached)")
