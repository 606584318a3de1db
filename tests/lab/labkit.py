"""The debugging lab's shared machinery: folders, expectation markers, assertions.

Every ``examples/lab/<code>-<name>/`` holds ``buggy.py`` and ``fixed.py``. ``buggy.py``
marks each expected finding at the end of its line:

    optimizer.step()  # expect: TD201
    loss = ...        # expect[run]: TD205      (only this depth)
    x = y             # expect[lint,run]: TD201, TD205

A marker without a depth applies to every depth that reports a source line for the code.
Each depth's lab test (``test_lab_<depth>.py``) turns a lab file into a
:class:`~torchdoctor.findings.Report` with its own driver and calls :func:`assert_flagged` /
:func:`assert_quiet`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from torchdoctor.findings import INTERNAL_ERROR_CODE, Depth, Report
from torchdoctor.rules.registry import RULES, Rule

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "examples" / "lab"

_MARKER = re.compile(
    r"#\s*expect(?:\[(?P<depths>[a-z, ]+)\])?:\s*(?P<codes>TD\d{3}(?:\s*,\s*TD\d{3})*)"
)


@dataclass(frozen=True)
class LabCase:
    """One lab folder and its rule."""

    folder: Path
    rule: Rule

    @property
    def buggy(self) -> Path:
        return self.folder / "buggy.py"

    @property
    def fixed(self) -> Path:
        return self.folder / "fixed.py"


def lab_cases(depth: Depth) -> list[LabCase]:
    """Lab folders whose rule is detected at ``depth``, sorted by name."""
    cases = []
    for folder in sorted(p for p in LAB.iterdir() if p.is_dir()):
        rule = RULES.get(folder.name[:5])
        if rule is not None and depth in rule.depths:
            cases.append(LabCase(folder, rule))
    return cases


@dataclass(frozen=True)
class LabShape(LabCase):
    """One more shape of a lab folder's bug: ``buggy_<name>.py`` and ``fixed_<name>.py``
    (a trainer class, callbacks, a Lightning-style module), at each depth it marks."""

    name: str

    @property
    def buggy(self) -> Path:
        return self.folder / f"buggy_{self.name}.py"

    @property
    def fixed(self) -> Path:
        return self.folder / f"fixed_{self.name}.py"


def lab_shapes(depth: Depth) -> list[LabShape]:
    """The extra shapes of the lab folders of ``depth`` whose two files both exist and
    whose buggy file marks what ``depth`` finds (a shape may be for one depth only)."""
    return [
        LabShape(case.folder, case.rule, path.stem.removeprefix("buggy_"))
        for case in lab_cases(depth)
        for path in sorted(case.folder.glob("buggy_*.py"))
        if (case.folder / f"fixed_{path.stem.removeprefix('buggy_')}.py").is_file()
        and expected_marks(path, depth)
    ]


def shape_params(depth: Depth) -> list[object]:
    """``pytest.param`` per extra shape of ``depth``, with ``folder/shape`` as id."""
    return [
        pytest.param(shape, id=f"{shape.folder.name}/{shape.name}") for shape in lab_shapes(depth)
    ]


def lab_params(depth: Depth) -> list[object]:
    """``pytest.param`` per lab folder of ``depth``, with the folder name as id."""
    return [pytest.param(case, id=case.folder.name) for case in lab_cases(depth)]


def expected_marks(path: Path, depth: Depth) -> set[tuple[str, int]]:
    """The ``(code, line)`` pairs a file's markers expect at ``depth``."""
    expected: set[tuple[str, int]] = set()
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in _MARKER.finditer(text):
            depths = match.group("depths")
            if depths and depth.value not in {d.strip() for d in depths.split(",")}:
                continue
            for code in match.group("codes").split(","):
                expected.add((code.strip(), number))
    return expected


def assert_flagged(report: Report, case: LabCase, depth: Depth, *, exact_lines: bool) -> None:
    """The buggy file is flagged with the rule's code, at the marked lines.

    With ``exact_lines`` (``lint``), the findings of every marked code located in the file
    must be exactly the marked ``(code, line)`` set. Otherwise (``check``, ``run``, ...)
    the rule's code must be present, and any finding of it that points into the file must
    point at a marked line.
    """
    _assert_no_internal_error(report)
    path = case.buggy.resolve()
    marks = expected_marks(path, depth)
    codes = {code for code, _ in marks} | {case.rule.code}
    in_file = {
        (f.code, f.location.line)
        for f in report.findings
        if f.code in codes and f.location.path and Path(f.location.path).resolve() == path
    }
    described = _describe(report)
    if exact_lines:
        assert in_file == marks, f"expected {sorted(marks)}, got {sorted(in_file)}\n{described}"
        return
    assert case.rule.code in report.codes(), f"{case.rule.code} not reported\n{described}"
    own_marks = {line for code, line in marks if code == case.rule.code}
    for code, line in in_file:
        if code == case.rule.code and own_marks:
            assert line in own_marks, f"{code} at line {line}, marked {own_marks}\n{described}"


def assert_quiet(report: Report, case: LabCase) -> None:
    """The fixed file draws no finding of the rule's code (and no internal error)."""
    _assert_no_internal_error(report)
    hits = report.by_code(case.rule.code)
    assert not hits, f"fixed file flagged:\n{_describe(report)}"


def _assert_no_internal_error(report: Report) -> None:
    """A lab file must never make torchdoctor itself fail (TD001)."""
    errors = report.by_code(INTERNAL_ERROR_CODE)
    assert not errors, f"internal error on a lab file:\n{_describe(report)}"


def load_module(path: Path) -> ModuleType:
    """Import a lab file as a fresh module (never as ``__main__``)."""
    name = "lab_" + re.sub(r"\W", "_", f"{path.parent.name}_{path.stem}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _describe(report: Report) -> str:
    return "\n".join(f"  {f.code} {f.location}: {f.message}" for f in report.findings) or "  (none)"
