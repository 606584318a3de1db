"""The command line: parse arguments, call the API, render, pick the exit code.

Every subcommand body is parse -> API call -> render -> exit. Behaviour lives in the API.
Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 usage or internal error;
``run`` passes the script's own exit status through.
"""

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
        except BrokenPipeError:  # `torchdoctor ... | head`: the reader left, nothing to say
            import os

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
    report: Report, output_format: str, output: Path | None = None, title: str | None = None
) -> None:
    """Render ``report`` and write it to ``output`` or standard output."""
    from torchdoctor.report import RenderOptions, render

    to_terminal = output is None and sys.stdout.isatty()
    width = _terminal_width() if to_terminal else 100
    options = RenderOptions(width=width, color=to_terminal, title=title, root=str(Path.cwd()))
    text = render(report, output_format, options)
    if output is None:
        click.echo(text, nl=False)
    else:
        from torchdoctor.outputs import write_atomic

        write_atomic(output, text)


LINT_PROGRESS_FILES = 200  # lint shows its progress on trees at least this large


@contextlib.contextmanager
def _progress_display(task: str, minimum: int = 1) -> Iterator[None]:
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


def _report_file_format(path: Path) -> str:
    """``run --report``: HTML for a ``.html``/``.htm`` file, JSON otherwise."""
    return "html" if path.suffix.lower() in (".html", ".htm") else "json"


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


@main.command("check")
@click.argument("target")
@format_option("text", ("text", "concise", "json", "junit", "html"))
@fail_on_option
@output_option
@click.option("--select", multiple=True, help="Only these codes or prefixes (TD1, TD301).")
@click.option("--ignore", multiple=True, help="Skip these codes or prefixes.")
@click.option(
    "--device",
    default=None,
    help="Where training sends batches (cpu, cuda, cuda:1); "
    "default: the device the factory names, else the model's.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="Seed for every random draw of the check.",
)
@click.option(
    "--forecast",
    "forecast_device",
    type=click.Choice(("cuda", "cpu")),
    default=None,
    help="Forecast the peak memory of a training step on this device.",
)
@click.option(
    "--batch-sizes",
    default=None,
    metavar="B1,B2,...",
    help="With --forecast: the batch sizes to forecast (default: the probe batch's).",
)
@click.option(
    "--device-memory",
    default=None,
    metavar="SIZE",
    help="With --forecast: the device's memory (80GiB, 24GB); default: detected.",
)
@click.option(
    "--amp",
    type=click.Choice(("bf16", "fp16")),
    default=None,
    help="With --forecast: training runs under autocast with this dtype.",
)
@click.option(
    "--summary-depth",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Depth of modules shown in the model summary of the text report.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Wall-clock seconds each probe may take (0: no limit); a probe past it "
    "ends the check, naming what the code was waiting for.",
)
@guarded
def check_command(
    target: str,
    output_format: str,
    fail_on: str,
    output: Path | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    device: str | None,
    seed: int,
    forecast_device: str | None,
    batch_sizes: str | None,
    device_memory: str | None,
    amp: str | None,
    summary_depth: int,
    timeout: float,
) -> None:
    """Pre-flight the model, data, loss and optimizer that a factory returns.

    TARGET is pkg.module:factory or path/to/file.py:factory (the factory defaults to
    `make`). The factory takes no arguments and returns (model, data, loss_fn[, optimizer])
    or a dict with those keys (plus an optional device); data is one batch or a DataLoader.
    """
    from torchdoctor.outputs import checked_output, target_file
    from torchdoctor.preflight.factory import check_factory

    output = checked_output(output, "--output", inputs=(target_file(target),))
    forecast = _forecast_options(forecast_device, batch_sizes, device_memory, amp)
    import threading

    before = set(threading.enumerate())
    try:
        with _progress_display("check"):
            report = check_factory(
                target,
                select=select or None,
                ignore=ignore or None,
                device=device,
                seed=seed,
                forecast=forecast,
                timeout=timeout,
            )
    except TorchDoctorError as error:
        _exit_past_lingering_threads(before, EXIT_ERROR, f"torchdoctor: {error}")
        raise
    report.facts["summary_depth"] = summary_depth
    _show_internal_errors(report)
    emit(report, output_format, output, title=f"torchdoctor check {target}")
    code = report.exit_code(parse_fail_on(fail_on))
    _exit_past_lingering_threads(before, code)
    sys.exit(code)


def _exit_past_lingering_threads(before: set[Any], code: int, message: str = "") -> None:
    """The user's code left non-daemon threads running (a factory's background worker):
    Python would wait for them at exit, maybe forever. Say so and exit without waiting."""
    import os

    from torchdoctor.preflight.budget import lingering_threads

    names = lingering_threads(before)
    if not names:
        return
    if message:
        click.secho(message, fg="red", err=True)
    click.echo(
        f"torchdoctor: the checked code left {len(names)} non-daemon thread(s) "
        f"running ({', '.join(names[:3])}); exiting without waiting for them",
        err=True,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _forecast_options(
    device: str | None, batch_sizes: str | None, memory: str | None, amp: str | None
) -> Any:
    """``--forecast`` and its options as ``ForecastOptions`` (``None`` without it)."""
    from torchdoctor.errors import UsageError

    if device is None:
        if batch_sizes or memory or amp:
            raise UsageError("--batch-sizes, --device-memory and --amp go with --forecast")
        return None
    from torchdoctor.preflight.forecast import ForecastOptions, parse_bytes

    try:
        sizes = tuple(int(part) for part in (batch_sizes or "").split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--batch-sizes takes numbers like 8,16,32, not {batch_sizes!r}") from None
    return ForecastOptions(device, sizes, parse_bytes(memory) if memory else None, amp)


@main.command("summary")
@click.argument("target")
@format_option("text", ("text", "json"))
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Depth of modules shown in the text table (JSON has every module).",
)
@guarded
def summary_command(target: str, output_format: str, depth: int) -> None:
    """Summarise the model a factory returns: parameters, buffers, dtypes, output shapes
    and activation memory per module (measured on fake tensors; the model is not run)."""
    from torchdoctor.preflight.factory import summary_factory

    report = summary_factory(target)
    report.facts["summary_depth"] = depth
    if output_format == "text":
        from torchdoctor.report.memory_text import render_summary_text

        click.echo(render_summary_text(report.facts), nl=False)
    else:
        emit(report, output_format)
    sys.exit(EXIT_CLEAN)


# --- lint (static) -----------------------------------------------------------------------


@main.command("lint")
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
    options = dict(select=select or None, ignore=ignore or None, config=settings, jobs=jobs)
    if apply_fix or diff:
        with _progress_display("lint", minimum=LINT_PROGRESS_FILES):
            outcome = fix(targets, unsafe=unsafe_fixes, write=not diff, **options)  # type: ignore[arg-type]
        _show_internal_errors(outcome.report)
        if diff:
            click.echo(outcome.diff(), nl=False)
            sys.exit(EXIT_FINDINGS if outcome.changed else EXIT_CLEAN)
        click.echo(
            f"torchdoctor: applied {outcome.applied} fix(es) in {len(outcome.changed)} file(s).",
            err=True,
        )
        report = outcome.report
    else:
        with _progress_display("lint", minimum=LINT_PROGRESS_FILES):
            report = lint(targets, baseline=baseline, **options)  # type: ignore[arg-type]
        _show_internal_errors(report)
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


def _show_internal_errors(report: Report) -> None:
    """Take the tracebacks of torchdoctor's own failures (``TD001``) out of the report;
    print them (to standard error) only under ``torchdoctor --debug``. Every command that
    reports findings calls it, so ``--debug`` works the same everywhere."""
    for trace in report.facts.pop("internal_errors", []):
        if _debug_requested():
            click.echo(trace, err=True)


# --- run (runtime) -----------------------------------------------------------------------


@main.command(
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
            emit(report, _report_file_format(report_path), report_path, title=title)

    def signalled(ended: ScriptResult) -> None:  # SIGTERM/SIGHUP: report, then end by it
        _show_internal_errors(ended.report)
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
    _show_internal_errors(result.report)
    write_report(result.report)
    emit(result.report, output_format, title=title)
    ended_by = result.report.facts.get("ended_by_signal")
    if ended_by is not None:  # Ctrl-C: end by SIGINT, as python would
        import signal

        sys.stdout.flush()
        die_by(int(signal.Signals[ended_by]))
    sys.exit(result.exit_code(parse_fail_on(fail_on)))


# --- ckpt and env ------------------------------------------------------------------------


@main.command("ckpt")
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
    _show_internal_errors(report)
    if output_format == "text":
        click.echo(render_ckpt_summary(report.facts), nl=False)
    emit(report, output_format)
    sys.exit(report.exit_code(parse_fail_on(fail_on)))


@main.command("env")
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
    _show_internal_errors(report)
    if output_format == "text":
        click.echo(render_env_summary(report.facts), nl=False)
    emit(report, output_format)
    sys.exit(report.exit_code(parse_fail_on(fail_on)))


# --- demo --------------------------------------------------------------------------------


@main.command("demo")
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
                width=_terminal_width() if sys.stdout.isatty() else 100,
                color=sys.stdout.isatty(),
            ),
            nl=False,
        )
    sys.exit(EXIT_CLEAN)


if __name__ == "__main__":  # pragma: no cover
    main()
