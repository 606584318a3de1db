"""The model summary and memory forecast sections of the text report.

Both are read from the report's facts by name (``summary``, ``forecast`` and
``forecast_detail``, declared in :mod:`torchdoctor.facts` and written by ``check``) and
rendered as plain, fixed-width tables. Modules deeper than the render option
``summary_depth`` (default 2) are left out of the table; the JSON report carries every
module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text

from torchdoctor import facts as declared

__all__ = [
    "DEFAULT_DEPTH",
    "format_bytes",
    "forecast_lines",
    "render_summary_text",
    "skipped_lines",
    "summary_lines",
]

DEFAULT_DEPTH = 2
_BREAKDOWN = (
    ("parameters", "params"),
    ("gradients", "grads"),
    ("optimizer_state", "optimizer"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
    ("batch", "batch"),
)


def format_bytes(size: float | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; ``None`` -> ``"-"``."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - the loop always returns


def _count(number: int) -> str:
    for limit, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if number >= limit:
            return f"{number / limit:.1f}{suffix}"
    return str(number)


def _shape(shape: Any) -> str:
    return "x".join(str(size) for size in shape) if isinstance(shape, list) else "-"


def summary_lines(facts: Mapping[str, Any], depth: int | None = None) -> list[Text]:
    """The model summary table to ``depth`` (default 2), or nothing without a summary."""
    rows = declared.SUMMARY.get(facts)
    if not rows:
        return []
    depth = DEFAULT_DEPTH if depth is None else depth
    shown = [row for row in rows if int(row.get("depth", 0)) <= depth]
    lines = [
        Text(f"Model summary (modules to depth {depth}; {len(rows)} in all)", style="bold"),
        Text(
            f"  {'module':30s} {'params':>8s} {'trainable':>9s} {'buffers':>8s} "
            f"{'dtype':9s} {'output':16s} {'activations':>11s}",
            style="dim",
        ),
    ]
    for row in shown:
        name = "  " * int(row.get("depth", 0)) + str(row["module"])
        if len(name) > 30:
            name = name[:29] + "~"
        lines.append(
            Text(
                f"  {name:30s} {_count(row['parameters']):>8s} {_count(row['trainable']):>9s} "
                f"{_count(row['buffers']):>8s} {str(row.get('dtype') or '-')[:9]:9s} "
                f"{_shape(row.get('output_shape'))[:16]:16s} "
                f"{format_bytes(row.get('activation_bytes')):>11s}"
            )
        )
    for names in declared.SHARED_PARAMETERS.get(facts) or []:
        lines.append(Text(f"  shared (counted once): {', '.join(names)}", style="dim"))
    note = declared.SUMMARY_NOTE.get(facts)
    if note:
        lines.append(Text(f"  {note}", style="dim"))
    return lines


def forecast_lines(facts: Mapping[str, Any]) -> list[Text]:
    """The memory forecast: per batch size, the largest that fits, top modules,
    remedies; nothing when no forecast was asked."""
    detail = declared.FORECAST_DETAIL.get(facts)
    if detail is None:
        return []
    memory = detail.get("device_memory")
    where = (
        f"{detail.get('device')}, {format_bytes(memory)} "
        f"(usable {format_bytes(detail.get('usable_bytes'))})"
        if memory
        else f"{detail.get('device')}, memory unknown"
    )
    amp = f", autocast {detail['amp']}" if detail.get("amp") else ""
    lines = [Text(f"Memory forecast of one training step ({where}{amp})", style="bold")]
    if detail.get("error"):
        return [*lines, Text(f"  {detail['error']}", style="yellow")]
    lines.append(
        Text(
            f"  {'batch':>7s} {'peak':>11s} {'fits':>5s} "
            + " ".join(f"{label:>11s}" for _, label in _BREAKDOWN),
            style="dim",
        )
    )
    for point in declared.FORECAST.get(facts) or []:
        fits = {True: "yes", False: "NO", None: "?"}[point.get("fits")]
        parts = " ".join(
            f"{format_bytes(point['breakdown'].get(key, 0)):>11s}" for key, _ in _BREAKDOWN
        )
        lines.append(
            Text(
                f"  {point['batch_size']:>7d} {format_bytes(point['peak_bytes']):>11s} "
                f"{fits:>5s} {parts}",
                style="" if fits != "NO" else "red",
            )
        )
    lines += _forecast_notes(detail)
    return lines


def _forecast_notes(detail: Mapping[str, Any]) -> list[Text]:
    lines = [Text(f"  {largest_fit_line(detail)}")] if largest_fit_line(detail) else []
    top = detail.get("top_modules") or []
    if top:
        lines.append(Text("  most activation memory (end of the forward, largest batch):"))
        lines += [
            Text(f"    {item['module'] or '(model)'}: {format_bytes(item['activation_bytes'])}")
            for item in top
        ]
    remedies = detail.get("remedies") or []
    if remedies:
        size, base = detail.get("remedy_batch_size"), detail.get("remedy_baseline_bytes")
        against = f"batch {size}, peak {format_bytes(base)}" if size else "the largest batch"
        lines.append(Text(f"  remedies at {against} (each measured the same way):"))
        for remedy in remedies:
            saving = remedy["saving_bytes"]
            verb = "saves" if saving >= 0 else "costs"
            lines.append(
                Text(
                    f"    {remedy['name']}: {format_bytes(remedy['peak_bytes'])} "
                    f"({verb} {format_bytes(abs(saving))})"
                )
            )
    lines.append(Text(f"  method: {detail.get('method')}", style="dim"))
    return lines


def largest_fit_line(detail: Mapping[str, Any]) -> str:
    """The largest batch that fits, as what it is: a measured limit, or the end of the
    search at which the step still fits (larger ones were not tried)."""
    per_sample = detail.get("per_sample_bytes")
    largest = detail.get("largest_batch_size")
    growth = f"{format_bytes(per_sample)} per sample" if per_sample is not None else ""
    if largest is None:
        return growth
    if detail.get("largest_is_bound"):
        return (
            f"fits at batch size {largest} and perhaps beyond (the search stops at 64x the "
            f"largest batch asked; {growth})"
        )
    return f"largest batch size that fits: {largest} (measured; {growth})"


def skipped_lines(facts: Mapping[str, Any]) -> list[Text]:
    """Why the probes did not run (a model on the ``meta`` device), when they did not."""
    reason = declared.PROBES_SKIPPED.get(facts)
    return [Text(f"Probes skipped: {reason}.", style="yellow")] if reason else []


def render_summary_text(facts: Mapping[str, Any], depth: int | None = None) -> str:
    """The summary table alone, as plain text (``torchdoctor summary``)."""
    return "".join(f"{line.plain}\n" for line in summary_lines(facts, depth))
