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


def test_a_loss_returned_with_logs_trains_the_copies_too() -> None:
    """The probes that train copies unpack `(loss, logs)` as the shared pass does."""

    def loss(output, target):
        value = F.cross_entropy(output, target)
        return value, {"loss": float(value)}

    model = classifier()
    report = torchdoctor.check(
        model, class_batch(), loss, torch.optim.Adam(model.parameters(), lr=1e-2)
    )
    assert not report.codes(), [f"{f.code} {f.message}" for f in report.findings]


def test_a_loss_that_is_not_a_number_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="loss_fn returned a str"):
        run(classifier(), class_batch(), lambda out, y: "0.5", "TD2")


def _deep() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        *[layer for _ in range(5) for layer in (nn.Linear(8, 8), nn.Tanh())], nn.Linear(8, 4)
    )


@pytest.mark.parametrize(
    "cut",
    [
        lambda loss: loss.item(),
        lambda loss: (loss.item(), {"loss": loss.item()}),
        lambda loss: torch.tensor(loss.item()),
    ],
)
def test_a_loss_cut_off_from_the_graph_is_one_clear_finding(cut) -> None:
    """Every probe copes (none fails with TD001), and the one problem is said once."""
    model = _deep()
    report = torchdoctor.check(
        model,
        class_batch(),
        lambda out, y: cut(F.cross_entropy(out, y)),
        torch.optim.SGD(model.parameters(), lr=0.1),
    )
    assert report.codes() == {"TD605"}, [f"{f.code} {f.message}" for f in report.findings]
    [found] = report.findings
    assert "cannot be backpropagated" in found.message
    if not isinstance(cut(torch.ones(())), torch.Tensor):
        assert "loss_fn returns a Python float" in found.message


def test_loader_batches_come_from_one_pass() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    inputs, targets = class_batch(size=64)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=16, shuffle=True)
    ctx = CheckContext(classifier(), loader, nn.CrossEntropyLoss())
    first = ctx.raw_batch
    assert ctx.peek_batches(3)[0] is first and len(ctx.peek_batches(10)) == 4
