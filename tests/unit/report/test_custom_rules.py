"""Every renderer names a user's own (``TDX``) rule as it names a catalogued one."""

from __future__ import annotations

import json
from dataclasses import replace
from xml.etree import ElementTree

import pytest

from torchdoctor.custom import CustomRule, register_rules
from torchdoctor.findings import Depth, Location, Report, Severity
from torchdoctor.report import RenderOptions, render
from torchdoctor.report.rules import rule_for
from torchdoctor.rules.registry import finding

RULE = CustomRule("TDX901", "report-side-budget", Severity.WARNING, "A project's own budget")


@pytest.fixture
def report() -> Report:
    register_rules([RULE], Depth.RUN)
    out = Report(tool_version="0", command="run", created="2026-01-01T00:00:00+00:00")
    out.add(finding("TDX901", "over budget", Location(path="train.py", line=3), Depth.RUN))
    out.add(finding("TD201", "grads never cleared", Location(path="train.py", line=9), Depth.RUN))
    return out


def test_the_one_look_up_finds_catalogued_declared_and_no_rule() -> None:
    register_rules([RULE], Depth.RUN)
    assert rule_for("TD201") is not None and rule_for("TD201").name == "grads-never-cleared"
    assert rule_for("tdx901") is not None and rule_for("TDX901").name == RULE.name
    assert rule_for("TDX999") is None and rule_for("nonsense") is None


def test_text_names_the_custom_rule(report: Report) -> None:
    text = render(report, "text", RenderOptions(width=120))
    assert "TDX901 report-side-budget" in text


def test_sarif_lists_the_custom_rule_with_its_metadata(report: Report) -> None:
    log = json.loads(render(report, "sarif"))
    run = log["runs"][0]
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    custom = rules["TDX901"]
    assert custom["name"] == "report-side-budget"
    assert custom["shortDescription"]["text"] == "A project's own budget."
    assert custom["defaultConfiguration"]["level"] == "warning"
    assert custom["properties"]["tags"] == ["pytorch", "custom"]
    (result,) = [r for r in run["results"] if r["ruleId"] == "TDX901"]
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "TDX901"


def test_junit_names_the_custom_rule(report: Report) -> None:
    root = ElementTree.fromstring(render(report, "junit"))
    names = [case.get("name") for case in root.iter("testcase")]
    assert "TDX901 report-side-budget (line 3)" in names


def test_github_titles_the_custom_rule(report: Report) -> None:
    assert "title=TDX901 report-side-budget" in render(report, "github")


def test_html_names_the_custom_rule_and_shows_its_summary(report: Report) -> None:
    page = render(report, "html")
    assert '<span class="name">report-side-budget</span>' in page
    assert "<h3>TDX901 report-side-budget</h3>" in page
    assert "A project&#39;s own budget." in page or "A project's own budget." in page
    assert "Not a catalogued rule" not in page


def test_an_undeclared_code_renders_bare_in_every_format() -> None:
    report = Report(tool_version="0", command="run")
    report.add(
        replace(finding("TD201", "x", Location(path="a.py", line=1), Depth.RUN), code="TDX998")
    )
    for fmt in ("text", "sarif", "junit", "github", "html", "concise", "json"):
        assert "TDX998" in render(report, fmt)
    sarif = json.loads(render(report, "sarif"))
    assert sarif["runs"][0]["tool"]["driver"]["rules"] == [{"id": "TDX998"}]
    assert "Not a catalogued rule" in render(report, "html")
