"""The command line: parse arguments, call the API, render, pick the exit code.

Every subcommand body is parse -> API call -> render -> exit. Behaviour lives in the API.
Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage or internal error;
``run`` passes the script's own exit status through.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from torchdoctor.__about__ import __version__
from torchdoctor.errors import TorchDoctorError
from torchdoctor.findings import Report, Severity

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
FAIL_ON_CHOICES = ("error", "warning", "info", "never")


# --- shared plumbing -------------------------------------------------------------------


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
        "--format", "output_format", type=click.Choice(choices), default=default,
        show_default=True, help="Output format.",
    )


def fail_on_option(command: F) -> F:
    """``--fail-on``: the lowest severity that makes the exit code 1."""
    return click.option(
        "--fail-on", type=click.Choice(FAIL_ON_CHOICES), default="error", show_default=True,
        help="Exit with 1 when a finding has this severity or worse.",
    )(command)


def output_option(command: F) -> F:
    """``--output PATH``: write the report to a file instead of stdout."""
    return click.option(
        "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="Write the report to this file instead of standard output.",
    )(command)


def parse_fail_on(value: str) -> Severity | None:
    """``"never"`` -> ``None``; otherwise the severity."""
    return None if value == "never" else Severity(value)


def emit(report: Report, output_format: str, output: Path | None = None,
         title: str | None = None) -> None:
    """Render ``report`` and write it to ``output`` or standard output."""
    from torchdoctor.report import RenderOptions, render

    to_terminal = output is None and sys.stdout.isatty()
    width = _terminal_width() if to_terminal else 100
    options = RenderOptions(width=width, color=to_terminal, title=title,
                            root=str(Path.cwd()))
    text = render(report, output_format, options)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")


def _terminal_width() -> int:
    import shutil

    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


# --- the group ---------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torchdoctor")
@click.option("--debug", is_flag=True, help="Show tracebacks of torchdoctor's own errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """torchdoctor finds the silent bugs in PyTorch training code.

    \b
    lint   read source code (no torch needed, nothing is run)
    check  pre-flight a model, a batch, a loss and an optimizer
    run    watch a real training script while it runs
    """
    ctx.obj = {"debug": debug}


# --- rules and explain -------------------------------------------------------------------


@main.command("rules")
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


@main.command("explain")
@click.argument("code")
@guarded
def explain_command(code: str) -> None:
    """Print the documentation of one rule (by code, e.g. TD201, or by name)."""
    from torchdoctor.rules.catalogue_view import explain

    click.echo(explain(code), nl=False)


# --- check (pre-flight) ------------------------------------------------------------------
# (the `check` subcommand lives here)

# --- lint (static) -----------------------------------------------------------------------
# (the `lint` subcommand lives here)

# --- run (runtime) -----------------------------------------------------------------------
# (the `run` subcommand lives here)

# --- ckpt and env ------------------------------------------------------------------------
# (the `ckpt` and `env` subcommands live here)

# --- demo --------------------------------------------------------------------------------
# (the `demo` subcommand lives here)


if __name__ == "__main__":  # pragma: no cover
    main()
