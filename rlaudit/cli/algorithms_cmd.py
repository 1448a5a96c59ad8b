"""``rlaudit algorithms``: list registered algorithms, or ``show NAME`` with its hyperparameters."""

from __future__ import annotations

import inspect
import json

import click

from rlaudit.errors import InputError


def _fmt(value) -> str:
    if value is inspect.Parameter.empty:
        return "(required)"
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def _rows() -> list[tuple[str, str, str, str, str, str, str]]:
    from rlaudit.algorithms import list_specs
    from rlaudit.fidelity.status import FidelityStatus, load_status, status_text

    statuses = load_status()
    rows = []
    for spec in list_specs():
        backends = ",".join(spec.backends)
        fidelity = status_text(statuses.get(spec.name, FidelityStatus(spec.name, "not checked"))) \
            if not spec.is_plugin else "-"
        try:
            rows.append((spec.name, spec.kind, ",".join(sorted(spec.action_spaces)), backends, spec.source, fidelity,
                         spec.description))
        except InputError as exc:  # a broken plugin is listed, not fatal
            rows.append((spec.name, "?", "?", backends, spec.source, fidelity, f"cannot load: {exc}"))
    return rows


def _print_list() -> None:
    rows = [("NAME", "KIND", "ACTION SPACES", "BACKENDS", "SOURCE", "FIDELITY", "DESCRIPTION"), *_rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:6], widths)) + "  " + row[6])


@click.group(invoke_without_command=True)
@click.pass_context
def algorithms(ctx: click.Context) -> None:
    """List registered algorithms (built-in and plugins), or show one with `show NAME`."""
    if ctx.invoked_subcommand is None:
        _print_list()


@algorithms.command("list")
def list_cmd() -> None:
    """List every algorithm with its kind, action spaces and source."""
    _print_list()


@algorithms.command("show")
@click.argument("name")
def show(name: str) -> None:
    """Print NAME's entry point, source, action spaces and hyperparameters with their defaults."""
    from rlaudit.algorithms import get_spec

    spec = get_spec(name)
    params = spec.hyperparameters()  # loads the class: an import failure is an InputError naming the plugin
    click.echo(f"name:          {spec.name}")
    click.echo(f"description:   {spec.description}")
    click.echo(f"entry point:   {spec.entry_point}")
    click.echo(f"kind:          {spec.kind}")
    click.echo(f"source:        {spec.source}")
    click.echo(f"action spaces: {', '.join(sorted(spec.action_spaces))}")
    click.echo(f"backends:      {', '.join(spec.backends)} (protocol field `backend`; docs/backends.md)")
    if not spec.is_plugin:
        from rlaudit.fidelity.status import fidelity_status, status_text

        status = fidelity_status(spec.name)
        click.echo(f"fidelity:      {status_text(status)}" + (f" ({status.reference_version}; {status.detail})"
                                                              if status.checked else ""))
    click.echo("hyperparameters (* = rlaudit default, overriding the class's):")
    width = max((len(k) for k in params), default=0)
    for key, value in params.items():
        mark = "*" if key in spec.defaults else " "
        text = _fmt(value)
        if spec.kind == "sb3" and key == "policy" and key not in spec.defaults:
            text = "(from the observation space: CnnPolicy for images, else MlpPolicy)"
        elif spec.kind == "sb3" and key == "device" and value == "auto":
            text = '"cpu" (rlaudit runs on the CPU unless a protocol sets device)'
        click.echo(f"  {mark} {key.ljust(width)}  {text}")
    if spec.kind == "sb3":
        click.echo("policy_kwargs: passed to the SB3 policy (protocol field `policy_kwargs`)")
