"""Which plots an HTML report shows: the report's series grouped into figures, as SVG.

A series name is ``kind`` or ``kind/part`` (``grad_norm/encoder``) or ``kind@site``
(``loss@train.py:42``). Series of one kind share a figure; known kinds get a title, a unit
and a log axis where that reads better. The x axis is the optimizer step: a series with as
many values as the run had steps maps one to one; a series recorded at sampled steps names
them in ``facts["series_steps"][name]``; any other (thinned by the monitor) is spread
evenly over the steps, and the figure says so. Steps where findings fired
(evidence ``step``, ``first_step`` or ``from_step``) are marked on every step plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchdoctor.facts import LAYER_GRAD_NORMS, SERIES_STEPS, STEPS
from torchdoctor.findings import Report
from torchdoctor.report.svg import (
    Bars,
    Limit,
    Line,
    Marker,
    Stack,
    bar_chart,
    downsample,
    line_plot,
    stacked_bars,
)

__all__ = ["POINTS_PER_LINE", "Figure", "figures", "forecast_figure"]

POINTS_PER_LINE = 600  # per line of a figure: readable, and a 10,000-step run stays small
MAX_LINES = 6  # a figure with more module groups shows the largest ones
_STEP_KEYS = ("step", "first_step", "from_step")


@dataclass(frozen=True, slots=True)
class _Kind:
    title: str
    log: bool = False
    order: int = 50


# kind -> how it is drawn; anything else gets a figure named after it.
KINDS: Mapping[str, _Kind] = {
    "loss": _Kind("Loss", order=0),
    "grad_norm": _Kind("Gradient norm (global and largest module groups)", log=True, order=1),
    "update_ratio": _Kind("Update / weight ratio", log=True, order=2),
    "lr": _Kind("Learning rate", order=3),
    "memory_mb": _Kind("Memory (MiB)", order=4),
    "step_time_ms": _Kind("Step time (ms)", order=5),
    "data_wait_ms": _Kind("Step time (ms)", order=5),
    "compute_ms": _Kind("Step time (ms)", order=5),
    "overfit_loss": _Kind("Overfit one batch: loss per step", order=6),
    "reference_loss": _Kind("Overfit one batch: loss per step", order=6),
}


@dataclass(frozen=True, slots=True)
class Figure:
    """One plot of the report: its title and its SVG markup."""

    title: str
    svg: str


def figures(report: Report) -> list[Figure]:
    """Every figure the report's series and facts make, in a fixed order."""
    markers = _markers(report)
    steps = STEPS.get(report.facts)
    total = steps if steps is not None and steps > 1 else None
    groups: dict[str, list[tuple[str, list[float]]]] = {}
    for name, values in report.series.items():
        floats = [_float(v) for v in values]
        if floats:
            groups.setdefault(_group(name), []).append((name, floats))
    known = _series_steps(report)
    out = []
    for title in sorted(groups, key=lambda t: (_order(t), t)):
        members = groups[title]
        check_curve = title.startswith("Overfit")
        out.append(
            _line_figure(
                title,
                members,
                () if check_curve else markers,
                None if check_curve else total,
                {name: known[name] for name, _ in members if name in known},
            )
        )
    bars = _grad_norm_bars(LAYER_GRAD_NORMS.get(report.facts))
    if bars is not None:
        out.append(bars)
    return out


def _group(name: str) -> str:
    kind = name.split("/")[0].split("@")[0]
    spec = KINDS.get(kind)
    return spec.title if spec else kind


def _order(title: str) -> int:
    return min((k.order for k in KINDS.values() if k.title == title), default=99)


def _log(title: str) -> bool:
    return any(k.log for k in KINDS.values() if k.title == title)


def _series_steps(report: Report) -> dict[str, list[float]]:
    """Explicit x values: ``facts["series_steps"][name]``, the step of each value of a
    series recorded at chosen steps only (sampled steps), when the lengths agree."""
    given = SERIES_STEPS.get(report.facts)
    if given is None:
        return {}
    out = {}
    for name, steps in given.items():
        values = report.series.get(name)
        if values is not None and isinstance(steps, Sequence) and len(steps) == len(values):
            out[str(name)] = [_float(step) for step in steps]
    return out


def _line_figure(
    title: str,
    members: list[tuple[str, list[float]]],
    markers: Sequence[Marker],
    total: int | None,
    steps: Mapping[str, list[float]],
) -> Figure:
    notes = []
    if len(members) > MAX_LINES:
        kept = _largest(members)
        groups = sum("/" in name for name, _ in kept)
        notes.append(f"{groups} largest of {sum('/' in n for n, _ in members)} module groups")
        members = kept
    lines = []
    longest = max(len(values) for _, values in members)
    for name, values in members:
        xs = steps.get(name) or _steps_for(len(values), total)
        xs_shown, ys_shown = downsample(xs, values, POINTS_PER_LINE)
        lines.append(Line(name, xs_shown, ys_shown))
    spread = total is not None and longest != total and not steps
    if spread:
        notes.append(f"{longest:,} points over {total:,} steps")
    if longest > POINTS_PER_LINE:
        of = "" if spread else f" of {longest:,} points"
        notes.append(f"downsampled to ≤{POINTS_PER_LINE}{of} (min/max kept)")
    x_label = "probe step" if title.startswith("Overfit") else "step"
    svg = line_plot(
        title, lines, markers, log_y=_log(title), note="; ".join(notes), x_label=x_label
    )
    return Figure(title, svg)


def _largest(members: list[tuple[str, list[float]]]) -> list[tuple[str, list[float]]]:
    """The global series (no ``/``) plus the groups with the largest peaks."""
    overall = [m for m in members if "/" not in m[0]]
    parts = [m for m in members if "/" in m[0]]
    parts.sort(key=lambda m: -max((v for v in m[1] if math.isfinite(v)), default=-math.inf))
    return (overall + parts)[: MAX_LINES - 1]


def _steps_for(count: int, total: int | None) -> list[float]:
    if total is None or count == total or count < 2:
        return [float(i + 1) for i in range(count)]
    return [1 + i * (total - 1) / (count - 1) for i in range(count)]


def _markers(report: Report) -> list[Marker]:
    seen: dict[tuple[float, str], Marker] = {}
    for finding in report.findings:
        for key in _STEP_KEYS:
            value = finding.evidence.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                marker = Marker(float(value), finding.code, finding.severity.value)
                seen.setdefault((marker.x, marker.label), marker)
                break
    return sorted(seen.values(), key=lambda m: (m.x, m.label))


def _grad_norm_bars(value: Mapping[str, float] | None) -> Figure | None:
    """``check``'s per-layer gradient norms (a name -> norm mapping), largest first."""
    if not value:
        return None
    items = [(str(k), _float(v)) for k, v in value.items()]
    items.sort(key=lambda kv: -kv[1] if math.isfinite(kv[1]) else math.inf)
    note = f"{len(items)} layers; 30 largest shown" if len(items) > 30 else ""
    items = items[:30]
    title = "Gradient norm per layer (one training step)"
    svg = bar_chart(title, Bars([k for k, _ in items], [v for _, v in items]), note=note)
    return Figure(title, svg)


def forecast_figure(
    segments: Sequence[tuple[str, str]],
    points: Sequence[tuple[int, Mapping[str, float], float, bool]],
    device_memory: float | None,
    usable_bytes: float | None,
) -> Figure:
    """The memory forecast as one stacked bar per batch size: ``segments`` are the
    breakdown's (key, label) pairs, ``points`` (batch size, breakdown, peak, does not
    fit); the device's memory is a solid line, the part a step may use a dashed one."""
    title = "Peak memory of one training step, by batch size"
    peak = max([p[2] for p in points] + [device_memory or 0.0, usable_bytes or 0.0])
    unit = next(((name, float(size)) for name, size in _UNITS if peak >= size), ("B", 1.0))
    rows = [
        Stack(f"batch {size}", [_float(parts.get(key, 0)) for key, _ in segments], bad, total)
        for size, parts, total, bad in points
    ]
    limits = []
    if device_memory:
        limits.append(Limit("device memory", float(device_memory)))
    if usable_bytes and usable_bytes != device_memory:
        limits.append(Limit("usable by a step", float(usable_bytes), dashed=True))
    from torchdoctor.report.memory_text import format_bytes

    labels = [label for _, label in segments]
    svg = stacked_bars(
        title,
        labels,
        rows,
        limits,
        unit=unit,
        value_text=format_bytes,
        colours=[_PART_COLOURS.get(key, "#9ca3af") for key, _ in segments],
    )
    return Figure(title, svg)


_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
# One colour per part of the breakdown, whichever parts a forecast has.
_PART_COLOURS = {
    "parameters": "#2563eb",
    "gradients": "#dc2626",
    "optimizer_state": "#16a34a",
    "activations": "#9333ea",
    "temporaries": "#ea580c",
    "batch": "#0891b2",
}


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
