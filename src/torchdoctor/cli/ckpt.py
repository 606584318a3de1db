"""`torchdoctor ckpt`: a checkpoint read without unpickling untrusted code."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchdoctor.cli.shared import (
    emit,
    fail_on_option,
    format_option,
    guarded,
    parse_fail_on,
    show_internal_errors,
)


@click.command("ckpt")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--model",
    "model_spec",
    metavar="SPEC",
    default=None,
    help="Compare with the model built by 'pkg.module:factory' or "
    "'path/to/file.py:factory' (the factory may also return what `check` takes).",
)
@click.option(
    "--write-remapped",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUT",
    help="With --model: write a copy with keys renamed to fit the model; written "
    "only if it then loads with strict=True.",
)
@click.option(
    "--diff",
    "other",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OTHER",
    help="Compare with a second checkpoint, tensor by tensor.",
)
@click.option(
    "--trust",
    is_flag=True,
    help="Load with weights_only=False. Unpickling runs whatever code the file "
    "names: use it only for files from a source you trust.",
)
@click.option("--force", is_flag=True, help="With --write-remapped: replace an existing file.")
@format_option("text", ("text", "json", "html"))
@fail_on_option
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD9, TD910).")
@click.option("--ignore", multiple=True, help="Skip these codes or prefixes.")
@guarded
def ckpt_command(
    file: Path,
    model_spec: str | None,
    write_remapped: Path | None,
    other: Path | None,
    trust: bool,
    force: bool,
    output_format: str,
    fail_on: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
) -> None:
    """Inspect a checkpoint safely; compare it with a model, remap its keys, diff it."""
    from torchdoctor.ckpt import diagnose, load_model
    from torchdoctor.ckpt.summary import render_ckpt_summary
    from torchdoctor.outputs import checked_output, target_file

    checked_output(
        write_remapped,
        "--write-remapped",
        refuse_existing=True,
        force=force,
        inputs=(file, other, target_file(model_spec) if model_spec else None),
    )
    model = load_model(model_spec) if model_spec else None
    report = diagnose(
        file,
        model=model,
        trust=trust,
        write_remapped=write_remapped,
        diff=other,
        select=select or None,
        ignore=ignore or None,
    )
    show_internal_errors(report)
    if output_format == "text":
        click.echo(render_ckpt_summary(report.facts), nl=False)
    emit(report, output_format)
    sys.exit(report.exit_code(parse_fail_on(fail_on)))
