"""The shared training pass: what it records, and what it leaves behind (nothing)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import torchdoctor  # noqa: E402
from tests.unit.preflight.helpers import class_batch, classifier, run  # noqa: E402
from torchdoctor.errors import UsageError  # noqa: E402
from torchdoctor.preflight.context import CheckContext  # noqa: E402
from torchdoctor.preflight.passes import producing_op  # noqa: E402

pytestmark = pytest.mark.needs_torch


def test_producing_op_looks_through_views_and_copies() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    assert producing_op(torch.softmax(x, 1).reshape(12).view(4, 3).clone()) == "Softmax"
    assert producing_op(torch.sigmoid(x)[:, 0].unsqueeze(1)) == "Sigmoid"
    assert producing_op(x * 2) == "Mul"
    assert producing_op(x.detach()) is None


def test_the_pass_records_gradients_order_and_loss_call() -> None:
    ctx = CheckContext(classifier(), class_batch(), F.cross_entropy)
    train = ctx.train_pass
    assert set(train.gradients) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all(g is not None for g in train.gradients.values())
    assert train.trace.order == ["0", "2"] and train.trace.first_input[0] == "0"
    assert train.loss_call.spec.name == "F.cross_entropy" and train.loss_input_op == "Addmm"
    assert ctx.num_classes == 4


def test_check_leaves_no_hooks_behind() -> None:
    model = classifier()
    torchdoctor.check(model, class_batch(), nn.CrossEntropyLoss())
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_a_loss_returned_with_logs_is_used() -> None:
    def loss(output, target):
        value = F.cross_entropy(output, target)
        return value, {"loss": float(value)}

    report = run(classifier(), class_batch(), loss, "TD2")
    assert not report.codes()


def test_a_loss_that_is_not_a_tensor_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="loss_fn returned a float"):
        run(classifier(), class_batch(), lambda out, y: 1.0, "TD2")


def test_loader_batches_come_from_one_pass() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    inputs, targets = class_batch(size=64)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=16, shuffle=True)
    ctx = CheckContext(classifier(), loader, nn.CrossEntropyLoss())
    first = ctx.raw_batch
    assert ctx.peek_batches(3)[0] is first and len(ctx.peek_batches(10)) == 4
