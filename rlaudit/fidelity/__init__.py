"""The fidelity harness: a built-in against an independent implementation of the same algorithm.

``rlaudit fidelity ALGORITHM --against REFERENCE --protocol P`` (:func:`run_fidelity`) takes the protocol's
entry for ALGORITHM (its registry name or label), trains the built-in's runs into the protocol's ordinary
store (a normal sweep: ``rlaudit run P --only algo=LABEL`` gives the same runs) and the reference's runs of the
same plan - same tasks, seeds, settings, budgets and evaluation - into a store beside it
(``<store dir>/reference-<REFERENCE>-<LABEL>.sqlite``), each resumable, at most ``workers`` processes at a time; then
compares the per-run scores per task at the budget (:mod:`rlaudit.fidelity.compare`) and writes
``<store dir>/fidelity-<LABEL>-<REFERENCE>.json``. ``--record`` writes the verdict into the committed status
file (:mod:`rlaudit.fidelity.status`), which ``rlaudit algorithms`` shows and reports read through
:func:`~rlaudit.fidelity.status.fidelity_warnings`.

The references and how they are reached: :mod:`rlaudit.fidelity.references`; the subprocess executor:
:mod:`rlaudit.fidelity.executor`; Dopamine's agents: :mod:`rlaudit.fidelity.dopamine_backend` with the settings
translated (and checked) by :mod:`rlaudit.fidelity.dopamine_settings`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlaudit.errors import InputError

__all__ = ["FidelityRun", "check_reference_revision", "compare_stores", "fidelity_warnings", "plan_fidelity",
           "reference_store_path", "run_fidelity", "write_result"]

REVISION_KEY = "reference_revision"
"""``meta`` key of a reference store: the :attr:`~rlaudit.fidelity.references.Reference.revision_text` of the
harness that wrote its runs."""


def fidelity_warnings(algorithms, path=None, settings=None) -> list[str]:
    """See :func:`rlaudit.fidelity.status.fidelity_warnings` (the report's entry point)."""
    from rlaudit.fidelity.status import STATUS_FILE
    from rlaudit.fidelity.status import fidelity_warnings as warnings_

    return warnings_(algorithms, path or STATUS_FILE, settings)


@dataclass(frozen=True)
class FidelityRun:
    """What :func:`plan_fidelity` decided: the runs, the stores, the reference."""

    protocol: object
    """The loaded :class:`~rlaudit.protocol.schema.Protocol`."""
    plan: object
    """Its :class:`~rlaudit.protocol.plan.Plan`."""
    algorithm: str
    """Registry name of the built-in."""
    label: str
    """Its label in the protocol."""
    reference: object
    """The :class:`~rlaudit.fidelity.references.Reference`."""
    reference_version: str
    """The reference's version string."""
    store: Path
    """The built-in's store (the protocol's)."""
    reference_store: Path
    """The reference's store."""
    budget: int
    """Budget compared."""
    only: dict
    """Run selection (:meth:`Plan.select`)."""


def plan_fidelity(protocol_path: str, algorithm: str, against: str, *, store: str | None = None,
                  reference_store: str | None = None, budget: int | None = None,
                  seeds: list[str] | None = None) -> FidelityRun:
    """Check everything and decide the runs; trains nothing.

    Raises:
        InputError: unknown algorithm or reference, a reference that is not installed (naming the fix), a
            setting the reference cannot run, a budget the protocol does not evaluate, a reference store
            trained by another revision of the reference's harness.
    """
    from rlaudit.fidelity.references import get_reference
    from rlaudit.protocol import check_runnable, default_store, load_protocol, plan

    protocol = load_protocol(protocol_path)
    check_runnable(protocol)
    entries = [a for a in protocol.algorithms if algorithm in (a.name, a.label)]
    if not entries:
        names = [a.label for a in protocol.algorithms]
        from rlaudit.errors import did_you_mean

        raise InputError(f"{protocol_path}: no algorithm {algorithm!r}{did_you_mean(algorithm, names)}; it has "
                         f"{', '.join(names)}")
    if len(entries) > 1:
        raise InputError(f"{protocol_path}: {len(entries)} entries use {algorithm!r}; name one by its label "
                         f"({', '.join(a.label for a in entries)})")
    entry = entries[0]
    reference = get_reference(against)
    reference.check_algorithm(entry.name)
    if reference.name == "dopamine":
        from rlaudit.fidelity.dopamine_settings import dopamine_config

        hp, pk = entry.settings_for(None)
        dopamine_config(entry.name, hp, pk, where=f"{protocol_path}: algorithms[{entry.label}]")
    version = f"{reference.version()}; {reference.revision_text}"
    the_plan = plan(protocol)
    only = {"algo": [entry.label]}
    if seeds:
        only["seed"] = [str(s) for s in seeds]
    runs = the_plan.select(only)
    if not runs:
        raise InputError(f"{protocol_path}: no run of {entry.label!r} selected (seeds {seeds})")
    budgets = sorted({b for r in runs for b in r.budgets})
    budget = budget if budget is not None else budgets[-1]
    if budget not in budgets:
        raise InputError(f"--budget: {budget} is not a budget of {protocol_path} ({', '.join(map(str, budgets))})")
    store_path = Path(store) if store else default_store(protocol)
    ref_store = Path(reference_store) if reference_store else reference_store_path(store_path, reference.name,
                                                                                 entry.label)
    check_reference_revision(ref_store, reference)
    return FidelityRun(protocol, the_plan, entry.name, entry.label, reference, version, store_path, ref_store,
                       int(budget), only)


def reference_store_path(store: Path, reference: str, label: str) -> Path:
    """Default store of a reference's runs of one algorithm: ``<store dir>/reference-<reference>-<label>.sqlite``
    (one per algorithm, so that two algorithms' reference runs can be trained by two processes at once)."""
    return store.with_name(f"reference-{reference}-{_file_part(label)}.sqlite")


def _file_part(label: str) -> str:
    """``label`` as part of a file name: letters, digits and ``-_.`` kept, anything else ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def _recorded_revision(path: Path, reference) -> str | None:
    """The harness revision whose runs ``path`` holds: its ``meta.reference_revision``; revision 1 for a store
    with runs written before revisions were recorded; ``None`` for a missing or empty store."""
    import sqlite3

    from rlaudit.store.sqlite import check_store_file

    if not path.exists():
        return None
    con = check_store_file(path, readonly=True)
    try:
        row = con.execute("SELECT value FROM meta WHERE key=?", (REVISION_KEY,)).fetchone()
        n_runs = con.execute("SELECT count(*) FROM runs WHERE status != 'pending'").fetchone()[0]
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot read the store ({exc})") from None
    finally:
        con.close()
    if row is not None:
        return row[0]
    from dataclasses import replace

    return replace(reference, revision=1).revision_text if n_runs else None


def check_reference_revision(path: Path, reference) -> None:
    """Refuse a reference store whose runs another revision of the reference's harness wrote.

    Raises:
        InputError: naming the store, both revisions and the fix (move the store aside).
    """
    recorded = _recorded_revision(path, reference)
    if recorded is not None and recorded != reference.revision_text:
        raise InputError(f"{path}: its runs were trained by {recorded}, not {reference.revision_text} (rlaudit's "
                         f"side of the reference changed; see rlaudit/fidelity/references.py); move the store aside "
                         f"and train the reference again, so that the two are never mixed")


def _mark_reference_revision(fr: FidelityRun) -> None:
    """Create the reference store if needed and record the harness revision in its ``meta``."""
    from rlaudit.store.sqlite import Store

    store = Store.open_for_run(fr.reference_store, fr.protocol)
    try:
        with store.transaction() as con:
            con.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
                        (REVISION_KEY, fr.reference.revision_text))
    finally:
        store.close()


def _scores(store: Path, label: str, budget: int, seeds: set[str] | None) -> dict[str, list[float]]:
    from rlaudit.store.export import export_table

    frame = export_table(store).frame
    frame = frame[(frame["algorithm"] == label) & (frame["budget"] == budget)]
    if seeds is not None:
        frame = frame[frame["run"].isin(seeds)]
    return {task: [float(s) for s in g.sort_values("run")["score"]] for task, g in frame.groupby("task")}


def compare_stores(fr: FidelityRun, *, alpha: float = 0.05, margin_sd: float = 1.0, margin: float | None = None,
                   seed: int = 0):
    """Compare the two stores of ``fr`` at its budget (runs finished on both sides only).

    Returns:
        A :class:`~rlaudit.fidelity.compare.Fidelity`.

    Raises:
        InputError: a task with fewer than 2 finished runs on a side.
    """
    from rlaudit.fidelity.compare import Fidelity, compare_task, overall_verdict

    check_reference_revision(fr.reference_store, fr.reference)
    seeds = set(fr.only["seed"]) if "seed" in fr.only else None
    ours = _scores(fr.store, fr.label, fr.budget, seeds)
    theirs = _scores(fr.reference_store, fr.label, fr.budget, seeds)
    tasks = [t.id for t in fr.protocol.tasks]
    short = [t for t in tasks if min(len(ours.get(t, [])), len(theirs.get(t, []))) < 2]
    if short:
        raise InputError(f"{short[0]}: fewer than 2 finished runs of {fr.label} on a side at {fr.budget} steps "
                         f"({len(ours.get(short[0], []))} built-in, {len(theirs.get(short[0], []))} reference); "
                         f"run the harness (without --compare-only) to train them")
    level = alpha / len(tasks)
    results = tuple(compare_task(t, ours[t], theirs[t], alpha_task=level, margin_sd=margin_sd, margin=margin,
                                 seed=seed + i) for i, t in enumerate(tasks))
    rule = (f"+-{margin:g} points" if margin is not None else f"+-{margin_sd:g} pooled SD of the runs' scores")
    rule += f"; Welch and TOST at {alpha:g} family-wise (Bonferroni over {len(tasks)} tasks)"
    return Fidelity(fr.algorithm, fr.label, fr.reference.name, fr.reference_version, fr.budget, alpha, rule, results,
                    overall_verdict(r.verdict for r in results))


def run_fidelity(fr: FidelityRun, *, workers: int = 2, console=None, train_builtin: bool = True,
                 train_reference: bool = True) -> None:
    """Train (or resume) both sides of ``fr``: the built-in with the local executor, the reference with
    :class:`~rlaudit.fidelity.executor.ReferenceExecutor`, each into its store.

    Raises:
        RunFailed: runs failed on a side (after the others finished).
    """
    from rlaudit.fidelity.executor import ReferenceExecutor
    from rlaudit.run.driver import recorded_rates, run_plan
    from rlaudit.run.executors import LocalExecutor

    if train_reference:
        check_reference_revision(fr.reference_store, fr.reference)
    if train_builtin:
        run_plan(fr.plan, fr.store, LocalExecutor(workers=workers), only=fr.only, console=console)
    if train_reference:
        _mark_reference_revision(fr)
        # The reference's store holds only this algorithm's runs (all its seeds), so that its status counts them.
        from dataclasses import replace

        mine = replace(fr.plan, runs=fr.plan.select({"algo": fr.only["algo"]}))
        # Its estimate prices the reference's runs from their own recorded CPU time, never the built-in's.
        run_plan(mine, fr.reference_store, ReferenceExecutor(fr.reference, workers=workers), only=fr.only,
                 console=console, recorded=recorded_rates([fr.reference_store]))


def write_result(fr: FidelityRun, fidelity) -> Path:
    """``<store dir>/fidelity-<label>-<reference>.json`` with the comparison and where its runs are (the label
    as in :func:`reference_store_path`'s file name)."""
    from rlaudit.io import atomic_write_text

    path = fr.store.with_name(f"fidelity-{_file_part(fr.label)}-{fr.reference.name}.json")
    doc = {"protocol": str(fr.protocol.path), "protocol_hash": fr.protocol.hash, "store": str(fr.store),
           "reference_store": str(fr.reference_store), **fidelity.to_dict()}
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path
