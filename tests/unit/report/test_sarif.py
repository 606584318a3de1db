"""SARIF 2.1.0 for GitHub code scanning: relative paths, stable ids, help, fingerprints."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.snapshots.reports import ROOT, TextSnapshot, rich_report
from torchdoctor.findings import Report
from torchdoctor.report import RenderOptions, render


def sarif(report: Report, root: str | None = ROOT) -> dict:
    return json.loads(render(report, "sarif", RenderOptions(root=root)))


def test_snapshot(snapshot) -> None:
    text = render(rich_report(), "sarif", RenderOptions(root=ROOT))
    assert text == snapshot(extension_class=TextSnapshot)


def test_log_shape_and_rules() -> None:
    log = sarif(rich_report())
    assert log["version"] == "2.1.0" and "sarif-schema-2.1.0" in log["$schema"]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TD002", "TD202", "TD203", "TD206", "TD207"]
    td203 = rules[2]
    assert td203["name"] == "zero-grad-between-backward-and-step"
    assert td203["defaultConfiguration"]["level"] == "error"
    assert "## Why it matters" in td203["help"]["markdown"]
    assert td203["fullDescription"]["text"].startswith("In a training loop")
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_paths_are_relative_to_the_root_and_columns_one_based() -> None:
    results = sarif(rich_report())["runs"][0]["results"]
    by_rule = {r["ruleId"]: r for r in results}
    physical = by_rule["TD203"]["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert physical["region"] == {"startLine": 31, "startColumn": 9, "endLine": 31, "endColumn": 30}
    assert (
        by_rule["TD202"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == "src/steps, v2/step.py"
    )
    assert by_rule["TD207"]["locations"] == [
        {"logicalLocations": [{"fullyQualifiedName": "encoder.weight"}]}
    ]
    assert by_rule["TD207"]["level"] == "note"


def test_fingerprints_ignore_line_numbers_but_not_line_text() -> None:
    report = rich_report()
    moved = Report()
    for item in report.findings:
        loc = item.location
        moved.add(replace(item, location=replace(loc, line=(loc.line or 0) + 5)))

    def prints(log: dict) -> dict[str, str]:
        return {
            r["ruleId"]: r["partialFingerprints"]["torchdoctor/v1"]
            for r in log["runs"][0]["results"]
        }

    assert prints(sarif(report)) == prints(sarif(moved))
    edited = Report()
    for item in report.findings:
        edited.add(replace(item, location=replace(item.location, snippet="changed")))
    assert prints(sarif(edited))["TD203"] != prints(sarif(report))["TD203"]


def test_empty_report_is_a_valid_log_with_no_results() -> None:
    log = sarif(Report(tool_version="0.1.0"))
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


@pytest.mark.parametrize("root", [None, "/elsewhere"])
def test_paths_outside_the_root_stay_absolute_file_uris(root: str | None) -> None:
    results = sarif(rich_report(), root=root)["runs"][0]["results"]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in results
        if "physicalLocation" in r["locations"][0]
    }
    assert f"file://{ROOT}/train.py" in uris and "src/steps, v2/step.py" in uris
