from __future__ import annotations

import subprocess
import sys
import textwrap

from torchdoctor.findings import (
    Confidence,
    Depth,
    Location,
    Report,
    Severity,
    set_html_renderer,
)
from torchdoctor.rules.registry import finding


def _at(line: int, depth: Depth = Depth.LINT, code: str = "TD201"):
    return finding(code, f"msg {line}", Location(path="t.py", line=line), depth, fix_hint="do it")


def test_finding_takes_the_rule_default_severity() -> None:
    assert _at(1).severity is Severity.ERROR
    assert finding("TD906", "m", Location(), Depth.LINT).severity is Severity.INFO


def test_same_rule_same_place_from_two_depths_is_merged() -> None:
    report = Report()
    report.add(_at(3, Depth.LINT))
    report.add(_at(3, Depth.RUN))
    assert len(report) == 1
    (merged,) = report.findings
    assert merged.depths == (Depth.LINT, Depth.RUN)
    assert merged.occurrences == 1


def test_repeats_at_one_depth_are_counted() -> None:
    report = Report()
    for _ in range(3):
        report.add(_at(3, Depth.RUN))
    assert report.findings[0].occurrences == 3


def test_findings_sort_by_file_line_column_code() -> None:
    report = Report()
    for line in (9, 2, 5):
        report.add(_at(line))
    assert [f.location.line for f in report.findings] == [2, 5, 9]


def test_exit_code_follows_fail_on() -> None:
    report = Report()
    report.add(finding("TD906", "m", Location(path="a.py", line=1), Depth.LINT))
    assert report.exit_code(Severity.ERROR) == 0
    assert report.exit_code(Severity.INFO) == 1
    assert report.exit_code(None) == 0
    assert Report().exit_code(Severity.INFO) == 0


def test_internal_error_means_exit_2() -> None:
    report = Report()
    report.add(finding("TD001", "boom", Location(), Depth.CHECK))
    assert report.exit_code(None) == 2


def test_merge_keeps_worst_severity_and_best_confidence() -> None:
    report = Report()
    low = finding(
        "TD201",
        "a",
        Location(path="t.py", line=1),
        Depth.LINT,
        severity=Severity.WARNING,
        confidence=Confidence.LOW,
    )
    report.add(low)
    report.add(_at(1, Depth.RUN))
    (merged,) = report.findings
    assert merged.severity is Severity.ERROR
    assert merged.confidence is Confidence.HIGH


def test_location_str() -> None:
    assert str(Location(path="a.py", line=3, column=4)) == "a.py:3:5"
    assert str(Location(object="encoder.0.weight")) == "encoder.0.weight"
    assert str(Location()) == "<unknown>"


def test_a_line_from_lint_and_the_same_line_with_an_object_from_run_merge() -> None:
    report = Report()
    report.add(_at(7, Depth.LINT))
    report.add(
        finding("TD201", "grads grew", Location(path="t.py", line=7, object="SGD"), Depth.RUN)
    )
    (merged,) = report.findings
    assert merged.depths == (Depth.LINT, Depth.RUN)


def test_two_objects_at_one_line_from_one_depth_stay_apart() -> None:
    report = Report()
    for name in ("fc.weight", "fc.bias"):
        report.add(
            finding("TD208", "no grad", Location(path="t.py", line=7, object=name), Depth.RUN)
        )
    assert len(report) == 2


def test_a_module_named_by_check_and_placed_by_run_merge_either_way_round() -> None:
    check = finding("TD601", "in no group", Location(object="features"), Depth.CHECK)
    run = finding(
        "TD601", "never changed", Location(path="t.py", line=26, object="features"), Depth.RUN
    )
    for first, second in ((check, run), (run, check)):
        report = Report()
        report.add(first)
        report.add(second)
        (merged,) = report.findings
        assert merged.depths == (Depth.CHECK, Depth.RUN)
        assert (merged.location.path, merged.location.line) == ("t.py", 26)
        assert merged.location.object == "features" and merged.message == first.message
        report.add(finding("TD601", "again", Location(path="t.py", line=26), Depth.LINT))
        assert len(report) == 1  # the merged finding is found again by its file and line


def test_the_same_object_in_two_files_stays_apart() -> None:
    report = Report()
    for path in ("a.py", "b.py"):
        report.add(
            finding(
                "TD601",
                "m",
                Location(path=path, line=3, object="head"),
                Depth.RUN if path == "a.py" else Depth.CHECK,
            )
        )
    assert len(report) == 2


def test_a_report_draws_itself_in_a_notebook_from_a_fresh_interpreter() -> None:
    """The data model does not import its HTML renderer (that would be an import circle):
    the package installs it, so a notebook that only imports the data model still sees
    the page, and loading the package does not load the renderer."""
    code = textwrap.dedent("""
        import sys
        from torchdoctor.findings import Report
        assert "torchdoctor.report.html" not in sys.modules
        shown = Report(command="lint")._repr_html_()
        assert shown.startswith("<iframe srcdoc=") and "torchdoctor lint" in shown, shown
        print("ok")
    """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_without_a_renderer_a_report_shows_as_escaped_text_in_a_notebook() -> None:
    report = Report(command="<lint>")
    previous = set_html_renderer(None)
    try:
        shown = report._repr_html_()
    finally:
        set_html_renderer(previous)
    assert shown.startswith("<pre>") and "&lt;lint&gt;" in shown and "<lint>" not in shown
    assert report._repr_html_().startswith("<iframe srcdoc=")
