"""An evaluation pass over a drop_last=True loader that leaves examples out (TD415)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import torchdoctor  # noqa: E402

BATCH = 8


def split(size: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(size)
    x = torch.randn(size, 4, generator=generator)
    return TensorDataset(x, (x[:, 0] > 0).long())


def fit(model: nn.Module, optimizer: Any, loader: DataLoader) -> None:
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate_no_grad(model: nn.Module, loader: DataLoader) -> None:
    with torch.no_grad():
        for x, _ in loader:
            model(x)


class Trainer:  # evaluation in a method, the model in eval mode and gradients left on
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def _score(self, batch: Any) -> None:
        self.model(batch[0]).detach()

    def validate(self, loader: DataLoader) -> None:
        self.model.eval()
        for batch in loader:
            self._score(batch)
        self.model.train()


def evaluate_by_callback(model: nn.Module, loader: DataLoader) -> None:
    on_batch = lambda batch: model(batch[0])  # noqa: E731
    with torch.inference_mode():
        iterator = iter(loader)
        for _ in range(len(loader)):
            on_batch(next(iterator))
        next(iterator, None)


EVALUATIONS = {
    "no_grad": evaluate_no_grad,
    "trainer": lambda model, loader: Trainer(model).validate(loader),
    "callback": evaluate_by_callback,
}


def run(evaluate: Any, eval_size: int, drop_last: bool, epochs: int = 2) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(split(100), BATCH, shuffle=True, drop_last=True)
    eval_loader = DataLoader(split(eval_size), BATCH, drop_last=drop_last)
    with torchdoctor.watch() as session:
        for _ in range(epochs):
            fit(model, optimizer, train_loader)
            evaluate(model, eval_loader)
    return session.report


@pytest.mark.parametrize("shape", sorted(EVALUATIONS))
def test_an_evaluation_that_drops_its_last_batch_is_found_once(shape: str) -> None:
    report = run(EVALUATIONS[shape], eval_size=45, drop_last=True)
    [found] = report.by_code("TD415")
    assert found.evidence == {"batches": 5, "batch_size": BATCH, "dropped": 5, "examples": 45}
    assert found.location.line is not None


@pytest.mark.parametrize("shape", sorted(EVALUATIONS))
def test_evaluations_that_read_every_example_are_quiet(shape: str) -> None:
    assert "TD415" not in run(EVALUATIONS[shape], eval_size=45, drop_last=False).codes()
    assert "TD415" not in run(EVALUATIONS[shape], eval_size=48, drop_last=True).codes()


def test_training_passes_and_passes_cut_short_are_not_judged() -> None:
    def first_batches(model: nn.Module, loader: DataLoader) -> None:
        with torch.no_grad():
            for index, (x, _) in enumerate(loader):
                model(x)
                if index == 1:
                    break  # a quick look at two batches, on purpose

    def train_in_eval_mode(model: nn.Module, loader: DataLoader) -> None:
        model.eval()  # another bug (TD502), but these passes step: not an evaluation
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
        model.train()

    assert "TD415" not in run(first_batches, eval_size=45, drop_last=True).codes()
    assert "TD415" not in run(train_in_eval_mode, eval_size=45, drop_last=True).codes()
