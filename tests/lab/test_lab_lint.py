"""The lab at the lint depth: buggy files are flagged at exactly the marked lines, fixed
files stay quiet, and no fixed file of any rule draws a lint warning or error. No lint rule
may crash (TD001) on any lab file, buggy or fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import labkit
from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Report, Severity
from torchdoctor.static import LintConfig, lint

# Lab files are linted exactly as a user's file would be, without the repository's config.
_ISOLATED = LintConfig()


def _lint(path: Path) -> Report:
    """Lint one lab file; a crashed rule fails the test, with its traceback."""
    report = lint(path, config=_ISOLATED, jobs=1)
    crashes = [f.message for f in report.findings if f.code == INTERNAL_ERROR_CODE]
    traces = report.facts.get("internal_errors", [])
    assert not crashes, "a lint rule crashed:\n" + "\n".join([*crashes, *traces])
    return report


@pytest.mark.parametrize("case", labkit.lab_params(Depth.LINT))
def test_buggy_file_is_flagged_at_the_marked_lines(case: labkit.LabCase) -> None:
    report = _lint(case.buggy)
    labkit.assert_flagged(report, case, Depth.LINT, exact_lines=True)


@pytest.mark.parametrize("case", labkit.lab_params(Depth.LINT))
def test_fixed_file_is_quiet(case: labkit.LabCase) -> None:
    report = _lint(case.fixed)
    labkit.assert_quiet(report, case)


@pytest.mark.parametrize("shape", labkit.shape_params(Depth.LINT))
def test_buggy_shape_is_flagged_at_the_marked_lines(shape: labkit.LabShape) -> None:
    labkit.assert_flagged(_lint(shape.buggy), shape, Depth.LINT, exact_lines=True)


@pytest.mark.parametrize("shape", labkit.shape_params(Depth.LINT))
def test_fixed_shape_is_quiet(shape: labkit.LabShape) -> None:
    labkit.assert_quiet(_lint(shape.fixed), shape)


def _fixed_files() -> list[object]:
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.name}")
        for path in sorted([*labkit.LAB.glob("*/fixed.py"), *labkit.LAB.glob("*/fixed_*.py")])
    ]


@pytest.mark.parametrize("path", _fixed_files())
def test_no_fixed_file_draws_a_lint_warning_or_error(path: Path) -> None:
    report = _lint(path)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    described = "\n".join(f"  {f.code} {f.location}: {f.message}" for f in loud)
    assert not loud, f"{path} draws lint findings:\n{described}"
