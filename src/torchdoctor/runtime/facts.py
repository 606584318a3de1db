"""The facts a watched run reports about itself: counts, timings, models, loss curves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchdoctor.runtime.sampling import OptimizerState
    from torchdoctor.runtime.services import RunCounts, RunServices

__all__ = ["record_facts"]

_SERIES_LIMIT = 2000


def record_facts(monitor: RunServices, events: RunCounts, states: list[OptimizerState]) -> None:
    """Fill ``monitor.facts`` and its loss series at the end of a run."""
    facts = monitor.facts
    facts["steps"] = events.global_step
    facts["backward_calls"] = events.backward_count
    facts["sampled_steps"] = monitor.sampler.sampled
    if monitor.sampler.step_time:
        facts["step_time_ms"] = round(monitor.sampler.step_time * 1e3, 3)
    facts["monitor_time_s"] = round(events.busy_s, 4)
    facts["optimizers"] = [
        {"name": s.info.label, "steps": s.steps, "parameters": len(s.info.params)} for s in states
    ]
    facts["models"] = [
        _model_facts(m.label, m.inner)
        for m in monitor.registry.models
        if next(iter(m.inner.parameters()), None) is not None
    ]
    if events.manual.intervals:
        facts["manual_updates"] = events.manual.intervals
    facts["watched"] = watched_text(
        events.backward_count, sum(s.steps for s in states), events.manual.intervals
    )
    if events.batches:
        facts["batches"] = events.batches
        facts["batch_wait_s"] = round(events.batch_wait_s, 4)
    several = len(events.losses.series) > 1
    for site, values in events.losses.series.items():
        monitor.add_series(
            f"loss@{site}" if several else "loss", _downsample(values, _SERIES_LIMIT)
        )


def watched_text(backward: int, steps: int, manual: int) -> str:
    """What the monitor saw train, in words: shown when it found nothing to report."""
    if not backward and not steps:
        return (
            "nothing was trained while watched: no backward pass and no optimizer step "
            "ran, so no training check could run"
        )
    text = (
        f"{backward} backward pass{'es' if backward != 1 else ''} and {steps} optimizer "
        f"step{'s' if steps != 1 else ''} watched"
    )
    if manual:
        text += ", parameters also updated by hand (without an optimizer)"
    elif backward and not steps:
        text += (
            "; no optimizer stepped and no parameter was seen to change, so only the "
            "loss and the gradients were checked"
        )
    return text


def _model_facts(label: str, module: Any) -> dict[str, Any]:
    params = list(module.parameters())
    return {
        "name": label,
        "parameters": sum(p.numel() for p in params),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
    }


def _downsample(values: list[float], limit: int) -> list[float]:
    if len(values) <= limit:
        return list(values)
    stride = -(-len(values) // limit)
    return values[::stride]
