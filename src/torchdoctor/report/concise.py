"""One line per finding, the format every linter user knows: ``path:line:col: CODE message``."""

from __future__ import annotations

from torchdoctor.findings import Finding, Report
from torchdoctor.report.options import RenderOptions

__all__ = ["render_concise"]


def render_concise(report: Report, options: RenderOptions) -> str:
    """Render one line per finding; findings without a file show their object instead."""
    lines = [_line(finding) for finding in report.findings]
    return "\n".join(lines) + ("\n" if lines else "")


def _line(finding: Finding) -> str:
    loc = finding.location
    if loc.path is not None:
        place = f"{loc.path}:{loc.line or 1}:{(loc.column or 0) + 1}:"
        if loc.object:
            place += f" [{loc.object}]"
    else:
        place = f"{loc.object or '<run>'}:"
    fixable = " [*]" if finding.fix is not None else ""
    message = " ".join(finding.message.split())  # one line per finding, whatever the message
    return f"{place} {finding.code}{fixable} {message}"
