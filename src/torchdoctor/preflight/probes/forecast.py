"""TD712: a batch size of the memory forecast does not fit the device.

Runs only when a forecast is asked for (``check --forecast cuda --batch-sizes ...``):
the forecast (:mod:`torchdoctor.preflight.forecast`) is computed here, on fake copies,
and kept on the context for the report's facts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchdoctor._kernel import Reporter
from torchdoctor.findings import Depth, Location
from torchdoctor.preflight.registry import probe
from torchdoctor.rules.registry import finding

if TYPE_CHECKING:
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.forecast import Forecast

__all__ = ["batch_does_not_fit", "forecast_of"]


def forecast_of(ctx: CheckContext) -> Forecast | None:
    """The forecast asked for on ``ctx`` (computed once), or ``None``."""
    if ctx.forecast_options is None:
        return None
    if "forecast_result" not in ctx.__dict__:
        from torchdoctor.preflight.forecast import forecast_memory

        ctx.__dict__["forecast_result"] = forecast_memory(
            ctx.model, ctx.optimizer, ctx.loss_fn, ctx.batch_as_given, ctx.forecast_options
        )
    result: Forecast = ctx.__dict__["forecast_result"]
    return result


@probe("TD712")
def batch_does_not_fit(ctx: CheckContext, out: Reporter) -> None:
    """One finding naming every forecast batch size whose step exceeds the memory."""
    from torchdoctor.report.memory_text import format_bytes

    forecast = forecast_of(ctx)
    if forecast is None or forecast.usable_bytes is None:
        return
    failing = [point for point in forecast.points if point.fits is False]
    if not failing:
        return
    worst = failing[0]
    parts = ", ".join(
        f"{key.replace('_', ' ')} {format_bytes(size)}"
        for key, size in worst.breakdown.items()
        if size
    )
    sizes = ", ".join(str(point.batch_size) for point in failing)
    message = (
        f"A training step at batch size {worst.batch_size} needs "
        f"{format_bytes(worst.peak_bytes)} at its peak on {forecast.options.device} "
        f"({parts}), more than the {format_bytes(forecast.usable_bytes)} a step may use "
        f"of {format_bytes(forecast.device_memory)}; batch sizes that do not fit: "
        f"{sizes}."
    )
    hint = (
        f"Use batch size {forecast.largest_batch_size} or less"
        if forecast.largest_batch_size
        else "Shrink the model or the batch"
    )
    useful = [r for r in forecast.remedies if r.fits and r.saving_bytes > 0]
    if useful:
        best = max(useful, key=lambda r: r.saving_bytes)
        hint += f", or apply {best.name} (peak {format_bytes(best.peak_bytes)})"
    out.emit(
        finding(
            "TD712",
            message,
            Location(object=type(ctx.model).__name__),
            Depth.CHECK,
            fix_hint=hint + ".",
            evidence={
                "batch_sizes": [p.batch_size for p in failing],
                "peak_bytes": [p.peak_bytes for p in failing],
                "usable_bytes": forecast.usable_bytes,
                "largest_batch_size": forecast.largest_batch_size,
            },
        )
    )
