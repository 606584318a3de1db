"""The command line: parse arguments, call the API, render, pick the exit code.

Every subcommand body is parse -> API call -> render -> exit. Behaviour lives in the API;
each subcommand has a module of its own here, and ``shared`` holds what they all use.
Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage or internal error;
``run`` passes the script's own exit status through.
"""

from __future__ import annotations

import click

from torchdoctor.__about__ import __version__
from torchdoctor.cli.catalogue import explain_command, rules_command
from torchdoctor.cli.check import check_command, summary_command
from torchdoctor.cli.ckpt import ckpt_command
from torchdoctor.cli.demo import demo_command
from torchdoctor.cli.env import env_command
from torchdoctor.cli.lint import lint_command
from torchdoctor.cli.run import run_command

__all__ = ["main"]


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


# Each subcommand module defines a plain command; the group is assembled here only.
for _command in (
    rules_command,
    explain_command,
    check_command,
    summary_command,
    lint_command,
    run_command,
    ckpt_command,
    env_command,
    demo_command,
):
    main.add_command(_command)
