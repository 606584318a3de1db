"""JUnit XML: one test case per finding, so CI dashboards that show test results show them.

Dashboards only tell pass from fail, so every finding is a ``<failure>`` whose ``type`` is
its severity. A clean report is one passing case, so the suite is never empty.
"""

from __future__ import annotations

from xml.etree import ElementTree

from torchdoctor.findings import Finding, Report
from torchdoctor.report.options import RenderOptions
from torchdoctor.report.rules import rule_for

__all__ = ["render_junit"]


def render_junit(report: Report, options: RenderOptions) -> str:
    """Render the report as a JUnit XML document with one ``<testsuite>``."""
    findings = report.findings
    suite = ElementTree.Element(
        "testsuite",
        {
            "name": f"torchdoctor {report.command}".strip(),
            "tests": str(max(len(findings), 1)),
            "failures": str(len(findings)),
            "errors": "0",
            "timestamp": report.created,
        },
    )
    if not findings:
        ElementTree.SubElement(suite, "testcase", {"classname": "torchdoctor", "name": "clean"})
    for finding in findings:
        _add_case(suite, finding)
    ElementTree.indent(suite)
    body = ElementTree.tostring(suite, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n{body}\n</testsuites>\n'


def _add_case(suite: ElementTree.Element, finding: Finding) -> None:
    loc = finding.location
    rule = rule_for(finding.code)
    name = f"{finding.code} {rule.name if rule else ''}".strip()
    if loc.line is not None:
        name += f" (line {loc.line})"
    attributes = {"classname": loc.path or loc.object or "torchdoctor", "name": name}
    if loc.path is not None:
        attributes["file"] = loc.path
    if loc.line is not None:
        attributes["line"] = str(loc.line)
    case = ElementTree.SubElement(suite, "testcase", attributes)
    failure = ElementTree.SubElement(
        case, "failure", {"type": finding.severity.value, "message": finding.message}
    )
    details = [f"{loc}: {finding.message}"]
    if finding.fix_hint:
        details.append(f"fix: {finding.fix_hint}")
    failure.text = "\n".join(details)
