"""Report figures (matplotlib Agg + seaborn style). Every function draws from a :class:`~rlaudit.report.model.Report`.

Conventions (model: rliable's ``plot_utils``): each function takes ``ax=None`` (or ``axes=None`` for
multi-panel figures), draws, and returns the figure; none calls ``plt.show()``. One colour *and* one marker
per algorithm across every figure (:func:`algorithm_styles`), from the Okabe–Ito colour-blind-safe palette,
so figures stay readable in greyscale print. Sizes are in inches for a paper: ``COLUMN`` (single column)
and ``TEXT`` (full text width of a two-column paper); fonts are 8 pt so they stay legible at that size.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from rlaudit.report.escape import visible  # noqa: E402
from rlaudit.report.model import LOWER_IS_BETTER, Report, format_budget, metric_name  # noqa: E402

COLUMN = 3.4
"""Single-column width of a two-column paper, inches."""
TEXT = 7.0
"""Full text width of a two-column paper, inches."""

# Okabe & Ito (2008), ordered so that the first colours are the most distinct; yellow last (weak on white).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")
DECISION_COLOURS = {"row": "#0072B2", "col": "#E69F00", "inconclusive": "#DDDDDD"}

RC = {
    "font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7.5, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.color": "#E6E6E6", "grid.linewidth": 0.6, "axes.axisbelow": True,
    "svg.hashsalt": "rlaudit", "svg.fonttype": "path", "pdf.fonttype": 42, "text.parse_math": False,
    "figure.dpi": 100, "savefig.dpi": 200, "axes.edgecolor": "#444444", "axes.linewidth": 0.7,
}


@contextmanager
def style():
    """Matplotlib settings used by every report figure (no global state leaks out)."""
    import seaborn as sns

    with plt.rc_context():
        sns.set_theme(context="paper", style="whitegrid", rc=RC)
        plt.rcParams.update(RC)
        yield


MAX_LABEL = 32
"""Longest algorithm name drawn in a figure; longer names are cut with "…" (the tables keep them whole).
Matplotlib lays out every character of a label: a 100,000-character name took minutes and gigabytes."""


def figure_labels(names) -> dict[str, str]:
    """``{name: label}``: names cut to :data:`MAX_LABEL` characters, made unique again when cuts collide,
    with invisible controls (bidi overrides) shown as ``[U+202E]``."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        label = visible(str(name))
        if len(label) > MAX_LABEL:
            label = label[: MAX_LABEL - 1] + "\u2026"
        base, k = label, 2
        while label in used:
            suffix = f" ({k})"
            label = base[: MAX_LABEL - len(suffix)] + suffix if len(base) + len(suffix) > MAX_LABEL else base + suffix
            k += 1
        used.add(label)
        out[name] = label
    return out


def algorithm_styles(algorithms) -> dict[str, dict]:
    """``{algorithm: {"color", "marker", "linestyle", "label"}}`` — the same for every figure of a report.

    Beyond eight algorithms colours repeat (seaborn's colour-blind palette extends them) but the marker
    differs, so every algorithm stays distinguishable. ``label`` is the name as drawn (:func:`figure_labels`).
    """
    import seaborn as sns

    # up to 8: Okabe-Ito; 9-10: seaborn's 10-colour colour-blind palette (distinct hues); more: colours
    # repeat, markers and line styles keep algorithms apart
    colours = list(OKABE_ITO) if len(algorithms) <= len(OKABE_ITO) else sns.color_palette("colorblind", 10).as_hex()
    styles = ("-", "--", "-.", ":")
    labels = figure_labels(algorithms)
    return {a: {"color": colours[i % len(colours)], "marker": MARKERS[i % len(MARKERS)],
                "linestyle": styles[(i // len(colours)) % len(styles)], "label": labels[a]}
            for i, a in enumerate(algorithms)}


OPEN_NOTE = "dashed arrow to the axis edge: no bounded interval on that side"
"""What an open-ended interval looks like, said on every figure that draws one."""


def _open_end(ax, edge, start, colour, transform) -> None:
    """A dashed arrow from ``start`` (data coordinates) to ``edge`` (in ``transform``'s coordinates, e.g. the
    axes' edge): an interval with no bound on that side."""
    ax.annotate("", xy=edge, xycoords=transform, xytext=start, textcoords="data", annotation_clip=False,
                arrowprops={"arrowstyle": "-|>", "linestyle": (0, (3, 2)), "color": colour, "lw": 1.0,
                            "shrinkA": 0, "shrinkB": 0, "mutation_scale": 7})


def _budget_axis(ax, report: Report, budgets) -> bool:
    """Log scale when budgets span more than a decade; ticks at the audited budgets, labelled for humans."""
    log = max(budgets) / max(min(budgets), 1e-300) > 10 and min(budgets) > 0
    if log:
        ax.set_xscale("log")
    ax.set_xticks(budgets)
    ax.set_xticklabels([format_budget(budget) for budget in budgets])
    ax.minorticks_off()
    ax.set_xlabel(f"Training budget ({report.unit})" if report.unit else "Training budget")
    return log


def _metric_label(report: Report, metric: str) -> str:
    norm = report.audit.get("settings", {}).get("normalization") or report.audit["data"].get("normalization")
    scale = "normalised score" if norm and norm != "none" else "score"
    return f"{metric_name(metric)} ({scale})"


def _legend(fig, report: Report, styles, **kw):
    handles = [Line2D([], [], color=styles[a]["color"], marker=styles[a]["marker"], lw=1.5, ms=4,
                      label=styles[a]["label"],
                      linestyle=styles[a]["linestyle"])
               for a in report.algorithms]
    ncol = min(len(handles), kw.pop("ncol", 6))
    return fig.legend(handles=handles, loc=kw.pop("loc", "upper center"), ncol=ncol, frameon=False,
                      bbox_to_anchor=kw.pop("bbox_to_anchor", (0.5, 1.0)), **kw)


def _axes_grid(n_panels, ncols, width, panel_h, axes=None, sharex=False, sharey=False, layout=None):
    if axes is not None:
        axes = np.atleast_1d(axes).ravel()
        return axes[0].figure, axes
    ncols = max(1, min(ncols, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, panel_h * nrows + 0.6), squeeze=False,
                             sharex=sharex, sharey=sharey, layout=layout)
    axes = axes.ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes


# ------------------------------------------------------------------------------------------------ figures
def plot_aggregates(report: Report, axes=None):
    """rliable-style interval estimates: one row of panels per budget, one panel per metric.

    Each algorithm is a horizontal bar spanning its confidence interval with a tick at the point estimate;
    panels in a column share their x axis so growth with the budget is visible down the column.

    Args:
        report: the report model.
        axes: ``(n_budgets * n_metrics,)`` axes to draw into, row-major; ``None`` creates a figure.

    Returns:
        The figure.
    """
    styles = algorithm_styles(report.algorithms)
    metrics, budgets, algs = report.metrics, report.budgets, report.algorithms
    n_alg = len(algs)
    panel_h = 0.22 * n_alg + 0.45
    fig, axes = _axes_grid(len(budgets) * len(metrics), len(metrics), TEXT, panel_h, axes, sharex="col")
    open_ends: list = []  # (axes, point, edge 0 / 1) of every unbounded end
    for bi, budget in enumerate(budgets):
        for mi, m in enumerate(metrics):
            ax = axes[bi * len(metrics) + mi]
            for ai, a in enumerate(algs):
                iv = report.aggregates.get((budget, a, m))
                if iv is None or iv.point is None:
                    continue
                y = n_alg - 1 - ai
                lo = iv.lo if iv.lo is not None else iv.point
                hi = iv.hi if iv.hi is not None else iv.point
                c = styles[a]["color"]
                ax.barh(y, hi - lo, left=lo, height=0.62, color=c, alpha=0.55, linewidth=0)
                # an unbounded end runs open to the axis edge: a point without a bar would look exact
                for end, edge in ((iv.lo, 0.0), (iv.hi, 1.0)):
                    if end is None:
                        open_ends.append((ax, iv.point, edge))
                        _open_end(ax, (edge, y), (iv.point, y), c, ax.get_yaxis_transform())
                # the point as the algorithm's marker: stays visible (and identifiable) when the CI is narrow;
                # never clipped by the axes
                ax.plot([iv.point], [y], marker=styles[a]["marker"], color=c, mec="black", mew=0.6, ms=4.5,
                        linestyle="", clip_on=False, zorder=4)
            ax.margins(x=0.08)
            ax.set_yticks(range(n_alg))
            ax.set_yticklabels([styles[a]["label"] for a in reversed(algs)] if mi == 0 else [])
            ax.set_ylim(-0.6, n_alg - 0.4)
            ax.grid(axis="y", visible=False)
            if bi == 0:
                ax.set_title(("Optimality gap \u2193" if m == "og" else metric_name(m))
                             + (" (lower is better)" if m in LOWER_IS_BETTER and m != "og" else ""))
            if mi == 0:
                ax.set_ylabel(report.budget(budget, unit=True), rotation=0, ha="right", va="center", labelpad=4,
                              fontweight="bold")
            if bi == len(budgets) - 1:
                ax.set_xlabel(_metric_label(report, m).replace(metric_name(m) + " ", "").strip("()").capitalize())
            ax.tick_params(axis="y", length=0)
    fig.suptitle(f"Aggregate performance with {report.audit['settings'].get('confidence', 0.95):.0%} "
                 "bootstrap CIs (bar: interval, marker: point estimate"
                 + (f";\n{OPEN_NOTE}" if open_ends else "") + ")", fontsize=8.5, y=0.995)
    for ax, point, edge in open_ends:  # room for the arrow: a point near the edge would hide a short one
        lo, hi = ax.get_xlim()
        room = 0.2 * (hi - lo)
        ax.set_xlim(lo, max(hi, point + room)) if edge else ax.set_xlim(min(lo, point - room), hi)
    fig.tight_layout(rect=(0, 0, 1, 0.94 if open_ends else 0.97), h_pad=0.6, w_pad=0.8)
    return fig


def plot_budget_curves(report: Report, metric: str | None = None, ax=None):
    """Metric against budget, one line per algorithm with its CI band; budgets of interest and crossovers marked.

    Args:
        report: the report model.
        metric: metric to plot (default: the audit's deciding metric).
        ax: axes to draw into; ``None`` creates a single-column figure.

    Returns:
        The figure.
    """
    metric = metric or report.metric
    styles = algorithm_styles(report.algorithms)
    if ax is None:
        fig, ax = plt.subplots(figsize=(COLUMN * 1.35, 2.9))
    else:
        fig = ax.figure
    budgets = list(report.budgets)
    open_ends: list = []  # (point, edge 0 / 1) of every unbounded end
    for budget in report.budgets_of_interest:
        ax.axvline(budget, color="#888888", linestyle=":", linewidth=1.0, zorder=0)
    for a in report.algorithms:
        pts = [(budget, report.aggregates.get((budget, a, metric))) for budget in budgets]
        pts = [(budget, iv) for budget, iv in pts if iv is not None and iv.point is not None]
        if not pts:
            continue
        xs = [budget for budget, _ in pts]
        s = styles[a]
        ax.plot(xs, [iv.point for _, iv in pts], color=s["color"], marker=s["marker"], ms=4, lw=1.5, label=s["label"],
                linestyle=s["linestyle"], clip_on=False, zorder=4)
        if len(pts) == 1:
            iv = pts[0][1]
            ax.errorbar(xs, [iv.point], yerr=[[0.0 if iv.lo is None else iv.point - iv.lo],
                                              [0.0 if iv.hi is None else iv.hi - iv.point]], color=s["color"],
                        capsize=3, linestyle="")
        elif len(pts) > 1:  # the band where both ends are bounded; an unbounded end opens to the axis edge
            bounded = [iv.lo is not None and iv.hi is not None for _, iv in pts]
            ax.fill_between(xs, [iv.point if iv.lo is None else iv.lo for _, iv in pts],
                            [iv.point if iv.hi is None else iv.hi for _, iv in pts], where=bounded,
                            interpolate=False, color=s["color"], alpha=0.18, linewidth=0)
        for x, iv in pts:
            for end, edge in ((iv.lo, 0.0), (iv.hi, 1.0)):
                if end is None:
                    open_ends.append((iv.point, edge))
                    _open_end(ax, (x, edge), (x, iv.point), s["color"], ax.get_xaxis_transform())
    log = _budget_axis(ax, report, budgets)
    # crossovers: where the point-estimate lines of a pair cross between two audited budgets
    marked = []
    for c in report.crossovers:
        if c.metric != metric:
            continue
        b0, b1 = c.last_budget_before, c.first_budget_after
        seg = [budget for budget in budgets if b0 <= budget <= b1]
        # place the marker where the point estimates actually cross, in the first segment that changes sign
        for lo_b, hi_b in zip(seg, seg[1:]):
            pa = [report.aggregates.get((budget, c.a, metric)) for budget in (lo_b, hi_b)]
            pb = [report.aggregates.get((budget, c.b, metric)) for budget in (lo_b, hi_b)]
            if None in pa or None in pb:
                continue
            d0, d1 = pa[0].point - pb[0].point, pa[1].point - pb[1].point
            if d0 * d1 > 0:
                continue
            t = d0 / (d0 - d1) if d0 != d1 else 0.5
            x0, x1 = (math.log10(lo_b), math.log10(hi_b)) if log else (lo_b, hi_b)
            x = x0 + t * (x1 - x0)
            marked.append((10 ** x if log else x, pa[0].point + t * (pa[1].point - pa[0].point)))
            break
    if marked:
        ax.scatter(*zip(*marked), s=70, facecolors="none", edgecolors="#CC0000", linewidths=1.3, zorder=5)
    ax.set_ylabel(_metric_label(report, metric))
    handles, labels = ax.get_legend_handles_labels()
    if report.budgets_of_interest:
        handles.append(Line2D([], [], color="#888888", linestyle=":", lw=1.0))
        labels.append("budget of interest")
    if marked:
        handles.append(Line2D([], [], marker="o", linestyle="", mfc="none", mec="#CC0000", ms=7))
        labels.append("crossover")
    for point, edge in open_ends:  # room for the arrow above (or below) its point
        lo, hi = ax.get_ylim()
        room = 0.2 * (hi - lo)
        ax.set_ylim(lo, max(hi, point + room)) if edge else ax.set_ylim(min(lo, point - room), hi)
    if open_ends:
        handles.append(Line2D([], [], color="#444444", linestyle=(0, (3, 2)), lw=1.0))
        labels.append("no bounded CI on that side")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{metric_name(metric)} vs budget (bands: {report.audit['settings'].get('confidence', 0.95):.0%} CI)")
    fig.tight_layout()
    return fig


def plot_rank_bump(report: Report, ax=None):
    """Bump chart of ranks per budget with rank uncertainty; algorithms in a confirmed inversion highlighted.

    The line follows the expected rank under the bootstrap rank distribution; the vertical bar spans the
    central 95 % of that distribution and grey dots show P(rank = k) by area. Pairs with a confirmed
    inversion are drawn thick, with the swap marked by a red bracket on the right.

    Args:
        report: the report model.
        ax: axes to draw into; ``None`` creates a figure.

    Returns:
        The figure.
    """
    styles = algorithm_styles(report.algorithms)
    budgets, algs = list(report.budgets), list(report.algorithms)
    n = len(algs)
    if ax is None:
        fig, ax = plt.subplots(figsize=(COLUMN * 1.35, 0.32 * n + 1.7))
    else:
        fig = ax.figure
    xs = np.arange(len(budgets))
    confirmed = [inv for inv in report.inversions if inv.kind == "confirmed"]
    inverted = {a for inv in confirmed for a in (inv.a, inv.b)}
    if len(inverted) > max(2, n // 2):
        inverted = set()  # thick lines only help when few algorithms are involved; the red circles remain
    expected: dict = {}
    has_dist = bool(report.ranks)
    lower = report.metric in LOWER_IS_BETTER
    for ai, a in enumerate(algs):
        s = styles[a]
        ys, los, his = [], [], []
        for bi, budget in enumerate(budgets):
            rs = report.ranks.get((budget, a))
            if rs is not None:
                ys.append(rs.expected)
                los.append(rs.lo)
                his.append(rs.hi)
                for k, p in enumerate(rs.probs):
                    if p >= 0.01:
                        ax.scatter(bi + (ai - (n - 1) / 2) * 0.04, k + 1, s=60 * p, color=s["color"], alpha=0.35,
                                   linewidths=0, zorder=1)
            else:
                pts = {x: report.aggregates.get((budget, x, report.metric)) for x in algs}
                order = sorted((x for x in algs if pts[x] is not None),
                               key=lambda x: pts[x].point if lower else -pts[x].point)
                r = order.index(a) + 1 if a in order else np.nan
                ys.append(r)
                los.append(r)
                his.append(r)
        offs = xs + (ai - (n - 1) / 2) * 0.04
        expected[a] = ys
        thick = a in inverted
        ax.plot(offs, ys, color=s["color"], marker=s["marker"], ms=5 if thick else 4, lw=2.6 if thick else 1.2,
                linestyle=s["linestyle"], alpha=1.0 if thick or not inverted else 0.75, zorder=3 if thick else 2,
                label=s["label"], clip_on=False)  # rank 1 and rank n sit on the axis limits: never cut a marker
        if has_dist:
            ax.vlines(offs, los, his, color=s["color"], lw=1.0, alpha=0.8, zorder=2)
    # confirmed inversions: a red circle where the pair's rank lines cross between the two budgets
    crossings = set()
    for inv in confirmed:
        a, b = inv.a, inv.b
        if a not in expected or b not in expected:
            continue
        lo_i = budgets.index(inv.budget_low) if inv.budget_low in budgets else None
        hi_i = budgets.index(inv.budget_high) if inv.budget_high in budgets else None
        if lo_i is None or hi_i is None:
            continue
        for i in range(lo_i, hi_i):
            d0 = expected[a][i] - expected[b][i]
            d1 = expected[a][i + 1] - expected[b][i + 1]
            if d0 * d1 <= 0 and d0 != d1:
                t = d0 / (d0 - d1)
                crossings.add((round(i + t, 3), round(expected[a][i] + t * (expected[a][i + 1] - expected[a][i]), 3)))
                break
    if crossings:
        ax.scatter(*zip(*sorted(crossings)), s=90, facecolors="none", edgecolors="#CC0000", linewidths=1.4, zorder=6)
    ax.set_xticks(xs)
    ax.set_xticklabels([format_budget(budget) for budget in budgets])
    ax.set_xlim(-0.4, len(budgets) - 0.6)
    ax.set_xlabel(f"Training budget ({report.unit})" if report.unit else "Training budget")
    ax.set_ylim(n + 0.5, 0.5)
    ax.set_yticks(range(1, n + 1))
    ax.set_ylabel("Rank (1 = best)")
    ax.grid(axis="x", visible=False)
    handles, labels = ax.get_legend_handles_labels()
    if inverted:
        handles.append(Line2D([], [], color="#555555", lw=2.6))
        labels.append("thick: in a confirmed\ninversion")
    if crossings:
        handles.append(Line2D([], [], marker="o", linestyle="", mfc="none", mec="#CC0000", ms=8))
        labels.append("confirmed inversion\n(ranks swap)")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    what = "expected rank, bars: 95% range" if has_dist else "rank of point estimates"
    ax.set_title(f"Rank by {metric_name(report.metric)} ({what})")
    fig.tight_layout()
    return fig


def plot_pairwise(report: Report, axes=None):
    """Pairwise decision matrices, one panel per budget.

    Cell (row, column) is coloured by the decision after error control (blue: row better, orange: column
    better, grey: inconclusive) and shows P(row > column), the probability of improvement.

    Args:
        report: the report model.
        axes: ``(n_budgets,)`` axes; ``None`` creates a figure.

    Returns:
        The figure.
    """
    algs, budgets = list(report.algorithms), list(report.budgets)
    n = len(algs)
    ncols = min(len(budgets), 3 if n > 4 else 4)
    panel = min(TEXT / ncols, 0.42 * n + 1.3)  # few budgets: keep cells about 0.4 in, not page-sized
    labels = list(figure_labels(algs).values())
    label_in = 0.055 * max(len(a) for a in labels) * 0.75 + 0.2  # rotated x labels under the last row
    nrows = math.ceil(len(budgets) / ncols)
    fig, axes = _axes_grid(len(budgets), ncols, max(panel * ncols, 3.0), panel * 0.85 + 0.25 + label_in / nrows,
                           axes, layout="constrained")
    cmap = ListedColormap([DECISION_COLOURS["col"], DECISION_COLOURS["inconclusive"], DECISION_COLOURS["row"]])
    fs = 7 if n <= 5 else 6 if n <= 8 else 5
    for bi, budget in enumerate(budgets):
        ax = axes[bi]
        grid = np.full((n, n), np.nan)
        text = [["" for _ in algs] for _ in algs]
        for i, r in enumerate(algs):
            for j, c in enumerate(algs):
                if i == j:
                    continue
                o = report.ordering(budget, r, c)
                if o is None:
                    continue
                row_first = o.a == r
                dec = o.decision if row_first else {"a>b": "b>a", "b>a": "a>b"}.get(o.decision, o.decision)
                grid[i, j] = {"a>b": 1, "b>a": -1}.get(dec, 0)
                p = o.p_improvement.point
                if p is not None:
                    text[i][j] = f"{p if row_first else 1 - p:.2f}"
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-1.5, vmax=1.5, aspect="auto")
        for i in range(n):
            for j in range(n):
                if text[i][j]:
                    dark = grid[i, j] == 1
                    ax.text(j, i, text[i][j], ha="center", va="center", fontsize=fs,
                            color="white" if dark else "black")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        has_below = bi + ncols < len(budgets)
        ax.set_xticklabels([] if has_below else labels, rotation=45, ha="right", fontsize=fs + 0.5)
        ax.set_yticklabels(labels if bi % ncols == 0 else [], fontsize=fs + 0.5)
        ax.grid(False)
        ax.tick_params(length=0)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.set_title(report.budget(budget, unit=True))
    fig.legend(title=f"Pairwise decision ({metric_name(report.metric)}, after error control); "
                     "numbers: P(row > column)",
               handles=[Patch(color=DECISION_COLOURS["row"], label="row > column"),
                        Patch(color=DECISION_COLOURS["col"], label="column > row"),
                        Patch(color=DECISION_COLOURS["inconclusive"], label="inconclusive")],
               loc="outside upper center", ncol=3, frameon=False)
    return fig


def plot_profiles(report: Report, axes=None):
    """Performance profiles (fraction of runs with score > τ) per budget, with CI bands.

    Args:
        report: the report model.
        axes: ``(n_budgets,)`` axes; ``None`` creates a figure.

    Returns:
        The figure.
    """
    styles = algorithm_styles(report.algorithms)
    budgets = [budget for budget in report.budgets if any((budget, a) in report.profiles for a in report.algorithms)]
    ncols = max(1, min(len(budgets), 3))
    single = len(budgets) <= 1
    fig, axes = _axes_grid(max(len(budgets), 1), ncols, COLUMN * 1.6 if single else TEXT,
                           2.9 if single else TEXT / ncols * 0.72, axes, sharey=True)
    norm = report.audit.get("settings", {}).get("normalization") or report.audit["data"].get("normalization")
    xlabel = "Normalised score τ" if norm and norm != "none" else "Score τ"
    for bi, budget in enumerate(budgets):
        ax = axes[bi]
        for a in report.algorithms:
            p = report.profiles.get((budget, a))
            if p is None:
                continue
            s = styles[a]
            ax.plot(p.taus, p.fraction, color=s["color"], lw=1.4, label=s["label"], marker=s["marker"], ms=3.5,
                    linestyle=s["linestyle"],
                    markevery=max(1, len(p.taus) // 6))
            if p.lo and p.hi:
                ax.fill_between(p.taus, p.lo, p.hi, color=s["color"], alpha=0.18, linewidth=0)
        # show tau up to where every profile has (nearly) reached zero: long tails squash the informative part
        ends = []
        for a in report.algorithms:
            p = report.profiles.get((budget, a))
            if p is not None and len(p.taus):
                hi_band = p.hi or p.fraction
                above = [t for t, f in zip(p.taus, hi_band) if f is not None and f > 0.02]
                ends.append(max(above) if above else p.taus[0])
        taus0 = [report.profiles[(budget, a)].taus[0] for a in report.algorithms if (budget, a) in report.profiles]
        if ends and taus0 and max(ends) > min(taus0):
            lo_t, hi_t = min(taus0), max(ends)
            ax.set_xlim(lo_t - 0.02 * (hi_t - lo_t), hi_t + 0.05 * (hi_t - lo_t))
        ax.set_title(report.budget(budget, unit=True))
        ax.set_xlabel(xlabel)
        ax.set_ylim(-0.02, 1.02)
        if bi % ncols == 0:
            ax.set_ylabel("Fraction of runs with score > τ")
    if single:
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.tight_layout()
    else:
        _legend(fig, report, styles)
        n_rows = math.ceil(len(budgets) / ncols)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (n_rows * TEXT / ncols * 0.72 + 0.6)))
    return fig


FIGURES = (
    ("aggregates", "Aggregate performance per budget", plot_aggregates),
    ("budget_curves", "Performance vs budget", plot_budget_curves),
    ("rank_bump", "Rankings across budgets", plot_rank_bump),
    ("pairwise", "Pairwise decisions per budget", plot_pairwise),
    ("profiles", "Performance profiles per budget", plot_profiles),
)
"""(file stem, caption, function) of every report figure."""
