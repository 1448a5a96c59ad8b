"""Names as every output format may show them: invisible controls made visible.

A name comes from a user's file and can hold anything. Bidirectional controls (U+202E RIGHT-TO-LEFT
OVERRIDE and its kin) reorder the text around them, so a name with one displays as another name; C0 control
characters are invalid in XML/HTML and break tables. Every report format (HTML, Markdown, LaTeX, figures)
shows them as ``[U+202E]`` instead: nothing is silently dropped, nothing spoofs.
"""

from __future__ import annotations

import re

_INVISIBLE = re.compile("[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]")


def visible(text: str) -> str:
    """``text`` with bidi and control characters replaced by ``[U+XXXX]`` (tabs and newlines kept)."""
    return _INVISIBLE.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(text))
