from __future__ import annotations

from xml.etree import ElementTree

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.report import render
from torchdoctor.rules.registry import finding


def test_each_finding_is_a_failing_case_with_its_place() -> None:
    report = Report(command="lint", created="2026-01-01T00:00:00Z")
    report.add(
        finding(
            "TD201",
            "grads <pile> up",
            Location(path="t.py", line=9),
            Depth.LINT,
            fix_hint="Call zero_grad()",
        )
    )
    report.add(finding("TD208", "no grad", Location(object="fc.bias"), Depth.CHECK))
    root = ElementTree.fromstring(render(report, "junit"))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert cases[0].get("file") == "t.py" and cases[0].get("line") == "9"
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "grads <pile> up"
    assert "fix: Call zero_grad()" in (failure.text or "")
    assert cases[1].get("classname") == "fc.bias"


def test_clean_report_is_one_passing_case() -> None:
    root = ElementTree.fromstring(render(Report(command="check"), "junit"))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    (case,) = suite.findall("testcase")
    assert case.find("failure") is None
