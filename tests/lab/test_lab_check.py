"""The lab at the ``check`` depth: ``make()`` of every buggy file is flagged, fixed is quiet.

Each lab folder whose rule has the ``check`` depth defines ``make()`` in both files,
returning what :func:`torchdoctor.check` takes (see :mod:`torchdoctor.preflight`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import labkit
from torchdoctor.findings import Depth, Report

# Buggy setups make torch warn on purpose (duplicate parameters in a group, TD603).
pytestmark = [
    pytest.mark.needs_torch,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _check(path: Path) -> Report:
    from torchdoctor.preflight.factory import CheckTarget

    module = labkit.load_module(path)
    assert hasattr(module, "make"), f"{path} defines no make() for the check depth"
    if getattr(module, "REQUIRES_CUDA", False):
        import torch

        if not torch.cuda.is_available():
            pytest.skip(f"{path.parent.name} trains on a CUDA device")
    options = {}
    if hasattr(module, "FORECAST"):  # what `check --forecast ...` asks (TD712)
        from torchdoctor.preflight.forecast import ForecastOptions

        options["forecast"] = ForecastOptions(**module.FORECAST)
    return CheckTarget.from_result(module.make(), f"{path.name}:make").check(**options)


@pytest.mark.parametrize("case", labkit.lab_params(Depth.CHECK))
def test_buggy_is_flagged(case: labkit.LabCase) -> None:
    labkit.assert_flagged(_check(case.buggy), case, Depth.CHECK, exact_lines=False)


@pytest.mark.parametrize("case", labkit.lab_params(Depth.CHECK))
def test_fixed_is_quiet(case: labkit.LabCase) -> None:
    report = _check(case.fixed)
    labkit.assert_quiet(report, case)
    assert "TD001" not in report.codes(), report.by_code("TD001")
