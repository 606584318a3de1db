"""One self-contained HTML page: summary, plots, findings, and the docs of their rules.

The page needs nothing but itself: styles are inline, plots are inline SVG
(:mod:`torchdoctor.report.svg`), there is no script and no link to any other resource, so
it opens from disk or from a CI artifact. Templates are jinja2 with autoescape on; the rule
docs are rendered from their Markdown with raw HTML disabled. Pure: the page depends only
on the report and the options (no clock, no torch, no file but the package's own
templates and rule docs).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from torchdoctor import facts as declared
from torchdoctor.findings import Depth, Finding, Report, Severity
from torchdoctor.report.options import RenderOptions
from torchdoctor.report.rules import rule_for
from torchdoctor.report.sarif import repo_relative
from torchdoctor.rules.registry import Rule

__all__ = ["notebook_html", "render_html"]

_HEADING = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}
# Facts shown first in the summary, in this order, under these names.
_KEY_FACTS = (
    ("steps", "optimizer steps"),
    ("duration_s", "duration (s)"),
    ("seconds", "time (s)"),
    ("step_time_ms", "step time (ms)"),
    ("batch_wait_s", "data wait (s)"),
    ("backward_calls", "backward calls"),
    ("device", "device"),
    ("devices", "devices"),
    ("model", "model"),
    ("loss", "loss"),
    ("files", "files read"),
    ("versions", "versions"),
    ("torch", "torch"),
    ("python", "python"),
)
_FACT_TEXT_LIMIT = 400
_HIDDEN_FACTS = {"internal_errors", "layer_grad_norms"}
# Facts the model summary and the memory forecast sections show (hidden from "Facts").
_SUMMARY_FACTS = {"summary", "shared_parameters", "summary_note"}
_FORECAST_FACTS = {"forecast", "forecast_detail"}
_SUMMARY_DEPTH = 2  # modules deeper than this start folded (as the text report cuts them)
_BREAKDOWN = (
    ("parameters", "parameters"),
    ("gradients", "gradients"),
    ("optimizer_state", "optimizer state"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
    ("batch", "batch"),
)


@dataclass(frozen=True, slots=True)
class _Frame:
    number: int
    text: str
    marked: bool


@dataclass(slots=True)
class _Module:
    """One row of the model summary, with the modules under it."""

    name: str
    path: str
    kind: str
    depth: int
    cells: tuple[str, ...]
    open: bool
    children: list[_Module]


@dataclass(frozen=True, slots=True)
class _Summary:
    caption: str
    roots: list[_Module]
    shared: tuple[str, ...]
    note: str


@dataclass(frozen=True, slots=True)
class _ForecastRow:
    batch_size: int
    peak: str
    fits: str
    fits_class: str
    cells: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Forecast:
    heading: str
    error: str
    columns: tuple[str, ...]
    rows: tuple[_ForecastRow, ...]
    svg: str
    notes: tuple[str, ...]
    top_modules: tuple[tuple[str, str], ...]
    remedies: tuple[tuple[str, str, str, str], ...]
    method: str


@dataclass(frozen=True, slots=True)
class _Item:
    finding: Finding
    anchor: str
    name: str
    place: str
    frame: tuple[_Frame, ...]
    caret: str
    evidence: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]


def render_html(report: Report, options: RenderOptions) -> str:
    """Render ``report`` as one HTML page that needs no network and no other file."""
    from torchdoctor.report.html_plots import figures

    findings = report.findings
    items = [_item(f, index, options) for index, f in enumerate(findings)]
    groups = [
        (_HEADING[s], s.value, [i for i in items if i.finding.severity is s])
        for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
    ]
    plots = figures(report)
    summary = _summary(report.facts, options.summary_depth)
    forecast = _forecast(report.facts)
    hidden = (_SUMMARY_FACTS if summary else set()) | (_FORECAST_FACTS if forecast else set())
    page = _environment().get_template("report.html.j2")
    return str(
        page.render(
            title=options.title or f"torchdoctor {report.command}".strip(),
            report=report,
            verdict=_verdict(report),
            counts=report.counts(),
            depth_counts=_depth_counts(findings),
            key_facts=_key_facts(report.facts),
            other_facts=_other_facts(report.facts, hidden),
            summary=summary,
            forecast=forecast,
            figures=plots,
            marked=any('class="marker"' in plot.svg for plot in plots),
            groups=[g for g in groups if g[2]],
            docs=_docs(sorted({f.code for f in findings}), findings),
        )
    )


def notebook_html(report: Report, options: RenderOptions | None = None) -> str:
    """The page inside an ``<iframe srcdoc>``, as a notebook cell shows it: the page's
    styles stay inside the frame instead of restyling the notebook around it."""
    from html import escape

    page = render_html(
        report, options or RenderOptions(title=f"torchdoctor {report.command}".strip())
    )
    return (
        f'<iframe srcdoc="{escape(page, quote=True)}" title="torchdoctor report" '
        'style="width: 100%; height: 640px; border: 1px solid #e5e7eb;"></iframe>'
    )


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("torchdoctor.report", "html_templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["ticks"] = _ticks
    return environment


_TICKS = re.compile(r"`([^`\n]+)`")


def _ticks(text: str) -> Any:
    """Escape ``text`` and show its `backticked` spans as code."""
    from markupsafe import Markup, escape

    return Markup(_TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", str(escape(text))))


def _verdict(report: Report) -> tuple[str, str]:
    worst = report.worst_severity()
    if worst is None:
        return "clean", "No problems found."
    counts = report.counts()
    if worst is Severity.ERROR:
        return "error", f"{_plural(counts['error'], 'error')} to fix."
    if worst is Severity.WARNING:
        return "warning", f"No errors; {_plural(counts['warning'], 'warning')} to read."
    return "info", f"No errors or warnings; {counts['info']} info."


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _depth_counts(findings: list[Finding]) -> list[tuple[str, int]]:
    counter = Counter(d for f in findings for d in f.depths)
    return [(d.value, counter[d]) for d in Depth if counter[d]]


def _key_facts(facts: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(label, _fact_text(facts[key])) for key, label in _KEY_FACTS if key in facts]


def _other_facts(facts: Mapping[str, Any], hidden: set[str]) -> list[tuple[str, str]]:
    shown = {key for key, _ in _KEY_FACTS} | _HIDDEN_FACTS | hidden
    return [(key, _fact_text(value)) for key, value in sorted(facts.items()) if key not in shown]


def _fact_text(value: Any) -> str:
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        text = value
    elif _readable(value) is not None:
        text = str(_readable(value))
    else:
        try:
            text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > _FACT_TEXT_LIMIT:
        text = text[: _FACT_TEXT_LIMIT - 1] + "…"
    return text


def _milder(severity: Severity, default: Severity) -> str:
    order = (Severity.INFO, Severity.WARNING, Severity.ERROR)
    return "milder" if order.index(severity) < order.index(default) else "graver"


def _readable(value: Any) -> str | None:
    """A fact as a person reads it: a long list of numbers as its count and range, a
    dict of such lists (``series_steps``) one entry per key; ``None``: print it as is."""
    if isinstance(value, list) and len(value) > 8 and _numbers(value):
        return f"{len(value)} values, {_number(min(value))} to {_number(max(value))}"
    if isinstance(value, Mapping) and value and all(isinstance(v, list) for v in value.values()):
        parts = [f"{key}: {_readable(item) or _fact_text(item)}" for key, item in value.items()]
        return "; ".join(parts)
    return None


def _numbers(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _int(value: Any) -> int | None:
    """An integer fact, or ``None`` (missing, or not a number: facts may come from JSON)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) else None


def _count(value: Any) -> str:
    number = _int(value)
    if number is None:
        return "-"
    for limit, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if number >= limit:
            return f"{number / limit:.1f}{suffix}"
    return str(number)


def _bytes(value: Any) -> str:
    from torchdoctor.report.memory_text import format_bytes

    number = _int(value)
    return "-" if number is None else format_bytes(number)


def _summary(facts: Mapping[str, Any], depth_shown: int | None) -> _Summary | None:
    """``check``'s model summary as a tree of modules, root first; ``None`` without one.
    Modules deeper than ``depth_shown`` (default 2) start folded."""
    rows = [row for row in declared.SUMMARY.get(facts) or () if "module" in row]
    if not rows:
        return None
    open_below = _SUMMARY_DEPTH if depth_shown is None else max(depth_shown, 0)
    roots: list[_Module] = []
    stack: list[_Module] = []
    for row in rows:
        depth = max(_int(row.get("depth")) or 0, 0)
        path = str(row["module"])
        shape = row.get("output_shape")
        node = _Module(
            name=path if depth == 0 else path.rsplit(".", 1)[-1],
            path=path,
            kind=str(row.get("type") or ""),
            depth=depth,
            cells=(
                _count(row.get("parameters")),
                _count(row.get("trainable")),
                _count(row.get("buffers")),
                str(row.get("dtype") or "-"),
                " × ".join(str(s) for s in shape) if isinstance(shape, list) else "-",
                _bytes(row.get("activation_bytes")),
            ),
            open=depth < open_below,
            children=[],
        )
        while stack and stack[-1].depth >= depth:
            stack.pop()
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    shared_text = tuple(
        ", ".join(str(name) for name in names)
        for names in declared.SHARED_PARAMETERS.get(facts) or ()
        if isinstance(names, list)
    )
    caption = (
        f"{_plural(len(rows), 'module')}; those deeper than {open_below} start hidden "
        "(open a row marked ▸ to see its children)."
    )
    note = declared.SUMMARY_NOTE.get(facts)
    return _Summary(caption, roots, shared_text, note or "")


def _forecast(facts: Mapping[str, Any]) -> _Forecast | None:
    """``check --forecast``'s memory forecast; ``None`` when none was asked."""
    from torchdoctor.report.html_plots import forecast_figure

    detail = declared.FORECAST_DETAIL.get(facts)
    if detail is None:
        return None
    memory = _int(detail.get("device_memory"))
    usable = _int(detail.get("usable_bytes"))
    device = str(detail.get("device") or "device")
    where = (
        f"{device}, {_bytes(memory)} (usable by a step: {_bytes(usable)})"
        if memory
        else f"{device}, memory unknown"
    )
    amp = f", autocast {detail['amp']}" if detail.get("amp") else ""
    heading = f"One training step on {where}{amp}"
    method = str(detail.get("method") or "")
    error = str(detail.get("error") or "")
    points = [
        p for p in declared.FORECAST.get(facts) or () if _int(p.get("batch_size")) is not None
    ]
    if error or not points:
        return _Forecast(heading, error, (), (), "", (), (), (), method)
    parts: list[Mapping[str, Any]] = [_mapping(p.get("breakdown")) for p in points]
    segments = [(k, label) for k, label in _BREAKDOWN if any(_int(b.get(k)) for b in parts)]
    known = {k for k, _ in _BREAKDOWN}
    extra = sorted({str(k) for b in parts for k in b if k not in known and _int(b.get(k))})
    segments += [(k, k.replace("_", " ")) for k in extra]
    rows = []
    drawn = []
    for point, breakdown in zip(points, parts, strict=True):
        fits = point.get("fits")
        label = _yes_no(fits)
        css = {"yes": "fits", "no": "no-fit"}.get(label, "unknown")
        size = _int(point.get("batch_size")) or 0
        peak = _int(point.get("peak_bytes"))
        rows.append(
            _ForecastRow(
                size,
                _bytes(peak),
                label,
                css,
                tuple(_bytes(breakdown.get(k, 0)) for k, _ in segments),
            )
        )
        values = {k: float(_int(breakdown.get(k)) or 0) for k, _ in segments}
        total = float(peak) if peak is not None else sum(values.values())
        drawn.append((size, values, total, fits is False))
    svg = forecast_figure(segments, drawn, memory, usable).svg
    return _Forecast(
        heading,
        "",
        tuple(label for _, label in segments),
        tuple(rows),
        svg,
        _forecast_notes(detail),
        _top_modules(detail.get("top_modules")),
        _remedies(detail.get("remedies")),
        method,
    )


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "?"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _forecast_notes(detail: Mapping[str, Any]) -> tuple[str, ...]:
    from torchdoctor.report.memory_text import largest_fit_line

    line = largest_fit_line(detail)
    return (line[0].upper() + line[1:] + ".",) if line else ()


def _top_modules(value: Any) -> tuple[tuple[str, str], ...]:
    items = value if isinstance(value, list) else []
    return tuple(
        (str(item.get("module")), _bytes(item.get("activation_bytes")))
        for item in items
        if isinstance(item, Mapping)
    )


def _remedies(value: Any) -> tuple[tuple[str, str, str, str], ...]:
    """(name, peak, "saves X" or "costs X", fits) for each remedy measured."""
    out = []
    for remedy in value if isinstance(value, list) else []:
        if not isinstance(remedy, Mapping):
            continue
        saving = _int(remedy.get("saving_bytes"))
        change = (
            "-"
            if saving is None
            else f"{'saves' if saving >= 0 else 'costs'} {_bytes(abs(saving))}"
        )
        fits = _yes_no(remedy.get("fits"))
        out.append((str(remedy.get("name")), _bytes(remedy.get("peak_bytes")), change, fits))
    return tuple(out)


def _item(finding: Finding, index: int, options: RenderOptions) -> _Item:
    rule = rule_for(finding.code)
    loc = finding.location
    place = str(loc)
    if loc.path is not None:
        place = str(replace(loc, path=repo_relative(loc.path, options.root)))
    frame, caret = _frame(finding) if options.show_source else ((), "")
    evidence = (
        tuple((str(k), _fact_text(v)) for k, v in finding.evidence.items())
        if options.show_evidence
        else ()
    )
    notes = []
    if finding.occurrences > 1:
        notes.append(f"{finding.occurrences} times")
    if finding.confidence.value != "high":
        notes.append(f"confidence: {finding.confidence.value}")
    if finding.fix is not None:
        notes.append(f"auto-fix ({finding.fix.applicability.value}): {finding.fix.description}")
    return _Item(
        finding,
        f"finding-{index + 1}",
        rule.name if rule else "",
        place,
        frame,
        caret,
        evidence,
        tuple(notes),
    )


def _frame(finding: Finding) -> tuple[tuple[_Frame, ...], str]:
    loc = finding.location
    if not loc.snippet:
        return (), ""
    first = loc.line or 1
    last = loc.end_line or first
    lines = loc.snippet.splitlines()[:20]
    frame = tuple(
        _Frame(first + n, text, first <= first + n <= last) for n, text in enumerate(lines)
    )
    caret = ""
    if loc.column is not None and len(lines) == 1:
        width = (
            max((loc.end_column or loc.column + 1) - loc.column, 1)
            if (loc.end_line or first) == first
            else 1
        )
        caret = " " * loc.column + "^" * min(width, max(len(lines[0]) - loc.column, 1))
    return frame, caret


def _docs(codes: list[str], findings: list[Finding]) -> list[tuple[str, str, Any]]:
    """(code, name, rendered doc) for each code present, in code order; a finding
    reported at another severity than its rule's default says why, above the doc."""
    docs = []
    for code in codes:
        code, name, body = _doc(code)
        note = _severity_note(rule_for(code), [f for f in findings if f.code == code])
        docs.append((code, name, note + body))
    return docs


def _severity_note(rule: Rule | None, findings: list[Finding]) -> Any:
    from markupsafe import Markup, escape

    if rule is None:
        return Markup("")
    notes = []
    for severity in sorted({f.severity for f in findings} - {rule.severity}, key=str):
        low = [f for f in findings if f.severity is severity and f.confidence.value != "high"]
        why = (
            f"the evidence is not conclusive (confidence {low[0].confidence.value})"
            if low
            else f"the detector judged this case {_milder(severity, rule.severity)} than the "
            "rule's usual one; its message says what it saw"
        )
        notes.append(
            f"Reported here as <strong>{escape(severity.value)}</strong>, not the rule's "
            f"default {escape(rule.severity.value)}, because {escape(why)}."
        )
    return Markup("".join(f'<p class="severity-note">{note}</p>' for note in notes))


def _doc(code: str) -> tuple[str, str, Any]:
    from markupsafe import Markup

    rule = rule_for(code)
    if rule is None:
        return code, "", Markup("<p>Not a catalogued rule.</p>")
    return code, rule.name, _doc_body(rule)


@functools.lru_cache(maxsize=512)
def _doc_body(rule: Rule) -> Any:
    """The rule's doc as HTML; a user's own (``TDX``) rule has its summary alone."""
    from markupsafe import Markup

    from torchdoctor.rules.docs import load_doc

    try:
        text = load_doc(rule.code).to_markdown()
    except LookupError:
        text = f"# {rule.code} {rule.name}\n\n{rule.summary}.\n"
    body = text.split("\n", 1)[1] if text.startswith("# ") else text
    return Markup(_markdown().render(body.replace("\n## ", "\n#### ")))


@functools.lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False})
