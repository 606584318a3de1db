"""Two evaluations whose eval() lint reads in other spellings.

An attack sets `model = self.model; model.eval()` before calling the method that
evaluates `self.model` under no_grad: the alias is the same module. A script calls the
model's own `test()` (defined by its library base class, which calls `self.eval()`)
before its no_grad loop.
"""

import torch
from torch import nn

from gnnlib import Trainable  # provides fit() and test(), which calls self.eval()


class GCN(nn.Module, Trainable):
    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        self.layer = nn.Linear(features, hidden)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.layer(x))


class Attack:
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def attack(self, x: torch.Tensor) -> torch.Tensor:
        model = self.model
        model.eval()
        return self.sample_final(x)

    def sample_final(self, x: torch.Tensor) -> torch.Tensor:
        best = x
        for _ in range(5):
            with torch.no_grad():
                best = self.model(x + 0.01 * torch.randn_like(x))
        return best


def evaluate(data, batches: list[torch.Tensor]) -> None:
    model = GCN(4, 8)
    model.fit(data)
    model.test()
    with torch.no_grad():
        for x in batches:
            print(model(x).argmax(1))
