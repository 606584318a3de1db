"""Correct, realistic training setups draw no warning and no error from the whole check."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torchdoctor  # noqa: E402
from tests.integration.realistic_models import SETUPS  # noqa: E402
from torchdoctor.findings import Severity  # noqa: E402

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_correct_models_are_quiet(name: str) -> None:
    model, data, loss_fn, optimizer = SETUPS[name]()
    report = torchdoctor.check(model, data, loss_fn, optimizer)
    loud = [f"{f.code} {f.location}: {f.message}" for f in report if f.severity >= Severity.WARNING]
    assert not loud, "\n".join(loud)
    assert report.exit_code(Severity.WARNING) == 0
