"""TD221 at run time: a module given ``requires_grad = False`` as an attribute still trains.

Written in three shapes: a plain loop, a trainer class that freezes in a helper, and a
callback registry that freezes from outside the loop.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

import torchdoctor  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int = 12) -> None:
    for _ in range(steps):
        x = torch.randn(16, 8)
        optimizer.zero_grad()
        F.cross_entropy(model(x), (x[:, 0] > 0).long()).backward()
        optimizer.step()


def freeze(module: nn.Module, by_attribute: bool) -> None:
    if by_attribute:
        module.requires_grad = False
    else:
        module.requires_grad_(False)


def plain(by_attribute: bool) -> list[str]:
    model = Net()
    with torchdoctor.watch(sample_every=1) as session:
        freeze(model.encoder, by_attribute)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train(model, optimizer)
    return [f.location.object or "" for f in session.report.by_code("TD221")]


class Adapter:
    def __init__(self, by_attribute: bool) -> None:
        self.model = Net()
        self.by_attribute = by_attribute

    def _freeze_classifier(self) -> None:
        freeze(self.model.head, self.by_attribute)

    def _optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.Adam([p for p in self.model.parameters() if p.requires_grad], lr=1e-2)

    def adapt(self) -> None:
        self._freeze_classifier()
        train(self.model, self._optimizer())


def trainer(by_attribute: bool) -> list[str]:
    with torchdoctor.watch(sample_every=1) as session:
        Adapter(by_attribute).adapt()
    return [f.location.object or "" for f in session.report.by_code("TD221")]


def callbacks(by_attribute: bool) -> list[str]:
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    on_epoch: list[Callable[[int], None]] = [
        lambda epoch: freeze(model.encoder, by_attribute) if epoch == 1 else None
    ]
    with torchdoctor.watch(sample_every=1) as session:
        for epoch in range(3):
            for callback in on_epoch:
                callback(epoch)
            train(model, optimizer, steps=6)
    return [f.location.object or "" for f in session.report.by_code("TD221")]


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_module_frozen_by_attribute_that_still_trains_is_found(
    shape: Callable[[bool], list[str]],
) -> None:
    found = shape(True)
    assert len(found) == 1 and found[0].endswith(("encoder", "head"))


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_module_frozen_with_the_method_is_quiet(shape: Callable[[bool], list[str]]) -> None:
    assert shape(False) == []


def test_an_attribute_beside_a_real_freeze_is_quiet() -> None:
    model = Net()
    model.encoder.requires_grad_(False)
    model.encoder.requires_grad = False  # redundant, but the parameters are frozen
    with torchdoctor.watch(sample_every=1) as session:
        train(model, torch.optim.SGD(model.head.parameters(), lr=0.1))
    assert "TD221" not in session.report.codes()


def test_a_class_that_defines_requires_grad_itself_is_quiet() -> None:
    class Flagged(Net):
        requires_grad = False  # a class attribute of the user's own meaning

    model = Flagged()
    with torchdoctor.watch(sample_every=1) as session:
        train(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert "TD221" not in session.report.codes()


def test_an_attribute_set_late_in_a_long_run_is_found_at_its_line() -> None:
    """Set after 300 steps, 5 steps before the end: seen when it is set, not when the
    sparse sampling of a long run happens to look."""
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        train(model, optimizer, steps=300)
        model.head.requires_grad = False
        line = sys._getframe().f_lineno - 1
        train(model, optimizer, steps=5)
    [found] = session.report.by_code("TD221")
    assert found.location.object == "head"
    assert found.location.line == line
    assert found.evidence["parameters_changed"] == 2


def test_watching_assignments_leaves_them_as_they_were() -> None:
    model = Net()
    with torchdoctor.watch() as session:
        model.head.requires_grad = False
        model.encoder.requires_grad = True
        model.head.note = "kept"
        train(model, torch.optim.SGD(model.encoder.parameters(), lr=0.1), steps=3)
    assert (model.head.requires_grad, model.encoder.requires_grad) == (False, True)
    assert model.head.note == "kept"
    assert torch.nn.Module.__setattr__.__name__ == "__setattr__"
    assert "TD221" in session.report.codes()  # the head still got gradients
