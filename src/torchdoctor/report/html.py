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


@dataclass(frozen=True, slots=True)
class _Frame:
    number: int
    text: str
    marked: bool


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
    page = _environment().get_template("report.html.j2")
    return str(
        page.render(
            title=options.title or f"torchdoctor {report.command}".strip(),
            report=report,
            verdict=_verdict(report),
            counts=report.counts(),
            depth_counts=_depth_counts(findings),
            key_facts=_key_facts(report.facts),
            other_facts=_other_facts(report.facts),
            figures=plots,
            marked=any('class="marker"' in plot.svg for plot in plots),
            groups=[g for g in groups if g[2]],
            docs=_docs(sorted({f.code for f in findings})),
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


def _other_facts(facts: Mapping[str, Any]) -> list[tuple[str, str]]:
    shown = {key for key, _ in _KEY_FACTS} | _HIDDEN_FACTS
    return [(key, _fact_text(value)) for key, value in sorted(facts.items()) if key not in shown]


def _fact_text(value: Any) -> str:
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > _FACT_TEXT_LIMIT:
        text = text[: _FACT_TEXT_LIMIT - 1] + "…"
    return text


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


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


def _docs(codes: list[str]) -> list[tuple[str, str, Any]]:
    """(code, name, rendered doc) for each code present, in code order."""
    return [_doc(code) for code in codes]


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
