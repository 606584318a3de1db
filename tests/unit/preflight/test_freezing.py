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


# --- TD226: the output layer frozen at its random initialisation ----------------------------


def _fine_tuned(*, head_frozen: bool, head_trained: bool = False) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 4))
    if head_trained:  # a loaded, trained head: no longer the initialiser's draw
        with torch.no_grad():
            model[3].weight.mul_(3.0).add_(0.1)
    model[0].requires_grad_(False)
    model[3].requires_grad_(not head_frozen)
    return model


def test_a_fresh_frozen_head_over_trainable_layers_is_flagged() -> None:
    model = _fine_tuned(head_frozen=True)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD226")
    (found,) = report.by_code("TD226")
    assert found.location.object == "3" and "Linear" in found.message


def test_a_trainable_head_is_quiet() -> None:
    report = run(_fine_tuned(head_frozen=False), class_batch(), nn.CrossEntropyLoss(), "TD226")
    assert report.by_code("TD226") == []


def test_a_frozen_head_that_was_trained_is_quiet() -> None:
    model = _fine_tuned(head_frozen=True, head_trained=True)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD226")
    assert report.by_code("TD226") == []


def test_a_model_frozen_whole_is_not_this_rule() -> None:
    model = _fine_tuned(head_frozen=True).requires_grad_(False)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD226")
    assert report.by_code("TD226") == []
