"""TD101: tensors on (or bound for) different devices; faked with the meta device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402
from torchdoctor.findings import Severity  # noqa: E402

pytestmark = pytest.mark.needs_torch


class PositionModel(nn.Module):
    """Adds a position embedding; ``device_aware`` decides how position ids are built."""

    def __init__(self, device_aware: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.device_aware = device_aware
        self.tokens = nn.Embedding(50, 8)
        self.positions = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        if self.device_aware:
            positions = torch.arange(ids.shape[1], device=ids.device)
        else:
            positions = torch.arange(ids.shape[1])
        return self.head((self.tokens(ids) + self.positions(positions)).mean(1))


class MaskModel(nn.Module):
    """Multiplies by a constant mask held as a plain attribute or as a buffer."""

    def __init__(self, as_buffer: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(6, 3)
        mask = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        if as_buffer:
            self.register_buffer("mask", mask)
        else:
            self.mask = mask

    def forward(self, x):
        return self.linear(x * self.mask)


def _ids():
    return torch.randint(0, 50, (16, 10)), torch.randint(0, 3, (16,))


def test_tensor_created_on_cpu_in_forward_is_found_without_a_gpu() -> None:
    report = run(PositionModel(device_aware=False), _ids(), nn.CrossEntropyLoss(), "TD101")
    [found] = report.by_code("TD101")
    assert found.location.path.endswith("test_devices.py")
    # the line that creates the tensor, not the line that uses it or calls the forward
    assert "torch.arange(ids.shape[1])" in (found.location.snippet or "")
    assert "`embedding`" in found.message and "created on the CPU" in found.message
    assert found.severity is Severity.WARNING


def test_tensor_created_on_the_inputs_device_is_quiet() -> None:
    report = run(PositionModel(device_aware=True), _ids(), nn.CrossEntropyLoss(), "TD101")
    assert not report.by_code("TD101"), messages(report, "TD101")


def test_plain_tensor_attribute_is_named() -> None:
    batch = (torch.randn(16, 6), torch.randint(0, 3, (16,)))
    report = run(MaskModel(as_buffer=False), batch, nn.CrossEntropyLoss(), "TD101")
    assert "plain attribute `mask`" in messages(report, "TD101")


def test_registered_buffer_is_quiet() -> None:
    batch = (torch.randn(16, 6), torch.randint(0, 3, (16,)))
    report = run(MaskModel(as_buffer=True), batch, nn.CrossEntropyLoss(), "TD101")
    assert not report.by_code("TD101"), messages(report, "TD101")


def test_module_split_across_devices_is_an_error() -> None:
    model = classifier()
    model[2].bias = nn.Parameter(torch.zeros(4, device="meta"))
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD101")
    [found] = report.by_code("TD101")
    assert found.location.object == "2" and found.severity is Severity.ERROR
    assert "weight on cpu" in found.message and "bias on meta" in found.message


def test_model_not_moved_to_the_training_device() -> None:
    report = run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD101", device="meta")
    assert "Batches go to meta but the model's parameters are on cpu" in messages(report, "TD101")


def test_batch_already_on_another_device_than_the_model() -> None:
    inputs, targets = class_batch()
    report = run(classifier(), (inputs.to("meta"), targets), nn.CrossEntropyLoss(), "TD101")
    assert "`inputs` (shape [32, 8]) is on meta" in messages(report, "TD101")


def test_requested_device_matching_the_model_is_quiet() -> None:
    report = run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD101", device="cpu")
    assert not report.by_code("TD101"), messages(report, "TD101")


def test_cpu_lengths_for_packing_are_allowed() -> None:
    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(4, 8, batch_first=True)
            self.head = nn.Linear(8, 2)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(
                x, lengths.cpu(), batch_first=True, enforce_sorted=False
            )
            _, state = self.rnn(packed)
            return self.head(state[-1])

    torch.manual_seed(0)
    batch = (torch.randn(8, 5, 4), torch.randint(1, 6, (8,)), torch.randint(0, 2, (8,)))
    report = run(Packed(), batch, nn.CrossEntropyLoss(), "TD101")
    assert not report.by_code("TD101"), messages(report, "TD101")


def test_scalar_cpu_tensors_are_allowed() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)
            self.temperature = torch.tensor(2.0)  # 0-dim: fine on any device

        def forward(self, x):
            return self.linear(x) / self.temperature

    report = run(Scaled(), class_batch(), nn.CrossEntropyLoss(), "TD101")
    assert not report.by_code("TD101"), messages(report, "TD101")


def test_forward_failing_on_a_device_error_becomes_td101() -> None:
    from torchdoctor.preflight.explain import is_device_error

    assert is_device_error(
        RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:0 and cpu!"
        )
    )
    assert is_device_error(
        RuntimeError(
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be "
            "the same or input should be a MKLDNN tensor and weight is a dense tensor"
        )
    )
    assert not is_device_error(
        RuntimeError("Input type (double) and bias type (float) should be the same")
    )
    assert not is_device_error(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_a_forward_that_fails_on_devices_is_reported_not_raised() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)

        def forward(self, x):
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at "
                "least two devices, cuda:0 and cpu!"
            )

    report = run(Broken(), class_batch(), nn.CrossEntropyLoss(), "TD1")
    [found] = report.by_code("TD101")
    assert "tensors on different devices met" in found.message
    assert found.location.path.endswith("test_devices.py") and found.location.object == "Broken"


class ScaledPositions(nn.Module):
    """A CPU tensor made in forward, transformed twice, then added to the activations."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(8, 3)

    def forward(self, x):
        offsets = torch.arange(x.shape[1]).float()  # created-here
        scaled = (offsets / 10.0).unsqueeze(-1)
        return self.proj(x + scaled).mean(1)


def test_a_cpu_tensor_computed_from_one_made_in_forward_points_at_its_creation() -> None:
    batch = torch.randn(4, 5, 8), torch.randint(0, 3, (4,))
    [found] = run(ScaledPositions(), batch, nn.CrossEntropyLoss(), "TD101").by_code("TD101")
    assert "# created-here" in (found.location.snippet or "")
