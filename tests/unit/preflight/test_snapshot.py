"""``check`` leaves the user's objects bitwise as it found them, whether it returns or raises."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
numpy = pytest.importorskip("numpy")

from torch import nn  # noqa: E402

import torchdoctor  # noqa: E402
from tests.integration.realistic_models import SETUPS  # noqa: E402
from torchdoctor.errors import UsageError, UserCodeError  # noqa: E402
from torchdoctor.preflight.snapshot import Snapshot, state_differences  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _first_batch(data):
    batch = next(iter(data)) if not isinstance(data, (tuple, list, dict)) else data
    if isinstance(batch, dict):
        return batch["inputs"], batch["labels"]
    return batch


def _trained_once(setup):
    """A setup whose model has .grad and whose optimizer has state, as mid-training."""
    model, data, loss_fn, optimizer = setup()
    inputs, targets = _first_batch(data)
    loss_fn(model(inputs), targets).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    loss_fn(model(inputs), targets).backward()  # grads present when check starts
    return model, data, loss_fn, optimizer


def _seed_everything() -> None:
    torch.manual_seed(123)
    numpy.random.seed(123)
    random.seed(123)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SETUPS))
def test_check_restores_everything(name: str) -> None:
    model, data, loss_fn, optimizer = _trained_once(SETUPS[name])
    _seed_everything()
    before = Snapshot(model, optimizer)
    torchdoctor.check(model, data, loss_fn, optimizer)
    assert state_differences(before, Snapshot(model, optimizer)) == []


def test_eval_mode_frozen_params_and_none_grads_survive() -> None:
    model, data, loss_fn, optimizer = SETUPS["cnn"]()
    for param in model.features[0].parameters():
        param.requires_grad_(False)
    model.eval()
    model.head.train()  # a mixed set of modes
    _seed_everything()
    before = Snapshot(model, optimizer)
    torchdoctor.check(model, data, loss_fn, optimizer)
    after = Snapshot(model, optimizer)
    assert state_differences(before, after) == []
    assert not model.training and model.head.training
    assert all(p.grad is None for p in model.parameters())


def test_grad_tensor_objects_are_the_users() -> None:
    model, data, loss_fn, optimizer = _trained_once(SETUPS["mlp"])
    grads = [p.grad for p in model.parameters()]
    torchdoctor.check(model, data, loss_fn, optimizer)
    assert all(p.grad is g for p, g in zip(model.parameters(), grads, strict=True))


def test_differences_are_detected() -> None:
    """The comparison itself can fail: a changed weight, mode, grad or RNG is seen."""
    model, _, _, optimizer = _trained_once(SETUPS["mlp"])
    before = Snapshot(model, optimizer)
    with torch.no_grad():
        model.net[0].weight[0, 0] += 1
    model.eval()
    next(model.parameters()).grad = None
    torch.rand(1)
    problems = "\n".join(state_differences(before, Snapshot(model, optimizer)))
    for expected in (
        "values differ",
        "training=True then False",
        ".grad differs",
        "torch RNG state differs",
    ):
        assert expected in problems


class _Explodes(nn.Module):
    """Raises from its forward on the first call, after touching BatchNorm statistics."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.linear = nn.Linear(4, 2)
        self.error = error

    def forward(self, x):
        self.norm(x)
        raise self.error


@pytest.mark.parametrize(
    "error, expected",
    [
        (ValueError("broken forward"), UserCodeError),
        (MemoryError(), UserCodeError),
        (KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_state_is_restored_when_check_raises(error, expected) -> None:
    model = _Explodes(error)
    optimizer = torch.optim.Adam(model.parameters())
    model.eval()
    batch = (torch.randn(8, 4) * 3 + 1, torch.randint(0, 2, (8,)))
    before = Snapshot(model, optimizer)
    with pytest.raises(expected):
        torchdoctor.check(model, batch, nn.CrossEntropyLoss(), optimizer)
    assert state_differences(before, Snapshot(model, optimizer)) == []


def test_memory_error_message_says_out_of_memory() -> None:
    model = _Explodes(MemoryError())
    with pytest.raises(UserCodeError, match="ran out of memory"):
        torchdoctor.check(
            model, (torch.randn(8, 4), torch.randint(0, 2, (8,))), nn.CrossEntropyLoss()
        )


def test_a_lazy_module_not_yet_materialised_is_a_clear_usage_error() -> None:
    """Its parameters have no shape to save or copy; the user's model stays lazy."""
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.Linear(8, 2))
    with pytest.raises(
        UsageError,
        match=r"`0.weight` is an uninitialised parameter.*"
        r"run one forward first",
    ):
        torchdoctor.check(
            model, (torch.randn(8, 4), torch.randint(0, 2, (8,))), nn.CrossEntropyLoss()
        )
    assert isinstance(model[0], nn.LazyLinear) and model(torch.randn(3, 4)).shape == (3, 2)


class _Annealed(nn.Module):
    """A forward that changes plain attributes: a temperature, a counter, a history list,
    a tensor changed in place, and an attribute it creates."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 3)
        self.temperature = 2.0
        self.calls = 0
        self.history: list[float] = []
        self.ema = torch.zeros(3)

    def forward(self, x):
        self.temperature *= 0.9
        self.calls += 1
        out = self.linear(x) / self.temperature
        self.history.append(float(out.detach().mean()))
        self.ema.mul_(0.5).add_(out.detach().mean(0))
        self.last_input = x
        return out


class _CountingLoss(nn.Module):
    """A loss module without tensors whose calls change an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, output, target):
        self.calls += 1
        return nn.functional.cross_entropy(output, target)


def test_plain_attributes_that_a_forward_changes_are_put_back() -> None:
    model, loss = _Annealed(), _CountingLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = (torch.randn(16, 4), torch.arange(16) % 3)
    history, ema = model.history, model.ema
    before = Snapshot(nn.ModuleList([model, loss]), optimizer)
    torchdoctor.check(model, batch, loss, optimizer)
    assert model.temperature == 2.0 and model.calls == 0 and loss.calls == 0
    assert model.history is history and history == []
    assert model.ema is ema and torch.equal(ema, torch.zeros(3))
    assert not hasattr(model, "last_input")
    assert state_differences(before, Snapshot(nn.ModuleList([model, loss]), optimizer)) == []


def test_attribute_differences_are_detected() -> None:
    model = _Annealed()
    before = Snapshot(model)
    model(torch.randn(2, 4))
    problems = "\n".join(state_differences(before, Snapshot(model)))
    for expected in (
        "_Annealed.temperature: 2.0 then 1.8",
        "_Annealed.calls: 0 then 1",
        "_Annealed.history: contents differ",
        "_Annealed.ema: contents differ",
        "_Annealed.last_input added",
    ):
        assert expected in problems, problems
