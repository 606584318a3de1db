"""More shapes of a lab folder's rule, beside its buggy/fixed pair, at the lint depth.

``examples/lab/<code>-<name>/quiet_<shape>.py`` is a correct program in another shape
(a plain loop, a trainer class with helpers, a callback) that must draw no finding of the
folder's code; ``info_<shape>.py`` is one where the finding is true but a maintainer
leaves it: the folder's code is reported at exactly its ``# expect: TDxxx`` lines, at
information severity only. Neither kind may draw a lint warning or error of any code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import labkit
from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Report, Severity
from torchdoctor.static import LintConfig, lint


def _shapes(prefix: str) -> list[object]:
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.name}")
        for path in sorted(labkit.LAB.glob(f"*/{prefix}_*.py"))
    ]


def _lint(path: Path) -> Report:
    report = lint(path, config=LintConfig(), jobs=1)
    assert not report.by_code(INTERNAL_ERROR_CODE), report.facts.get("internal_errors")
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert not loud, "\n".join(f"{f.code} {f.location}: {f.message}" for f in loud)
    return report


def _code(path: Path) -> str:
    return path.parent.name[:5]


def test_the_lab_has_shapes_of_both_kinds() -> None:
    assert _shapes("quiet") and _shapes("info")


@pytest.mark.parametrize("path", _shapes("quiet"))
def test_a_quiet_shape_draws_no_finding_of_its_code(path: Path) -> None:
    found = _lint(path).by_code(_code(path))
    assert not found, [f"{f.location}: {f.message}" for f in found]


@pytest.mark.parametrize("path", _shapes("info"))
def test_an_info_shape_is_information_at_its_marked_lines(path: Path) -> None:
    code = _code(path)
    found = _lint(path).by_code(code)
    marked = {line for c, line in labkit.expected_marks(path, Depth.LINT) if c == code}
    assert marked, f"{path} marks no line"
    assert {f.location.line for f in found} == marked
    assert {f.severity for f in found} == {Severity.INFO}
