"""`torchdoctor lint`: the static depth."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchdoctor.cli.shared import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    LINT_PROGRESS_FILES,
    emit,
    fail_on_option,
    format_option,
    guarded,
    output_option,
    parse_fail_on,
    progress_display,
    show_internal_errors,
)


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@format_option("concise", ("concise", "text", "json", "sarif", "github", "junit", "html"))
@fail_on_option
@output_option
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD2, TD201).")
@click.option("--ignore", multiple=True, help="Skip these codes or prefixes.")
@click.option(
    "--statistics",
    is_flag=True,
    help="Print how many findings each rule has instead of the findings.",
)
@click.option("--fix", "apply_fix", is_flag=True, help="Apply safe fixes in place.")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix or --diff, also apply fixes that may change behaviour.",
)
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A JSON report of known findings; fail only on new ones.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read settings from this pyproject.toml or TOML file.",
)
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option(
    "--test-code-as-info/--no-test-code-as-info",
    default=None,
    help="Report warnings and errors in test code (tests/ folders, conftest.py, test_*.py "
    "with tests, pytest or unittest modules; not an eval script named test.py) as info, "
    "saying why; TD405 keeps its severity. Default: on, or the config's test-code-as-info.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: automatic).",
)
@guarded
def lint_command(
    paths: tuple[Path, ...],
    output_format: str,
    fail_on: str,
    output: Path | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    statistics: bool,
    apply_fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    baseline: Path | None,
    config: Path | None,
    isolated: bool,
    test_code_as_info: bool | None,
    jobs: int | None,
) -> None:
    """Read Python files (and folders) for training bugs; nothing is imported or run.

    Exit status: 0 clean, 1 findings at or above --fail-on, 2 usage or internal error.
    `# noqa: TD201` silences a rule on a line; `# torchdoctor: noqa` a whole file.
    """
    from torchdoctor.errors import UsageError
    from torchdoctor.static import LintConfig, fix, lint

    if unsafe_fixes and not (apply_fix or diff):
        raise UsageError("--unsafe-fixes applies with --fix or --diff")
    settings = LintConfig() if isolated else config
    targets = paths or (Path("."),)
    from torchdoctor.outputs import checked_output

    output = checked_output(
        output,
        "--output",
        inputs=(*targets, config, baseline),
        input_dirs=[t for t in targets if t.is_dir()],
    )
    options = dict(
        select=select or None,
        ignore=ignore or None,
        config=settings,
        jobs=jobs,
        test_code_as_info=test_code_as_info,
    )
    if apply_fix or diff:
        with progress_display("lint", minimum=LINT_PROGRESS_FILES):
            outcome = fix(targets, unsafe=unsafe_fixes, write=not diff, **options)  # type: ignore[arg-type]
        show_internal_errors(outcome.report)
        if diff:
            click.echo(outcome.diff(), nl=False)
            sys.exit(EXIT_FINDINGS if outcome.changed else EXIT_CLEAN)
        click.echo(
            f"torchdoctor: applied {outcome.applied} fix(es) in {len(outcome.changed)} file(s).",
            err=True,
        )
        report = outcome.report
    else:
        with progress_display("lint", minimum=LINT_PROGRESS_FILES):
            report = lint(targets, baseline=baseline, **options)  # type: ignore[arg-type]
        show_internal_errors(report)
    if statistics:
        from torchdoctor.static.statistics import render_statistics

        text = render_statistics(report)
        if output is None:
            click.echo(text, nl=False)
        else:
            from torchdoctor.outputs import write_atomic

            write_atomic(output, text)
    else:
        emit(report, output_format, output, title="torchdoctor lint")
    sys.exit(report.exit_code(parse_fail_on(fail_on)))
