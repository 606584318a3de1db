"""TD502 at the check depth: a model handed over in eval mode with its optimizer."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, run  # noqa: E402

pytestmark = pytest.mark.needs_torch


def model_with_dropout() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 4)
    )


def test_a_model_in_eval_mode_with_its_optimizer_is_flagged() -> None:
    model = model_with_dropout().eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD502", optimizer=optimizer)
    (found,) = report.by_code("TD502")
    assert "`1`" in found.message and "`3`" in found.message  # BatchNorm and Dropout
    assert not model.training  # the user's mode is left as it was


def test_a_training_model_with_a_frozen_backbone_in_eval_mode_is_quiet() -> None:
    model = model_with_dropout()
    for layer in model[:2]:
        layer.requires_grad_(False)
        layer.eval()  # a frozen BatchNorm backbone, on purpose
    optimizer = torch.optim.SGD(model[4].parameters(), lr=0.1)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD502", optimizer=optimizer)
    assert report.by_code("TD502") == []


def test_without_an_optimizer_eval_mode_is_not_judged() -> None:
    report = run(model_with_dropout().eval(), class_batch(), nn.CrossEntropyLoss(), "TD502")
    assert report.by_code("TD502") == []


def test_eval_mode_that_changes_nothing_is_quiet() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD502", optimizer=optimizer)
    assert report.by_code("TD502") == []
