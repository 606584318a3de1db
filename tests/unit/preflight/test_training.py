"""The one way ``check`` copies the user's objects (:func:`copy_for_training`), and the
probes that rely on it: nothing the user holds is shared with a copy or moved by it."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils import parametrizations, parametrize, prune  # noqa: E402

import torchdoctor  # noqa: E402
from tests.unit.preflight.helpers import class_batch, classifier  # noqa: E402
from torchdoctor.preflight.context import CheckContext  # noqa: E402
from torchdoctor.preflight.snapshot import Snapshot, state_differences  # noqa: E402
from torchdoctor.preflight.training import copy_for_training, train_step  # noqa: E402

pytestmark = pytest.mark.needs_torch


class Gated(nn.Module):
    """A layer behind a ReZero-style gate that starts at zero, plus a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inner = nn.Linear(8, 8)
        self.gate = nn.Parameter(torch.zeros(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(x + self.gate * torch.relu(self.inner(x)))


def _pruned() -> nn.Module:
    model = Gated()
    prune.l1_unstructured(model.inner, "weight", amount=0.3)
    return model


def _weight_normed() -> nn.Module:
    model = Gated()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the old API is deprecated, and still in use
        model.inner = nn.utils.weight_norm(model.inner)
    return model


def _parametrized(apply) -> Any:
    def make() -> nn.Module:
        model = Gated()
        apply(model.inner)
        return model

    return make


def _symmetric(module: nn.Module) -> None:
    class Symmetric(nn.Module):
        def forward(self, weight):
            return weight.triu() + weight.triu(1).T

    parametrize.register_parametrization(module, "weight", Symmetric())


COMPUTED_WEIGHTS = {
    "pruned": _pruned,
    "weight_norm": _weight_normed,
    "parametrized-weight_norm": _parametrized(parametrizations.weight_norm),
    "spectral_norm": _parametrized(parametrizations.spectral_norm),
    "orthogonal": _parametrized(parametrizations.orthogonal),
    "custom-parametrization": _parametrized(_symmetric),
}


def _tensors(optimizer) -> list:
    return [p for group in optimizer.param_groups for p in group["params"]]


def test_there_is_one_way_to_copy() -> None:
    """Probes copy through `copy_for_training` only; the context offers no other copy."""
    assert not [name for name in vars(CheckContext) if name.startswith("copy")]


def test_the_optimizer_copy_holds_no_tensor_of_the_users() -> None:
    model = classifier()
    temperature = nn.Parameter(torch.ones(()))  # trained, but not part of the model
    optimizer = torch.optim.SGD([*model.parameters(), temperature], lr=0.5, momentum=0.9)
    ctx = CheckContext(
        model, class_batch(), lambda out, y: F.cross_entropy(out / temperature, y), optimizer
    )
    training = copy_for_training(ctx)
    users = {id(t) for t in (*model.parameters(), temperature)}
    assert not users & {id(t) for t in _tensors(training.optimizer)}
    copied = dict(zip(model.parameters(), training.model.parameters(), strict=True))
    assert _tensors(training.optimizer)[:4] == list(copied.values())
    before = temperature.detach().clone()
    for tensor in _tensors(training.optimizer):
        tensor.grad = torch.ones_like(tensor)
    training.optimizer.step()
    assert torch.equal(temperature.detach(), before) and temperature.grad is None


def test_a_tensor_trained_outside_the_model_is_left_as_found() -> None:
    """The shared pass backpropagates into it: its `.grad` is put back too."""
    model = classifier()
    temperature = nn.Parameter(torch.full((), 2.0))
    optimizer = torch.optim.Adam([*model.parameters(), temperature], lr=1e-2)
    torchdoctor.check(
        model, class_batch(), lambda out, y: F.cross_entropy(out / temperature, y), optimizer
    )
    assert temperature.grad is None and float(temperature.detach()) == 2.0
    assert optimizer.state == {} or not any(optimizer.state.values())


def test_a_scheduled_optimizer_steps_the_copy_not_the_users() -> None:
    """A scheduler wraps the user's `optimizer.step`; the copy must step itself."""
    model = classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    ctx = CheckContext(model, class_batch(), nn.CrossEntropyLoss(), optimizer)
    training = copy_for_training(ctx)
    before = [p.detach().clone() for p in model.parameters()]
    train_step(training, ctx.batch, 0)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert not all(
        torch.equal(p, b) for p, b in zip(training.model.parameters(), before, strict=True)
    )


@pytest.mark.parametrize("make", COMPUTED_WEIGHTS.values(), ids=COMPUTED_WEIGHTS.keys())
def test_models_with_computed_weights_are_copied(make) -> None:
    model = make()
    ctx = CheckContext(model, class_batch(), nn.CrossEntropyLoss())
    training = copy_for_training(ctx)
    train_step(training, ctx.batch, 0)
    assert all(p.grad is None for p in model.parameters())
    assert not {id(p) for p in model.parameters()} & {id(p) for p in training.model.parameters()}


@pytest.mark.parametrize("make", COMPUTED_WEIGHTS.values(), ids=COMPUTED_WEIGHTS.keys())
def test_a_zero_gate_in_a_model_with_computed_weights_is_quiet(make) -> None:
    """The zero-initialisation experiment runs on a copy; copying must not fail on these
    models, or the gate's blocked gradient would be reported as a bug (TD211). The whole
    check runs (no TD001) and leaves the model as it was."""
    model = make()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = Snapshot(model, optimizer)
    report = torchdoctor.check(model, class_batch(), nn.CrossEntropyLoss(), optimizer)
    assert not report.codes(), [f"{f.code} {f.message}" for f in report.findings]
    assert state_differences(before, Snapshot(model, optimizer)) == []


def test_the_device_simulation_copies_pruned_models_too() -> None:
    """The meta-device copy behind TD101 is made the same way: a pruned model whose forward
    creates a CPU tensor is still checked."""

    class Stray(Gated):
        def forward(self, x):
            return super().forward(x) + torch.ones(x.shape[0], 4)  # no device=

    model = Stray()
    prune.l1_unstructured(model.inner, "weight", amount=0.3)
    report = torchdoctor.check(model, class_batch(), nn.CrossEntropyLoss(), select=["TD101"])
    assert report.codes() == {"TD101"}
