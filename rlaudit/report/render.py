"""Render a :class:`~rlaudit.report.model.Report` to HTML, Markdown, LaTeX and JSON.

Templates are Jinja2 files shipped as package data (``rlaudit/report/templates/``). Every value that
reaches a template is escaped for its format (HTML autoescape, :func:`md_escape`, :func:`tex_escape`), so
algorithm or task names such as ``<script>``, ``A&B``, ``50%_run`` or ``a|b`` cannot break the output;
formatted numbers are marked safe by the format's own filters.
"""

from __future__ import annotations

import base64
import io
import re
import unicodedata
from pathlib import Path

import jinja2
from markupsafe import Markup

from rlaudit.audit.inversions import KINDS
from rlaudit.audit.result import document_json
from rlaudit.audit.rows import decision_text
from rlaudit.report.escape import visible
from rlaudit.report.model import (
    SECTIONS,
    Report,
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
    text = visible(str(text).replace("\r", " ").replace("\n", " "))
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


# Combining accents that LaTeX writes as an accent command on the base letter (NFD decomposition).
_TEX_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u",
                "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c",
                "\u0328": "k"}
_TEX_LETTERS = {"\u00df": r"\ss{}", "\u00e6": r"\ae{}", "\u00c6": r"\AE{}", "\u0153": r"\oe{}", "\u0152": r"\OE{}",
                "\u00f8": r"\o{}", "\u00d8": r"\O{}", "\u0142": r"\l{}", "\u0141": r"\L{}", "\u0131": r"\i{}",
                "\u00a0": "~", "\u00b7": r"\textperiodcentered{}", "\u00b1": r"\ensuremath{\pm}",
                "\u00b0": r"\ensuremath{^\circ}", "\u2018": "`", "\u2019": "'", "\u2022": r"\textbullet{}"}


def _tex_char(ch: str) -> str:
    """One character for pdfLaTeX in any font encoding; what it cannot typeset becomes ``[U+XXXX]``."""
    if ch in _TEX_MAP:
        return _TEX_MAP[ch]
    if " " <= ch <= "~":
        return ch
    if ch in _TEX_LETTERS:
        return _TEX_LETTERS[ch]
    base, *marks = unicodedata.normalize("NFD", ch)
    if marks and ("A" <= base <= "Z" or "a" <= base <= "z") and all(m in _TEX_ACCENTS for m in marks):
        out = "\\i" if base == "i" else base  # dotless i under an accent, as LaTeX writes it
        for m in marks:
            cmd = _TEX_ACCENTS[m]
            out = f"\\{cmd}{{{out}}}"
        return out
    # Emoji, CJK, symbols: pdfLaTeX stops with "Unicode character not set up for use with LaTeX".
    return f"[U+{ord(ch):04X}]"


MAX_TEX_TEXT = 200
"""Longest value (in characters) written into ``tables.tex``; longer ones end in ``\\ldots``. TeX reads a
line into a fixed buffer (200,000 bytes in TeX Live), and a table cell that long is of no use in a paper."""


def tex_escape(text: str) -> str:
    """Escape text for pdfLaTeX in any font encoding: specials, Greek letters, dashes, accented Latin letters;
    any other character (emoji, CJK, bidi controls) is written as ``[U+XXXX]`` so the document compiles.
    Values longer than :data:`MAX_TEX_TEXT` characters are cut."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    cut = len(text) > MAX_TEX_TEXT
    text = text[: MAX_TEX_TEXT - 1] if cut else text
    return "".join(_tex_char(ch) for ch in text) + (r"\ldots{}" if cut else "")


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
        if isinstance(value, Markup):
            return value
        if escape is None:  # HTML: autoescape follows; bidi and control characters made visible first
            return visible(value) if isinstance(value, str) else value
        return Markup(escape("" if value is None else str(value)))

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlaudit.report", "templates"), autoescape=kind == "html",
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        finalize=finalize, **delims)
    env.filters.update(
        num=lambda x: safe(format_number(x)),
        ci=lambda iv: safe(format_interval(iv.point, iv.lo, iv.hi)) if iv is not None else safe("\u2013"),
        pval=lambda p: safe(format_p(p)),
        budget=lambda budget, unit=None: format_budget(budget, unit),
        metric=metric_name,
        raw=lambda x: "" if x is None else repr(float(x)),
        esc=lambda s: Markup(escape(str(s))) if escape else s,
        decision=decision_text,
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


def _inversion_rows(report: Report) -> list:
    """Inversions, findings first (in :data:`~rlaudit.audit.inversions.KINDS` order), then by pair and budgets."""
    return sorted(report.inversions, key=lambda i: (KINDS.index(i.kind), i.a, i.b, i.budget_low, i.budget_high))


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
        (out_dir / "audit.json").write_text(document_json(report.audit), encoding="utf-8")
        written.append(Path("audit.json"))
    return written
