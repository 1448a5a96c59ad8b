"""What a sweep's design can detect: the one-line ``design_power`` note and the sentence the verdict reads from it.

``bench/bench_audit_calibration.py --crossing-sd ... --note NOTES`` simulates audits of the sweep's design (its
tasks, budgets and algorithms) in which one algorithm leads the others by d between-run SD at the first budget
and trails by d at the last, and writes how often both orderings were decided as the sweep's note
``design_power`` (:mod:`rlaudit.store.notes`). The note is free text for the setup table; its measured cells
follow :func:`cells_text`, so that :func:`read_note` finds them again in an audit's notes and the verdict can
say, beside what changes between budgets (or that nothing does), how often this design would have found a
change. Nothing here measures anything.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LEAD = "What this design can detect, simulated with the audit's own steps"
"""How every design-power note begins: how a note is told from the others in ``meta.notes``."""

_ROW = re.compile(r"(\d+) runs a task: ((?:[a-z]+ \d+(?:\.\d+)? SD \d+ %(?:, |(?=[;( ]|$)))+)")
_CELL = re.compile(r"([a-z]+) (\d+(?:\.\d+)?) SD (\d+) %")


@dataclass(frozen=True)
class PowerCell:
    """One measured cell: with ``n_runs`` runs a task on data of ``shape``, a crossing of ``sd`` between-run SD
    was found in ``percent`` % of the simulated audits (rounded as the note prints it)."""

    n_runs: int
    shape: str
    sd: float
    percent: int


def cells_text(cells: Iterable[PowerCell], shape_order: Sequence[str]) -> str:
    """The note's measured part: ``"3 runs a task: gamma 1 SD 0 %, ...; 5 runs a task: ..."``, by run count,
    then shape in ``shape_order``, then size."""
    by_runs: dict[int, list[PowerCell]] = defaultdict(list)
    for cell in cells:
        by_runs[cell.n_runs].append(cell)
    return "; ".join(f"{n} runs a task: " + ", ".join(
        f"{c.shape} {c.sd:g} SD {c.percent} %"
        for c in sorted(by_runs[n], key=lambda c: (shape_order.index(c.shape), c.sd))) for n in sorted(by_runs))


def read_note(notes: Iterable[str]) -> tuple[PowerCell, ...]:
    """The measured cells of the design-power note among ``notes`` (none when there is no such note)."""
    for note in notes:
        if note.startswith(LEAD):
            return tuple(PowerCell(int(n), shape, float(sd), int(pct))
                         for n, row in _ROW.findall(note) for shape, sd, pct in _CELL.findall(row))
    return ()


def power_sentence(cells: Sequence[PowerCell], n_runs: int) -> str:
    """What the verdict says beside its answer for an audit whose fewest runs a task is ``n_runs``: the measured
    row at the largest run count up to ``n_runs`` (else the smallest measured; the sentence names ``n_runs``) and the
    largest measured row, each size as the range over the measured shapes; "" without cells."""
    if not cells:
        return ""
    counts = sorted({c.n_runs for c in cells})
    here = max((n for n in counts if n <= n_runs), default=counts[0])
    sizes = sorted({c.sd for c in cells})
    shapes = list(dict.fromkeys(c.shape for c in cells))

    def row(n: int) -> str:
        ranges = []
        for sd in sizes:
            found = [c.percent for c in cells if c.n_runs == n and c.sd == sd]
            lo, hi = min(found, default=None), max(found, default=None)
            ranges.append("–" if lo is None else f"{lo}" if lo == hi else f"{lo}–{hi}")
        return " / ".join(ranges) + " %"

    fewest = "the fewest here" if here == n_runs else f"the fewest here are {n_runs}"
    tail = f"range over the shapes {', '.join(shapes)}; the note in section 2"
    more = f" and in {row(counts[-1])} with {counts[-1]} ({tail})" if counts[-1] != here else ""
    return (f"a crossing of {' / '.join(f'{sd:g}' for sd in sizes)} between-run SD (one algorithm ahead at the "
            f"first budget, behind at the last) is found in {row(here)} of simulated audits of this design with "
            f"{here} runs a task ({fewest}{'' if more else '; ' + tail}){more}")
