"""The model summary and the memory forecast as facts of a ``check`` report.

:func:`add_memory_facts` runs after the probes, on fake copies only: the user's model,
optimizer and RNGs are not touched (the RNGs and torch's global modes are saved and put
back around each measurement all the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchdoctor.findings import Report
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.forecast import ForecastOptions

__all__ = ["add_memory_facts", "memory_only_report", "on_meta_device"]


def add_memory_facts(
    report: Report, ctx: CheckContext, forecast: ForecastOptions | None = None
) -> None:
    """Add ``summary`` (always) and ``forecast`` (when asked) to ``report.facts``."""
    from torchdoctor.preflight.summary import summarise

    batch = _probe_batch(ctx)
    report.facts.update(summarise(ctx.model, batch).to_facts())
    if forecast is None:
        return
    if batch is None:
        report.facts["forecast"] = []
        report.facts["forecast_detail"] = {"error": "no batch to measure a step with"}
        return
    from torchdoctor.preflight.forecast import forecast_memory

    result = ctx.__dict__.get("forecast_result")  # the TD712 probe's, when it ran
    if result is None or result.options != forecast:
        result = forecast_memory(ctx.model, ctx.optimizer, ctx.loss_fn, batch, forecast)
    report.facts.update(result.to_facts())


def _probe_batch(ctx: CheckContext) -> Any:
    """The first batch as the data gave it (``None`` when there is none)."""
    try:
        return ctx.batch_as_given
    except Exception:  # noqa: BLE001 - the probes already reported a bad batch
        return None
    finally:
        ctx.close()


def on_meta_device(model: Any) -> bool:
    """Whether any parameter or buffer of ``model`` is on the ``meta`` device."""
    return any(t.device.type == "meta" for t in (*model.parameters(), *model.buffers()))


def memory_only_report(ctx: CheckContext, forecast: ForecastOptions) -> Report:
    """The report of ``check --forecast`` for a model on the ``meta`` device: no probe can
    run a model without data, so it holds the summary, the forecast and TD712 only."""
    from datetime import datetime, timezone

    from torchdoctor.__about__ import __version__
    from torchdoctor._kernel import Reporter
    from torchdoctor.findings import Depth, Finding, Report
    from torchdoctor.preflight.probes.forecast import batch_does_not_fit

    report = Report(
        tool_version=__version__,
        command="check",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    ctx.forecast_options = forecast
    if ctx.enabled("TD712"):
        found: list[Finding] = []
        batch_does_not_fit(ctx, Reporter(found.append, Depth.CHECK, ("TD712",)))
        report.extend(found)
    add_memory_facts(report, ctx, forecast)
    report.facts["model"] = type(ctx.model).__name__
    report.facts["probes_skipped"] = (
        "the model is on the meta device: only the summary and the memory forecast ran"
    )
    return report
