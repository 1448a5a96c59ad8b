"""``--published`` for ``rlaudit audit`` / ``report``: join a rerun's audit with the published audit it reruns.

The rerun side is what the user audits (a store, a rerun protocol, scores); the published side is the
protocol named by ``--published``, or recorded in the store's protocol (``[rerun_of]``) when the store was
made by ``rlaudit run PUBLISHED.toml --suite …``. The join adds ``published_agreement`` to the audit
document (:mod:`rlaudit.audit.joined`).
"""

from __future__ import annotations

from pathlib import Path

import click

from rlaudit.errors import InputError


def published_option(f):
    """Add ``--published PROTOCOL`` to a command."""
    return click.option("--published", "published", metavar="PROTOCOL", default=None,
                        help="Published protocol this rerun reruns: add the published-vs-rerun agreement (default: "
                             "the one recorded in the store's protocol, if any).")(f)


def _rerun_of(scores: str) -> dict | None:
    """The ``[rerun_of]`` table of the protocol behind ``scores`` (a store or a rerun protocol), if any."""
    from rlaudit.sources import STORE_SUFFIXES, store_protocol

    path = Path(scores)
    if path.suffix.lower() in STORE_SUFFIXES and path.is_file():
        return store_protocol(path).rerun_of
    if path.suffix.lower() == ".toml" and path.is_file():
        from rlaudit.protocol import load_protocol

        p = load_protocol(path)
        return None if p.is_published else p.rerun_of
    return None


def with_published(result, scores: str, published: str | None, data_dir=None, normalize=None, **audit_opts) -> dict:
    """``result.to_dict()``, plus ``published_agreement`` when a published protocol is named or recorded.

    Args:
        result: the rerun's :class:`~rlaudit.audit.AuditResult`.
        scores: what the user audited.
        published: ``--published`` (``None``: from the store's ``[rerun_of]``, else no join).
        data_dir: ``--data``, the published protocol's data folder.
        normalize: ``--normalize`` (applies to the rerun side; the published side uses its protocol's).
        audit_opts: the other audit option strings (``metric``, ``reps``, ``seed``, …), applied to both sides.
    """
    doc = result.to_dict()
    rerun_of = _rerun_of(scores)
    if published is None and rerun_of is None:
        return doc
    from rlaudit.audit.joined import joined_table, mapping_from, published_agreement
    from rlaudit.cli.audit_opts import audit_from_options
    from rlaudit.protocol import load_protocol
    from rlaudit.sources import load_source

    if published is None:
        published = rerun_of["protocol"]
        if not Path(published).is_file():
            raise InputError(f"{scores}: reruns the published protocol {published}, which is not found from here; "
                             f"pass --published PATH")
    protocol = load_protocol(published)
    if not protocol.is_published:
        raise InputError(f"--published: {published} is a rerun protocol; name the published protocol ([data]) "
                         f"that the scores rerun")
    mapping = mapping_from(protocol, rerun_of, scores)
    opts = {k: v for k, v in audit_opts.items() if k != "budgets"}  # --budgets picks rerun budgets only
    published_doc = audit_from_options(published, data_dir=data_dir, **opts).to_dict()
    pub_table = _normalized(load_source(published, data_dir=data_dir), None)
    rerun_table = _normalized(load_source(scores), normalize)
    settings = doc["settings"]
    agreement = published_agreement(
        joined_table(pub_table, rerun_table), mapping, published_doc, doc,
        {"protocol": str(published), "name": protocol.name, "title": protocol.title,
         "implementation": (protocol.rerun or {}).get("implementation")
                           or f"{protocol.data.get('format')} data of {protocol.name}",
         "suite": (rerun_of or {}).get("suite") or doc["source"].get("protocol") or str(scores),
         "published_suite": published_suite(protocol)},
        reps=int(settings.get("reps_pairwise", 2000)), seed=int(settings.get("seed", 0)),
        confidence=float(settings.get("confidence", 0.95)))
    doc["published_agreement"] = agreement
    return doc


def published_suite(protocol) -> str | None:
    """The suite of a published protocol's runs: its ``[rerun] published_suite``, else ``atari`` for data
    normalised with the Atari references, else unknown (``None``)."""
    suite = (protocol.rerun or {}).get("published_suite")
    if suite:
        return str(suite)
    norm = protocol.normalization
    method = norm.get("method") if isinstance(norm, dict) else norm
    return "atari" if isinstance(method, str) and method.strip().lower() == "atari" else None


def _normalized(source, flag):
    """The source's table normalised as the audit normalises it (``--normalize``, else its protocol's)."""
    from rlaudit.stats.normalize import normalize, parse_normalization

    spec, where = (flag, "--normalize") if flag is not None else (source.normalization,
                                                                  f"{source.path}: [normalization]")
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none") or source.table.meta.normalized:
        return source.table
    norm = parse_normalization(spec, where, Path(source.path).parent)
    return normalize(source.table, norm) if norm.method != "none" else source.table


def write_document(doc: dict, path: Path) -> Path:
    """Write an audit document (with optional keys) atomically, as ``AuditResult.write_json`` does."""
    from rlaudit.audit.result import document_json
    from rlaudit.io import atomic_write_text

    atomic_write_text(path, document_json(doc))
    return path


def echo_agreement(doc: dict, echo=click.echo) -> None:
    """Print the published-vs-rerun summary (nothing when the document has none)."""
    from rlaudit.audit.rows import PublishedAgreement

    if not doc.get("published_agreement"):
        return
    pa = PublishedAgreement.from_dict(doc["published_agreement"])
    echo(f"published vs rerun ({pa.name} -> {pa.suite}): {pa.caveat}")
    for s in pa.summary:
        echo(f"  rerun budget {s.budget:,}: {s.holds} hold, {s.reversed} reversed, {s.inconclusive} "
             f"inconclusive, {s.not_rerun} not rerun (of {len(pa.orderings)} decided published orderings)")
    last = max(pa.published_budgets) if pa.published_budgets else None
    for r in pa.ranks:
        if r.published_budget == last:
            tau = "undefined" if r.tau.point is None else f"{r.tau.point:.2f}"
            ci = "" if r.tau.lo is None or r.tau.hi is None else f" [{r.tau.lo:.2f}, {r.tau.hi:.2f}]"
            echo(f"  Kendall tau, published {last:,} vs rerun {r.rerun_budget:,}: {tau}{ci}")
    if pa.not_rerun:
        echo(f"  not rerun: {', '.join(pa.not_rerun)}")
