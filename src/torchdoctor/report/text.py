"""Human text output (rich): findings grouped by severity, each with place, evidence, fix."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from torchdoctor.facts import WATCHED
from torchdoctor.findings import Finding, Report, Severity
from torchdoctor.report.memory_text import forecast_lines, skipped_lines, summary_lines
from torchdoctor.report.options import RenderOptions
from torchdoctor.report.rules import rule_for

__all__ = ["render_text"]

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_HEADING = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}


def render_text(report: Report, options: RenderOptions) -> str:
    """Render the report for a terminal or a log."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=options.width,
        force_terminal=options.color,
        color_system="standard" if options.color else None,
        no_color=not options.color,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )
    if options.title:
        console.print(Text(options.title, style="bold"))
        console.print()
    findings = report.findings
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        group = [f for f in findings if f.severity is severity]
        if not group:
            continue
        console.print(Text(f"{_HEADING[severity]} ({len(group)})", style=_STYLE[severity]))
        for finding in group:
            _print_finding(console, finding, options)
        console.print()
    for section in (
        summary_lines(report.facts, options.summary_depth),
        forecast_lines(report.facts),
        skipped_lines(report.facts),
    ):
        for line in section:
            console.print(line)
        if section:
            console.print()
    console.print(_summary(report))
    return buffer.getvalue()


def _print_finding(console: Console, finding: Finding, options: RenderOptions) -> None:
    rule = rule_for(finding.code)
    head = Text("  ")
    head.append(finding.code, style=_STYLE[finding.severity])
    head.append(f" {rule.name if rule else ''}", style="bold")
    head.append(f"  {finding.location}", style="dim")
    console.print(head)
    _print_indented(console, Text(finding.message))
    if options.show_source and finding.location.snippet:
        _print_snippet(console, finding)
    if options.show_evidence and finding.evidence:
        _print_indented(console, Text(f"evidence: {_evidence(finding.evidence)}", style="dim"))
    if finding.fix_hint:
        _print_indented(console, Text.assemble(("fix: ", "green"), finding.fix_hint))
    extra = []
    if len(finding.depths) > 1:
        extra.append("seen by " + ", ".join(d.value for d in finding.depths))
    if finding.occurrences > 1:
        extra.append(f"{finding.occurrences} times")
    if finding.fix is not None:
        extra.append(f"auto-fix: {finding.fix.applicability.value}")
    if extra:
        _print_indented(console, Text(f"({'; '.join(extra)})", style="dim"))


def _print_indented(console: Console, text: Text) -> None:
    """Print ``text`` indented by four spaces, wrapped lines included, with no padding."""
    for line in text.wrap(console, max(console.width - 4, 20)):
        line.rstrip()
        console.print(Text("    ") + line)


def _print_snippet(console: Console, finding: Finding) -> None:
    snippet = finding.location.snippet or ""
    first = finding.location.line or 1
    lines = snippet.splitlines()
    gutter = len(str(first + len(lines) - 1))
    for offset, line in enumerate(lines):
        console.print(Text(f"    {first + offset:>{gutter}} | {line}", style="dim"))
    column = finding.location.column
    if column is not None and len(lines) == 1:
        console.print(Text(f"    {' ' * gutter} | {' ' * column}^", style="dim"))


def _evidence(evidence: Mapping[str, Any]) -> str:
    parts = []
    for key, value in evidence.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        parts.append(f"{key}={escape(str(value))}")
    return ", ".join(parts)


def _summary(report: Report) -> Text:
    counts = report.counts()
    if not len(report):
        watched = WATCHED.get(report.facts)  # a run says what it saw train
        if watched is not None and watched.startswith("nothing"):
            return Text(f"No problems found, but {watched}.", style="yellow")
        if watched is not None:
            return Text(f"No problems found ({watched}).", style="green")
        return Text("No problems found.", style="green")
    words = [
        f"{counts['error']} error{'s' if counts['error'] != 1 else ''}",
        f"{counts['warning']} warning{'s' if counts['warning'] != 1 else ''}",
        f"{counts['info']} info",
    ]
    watched = report.facts.get("watched")  # a run always says what it watched
    seen = f" ({watched})" if isinstance(watched, str) else ""
    return Text(", ".join(words) + seen + ".", style="bold")
