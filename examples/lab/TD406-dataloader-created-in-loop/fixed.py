"""Regression training with one worker-backed DataLoader built before the epoch loop."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 10


def make_dataset(size: int = 256) -> TensorDataset:
    inputs = torch.randn(size, FEATURES)
    targets = inputs.pow(2).sum(dim=1, keepdim=True)
    return TensorDataset(inputs, targets)


def main() -> None:
    torch.manual_seed(0)
    train_set = make_dataset()
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.MSELoss()
    loader = DataLoader(
        train_set, batch_size=32, shuffle=True, num_workers=2, persistent_workers=True
    )
    for epoch in range(3):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
