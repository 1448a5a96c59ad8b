"""Audit reports: HTML, Markdown, LaTeX and JSON, with seaborn/matplotlib figures.

The report stage renders an audit result (``audit.json``, :mod:`rlaudit.audit`) and never recomputes
statistics. :func:`build_report` is the Python entry point behind ``rlaudit report``::

    from rlaudit.report import build_report
    build_report(audit_dict, "reports/my-audit")          # index.html, report.md, tables.tex, audit.json, figures/

Stages inside: :mod:`~rlaudit.report.model` turns the document into plain objects,
:mod:`~rlaudit.report.plots` draws the figures, :mod:`~rlaudit.report.render` fills the Jinja2 templates.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.io import atomic_dir, check_output_dir
from rlaudit.report.model import Report, build_model, format_budget
from rlaudit.report.render import FORMATS, OUTPUT_FILES

__all__ = ["FORMATS", "OUTPUT_FILES", "Report", "build_model", "build_report", "check_output_dir", "format_budget",
           "parse_formats"]


def parse_formats(formats: str | Iterable[str], where: str = "--format") -> tuple[str, ...]:
    """``"html,md"`` or ``["html", "md"]`` -> ``("html", "md")``; raises :class:`InputError` on unknown names."""
    from rlaudit.errors import did_you_mean

    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out = []
    for f in (str(x).strip().lower() for x in items):
        if not f:
            continue
        if f not in FORMATS:
            raise InputError(f"{where}: unknown format {f!r}{did_you_mean(f, FORMATS)}; choose from "
                             f"{', '.join(FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise InputError(f"{where}: no format given; choose from {', '.join(FORMATS)}")
    return tuple(out)


def build_report(audit: dict, out_dir: str | os.PathLike, formats: str | Iterable[str] = FORMATS,
                 title: str | None = None, progress: Callable[[str], None] | None = None,
                 where: str = "audit.json", force: bool = False) -> list[Path]:
    """Write a report of ``audit`` into ``out_dir``; all or nothing.

    Args:
        audit: the ``audit.json`` document (``AuditResult.to_dict()``).
        out_dir: output directory, created if needed. Files of a previous report there are replaced.
        formats: any of ``html`` (``index.html``), ``md`` (``report.md``), ``tex`` (``tables.tex``) and
            ``json`` (``audit.json``); figures go to ``figures/`` whenever a text format is asked for.
        title: report title (default: from the audit's source).
        progress: called with the name of each figure or file once written.
        where: name of the document in error messages (its file).
        force: write into a non-empty folder that holds no earlier rlaudit report (see
            :func:`check_output_dir`).

    Returns:
        Paths of the written files (absolute).

    Raises:
        InputError: when the audit document cannot be read, a format is unknown, or ``out_dir`` cannot be
            written or is refused by :func:`check_output_dir`. Nothing is left in ``out_dir`` when any step
            fails (a directory created for the report is removed again).
    """
    from rlaudit.report.render import write_report

    formats = parse_formats(formats)
    report = build_model(audit, title=title, where=where)
    out = check_output_dir(out_dir, OUTPUT_FILES.values(), force=force)
    created = not out.exists()
    try:
        with atomic_dir(out) as stage:
            written = write_report(report, stage, formats, progress=progress)
    except BaseException:
        if created and out.is_dir():
            shutil.rmtree(out, ignore_errors=True)
        raise
    return [out / p for p in written]
