"""`torchdoctor demo`: every depth on a bundled buggy script."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchdoctor.cli.shared import (
    EXIT_CLEAN,
    emit,
    format_option,
    guarded,
    terminal_width,
)


@click.command("demo")
@click.option(
    "--steps",
    default=40,
    show_default=True,
    type=click.IntRange(2, 10_000),
    help="Optimizer steps the runtime section lets the script take.",
)
@format_option("text", ("text", "json"))
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the combined report as one HTML page.",
)
@guarded
def demo_command(steps: int, output_format: str, html_path: Path | None) -> None:
    """Run every depth on a bundled buggy training script and show what each finds."""
    from torchdoctor.demo import run_demo
    from torchdoctor.demo.view import render_demo

    result = run_demo(run_steps=steps)
    if html_path is not None:
        emit(result.combined, "html", html_path, title="torchdoctor demo")
    if output_format == "json":
        emit(result.combined, "json")
    else:
        click.echo(
            render_demo(
                result,
                width=terminal_width() if sys.stdout.isatty() else 100,
                color=sys.stdout.isatty(),
            ),
            nl=False,
        )
    sys.exit(EXIT_CLEAN)
