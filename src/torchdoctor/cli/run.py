"""`torchdoctor run`: a script watched while it trains, alone or across ranks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from torchdoctor.cli.shared import (
    FAIL_ON_CHOICES,
    emit,
    format_option,
    guarded,
    parse_fail_on,
    report_file_format,
    show_internal_errors,
)
from torchdoctor.findings import Report


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "-m", "as_module", is_flag=True, help="TARGET is a module name, run like `python -m TARGET`."
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=None,
    help="Stop cleanly after this many optimizer steps, then report.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the report to this file: HTML when its name "
    "ends in .html or .htm, JSON otherwise.",
)
@format_option("text", ("text", "concise", "json", "html"))
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON_CHOICES),
    default="never",
    show_default=True,
    help="Exit with 1 when the script succeeded but a finding has this severity "
    "or worse. The script's own failure status always passes through.",
)
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD2, TD201).")
@click.option("--ignore", multiple=True, help="Not these codes or prefixes.")
@click.option(
    "--sample-every",
    type=click.IntRange(min=1),
    default=None,
    help="Full statistics every N steps (default: dense at first, then cheap).",
)
@click.option(
    "--status/--no-status",
    default=None,
    help="Live status line on standard error (default: only on a terminal).",
)
@click.option(
    "--localise-nan",
    is_flag=True,
    help="Check every module's output for NaN/Inf from the first step (slower), "
    "to name the module where NaN/Inf starts.",
)
@click.option(
    "--nproc-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="Launch N ranks through torch.distributed.run (torchrun), each running "
    "the script watched; one report for the whole job.",
)
@click.option(
    "--follow-children/--no-follow-children",
    default=True,
    show_default=True,
    help="Also watch the processes the script starts to train "
    "(torch.multiprocessing.spawn, multiprocessing, Python subprocesses; "
    "never DataLoader workers).",
)
@click.argument("target")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@guarded
def run_command(
    as_module: bool,
    max_steps: int | None,
    report_path: Path | None,
    output_format: str,
    fail_on: str,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    sample_every: int | None,
    status: bool | None,
    localise_nan: bool,
    nproc_per_node: int | None,
    follow_children: bool,
    target: str,
    script_args: tuple[str, ...],
) -> None:
    """Run a training script under the monitor: `torchdoctor run train.py [ARGS]...`.

    The script runs as `python train.py ARGS` would (every argument after TARGET is its
    own, `--help` included). The report is printed to standard output when it ends,
    however it ends (the script shares that output: use --report for a JSON file of its
    own); the script's exit status is passed through.
    """
    from torchdoctor.distributed.job import run_job
    from torchdoctor.outputs import checked_output
    from torchdoctor.rules.selection import Selection
    from torchdoctor.runtime.script import ScriptResult, die_by

    # Checked and made absolute before the script starts: a missing directory is an error
    # now, not after the run, and the script's os.chdir cannot move the file.
    report_path = checked_output(report_path, "--report", inputs=() if as_module else (target,))
    title = f"torchdoctor run {target}"

    def write_report(report: Report) -> None:
        if report_path is not None:
            emit(report, report_file_format(report_path), report_path, title=title)

    def signalled(ended: ScriptResult) -> None:  # SIGTERM/SIGHUP: report, then end by it
        show_internal_errors(ended.report)
        write_report(ended.report)
        emit(ended.report, output_format, title=title)

    extra: dict[str, Any] = {"on_signal": signalled}
    if report_path is not None:
        extra["progress"] = write_report
    result = run_job(
        target,
        list(script_args),
        nproc_per_node=nproc_per_node,
        follow=follow_children,
        module=as_module,
        max_steps=max_steps,
        sample_every=sample_every,
        status=status,
        localise_non_finite=localise_nan,
        selection=Selection.from_options(select or None, ignore or None),
        **extra,
    )
    if isinstance(result, int):  # a torchrun rank other than 0: rank 0 reports the job
        sys.exit(result)
    show_internal_errors(result.report)
    write_report(result.report)
    emit(result.report, output_format, title=title)
    ended_by = result.report.facts.get("ended_by_signal")
    if ended_by is not None:  # Ctrl-C: end by SIGINT, as python would
        import signal

        sys.stdout.flush()
        die_by(int(signal.Signals[ended_by]))
    sys.exit(result.exit_code(parse_fail_on(fail_on)))
