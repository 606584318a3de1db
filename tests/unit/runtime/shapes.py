"""One training step arranged the three ways real code arranges it: a plain loop, a
trainer class whose step lives in helpers, and a closure given to ``optimizer.step()``.

Runtime invariants must hold whatever the arrangement; tests run each case in all three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import torchdoctor

LossOf = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
SHAPES = ("loop", "trainer", "closure")


class _Trainer:
    def __init__(self, model: torch.nn.Module, loss_of: LossOf, lr: float) -> None:
        self.model, self.loss_of = model, loss_of
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def _compute_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss_of(self.model, x, y)

    def _backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        self._backward(self._compute_loss(x, y))
        self.optimizer.step()


def train(
    shape: str,
    model: torch.nn.Module,
    loss_of: LossOf,
    batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    steps: int = 12,
    lr: float = 0.05,
) -> torchdoctor.Report:
    """Run ``steps`` steps of ``loss_of`` in ``shape`` under the monitor; the report."""
    with torchdoctor.watch() as session:
        if shape == "trainer":
            trainer = _Trainer(model, loss_of, lr)
            for _ in range(steps):
                trainer.train_step(*batch())
        else:
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            for _ in range(steps):
                x, y = batch()
                if shape == "closure":

                    def closure(x: Any = x, y: Any = y) -> torch.Tensor:
                        optimizer.zero_grad()
                        loss = loss_of(model, x, y)
                        loss.backward()
                        return loss

                    optimizer.step(closure)
                else:
                    optimizer.zero_grad()
                    loss_of(model, x, y).backward()
                    optimizer.step()
    return session.report
