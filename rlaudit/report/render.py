"""Render a :class:`~rlaudit.report.model.Report` to HTML, Markdown, LaTeX and JSON.

Templates are Jinja2 files shipped as package data (``rlaudit/report/templates/``). Every value that
reaches a template is escaped for its format (HTML autoescape, :func:`md_escape`, :func:`tex_escape`), so
algorithm or task names such as ``<script>``, ``A&B``, ``50%_run`` or ``a|b`` cannot break the output;
formatted numbers are marked safe by the format's own filters.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import jinja2
from markupsafe import Markup

from rlaudit.report.model import (
    SECTIONS,
    Report,
    claim_status,
    format_budget,
    format_interval,
    format_number,
    format_p,
    metric_name,
)

FORMATS: tuple[str, ...] = ("html", "md", "tex", "json")
"""Output formats, with their files: ``index.html``, ``report.md``, ``tables.tex``, ``audit.json``."""
OUTPUT_FILES = {"html": "index.html", "md": "report.md", "tex": "tables.tex", "json": "audit.json"}


# --------------------------------------------------------------------------------------------- escaping
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~$])")


def md_escape(text: str) -> str:
    """Escape text for GitHub-flavoured Markdown, including inside table cells (``|`` -> ``\\|``)."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    # '<' would open raw HTML and '&' an entity; '>' is only special at the start of a line, which a
    # value never is (cells and list items start with '|' or '- ').
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


_TEX_MAP = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
    ">": r"\textgreater{}", "|": r"\textbar{}", "\u2013": "--", "\u2014": "---", "\u2026": r"\ldots{}",
    "\u201c": "``", "\u201d": "''", "\u2212": "-", "\u00d7": r"\ensuremath{\times}",
    "\u2193": r"\ensuremath{\downarrow}", "\u2265": r"\ensuremath{\geq}", "\u2264": r"\ensuremath{\leq}",
}
_GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau " \
         "upsilon phi chi psi omega".split()
for _i, _name in enumerate(_GREEK):
    _TEX_MAP[chr(0x3B1 + _i + (1 if _i >= 17 else 0))] = rf"\ensuremath{{\{_name}}}"
_TEX_MAP["\u03bf"] = "o"  # omicron has no macro
_TEX_MAP["\u03c2"] = r"\ensuremath{\varsigma}"
_TEX_MAP["\u03b5"] = r"\ensuremath{\varepsilon}"


def tex_escape(text: str) -> str:
    """Escape text for LaTeX (pdfLaTeX, T1 or OT1 fonts): specials, Greek letters and typographic dashes."""
    return "".join(_TEX_MAP.get(ch, ch) for ch in str(text))


def tex_number(text: str) -> str:
    """A formatted number for LaTeX: ``-`` -> ``$-$``, ``<`` -> ``$<$``, ``–`` (missing) -> ``--``."""
    return text.replace("-", "$-$").replace("<", "$<$").replace("\u2013", "--")


# --------------------------------------------------------------------------------------------- environments
def _environment(kind: str) -> jinja2.Environment:
    """Jinja environment for ``html``, ``md`` or ``tex`` with the format's escaping and number filters."""
    if kind == "tex":
        # LaTeX uses {, } and % everywhere: use delimiters that never occur in it.
        delims = dict(block_start_string="<%", block_end_string="%>", variable_start_string="<<",
                      variable_end_string=">>", comment_start_string="<#", comment_end_string="#>")
    else:
        delims = {}
    escape = {"html": None, "md": md_escape, "tex": tex_escape}[kind]
    safe = (lambda s: s) if kind == "html" else (lambda s: Markup(tex_number(s) if kind == "tex" else s))

    def finalize(value):
        if escape is None or isinstance(value, Markup):
            return value
        return Markup(escape("" if value is None else str(value)))

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlaudit.report", "templates"), autoescape=kind == "html",
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        finalize=finalize, **delims)
    env.filters.update(
        num=lambda x: safe(format_number(x)),
        ci=lambda iv: safe(format_interval(iv.point, iv.lo, iv.hi)) if iv is not None else safe("\u2013"),
        pval=lambda p: safe(format_p(p)),
        budget=lambda b, unit=None: format_budget(b, unit),
        metric=metric_name,
        claim_status=claim_status,
        raw=lambda x: "" if x is None else repr(float(x)),
        esc=lambda s: Markup(escape(str(s))) if escape else s,
    )
    return env


def render_text(report: Report, kind: str, figures: dict | None = None) -> str:
    """Render one text format (``html``, ``md`` or ``tex``) to a string.

    Args:
        report: the report model.
        kind: ``html``, ``md`` or ``tex``.
        figures: ``{stem: {"caption", "png", "svg", ...}}`` as written by :func:`write_figures`
            (``png``/``svg`` are bytes); HTML embeds the SVG, Markdown links the PNG files.
    """
    template = {"html": "report.html.j2", "md": "report.md.j2", "tex": "tables.tex.j2"}[kind]
    env = _environment(kind)
    figures = figures or {}
    data_uris = {}
    if kind == "html":
        for stem, f in figures.items():
            data_uris[stem] = "data:image/svg+xml;base64," + base64.b64encode(f["svg"]).decode("ascii")
    return env.get_template(template).render(
        r=report, sections=dict(SECTIONS), section_list=SECTIONS, figures=figures, data_uris=data_uris,
        pairs=_pairs(report), inversion_rows=_inversion_rows(report))


def _pairs(report: Report) -> list[tuple[str, str]]:
    """Pairs in the order of the audit's orderings (first budget)."""
    seen, out = set(), []
    for o in report.orderings:
        if (o.a, o.b) not in seen and o.metric == report.metric:
            seen.add((o.a, o.b))
            out.append((o.a, o.b))
    return out


def _inversion_rows(report: Report) -> list[dict]:
    order = {"confirmed": 0, "changed": 1, "decided_once": 2, "unconfirmed": 3}
    return sorted(report.inversions, key=lambda i: (order.get(i.get("kind"), 3), i["a"], i["b"],
                                                    int(i["budget_low"]), int(i["budget_high"])))


# --------------------------------------------------------------------------------------------- figures
def write_figures(report: Report, fig_dir: Path, pdf: bool = False, progress=None) -> dict:
    """Draw every figure and write ``<stem>.png`` and ``<stem>.svg`` (and ``.pdf``) into ``fig_dir``.

    Returns:
        ``{stem: {"caption", "png": bytes, "svg": bytes, "files": [names]}}``.
    """
    import matplotlib.pyplot as plt

    from rlaudit.report import plots

    fig_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    with plots.style():
        for stem, caption, fn in plots.FIGURES:
            fig = fn(report)
            try:
                entry = {"caption": caption, "files": []}
                kinds = [("png", {"metadata": {"Software": None}}), ("svg", {"metadata": {"Date": None}})]
                if pdf:
                    kinds.append(("pdf", {"metadata": {"CreationDate": None, "Producer": None}}))
                for ext, kw in kinds:
                    buf = io.BytesIO()
                    fig.savefig(buf, format=ext, **kw)
                    data = buf.getvalue()
                    (fig_dir / f"{stem}.{ext}").write_bytes(data)
                    entry[ext] = data
                    entry["files"].append(f"{stem}.{ext}")
                out[stem] = entry
            finally:
                plt.close(fig)
            if progress is not None:
                progress(stem)
    return out


def write_report(report: Report, out_dir: Path, formats=FORMATS, progress=None) -> list[Path]:
    """Write every requested format into ``out_dir`` (which the caller stages; see ``build_report``).

    Returns:
        The files written, relative to ``out_dir``.
    """
    out_dir = Path(out_dir)
    written: list[Path] = []
    figures = {}
    if {"html", "md", "tex"} & set(formats):
        figures = write_figures(report, out_dir / "figures", pdf="tex" in formats, progress=progress)
        written += [Path("figures") / name for f in figures.values() for name in f["files"]]
    for kind in ("html", "md", "tex"):
        if kind in formats:
            (out_dir / OUTPUT_FILES[kind]).write_text(render_text(report, kind, figures), encoding="utf-8")
            written.append(Path(OUTPUT_FILES[kind]))
            if progress is not None:
                progress(OUTPUT_FILES[kind])
    if "json" in formats:
        text = json.dumps(report.audit, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        (out_dir / "audit.json").write_text(text, encoding="utf-8")
        written.append(Path("audit.json"))
    return written
