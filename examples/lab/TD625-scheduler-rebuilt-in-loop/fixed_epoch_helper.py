"""The plateau scheduler built once by the caller and handed to the helper every epoch."""

import torch
from torch import nn
from torch.optim.lr_scheduler import ReduceLROnPlateau


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: ReduceLROnPlateau,
    data: torch.Tensor,
) -> float:
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
    scheduler = ReduceLROnPlateau(optimizer, patience=1, factor=0.5)
    for epoch in range(20):
        total = train_epoch(model, optimizer, scheduler, data)
        print(f"epoch {epoch}: loss {total:.3f}, lr {optimizer.param_groups[0]['lr']:.4f}")


if __name__ == "__main__":
    main()
