"""`torchdoctor check` (pre-flight) and `torchdoctor summary`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from torchdoctor.cli.shared import (
    EXIT_CLEAN,
    EXIT_ERROR,
    emit,
    fail_on_option,
    format_option,
    guarded,
    output_option,
    parse_fail_on,
    progress_display,
    show_internal_errors,
)
from torchdoctor.errors import TorchDoctorError


@click.command("check")
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
    or a dict with keys model, data and optionally loss_fn, optimizer, step, device. data
    is one batch or a DataLoader (its first batches are used, from a replay).

    \b
    How a batch trains the model:
      step             step(model, batch) -> loss or (loss, outputs): your own
                       training step (forward and loss, no backward); any batch
                       shape. Example factory:
                         def make():
                             def step(model, batch):
                                 out = model(batch["input_ids"])
                                 return F.cross_entropy(out, batch["labels"])
                             return {"model": m, "data": loader,
                                     "optimizer": opt, "step": step}
      no loss_fn       a dict batch goes whole to model(**batch), whose output
                       has .loss (Hugging Face style)
      (x, y)           model(x), loss_fn(out, y); x a tuple: model(*x);
                       x a dict: model(**x)
      (x1, .., xk, y)  model(x1, .., xk), loss_fn(out, y)
      (x, y, w, ..)    extra elements go to a loss that requires them:
                       loss_fn(out, y, w); CTC (images, targets, input_lengths,
                       target_lengths) with nn.CTCLoss()
      dict             targets under targets/target/labels/label/y; inputs under
                       inputs/input/x, else every other key as a keyword
    Floating-point inputs are cast to a bfloat16/float16/float64 model's dtype.
    """
    from torchdoctor.outputs import checked_output, target_file
    from torchdoctor.preflight.factory import check_factory

    output = checked_output(output, "--output", inputs=(target_file(target),))
    forecast = _forecast_options(forecast_device, batch_sizes, device_memory, amp)
    import threading

    before = set(threading.enumerate())
    try:
        with progress_display("check"):
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
    show_internal_errors(report)
    emit(
        report,
        output_format,
        output,
        title=f"torchdoctor check {target}",
        summary_depth=summary_depth,
    )
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


@click.command("summary")
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
    if output_format == "text":
        from torchdoctor.report.memory_text import render_summary_text

        click.echo(render_summary_text(report.facts, depth), nl=False)
    else:
        emit(report, output_format)
    sys.exit(EXIT_CLEAN)
