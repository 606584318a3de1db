"""The same helpers weighting each batch mean by its size, and dividing sums by examples.

Weighted by `targets.size(0)`, the batch means add up to the total loss, and the example
count turns it into the average; the summed losses are divided by the dataset size.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def validate(model: nn.Module, loader: DataLoader) -> float:
    total, seen = 0.0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            loss = F.mse_loss(model(inputs), targets)
            total += loss.item() * targets.size(0)
            seen += targets.size(0)
    return total / seen


def validate_sum(model: nn.Module, loader: DataLoader) -> float:
    criterion = nn.MSELoss(reduction="sum")
    total = 0.0
    with torch.no_grad():
        for inputs, targets in loader:
            total += float(criterion(model(inputs), targets))
    return total / len(loader.dataset)


def main() -> None:
    torch.manual_seed(0)
    inputs = torch.randn(512, 4)
    data = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for batch_inputs, batch_targets in DataLoader(data, batch_size=32, shuffle=True):
        optimizer.zero_grad()
        F.mse_loss(model(batch_inputs), batch_targets).backward()
        optimizer.step()
    loader = DataLoader(data, batch_size=128)
    print(f"validation {validate(model, loader):.5f} / {validate_sum(model, loader):.5f}")


if __name__ == "__main__":
    main()
