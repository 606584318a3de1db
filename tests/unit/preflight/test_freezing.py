"""TD221 at check: `module.requires_grad = False` freezes nothing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

from tests.unit.preflight.helpers import class_batch, run  # noqa: E402


class Tuner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def check(model: nn.Module) -> set[str]:
    return run(model, class_batch(), nn.CrossEntropyLoss(), "TD221").codes()


def test_requires_grad_assigned_on_a_module_is_found_by_its_path() -> None:
    model = Tuner()
    model.encoder.requires_grad = False
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD221")
    [found] = report.by_code("TD221")
    assert found.location.object == "encoder" and "requires_grad_(False)" in found.fix_hint
    assert found.evidence["trainable_parameters"] == 2


def test_requires_grad_assigned_on_the_root_is_found() -> None:
    model = Tuner()
    model.requires_grad = False
    assert "TD221" in check(model)


def test_the_method_freezes_and_is_quiet() -> None:
    model = Tuner()
    model.encoder.requires_grad_(False)
    assert "TD221" not in check(model)


def test_attribute_next_to_a_real_freeze_is_quiet() -> None:
    model = Tuner()
    model.encoder.requires_grad = False
    for p in model.encoder.parameters():
        p.requires_grad = False
    assert "TD221" not in check(model)


def test_attribute_set_to_true_is_quiet() -> None:
    model = Tuner()
    model.encoder.requires_grad = True
    assert "TD221" not in check(model)
