"""A small tabular model trained for many short epochs from a loader with two workers.

The loader's workers are not persistent, so every `for batch in loader:` starts two new
worker processes, which fork the training process and rebuild their state before the
first batch arrives. The whole epoch's loading takes a few milliseconds; the restart takes
far longer, every epoch.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 12


def make_dataset(size: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(size, FEATURES, generator=generator)
    weights = torch.randn(FEATURES, 1, generator=generator)
    targets = inputs @ weights + 0.1 * torch.randn(size, 1, generator=generator)
    return TensorDataset(inputs, targets)


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
    loader = DataLoader(make_dataset(), batch_size=64, shuffle=True, num_workers=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, loader, nn.MSELoss(), optimizer


def main() -> None:
    model, loader, criterion, optimizer = make()
    for epoch in range(5):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
