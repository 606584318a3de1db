"""TD213 non-finite loss (with where it starts), TD307 a fresh model's loss far from ln C."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _regressor() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Flatten(0))


def _positive_targets() -> tuple[torch.Tensor, torch.Tensor]:
    inputs, _ = class_batch()
    return inputs, inputs[:, 0].exp() + 1


# --- TD213 -------------------------------------------------------------------------------


def test_log_of_negative_prediction_inside_the_loss_is_located() -> None:
    def log_error(predicted, target):
        return F.mse_loss(torch.log(predicted), torch.log(target))

    [found] = run(_regressor(), _positive_targets(), log_error, "TD213").by_code("TD213")
    assert "`log`" in found.message and "inside the loss function" in found.message
    assert found.location.path.endswith("test_loss_value.py")
    assert "torch.log(predicted)" in (found.location.snippet or "")


def test_nan_weights_are_named() -> None:
    model = classifier()
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    [found] = run(model, class_batch(), nn.CrossEntropyLoss(), "TD213").by_code("TD213")
    assert found.location.object == "0.weight"


def test_module_that_makes_nan_from_finite_inputs_is_named() -> None:
    class Sqrt(nn.Module):
        def forward(self, x):
            return torch.sqrt(x - 10)

    model = nn.Sequential(classifier(), Sqrt())
    [found] = run(model, class_batch(), nn.CrossEntropyLoss(), "TD213").by_code("TD213")
    assert found.location.object == "1" and "finite inputs into non-finite" in found.message


def test_finite_loss_is_quiet() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD213").by_code("TD213")


def test_nan_in_the_batch_is_left_to_td401() -> None:
    inputs, targets = class_batch()
    inputs[0, 0] = float("nan")
    assert not run(classifier(), (inputs, targets), nn.CrossEntropyLoss(), "TD213").by_code("TD213")


def test_clamped_log_in_the_loss_is_quiet() -> None:
    def log_error(predicted, target):
        return F.mse_loss(torch.log(predicted.clamp(min=1e-6)), torch.log(target))

    assert not run(_regressor(), _positive_targets(), log_error, "TD213").by_code("TD213")


# --- TD307 -------------------------------------------------------------------------------


def _wide_init(model: nn.Module, std: float) -> nn.Module:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
    return model


def test_std_one_initialisation_gives_a_huge_first_loss() -> None:
    model = _wide_init(classifier(hidden=256), std=1.0)
    [found] = run(model, class_batch(), nn.CrossEntropyLoss(), "TD307").by_code("TD307")
    assert f"ln(4) = {math.log(4):.3f}" in found.message
    assert found.evidence["loss"] > 3 * math.log(4)


def test_sigmoid_outputs_with_huge_logits_for_bce_with_logits() -> None:
    inputs, _ = class_batch()
    targets = torch.randint(0, 2, (32, 4)).float()
    model = _wide_init(classifier(hidden=256), std=1.0)
    assert "ln(2) = 0.693" in messages(
        run(model, (inputs, targets), nn.BCEWithLogitsLoss(), "TD307"), "TD307"
    )


def test_default_initialisation_is_quiet() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD307").by_code("TD307")


def test_sum_reduction_is_not_compared_with_ln_c() -> None:
    loss = nn.CrossEntropyLoss(reduction="sum")  # 32 x ln 4 = 44 is expected
    assert not run(classifier(), class_batch(), loss, "TD307").by_code("TD307")


def test_a_lower_loss_than_ln_c_is_quiet() -> None:
    """A pretrained or well-initialised model may start far below ln C."""
    inputs, targets = class_batch()
    model = classifier()
    with torch.no_grad():  # a head that already predicts the label from a feature
        model[2].bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0]))
    report = run(model, (inputs, targets), nn.CrossEntropyLoss(label_smoothing=0.1), "TD307")
    assert not report.by_code("TD307")


def test_regression_losses_are_not_judged() -> None:
    inputs, _ = class_batch()
    targets = torch.full((32, 4), 1000.0)
    assert not run(classifier(), (inputs, targets), nn.MSELoss(), "TD307").by_code("TD307")
