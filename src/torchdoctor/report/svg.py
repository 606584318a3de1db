"""Inline SVG plots for the HTML report: line plots over steps and horizontal bar charts.

Pure string building, no plotting dependency: every function takes numbers and returns an
``<svg>`` element as text, with every piece of user text escaped. Long series are thinned
by :func:`downsample`, which keeps each bucket's minimum and maximum so that a spike in a
10,000-step run still shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

__all__ = [
    "Bars",
    "Limit",
    "Line",
    "Marker",
    "Stack",
    "bar_chart",
    "downsample",
    "line_plot",
    "nice_ticks",
    "stacked_bars",
]

WIDTH, HEIGHT = 640, 236
_LEFT, _RIGHT, _TOP, _BOTTOM = 62, 14, 50, 30
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4b5563")
MARKER_COLOURS = {"error": "#dc2626", "warning": "#d97706", "info": "#0891b2"}


@dataclass(frozen=True, slots=True)
class Line:
    """One series: x values (steps) and y values; non-finite values leave a gap."""

    name: str
    xs: Sequence[float]
    ys: Sequence[float]


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical mark at step ``x``: where a finding fired."""

    x: float
    label: str
    severity: str = "warning"


@dataclass(frozen=True, slots=True)
class Bars:
    """Labelled values for a horizontal bar chart."""

    labels: Sequence[str]
    values: Sequence[float]


@dataclass(frozen=True, slots=True)
class Stack:
    """One row of a stacked bar chart: its label, one value per segment, and the total
    written at its end (the sum of its values when not given)."""

    label: str
    values: Sequence[float]
    bad: bool = False
    total: float | None = None


@dataclass(frozen=True, slots=True)
class Limit:
    """A vertical line across a stacked bar chart at ``value`` (a memory limit)."""

    label: str
    value: float
    dashed: bool = False


def downsample(
    xs: Sequence[float], ys: Sequence[float], limit: int
) -> tuple[list[float], list[float]]:
    """At most ``limit`` points: each bucket's first, minimum and maximum, in x order.

    Non-finite values are kept (they mark gaps and the plot draws them as crosses).
    """
    count = len(ys)
    if count <= limit:
        return list(xs), list(ys)
    buckets = max(limit // 2, 1)
    out_x: list[float] = []
    out_y: list[float] = []
    for bucket in range(buckets):
        start = bucket * count // buckets
        end = max((bucket + 1) * count // buckets, start + 1)
        indices = range(start, end)
        bad = [i for i in indices if not math.isfinite(ys[i])]
        good = [i for i in indices if math.isfinite(ys[i])]
        keep = set(bad[:1])
        if good:
            keep.add(min(good, key=lambda i: ys[i]))
            keep.add(max(good, key=lambda i: ys[i]))
        for i in sorted(keep):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` (1, 2, 2.5 or 5 times a power of ten)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    return ticks


def _format(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.1e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{value:.4g}"


class _Scale:
    """Maps data to pixels on one axis, linear or log10."""

    def __init__(self, low: float, high: float, start: float, end: float, log: bool) -> None:
        self.log = log
        if log:
            low, high = math.log10(low), math.log10(high)
        if high <= low:
            low, high = low - 0.5, high + 0.5
        self.low, self.high, self.start, self.end = low, high, start, end

    def __call__(self, value: float) -> float:
        if self.log:
            value = math.log10(value)
        fraction = (value - self.low) / (self.high - self.low)
        return round(self.start + fraction * (self.end - self.start), 1)

    def ticks(self) -> list[float]:
        if not self.log:
            return nice_ticks(self.low, self.high)
        first, last = math.floor(self.low), math.ceil(self.high)
        stride = max(1, (last - first) // 5)
        powers = [
            10.0**e
            for e in range(first, last + 1, stride)
            if self.low - 1e-9 <= e <= self.high + 1e-9
        ]
        if len(powers) >= 2:
            return powers
        # Less than a decade: round values inside it, placed on the log axis.
        return [t for t in nice_ticks(10.0**self.low, 10.0**self.high, 6) if t > 0]


def line_plot(
    title: str,
    lines: Sequence[Line],
    markers: Sequence[Marker] = (),
    *,
    log_y: bool = False,
    note: str = "",
    x_label: str = "step",
) -> str:
    """A line plot of ``lines`` over steps, with ``markers`` as dashed vertical lines.

    ``log_y`` falls back to a linear axis when a value is not positive. ``note`` is a
    small caption under the title (for example "downsampled: 600 of 10,000 points").
    """
    finite = [
        (x, y)
        for line in lines
        for x, y in zip(line.xs, line.ys, strict=False)
        if math.isfinite(y) and math.isfinite(x)
    ]
    all_x = [x for line in lines for x in line.xs if math.isfinite(x)]
    all_x += [m.x for m in markers]
    parts = [_open(title)]
    if not finite or not all_x:
        parts.append(_text(WIDTH / 2, HEIGHT / 2, "no finite values", "middle", "muted"))
        return "".join(parts) + "</svg>"
    ys = [y for _, y in finite]
    log = log_y and min(ys) > 0
    x_scale = _Scale(min(all_x), max(all_x), _LEFT, WIDTH - _RIGHT, False)
    y_low, y_high = min(ys), max(ys)
    if not log and y_low == y_high:  # a flat line: a band around it, of its own scale
        half = abs(y_low) * 0.1 or 1.0
        y_low, y_high = y_low - half, y_high + half
    elif not log:  # a margin, so that the extremes do not sit on the axes
        margin = (y_high - y_low) * 0.04
        y_low, y_high = y_low - margin, y_high + margin
    y_scale = _Scale(y_low, y_high, HEIGHT - _BOTTOM, _TOP, log)
    parts += _axes(x_scale, y_scale, x_label)
    if note:
        parts.append(_text(_LEFT, 28, note, "start", "muted"))
    for index, marker in enumerate(markers):  # labels staggered over three rows
        parts.append(_marker(marker, x_scale(marker.x), index % 3))
    for index, line in enumerate(lines):
        parts += _polyline(line, x_scale, y_scale, PALETTE[index % len(PALETTE)], log)
    if len(lines) > 1:
        parts += _legend(lines)
    return "".join(parts) + "</svg>"


def bar_chart(title: str, bars: Bars, *, log_x: bool = True, note: str = "") -> str:
    """Horizontal bars, one row per label (per-layer gradient norms, for example)."""
    rows = [(label, value) for label, value in zip(bars.labels, bars.values, strict=False)]
    row_height = 18
    height = _TOP + row_height * max(len(rows), 1) + _BOTTOM
    left = 220
    parts = [_open(title, height)]
    if note:
        parts.append(_text(_LEFT, 28, note, "start", "muted"))
    positive = [v for _, v in rows if math.isfinite(v) and v > 0]
    if not positive:
        parts.append(_text(WIDTH / 2, height / 2, "no positive values", "middle", "muted"))
        return "".join(parts) + "</svg>"
    log = log_x and len(positive) == len(rows)
    low = min(positive) / 2 if log else 0.0
    scale = _Scale(low, max(positive), left, WIDTH - _RIGHT - 60, log)
    for index, (label, value) in enumerate(rows):
        y = _TOP + index * row_height
        shown = label if len(label) <= 34 else "…" + label[-33:]
        parts.append(_text(left - 6, y + 13, shown, "end", "label"))
        if math.isfinite(value) and value > 0:
            end = scale(value)
            parts.append(
                f'<rect class="bar" x="{left}" y="{y + 3}" '
                f'width="{max(end - left, 1):.1f}" height="{row_height - 6}"/>'
            )
            parts.append(_text(end + 4, y + 13, _format(value), "start", "label"))
        else:
            parts.append(_text(left + 4, y + 13, _format(value), "start", "bad"))
    return "".join(parts) + "</svg>"


def stacked_bars(
    title: str,
    segments: Sequence[str],
    rows: Sequence[Stack],
    limits: Sequence[Limit] = (),
    *,
    unit: tuple[str, float] = ("", 1.0),
    value_text: Callable[[float], str] | None = None,
    colours: Sequence[str] = (),
    note: str = "",
) -> str:
    """Horizontal bars made of ``segments`` (one colour each, with a legend), one per row,
    on a linear axis from zero, with ``limits`` drawn as vertical lines.

    ``unit`` is a name and a divisor for the labels (``("GiB", 2**30)``). A row marked
    ``bad`` has its label in the error colour; non-finite or negative values count as zero.
    ``value_text`` writes a value (a segment's tooltip, a row's total), in ``unit`` if not
    given. ``colours`` gives each segment its colour (the palette's, in order, if not).
    """
    colours = [
        colours[i] if i < len(colours) else PALETTE[i % len(PALETTE)] for i in range(len(segments))
    ]
    row_height = 22
    top = _TOP + (12 if note else 0)
    bottom = top + row_height * max(len(rows), 1)
    height = bottom + _BOTTOM + 12 * len(limits)
    left, right = 90, WIDTH - _RIGHT - 70
    parts = [_open(title, height)]
    if note:
        parts.append(_text(_LEFT, 28, note, "start", "muted"))
    cleaned = [[v if math.isfinite(v) and v > 0 else 0.0 for v in row.values] for row in rows]
    totals = [sum(values) for values in cleaned]
    high = max([*totals, *(lim.value for lim in limits if math.isfinite(lim.value))], default=0)
    if not rows or high <= 0:
        parts.append(_text(WIDTH / 2, height / 2, "no positive values", "middle", "muted"))
        return "".join(parts) + "</svg>"
    name, divisor = unit

    def written(value: float) -> str:
        return value_text(value) if value_text else f"{_format(value / divisor)} {name}".strip()

    ticks = [t * divisor for t in nice_ticks(0.0, high / divisor, 5)]
    scale = _Scale(0.0, max(high, ticks[-1] if ticks else high), left, right, False)
    for tick in ticks:
        x = scale(tick)
        parts.append(f'<path class="grid" d="M{x} {top}V{bottom}"/>')
        shown = f"{_format(tick / divisor)} {name}" if tick else "0"
        parts.append(_text(x, bottom + 14, shown.strip(), "middle", "label"))
    parts += _stack_legend(segments, colours, top)
    for index, (row, values, total) in enumerate(zip(rows, cleaned, totals, strict=False)):
        y = top + index * row_height
        parts.append(_text(left - 6, y + 15, row.label, "end", "bad" if row.bad else "label"))
        start = float(left)
        for segment, value in enumerate(values):
            if value <= 0:
                continue
            end = scale(scale.low + value) - left + start
            label = segments[segment] if segment < len(segments) else ""
            parts.append(
                f'<rect class="segment" x="{start:.1f}" y="{y + 4}" '
                f'width="{max(end - start, 0.5):.1f}" height="{row_height - 8}" '
                f'fill="{colours[segment] if segment < len(colours) else PALETTE[0]}"><title>'
                f"{escape(label)}: {escape(written(value))}</title></rect>"
            )
            start = end
        shown = written(total if row.total is None else row.total)
        kind = "bad" if row.bad else "label"
        parts.append(_text(start + 4, y + 15, shown, "start", kind))
    for index, lim in enumerate(limits):
        if not math.isfinite(lim.value) or lim.value <= 0:
            continue
        x = scale(lim.value)
        dash = ' stroke-dasharray="4 3"' if lim.dashed else ""
        parts.append(
            f'<g class="limit"><path d="M{x} {top - 4}V{bottom}"{dash}/>'
            f"<title>{escape(lim.label)}</title></g>"
        )
        anchor = "end" if x > (left + right) / 2 else "start"
        parts.append(_text(x, bottom + 28 + 12 * index, lim.label, anchor, "limit-label"))
    parts.append(f'<path class="axis" d="M{left} {top}V{bottom}"/>')
    return "".join(parts) + "</svg>"


def _stack_legend(segments: Sequence[str], colours: Sequence[str], top: int) -> list[str]:
    parts = []
    x: float = _LEFT
    for segment, colour in zip(segments, colours, strict=False):
        parts.append(f'<rect x="{x:.1f}" y="{top - 14}" width="10" height="8" fill="{colour}"/>')
        parts.append(_text(x + 13, top - 7, segment, "start", "legend"))
        x += 22 + 6.2 * len(segment)
    return parts


def _open(title: str, height: int = HEIGHT) -> str:
    return (
        f'<svg class="plot" viewBox="0 0 {WIDTH} '
        f'{height}" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<rect class="area" x="0" y="0" width="{WIDTH}" height="{height}"/>'
        + _text(_LEFT, 14, title, "start", "title")
    )


def _text(x: float, y: float, text: str, anchor: str, kind: str) -> str:
    return f'<text class="{kind}" x="{x:g}" y="{y:g}" text-anchor="{anchor}">{escape(text)}</text>'


def _axes(x_scale: _Scale, y_scale: _Scale, x_label: str) -> list[str]:
    bottom, right = HEIGHT - _BOTTOM, WIDTH - _RIGHT
    parts = [f'<path class="axis" d="M{_LEFT} {_TOP}V{bottom}H{right}"/>']
    for tick in y_scale.ticks():
        y = y_scale(tick)
        parts.append(f'<path class="grid" d="M{_LEFT} {y}H{right}"/>')
        parts.append(_text(_LEFT - 4, y + 4, _format(tick), "end", "label"))
    for tick in nice_ticks(x_scale.low, x_scale.high, 6):
        x = x_scale(tick)
        parts.append(_text(x, bottom + 14, _format(tick), "middle", "label"))
    parts.append(_text(right, HEIGHT - 3, x_label, "end", "muted"))
    return parts


def _marker(marker: Marker, x: float, row: int) -> str:
    colour = MARKER_COLOURS.get(marker.severity, MARKER_COLOURS["warning"])
    label = escape(marker.label)
    # Near the right edge the label goes to the left of its line, inside the plot.
    at, anchor = (x - 3, "end") if x > WIDTH - _RIGHT - 50 else (x + 3, "start")
    return (
        f'<g class="marker"><path d="M{x} {_TOP}V{HEIGHT - _BOTTOM}" stroke="{colour}" '
        f'stroke-dasharray="4 3"/><title>{label}</title>'
        f'<text x="{at:g}" y="{_TOP + 10 + 12 * row}" text-anchor="{anchor}" '
        f'fill="{colour}">{label}</text></g>'
    )


def _polyline(line: Line, x_scale: _Scale, y_scale: _Scale, colour: str, log: bool) -> list[str]:
    """Finite runs as polylines; non-finite points as crosses along the top edge."""
    parts: list[str] = []
    run: list[str] = []
    crosses: list[float] = []
    for x, y in zip(line.xs, line.ys, strict=False):
        if math.isfinite(y) and math.isfinite(x) and (y > 0 or not log):
            run.append(f"{x_scale(x)},{y_scale(y)}")
            continue
        if not math.isfinite(y) and math.isfinite(x):
            crosses.append(x_scale(x))
        parts.append(_points(run, colour))
        run = []
    parts.append(_points(run, colour))
    for x in crosses[:200]:
        parts.append(f'<path class="nonfinite" d="M{x - 3} {_TOP - 3}l6 6m0 -6l-6 6"/>')
    return [p for p in parts if p]


def _points(run: list[str], colour: str) -> str:
    if not run:
        return ""
    if len(run) == 1:
        x, y = run[0].split(",")
        return f'<circle cx="{x}" cy="{y}" r="2" fill="{colour}"/>'
    return f'<polyline class="line" stroke="{colour}" points="{" ".join(run)}"/>'


def _legend(lines: Sequence[Line]) -> list[str]:
    parts = []
    x: float = _LEFT + 6
    for index, line in enumerate(lines[: len(PALETTE)]):
        colour = PALETTE[index % len(PALETTE)]
        name = line.name if len(line.name) <= 28 else "…" + line.name[-27:]
        parts.append(f'<rect x="{x:.1f}" y="{_TOP - 13}" width="10" height="3" fill="{colour}"/>')
        parts.append(_text(x + 13, _TOP - 8, name, "start", "legend"))
        x += 20 + 6.2 * len(name)
        if x > WIDTH - 120:
            break
    return parts
