"""TD601 for layers replaced mid-run: the new parameters train in no optimizer, while the
optimizer still holds the replaced ones (pruning, a new head, a swapped block).

Three shapes: a plain loop, a trainer class whose pruning lives in a helper, and a callback
that swaps the head between epochs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

import torchdoctor  # noqa: E402

Fix = str  # "none", "rebuild" (a new optimizer), "add_group" (add_param_group)


def net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    x = torch.randn(16, 8)
    optimizer.zero_grad()
    F.cross_entropy(model(x), (x[:, 0] > 0).long()).backward()
    optimizer.step()


def after_swap(
    model: nn.Module, optimizer: torch.optim.Optimizer, fix: Fix
) -> torch.optim.Optimizer:
    if fix == "rebuild":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if fix == "add_group":
        optimizer.add_param_group({"params": list(model[2].parameters())})
    return optimizer


def plain(fix: Fix) -> set[str]:
    model = net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(6):
            step(model, optimizer)
        model[2] = nn.Linear(16, 3)  # a fresh head
        optimizer = after_swap(model, optimizer, fix)
        for _ in range(8):
            step(model, optimizer)
    return session.report.codes()


class Pruner:
    def __init__(self, fix: Fix) -> None:
        self.model = net()
        self.optimizer: torch.optim.Optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.fix = fix

    @torch.no_grad()
    def _prune(self) -> None:
        keep = self.model[0].weight.abs().sum(1).topk(8).indices
        first, last = nn.Linear(8, 8), nn.Linear(8, 3)
        first.weight.copy_(self.model[0].weight[keep])
        first.bias.copy_(self.model[0].bias[keep])
        last.weight.copy_(self.model[2].weight[:, keep])
        last.bias.copy_(self.model[2].bias)
        self.model[0], self.model[2] = first, last

    def run(self) -> None:
        for _ in range(6):
            step(self.model, self.optimizer)
        self._prune()
        if self.fix != "none":
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for _ in range(8):
            step(self.model, self.optimizer)


def trainer(fix: Fix) -> set[str]:
    with torchdoctor.watch(sample_every=1) as session:
        Pruner(fix).run()
    return session.report.codes()


def callbacks(fix: Fix) -> set[str]:
    model = net()
    state = {"optimizer": torch.optim.Adam(model.parameters(), lr=1e-2)}

    def new_head(epoch: int) -> None:
        if epoch == 1:
            model[2] = nn.Linear(16, 3)
            state["optimizer"] = after_swap(model, state["optimizer"], fix)

    on_epoch: list[Callable[[int], None]] = [new_head]
    with torchdoctor.watch(sample_every=1) as session:
        for epoch in range(3):
            for callback in on_epoch:
                callback(epoch)
            for _ in range(5):
                step(model, state["optimizer"])
    return session.report.codes()


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_layer_replaced_after_the_optimizer_was_built_is_found(
    shape: Callable[[Fix], set[str]],
) -> None:
    assert "TD601" in shape("none")


@pytest.mark.parametrize("shape", [plain, trainer, callbacks])
def test_a_new_optimizer_after_the_swap_is_quiet(shape: Callable[[Fix], set[str]]) -> None:
    assert "TD601" not in shape("rebuild")


@pytest.mark.parametrize("shape", [plain, callbacks])
def test_new_parameters_added_to_the_optimizer_are_quiet(
    shape: Callable[[Fix], set[str]],
) -> None:
    assert "TD601" not in shape("add_group")


def test_a_layer_added_in_the_last_steps_is_not_judged() -> None:
    model = net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(8):
            step(model, optimizer)
        model[2] = nn.Linear(16, 3)
        step(model, optimizer)  # one step: too few to say it never moves
    assert "TD601" not in session.report.codes()
