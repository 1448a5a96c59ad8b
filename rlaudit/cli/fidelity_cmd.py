"""``rlaudit fidelity ALGORITHM --against REFERENCE --protocol P``: a built-in against an independent implementation."""

from __future__ import annotations

import click

from rlaudit.errors import InputError


def parse_seed_list(text: str | None) -> list[str] | None:
    """``--seeds`` as written (``0-9``, ``0,1,2``, ``0-4,7``) to seed strings; ``None`` when not given."""
    if not text:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, _, hi = part.partition("-")
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise InputError(f"--seeds: {part!r} is not a range like 0-9")
            out += [str(s) for s in range(int(lo), int(hi) + 1)]
        elif part.isdigit():
            out.append(part)
        else:
            raise InputError(f"--seeds: {part!r} is not a seed (write e.g. 0-9 or 0,1,2)")
    return out


def _print(fidelity, echo=click.echo) -> None:
    from rlaudit.fidelity.compare import shown_within_text

    echo(f"{fidelity.label} ({fidelity.algorithm}) against {fidelity.reference} ({fidelity.reference_version}) at "
         f"{fidelity.budget:,} env steps; margin {fidelity.margin_rule}")
    echo(f"  {'task':<26} {'runs':>7} {'built-in':>15} {'reference':>15} {'difference [interval]':>25} "
         f"{'margin':>7} {'shown within':>17}  verdict")
    for t in fidelity.tasks:
        lo, hi = t.interval
        within = shown_within_text(t.shown_within, t.pooled_sd)
        echo(f"  {t.task:<26} {t.n_builtin:>3}/{t.n_reference:<3} {t.mean_builtin:>7.2f} ± {t.sd_builtin:<5.2f} "
             f"{t.mean_reference:>7.2f} ± {t.sd_reference:<5.2f} {t.difference:>+7.2f} [{lo:+.2f}, {hi:+.2f}]"
             f"{'':>2} {t.margin:>7.2f} {within:>17}  {t.verdict} (p_diff {t.p_different:.3g}, "
             f"p_equiv {t.p_equivalent:.3g})")
    echo(f"verdict: {fidelity.verdict}")


@click.command("fidelity")
@click.argument("algorithm")
@click.option("--against", "against", required=True, help="Reference implementation: dopamine, or self (harness check).")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(dir_okay=False),
              help="Protocol whose entry for ALGORITHM (name or label) gives the tasks, seeds, settings and budgets.")
@click.option("--store", default=None, help="The built-in's store (default: the protocol's, sweeps/<name>/store.sqlite).")
@click.option("--reference-store", default=None,
              help="The reference's store (default: reference-<REFERENCE>-<LABEL>.sqlite beside --store).")
@click.option("--budget", type=int, default=None, help="Budget to compare at (default: the largest).")
@click.option("--seeds", default=None, help="Seeds to run and compare, e.g. 0-9 (default: the protocol's).")
@click.option("--workers", type=int, default=2, show_default=True, help="Processes at a time per side.")
@click.option("--margin-sd", type=float, default=1.0, show_default=True,
              help="Equivalence margin in pooled standard deviations of the runs' scores.")
@click.option("--margin", type=float, default=None, help="Equivalence margin in score units (replaces --margin-sd).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Family-wise level over the tasks.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
@click.option("--compare-only", is_flag=True, help="Train nothing: compare the runs already in the stores.")
@click.option("--markdown", is_flag=True, help="Print the comparison as the rows of docs/fidelity.md's tables.")
@click.option("--reference-only", is_flag=True, help="Train the reference's runs only (the built-in's come from "
                                                     "`rlaudit run`).")
@click.option("--record", is_flag=True, help="Write the verdict (or the update check's result) into "
                                             "rlaudit/fidelity/status.toml.")
@click.option("--update-check", is_flag=True,
              help="Train nothing: on each task, take 3 training steps of the built-in and of Dopamine's agent "
                   "from the same parameters on the same batches and compare gradients, parameters and priorities "
                   "(seconds; exit 1 when they differ).")
def fidelity(algorithm, against, protocol_path, store, reference_store, budget, seeds, workers, margin_sd, margin,
             alpha, seed, compare_only, markdown, reference_only, record, update_check) -> None:
    """Run ALGORITHM and an independent implementation of it with the same env and settings, and compare.

    Per task at the budget: the difference of mean scores (reference - built-in) with a seeded bootstrap
    interval, Welch's test and a TOST equivalence test within the margin. Both stores are resumable: run it
    again to continue, or to add seeds. Exit 0 whatever the verdict; 2 on bad input (a reference that is not
    installed is named with its fix), 1 when runs failed.
    """
    from rlaudit.fidelity import compare_stores, plan_fidelity, run_fidelity, write_result

    if update_check:
        if against != "dopamine":
            raise InputError(f"--update-check: compares with Dopamine's agents (--against dopamine), not {against!r}")
        from rlaudit.fidelity.update_check import check_updates, record_text
        from rlaudit.protocol import load_protocol

        results = []
        for task in load_protocol(protocol_path).tasks:  # each task's observation channels and actions
            results += check_updates(protocol_path, [algorithm], task=task.id, seed=seed)
            click.echo(results[-1].line())
        if record:
            import datetime

            from rlaudit.fidelity.references import get_reference
            from rlaudit.fidelity.status import STATUS_FILE, record_update

            reference = get_reference("dopamine")
            version = f"{reference.version()}; {reference.revision_text}"
            record_update(results[0].algorithm,
                          record_text(results, version, str(protocol_path), datetime.date.today().isoformat()))
            click.echo(f"recorded: {results[0].algorithm} update check in {STATUS_FILE}", err=True)
        if not all(r.agrees for r in results):
            raise SystemExit(1)
        return
    if workers < 1:
        raise InputError(f"--workers: must be at least 1, got {workers}")
    if not margin_sd > 0 or (margin is not None and not margin > 0):
        raise InputError("--margin / --margin-sd: must be positive")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha: must be in (0, 1), got {alpha}")
    fr = plan_fidelity(protocol_path, algorithm, against, store=store, reference_store=reference_store,
                       budget=budget, seeds=parse_seed_list(seeds))
    if record and fr.reference.name == "self":
        raise InputError("--record: the 'self' reference checks the harness; it is no fidelity status")
    click.echo(f"{fr.label}: built-in runs -> {fr.store}; {fr.reference.title} ({fr.reference_version}) -> "
               f"{fr.reference_store}", err=True)
    if not compare_only:
        run_fidelity(fr, workers=workers, train_builtin=not reference_only)
    result = compare_stores(fr, alpha=alpha, margin_sd=margin_sd, margin=margin, seed=seed)
    if markdown:
        from rlaudit.fidelity.compare import markdown_rows

        click.echo(f"| game | built-in | {fr.reference.title} | difference [95 % bootstrap] | Welch p | shown within | "
                   f"verdict (level {result.alpha / len(result.tasks):g}) |\n|---|---|---|---|---|---|---|")
        click.echo("\n".join(markdown_rows(result.to_dict())))
    else:
        _print(result)
    path = write_result(fr, result)
    click.echo(f"written: {path}", err=True)
    if record:
        from rlaudit.fidelity.status import STATUS_FILE, record_status

        record_status(result, str(protocol_path))
        click.echo(f"recorded: {fr.algorithm} {result.verdict} in {STATUS_FILE}", err=True)
