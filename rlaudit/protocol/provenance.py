"""Where a protocol's settings come from: ``source`` references and declared ``deviations``.

An algorithm entry (and the protocol as a whole) may name the published source of its settings and list
every setting it does not reproduce::

    [[algorithms]]
    name = "C51"
    source = "JohanSamir/revisiting_rainbow@521a3c2:revisiting_rainbow/Configs/rainbow_breakout.gin"
    deviations = [{ key = "v_max", published = "100", here = "10", why = "..." }]

``rlaudit validate`` prints them and every report of the protocol's scores has a "Settings vs published"
table built from :func:`settings_rows`. Neither is part of the protocol's hash: they describe the runs, they
do not change them, so a store recorded before a deviation was declared still matches its protocol file.

Source forms (:func:`parse_source`; a list of them is accepted too):

- ``owner/repo@<commit>:path`` — a file of a GitHub repository at a commit (7-40 hex digits), optionally
  followed by ``#L10`` or ``#L10-L20``;
- ``arxiv:<id>, <where>`` — an arXiv paper and where in it (``Table 3``, ``Appendix B``);
- ``doi:<doi>, <where>``;
- ``<Authors> (<year>), <where>`` — a paper by citation, ``<where>`` starting with Table, Section,
  Appendix, Figure, Algorithm, Equation or page;
- ``https://…`` — a web page (documentation, a results table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlaudit.errors import InputError, did_you_mean

SETTING_KEYS: dict[str, str] = {
    "net": "the network (layers, widths, convolutions)",
    "init": "weight initialisation",
    "optimizer": "optimiser and its settings other than the learning rate",
    "loss": "the loss function",
    "gradient_clipping": "gradient-norm clipping",
    "exploration": "the exploration schedule",
    "warmup": "steps of uniform actions before learning starts",
    "replay": "replay buffer size or sampling",
    "target_update": "target-network updates",
    "n_step": "multi-step returns",
    "distribution": "the return distribution's support, atoms, quantiles or samples",
    "action_set": "the environment's action set",
    "sticky_actions": "sticky actions (repeat probability)",
    "episode_cap": "the episode time limit",
    "observation": "observation preprocessing",
    "reward": "reward preprocessing (clipping, scaling)",
    "env_version": "the environment's implementation or version",
    "evaluation": "how scores are measured (greedy evaluations, training returns, episodes, epsilon)",
    "budget": "training length",
    "seeds": "number of seeds",
    "implementation": "the code base (a reimplementation rather than the authors' code)",
    "tuning": "which tuned entry, search or task the settings were chosen for",
}
"""Setting names a deviation may use besides the algorithm's own hyperparameters and ``policy_kwargs`` keys."""

SOURCE_FORMS = ("'owner/repo@<commit>:path'", "'arxiv:<id>, Table N'", "'doi:<doi>, Table N'",
                "'Author (Year), Table N'", "'https://...'")
_GITHUB = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<commit>[0-9a-fA-F]{7,40}):(?P<path>[^\s#]+)"
                     r"(?:#(?P<lines>L\d+(?:-L\d+)?))?$")
_WHERE = r"(?:Table|Tab\.|Section|Sec\.|§|Appendix|App\.|Figure|Fig\.|Algorithm|Alg\.|Equation|Eq\.|page|p\.)\s*\S.*"
_ARXIV = re.compile(r"^arxiv:\s*(?P<id>\d{4}\.\d{4,5}(?:v\d+)?)\s*,\s*(?P<where>" + _WHERE + r")$", re.IGNORECASE)
_DOI = re.compile(r"^doi:\s*(?P<id>10\.\d{4,9}/\S+?)\s*,\s*(?P<where>" + _WHERE + r")$", re.IGNORECASE)
_PAPER = re.compile(r"^(?P<cite>\S.*?\(\d{4}[a-z]?\))\s*,\s*(?P<where>" + _WHERE + r")$")
_URL = re.compile(r"^https?://[^\s/]+\.[^\s]+$")


@dataclass(frozen=True)
class SourceRef:
    """One parsed ``source`` reference."""

    text: str
    """As written."""
    kind: str
    """``github``, ``arxiv``, ``doi``, ``paper`` or ``url``."""
    url: str | None = None
    """Where to read it (``None`` for a citation without an identifier)."""

    def to_dict(self) -> dict:
        """``{text, kind, url}`` for ``audit.json``."""
        return {"text": self.text, "kind": self.kind, "url": self.url}


@dataclass(frozen=True)
class Deviation:
    """One declared difference between the published setting and this protocol's."""

    key: str
    """The setting: a hyperparameter, a ``policy_kwargs`` key, or one of :data:`SETTING_KEYS`."""
    published: str
    """The published value, in words or as written there."""
    here: str
    """This protocol's value."""
    why: str
    """Why it differs."""

    def to_dict(self) -> dict:
        """``{key, published, here, why}``."""
        return {"key": self.key, "published": self.published, "here": self.here, "why": self.why}


def parse_one_source(text, where: str) -> SourceRef:
    """Parse one source reference (module docstring for the forms).

    Raises:
        InputError: it is not a string or matches no form (one line listing the forms).
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: must be a non-empty string, got {text!r}")
    s = text.strip()
    if m := _GITHUB.match(s):
        url = f"https://github.com/{m['repo']}/blob/{m['commit']}/{m['path']}" + (f"#{m['lines']}" if m["lines"] else "")
        return SourceRef(s, "github", url)
    if m := _ARXIV.match(s):
        return SourceRef(s, "arxiv", f"https://arxiv.org/abs/{m['id']}")
    if m := _DOI.match(s):
        return SourceRef(s, "doi", f"https://doi.org/{m['id']}")
    if _PAPER.match(s):
        return SourceRef(s, "paper", None)
    if _URL.match(s):
        return SourceRef(s, "url", s)
    hint = ""
    if "@" in s and ":" not in s.split("@", 1)[1]:
        hint = " (a repository reference needs ':path' after the commit)"
    elif "@" in s:
        hint = " (a repository reference is owner/repo@<7-40 hex digit commit>:path)"
    elif re.search(r"\(\d{4}[a-z]?\)", s):
        hint = " (a citation needs where in the paper after a comma: ', Table 3', ', Appendix B')"
    raise InputError(f"{where}: {s!r} does not parse as a source{hint}; expected one of {', '.join(SOURCE_FORMS)}")


def parse_source(value, where: str) -> tuple[SourceRef, ...]:
    """``source = "..."`` or ``source = ["...", ...]`` as a tuple of :class:`SourceRef` (``None``: empty)."""
    if value is None:
        return ()
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where}: an empty list; name at least one source or leave 'source' out")
        return tuple(parse_one_source(v, f"{where}[{i}]") for i, v in enumerate(value))
    return (parse_one_source(value, where),)


DEVIATION_KEYS = ("key", "published", "here", "why")


def parse_deviations(value, where: str, known=None) -> tuple[Deviation, ...]:
    """``deviations = [{key, published, here, why}, ...]`` as a tuple of :class:`Deviation`.

    Args:
        value: the array as written (``None``: none).
        where: file and field for errors.
        known: a callable ``key -> bool`` for keys beyond :data:`SETTING_KEYS` (the entry's hyperparameters);
            ``None`` accepts only :data:`SETTING_KEYS`.

    Raises:
        InputError: not an array of tables, a missing or unknown field, an unknown key (did-you-mean over
            the setting names), a key declared twice.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(f"{where}: must be an array of tables [{{ key, published, here, why }}, ...], "
                         f"got {type(value).__name__}")
    out: list[Deviation] = []
    for i, d in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(d, dict):
            raise InputError(f"{at}: must be a table {{ key, published, here, why }}, got {d!r}")
        for k in d:
            if k not in DEVIATION_KEYS:
                raise InputError(f"{at}: unknown field {k!r}{did_you_mean(k, DEVIATION_KEYS)}; a deviation has "
                                 f"{', '.join(DEVIATION_KEYS)}")
        fields = {}
        for k in DEVIATION_KEYS:
            v = d.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k in ("published", "here"):
                v = str(v)
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"{at}.{k}: missing or empty; a deviation says which setting (key), its published "
                                 f"value, the value here and why")
            fields[k] = v.strip()
        key = fields["key"]
        if key not in SETTING_KEYS and not (known and known(key)):
            raise InputError(f"{at}.key: unknown setting {key!r}{did_you_mean(key, SETTING_KEYS)}; use a "
                             f"hyperparameter or policy_kwargs key of the algorithm, or one of "
                             f"{', '.join(SETTING_KEYS)}")
        if any(x.key == key for x in out):
            raise InputError(f"{at}.key: {key!r} is declared twice; one deviation per setting")
        out.append(Deviation(**fields))
    return tuple(out)


def hyperparam_checker(name: str, hyperparams: dict, policy_kwargs: dict, at: str = ""):
    """``key -> bool`` accepting the entry's own settings first, then the algorithm's constructor parameters and
    ``policy_kwargs`` names; the registry is read only for a key the entry does not set. An unknown algorithm
    name is reported as the entry's name error (``<at>.name: unknown algorithm …``): the name is what is wrong."""
    def known(key: str) -> bool:
        if key in hyperparams or key in policy_kwargs:
            return True
        from rlaudit.algorithms import get_spec
        from rlaudit.algorithms.contract import constructor_params

        try:
            cls = get_spec(name).load()
        except InputError as exc:
            raise InputError(f"{at}.name: {exc}" if at else f"algorithm {name!r}: {exc}") from None
        return key in constructor_params(cls) or key in POLICY_KWARGS

    return known


POLICY_KWARGS = ("net_arch", "features_extractor", "features_extractor_class", "features_extractor_kwargs",
                 "optimizer_class", "optimizer_kwargs", "activation_fn", "normalize_images", "share_features_extractor")
"""``policy_kwargs`` keys a deviation may name without the entry setting them."""


def settings_rows(protocol) -> list[dict]:
    """The "Settings vs published" table of a protocol: one entry per algorithm, plus one for the protocol.

    Returns:
        ``[{algorithm, sources: [{text, kind, url}], deviations: [{key, published, here, why}]}]``; the
        protocol-wide entry has ``algorithm`` ``None``; entries with neither sources nor deviations are left
        out, so a protocol that declares nothing gives ``[]``.
    """
    rows = []
    top_sources = getattr(protocol, "source", ()) or ()
    top_devs = getattr(protocol, "deviations", ()) or ()
    if top_sources or top_devs:
        rows.append({"algorithm": None, "sources": [s.to_dict() for s in top_sources],
                     "deviations": [d.to_dict() for d in top_devs]})
    for a in getattr(protocol, "algorithms", ()):
        if a.source or a.deviations:
            rows.append({"algorithm": a.label, "sources": [s.to_dict() for s in a.source],
                         "deviations": [d.to_dict() for d in a.deviations]})
    return rows


def describe(protocol, echo) -> None:
    """Print the sources and deviations (``rlaudit validate``)."""
    rows = settings_rows(protocol)
    if not rows:
        echo("settings vs published: no source declared for any setting")
        return
    n = sum(len(r["deviations"]) for r in rows)
    echo(f"settings vs published: {n} declared deviation{'s' if n != 1 else ''}")
    for r in rows:
        who = r["algorithm"] or "all algorithms"
        srcs = "; ".join(s["text"] for s in r["sources"]) or "no source named"
        echo(f"  {who}: {srcs}")
        for d in r["deviations"]:
            echo(f"    {d['key']}: published {d['published']}, here {d['here']} ({d['why']})")
