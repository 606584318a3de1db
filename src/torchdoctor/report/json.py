"""JSON output: one object, ``{"version": 2, "findings": [...], ...}``.

The schema is versioned by :data:`SCHEMA_VERSION`; a field is only ever added within a
version, and a renamed or removed field bumps it. :func:`report_from_json` reads it back
(baselines, reports gathered from ranks or subprocesses), every version listed in
:data:`READABLE_VERSIONS`.

A finding's fields carry the names of :class:`~torchdoctor.findings.Finding`'s attributes:

* ``fix_hint``: the imperative advice, a string (``""`` when there is none);
* ``fix``: the automatic fix, present only when there is one:
  ``{"description", "applicability": "safe" | "unsafe", "edits": [{"start": [line, col],
  "end": [line, col], "replacement"}]}`` (1-based lines and columns).

Versions:

* 1: the advice was ``fix`` and the automatic fix ``autofix``.
* 2: renamed to match the data model: ``fix`` became ``fix_hint``, ``autofix`` became
  ``fix``. Everything else is as in 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from torchdoctor.errors import UnknownRuleError
from torchdoctor.facts import Facts
from torchdoctor.findings import (
    Applicability,
    Confidence,
    Depth,
    Edit,
    Finding,
    Fix,
    Location,
    Report,
    Severity,
)
from torchdoctor.report.options import RenderOptions
from torchdoctor.rules.registry import Rule, get_rule

__all__ = [
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "finding_to_dict",
    "render_json",
    "report_from_json",
    "report_to_dict",
]

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


def render_json(report: Report, options: RenderOptions) -> str:
    """Render the report as indented, key-sorted JSON."""
    return json.dumps(report_to_dict(report), indent=2, sort_keys=True, allow_nan=False) + "\n"


def report_to_dict(report: Report) -> dict[str, Any]:
    """The JSON-ready form of a report."""
    return {
        "version": SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": report.tool_version},
        "command": report.command,
        "created": report.created,
        "exit_status": report.exit_status,
        "summary": report.counts(),
        "findings": [finding_to_dict(f) for f in report.findings],
        "facts": _jsonable(report.facts),
        "series": _jsonable(report.series),
    }


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    """The JSON-ready form of one finding."""
    loc = finding.location
    location = {
        key: value
        for key, value in (
            ("path", loc.path),
            ("line", loc.line),
            ("column", None if loc.column is None else loc.column + 1),
            ("end_line", loc.end_line),
            ("end_column", None if loc.end_column is None else loc.end_column + 1),
            ("object", loc.object),
            ("snippet", loc.snippet),
        )
        if value is not None
    }
    rule = _rule(finding.code)
    out: dict[str, Any] = {
        "code": finding.code,
        "name": rule.name if rule else None,
        "severity": finding.severity.value,
        "message": finding.message,
        "location": location,
        "fix_hint": finding.fix_hint,
        "evidence": _jsonable(finding.evidence),
        "confidence": finding.confidence.value,
        "depths": [d.value for d in finding.depths],
        "occurrences": finding.occurrences,
    }
    if finding.ranks:
        out["ranks"] = list(finding.ranks)
    if finding.fix is not None:
        out["fix"] = {
            "description": finding.fix.description,
            "applicability": finding.fix.applicability.value,
            "edits": [
                {
                    "start": [e.start_line, e.start_column + 1],
                    "end": [e.end_line, e.end_column + 1],
                    "replacement": e.replacement,
                }
                for e in finding.fix.edits
            ],
        }
    return out


def _rule(code: str) -> Rule | None:
    """The catalogued rule, or a user's own (``TDX``) once declared."""
    try:
        return get_rule(code)
    except UnknownRuleError:
        return None


def report_from_json(text: str) -> Report:
    """Read a report written by :func:`render_json`.

    Raises:
        ValueError: not JSON, or not a torchdoctor report of a known schema version.
    """
    data = json.loads(text)
    version = data.get("version") if isinstance(data, dict) else None
    if version not in READABLE_VERSIONS:
        known = ", ".join(str(v) for v in READABLE_VERSIONS)
        raise ValueError(f"not a torchdoctor JSON report of schema version {known}")
    report = Report(
        tool_version=str(data.get("tool", {}).get("version", "")),
        command=str(data.get("command", "")),
        created=str(data.get("created", "")),
        facts=Facts.unchecked(data.get("facts") or {}),
        series={k: list(v) for k, v in (data.get("series") or {}).items()},
        exit_status=data.get("exit_status"),
    )
    for item in data.get("findings", []):
        report.add(_finding_from_dict(item if version == SCHEMA_VERSION else _upgraded(item)))
    return report


def _upgraded(item: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 finding with version-2 names."""
    out = {k: v for k, v in item.items() if k not in ("fix", "autofix")}
    out["fix_hint"] = item.get("fix", "")
    if "autofix" in item:
        out["fix"] = item["autofix"]
    return out


def _finding_from_dict(item: Mapping[str, Any]) -> Finding:
    loc = item.get("location", {})
    column = loc.get("column")
    end_column = loc.get("end_column")
    location = Location(
        path=loc.get("path"),
        line=loc.get("line"),
        column=None if column is None else column - 1,
        end_line=loc.get("end_line"),
        end_column=None if end_column is None else end_column - 1,
        object=loc.get("object"),
        snippet=loc.get("snippet"),
    )
    depths = tuple(Depth(d) for d in item.get("depths", [])) or (Depth.LINT,)
    fix = None
    auto = item.get("fix")
    if auto is not None:
        fix = Fix(
            description=auto["description"],
            applicability=Applicability(auto["applicability"]),
            edits=tuple(
                Edit(
                    e["start"][0], e["start"][1] - 1, e["end"][0], e["end"][1] - 1, e["replacement"]
                )
                for e in auto["edits"]
            ),
        )
    return Finding(
        code=item["code"],
        message=item["message"],
        location=location,
        severity=Severity(item["severity"]),
        depth=depths[0],
        fix_hint=item.get("fix_hint", ""),
        evidence=dict(item.get("evidence") or {}),
        confidence=Confidence(item.get("confidence", "high")),
        fix=fix,
        depths=depths,
        occurrences=int(item.get("occurrences", 1)),
        ranks=tuple(int(r) for r in item.get("ranks", ())),
    )


def _jsonable(value: Any) -> Any:
    """Make evidence and facts JSON-safe: non-finite floats become strings, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
