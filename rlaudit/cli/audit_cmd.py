"""``rlaudit audit``: parse options, load the scores, run the audit, print the summary, write audit.json."""

from __future__ import annotations

import sys

import click

from rlaudit.cli.audit_opts import audit_from_options, audit_options
from rlaudit.cli.joined_opts import echo_agreement, published_option, with_published, write_document


@click.command("audit")
@click.argument("scores", metavar="SCORES")
@audit_options()
@click.option("--min-effect", metavar="D", help="Smallest difference of interest (deciding metric's units) for the "
              "runs-needed estimate (default: the observed difference).")
@click.option("--out", "out_dir", metavar="DIR", default=".", show_default=True, help="Folder for audit.json.")
@click.option("--quiet", "-q", is_flag=True, help="Do not print the summary.")
@click.option("--force", is_flag=True, help="Overwrite a DIR/audit.json that rlaudit did not write.")
@published_option
def audit(scores, fmt, data_dir, normalize, metric, budgets, claims_file, reps, reps_pairwise, seed, alpha,
          gamma, ci_method, correction, small_sample, min_effect, out_dir, quiet, force, published=None):
    """Audit SCORES (tidy CSV/Parquet, store, protocol or published format): aggregates with intervals,
    error-controlled orderings per budget, inversions between budgets, claim verdicts and a checklist.
    Writes DIR/audit.json; exit status 2 on bad input (nothing written)."""
    from rlaudit.audit.summary import render_summary
    from rlaudit.io import check_output_dir

    out = check_output_dir(out_dir, ("audit.json",), "--out", force=force, folder=False)

    result = audit_from_options(scores, fmt, data_dir, normalize, metric, budgets, claims_file, reps, reps_pairwise,
                                seed, alpha, gamma, ci_method, correction, small_sample, min_effect)
    doc = with_published(result, scores, published, data_dir, normalize, metric=metric, reps=reps,
                         reps_pairwise=reps_pairwise, seed=seed, alpha=alpha, gamma=gamma, ci_method=ci_method,
                         correction=correction, small_sample=small_sample)  # + published_agreement if joined
    path = write_document(doc, out / "audit.json")
    if not quiet:
        from rich.console import Console

        console = Console()
        render_summary(result, console if console.is_terminal else Console(width=140))
        echo_agreement(doc)
    click.echo(f"wrote {path}", err=True)
    sys.stdout.flush()
