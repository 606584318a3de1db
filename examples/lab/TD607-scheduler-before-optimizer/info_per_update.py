"""A cosine schedule stepped once per batch, before the optimizer.

The scheduler and the optimizer step once each per batch, the scheduler first: the
schedule runs one update ahead (the first update already uses its second value). Over
a schedule of many updates that is a shift of one step, so this is information, not a
warning; PyTorch still warns once at the first step.
"""

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(256, 8)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    total = 3 * len(loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / total))
    )
    for epoch in range(3):
        for x, y in loader:
            scheduler.step()  # expect[lint]: TD607
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.4f} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
