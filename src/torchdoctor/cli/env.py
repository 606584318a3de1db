"""`torchdoctor env`: the facts of the environment that change training."""

from __future__ import annotations

import sys

import click

from torchdoctor.cli.shared import (
    emit,
    fail_on_option,
    format_option,
    guarded,
    parse_fail_on,
    show_internal_errors,
)


@click.command("env")
@format_option("text", ("text", "json", "html"))
@fail_on_option
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD01, TD705).")
@click.option("--ignore", multiple=True, help="Skip these codes or prefixes.")
@guarded
def env_command(
    output_format: str, fail_on: str, select: tuple[str, ...], ignore: tuple[str, ...]
) -> None:
    """Print the environment facts that change training (versions, devices, threads, flags)."""
    from torchdoctor.env import diagnose
    from torchdoctor.env.summary import render_env_summary

    report = diagnose(select=select or None, ignore=ignore or None)
    show_internal_errors(report)
    if output_format == "text":
        click.echo(render_env_summary(report.facts), nl=False)
    emit(report, output_format)
    sys.exit(report.exit_code(parse_fail_on(fail_on)))
