"""`torchdoctor rules` and `torchdoctor explain`: the catalogue of problems."""

from __future__ import annotations

import click

from torchdoctor.cli.shared import (
    format_option,
    guarded,
)


@click.command("rules")
@format_option("text", ("text", "json"))
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD2, TD201).")
@guarded
def rules_command(output_format: str, select: tuple[str, ...]) -> None:
    """List every rule: code, name, severity, depths, summary."""
    from torchdoctor.rules.catalogue_view import render_rules_json, render_rules_text
    from torchdoctor.rules.selection import Selection

    selection = Selection.from_options(select or None)
    render_rules = render_rules_json if output_format == "json" else render_rules_text
    click.echo(render_rules(selection), nl=False)


@click.command("explain")
@click.argument("code")
@guarded
def explain_command(code: str) -> None:
    """Print the documentation of one rule (by code, e.g. TD201, or by name)."""
    from torchdoctor.rules.catalogue_view import explain

    click.echo(explain(code), nl=False)
