"""TD401 non-finite inputs, TD402 unnormalised inputs, TD403 class index, TD404 one class."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )


def _pixels(scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return (
        torch.rand(16, 1, 8, 8, generator=generator) * scale,
        torch.randint(0, 3, (16,), generator=generator),
    )


# --- TD401 -------------------------------------------------------------------------------


def test_nan_inputs_are_counted_with_the_first_example() -> None:
    inputs, targets = class_batch()
    inputs[5, 2] = float("nan")
    inputs[9, 0] = float("inf")
    [found] = run(classifier(), (inputs, targets), nn.CrossEntropyLoss(), "TD401").by_code("TD401")
    assert "2 non-finite values (1 NaN, 1 Inf) of 256" in found.message
    assert "example 5" in found.message and found.location.object == "inputs"


def test_nan_regression_targets_are_found() -> None:
    inputs, _ = class_batch()
    targets = torch.randn(32, 4)
    targets[0, 0] = float("nan")
    report = run(classifier(), (inputs, targets), nn.MSELoss(), "TD401")
    assert [f.location.object for f in report.by_code("TD401")] == ["targets"]


def test_finite_data_is_quiet() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD401").by_code("TD401")


def test_integer_inputs_are_skipped() -> None:
    model = nn.Sequential(nn.Embedding(20, 8), nn.Flatten(), nn.Linear(40, 3))
    batch = (torch.randint(0, 20, (16, 5)), torch.randint(0, 3, (16,)))
    assert not run(model, batch, nn.CrossEntropyLoss(), "TD401").by_code("TD401")


# --- TD402 -------------------------------------------------------------------------------


def test_raw_pixels_are_found_at_the_first_convolution() -> None:
    [found] = run(_cnn(), _pixels(255.0), nn.CrossEntropyLoss(), "TD402").by_code("TD402")
    assert found.location.object == "0"
    assert "(Conv2d)" in found.message and "1 of 1 input channels" in found.message


def test_one_unscaled_tabular_feature_is_named() -> None:
    inputs, targets = class_batch()
    inputs[:, 3] = inputs[:, 3] * 20000 + 50000  # an income in dollars
    found = messages(run(classifier(), (inputs, targets), nn.CrossEntropyLoss(), "TD402"), "TD402")
    assert "1 of 8 input features" in found and "feature 3" in found


def test_pixels_in_unit_range_are_quiet() -> None:
    assert not run(_cnn(), _pixels(1.0), nn.CrossEntropyLoss(), "TD402").by_code("TD402")


def test_model_that_normalises_inside_its_forward_is_quiet() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _cnn()

        def forward(self, images):
            return self.net(images / 255)

    assert not run(Scaled(), _pixels(255.0), nn.CrossEntropyLoss(), "TD402").by_code("TD402")


def test_batchnorm_before_the_first_layer_handles_scale() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 4))
    inputs, targets = class_batch()
    report = run(model, (inputs * 300, targets), nn.CrossEntropyLoss(), "TD402")
    assert not report.by_code("TD402"), messages(report, "TD402")


def test_token_ids_are_not_inputs_to_normalise() -> None:
    model = nn.Sequential(nn.Embedding(500, 8), nn.Flatten(), nn.Linear(40, 3))
    batch = (torch.randint(0, 500, (16, 5)), torch.randint(0, 3, (16,)))
    assert not run(model, batch, nn.CrossEntropyLoss(), "TD402").by_code("TD402")


# --- TD403 -------------------------------------------------------------------------------


def test_one_based_labels() -> None:
    inputs, targets = class_batch()
    [found] = run(classifier(), (inputs, targets + 1), nn.CrossEntropyLoss(), "TD403").by_code(
        "TD403"
    )
    assert "class indices 1..4 but the model outputs 4 classes" in found.message
    assert "1-based" in found.message and "targets - 1" in found.fix_hint


def test_negative_label_with_nll() -> None:
    inputs, targets = class_batch()
    targets[0] = -1
    loss = nn.NLLLoss()
    model = nn.Sequential(classifier(), nn.LogSoftmax(dim=1))
    assert "1 of 32 targets are out of range" in messages(
        run(model, (inputs, targets), loss, "TD403"), "TD403"
    )


def test_labels_in_range_are_quiet() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD403").by_code("TD403")


def test_ignore_index_is_not_out_of_range() -> None:
    inputs, targets = class_batch()
    targets[:5] = -100
    assert not run(classifier(), (inputs, targets), nn.CrossEntropyLoss(), "TD403").by_code("TD403")


def test_custom_ignore_index_is_honoured() -> None:
    inputs, targets = class_batch()
    targets[:5] = 255
    loss = nn.CrossEntropyLoss(ignore_index=255)
    assert not run(classifier(), (inputs, targets), loss, "TD403").by_code("TD403")


# --- TD404 -------------------------------------------------------------------------------


def _sorted_loader(shuffle: bool) -> DataLoader:
    inputs, _ = class_batch(size=96)
    labels = torch.arange(4).repeat_interleave(24)
    return DataLoader(TensorDataset(inputs, labels), batch_size=16, shuffle=shuffle)


def test_batches_of_one_class_from_a_sorted_loader() -> None:
    found = messages(
        run(classifier(), _sorted_loader(shuffle=False), nn.CrossEntropyLoss(), "TD404"), "TD404"
    )
    assert "All 16 targets of the batch are class 0" in found


def test_constant_labels_in_one_batch() -> None:
    inputs, _ = class_batch()
    batch = (inputs, torch.zeros(32, dtype=torch.long))
    assert run(classifier(), batch, nn.CrossEntropyLoss(), "TD404").by_code("TD404")


def test_shuffled_loader_is_quiet() -> None:
    report = run(classifier(), _sorted_loader(shuffle=True), nn.CrossEntropyLoss(), "TD404")
    assert not report.by_code("TD404")


def test_small_binary_batch_of_one_class_is_quiet() -> None:
    inputs, _ = class_batch()
    batch = (inputs, torch.zeros(32, dtype=torch.long))  # 32 < 128 for two classes
    report = run(classifier(classes=2), batch, nn.CrossEntropyLoss(), "TD404")
    assert not report.by_code("TD404")


def test_mixed_batch_is_quiet() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD404").by_code("TD404")


def test_regression_targets_are_not_classes() -> None:
    inputs, _ = class_batch()
    report = run(classifier(), (inputs, torch.ones(32, 4)), nn.MSELoss(), "TD404")
    assert not report.by_code("TD404")
