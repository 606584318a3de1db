from __future__ import annotations

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.report import RenderOptions, render
from torchdoctor.rules.registry import finding


def test_groups_by_severity_with_place_and_fix() -> None:
    report = Report()
    report.add(
        finding(
            "TD906",
            "never seeded",
            Location(path="t.py", line=1),
            Depth.LINT,
            fix_hint="Call torch.manual_seed",
        )
    )
    report.add(
        finding(
            "TD201",
            "grads pile up",
            Location(path="t.py", line=9, column=8, snippet="optimizer.step()"),
            Depth.LINT,
            fix_hint="Call optimizer.zero_grad()",
        )
    )
    text = render(report, "text", RenderOptions(width=100))
    assert text.index("Errors (1)") < text.index("Info (1)")
    assert "t.py:9:9" in text and "fix: Call optimizer.zero_grad()" in text
    assert "9 | optimizer.step()" in text
    assert "1 error, 0 warnings, 1 info." in text
    assert "\x1b[" not in text


def test_empty_report_says_so() -> None:
    assert "No problems found." in render(Report(), "text")


def test_concise_is_one_line_per_finding() -> None:
    report = Report()
    report.add(
        finding("TD201", "grads pile up", Location(path="t.py", line=9, column=8), Depth.LINT)
    )
    report.add(finding("TD208", "no grad", Location(object="fc.bias"), Depth.CHECK))
    lines = render(report, "concise").splitlines()
    assert lines == ["t.py:9:9: TD201 grads pile up", "fc.bias: TD208 no grad"]


def test_a_run_with_findings_still_says_what_it_watched() -> None:
    report = Report(command="run")
    report.facts["watched"] = "12 backward passes and 12 optimizer steps watched"
    report.add(finding("TD201", "grads grew", Location(path="train.py", line=3), Depth.RUN))
    text = render(report, "text", RenderOptions(width=120))
    assert "(12 backward passes and 12 optimizer steps watched)." in text
