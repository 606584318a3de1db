"""GitHub Actions workflow annotations (``::error file=...,line=...::message``).

GitHub shows at most :data:`ANNOTATIONS_PER_KIND` error, warning and notice annotations
per step (and 50 per job) and drops the rest silently. So findings are emitted worst
first, at most that many of each kind as annotations; the rest are printed as plain
``path:line:col: CODE message`` log lines, and a last line says how many the limit hid.
Paths are relative to :attr:`RenderOptions.root`. Pure: no I/O, no clock.
"""

from __future__ import annotations

from torchdoctor.findings import Finding, Report, Severity
from torchdoctor.report.options import RenderOptions
from torchdoctor.report.rules import rule_for
from torchdoctor.report.sarif import repo_relative

__all__ = ["ANNOTATIONS_PER_KIND", "render_github"]

ANNOTATIONS_PER_KIND = 10
_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, options: RenderOptions) -> str:
    """Render findings as workflow commands, worst first, with the overflow counted."""
    ordered = sorted(report.findings, key=lambda f: (-f.severity.rank, f.sort_key))
    used = {severity: 0 for severity in Severity}
    lines: list[str] = []
    hidden: list[Finding] = []
    for finding in ordered:
        if used[finding.severity] >= ANNOTATIONS_PER_KIND:
            hidden.append(finding)
            continue
        used[finding.severity] += 1
        lines.append(_annotation(finding, options))
    if hidden:
        lines += [_plain(finding, options) for finding in hidden]
        counts = {s: sum(1 for f in hidden if f.severity is s) for s in Severity}
        parts = [
            f"{counts[s]} {_COMMAND[s]}{'s' if counts[s] != 1 else ''}"
            for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
            if counts[s]
        ]
        summary = (
            f"torchdoctor: {len(hidden)} more finding(s) ({', '.join(parts)}) are not "
            f"annotations: GitHub shows at most {ANNOTATIONS_PER_KIND} errors, "
            f"{ANNOTATIONS_PER_KIND} warnings and {ANNOTATIONS_PER_KIND} notices per "
            "step; they are listed above in this log."
        )
        if used[Severity.INFO] < ANNOTATIONS_PER_KIND:
            lines.append(f"::notice title=torchdoctor::{_data(summary)}")
        else:
            lines.append(summary)
    return "\n".join(lines) + ("\n" if lines else "")


def _annotation(finding: Finding, options: RenderOptions) -> str:
    loc = finding.location
    props: list[str] = []
    if loc.path:
        props.append(f"file={_property(repo_relative(loc.path, options.root))}")
        if loc.line is not None:
            props.append(f"line={loc.line}")
            if loc.end_line is not None:
                props.append(f"endLine={loc.end_line}")
            if loc.column is not None:
                props.append(f"col={loc.column + 1}")
                if loc.end_column is not None and loc.end_line == loc.line:
                    props.append(f"endColumn={loc.end_column + 1}")
    rule = rule_for(finding.code)
    title = f"{finding.code} {rule.name}" if rule else finding.code
    props.append(f"title={_property(title)}")
    message = finding.message
    if loc.object and not loc.path:
        message = f"[{loc.object}] {message}"
    if finding.fix_hint:
        message += f"\nFix: {finding.fix_hint}"
    return f"::{_COMMAND[finding.severity]} {','.join(props)}::{_data(message)}"


def _plain(finding: Finding, options: RenderOptions) -> str:
    loc = finding.location
    if loc.path:
        place = f"{repo_relative(loc.path, options.root)}:{loc.line or 1}:{(loc.column or 0) + 1}"
    else:
        place = loc.object or "<run>"
    return f"{place}: {finding.code} {finding.message}"
