"""A validation helper that counts examples by hand and averages batch means over them.

`F.mse_loss` returns each batch's mean; dividing the sum of those means by the example
count `seen` (incremented by `targets.size(0)`) underreports the loss by the batch size.
The second helper sums `reduction="sum"` losses and divides by the number of batches,
overreporting it by the same factor.
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
            total += loss.item()
            seen += targets.size(0)
    return total / seen  # expect: TD311


def validate_sum(model: nn.Module, loader: DataLoader) -> float:
    criterion = nn.MSELoss(reduction="sum")
    total = 0.0
    with torch.no_grad():
        for inputs, targets in loader:
            total += float(criterion(model(inputs), targets))
    return total / len(loader)  # expect: TD311


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
