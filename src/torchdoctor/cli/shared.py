"""What every subcommand shares: error guarding, common options, rendering, progress."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from torchdoctor.errors import TorchDoctorError
from torchdoctor.findings import Report, Severity

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
FAIL_ON_CHOICES = ("error", "warning", "info", "never")


def _debug_requested() -> bool:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return bool(root and root.obj and root.obj.get("debug"))


def guarded(command: F) -> F:
    """Turn our own failures into a clear message and exit code 2, never a traceback.

    The traceback is printed only with ``torchdoctor --debug``.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except TorchDoctorError as error:
            if _debug_requested():
                traceback.print_exc()
            click.secho(f"torchdoctor: {error}", fg="red", err=True)
            sys.exit(EXIT_ERROR)
        except KeyboardInterrupt:
            click.secho("torchdoctor: interrupted", fg="red", err=True)
            sys.exit(EXIT_ERROR)
        except BrokenPipeError:  # `torchdoctor ... | head`: the reader left, nothing to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_ERROR)
        except Exception as error:  # noqa: BLE001 - the last line of defence
            if _debug_requested():
                traceback.print_exc()
            click.secho(
                f"torchdoctor: internal error: {type(error).__name__}: {error}\n"
                "This is a bug in torchdoctor; rerun with `torchdoctor --debug ...` for the "
                "traceback and report it.",
                fg="red",
                err=True,
            )
            sys.exit(EXIT_ERROR)

    return wrapper  # type: ignore[return-value]


def format_option(default: str, choices: tuple[str, ...]) -> Callable[[F], F]:
    """``--format`` with the formats a command supports."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def fail_on_option(command: F) -> F:
    """``--fail-on``: the lowest severity that makes the exit code 1."""
    return click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON_CHOICES),
        default="error",
        show_default=True,
        help="Exit with 1 when a finding has this severity or worse.",
    )(command)


def output_option(command: F) -> F:
    """``--output PATH``: write the report to a file instead of stdout."""
    return click.option(
        "--output",
        "-o",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write the report to this file instead of standard output.",
    )(command)


def parse_fail_on(value: str) -> Severity | None:
    """``"never"`` -> ``None``; otherwise the severity."""
    return None if value == "never" else Severity(value)


def emit(
    report: Report,
    output_format: str,
    output: Path | None = None,
    title: str | None = None,
    summary_depth: int | None = None,
) -> None:
    """Render ``report`` and write it to ``output`` or standard output (``summary_depth``:
    see :class:`~torchdoctor.report.RenderOptions`)."""
    from torchdoctor.report import RenderOptions, render

    to_terminal = output is None and sys.stdout.isatty()
    width = terminal_width() if to_terminal else 100
    options = RenderOptions(
        width=width,
        color=to_terminal,
        title=title,
        root=str(Path.cwd()),
        summary_depth=summary_depth,
    )
    text = render(report, output_format, options)
    if output is None:
        click.echo(text, nl=False)
    else:
        from torchdoctor.outputs import write_atomic

        write_atomic(output, text)


LINT_PROGRESS_FILES = 200  # lint shows its progress on trees at least this large


@contextlib.contextmanager
def progress_display(task: str, minimum: int = 1) -> Iterator[None]:
    """A transient progress bar on standard error for the API's ``task`` (``check``: its
    probes; ``lint``: files done), shown only on a terminal, outside CI, and once the task
    has ``minimum`` items."""
    from torchdoctor.progress import listening

    if not sys.stderr.isatty() or os.environ.get("CI"):
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    bar: list[Any] = []

    def show(name: str, item: str, done: int, total: int) -> None:
        if name != task or total < minimum:
            return
        if not bar:
            progress.start()
            bar.append(progress.add_task(task, total=total))
        label = f"torchdoctor {task}: {item}" if item else f"torchdoctor {task}"
        progress.update(bar[0], completed=done, total=total, description=label)

    try:
        with listening(show):
            yield
    finally:
        if bar:
            progress.stop()


def report_file_format(path: Path) -> str:
    """``run --report``: HTML for a ``.html``/``.htm`` file, JSON otherwise."""
    return "html" if path.suffix.lower() in (".html", ".htm") else "json"


def terminal_width() -> int:
    import shutil

    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def show_internal_errors(report: Report) -> None:
    """Take the tracebacks of torchdoctor's own failures (``TD001``) out of the report;
    print them (to standard error) only under ``torchdoctor --debug``. Every command that
    reports findings calls it, so ``--debug`` works the same everywhere."""
    for trace in report.facts.pop("internal_errors", []):
        if _debug_requested():
            click.echo(trace, err=True)
