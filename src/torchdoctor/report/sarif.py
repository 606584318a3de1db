"""SARIF 2.1.0 output, in the subset GitHub code scanning accepts.

* paths are relative to :attr:`RenderOptions.root` (the repository root) under
  ``uriBaseId: "%SRCROOT%"``, so alerts do not depend on where the checkout lives;
* rule ids are the stable codes (``TD201``), with the rule's name, summary and full
  documentation as help text;
* every result has a ``partialFingerprints`` entry computed from the rule, the file and
  the text of the line (not the line number), so an alert survives code moving around;
* findings without a file (a module path, a parameter) get a logical location.

Pure: no I/O beyond the packaged rule docs, no clock; output is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import PurePosixPath
from typing import Any

from torchdoctor.findings import Confidence, Finding, Report, Severity
from torchdoctor.report.options import RenderOptions
from torchdoctor.report.rules import rule_for
from torchdoctor.rules.registry import Rule

__all__ = ["SARIF_SCHEMA", "fingerprint", "render_sarif", "repo_relative"]

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = "https://github.com/torchdoctor/torchdoctor"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_PROBLEM = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}
_PRECISION = {Confidence.HIGH: "high", Confidence.MEDIUM: "medium", Confidence.LOW: "low"}


def repo_relative(path: str, root: str | None) -> str:
    """``path`` relative to ``root`` with ``/`` separators, when it lies inside it."""
    if root and os.path.isabs(path):
        try:
            relative = os.path.relpath(path, root)
        except ValueError:
            relative = path
        if not relative.startswith(".."):
            path = relative
    return PurePosixPath(path.replace(os.sep, "/")).as_posix()


def fingerprint(finding: Finding, path: str, occurrence: int) -> str:
    """A stable hash of rule, file, whitespace-normalised line text and occurrence."""
    loc = finding.location
    text = " ".join((loc.snippet or "").split()) or loc.object or f"line {loc.line}"
    key = f"{finding.code}\0{path}\0{text}\0{occurrence}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def render_sarif(report: Report, options: RenderOptions) -> str:
    """Render the report as one SARIF 2.1.0 log with one run."""
    findings = report.findings
    codes = sorted({f.code for f in findings})
    index = {code: i for i, code in enumerate(codes)}
    seen: Counter[tuple[str, str, str]] = Counter()
    results = []
    for finding in findings:
        path = repo_relative(finding.location.path, options.root) if finding.location.path else ""
        key = (finding.code, path, " ".join((finding.location.snippet or "").split()))
        results.append(_result(finding, path, index.get(finding.code, -1), seen[key]))
        seen[key] += 1
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchdoctor",
                        "version": report.tool_version or "0",
                        "informationUri": INFORMATION_URI,
                        "rules": [
                            _rule(rule) if (rule := rule_for(code)) else {"id": code}
                            for code in codes
                        ],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _rule(rule: Rule) -> dict[str, Any]:
    summary = rule.summary + "."
    full, help_markdown = summary, summary
    try:
        from torchdoctor.rules.docs import load_doc

        doc = load_doc(rule.code)
        full = doc.section("What it finds") or summary
        help_markdown = doc.to_markdown()
    except LookupError:
        pass
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": full},
        "help": {"text": help_markdown, "markdown": help_markdown},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {
            "tags": ["pytorch", rule.topic.title.lower()],
            "problem.severity": _PROBLEM[rule.severity],
        },
    }


def _result(finding: Finding, path: str, rule_index: int, occurrence: int) -> dict[str, Any]:
    text = finding.message
    if finding.fix_hint:
        text += f" Fix: {finding.fix_hint}"
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": _LEVEL[finding.severity],
        "message": {"text": text},
        "locations": [_location(finding, path)],
        "partialFingerprints": {"torchdoctor/v1": fingerprint(finding, path, occurrence)},
        "properties": {
            "precision": _PRECISION[finding.confidence],
            "depths": [d.value for d in finding.depths],
        },
    }
    if rule_index >= 0:
        result["ruleIndex"] = rule_index
    return result


def _location(finding: Finding, path: str) -> dict[str, Any]:
    loc = finding.location
    out: dict[str, Any] = {}
    if path:
        region: dict[str, int] = {"startLine": loc.line or 1}
        if loc.column is not None:
            region["startColumn"] = loc.column + 1
        if loc.end_line is not None:
            region["endLine"] = loc.end_line
            if loc.end_column is not None:
                region["endColumn"] = loc.end_column + 1
        artifact: dict[str, str] = {"uri": path}
        if not path.startswith("/"):
            artifact["uriBaseId"] = "%SRCROOT%"
        else:
            artifact["uri"] = "file://" + path
        out["physicalLocation"] = {"artifactLocation": artifact, "region": region}
    if loc.object:
        out["logicalLocations"] = [{"fullyQualifiedName": loc.object}]
    return out
