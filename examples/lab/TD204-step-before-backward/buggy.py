"""A regression model whose optimizer steps before the backward pass of its batch.

`optimizer.step()` was placed right after `zero_grad()`, so every step applies freshly
cleared gradients: the parameters never move and the loss stays where it started.
"""

import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def train(model: nn.Module, batches: list, optimizer: torch.optim.Optimizer) -> float:
    total = 0.0
    for x, y in batches:
        optimizer.zero_grad()
        optimizer.step()  # expect: TD204
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        total += loss.item()
    return total / len(batches)


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(8)
    x = torch.randn(1024, 8)
    y = torch.tanh(x @ weights / 3)
    batches = [(x[i:i + 64], y[i:i + 64]) for i in range(0, len(x), 64)]
    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(5):
        print(f"epoch {epoch}: mse {train(model, batches, optimizer):.4f}")


if __name__ == "__main__":
    main()
