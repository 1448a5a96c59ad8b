"""``rlaudit report``: parse options, audit SOURCE first unless it is an ``audit.json``, write the report."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rlaudit.cli.audit_opts import audit_options
from rlaudit.cli.joined_opts import published_option
from rlaudit.errors import InputError
from rlaudit.io import loads_nested


def _read_audit_json(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        doc = loads_nested(json.loads, text, str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON (line {getattr(exc, 'lineno', '?')}: {getattr(exc, 'msg', exc)})") \
            from None
    from rlaudit.audit.result import AuditResult

    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise InputError(f"{path}: not an rlaudit audit.json (no schema_version); for a published score file "
                         "pass --from FORMAT (dopamine, rliable, curves, …)")
    AuditResult.from_dict(doc, str(path))  # validates; the document itself is kept (new optional keys too)
    return doc


def _audit_first(source_path, published=None, **options) -> dict:
    """Audit SOURCE exactly as ``rlaudit audit`` does with the same options; return the audit document."""
    from rlaudit.cli.audit_opts import audit_from_options
    from rlaudit.cli.joined_opts import with_published

    result = audit_from_options(source_path, **options)
    joined = {k: v for k, v in options.items() if k not in ("fmt", "data_dir", "normalize", "budgets", "claims_file")}
    return with_published(result, source_path, published, options.get("data_dir"), options.get("normalize"), **joined)


@click.command("report")
@click.argument("source", metavar="SOURCE")
@click.option("-o", "--out", "out_dir", metavar="DIR", required=True, help="Folder for the report (created).")
@click.option("--format", "formats", metavar="F1,F2", default="html,md,tex,json", show_default=True,
              help="Outputs: html (index.html), md (report.md), tex (tables.tex), json (audit.json).")
@click.option("--title", metavar="TEXT", help="Report title (default: from the source).")
@click.option("--force", is_flag=True, help="Write into a folder that holds files but no earlier rlaudit report.")
@audit_options(format_flag="--from")
@published_option
def report(source, out_dir, formats, title, force, fmt, data_dir, normalize, metric, budgets, claims_file, reps,
           reps_pairwise, seed, alpha, gamma, ci_method, correction, small_sample, published=None):
    """Write an audit report of SOURCE into DIR: index.html (self-contained), report.md, tables.tex
    (booktabs), audit.json and figures/ (PNG, SVG, PDF).

    SOURCE is an audit.json (rendered as is; audit options are then refused) or anything `rlaudit audit`
    reads: a tidy score file, a store, a protocol or a published-format path, which is audited first with
    the audit options. Nothing is written to DIR when any step fails (exit status 2 on bad input)."""
    from rlaudit.report import OUTPUT_FILES, build_report, check_output_dir, parse_formats

    formats = parse_formats(formats)
    check_output_dir(out_dir, OUTPUT_FILES.values(), force=force)  # before the audit, which may take minutes
    path = Path(source)
    audit_opts = {"--from": fmt, "--data": data_dir, "--normalize": normalize, "--metric": metric,
                  "--budgets": budgets, "--claims": claims_file, "--reps": reps, "--reps-pairwise": reps_pairwise,
                  "--seed": seed, "--alpha": alpha, "--gamma": gamma, "--ci-method": ci_method,
                  "--correction": correction, "--small-sample": small_sample or None, "--published": published}
    if path.suffix.lower() == ".json" and fmt is None:
        given = [k for k, v in audit_opts.items() if v is not None]
        if given:
            raise InputError(f"{', '.join(given)}: {path} is already an audit result; audit options apply only "
                             "when SOURCE is scores, a store or a protocol (re-run the audit instead)")
        if not path.exists():
            raise InputError(f"{path}: no such file")
        audit, where = _read_audit_json(path), str(path)
    else:
        where = "audit.json"  # computed here, not read from a file
        audit = _audit_first(source, fmt=fmt, data_dir=data_dir, normalize=normalize, metric=metric, budgets=budgets,
                             claims_file=claims_file, reps=reps, reps_pairwise=reps_pairwise, seed=seed, alpha=alpha,
                             gamma=gamma, ci_method=ci_method, correction=correction, small_sample=small_sample,
                             published=published)

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rlaudit.report.plots import FIGURES

    n_steps = (len(FIGURES) if {"html", "md", "tex"} & set(formats) else 0) + len({"html", "md", "tex"} & set(formats))
    console = Console(stderr=True)
    with Progress(TextColumn("rendering report"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("render", total=max(n_steps, 1))
        files = build_report(audit, out_dir, formats, title=title, progress=lambda _name: bar.advance(task),
                             where=where, force=force)
    for f in files:
        if f.parent.name != "figures":
            click.echo(f"wrote {f}", err=True)
    n_fig = sum(f.parent.name == "figures" for f in files)
    if n_fig:
        click.echo(f"wrote {n_fig} figure files to {Path(out_dir) / 'figures'}", err=True)
