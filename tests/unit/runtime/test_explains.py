"""The root-cause table: which cause explains which symptom, and where."""

from __future__ import annotations

import pytest

from torchdoctor.findings import Depth, Location, Report
from torchdoctor.rules.detectors import load_detector_modules, registered_detectors
from torchdoctor.rules.registry import finding
from torchdoctor.runtime.detectors.explains import (
    EXPLAINS,
    Scope,
    explained,
    explained_lines,
    explained_names,
)

pytest.importorskip("torch")


def _report(*findings: tuple[str, dict[str, object], int | None]) -> Report:
    report = Report()
    for code, evidence, line in findings:
        report.add(
            finding(code, "m", Location(path="t.py", line=line), Depth.RUN, evidence=evidence)
        )
    return report


def test_a_cause_explains_its_symptoms_in_the_whole_run() -> None:
    report = _report(("TD620", {"optimizer": "Adam"}, 3))
    assert explained(report, "TD210") and explained(report, "TD601")
    assert not explained(report, "TD218")  # not one of TD620's symptoms
    assert not explained(_report(), "TD210")


def test_a_loss_cut_explains_only_when_measured_while_training() -> None:
    measured = _report(("TD209", {"cut_backward_calls": 4}, 9))
    died = _report(("TD209", {"exception": "RuntimeError"}, 9))  # the explainer's TD209
    assert explained(measured, "TD210") and explained(measured, "TD218")
    assert not explained(died, "TD210") and not explained(died, "TD218")
    assert explained_lines(died, "TD612") == {9}  # a loss curve at its line: any TD209


def test_scoped_causes_name_the_optimizer_or_model_they_explain() -> None:
    report = _report(
        ("TD215", {"optimizer": "SGD"}, 1),
        ("TD201", {"optimizer": "Adam"}, 2),
        ("TD222", {"model": "target"}, None),
    )
    assert explained_names(report, "TD218", Scope.OPTIMIZER) == {"SGD"}
    assert explained_names(report, "TD606", Scope.OPTIMIZER) == {"SGD"}
    assert explained_names(report, "TD216", Scope.OPTIMIZER) == {"Adam"}
    assert explained_names(report, "TD601", Scope.MODEL) == {"target"}
    assert explained_names(report, "TD210", Scope.OPTIMIZER) == set()


def test_loss_curves_are_explained_at_the_line_of_the_cause_only() -> None:
    report = _report(("TD308", {}, 12), ("TD201", {"optimizer": "Adam"}, 30))
    assert explained_lines(report, "TD612", "TD613", "TD614") == {12}


def test_every_cause_runs_before_the_symptoms_it_explains() -> None:
    """A symptom's on_finish reads the report: its cause must be found before it."""
    load_detector_modules((Depth.RUN,))
    order = registered_detectors(Depth.RUN)

    def first(code: str) -> int:
        return min(i for i, info in enumerate(order) if code in info.codes)

    late = [
        (row.cause, symptom)
        for row in EXPLAINS
        for symptom in row.symptoms
        if first(row.cause) >= first(symptom)
    ]
    assert not late, f"causes registered after their symptoms: {late}"
