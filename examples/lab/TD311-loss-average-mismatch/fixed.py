"""Evaluation that sums per-batch totals and divides by the number of examples.

The loss is built with `reduction="sum"`, so the loop adds up every example's loss and the
division by `len(loader.dataset)` gives the true average.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_split(size: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(size, 10, generator=generator)
    return TensorDataset(inputs, (inputs[:, 0] > 0).long())


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    criterion = nn.CrossEntropyLoss(reduction="sum")
    test_loss = 0.0
    model.eval()
    with torch.no_grad():
        for inputs, labels in loader:
            test_loss += criterion(model(inputs), labels).item()
    test_loss /= len(loader.dataset)
    return test_loss


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_loader = DataLoader(make_split(2048, seed=1), batch_size=64, shuffle=True)
    for _ in range(2):
        model.train()
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
    test_loader = DataLoader(make_split(1024, seed=2), batch_size=256)
    print(f"test loss {evaluate(model, test_loader):.5f}")


if __name__ == "__main__":
    main()
