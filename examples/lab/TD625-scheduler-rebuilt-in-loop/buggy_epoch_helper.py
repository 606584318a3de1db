"""A training helper that builds its own plateau scheduler on the optimizer it is given.

`train_epoch()` runs once per epoch, and each call makes a new `ReduceLROnPlateau`: the
new one has no memory of the best loss or of how many epochs passed without progress, so
it never lowers the rate, however long the loss stalls.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import ReduceLROnPlateau


def train_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, data: torch.Tensor) -> float:
    scheduler = ReduceLROnPlateau(optimizer, patience=1, factor=0.5)  # expect: TD625
    total = 0.0
    for rows in data.split(32):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(rows), rows.sum(1, keepdim=True).sin())
        loss.backward()
        optimizer.step()
        total += loss.item()
    scheduler.step(total)
    return total


def main() -> None:
    torch.manual_seed(0)
    data = torch.randn(256, 6)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(20):
        total = train_epoch(model, optimizer, data)
        print(f"epoch {epoch}: loss {total:.3f}, lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
