"""GitHub workflow annotations: escaping, severity order, and the per-step limit."""

from __future__ import annotations

from tests.snapshots.reports import ROOT, TextSnapshot, rich_report
from torchdoctor.findings import Depth, Location, Report, Severity
from torchdoctor.report import RenderOptions, render
from torchdoctor.report.github import ANNOTATIONS_PER_KIND
from torchdoctor.rules.registry import finding


def github(report: Report) -> list[str]:
    return render(report, "github", RenderOptions(root=ROOT)).splitlines()


def test_snapshot(snapshot) -> None:
    assert render(rich_report(), "github", RenderOptions(root=ROOT)) == snapshot(
        extension_class=TextSnapshot
    )


def test_worst_first_with_relative_paths_and_escaping() -> None:
    lines = github(rich_report())
    assert [line.split(" ")[0].split("::")[1] for line in lines] == [
        "error",
        "error",
        "error",
        "warning",
        "notice",
    ]
    td206 = next(line for line in lines if "TD206" in line)
    assert td206.startswith(
        "::warning file=models/net.py,line=7,endLine=7,col=11,"
        "endColumn=24,title=TD206 forward-called-directly::"
    )
    assert "50%25 of hooks%0Askip, a:b" in td206
    td202 = next(line for line in lines if "TD202" in line)
    assert "file=src/steps%2C v2/step.py" in td202
    object_only = next(line for line in lines if "TD207" in line)
    assert object_only.startswith("::notice title=TD207 parameter-data-mutated::[encoder.weight]")


def test_the_per_step_limit_is_respected_and_the_rest_counted() -> None:
    report = Report()
    for line in range(1, 16):
        report.add(
            finding("TD201", f"step at line {line}", Location(path="t.py", line=line), Depth.LINT)
        )
    for line in range(1, 4):
        report.add(
            finding(
                "TD206", f"forward at line {line}", Location(path="u.py", line=line), Depth.LINT
            )
        )
    lines = github(report)
    assert sum(line.startswith("::error ") for line in lines) == ANNOTATIONS_PER_KIND
    assert sum(line.startswith("::warning ") for line in lines) == 3
    hidden = [line for line in lines if line.startswith("t.py:")]
    assert len(hidden) == 5 and hidden[0].startswith("t.py:11:1: TD201")
    assert lines[-1].startswith(
        "::notice title=torchdoctor::torchdoctor: 5 more finding(s) (5 errors)"
    )


def test_clean_report_renders_nothing() -> None:
    assert render(Report(), "github") == ""


def test_severity_of_info_findings_is_notice() -> None:
    report = Report()
    report.add(
        finding("TD206", "x", Location(path="a.py", line=1), Depth.LINT, severity=Severity.INFO)
    )
    assert github(report)[0].startswith("::notice file=a.py,line=1,title=TD206")
