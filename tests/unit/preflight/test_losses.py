"""Loss recognition from objects, partials and functionals, and through user wrappers."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from torchdoctor.preflight.losses import LossKind, LossRecorder, recognise_loss  # noqa: E402

pytestmark = pytest.mark.needs_torch


@pytest.mark.parametrize(
    "loss, kind",
    [
        (nn.CrossEntropyLoss(), LossKind.CROSS_ENTROPY),
        (nn.NLLLoss(), LossKind.NLL),
        (nn.BCELoss(), LossKind.BCE),
        (nn.BCEWithLogitsLoss(), LossKind.BCE_WITH_LOGITS),
        (nn.MSELoss(), LossKind.REGRESSION),
        (nn.HuberLoss(), LossKind.REGRESSION),
        (F.cross_entropy, LossKind.CROSS_ENTROPY),
        (F.binary_cross_entropy_with_logits, LossKind.BCE_WITH_LOGITS),
        (functools.partial(F.nll_loss, ignore_index=3), LossKind.NLL),
        (lambda out, y: F.cross_entropy(out, y), LossKind.OTHER),
        (nn.KLDivLoss(), LossKind.OTHER),
    ],
)
def test_recognised_kinds(loss, kind) -> None:
    assert recognise_loss(loss).kind is kind


def test_options_come_from_modules_and_partials() -> None:
    spec = recognise_loss(nn.CrossEntropyLoss(ignore_index=7, label_smoothing=0.2, reduction="sum"))
    assert (spec.ignore_index, spec.label_smoothing, spec.reduction) == (7, 0.2, "sum")
    assert recognise_loss(functools.partial(F.cross_entropy, ignore_index=5)).ignore_index == 5


def test_subclass_of_a_torch_loss_keeps_its_kind() -> None:
    class Weighted(nn.CrossEntropyLoss):
        pass

    assert recognise_loss(Weighted()).kind is LossKind.CROSS_ENTROPY


def test_recorder_sees_through_a_wrapper() -> None:
    def loss(output, target):
        return 0.5 * F.cross_entropy(output.softmax(1), target.long(), ignore_index=2)

    output, target = torch.randn(4, 3), torch.tensor([0.0, 1.0, 2.0, 1.0])
    with LossRecorder() as recorder:
        loss(output, target)
    call = recorder.call
    assert call is not None and call.spec.kind is LossKind.CROSS_ENTROPY
    assert call.spec.ignore_index == 2 and call.target.dtype == torch.long
    assert torch.allclose(call.input, output.softmax(1))


def test_recorder_is_empty_for_a_hand_written_loss() -> None:
    with LossRecorder() as recorder:
        ((torch.randn(3) - torch.randn(3)) ** 2).mean()
    assert recorder.call is None
