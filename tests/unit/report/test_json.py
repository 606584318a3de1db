from __future__ import annotations

import json
import math

from torchdoctor.findings import Applicability, Depth, Edit, Fix, Location, Report
from torchdoctor.report import render
from torchdoctor.report.json import report_from_json
from torchdoctor.rules.registry import finding


def _report() -> Report:
    report = Report(tool_version="0.1.0", command="lint", created="2026-01-01T00:00:00Z")
    report.add(
        finding(
            "TD611",
            "deprecated",
            Location(path="a.py", line=2, column=4),
            Depth.LINT,
            fix_hint="use torch.amp",
            fix=Fix("rewrite", (Edit(2, 4, 2, 10, "x"),), Applicability.SAFE),
        )
    )
    report.add(
        finding(
            "TD208",
            "no grad",
            Location(object="head.weight"),
            Depth.CHECK,
            evidence={"ratio": math.inf, "steps": 3},
        )
    )
    return report


def test_schema_has_the_promised_fields() -> None:
    data = json.loads(render(_report(), "json"))
    assert data["version"] == 2
    first, second = data["findings"]
    assert first["location"] == {"path": "a.py", "line": 2, "column": 5}
    assert {"code", "severity", "message", "location", "fix_hint", "fix"} <= set(first)
    assert first["fix_hint"] == "use torch.amp" and first["fix"]["applicability"] == "safe"
    assert "fix" not in second and "autofix" not in second
    assert second["location"] == {"object": "head.weight"}
    assert second["evidence"]["ratio"] == "inf"


def test_round_trip() -> None:
    original = _report()
    again = report_from_json(render(original, "json"))
    assert [f.code for f in again.findings] == [f.code for f in original.findings]
    assert again.findings[0].fix == original.findings[0].fix
    assert again.findings[1].location == original.findings[1].location


def test_a_version_1_report_still_reads_with_its_old_names() -> None:
    data = json.loads(render(_report(), "json"))
    data["version"] = 1
    for item in data["findings"]:
        automatic = item.pop("fix", None)
        item["fix"] = item.pop("fix_hint")
        if automatic is not None:
            item["autofix"] = automatic
    again = report_from_json(json.dumps(data))
    original = _report()
    assert [f.fix_hint for f in again.findings] == [f.fix_hint for f in original.findings]
    assert [f.fix for f in again.findings] == [f.fix for f in original.findings]
    assert again.findings[0].fix is not None


def test_an_unknown_schema_version_is_refused() -> None:
    import pytest

    data = json.loads(render(_report(), "json"))
    data["version"] = 99
    with pytest.raises(ValueError, match="schema version"):
        report_from_json(json.dumps(data))
